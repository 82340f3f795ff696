"""Topic changes cluster-wide on a 3-broker cluster of real processes:
CreatePartitions gives the new partitions replicas on every assigned broker
(in sync, replicating), and deleting a topic takes its replicas away on
every broker -- a topic created again under the same name starts empty
everywhere."""

from __future__ import annotations

import os

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions
from replication_support import create, read_all

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(180),
    pytest.mark.kfast_cluster_config(controllers=1, brokers=3),
]

BROKERS = (2, 3, 4)


def live_replicas(cluster, node: int, topic: str) -> set[int]:
    """Partitions of ``topic`` with a live (not being deleted) log on ``node``."""
    data = os.path.join(cluster.nodes[node].data_dir, "data")
    found = set()
    for name in os.listdir(data):
        base, _, index = name.rpartition("-")
        if base == topic and index.isdigit():
            found.add(int(index))
    return found


def produce(cluster, topic: str, partitions: int, prefix: str) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(partitions * 10):
        producer.produce(topic, value=f"{prefix}{i}", partition=i % partitions)
    assert producer.flush(30) == 0


def test_create_partitions_and_delete_topic_on_every_broker(kfast_cluster):
    cluster = kfast_cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    create(cluster, "grown", partitions=2)
    produce(cluster, "grown", 2, "a")
    admin.create_partitions([NewPartitions("grown", 4)])["grown"].result(30)
    cluster.wait_until(
        lambda: (
            len(cluster.partition_state("grown")) == 4
            and all(len(p.isr) == 3 for p in cluster.partition_state("grown").values())
        ),
        20,
        "four partitions with three in-sync replicas",
    )
    cluster.wait_until(
        lambda: all(live_replicas(cluster, n, "grown") == {0, 1, 2, 3} for n in BROKERS),
        20,
        "a replica of each on every broker",
    )
    produce(cluster, "grown", 4, "b")
    got = read_all(cluster.bootstrap_servers, "grown", 4, 60)
    assert sum(map(len, got.values())) == 60 and all(got[p] for p in range(4))
    for p in (2, 3):
        data = cluster.wait_for_identical_replicas("grown", p, BROKERS, 15)
        assert data.count(b"b") >= 10

    admin.delete_topics(["grown"])["grown"].result(30)
    cluster.wait_until(
        lambda: not any(live_replicas(cluster, n, "grown") for n in BROKERS),
        20,
        "the replicas gone from every broker",
    )
    # The same name again: new, empty partitions everywhere.
    create(cluster, "grown", partitions=2)
    produce(cluster, "grown", 2, "c")
    got = read_all(cluster.bootstrap_servers, "grown", 2, 20)
    assert sorted(v for rows in got.values() for _, v in rows) == sorted(f"c{i}" for i in range(20))
    assert all(offsets[0][0] == 0 for offsets in got.values())
