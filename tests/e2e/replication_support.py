"""Helpers of the replication tests (test_replication*.py): topics with
three in-sync replicas, reading a topic back whole, producers bootstrapped
from one broker or all."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer

from kfast.testing.load import read_back as read_all  # noqa: F401 (the tests' name)


def create(cluster, name: str, partitions: int = 1, min_insync: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics(
        [NewTopic(name, partitions, 3, config={"min.insync.replicas": str(min_insync)})]
    )[name].result(30)
    cluster.wait_until(
        lambda: (
            len(cluster.partition_state(name)) == partitions
            and all(
                len(p.isr) == 3 and p.leader >= 0 for p in cluster.partition_state(name).values()
            )
        ),
        15,
        f"{name} with three in-sync replicas",
    )


def kafka_python_producer(cluster, acks, via: int | None = None, **kwargs) -> KafkaProducer:
    """``via``: bootstrap from that broker only (others may be frozen)."""
    bootstrap = (
        cluster.bootstrap_servers if via is None else f"127.0.0.1:{cluster.nodes[via].broker_port}"
    )
    return KafkaProducer(bootstrap_servers=bootstrap, acks=acks, request_timeout_ms=5000, **kwargs)
