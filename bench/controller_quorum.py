#!/usr/bin/env python3
"""Controller quorum: failover time and metadata commit latency (issue 16).

    python3 bench/controller_quorum.py [--trials 50] [--partition-trials 10]
                                       [--writes 2000] [--writers 8]
                                       [--concurrent-writes 2000] [--json out.json]

Real ``kfast serve`` processes in the controller role on 127.0.0.1
(kfast.testing.cluster.KfastCluster: each node its own process, data dir
and port; the voters reach each other through FaultProxy links). A metadata
write is an IncrementalAlterConfigs of a cluster-wide broker default
(``log.retention.ms``, a new value every time) sent to the active
controller: one ConfigRecord, one Raft batch, answered once it is committed.

failover (--trials, 3 voters)
    kill -9 of the active controller -> the first write a survivor accepts
    (error 0, i.e. committed by the new active controller). The survivors
    are polled with a write every --poll-ms over connections opened before
    the kill. Between trials the killed node is restarted and every voter
    must have caught up (DescribeQuorum on the leader: log end offset >=
    high watermark), so each trial starts from a full quorum.

partition (--partition-trials, same cluster)
    the same, but the leader's links drop every byte (``isolate(leader,
    DROP)``: no resets, so the followers learn of the loss only from the
    fetch timeout). Also timed: when the cut-off leader stops answering
    DescribeQuorum as leader (check quorum). Healed between trials, and the
    old leader must catch up.

commit latency (--writes, --writers x --concurrent-writes)
    sequential writes on one connection to the active controller (each
    round trip: leader append + fsync, follower fetch + append + fsync,
    high watermark, answer) on three clusters up side by side, in
    interleaved blocks so all see the same background load:
      3 voters (FaultProxy links, the cluster the failovers ran on),
      3 voters with direct links (no proxy: the proxy hops run on this
        process's threads and cost Python time per hop),
      1 voter (the baseline: the same code with no follower to wait for).
    Then --writers connections writing at once, --concurrent-writes in all.
    The disk's floor in the same blocks: a 99-byte append + fsync on the
    clusters' filesystem.

There is no peer that runs a KRaft controller quorum without a JVM on this
machine (Tansu has no Raft); bench/README.md compares the failover figures
with Kafka's documented timeouts instead.

Bounded: --trials + --partition-trials failovers, --writes + --concurrent-
writes per cluster, and --max-seconds for the whole run (trials stop early
and say so); loopback only. Every process and directory is removed by the
clusters' context managers. A trial that does not recover within
--recovery-timeout stops the run with the nodes' log tails.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import subprocess
import sys
import time

import kfast
from kfast.client.connection import BlockingConnection, BrokerConnection
from kfast.protocol import IncrementalAlterConfigsRequest, errors
from kfast.protocol.constants import CONFIG_RESOURCE_BROKER
from kfast.testing.cluster import DROP, KfastCluster

CONFIG_NAME = "log.retention.ms"
NOT_CONTROLLER = errors.NotControllerException.code


class TrialFailed(RuntimeError):
    """The quorum did not recover; the message carries the nodes' logs."""


class DirectLinkCluster(KfastCluster):
    """Voters that reach each other on their own ports, not through the
    FaultProxy links (which run on this process's threads): the latency
    of the quorum without the proxy hops. isolate() has no effect on it."""

    def _write_config(self, node) -> None:
        self.overrides["controller.quorum.voters"] = ",".join(
            f"{other}@127.0.0.1:{self.nodes[other].port}" for other in sorted(self.nodes)
        )
        super()._write_config(node)


# -- requests ---------------------------------------------------------------------------------
_values = iter(range(3_600_000, 1 << 62))


def config_write() -> IncrementalAlterConfigsRequest:
    """A write that always changes the value, so it always makes a record."""
    Request = IncrementalAlterConfigsRequest
    return Request(
        resources=[
            Request.AlterConfigsResource(
                resource_type=CONFIG_RESOURCE_BROKER,
                resource_name="",
                configs=[
                    Request.AlterableConfig(
                        name=CONFIG_NAME, config_operation=0, value=str(next(_values))
                    )
                ],
            )
        ]
    )


