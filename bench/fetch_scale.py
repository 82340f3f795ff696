#!/usr/bin/env python3
"""Fetch at scale (issue 21 item 5): the broker's CPU under 100 idle
long-polling consumers over 1,000 partitions, kfast vs Tansu 0.6.

    python bench/fetch_scale.py                       # both brokers, defaults below
    python bench/fetch_scale.py --brokers kfast --idle-seconds 10 --json out.json
    python bench/fetch_scale.py --brokers kfast@/tmp/base,kfast   # before/after

For each broker (a subprocess on a free 127.0.0.1 port, started and stopped
by PID through bench/broker_load.py's run_broker, kfast with its defaults and
a temp data dir, Tansu with memory storage): a topic of ``--partitions``
partitions, then ``--consumers`` confluent-kafka consumers spread over
``--procs`` processes. Consumer i is assigned partitions i, i + C, i + 2C, ...
(manual assign: no group join to wait for), so every partition is fetched
by exactly one consumer, with fetch.wait.max.ms ``--max-wait-ms`` and
fetch.min.bytes 1: with nothing produced, each consumer's Fetch waits
max-wait-ms in the broker and comes back empty. Once every consumer has
had a Fetch answered (librdkafka's statistics), two phases are measured,
each from /proc/PID/stat (utime + stime of the broker process) as % of one
core:

  idle     nothing produced, ``--idle-seconds``
  produce  one producer process, ``--produce-rate`` records/s of 100 bytes
           to random partitions, ``--produce-seconds``

Fetch requests/s come from librdkafka's statistics (brokers[].req.Fetch) of
one consumer per process (all consumers run the same configuration), scaled
to all consumers; for kfast also from its metrics endpoint
(kafka_network_requestmetrics_requests_total{request="Fetch"}), read just
before and after each phase. The measurement windows hold /tmp/kfast-bench.lock
(flock) so two benchmarks never overlap; the load average is recorded.
Bounded in time; every process started here is stopped by PID.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import random
import re
import sys
import time
import urllib.request
from contextlib import contextmanager

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from broker_load import (
    CLK_TCK,
    cpu_seconds,
    create_topic,
    kfast_launcher,
    kfast_tree,
    run_broker,
)

from kfast.testing.ports import free_port

TOPIC = "fetch-scale"
LOCK = "/tmp/kfast-bench.lock"
READY_TIMEOUT = 180.0
_FETCH_STAT = re.compile(rb'"Fetch":\s*(\d+)')


def _kafka_python_worker(
    bootstrap: str, assignments: list[list[int]], max_wait_ms: int, conn
) -> None:
    """kafka-python consumers (KIP-227 fetch sessions: after the first full
    fetch, each long poll is an incremental fetch listing no partition).
    kafka-python fetches inside poll(); a fetch sent by one poll stays in
    flight and its response is taken by a later one, so short polls in turn
    keep every consumer long-polling. Answers "snap" with (0 -- no client-side
    request count --, records consumed, True once every consumer has had a
    poll)."""
    from kafka import KafkaConsumer, TopicPartition

    consumers = []
    for partitions in assignments:
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            fetch_max_wait_ms=max_wait_ms,
            request_timeout_ms=max(30_000, 3 * max_wait_ms),
        )
        consumer.assign([TopicPartition(TOPIC, p) for p in partitions])
        consumer.seek_to_beginning()
        consumers.append(consumer)
    records = 0
    polled = False
    try:
        while True:
            if conn.poll(0):
                if conn.recv() == "stop":
                    break
                conn.send((0, records, polled))
            for consumer in consumers:
                for batch in consumer.poll(timeout_ms=50).values():
                    records += len(batch)
            polled = True
    finally:
        for consumer in consumers:
            consumer.close()


def _consumer_worker(bootstrap: str, assignments: list[list[int]], max_wait_ms: int, conn) -> None:
    """One process of consumers: ``assignments[k]`` are consumer k's
    partitions. Answers "snap" with (Fetch requests sent by the sampled
    consumer, its answered-fetch flag, records consumed by all); "stop" ends."""
    from confluent_kafka import Consumer, TopicPartition

    sampled = {"fetches": 0}

    def on_stats(raw: str) -> None:
        # The statistics JSON lists every partition of the topic (~1 MB for
        # 1,000): a regex for the broker request counters, not json.loads.
        sampled["fetches"] = sum(int(m) for m in _FETCH_STAT.findall(raw.encode()))

    consumers = []
    for k, partitions in enumerate(assignments):
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": "fetch-scale",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": max_wait_ms,
            "fetch.min.bytes": 1,
            "enable.partition.eof": False,
        }
        if k == 0:
            config["statistics.interval.ms"] = 1000
            config["stats_cb"] = on_stats
        consumer = Consumer(config)
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in partitions])
        consumers.append(consumer)
    records = 0
    try:
        while True:
            if conn.poll(0):
                message = conn.recv()
                if message == "stop":
                    break
                conn.send((sampled["fetches"], records, sampled["fetches"] > 0))
            for consumer in consumers:
                for msg in consumer.consume(10000, 0):
                    if msg.error() is None:
                        records += 1
            time.sleep(0.05)  # a poll loop; the fetches run in librdkafka's threads
    finally:
        for consumer in consumers:
            consumer.close()


def _producer_worker(bootstrap: str, partitions: int, rate: int, seconds: float, conn) -> None:
    from confluent_kafka import Producer

    delivered = {"ok": 0, "failed": 0}

    def on_delivery(err, _msg) -> None:
        delivered["failed" if err is not None else "ok"] += 1

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 0,
            "acks": 1,
            "on_delivery": on_delivery,
        }
    )
    producer.list_topics(TOPIC, timeout=30)
    conn.send("ready")
    conn.recv()
    payload = b"x" * 100
    start = time.monotonic()
    sent = 0
    while (now := time.monotonic()) - start < seconds:
        due = int((now - start) * rate)
        while sent < due:
            producer.produce(TOPIC, payload, partition=random.randrange(partitions))
            sent += 1
        producer.poll(0)
        time.sleep(0.005)  # pacing to the target rate
    producer.flush(30)
    conn.send(delivered)


def _kfast_fetch_requests(metrics_port: int | None) -> int | None:
    if metrics_port is None:
        return None
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(
        int(float(m))
        for m in re.findall(
            r'^kafka_network_requestmetrics_requests_total\{request="Fetch",[^}]*\} (\S+)',
            text,
            re.M,
        )
    )


@contextmanager
def bench_lock():
    with open(LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class Consumers:
    """The consumer processes of one run."""

    def __init__(self, bootstrap: str, args: argparse.Namespace) -> None:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        per_consumer = [
            list(range(i, args.partitions, args.consumers)) for i in range(args.consumers)
        ]
        self.procs, self.pipes = [], []
        self.sample_scale = []  # consumers per process (the sample stands for them)
        for chunk in range(args.procs):
            assignments = per_consumer[chunk :: args.procs]
            parent, child = ctx.Pipe()
            proc = ctx.Process(
                target=_kafka_python_worker if args.client == "kafka-python" else _consumer_worker,
                args=(bootstrap, assignments, args.max_wait_ms, child),
                daemon=True,
            )
            proc.start()
            self.procs.append(proc)
            self.pipes.append(parent)
            self.sample_scale.append(len(assignments))

    def snapshot(self) -> tuple[float, int, bool]:
        """(estimated Fetch requests sent by all consumers so far, records
        consumed, whether every sampled consumer has fetched)."""
        for pipe in self.pipes:
            pipe.send("snap")
        fetches = 0.0
        records = 0
        every = True
        for pipe, scale in zip(self.pipes, self.sample_scale):
            if not pipe.poll(30):
                raise TimeoutError("a consumer process stopped answering")
            sampled, consumed, fetching = pipe.recv()
            fetches += sampled * scale
            records += consumed
            every = every and fetching
        return fetches, records, every

    def stop(self) -> None:
        for pipe in self.pipes:
            try:
                pipe.send("stop")
            except OSError:
                pass
        for proc in self.procs:
            proc.join(20)
            if proc.is_alive():
                proc.kill()
                proc.join()


def _user_system(pid: int) -> tuple[float, float]:
    """(user, system) CPU-seconds of ``pid``: system is mostly the
    socket syscalls (loopback sends deliver to the peer inside them)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def _window(broker_pid: int, consumers: Consumers, metrics_port: int | None, seconds: float):
    fetch0, records0, _ = consumers.snapshot()
    served0 = _kfast_fetch_requests(metrics_port)
    user0, system0 = _user_system(broker_pid)
    cpu0, t0 = cpu_seconds(broker_pid), time.monotonic()
    time.sleep(seconds)  # the measured interval itself
    cpu1, t1 = cpu_seconds(broker_pid), time.monotonic()
    user1, system1 = _user_system(broker_pid)
    served1 = _kfast_fetch_requests(metrics_port)
    fetch1, records1, _ = consumers.snapshot()
    elapsed = t1 - t0
    out = {
        "seconds": round(elapsed, 2),
        "broker_cpu_pct": round(100 * (cpu1 - cpu0) / elapsed, 2),
        "user_pct": round(100 * (user1 - user0) / elapsed, 2),
        "system_pct": round(100 * (system1 - system0) / elapsed, 2),
        "fetch_per_s_clients": round((fetch1 - fetch0) / elapsed, 1),
        "records_consumed": records1 - records0,
        "loadavg_1m": os.getloadavg()[0],
    }
    if served0 is not None and served1 is not None:
        out["fetch_per_s_broker"] = round((served1 - served0) / elapsed, 1)
    return out


