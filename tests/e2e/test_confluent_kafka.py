"""confluent-kafka (librdkafka) against kfast."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaException,
    Producer,
    TopicPartition,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def produce(broker, topic, values, **config):
    reports = []
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5, **config})
    for i, value in enumerate(values):
        producer.produce(
            topic,
            value=value,
            key=b"k%d" % i,
            on_delivery=lambda err, msg: reports.append((err, msg.offset())),
        )
    assert producer.flush(15) == 0
    return reports


def consumer_for(broker, **config):
    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "unused",
            "enable.auto.commit": False,
            **config,
        }
    )


def consume(broker, topic, count, offset=OFFSET_BEGINNING, timeout=15.0, **config):
    consumer = consumer_for(broker, **config)
    try:
        consumer.assign([TopicPartition(topic, 0, offset)])
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                raise KafkaException(message.error())
            out.append(message)
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize("acks", ["0", "1", "all"])
@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume(broker, topic, acks, codec):
    reports = produce(
        broker, topic, [b"v%d" % i for i in range(20)], acks=acks, **{"compression.type": codec}
    )
    assert [err for err, _ in reports] == [None] * 20
    if acks != "0":
        assert sorted(offset for _, offset in reports) == list(range(20))
    messages = consume(broker, topic, 20)
    assert [(m.offset(), m.key(), m.value()) for m in messages] == [
        (i, b"k%d" % i, b"v%d" % i) for i in range(20)
    ]


def test_idempotent_producer(broker, topic):
    reports = produce(
        broker,
        topic,
        [b"%d" % i for i in range(50)],
        acks="all",
        **{"enable.idempotence": True, "compression.type": "lz4"},
    )
    assert [offset for _, offset in reports] == list(range(50))
    assert [m.value() for m in consume(broker, topic, 50)] == [b"%d" % i for i in range(50)]


def test_offsets_for_times_watermarks_and_latest(broker, topic):
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    base = 1_700_000_000_000
    for i in range(5):
        producer.produce(topic, value=b"%d" % i, timestamp=base + i * 1000)
    assert producer.flush(15) == 0
    consumer = consumer_for(broker)
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 5)
        (found,) = consumer.offsets_for_times([TopicPartition(topic, 0, base + 2500)], timeout=10)
        assert found.offset == 3
    finally:
        consumer.close()
    assert [m.value() for m in consume(broker, topic, 2, offset=found.offset)] == [b"3", b"4"]

    # From latest: the consumer resolves "end" with ListOffsets at some point
    # after assign(); keep producing until it sees a record. Nothing of the
    # first five may arrive.
    consumer = consumer_for(broker)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
        message = None
        deadline = time.monotonic() + 15
        while message is None and time.monotonic() < deadline:
            producer.produce(topic, value=b"after")
            producer.flush(5)
            message = consumer.poll(0.5)
        assert message is not None and message.error() is None
        assert message.offset() >= 5 and message.value() == b"after"
    finally:
        consumer.close()


def test_auto_creation_by_metadata(broker, topic):
    consumer = consumer_for(broker, **{"allow.auto.create.topics": True})
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            metadata = consumer.list_topics(topic, timeout=5)
            info = metadata.topics[topic]
            if info.error is None and info.partitions:
                break
        assert list(info.partitions) == [0]
        assert info.partitions[0].leader == broker.broker.node_id
    finally:
        consumer.close()
