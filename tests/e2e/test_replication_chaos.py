"""Chaos on three combined nodes with replication through fault proxies,
the short version of ``bench/replication_chaos.py --faults ...``: one fault
at a time on a random node (kill -9, SIGSTOP, isolation from the quorum and
the other replicas with clients still connected, cut or slowed replica
fetches, links cut one way; kfast.testing.chaos), each undone after a
while, under an idempotent acks=all producer (confluent-kafka). Every kind
of fault comes once, then one more at random. Afterwards every
acknowledged record is read back exactly once at the offset its
acknowledgement named, and the three replicas of every partition are byte
for byte the same.
"""

from __future__ import annotations

import random
import time

import pytest
from replication_support import create, read_all

from kfast.testing.chaos import FAULTS, chaos_overrides, inflict, undo
from kfast.testing.load import AckedLoad, Audit, audit

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

EXTRA_ROUNDS = 1  # random faults after one of each kind
FAULT_SECONDS = 3.0


@pytest.mark.kfast_cluster_config(
    combined=True, replication_links=True, overrides=chaos_overrides(links=True)
)
@pytest.mark.parametrize("seed", [21])
def test_every_acknowledged_record_survives_a_run_of_random_faults(kfast_cluster, seed):
    cluster = kfast_cluster
    topic, partitions = "chaos", 3
    create(cluster, topic, partitions)
    rng = random.Random(seed)
    # Every kind of fault at least once, in a seeded order, then random ones.
    faults = rng.sample(FAULTS, len(FAULTS)) + [rng.choice(FAULTS) for _ in range(EXTRA_ROUNDS)]
    load = AckedLoad(cluster.bootstrap_servers, topic, partitions, pause_s=0.01).start()
    done = []
    try:
        for fault in faults:
            before = load.total
            cluster.wait_until(lambda: load.total > before + 100, 30, "acknowledgements")
            victim = rng.choice(sorted(cluster.nodes))
            done.append(inflict(cluster, fault, victim, rng))
            time.sleep(FAULT_SECONDS)  # the fault lasts a while: nothing to await
            undo(cluster, fault, victim)
    finally:
        load.stop(90)
    assert load.failures == [] and load.unflushed == 0, done
    cluster.wait_until(
        lambda: all(len(p.isr) == 3 for p in cluster.partition_state(topic).values()),
        60,
        "full ISRs",
    )
    read = read_all(cluster.bootstrap_servers, topic, partitions, load.total)
    assert audit(load.acked, read) == Audit(lost=0, duplicated=0, moved=0), done
    for p in range(partitions):
        cluster.wait_for_identical_replicas(topic, p, (1, 2, 3), 30)
