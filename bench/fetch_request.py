"""Broker CPU per caught-up Fetch, in process and through a connection
(issue 21 item 5).

    python3 bench/fetch_request.py [--trees kfast kfast@PATH] [--requests 2000]
        [--waits 0,1,5,20]

A real single-node broker (kfast.testing.KfastBroker, ``kfast serve``'s
defaults and its frozen start-up heap) with a topic of 100 partitions gets
the Fetch v16 librdkafka sends to a caught-up consumer: sessionless (epoch
-1), 10 partitions by topic id, fetch offset 0 = the high watermark,
min_bytes 1. Two ways:

- ``handle``: ``KafkaApis.handle(None, frame)`` in a loop on the broker's
  event loop with max_wait_ms 0 (answered at once): decode, read the 10
  partitions, build and encode the response, request metrics; wall time per
  request, best of 5 passes;
- ``connection, max_wait N``: a client process sends the request over
  loopback TCP, one in flight, and checks every answer (10 partitions, no
  error); the figure is the CPU time of the broker's event-loop thread per
  request (its CPU clock; the user-mode part from /proc, in 10 ms ticks), best
  of 4 passes. With max_wait N > 0 every
  fetch waits N ms in the purgatory and is answered by its expiry: the loop
  sleeps twice per request (for the request, for the expiry), as in the
  idle long poll of bench/fetch_scale.py.

``--calls``: the function calls per request instead (cProfile on the
broker's loop thread, in process): answered at once (max_wait 0), and parked
and answered by its expiry (max_wait 2 ms, arrival to answer), as Python
frames and as every call (builtins and C methods too).

The sweep over N is the point: the work per request is the same (the same
Python calls), yet on a virtual machine the CPU per request grows with the
time the loop slept before it (caches and TLB cold after a sleep), so the
number of loop wake-ups per request matters as much as the work.
``--trees kfast@PATH`` runs another source tree (before/after a change), in
its own process, trees interleaved.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import struct
import subprocess
import sys
import time

TOPIC = "fetch-request"
VERSION = 16
PARTITIONS = 100
FETCHED = range(0, PARTITIONS, 10)  # 10 partitions, as fetch_scale's consumers
HERE = os.path.abspath(__file__)
sys.path.insert(0, os.path.dirname(HERE))

from produce_cpu import _recv_exact  # noqa: E402


def _frame(topic_id, max_wait_ms: int) -> bytes:
    from kfast.protocol import FetchRequest, api_keys, encode_request

    body = FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=52_428_800,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
    )
    body.topics.append(
        FetchRequest.FetchTopic(
            topic_id=topic_id,
            partitions=[
                FetchRequest.FetchPartition(
                    partition=p,
                    current_leader_epoch=0,
                    fetch_offset=0,
                    last_fetched_epoch=-1,
                    log_start_offset=-1,
                    partition_max_bytes=1_048_576,
                )
                for p in FETCHED
            ],
        )
    )
    return bytes(encode_request(api_keys.FETCH, VERSION, 0, "rdkafka", body)[4:])


def _create_topic(kb) -> object:
    """Create the topic; return its id once every partition has a leader."""
    from kfast.protocol import CreateTopicsRequest, api_keys, encode_request

    body = CreateTopicsRequest(timeout_ms=30_000)
    body.topics.append(
        CreateTopicsRequest.CreatableTopic(
            name=TOPIC, num_partitions=PARTITIONS, replication_factor=1
        )
    )
    frame = bytearray(encode_request(api_keys.BY_NAME["CreateTopics"].key, 5, 0, "bench", body)[4:])

    async def create():
        result = kb.broker.apis.handle(None, frame)
        if not isinstance(result, list) and result is not None:
            await result

    kb.call(create(), timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        led = kb.call_soon(
            lambda: sum(
                kb.broker.replica_manager.get_partition(TOPIC, p) is not None for p in FETCHED
            )
        )
        if led == len(FETCHED):
            rm = kb.broker.replica_manager
            return kb.call_soon(lambda: rm.get_partition(TOPIC, 0).topic_id)
        time.sleep(0.05)
    raise TimeoutError("the topic got no leaders")


def _client(port: int, frame: bytes, conn) -> None:
    """Send ``frame`` one at a time, as many as each count the parent sends
    (0: stop), checking every answer."""
    from kfast.protocol import api_keys, decode_response

    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    request = bytearray(struct.pack(">i", len(frame)) + frame)
    conn.send("ready")
    correlation = 0
    while count := conn.recv():
        for _ in range(count):
            struct.pack_into(">i", request, 8, correlation)
            sock.sendall(request)
            (size,) = struct.unpack(">i", _recv_exact(sock, 4))
            correlation_id, body = decode_response(api_keys.FETCH, VERSION, _recv_exact(sock, size))
            (topic,) = body.responses
            if (
                correlation_id != correlation
                or body.error_code
                or len(topic.partitions) != len(FETCHED)
                or any(p.error_code for p in topic.partitions)
            ):
                raise RuntimeError(f"bad response {correlation}: {correlation_id} {body}")
            correlation += 1
        conn.send("done")
    sock.close()


def _thread_user_system(tid: int) -> tuple[float, float]:
    with open(f"/proc/self/task/{tid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def _calls_per_request(kb, handle, frames: list[memoryview]) -> tuple[float, float]:
    """(Python frames, all calls) per request of ``frames`` through
    ``handle`` on the broker's loop, each answered before the next."""
    import asyncio
    import cProfile
    import pstats

    profiler = cProfile.Profile()

    async def run() -> None:
        profiler.enable()
        for frame in frames:
            result = handle(None, frame)
            if isinstance(result, asyncio.Future):
                await result
        profiler.disable()

    kb.call(run(), timeout=120)
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    python = sum(calls for (path, _, _), (_, calls, *_) in stats.items() if path != "~")
    every = sum(calls for (_, calls, *_) in stats.values())
    return python / len(frames), every / len(frames)