class Writer:
    """One connection to one node; reconnects after a failure."""

    def __init__(self, cluster: KfastCluster, node_id: int, timeout: float):
        self.cluster, self.node_id, self.timeout = cluster, node_id, timeout
        self.connection: BlockingConnection | None = None

    def write(self) -> int | None:
        """The answer's error code; None when the node did not answer."""
        try:
            if self.connection is None:
                self.connection = self.cluster.connect(self.node_id, request_timeout=self.timeout)
            return self.connection.send(config_write()).responses[0].error_code
        except Exception:
            self.close()
            return None

    def close(self) -> None:
        if self.connection is not None:
            with contextlib.suppress(Exception):
                self.connection.close()
            self.connection = None


# -- figures ----------------------------------------------------------------------------------
def percentile(sorted_samples: list[float], fraction: float) -> float:
    """Nearest rank: the smallest sample with at least ``fraction`` of the
    samples at or below it."""
    rank = max(1, math.ceil(fraction * len(sorted_samples) - 1e-9))
    return sorted_samples[min(rank, len(sorted_samples)) - 1]


def summary(samples: list[float]) -> dict:
    if not samples:
        return {"n": 0}
    s = sorted(samples)
    return {
        "n": len(s),
        "min": s[0],
        "p50": percentile(s, 0.50),
        "p90": percentile(s, 0.90),
        "p99": percentile(s, 0.99),
        "max": s[-1],
        "mean": sum(s) / len(s),
    }


def ms(summary_: dict, keys=("min", "p50", "p90", "p99", "max")) -> str:
    if not summary_.get("n"):
        return "no samples"
    return " / ".join(f"{summary_[k] * 1000:.1f}" for k in keys) + f" ms (n={summary_['n']})"


def logs(cluster: KfastCluster) -> str:
    return "\n".join(f"--- node {n} ---\n{cluster.log_tail(n)}" for n in cluster.nodes)


# -- the quorum -------------------------------------------------------------------------------
def caught_up(cluster: KfastCluster, leader: int) -> bool:
    state = cluster.describe_quorum(leader)
    if state is None:
        return False
    ends = {v.replica_id: v.log_end_offset for v in state.current_voters}
    return all(ends.get(n, -1) >= state.high_watermark for n in cluster.nodes)


