#!/usr/bin/env python3
"""Group coordinator load test over the wire.

    python bench/groups_load.py [--members 100] [--seconds 5] [--rounds 3]

Starts ``kfast serve`` as a subprocess (loopback, temporary data dir,
group.initial.rebalance.delay.ms=0, stopped by PID) and drives it with
kfast.client.connection.BrokerConnection, one connection per member:

* join-to-Stable: N members (KIP-394 member id round trip, JoinGroup v5,
  SyncGroup v3; the leader assigns) started at once; the time until every
  member has synced in the same, final generation. Members that see
  REBALANCE_IN_PROGRESS rejoin, as real clients do.
* heartbeats/s: every member heartbeats back to back (8 in flight per
  connection) for ``--seconds``; the peer in the same run is ApiVersions v0
  on the same connections at the same depth (a request that touches no
  state). The Python load generator shares the machine, so the rates are
  partly client-bound; the broker's CPU time per request (utime + stime of
  the broker process from /proc/<pid>/stat) is the figure to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kfast.client.connection import BrokerConnection
from kfast.protocol import api_keys, errors
from kfast.testing.ports import free_port

JOIN, SYNC, HEARTBEAT = (api_keys.BY_NAME[n].key for n in ("JoinGroup", "SyncGroup", "Heartbeat"))
API_VERSIONS = api_keys.BY_NAME["ApiVersions"].key
REBALANCING = errors.RebalanceInProgressException.code
MEMBER_ID_REQUIRED = errors.MemberIdRequiredException.code


def start_broker(data_dir: str, port: int) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "kfast",
        "serve",
        "--override",
        f"listeners=PLAINTEXT://127.0.0.1:{port}",
        "--override",
        f"log.dirs={data_dir}",
        "--override",
        "group.initial.rebalance.delay.ms=0",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("kfast serve did not start")


class Member:
    def __init__(self, connection: BrokerConnection, group: str):
        self.connection = connection
        self.group = group
        self.member_id = ""
        self.generation = -1
        self.synced_generation = -1

    async def join_and_sync(self, stop: asyncio.Event, synced: asyncio.Event, members) -> None:
        while not stop.is_set():
            join = await self.connection.send(
                {
                    "group_id": self.group,
                    "session_timeout_ms": 30000,
                    "rebalance_timeout_ms": 20000,
                    "member_id": self.member_id,
                    "group_instance_id": None,
                    "protocol_type": "consumer",
                    "protocols": [{"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x00"}],
                },
                api_key=JOIN,
                version=5,
            )
            if join.error_code == MEMBER_ID_REQUIRED:
                self.member_id = join.member_id
                continue
            if join.error_code:
                raise errors.for_code(join.error_code)()
            self.generation = join.generation_id
            assignments = [{"member_id": m.member_id, "assignment": b"a"} for m in join.members]
            sync = await self.connection.send(
                {
                    "group_id": self.group,
                    "generation_id": self.generation,
                    "member_id": self.member_id,
                    "group_instance_id": None,
                    "assignments": assignments,
                },
                api_key=SYNC,
                version=3,
            )
            if sync.error_code == REBALANCING:
                continue
            if sync.error_code:
                raise errors.for_code(sync.error_code)()
            self.synced_generation = self.generation
            if all(m.synced_generation == self.generation for m in members):
                synced.set()
            # Heartbeat until the group rebalances again or the run ends.
            while not stop.is_set():
                beat = await self.connection.send(
                    {
                        "group_id": self.group,
                        "generation_id": self.generation,
                        "member_id": self.member_id,
                        "group_instance_id": None,
                    },
                    api_key=HEARTBEAT,
                    version=3,
                )
                if beat.error_code == REBALANCING:
                    self.synced_generation = -1
                    break
                try:
                    await asyncio.wait_for(stop.wait(), 0.5)
                except TimeoutError:
                    pass


async def pipelined(connections, make_request, seconds: float, depth: int = 8) -> float:
    """Requests per second, ``depth`` in flight per connection."""
    deadline = time.perf_counter() + seconds
    count = 0

    async def worker(connection, make):
        nonlocal count
        while time.perf_counter() < deadline:
            await asyncio.gather(*(make(connection) for _ in range(depth)))
            count += depth

    began = time.perf_counter()
    await asyncio.gather(*(worker(c, make_request(i)) for i, c in enumerate(connections)))
    return count / (time.perf_counter() - began)


CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


async def measured(pid, connections, make_request, seconds):
    """(requests/s, broker CPU microseconds per request)."""
    before = cpu_seconds(pid)
    began = time.perf_counter()
    rate = await pipelined(connections, make_request, seconds)
    count = rate * (time.perf_counter() - began)
    return rate, (cpu_seconds(pid) - before) / count * 1e6


async def run_round(port: int, pid: int, n: int, seconds: float, round_no: int) -> dict:
    connections = await asyncio.gather(
        *(BrokerConnection.open("127.0.0.1", port) for _ in range(n))
    )
    group = f"bench-{round_no}-{time.time_ns()}"
    # Create __consumer_offsets outside the measurement.
    await connections[0].send(
        {"key": group, "key_type": 0}, api_key=api_keys.BY_NAME["FindCoordinator"].key, version=3
    )
    members = [Member(c, group) for c in connections]
    stop, synced = asyncio.Event(), asyncio.Event()
    began = time.perf_counter()
    tasks = [asyncio.ensure_future(m.join_and_sync(stop, synced, members)) for m in members]
    await asyncio.wait_for(synced.wait(), 120)
    join_s = time.perf_counter() - began
    generation = members[0].synced_generation
    stop.set()
    await asyncio.gather(*tasks)

    def heartbeat(i):
        member = members[i]
        body = {
            "group_id": group,
            "generation_id": member.generation,
            "member_id": member.member_id,
            "group_instance_id": None,
        }

        async def send(connection):
            response = await connection.send(body, api_key=HEARTBEAT, version=3)
            assert response.error_code == 0, response

        return send

    def api_versions(i):
        async def send(connection):
            await connection.send({}, api_key=API_VERSIONS, version=0)

        return send

    heartbeats, heartbeat_us = await measured(pid, connections, heartbeat, seconds)
    baseline, baseline_us = await measured(pid, connections, api_versions, seconds)
    await asyncio.gather(*(c.close() for c in connections))
    return {
        "join_s": join_s,
        "generation": generation,
        "heartbeats": heartbeats,
        "heartbeat_us": heartbeat_us,
        "api_versions": baseline,
        "api_versions_us": baseline_us,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    data_dir = tempfile.mkdtemp(prefix="kfast-groups-bench-")
    port = free_port()
    proc = start_broker(data_dir, port)
    try:
        results = [
            asyncio.run(run_round(port, proc.pid, args.members, args.seconds, r))
            for r in range(args.rounds)
        ]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(data_dir, ignore_errors=True)
    for r in results:
        print(
            f"join+sync of {args.members} members to Stable: {r['join_s'] * 1000:.0f} ms "
            f"(final generation {r['generation']}); heartbeats/s {r['heartbeats']:,.0f} "
            f"({r['heartbeat_us']:.0f} us broker CPU each); ApiVersions v0/s "
            f"{r['api_versions']:,.0f} ({r['api_versions_us']:.0f} us each)"
        )
    best = min(results, key=lambda r: r["join_s"])
    top = max(results, key=lambda r: r["heartbeats"])
    cheapest = min(results, key=lambda r: r["heartbeat_us"])
    print(
        f"best: join {best['join_s'] * 1000:.0f} ms, heartbeats/s {top['heartbeats']:,.0f} "
        f"(ApiVersions/s {top['api_versions']:,.0f}); broker CPU per heartbeat "
        f"{cheapest['heartbeat_us']:.0f} us vs ApiVersions {cheapest['api_versions_us']:.0f} us"
    )


if __name__ == "__main__":
    main()
