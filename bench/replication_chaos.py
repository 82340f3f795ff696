#!/usr/bin/env python3
"""Replication chaos: kill -9 a random broker every 10 s for two minutes
under idempotent acks=all load, then check every acknowledged record
(issue 17's "done when"; the suite runs a three-round version,
tests/e2e/test_replication.py).

    python3 bench/replication_chaos.py [--seconds 120] [--every 10]
                                       [--partitions 6] [--seed 1] [--json out.json]

Three combined ``kfast serve`` nodes on 127.0.0.1 (every node broker and
controller: a killed node can be the active controller too), a topic with
--partitions partitions, replication factor 3, min.insync.replicas 2. One
confluent-kafka producer (enable.idempotence, acks=all) writes continuously.
Every --every seconds a random node is killed with kill -9 and restarted
--every/2 seconds later (so at most one is down at a time). Afterwards, with
every node back and every ISR full:

- every acknowledged record is read back exactly once, at the offset its
  acknowledgement named (no loss, no duplicate, per-partition order);
- the three replicas of every partition are byte-identical.

Prints the counts, the producer's errors (none expected: a record is
retried until acknowledged), and the longest stretch without an
acknowledgement. Exits 1 if a check fails. Bounded by --seconds plus the
final checks' timeouts; loopback only; the cluster is removed at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kfast.testing.cluster import KfastCluster  # noqa: E402

FAST_SESSIONS = {"broker.session.timeout.ms": 2000, "broker.heartbeat.interval.ms": 200}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--every", type=float, default=10)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    topic, partitions = "chaos", args.partitions
    with KfastCluster(controllers=3, combined=True, overrides=FAST_SESSIONS) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic(topic, partitions, 3, config={
            "min.insync.replicas": "2"})])[topic].result(30)
        cluster.wait_until(lambda: len(cluster.partition_state(topic)) == partitions and all(
            len(p.isr) == 3 for p in cluster.partition_state(topic).values()), 30, "the topic")
        acked: dict[int, list] = {p: [] for p in range(partitions)}
        ack_times: list[float] = []
        failures: list[str] = []
        stop = threading.Event()

        def on_delivery(err, message):
            if err:
                failures.append(str(err))
            else:
                acked[message.partition()].append((message.offset(), message.value().decode()))
                ack_times.append(time.monotonic())

        def produce():
            producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                                 "enable.idempotence": True, "linger.ms": 5})
            i = 0
            while not stop.is_set():
                try:
                    producer.produce(topic, value=f"v{i}", partition=i % partitions,
                                     on_delivery=on_delivery)
                    i += 1
                except BufferError:
                    producer.poll(0.05)
                producer.poll(0)
                if i % 50 == 0:
                    time.sleep(0.005)
            producer.flush(120)

        thread = threading.Thread(target=produce)
        thread.start()
        kills = []
        began = time.monotonic()
        try:
            while time.monotonic() - began < args.seconds:
                time.sleep(args.every / 2)
                victim = rng.choice(sorted(cluster.nodes))
                kills.append(victim)
                print(f"{time.monotonic() - began:6.1f} s  kill -9 node {victim}, "
                      f"{sum(map(len, acked.values()))} acknowledged", flush=True)
                cluster.kill(victim)
                time.sleep(args.every / 2)
                cluster.restart(victim)
        finally:
            stop.set()
            thread.join(180)
        print(f"load stopped: {sum(map(len, acked.values()))} acknowledged; checking",
              flush=True)
        cluster.wait_until(lambda: all(len(p.isr) == 3 for p in
                                       cluster.partition_state(topic).values()), 60, "full ISRs")
        total = sum(map(len, acked.values()))
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                             "group.id": "chaos-check", "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        read: dict[int, list] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + 120
        while sum(map(len, read.values())) < total and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                read[message.partition()].append((message.offset(), message.value().decode()))
        consumer.close()
        print(f"read back {sum(map(len, read.values()))} records", flush=True)
        lost = duplicated = moved = 0
        for p in range(partitions):
            values = [v for _, v in read[p]]
            present = set(values)
            duplicated += len(values) - len(present)
            at = dict(read[p])
            lost += sum(1 for _, v in acked[p] if v not in present)
            moved += sum(1 for o, v in acked[p] if at.get(o) != v)
        diverged = []
        for p in range(partitions):
            try:
                cluster.wait_for_identical_replicas(topic, p, tuple(cluster.nodes), 60)
            except TimeoutError:
                diverged.append(p)
        gaps = [b - a for a, b in zip(ack_times, ack_times[1:])]
        report = {"seconds": args.seconds, "kills": kills, "acknowledged": total,
                  "read": sum(map(len, read.values())), "lost": lost,
                  "duplicated": duplicated, "not_at_acknowledged_offset": moved,
                  "diverged_partitions": diverged, "producer_errors": len(failures),
                  "longest_ack_gap_ms": round(max(gaps, default=0) * 1000)}
        print(json.dumps(report, indent=2))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=2)
        return 1 if lost or duplicated or moved or diverged or failures else 0


if __name__ == "__main__":
    sys.exit(main())