def settle(cluster: KfastCluster, timeout: float, exclude=()) -> int:
    """Wait for an active controller (it took a write) with every voter
    caught up; its node id."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        leader = cluster.leader(exclude)
        if leader is not None:
            writer = Writer(cluster, leader, 5.0)
            accepted = writer.write() == 0
            writer.close()
            if accepted and caught_up(cluster, leader):
                return leader
        time.sleep(0.05)
    raise TrialFailed(f"no settled quorum within {timeout} s\n{logs(cluster)}")


def failover_trial(cluster: KfastCluster, mode: str, args) -> dict:
    """One fault of the active controller and the time until a survivor
    commits a write. ``mode``: "kill" (kill -9) or "partition" (DROP)."""
    leader = settle(cluster, args.recovery_timeout)
    epoch = cluster.describe_quorum(leader).leader_epoch
    survivors = [n for n in cluster.nodes if n != leader]
    writers = [Writer(cluster, n, args.recovery_timeout) for n in survivors]
    for writer in writers:  # connected before the fault
        if writer.write() != NOT_CONTROLLER:
            raise TrialFailed(f"follower {writer.node_id} did not answer NOT_CONTROLLER")
    began = time.perf_counter()
    if mode == "kill":
        cluster.kill(leader)
    else:
        cluster.isolate(leader, DROP)
    deadline = time.monotonic() + args.recovery_timeout
    new_leader = None
    attempts = 0
    while new_leader is None:
        for writer in writers:
            attempts += 1
            if writer.write() == 0:
                new_leader = writer.node_id
                break
        else:
            if time.monotonic() > deadline:
                raise TrialFailed(
                    f"{mode} of node {leader}: no write committed within "
                    f"{args.recovery_timeout} s\n{logs(cluster)}"
                )
            time.sleep(args.poll_ms / 1000)
    failover = time.perf_counter() - began
    for writer in writers:
        writer.close()
    state = cluster.describe_quorum(new_leader)
    trial = {
        "mode": mode,
        "old_leader": leader,
        "new_leader": new_leader,
        "failover_s": failover,
        "epochs": state.leader_epoch - epoch if state else None,
        "poll_writes": attempts,
    }
    if mode == "partition":
        # The cut-off leader keeps its role until check quorum resigns it.
        while cluster.describe_quorum(leader, timeout=1.0) is not None:
            if time.monotonic() > deadline:
                raise TrialFailed(f"cut-off leader {leader} never resigned\n{logs(cluster)}")
            time.sleep(0.02)
        trial["old_leader_resigned_s"] = time.perf_counter() - began
        cluster.heal()
    else:
        cluster.start_node(leader)
        cluster.wait_listening(leader)
    rejoin = time.perf_counter()
    try:
        cluster.wait_until(
            lambda: caught_up(cluster, new_leader),
            args.recovery_timeout,
            f"node {leader} caught up with {new_leader}",
        )
    except TimeoutError as exc:
        raise TrialFailed(str(exc)) from None
    trial["rejoin_caught_up_s"] = time.perf_counter() - rejoin
    return trial


def run_failovers(cluster: KfastCluster, mode: str, count: int, args, stop_at: float) -> dict:
    trials = []
    for index in range(count):
        if time.monotonic() > stop_at:
            print(f"  {mode}: stopped after {index} trials (--max-seconds)", flush=True)
            break
        trial = failover_trial(cluster, mode, args)
        trials.append(trial)
        extra = (
            f", old leader resigned at {trial['old_leader_resigned_s'] * 1000:.0f} ms"
            if mode == "partition"
            else ""
        )
        print(
            f"  {mode} {index + 1}/{count}: node {trial['old_leader']} -> "
            f"{trial['new_leader']} in {trial['failover_s'] * 1000:.1f} ms "
            f"(+{trial['epochs']} epoch){extra}, caught up "
            f"{trial['rejoin_caught_up_s']:.2f} s later",
            flush=True,
        )
    return {"trials": trials, "failover": summary([t["failover_s"] for t in trials])}


# -- commit latency ----------------------------------------------------------------------------
def sequential_block(cluster: KfastCluster, leader: int, writes: int) -> tuple[list[float], float]:
    """``writes`` writes one after another on one connection: each latency
    and the block's wall time."""
    latencies = []
    with cluster.connect(leader, request_timeout=30) as connection:
        began = time.perf_counter()
        for _ in range(writes):
            sent = time.perf_counter()
            code = connection.send(config_write()).responses[0].error_code
            latencies.append(time.perf_counter() - sent)
            if code:
                raise TrialFailed(f"write on node {leader} failed with {code}\n{logs(cluster)}")
        return latencies, time.perf_counter() - began


async def _concurrent(port: int, writers: int, writes: int) -> tuple[list[float], float]:
    connections = [
        await BrokerConnection.open("127.0.0.1", port, request_timeout=30) for _ in range(writers)
    ]
    remaining = [writes]
    latencies: list[float] = []
    failures: list[int] = []

    async def writer(connection):
        while remaining[0] > 0:
            remaining[0] -= 1
            sent = time.perf_counter()
            response = await connection.send(config_write())
            latencies.append(time.perf_counter() - sent)
            if response.responses[0].error_code:
                failures.append(response.responses[0].error_code)

    try:
        began = time.perf_counter()
        await asyncio.gather(*(writer(c) for c in connections))
        wall = time.perf_counter() - began
    finally:
        for connection in connections:
            await connection.close()
    if failures:
        raise TrialFailed(f"{len(failures)} concurrent writes failed: {failures[:5]}")
    return latencies, wall


def concurrent_block(
    cluster: KfastCluster, leader: int, writers: int, writes: int
) -> tuple[list[float], float]:
    return asyncio.run(_concurrent(cluster.nodes[leader].port, writers, writes))


