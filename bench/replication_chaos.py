#!/usr/bin/env python3
"""Replication chaos: a fault on a random node every 10 s for two minutes
under idempotent acks=all load, then check every acknowledged record
(issue 17's "done when"; the suite runs short versions,
tests/e2e/test_replication.py and tests/e2e/test_replication_chaos.py).

    python3 bench/replication_chaos.py [--seconds 120] [--every 10]
                                       [--faults kill,pause,isolate,replication,slow,one-way]
                                       [--partitions 6] [--seed 1] [--json out.json]

Three combined ``kfast serve`` nodes on 127.0.0.1 (every node broker and
controller: a killed node can be the active controller too), a topic with
--partitions partitions, replication factor 3, min.insync.replicas 2. One
confluent-kafka producer (enable.idempotence, acks=all) writes continuously.
Every --every seconds a random node gets a fault drawn from --faults
(kfast.testing.chaos.FAULTS; default kill), undone --every/2 seconds later,
so at most one node is faulty at a time:

- kill: kill -9, then a restart;
- pause: SIGSTOP, then SIGCONT (a node frozen by a stalled disk: a leader
  that wakes up still believing it leads);
- isolate: every link to and from the node's controller and replication
  listeners drops its bytes or resets its connections, while clients still
  reach the node (a leader cut off from its followers and the quorum);
- replication: only the node's replica fetches are cut (a live, heartbeating
  follower that falls out of the ISRs and comes back);
- slow: the node's replica fetches are delayed 50-500 ms each way;
- one-way: what the node opens to one other node drops, while that node
  still reaches it.

The network faults route replication through FaultProxy links
(KfastCluster(replication_links=True)). Afterwards, with every node back and
every ISR full:

- every acknowledged record is read back exactly once, at the offset its
  acknowledgement named (no loss, no duplicate, per-partition order);
- the three replicas of every partition are byte-identical.

Prints the counts, the producer's errors (none expected: a record is
retried until acknowledged), and the longest stretch without an
acknowledgement and when it began (seconds into the run, to match with the
fault log). Exits 1 if a check fails. Bounded by --seconds plus the
final checks' timeouts; loopback only; the cluster is removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from confluent_kafka.admin import AdminClient, NewTopic

from kfast.testing.chaos import FAULTS, chaos_overrides, inflict, needs_links, undo
from kfast.testing.cluster import KfastCluster
from kfast.testing.load import AckedLoad, audit, read_back


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--every", type=float, default=10)
    parser.add_argument("--faults", default="kill", help=f"comma-separated, from {FAULTS}")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json")
    args = parser.parse_args()
    faults = args.faults.split(",")
    unknown = set(faults) - set(FAULTS)
    if unknown:
        parser.error(f"unknown faults {sorted(unknown)}: choose from {FAULTS}")
    rng = random.Random(args.seed)
    topic, partitions = "chaos", args.partitions
    links = needs_links(faults)
    with KfastCluster(
        controllers=3, combined=True, overrides=chaos_overrides(links), replication_links=links
    ) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic(topic, partitions, 3, config={"min.insync.replicas": "2"})])[
            topic
        ].result(30)
        cluster.wait_until(
            lambda: (
                len(cluster.partition_state(topic)) == partitions
                and all(len(p.isr) == 3 for p in cluster.partition_state(topic).values())
            ),
            30,
            "the topic",
        )
        load = AckedLoad(cluster.bootstrap_servers, topic, partitions).start()
        inflicted = []
        began = time.monotonic()
        try:
            while time.monotonic() - began < args.seconds:
                time.sleep(args.every / 2)
                fault, victim = rng.choice(faults), rng.choice(sorted(cluster.nodes))
                what = inflict(cluster, fault, victim, rng)
                inflicted.append(what)
                print(
                    f"{time.monotonic() - began:6.1f} s  {what}, {load.total} acknowledged",
                    flush=True,
                )
                time.sleep(args.every / 2)
                undo(cluster, fault, victim)
        finally:
            load.stop(120)
        print(f"load stopped: {load.total} acknowledged; checking", flush=True)
        cluster.wait_until(
            lambda: all(len(p.isr) == 3 for p in cluster.partition_state(topic).values()),
            60,
            "full ISRs",
        )
        total = load.total
        read = read_back(cluster.bootstrap_servers, topic, partitions, total, timeout=120)
        print(f"read back {sum(map(len, read.values()))} records", flush=True)
        lost, duplicated, moved = audit(load.acked, read)
        diverged = []
        for p in range(partitions):
            try:
                cluster.wait_for_identical_replicas(topic, p, tuple(cluster.nodes), 60)
            except TimeoutError:
                diverged.append(p)
        # (gap, when it began): the longest one is matched with the fault log.
        gaps = [(b - a, a - began) for a, b in zip(load.ack_times, load.ack_times[1:])]
        longest = max(gaps, default=(0.0, 0.0))
        report = {
            "seconds": args.seconds,
            "faults": inflicted,
            "acknowledged": total,
            "read": sum(map(len, read.values())),
            "lost": lost,
            "duplicated": duplicated,
            "not_at_acknowledged_offset": moved,
            "diverged_partitions": diverged,
            "producer_errors": len(load.failures),
            "longest_ack_gap_ms": round(longest[0] * 1000),
            "longest_ack_gap_began_at_s": round(longest[1], 1),
        }
        print(json.dumps(report, indent=2))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=2)
        return 1 if lost or duplicated or moved or diverged or load.failures else 0


if __name__ == "__main__":
    sys.exit(main())
