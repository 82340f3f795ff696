"""One CreateTopics or CreatePartitions may not create more than 10,000
partitions (Kafka's controller writes at most MAX_RECORDS_PER_USER_OP records
per operation): the request is refused with POLICY_VIOLATION and Kafka's
message, nothing is created, and the broker keeps serving."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from e2e_support import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


def _admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def _failure(future) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        future.result(30)
    return raised.value.args[0]


def _produce_and_consume(broker, topic):
    """A round trip on another topic: the broker still serves."""
    from confluent_kafka import Consumer, TopicPartition

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce(topic, key=b"k", value=b"after the refusal")
    assert producer.flush(15) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "unused",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        message = wait_until(lambda: consumer.poll(0.5), message="the produced record")
        assert message.error() is None
        assert (message.offset(), message.value()) == (0, b"after the refusal")
    finally:
        consumer.close()


def test_create_topics_with_100000_partitions_is_refused(broker, topic):
    admin = _admin(broker)
    error = _failure(admin.create_topics([NewTopic(topic, 100_000, 1)])[topic])
    assert error.code() == KafkaError.POLICY_VIOLATION
    assert error.str() == "Excessively large number of partitions per request."
    assert topic not in admin.list_topics(timeout=15).topics
    _produce_and_consume(broker, topic + "-other")


def test_partitions_are_counted_over_the_whole_request(broker, topic):
    admin = _admin(broker)
    names = [f"{topic}-{i}" for i in range(3)]
    futures = admin.create_topics([NewTopic(name, 5_000, 1) for name in names], validate_only=True)
    for name in names:
        error = _failure(futures[name])
        assert error.code() == KafkaError.POLICY_VIOLATION


def test_records_beyond_one_batch_are_refused(broker, topic):
    # 10,000 partitions pass the partition count; with the TopicRecord they
    # are 10,001 records, one more than a batch may hold.
    admin = _admin(broker)
    error = _failure(admin.create_topics([NewTopic(topic, 10_000, 1)], validate_only=True)[topic])
    assert error.code() == KafkaError.POLICY_VIOLATION
    assert error.str() == "Unable to perform excessively large batch operation."


def test_create_partitions_to_100000_is_refused(broker, topic):
    admin = _admin(broker)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    error = _failure(admin.create_partitions([NewPartitions(topic, 100_000)])[topic])
    assert error.code() == KafkaError.POLICY_VIOLATION
    assert error.str() == "Unable to perform excessively large batch operation."
    assert len(admin.list_topics(topic, timeout=15).topics[topic].partitions) == 1
    _produce_and_consume(broker, topic)