def profile(pid: int, path: str, seconds: float, native: bool = False) -> list[tuple[str, float]]:
    """py-spy (sampling; C frames too with ``native``) over the idle broker
    for ``seconds``: collapsed stacks to ``path``; returns the 25 functions
    with the most inclusive samples, as % of all samples."""
    import subprocess
    from collections import Counter

    subprocess.run(
        ["py-spy", "record", "-p", str(pid), "-d", str(int(seconds)), "-r", "500"]
        + ["-f", "raw", "-o", path]
        # py-spy reads C stacks only from a stopped process.
        + (["--native"] if native else ["--nonblocking"]),
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=seconds + 60,
    )
    inclusive: Counter[str] = Counter()
    total = 0
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip().rpartition(" ")
            n = int(count)
            total += n
            for frame in set(stack.split(";")):
                inclusive[frame] += n
    return [(frame, round(100 * n / total, 1)) for frame, n in inclusive.most_common(25)]


def run_one(kind: str, args: argparse.Namespace) -> dict:
    import multiprocessing as mp

    is_kfast = kind == "kfast" or kind.startswith("kfast@")
    metrics_port = free_port() if is_kfast else None
    overrides = (f"kfast.metrics.port={metrics_port}",) if metrics_port else ()
    launcher = kfast_launcher(kfast_tree(kind)) if is_kfast else ()
    broker = "kfast" if is_kfast else kind
    with run_broker(broker, overrides, launcher=launcher) as (proc, bootstrap, _ready):
        create_topic(bootstrap, TOPIC, args.partitions)
        time.sleep(args.settle_seconds)  # topic creation's own work passes
        # The broker's own background work with the topic and no client.
        with bench_lock():
            cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
            time.sleep(args.settle_seconds * 2)  # the measured interval
            no_clients = 100 * (cpu_seconds(proc.pid) - cpu0) / (time.monotonic() - t0)
        consumers = Consumers(bootstrap, args)
        try:
            deadline = time.monotonic() + READY_TIMEOUT
            while not consumers.snapshot()[2]:
                if time.monotonic() > deadline:
                    raise TimeoutError("consumers did not start fetching")
                time.sleep(0.5)  # statistics arrive once a second
            time.sleep(args.settle_seconds)  # the first full fetches and offset lookups pass
            result: dict = {"broker": kind, "no_clients_cpu_pct": round(no_clients, 2)}
            with bench_lock():
                result["idle"] = _window(proc.pid, consumers, metrics_port, args.idle_seconds)
            if args.profile and is_kfast:
                # After the measured window: the sampler's own cost stays out of it.
                path = args.profile
                if kind != "kfast":  # one file per tree
                    path += "." + os.path.basename(kind.split("@", 1)[1].rstrip("/"))
                result["idle_profile"] = profile(
                    proc.pid, path, args.idle_seconds, args.profile_native
                )
            ctx = mp.get_context("spawn")
            parent, child = ctx.Pipe()
            producer = ctx.Process(
                target=_producer_worker,
                args=(
                    bootstrap,
                    args.partitions,
                    args.produce_rate,
                    args.produce_seconds + 4,
                    child,
                ),
                daemon=True,
            )
            producer.start()
            try:
                if not parent.poll(60):
                    raise TimeoutError("producer not ready")
                parent.recv()
                # The lock first, then the producer: it produces for a fixed
                # time from "go", so a window that waited for another
                # benchmark's lock measured no produce phase at all.
                with bench_lock():
                    parent.send("go")
                    time.sleep(2)  # the producer's rate and the consumers' wake-ups settle
                    result["produce"] = _window(
                        proc.pid, consumers, metrics_port, args.produce_seconds
                    )
                delivered = parent.recv() if parent.poll(60) else None
                result["produce"]["records_delivered"] = delivered
                if delivered is not None:
                    # Every record produced is consumed (nothing was before).
                    deadline = time.monotonic() + 30
                    while (total := consumers.snapshot()[1]) < delivered["ok"]:
                        if time.monotonic() > deadline:
                            break
                        time.sleep(0.5)
                    result["produce"]["records_consumed_total"] = total
            finally:
                producer.join(30)
                if producer.is_alive():
                    producer.kill()
                    producer.join()
        finally:
            consumers.stop()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--brokers",
        default="kfast,tansu",
        help="kfast (this tree), tansu, or kfast@PATH: kfast from another source tree "
        "(a before/after in the same run)",
    )
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--consumers", type=int, default=100)
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--max-wait-ms", type=int, default=500)
    parser.add_argument("--idle-seconds", type=float, default=30)
    parser.add_argument("--settle-seconds", type=float, default=5)
    parser.add_argument("--produce-rate", type=int, default=100)
    parser.add_argument("--produce-seconds", type=float, default=20)
    parser.add_argument(
        "--client",
        choices=("confluent", "kafka-python"),
        default="confluent",
        help="librdkafka sends full fetches; kafka-python incremental fetch sessions",
    )
    parser.add_argument("--json")
    parser.add_argument(
        "--profile", help="collapsed py-spy stacks of the idle kfast broker to this file"
    )
    parser.add_argument(
        "--profile-native", action="store_true", help="--profile with C frames (py-spy --native)"
    )
    args = parser.parse_args()
    results = {}
    for kind in args.brokers.split(","):
        results[kind] = run_one(kind, args)
        print(json.dumps(results[kind]), file=sys.stderr)
    out = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "args": vars(args),
        "results": results,
    }
    if "kfast" in results and "tansu" in results:
        out["kfast_over_tansu_cpu"] = {
            phase: round(
                results["kfast"][phase]["broker_cpu_pct"]
                / max(results["tansu"][phase]["broker_cpu_pct"], 1e-9),
                2,
            )
            for phase in ("idle", "produce")
        }
    print(
        "| broker | no clients CPU % | idle CPU % of a core | Fetch/s (clients) "
        "| Fetch/s (broker) | produce CPU % | Fetch/s | records consumed |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for kind, r in results.items():
        idle, prod = r["idle"], r["produce"]
        print(
            f"| {kind} | {r['no_clients_cpu_pct']} | {idle['broker_cpu_pct']} "
            f"| {idle['fetch_per_s_clients']} "
            f"| {idle.get('fetch_per_s_broker', '-')} | {prod['broker_cpu_pct']} "
            f"| {prod['fetch_per_s_clients']} | {prod['records_consumed']} |"
        )
    for kind, r in results.items():
        if "idle_profile" in r:
            print(f"\n{kind} idle profile (inclusive % of samples):")
            for frame, pct in r["idle_profile"]:
                print(f"  {pct:5.1f}  {frame}")
    if "kfast_over_tansu_cpu" in out:
        print("kfast/Tansu CPU:", out["kfast_over_tansu_cpu"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
