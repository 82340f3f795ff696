"""Replication traffic through fault proxies (issue 17, fault tooling): a
KfastCluster with ``replication_links=True`` routes every replica fetch over
a FaultProxy per (follower, leader) pair, so a test can cut, slow or
partition replication while every process stays up, registered and
heartbeating -- faults a kill or a SIGSTOP cannot produce. Seen by real
clients: kafka-python and confluent-kafka producers with acks=all.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from kafka import KafkaProducer
from kafka.errors import NotEnoughReplicasAfterAppendError, NotEnoughReplicasError
from replication_support import create, read_all

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(180)]

LINKED = pytest.mark.kfast_cluster_config(
    controllers=1,
    brokers=3,
    replication_links=True,
    overrides={
        # The controller never fences anyone here: only the leaders' view
        # of their followers (replica.lag.time.max.ms) moves the ISRs.
        "broker.session.timeout.ms": 30000,
        "replica.lag.time.max.ms": 1500,
        # A fetch lost in a dropping link is given up after this, and the
        # follower reconnects (Kafka's default is 30 s).
        "replica.socket.timeout.ms": 3000,
    },
)


def acks_all_producer(cluster, **kwargs) -> KafkaProducer:
    return KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers, acks="all", request_timeout_ms=10000, **kwargs
    )


@LINKED
def test_a_follower_cut_off_from_replication_leaves_the_isr_and_rejoins(kfast_cluster):
    """stop_replication: a live follower's fetches vanish; acks=all stalls
    until the leader drops it after replica.lag.time.max.ms, then goes on
    with two in-sync replicas; once the link heals the follower catches up
    and rejoins, its replica byte-identical."""
    cluster = kfast_cluster
    create(cluster, "cut")
    state = cluster.partition_state("cut")[0]
    follower = next(n for n in state.replicas if n != state.leader)
    cluster.stop_replication(follower)
    producer = acks_all_producer(cluster, retries=0)
    started = time.monotonic()
    first = producer.send("cut", b"first").get(15)
    stalled = time.monotonic() - started
    futures = [producer.send("cut", f"v{i}".encode()) for i in range(100)]
    producer.flush(15)
    assert first.offset == 0 and [f.get(1).offset for f in futures] == list(range(1, 101))
    # The first acks=all write waited for the cut follower until the ISR
    # shrank (replica.lag.time.max.ms 1.5 s); without the cut it takes ms.
    assert stalled >= 1.0
    assert set(cluster.partition_state("cut")[0].isr) == set(state.replicas) - {follower}
    assert follower in cluster.brokers()  # up and registered all along
    cluster.resume_replication(follower)
    cluster.wait_for_isr("cut", 0, set(state.replicas), 20)
    data = cluster.wait_for_identical_replicas("cut", 0, state.replicas, 15)
    assert data.count(b"v99") == 1
    producer.close()


@LINKED
def test_a_leader_partitioned_from_its_followers_refuses_acks_all(kfast_cluster):
    """The leader keeps its controller session but loses both followers'
    replication: its ISR shrinks to itself, acks=all is refused with
    NOT_ENOUGH_REPLICAS (min.insync.replicas 2) while acks=1 is accepted;
    after the heal both followers rejoin and acks=all works again."""
    cluster = kfast_cluster
    create(cluster, "alone")
    state = cluster.partition_state("alone")[0]
    followers = [n for n in state.replicas if n != state.leader]
    for follower in followers:
        cluster.replication_link(follower, state.leader).set_mode("drop")
    producer = acks_all_producer(cluster, retries=0)
    # A write makes the followers fall behind (idle followers stay in
    # sync); it waits, and the ISR shrinks under it (written, but
    # NOT_ENOUGH_REPLICAS_AFTER_APPEND); from then on acks=all is refused
    # before the append.
    refused = []
    for i in range(20):
        try:
            producer.send("alone", f"try{i}".encode()).get(15)
        except NotEnoughReplicasAfterAppendError:
            continue
        except NotEnoughReplicasError:
            refused.append(i)
            break
    assert refused
    assert set(cluster.partition_state("alone")[0].isr) == {state.leader}
    assert cluster.partition_state("alone")[0].leader == state.leader
    one = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks=1)
    assert one.send("alone", b"acks-1").get(10).offset >= 1
    one.close()
    cluster.heal()
    cluster.wait_for_isr("alone", 0, set(state.replicas), 20)
    assert producer.send("alone", b"healed").get(15).offset >= 2
    producer.close()
    cluster.wait_for_identical_replicas("alone", 0, state.replicas, 15)


@LINKED
def test_acks_all_waits_for_a_slow_in_sync_follower(kfast_cluster):
    """slow_replication: a follower whose link delays every chunk by 0.3 s
    stays in sync (it keeps fetching within replica.lag.time.max.ms), and
    acks=all waits for it -- as in Kafka, the slowest in-sync replica sets
    the acknowledgement latency; after resume_replication latency drops."""
    cluster = kfast_cluster
    create(cluster, "slow")
    state = cluster.partition_state("slow")[0]
    follower = next(n for n in state.replicas if n != state.leader)
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 0}
    )

    def latencies(count: int) -> list[float]:
        seen = []
        for i in range(count):
            started = time.monotonic()
            producer.produce(
                "slow",
                value=f"x{i}",
                on_delivery=lambda err, m: seen.append(err or time.monotonic() - started),
            )
            producer.flush(15)
        assert all(isinstance(s, float) for s in seen), seen
        return sorted(seen)

    latencies(3)  # connections warmed up
    cluster.slow_replication(follower, 0.3)
    slow = latencies(6)
    assert set(cluster.partition_state("slow")[0].isr) == set(state.replicas)
    cluster.resume_replication(follower)
    fast = latencies(6)
    assert slow[len(slow) // 2] >= 0.3  # waited for the follower
    assert fast[len(fast) // 2] < 0.3
    assert len(read_all(cluster.bootstrap_servers, "slow", 1, 15)[0]) == 15
