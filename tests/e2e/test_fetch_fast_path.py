"""Fetch's fast path (kfast.server.fetch_fast) with real clients: a caught-up
consumer's long polls -- librdkafka's sessionless Fetch v16, kafka-python's
with its fetch sessions turned off -- and the fetches woken by an append are
answered by it, not handed to the generic handler, and the consumer gets
every record; a fetch in a session still takes the generic path."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from e2e_support import wait_until

from kfast.server.fetch_fast import STATS

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

PARTITIONS = 3
MAX_WAIT_MS = 200


def _create(broker, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)


def _produce(broker, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % PARTITIONS)
    assert producer.flush(15) == 0


def _long_polls_answered(since: int, count: int) -> None:
    """At least ``count`` more fetches answered by the fast path (the
    consumer's caught-up long polls, each waiting MAX_WAIT_MS)."""
    wait_until(lambda: STATS.answered >= since + count, timeout=30)


def test_librdkafka_long_polls_and_woken_fetches_take_the_fast_path(broker, topic) -> None:
    _create(broker, topic)
    _produce(broker, topic, [b"before-%d" % i for i in range(6)])
    answered, fell_back = STATS.answered, STATS.fell_back
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "fast",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": MAX_WAIT_MS,
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got: list[bytes] = []
        while len(got) < 6:
            message = consumer.poll(10)
            assert message is not None and not message.error()
            got.append(message.value())
        assert sorted(got) == sorted(b"before-%d" % i for i in range(6))
        # Caught up: idle long polls, each answered empty after its wait.
        idle_from = STATS.answered
        _long_polls_answered(idle_from, 4)
        # Records appended while the consumer waits wake its fetch.
        values = [b"woken-%d" % i for i in range(9)]
        _produce(broker, topic, values)
        got = []
        while len(got) < 9:
            message = consumer.poll(10)
            assert message is not None and not message.error()
            got.append(message.value())
        assert sorted(got) == sorted(values)
    finally:
        consumer.close()
    assert STATS.answered > answered
    assert STATS.fell_back == fell_back


def test_kafka_python_sessionless_fetches_take_the_fast_path(broker, topic) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition

    _create(broker, topic)
    values = [b"kp-%d" % i for i in range(6)]
    _produce(broker, topic, values)
    answered, fell_back = STATS.answered, STATS.fell_back
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        enable_auto_commit=False,
        fetch_max_wait_ms=MAX_WAIT_MS,
        enable_incremental_fetch_sessions=False,
    )
    try:
        consumer.assign([KafkaTopicPartition(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 6 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                got.extend(record.value for record in records)
        assert sorted(got) == sorted(values)
        # Caught up: kafka-python fetches from poll(), so poll while waiting
        # for its idle long polls.
        idle_from = STATS.answered
        while STATS.answered < idle_from + 3 and time.monotonic() < deadline:
            assert consumer.poll(timeout_ms=MAX_WAIT_MS) == {}
        assert STATS.answered >= idle_from + 3
    finally:
        consumer.close()
    assert STATS.answered > answered
    assert STATS.fell_back == fell_back


def test_a_fetch_session_takes_the_generic_path(broker, topic) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition

    _create(broker, topic)
    _produce(broker, topic, [b"s-%d" % i for i in range(3)])
    fell_back = STATS.fell_back
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        enable_auto_commit=False,
        fetch_max_wait_ms=MAX_WAIT_MS,
    )
    try:
        consumer.assign([KafkaTopicPartition(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                got.extend(record.value for record in records)
        assert len(got) == 3
    finally:
        consumer.close()
    # KIP-227: the session cache picks the partitions, so handle_fetch does.
    assert STATS.fell_back > fell_back
