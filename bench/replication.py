#!/usr/bin/env python3
"""Replication: RF 3 vs RF 1 produce, leader failover, controlled shutdown
(issue 17).

    python3 bench/replication.py [--records 200000] [--latency-records 2000]
                                 [--trials 30] [--shutdown-trials 10]
                                 [--max-seconds 900] [--json out.json]

Real ``kfast serve`` processes on 127.0.0.1 (kfast.testing.cluster): a
3-node combined cluster (every node broker + controller) and, in the same
run, a 1-broker one (a controller process and a broker process: the same
code with no follower to wait for), the producer
confluent-kafka (librdkafka), records of 100 bytes.

throughput: --records records into a 6-partition topic, RF 3 with
    min.insync.replicas 2 and acks=all, against RF 1 with acks=1 on the
    1-broker cluster; the two alternate in two rounds and the better round of
    each is reported. Also the leader processes' CPU seconds per GB
    produced (/proc utime+stime of every broker of the cluster), which for
    RF 3 includes serving the followers' fetches (FileRegions, sendfile).
latency: --latency-records records one at a time (produce, flush),
    p50/p99 of each round trip, same two set-ups.
failover: --trials times, an idempotent acks=all producer writes a record
    every 2 ms to a 1-partition RF 3 topic; the partition leader is killed
    with kill -9; unavailability = from the kill to the first acknowledgement
    of a record produced after it. The broker is restarted and the ISR must
    be full again before the next trial.
controlled shutdown: the same with SIGTERM (the broker moves its
    leaderships before it stops); the stall is the longest gap between two
    acknowledgements from the signal until 1 s after the broker exited.

No peer here replicates (Tansu 0.6 has no replication); the figures are
compared with the RF 1 run of the same code and with Kafka's documented
targets in bench/README.md.

Bounded: the counts above and --max-seconds for the whole run (trials stop
early and say so); loopback only; the clusters' context managers kill and
remove everything they started.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kfast.testing.cluster import KfastCluster

FAST_SESSIONS = {"broker.session.timeout.ms": 2000, "broker.heartbeat.interval.ms": 200}
VALUE = b"x" * 100
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(cluster: KfastCluster) -> float:
    total = 0.0
    for node in cluster.nodes.values():
        if node.alive:
            with open(f"/proc/{node.process.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return total


def create(cluster: KfastCluster, name: str, partitions: int, rf: int) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics(
        [NewTopic(name, partitions, rf, config={"min.insync.replicas": str(min(rf, 2))})]
    )[name].result(30)
    cluster.wait_until(
        lambda: (
            len(cluster.partition_state(name)) == partitions
            and all(
                len(p.isr) == rf and p.leader >= 0 for p in cluster.partition_state(name).values()
            )
        ),
        30,
        f"{name} in sync",
    )


def throughput(cluster, topic: str, records: int, acks) -> tuple[float, float]:
    """(records/s, CPU seconds per GB of record values)."""
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    producer.produce(topic, VALUE)
    producer.flush(30)
    cpu0 = cpu_seconds(cluster)
    began = time.perf_counter()
    for _ in range(records):
        try:
            producer.produce(topic, VALUE)
        except BufferError:
            producer.poll(0.01)
            producer.produce(topic, VALUE)
        producer.poll(0)
    assert producer.flush(120) == 0
    elapsed = time.perf_counter() - began
    cpu = cpu_seconds(cluster) - cpu0
    return records / elapsed, cpu / (records * len(VALUE) / 1e9)


def latency(cluster, topic: str, records: int, acks) -> list[float]:
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": acks, "linger.ms": 0}
    )
    producer.produce(topic, VALUE, partition=0)
    producer.flush(30)
    samples = []
    for _ in range(records):
        began = time.perf_counter()
        producer.produce(topic, VALUE, partition=0)
        producer.flush(30)
        samples.append((time.perf_counter() - began) * 1000)
    return samples


def percentile(samples, q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Pacer:
    """An idempotent acks=all producer writing one record every 2 ms,
    timestamping each record's send and acknowledgement."""

    def __init__(self, cluster, topic: str, retry_backoff_ms: int = 100):
        self.acks: list[tuple[float, float]] = []  # (sent, acked)
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
                "retry.backoff.ms": retry_backoff_ms,
            }
        )
        self._topic = topic
        self._thread = threading.Thread(target=self._run)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            sent = time.monotonic()
            self._producer.produce(
                self._topic,
                VALUE,
                on_delivery=(
                    lambda err, _m, sent=sent: (
                        self.errors.append(str(err))
                        if err
                        else self.acks.append((sent, time.monotonic()))
                    )
                ),
            )
            self._producer.poll(0.002)
        self._producer.flush(30)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


