"""Broker CPU per Produce request, in process (issue 21 items 1 and 3).

    python3 bench/produce_request.py [--trees kfast kfast@PATH] [--rounds 5]
        [--requests 4000] [--profile cprofile|none]

What it measures. A real single-node broker (kfast.testing.KfastBroker: the
``kfast serve`` defaults, a topic of one partition) gets prebuilt Produce v9
requests with one v2 batch of 1 record and of 150 records (100-byte values,
as bench/produce_cpu.py), acks=1 and acks=-1, two ways:

- ``handle``: ``KafkaApis.handle(None, frame)`` called in a loop on the
  broker's event loop (decode, dispatch, handler, append, response encode,
  request metrics), no network; wall time per request;
- ``connection``: a client process sends the requests over loopback TCP,
  one in flight at a time (as each of the 1,000 producers of latency.py's
  connections test does), and checks every response (error 0, offsets
  advancing); the figure is the CPU time of the broker's event-loop thread
  per request (recv, frame cut, everything above, response write, metrics):
  what one request costs the loop, whatever the client and the scheduler do;
- ``10 pipelined``: the same with ten requests written at once (one wake-up
  of the loop, and of cold caches, for ten);
- ``echo`` (1 record, acks=1 only): the same client against a second
  SocketServer on the broker's loop whose handler answers each frame with a
  prebuilt response: the network layer's own cost.

Each way is timed over ``--repeats`` passes of ``--requests`` requests and
the best pass kept (the least disturbed by the rest of a shared machine);
every tree runs ``--rounds`` times, trees interleaved in every round (each
run a fresh process and broker), and the table shows the best run and the
range over runs. ``connection user`` is the user-mode part (clock ticks of
10 ms: +-10% at the default pass size); the rest of ``connection`` is the
kernel's (recv, sendmsg over loopback, epoll).
``--trees kfast@PATH`` runs another source tree (before/after a change).
``--profile cprofile`` prints the top functions of one extra ``handle`` run
of the first tree (1-record, acks=1) by internal time.
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

TOPIC = "req"
VERSION = 9
CASES = [(1, 1), (1, -1), (150, 1), (150, -1)]  # (records per batch, acks)
HERE = os.path.abspath(__file__)
sys.path.insert(0, os.path.dirname(HERE))

from broker_load import RECORD_SIZE  # noqa: E402
from produce_cpu import _recv_exact  # noqa: E402


def _request(records: int, acks: int) -> bytes:
    from kfast.protocol import ProduceRequest, api_keys, encode_request
    from kfast.records import RecordBatchBuilder

    builder = RecordBatchBuilder()
    now = int(time.time() * 1000)
    for _ in range(records):
        builder.append(now, None, b"x" * RECORD_SIZE)
    body = ProduceRequest(acks=acks, timeout_ms=30_000)
    body.topic_data.append(
        ProduceRequest.TopicProduceData(
            name=TOPIC,
            partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=bytes(builder.build()))
            ],
        )
    )
    frame = encode_request(api_keys.PRODUCE, VERSION, 0, "produce-request", body)
    return bytes(frame[4:])  # without the size prefix, as the handler gets it


def _client(port: int, frame: bytes, conn, check_offsets: bool = True, depth: int = 1) -> None:
    """Send copies of ``frame``, ``depth`` at a time (written together, then
    their answers read and checked), as many as each count the parent sends
    (0: stop)."""
    from kfast.protocol import api_keys, decode_response

    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    request = bytearray(struct.pack(">i", len(frame)) + frame)
    conn.send("ready")
    base = -1
    correlation = 0
    while count := conn.recv():
        for _ in range(0, count, depth):
            burst = bytearray()
            for i in range(depth):
                struct.pack_into(">i", request, 8, correlation + i)
                burst += request
            sock.sendall(burst)
            for _ in range(depth):
                (size,) = struct.unpack(">i", _recv_exact(sock, 4))
                answer = _recv_exact(sock, size)
                correlation_id, body = decode_response(api_keys.PRODUCE, VERSION, answer)
                p = body.responses[0].partition_responses[0]
                if (
                    correlation_id != correlation
                    or p.error_code != 0
                    or (check_offsets and p.base_offset <= base)
                ):
                    raise RuntimeError(f"bad response {correlation}: {correlation_id} {p}")
                base = p.base_offset
                correlation += 1
        conn.send("done")
    sock.close()


def _create_topic(kfast_broker) -> None:
    from kfast.protocol import CreateTopicsRequest, api_keys, encode_request

    body = CreateTopicsRequest(timeout_ms=30_000)
    body.topics.append(
        CreateTopicsRequest.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1)
    )
    frame = bytearray(encode_request(api_keys.BY_NAME["CreateTopics"].key, 5, 0, "bench", body)[4:])

    async def create():
        result = kfast_broker.broker.apis.handle(None, frame)
        if not isinstance(result, list) and result is not None:
            result = await result

    kfast_broker.call(create(), timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if kfast_broker.call_soon(_has_leader, kfast_broker.broker):
            return
        time.sleep(0.05)
    raise TimeoutError("the topic got no leader")


def _has_leader(broker) -> bool:
    try:
        broker.replica_manager.partition_or_raise(TOPIC, 0)
        return True
    except Exception:
        return False


def _user_seconds(tid: int) -> float:
    """User-mode CPU of a thread of this process (the rest of its CPU time
    is the kernel's: syscalls, loopback TCP)."""
    with open(f"/proc/self/task/{tid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return int(fields[11]) / os.sysconf("SC_CLK_TCK")


def _handle_loop(apis, frames: list[memoryview]) -> float:
    """``KafkaApis.handle`` over the frames; seconds per request."""
    handle = apis.handle
    start = time.perf_counter()
    for frame in frames:
        result = handle(None, frame)
        if result is None or not isinstance(result, list):
            raise RuntimeError(f"unexpected answer {result!r}")
    return (time.perf_counter() - start) / len(frames)


def worker(requests: int, repeats: int, profile: bool) -> dict:
    """One broker, every case, both ways; {case: {way: us per request}}."""
    from kfast.testing.broker import KfastBroker

    results: dict[str, dict[str, float]] = {}
    with KfastBroker() as kb:
        _create_topic(kb)
        # As `kfast serve` does once started: the start-up heap frozen, the
        # young generation collected every 20,000 allocations.
        from kfast.server.gc_tuning import freeze_startup_heap

        freeze_startup_heap()
        broker = kb.broker
        loop_thread = kb._thread
        clock = time.pthread_getcpuclockid(loop_thread.ident)
        ctx = mp.get_context("spawn")
        for records, acks in CASES:
            frame = _request(records, acks)
            best = float("inf")
            for _ in range(repeats):
                # Writable copies: the append patches each batch in place.
                frames = [memoryview(bytearray(frame)) for _ in range(requests)]
                best = min(best, kb.call_soon(_handle_loop, broker.apis, frames))
            case = f"{records} record{'s' if records > 1 else ''}, acks={acks}"
            results[case] = {"handle": best * 1e6}
            if profile and records == 1 and acks == 1:
                import cProfile
                import io
                import pstats

                frames = [memoryview(bytearray(frame)) for _ in range(requests)]
                profiler = cProfile.Profile()
                kb.call_soon(profiler.runcall, _handle_loop, broker.apis, frames)
                out = io.StringIO()
                pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
                results[case]["profile"] = out.getvalue()  # type: ignore[assignment]
            results[case].update(_connection(kb, kb.port, frame, requests, repeats, ctx, clock))
            # Ten requests written at once: the loop's wake-up and the first
            # request's cold caches shared by ten.
            pipelined = _connection(kb, kb.port, frame, requests, repeats, ctx, clock, depth=10)
            results[case].update({f"10 pipelined {way}": v for way, v in pipelined.items()})
            if records == 1 and acks == 1:
                # The network layer alone: a second server on the loop whose
                # handler answers every frame with a prebuilt response.
                results[case].update(
                    {
                        f"echo {way}": value
                        for way, value in _echo(kb, frame, requests, repeats, ctx, clock).items()
                    }
                )
    return results


def _connection(
    kb, port, frame, requests, repeats, ctx, clock, check_offsets=True, depth=1
) -> dict:
    """The broker loop thread's CPU per request of a client on ``port``:
    the best of ``repeats`` passes after a warm-up pass."""
    loop_thread = kb._thread
    parent, child = ctx.Pipe()
    client = ctx.Process(target=_client, args=(port, frame, child, check_offsets, depth))
    client.start()
    try:
        if not parent.poll(60) or parent.recv() != "ready":
            raise TimeoutError("the client did not connect")
        best_cpu = best_user = best_wall = float("inf")
        for measured in [False] + [True] * repeats:
            cpu = time.clock_gettime(clock)
            user = _user_seconds(loop_thread.native_id)
            wall = time.perf_counter()
            parent.send(requests)
            if not parent.poll(120) or parent.recv() != "done":
                raise RuntimeError("the client failed or did not finish")
            if measured:
                best_cpu = min(best_cpu, time.clock_gettime(clock) - cpu)
                best_wall = min(best_wall, time.perf_counter() - wall)
                best_user = min(best_user, _user_seconds(loop_thread.native_id) - user)
        parent.send(0)
    finally:
        client.join(30)
        if client.is_alive():
            client.kill()
            client.join()
    return {
        "connection": best_cpu / requests * 1e6,
        "connection user": best_user / requests * 1e6,
        "connection wall": best_wall / requests * 1e6,
    }


def _echo(kb, frame, requests, repeats, ctx, clock) -> dict:
    from kfast.server.network import SocketServer

    answer = kb.call_soon(kb.broker.apis.handle, None, memoryview(bytearray(frame)))
    parts = [bytes(part) for part in answer]

    def handler(connection, request):
        # The request's correlation id (after api_key and api_version) first.
        return [request[4:8].tobytes() + parts[0][4:], *parts[1:]]

    server = SocketServer(handler, "127.0.0.1", 0)
    kb.call(server.start())
    try:
        return _connection(kb, server.port, frame, requests, repeats, ctx, clock, False)
    finally:
        kb.call(server.shutdown(5.0))


def _run_tree(tree: str, args: argparse.Namespace, profile: bool) -> dict:
    path = tree.split("@", 1)[1] if "@" in tree else os.path.dirname(os.path.dirname(HERE))
    env = {**os.environ, "PYTHONPATH": path}
    command = [
        sys.executable,
        HERE,
        "--worker",
        "--requests",
        str(args.requests),
        "--repeats",
        str(args.repeats),
    ]
    if profile:
        command.append("--cprofile")
    out = subprocess.run(
        command, env=env, check=True, capture_output=True, text=True, timeout=900
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", nargs="+", default=["kfast"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=1000, help="requests per pass")
    parser.add_argument("--repeats", type=int, default=8, help="passes per case, way and run")
    parser.add_argument("--profile", choices=["cprofile", "none"], default="none")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cprofile", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.requests, args.repeats, args.cprofile)))
        return
    runs: dict[str, list[dict]] = {tree: [] for tree in args.trees}
    for round_index in range(args.rounds):
        order = args.trees if round_index % 2 == 0 else list(reversed(args.trees))
        for tree in order:
            runs[tree].append(_run_tree(tree, args, False))
            print(f"round {round_index + 1} {tree} done, load {os.getloadavg()[0]:.2f}")
    print(f"\nus per request, best of {args.rounds} rounds [range]; load {os.getloadavg()}")
    ways = ["handle", "connection", "connection user", "connection wall"]
    ways += [f"{kind} {way}" for kind in ("10 pipelined", "echo") for way in ways[1:]]
    header = "| case | way | " + " | ".join(args.trees) + " |"
    print(header)
    print("|" + "---|" * (2 + len(args.trees)))
    for case in runs[args.trees[0]][0]:
        for way in ways:
            cells = []
            for tree in args.trees:
                values = [run[case][way] for run in runs[tree] if way in run[case]]
                if values:
                    cells.append(f"{min(values):.1f} [{min(values):.1f}-{max(values):.1f}]")
            if cells:
                print(f"| {case} | {way} | " + " | ".join(cells) + " |")
    if args.profile == "cprofile":
        profiled = _run_tree(args.trees[0], args, True)
        print(profiled["1 record, acks=1"]["profile"])


if __name__ == "__main__":
    main()
