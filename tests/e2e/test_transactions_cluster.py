"""Transactions on a cluster of separate processes (one controller, three
brokers): the transaction coordinator is the leader of the transactional
id's __transaction_state partition, markers reach partition leaders on
other brokers over WriteTxnMarkers, and kill -9 of the coordinator's broker
in the middle of a transaction leaves it committed or aborted as a whole:
the partition's new leader loads the id, the producer's commit is either
completed there or the transaction is aborted, and a new producer with the
same transactional.id starts."""
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from kfast.client.connection import BlockingConnection
from kfast.protocol import api_keys
from replication_support import create

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

FAST_SESSIONS = {"broker.session.timeout.ms": 2000, "broker.heartbeat.interval.ms": 200,
                 "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500}
ONE_CONTROLLER = pytest.mark.kfast_cluster_config(controllers=1, brokers=3,
                                                  overrides=FAST_SESSIONS)
PARTITIONS = 3


def transaction_coordinator(cluster, transactional_id: str, exclude=()) -> int:
    """The broker FindCoordinator names, once one is named."""
    def ask():
        for node_id, node in cluster.nodes.items():
            if not node.broker_port or not node.alive or node_id in exclude:
                continue
            try:
                with BlockingConnection("127.0.0.1", node.broker_port) as connection:
                    response = connection.send(
                        {"key": transactional_id, "key_type": 1},
                        api_key=api_keys.BY_NAME["FindCoordinator"].key, version=3)
            except Exception:
                continue
            if response.error_code == 0 and response.node_id not in exclude:
                found.append(response.node_id)
                return True
        return False
    found: list[int] = []
    cluster.wait_until(ask, 30, f"a coordinator for {transactional_id}")
    return found[0]


def read_committed(cluster, topic: str, expected: int, timeout: float = 60) -> list[bytes]:
    """Every committed value of the topic, reading until ``expected`` came
    (and then to the end, so that nothing extra hides)."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                         "group.id": f"r-{uuid.uuid4().hex}", "isolation.level": "read_committed",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values, at_end, deadline = [], set(), time.monotonic() + timeout
    try:
        while (len(values) < expected or len(at_end) < PARTITIONS) and \
                time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                if message.error().code() == -191:          # _PARTITION_EOF
                    at_end.add(message.partition())
                continue
            at_end.discard(message.partition())
            values.append(message.value())
    finally:
        consumer.close()
    return values


@ONE_CONTROLLER
def test_transactions_commit_across_brokers(kfast_cluster):
    cluster = kfast_cluster
    create(cluster, "spread", partitions=PARTITIONS)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                         "transactional.id": "spread-tx"})
    producer.init_transactions(60)
    for round_, commit in ((0, True), (1, False), (2, True)):
        producer.begin_transaction()
        for i in range(30):
            producer.produce("spread", value=f"{round_}-{i}".encode(), partition=i % PARTITIONS)
        (producer.commit_transaction if commit else producer.abort_transaction)(60)
    values = read_committed(cluster, "spread", 60)
    assert sorted(values) == sorted(f"{r}-{i}".encode() for r in (0, 2) for i in range(30))


@ONE_CONTROLLER
def test_kill_9_of_the_transaction_coordinator_mid_transaction(kfast_cluster):
    cluster = kfast_cluster
    create(cluster, "orders", partitions=PARTITIONS)
    transactional_id = f"failover-{uuid.uuid4().hex[:8]}"
    config = {"bootstrap.servers": cluster.bootstrap_servers,
              "transactional.id": transactional_id, "transaction.timeout.ms": 20000}
    producer = Producer(config)
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(30):
        producer.produce("orders", value=f"first-{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(60) == 0
    coordinator = transaction_coordinator(cluster, transactional_id)
    cluster.kill(coordinator)
    # The new leader of the id's __transaction_state partition takes over.
    assert transaction_coordinator(cluster, transactional_id, exclude={coordinator}) != \
        coordinator
    try:
        producer.commit_transaction(60)
        committed = True
    except KafkaException as exc:
        # Aborted instead (e.g. fenced by the new coordinator): all or nothing.
        committed = False
        if exc.args[0].txn_requires_abort():
            producer.abort_transaction(60)
    successor = Producer(config)
    successor.init_transactions(60)
    successor.begin_transaction()
    for i in range(30):
        successor.produce("orders", value=f"second-{i}".encode(), partition=i % PARTITIONS)
    successor.commit_transaction(60)
    first = [f"first-{i}".encode() for i in range(30)] if committed else []
    second = [f"second-{i}".encode() for i in range(30)]
    values = read_committed(cluster, "orders", len(first) + len(second))
    assert sorted(values) == sorted(first + second)
    cluster.restart(coordinator)
    cluster.wait_for_isr("orders", 0, {2, 3, 4}, 60)