def wait_full_isr(cluster, topic: str) -> None:
    cluster.wait_until(
        lambda: all(len(p.isr) == 3 for p in cluster.partition_state(topic).values()),
        30,
        "a full ISR",
    )


def failover_trials(
    cluster, trials: int, deadline: float, graceful: bool, retry_backoff_ms: int = 100
) -> list[float]:
    topic = f"shutdown-{retry_backoff_ms}" if graceful else "failover"
    create(cluster, topic, 1, 3)
    pacer = Pacer(cluster, topic, retry_backoff_ms)
    results = []
    try:
        cluster.wait_until(lambda: len(pacer.acks) > 50, 15, "the producer running")
        for _ in range(trials):
            if time.monotonic() > deadline:
                print(f"  stopped after {len(results)} trials (--max-seconds)")
                break
            leader = cluster.partition_state(topic)[0].leader
            time.sleep(0.3)
            signalled = time.monotonic()
            if graceful:
                cluster.stop(leader)
                exited = time.monotonic()
                cluster.wait_until(lambda: pacer.acks[-1][1] > exited + 1.0, 15, "acks after")
                window = [acked for _, acked in pacer.acks if acked >= signalled - 0.1]
                gaps = [b - a for a, b in zip(window, window[1:])]
                results.append(max(gaps) * 1000 if gaps else 0.0)
            else:
                cluster.kill(leader)
                cluster.wait_until(
                    lambda: any(s > signalled for s, _ in pacer.acks[-50:]),
                    30,
                    "an ack after the kill",
                )
                first = min(a for s, a in pacer.acks[-200:] if s > signalled)
                results.append((first - signalled) * 1000)
            cluster.start_node(leader)
            cluster.wait_listening(leader)
            wait_full_isr(cluster, topic)
    finally:
        pacer.stop()
    if pacer.errors:
        print(f"  producer errors: {pacer.errors[:3]} ({len(pacer.errors)})")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--latency-records", type=int, default=2000)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--shutdown-trials", type=int, default=10)
    parser.add_argument("--max-seconds", type=float, default=900)
    parser.add_argument("--json")
    args = parser.parse_args()
    deadline = time.monotonic() + args.max_seconds
    report: dict = {}
    with (
        KfastCluster(controllers=3, combined=True, overrides=FAST_SESSIONS) as three,
        KfastCluster(controllers=1, brokers=1, overrides=FAST_SESSIONS) as one,
    ):
        create(three, "rf3", 6, 3)
        create(one, "rf1", 6, 1)
        rounds = {"rf3_acks_all": [], "rf1_acks_1": []}
        for _ in range(2):
            rounds["rf1_acks_1"].append(throughput(one, "rf1", args.records, 1))
            rounds["rf3_acks_all"].append(throughput(three, "rf3", args.records, "all"))
        for name, results in rounds.items():
            rate, cpu = max(results)
            report[name] = {"records_per_s": round(rate), "cpu_s_per_gb": round(cpu, 1)}
            print(f"{name:14s} {rate:12,.0f} records/s  {cpu:7.1f} CPU s/GB (all brokers)")
        ratio = report["rf3_acks_all"]["records_per_s"] / report["rf1_acks_1"]["records_per_s"]
        report["rf3_over_rf1"] = round(ratio, 2)
        print(f"RF 3 / RF 1 throughput: {ratio:.2f}x")
        for name, cluster, topic, acks in (
            ("rf1_acks_1", one, "rf1", 1),
            ("rf3_acks_all", three, "rf3", "all"),
        ):
            samples = latency(cluster, topic, args.latency_records, acks)
            report[name]["latency_ms"] = {
                "p50": round(percentile(samples, 0.5), 3),
                "p99": round(percentile(samples, 0.99), 3),
            }
            print(
                f"{name:14s} latency p50 {percentile(samples, 0.5):.3f} ms  "
                f"p99 {percentile(samples, 0.99):.3f} ms"
            )
        # Controlled shutdown twice: librdkafka waits retry.backoff.ms
        # (100 ms by default) before resending a batch refused with
        # NOT_LEADER_OR_FOLLOWER, which floors the stall it sees; at 10 ms
        # the broker's part shows.
        for name, graceful, trials, backoff in (
            ("failover_kill_9", False, args.trials, 100),
            ("controlled_shutdown", True, args.shutdown_trials, 100),
            ("controlled_shutdown_retry_backoff_10ms", True, args.shutdown_trials, 10),
        ):
            results = failover_trials(three, trials, deadline, graceful, backoff)
            if results:
                report[name] = {
                    "trials": len(results),
                    "p50_ms": round(statistics.median(results), 1),
                    "max_ms": round(max(results), 1),
                }
                print(
                    f"{name:20s} {len(results)} trials: p50 {statistics.median(results):.1f}"
                    f" ms, max {max(results):.1f} ms"
                )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
