"""Helpers of the replication tests (test_replication*.py): topics with
three in-sync replicas, reading a topic back whole, producers bootstrapped
from one broker or all."""
from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer


def create(cluster, name: str, partitions: int = 1, min_insync: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, 3, config={
        "min.insync.replicas": str(min_insync)})])[name].result(30)
    cluster.wait_until(lambda: len(cluster.partition_state(name)) == partitions and all(
        len(p.isr) == 3 and p.leader >= 0 for p in cluster.partition_state(name).values()),
        15, f"{name} with three in-sync replicas")


def read_all(bootstrap: str, topic: str, partitions: int, count: int) -> dict[int, list]:
    """{partition: [(offset, value)]} from offset 0, assigned (no group)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + 60
    try:
        while sum(map(len, got.values())) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                got[message.partition()].append((message.offset(), message.value().decode()))
    finally:
        consumer.close()
    return got


def kafka_python_producer(cluster, acks, via: int | None = None, **kwargs) -> KafkaProducer:
    """``via``: bootstrap from that broker only (others may be frozen)."""
    bootstrap = cluster.bootstrap_servers if via is None else \
        f"127.0.0.1:{cluster.nodes[via].broker_port}"
    return KafkaProducer(bootstrap_servers=bootstrap, acks=acks, request_timeout_ms=5000,
                         **kwargs)
