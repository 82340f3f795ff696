"""Broker CPU-seconds per GB produced, kfast and Tansu 0.6 in one run
(issue 21 item 1).

    python3 bench/produce_cpu.py [--gb 1.0] [--rounds 3] [--batch-records 10000 150]

What drives the broker. bench/broker_load.py produces through
confluent-kafka processes, whose Python loop spends 1-2 us a record: on a
2-core machine the clients then take most of the CPU and set the request
sizes. Here each client process sends Produce requests (v9, one record
batch of 100-byte records per request, partitions in turn, 5 requests in
flight per connection, as librdkafka's max.in.flight) over one connection,
with the batch built once beforehand (values of 100 bytes, no key, as the
producers of broker_load.py send) and checks every response: error code 0
for every partition, and each partition's base offsets advancing by at
least the batch's record count. The client then costs a few microseconds a request,
so the broker is what is measured. ``--batch-records`` sets the batch: 9,000
records (~0.97 MB) is about what librdkafka sends at full speed with its defaults
(batch.size 1,000,000 bytes; 10,000 would pass max.message.bytes); 150 records (~16 KiB) is a
small-batch producer.

Measured: utime + stime of the broker process from /proc/<pid>/stat over the
phase, divided by the payload produced (records x 100 bytes, the definition
broker_load.py uses). Each phase starts the broker fresh (kfast serve with
its defaults on a fresh data dir; Tansu with memory storage), creates the
topic, sends one request per partition before the clock starts (leaders
elected, logs created), then produces --gb. Phases for acks=1 and acks=all
(-1), 1 and 8 partitions, each batch size; within a round the two brokers
alternate, the order flipping each round. ``--brokers kfast@PATH`` adds
another kfast source tree (before/after a change, in the same rounds);
``--brokers floor`` (and ``floor-autotune``) adds bench/produce_floor.py,
a server that only receives, CRC-checks, writes and answers: the floor
under any broker's figure, in the same rounds. ``kfast-autotune`` is kfast
with ``socket.receive.buffer.bytes=-1`` (the kernel's receive-buffer
autotuning, as floor-autotune), beside kfast on Kafka's default of
102,400. ``floor-splice`` is the what-if of bench/produce_floor.py
``--splice`` (its docstring). Loopback only, bounded in time (each phase
stops after --limit-s), every process it starts is stopped.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from broker_load import (
    RECORD_SIZE,
    THIS_TREE,
    cpu_seconds,
    create_topic,
    kfast_launcher,
    kfast_tree,
    run_broker,
)

from kfast.protocol import ProduceRequest, api_keys, decode_response, encode_request
from kfast.records import RecordBatchBuilder

PRODUCE = api_keys.BY_NAME["Produce"].key
VERSION = 9
IN_FLIGHT = 5
TOPIC = "cpu"


def build_batch(records: int) -> bytes:
    builder = RecordBatchBuilder()
    value = b"x" * RECORD_SIZE
    now = int(time.time() * 1000)
    for _ in range(records):
        builder.append(now, None, value)
    return bytes(builder.build())


def build_request(partition: int, batch: bytes, acks: int) -> bytearray:
    body = ProduceRequest(acks=acks, timeout_ms=30_000)
    body.topic_data.append(
        ProduceRequest.TopicProduceData(
            name=TOPIC,
            partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=batch)],
        )
    )
    return bytearray(encode_request(PRODUCE, VERSION, 0, "produce-cpu", body))


def _recv_exact(sock: socket.socket, size: int) -> bytearray:
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:])
        if n == 0:
            raise ConnectionError("broker closed the connection")
        got += n
    return buf


def _check(response: bytearray, records: int, next_base: dict[int, int]) -> None:
    _, body = decode_response(PRODUCE, VERSION, response)
    for topic in body.responses:
        for p in topic.partition_responses:
            if p.error_code != 0:
                raise RuntimeError(f"partition {p.index}: error {p.error_code}")
            expected = next_base.get(p.index)
            # Other clients append to the same partitions in between.
            if expected is not None and p.base_offset < expected:
                raise RuntimeError(f"partition {p.index}: base {p.base_offset} < {expected}")
            next_base[p.index] = p.base_offset + records


def _client(
    host: str,
    port: int,
    requests: list[bytearray],
    count: int,
    records: int,
    conn,
    in_flight: int = IN_FLIGHT,
) -> None:
    """Send ``count`` requests, partitions in turn, ``in_flight`` at a time."""
    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.send("ready")
    conn.recv()
    next_base: dict[int, int] = {}
    sent = answered = 0
    started = time.monotonic()
    while answered < count:
        while sent < count and sent - answered < in_flight:
            request = requests[sent % len(requests)]
            struct.pack_into(">i", request, 8, sent)  # the correlation id
            sock.sendall(request)
            sent += 1
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        _check(_recv_exact(sock, size), records, next_base)
        answered += 1
    conn.send({"answered": answered, "seconds": time.monotonic() - started})
    sock.close()


@contextmanager
def run_floor(rcvbuf: int | None = None, splice: bool = False):
    """``floor`` / ``floor-autotune``: bench/produce_floor.py, the server
    that only receives, CRC-checks, writes and answers (its docstring)."""
    from kfast.testing.ports import free_port

    port = free_port()
    tmp = tempfile.mkdtemp(prefix="bench-floor-")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "produce_floor.py")
    cmd = ["env", f"PYTHONPATH={THIS_TREE}", sys.executable, "-P", script, "serve", str(port), tmp]
    if rcvbuf is not None:
        cmd += ["--rcvbuf", str(rcvbuf)]
    if splice:
        cmd.append("--splice")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        if proc.stdout is None or proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the floor server did not start")
        yield proc, f"127.0.0.1:{port}", 0.0
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def _start(kind: str):
    if kind == "floor":
        return run_floor()
    if kind == "floor-autotune":
        return run_floor(-1)
    if kind == "floor-splice":
        return run_floor(splice=True)
    if kind == "kfast-autotune":
        return run_broker("kfast", kfast_overrides=("socket.receive.buffer.bytes=-1",))
    launcher = kfast_launcher(kfast_tree(kind)) if kind.startswith("kfast") else ()
    return run_broker("tansu" if kind == "tansu" else "kfast", launcher=launcher)


def warm_pages(nbytes: int) -> None:
    """Write and delete a scratch file of ``nbytes`` (``--warm-pages``), just
    before a phase's clock starts: the broker's page-cache writes then take
    pages its host backs. On a VM with free page reporting (this one:
    virtio_balloon, /sys/module/page_reporting) memory freed for a few
    seconds -- the previous phase's data dir, deleted -- goes back to the
    host, and the first write to each of those pages costs a host fault
    inside the copy: a raw os.write of 1 GiB measures 0.20 CPU-s/GB into
    pages freed a moment before and 1.4-1.7 after a 5 s pause. That cost
    is the VM's, not the server's, and it falls on whichever phase follows
    a pause. The same for every server kind."""
    chunk = bytearray(1 << 20)
    fd, path = tempfile.mkstemp(prefix="bench-warm-")
    try:
        for _ in range(-(-nbytes // len(chunk))):
            os.write(fd, chunk)
    finally:
        os.close(fd)
        os.unlink(path)


def phase(
    kind: str,
    partitions: int,
    acks: int,
    batch_records: int,
    gb: float,
    clients: int,
    limit_s: float,
    in_flight: int = IN_FLIGHT,
    warm: bool = False,
) -> dict:
    batch = build_batch(batch_records)
    requests = [build_request(p, batch, acks) for p in range(partitions)]
    total = max(clients, round(gb * 1e9 / (batch_records * RECORD_SIZE)))
    with _start(kind) as (proc, bootstrap, _ready):
        if not kind.startswith("floor"):
            create_topic(bootstrap, TOPIC, partitions)
        host, port = bootstrap.split(":")
        ctx = mp.get_context("spawn")
        # Warm-up: one request per partition (leaders, logs, the first segment).
        parent, child = ctx.Pipe()
        warm = ctx.Process(
            target=_client, args=(host, int(port), requests, partitions, batch_records, child)
        )
        warm.start()
        parent.recv()
        parent.send("go")
        if not parent.poll(60):
            warm.kill()
            raise TimeoutError(f"{kind}: warm-up got no answer")
        parent.recv()
        warm.join(10)
        share, extra = divmod(total, clients)
        pipes, workers = [], []
        for i in range(clients):
            parent, child = ctx.Pipe()
            count = share + (1 if i < extra else 0)
            worker = ctx.Process(
                target=_client,
                args=(host, int(port), requests, count, batch_records, child, in_flight),
            )
            worker.start()
            pipes.append(parent)
            workers.append(worker)
        for parent in pipes:
            if not parent.poll(60) or parent.recv() != "ready":
                raise TimeoutError(f"{kind}: a client did not connect")
        if warm:
            warm_pages(int(total * len(batch) * 1.1))
        cpu_before = cpu_seconds(proc.pid)
        start = time.monotonic()
        for parent in pipes:
            parent.send("go")
        answered = 0
        try:
            for parent in pipes:
                if not parent.poll(max(1.0, limit_s - (time.monotonic() - start))):
                    raise TimeoutError(f"{kind}: phase passed {limit_s} s")
                answered += parent.recv()["answered"]
            elapsed = time.monotonic() - start
            cpu = cpu_seconds(proc.pid) - cpu_before
        finally:
            for worker in workers:
                worker.join(5)
                if worker.is_alive():
                    worker.kill()
                    worker.join()
    produced_gb = answered * batch_records * RECORD_SIZE / 1e9
    return {
        "broker": kind,
        "partitions": partitions,
        "acks": acks,
        "batch_records": batch_records,
        "batch_bytes": len(batch),
        "requests": answered,
        "seconds": elapsed,
        "records_per_s": answered * batch_records / elapsed,
        "broker_cpu_s": cpu,
        "cpu_s_per_gb": cpu / produced_gb,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.0, help="payload per phase")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--batch-records", type=int, nargs="+", default=[9_000, 150])
    parser.add_argument(
        "--brokers",
        nargs="+",
        default=["kfast", "tansu"],
        help="kfast (this tree), tansu, kfast@PATH: kfast from another source tree "
        "(its kernels built in place), to compare a before and an after in one run; "
        "floor: bench/produce_floor.py, the receive + CRC + write floor (floor-autotune: "
        "the same with the kernel's receive-buffer autotuning; floor-splice: splice(2) "
        "into the file, then CRC, a what-if); kfast-autotune: kfast "
        "with socket.receive.buffer.bytes=-1",
    )
    parser.add_argument("--limit-s", type=float, default=120.0)
    parser.add_argument(
        "--in-flight",
        type=int,
        default=IN_FLIGHT,
        help="requests in flight per connection (1: the broker waits for each request, "
        "as with a producer that is not saturating it)",
    )
    parser.add_argument(
        "--warm-pages",
        action="store_true",
        help="before each phase, write and delete a file of the phase's size, so the "
        "server writes into pages the VM's host backs (warm_pages' docstring)",
    )
    parser.add_argument("--json", help="write every phase's figures here")
    args = parser.parse_args()
    results: list[dict] = []
    for round_ in range(args.rounds):
        brokers = args.brokers if round_ % 2 == 0 else args.brokers[::-1]
        for batch_records in args.batch_records:
            for partitions in (1, 8):
                for acks in (1, -1):
                    for kind in brokers:
                        r = phase(
                            kind,
                            partitions,
                            acks,
                            batch_records,
                            args.gb,
                            args.clients,
                            args.limit_s,
                            args.in_flight,
                            args.warm_pages,
                        )
                        r["round"] = round_
                        r["warm_pages"] = args.warm_pages
                        results.append(r)
                        print(
                            f"round {round_} {kind:5s} batch {batch_records:>6} "
                            f"({r['batch_bytes']:>8} B) p{partitions} acks={acks:>2}: "
                            f"{r['records_per_s'] / 1e6:5.2f} M records/s, broker "
                            f"{r['broker_cpu_s']:5.2f} CPU-s, {r['cpu_s_per_gb']:5.2f} CPU-s/GB",
                            flush=True,
                        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    print("\nmedian CPU-s/GB over rounds (kfast / Tansu = ratio of medians)")
    for batch_records in args.batch_records:
        for partitions in (1, 8):
            for acks in (1, -1):
                cells = {}
                for kind in args.brokers:
                    values = [
                        r["cpu_s_per_gb"]
                        for r in results
                        if (r["broker"], r["batch_records"], r["partitions"], r["acks"])
                        == (kind, batch_records, partitions, acks)
                    ]
                    rates = [
                        r["records_per_s"]
                        for r in results
                        if (r["broker"], r["batch_records"], r["partitions"], r["acks"])
                        == (kind, batch_records, partitions, acks)
                    ]
                    cells[kind] = (
                        statistics.median(values),
                        min(values),
                        max(values),
                        statistics.median(rates),
                    )
                line = " | ".join(
                    f"{k} {m:.2f} [{lo:.2f}-{hi:.2f}] at {rate / 1e6:.2f} M rec/s"
                    for k, (m, lo, hi, rate) in cells.items()
                )
                ratio = ""
                if "tansu" in cells:
                    ratio = "".join(
                        f" | {k}/Tansu {cells[k][0] / cells['tansu'][0]:.2f}x"
                        for k in cells
                        if k != "tansu"
                    )
                print(f"batch {batch_records:>6} p{partitions} acks={acks:>2}: {line}{ratio}")


if __name__ == "__main__":
    main()