def worker(requests: int, waits: list[int], calls: bool = False) -> dict:
    """One broker, every way; {way: us per request}."""
    from kfast.server.gc_tuning import freeze_startup_heap
    from kfast.testing.broker import KfastBroker

    results: dict[str, float] = {}
    with KfastBroker() as kb:
        topic_id = _create_topic(kb)
        freeze_startup_heap()
        handle = kb.broker.apis.handle
        immediate = _frame(topic_id, 0)
        if calls:
            for wait in (0, 2):
                frame = _frame(topic_id, wait)
                count = requests if wait == 0 else min(requests, 200)
                _calls_per_request(kb, handle, [memoryview(bytearray(frame))] * 20)  # warm
                python, every = _calls_per_request(
                    kb, handle, [memoryview(bytearray(frame)) for _ in range(count)]
                )
                results[f"calls, max_wait {wait} ms (Python frames)"] = python
                results[f"calls, max_wait {wait} ms (every call)"] = every
            return results

        def loop(frames: list[memoryview]) -> float:
            start = time.perf_counter()
            for frame in frames:
                if not isinstance(handle(None, frame), list):
                    raise RuntimeError("the fetch did not answer at once")
            return (time.perf_counter() - start) / len(frames)

        results["handle"] = 1e6 * min(
            kb.call_soon(loop, [memoryview(bytearray(immediate)) for _ in range(requests)])
            for _ in range(5)
        )
        tid = kb._thread.native_id
        clock = time.pthread_getcpuclockid(kb._thread.ident)
        port = int(kb.bootstrap_servers.rsplit(":", 1)[1])
        ctx = mp.get_context("spawn")
        for wait in waits:
            count = requests if wait == 0 else max(50, min(requests, 2000 // wait))
            parent, child = ctx.Pipe()
            client = ctx.Process(target=_client, args=(port, _frame(topic_id, wait), child))
            client.start()
            try:
                if not parent.poll(60):
                    raise TimeoutError("client not ready")
                parent.recv()
                best = (float("inf"), 0.0)
                for _ in range(4):
                    user0, _system0 = _thread_user_system(tid)
                    cpu0 = time.clock_gettime(clock)
                    parent.send(count)
                    if not parent.poll(120):
                        raise TimeoutError("client stopped answering")
                    parent.recv()
                    cpu1 = time.clock_gettime(clock)
                    user1, _system1 = _thread_user_system(tid)
                    # The thread's CPU clock (ns); /proc's user share, in 10 ms ticks.
                    best = min(best, ((cpu1 - cpu0) / count, (user1 - user0) / count))
                parent.send(0)
            finally:
                client.join(30)
                if client.is_alive():
                    client.kill()
            results[f"connection, max_wait {wait} ms"] = best[0] * 1e6
            results[f"connection, max_wait {wait} ms (user)"] = best[1] * 1e6
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", nargs="+", default=["kfast"])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--waits", default="0,1,5,20")
    parser.add_argument("--calls", action="store_true", help="function calls per request")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    waits = [int(w) for w in args.waits.split(",")]
    if args.worker:
        print(json.dumps(worker(args.requests, waits, args.calls)))
        return
    from broker_load import kfast_launcher, kfast_tree

    table: dict[str, dict[str, float]] = {}
    for tree in args.trees:
        command = [*kfast_launcher(kfast_tree(tree)), HERE, "--worker"]
        # kfast_launcher runs ``python -P -m kfast``: run this script instead.
        command = [c for c in command if c not in ("-m", "kfast")]
        command += ["--requests", str(args.requests), "--waits", args.waits]
        command += ["--calls"] if args.calls else []
        out = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=True)
        table[tree] = json.loads(out.stdout.strip().splitlines()[-1])
    ways = list(next(iter(table.values())))
    print("| way (us per request) | " + " | ".join(table) + " |")
    print("|---|" + "---|" * len(table))
    for way in ways:
        print(f"| {way} | " + " | ".join(f"{table[t][way]:.0f}" for t in table) + " |")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