def fsync_block(directory: str, count: int) -> list[float]:
    """The disk's floor: ``count`` appends of a metadata batch's size (99
    bytes), each followed by fsync, in a file on the clusters' filesystem."""
    path = os.path.join(directory, "fsync-probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    latencies = []
    try:
        for _ in range(count):
            began = time.perf_counter()
            os.write(fd, b"x" * 99)
            os.fsync(fd)
            latencies.append(time.perf_counter() - began)
    finally:
        os.close(fd)
        os.unlink(path)
    return latencies


def run_latency(clusters: dict[str, KfastCluster], args) -> dict:
    leaders = {name: settle(c, args.recovery_timeout) for name, c in clusters.items()}
    results = {
        name: {"sequential": [], "sequential_wall": 0.0, "concurrent": [], "concurrent_wall": 0.0}
        for name in clusters
    }
    high_watermarks = {
        name: clusters[name].describe_quorum(leaders[name]).high_watermark for name in clusters
    }
    for name, cluster in clusters.items():  # warm-up
        sequential_block(cluster, leaders[name], 20)
    names = list(clusters)
    per_block = max(1, args.writes // args.blocks)
    per_concurrent = max(args.writers, args.concurrent_writes // args.blocks)
    fsyncs: list[float] = []
    for block in range(args.blocks):
        order = names if block % 2 == 0 else names[::-1]
        fsyncs += fsync_block(clusters[names[0]].base_dir, max(1, per_block // 4))
        for name in order:
            latencies, wall = sequential_block(clusters[name], leaders[name], per_block)
            results[name]["sequential"] += latencies
            results[name]["sequential_wall"] += wall
        for name in order:
            if args.writers > 1 and args.concurrent_writes > 0:
                latencies, wall = concurrent_block(
                    clusters[name], leaders[name], args.writers, per_concurrent
                )
                results[name]["concurrent"] += latencies
                results[name]["concurrent_wall"] += wall
        print(f"  latency block {block + 1}/{args.blocks} done", flush=True)
    report = {}
    for name, r in results.items():
        state = clusters[name].describe_quorum(leaders[name])
        written = len(r["sequential"]) + len(r["concurrent"]) + 20
        advanced = state.high_watermark - high_watermarks[name]
        if advanced < written:
            raise TrialFailed(
                f"{name}: {written} writes answered but the high watermark moved only {advanced}"
            )
        report[name] = {
            "sequential": summary(r["sequential"]),
            "sequential_writes_per_s": len(r["sequential"]) / r["sequential_wall"],
            "concurrent": summary(r["concurrent"]),
            "concurrent_writes_per_s": (
                len(r["concurrent"]) / r["concurrent_wall"] if r["concurrent_wall"] else None
            ),
            "high_watermark_advance": advanced,
        }
    report["fsync"] = {"sequential": summary(fsyncs)}
    return report


# -- main --------------------------------------------------------------------------------------
def source_revision() -> str:
    root = os.path.dirname(os.path.dirname(os.path.abspath(kfast.__file__)))
    try:
        rev = subprocess.run(
            ["git", "-C", root, "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--", "kfast"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return f"{rev}{' + uncommitted changes under kfast/' if dirty else ''}" if rev else root
    except (OSError, subprocess.SubprocessError):
        return root


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=50, help="kill -9 failovers")
    parser.add_argument(
        "--partition-trials", type=int, default=10, help="silent-partition failovers"
    )
    parser.add_argument("--writes", type=int, default=2000, help="sequential writes per cluster")
    parser.add_argument("--writers", type=int, default=8, help="concurrent connections")
    parser.add_argument(
        "--concurrent-writes",
        type=int,
        default=1000,
        help="writes per cluster over the concurrent connections",
    )
    parser.add_argument(
        "--blocks", type=int, default=4, help="interleaved latency blocks per cluster"
    )
    parser.add_argument(
        "--poll-ms",
        type=float,
        default=5.0,
        help="pause between rounds of polling writes during a failover",
    )
    parser.add_argument(
        "--recovery-timeout",
        type=float,
        default=30.0,
        help="seconds a trial may take to recover before the run stops",
    )
    parser.add_argument(
        "--max-seconds", type=float, default=900.0, help="stop starting new trials after this long"
    )
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-failover", action="store_true")
    parser.add_argument("--json", help="write every sample here")
    args = parser.parse_args()

    started = time.monotonic()
    stop_at = started + args.max_seconds
    print(
        f"kfast {source_revision()} from {os.path.dirname(kfast.__file__)}; "
        f"Python {platform.python_version()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    out: dict = {"args": vars(args), "load_average_start": os.getloadavg()}
    try:
        with KfastCluster(controllers=3) as proxied:
            if not args.skip_latency:
                with (
                    KfastCluster(controllers=1) as single,
                    DirectLinkCluster(controllers=3) as direct,
                ):
                    print(
                        "commit latency (3 voters via FaultProxy, 3 voters direct, 1 voter)",
                        flush=True,
                    )
                    out["latency"] = run_latency(
                        {"3 voters": proxied, "3 voters direct": direct, "1 voter": single}, args
                    )
            if not args.skip_failover:
                print(
                    f"failover: kill -9 of the active controller, {args.trials} trials", flush=True
                )
                out["kill"] = run_failovers(proxied, "kill", args.trials, args, stop_at)
                print(
                    f"failover: silent partition of the active controller, "
                    f"{args.partition_trials} trials",
                    flush=True,
                )
                out["partition"] = run_failovers(
                    proxied, "partition", args.partition_trials, args, stop_at
                )
    except TrialFailed as exc:
        print(f"\nTHE QUORUM DID NOT RECOVER: {exc}", flush=True)
        out["failed"] = str(exc)
    out["load_average_end"] = os.getloadavg()
    out["seconds"] = time.monotonic() - started

    print(
        f"\nresults ({out['seconds']:.0f} s, load average {out['load_average_start'][0]:.2f} "
        f"-> {out['load_average_end'][0]:.2f})"
    )
    for mode in ("kill", "partition"):
        if mode in out:
            trials = out[mode]["trials"]
            print(f"failover, {mode}: min / p50 / p90 / p99 / max = {ms(out[mode]['failover'])}")
            if trials:
                epochs = sorted(t["epochs"] for t in trials)
                print(
                    f"  epochs per failover: {epochs[0]}-{epochs[-1]}, "
                    f"{sum(e > 1 for e in epochs)} of {len(epochs)} needed more than one election"
                )
                print(
                    f"  rejoin to caught up: "
                    f"{ms(summary([t['rejoin_caught_up_s'] for t in trials]))}"
                )
            if mode == "partition" and trials:
                print(
                    f"  cut-off leader resigned: "
                    f"{ms(summary([t['old_leader_resigned_s'] for t in trials]))}"
                )
    if "latency" in out:
        base = out["latency"]["1 voter"]
        fsync = out["latency"]["fsync"]["sequential"]
        print(
            f"fsync of a 99-byte append (the disk's floor): p50 {fsync['p50'] * 1000:.2f} / "
            f"p99 {fsync['p99'] * 1000:.2f} / mean {fsync['mean'] * 1000:.2f} ms"
        )
        for name, r in out["latency"].items():
            if name == "fsync":
                continue
            seq = r["sequential"]
            print(
                f"commit latency, {name}: p50 {seq['p50'] * 1000:.2f} / p99 "
                f"{seq['p99'] * 1000:.2f} / mean {seq['mean'] * 1000:.2f} ms, "
                f"{r['sequential_writes_per_s']:.0f} writes/s sequential "
                f"(p50 {seq['p50'] / base['sequential']['p50']:.2f}x the 1 voter)"
            )
            if r["concurrent_writes_per_s"]:
                con = r["concurrent"]
                print(
                    f"  {args.writers} writers: {r['concurrent_writes_per_s']:.0f} writes/s "
                    f"({r['concurrent_writes_per_s'] / r['sequential_writes_per_s']:.2f}x "
                    f"sequential), latency p50 {con['p50'] * 1000:.2f} / p99 "
                    f"{con['p99'] * 1000:.2f} ms"
                )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    return 1 if "failed" in out else 0


if __name__ == "__main__":
    sys.exit(main())
