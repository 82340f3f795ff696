"""kafka-python (pure Python client) against kfast."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


def consume(broker, topic, count, *, seek=None, partition=0, timeout_ms=10000):
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        group_id=None,
        auto_offset_reset="earliest",
        consumer_timeout_ms=timeout_ms,
    )
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        if seek is not None:
            seek(consumer, tp)
        out = []
        for message in consumer:
            out.append(message)
            if len(out) == count:
                break
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize("acks", [0, 1, "all"])
@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume(broker, topic, acks, codec):
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap_servers, acks=acks, compression_type=codec, linger_ms=5
    )
    futures = [producer.send(topic, key=b"k%d" % i, value=b"v%d" % i) for i in range(20)]
    producer.flush(10)
    metadata = [f.get(timeout=10) for f in futures]
    producer.close()
    if acks != 0:
        assert [m.offset for m in metadata] == list(range(20))
    messages = consume(broker, topic, 20)
    assert [(m.offset, m.key, m.value) for m in messages] == [
        (i, b"k%d" % i, b"v%d" % i) for i in range(20)
    ]


def test_idempotent_producer(broker, topic):
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap_servers, acks="all", enable_idempotence=True
    )
    offsets = [producer.send(topic, value=b"%d" % i).get(timeout=10).offset for i in range(10)]
    producer.close()
    assert offsets == list(range(10))
    assert [m.value for m in consume(broker, topic, 10)] == [b"%d" % i for i in range(10)]


def test_offsets_for_times_latest_and_list_offsets(broker, topic):
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks=1)
    base = 1_700_000_000_000
    for i in range(6):
        producer.send(topic, value=b"%d" % i, timestamp_ms=base + i * 1000).get(timeout=10)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None)
    try:
        tp = TopicPartition(topic, 0)
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 6}
        found = consumer.offsets_for_times({tp: base + 3500})[tp]
        assert (found.offset, found.timestamp) == (4, base + 4000)
        assert consumer.offsets_for_times({tp: base + 99_000})[tp] is None
    finally:
        consumer.close()

    def seek_to_time(consumer, tp):
        consumer.seek(tp, consumer.offsets_for_times({tp: base + 2000})[tp].offset)

    assert [m.value for m in consume(broker, topic, 4, seek=seek_to_time)] == [
        b"2",
        b"3",
        b"4",
        b"5",
    ]

    # From latest: only what is produced after the seek.
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers, group_id=None, consumer_timeout_ms=10000
    )
    try:
        consumer.assign([tp])
        consumer.seek_to_end(tp)
        assert consumer.position(tp) == 6
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks=1)
        producer.send(topic, value=b"new").get(timeout=10)
        producer.close()
        message = next(iter(consumer))
        assert (message.offset, message.value) == (6, b"new")
    finally:
        consumer.close()


def test_auto_creation_on_metadata(broker, topic):
    # The producer's metadata request for the topic allows auto-creation.
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    try:
        assert producer.partitions_for(topic) == {0}
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None)
    try:
        assert topic in consumer.topics()
    finally:
        consumer.close()


def test_admin_describe_log_dirs(broker, topic):
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks=1)
    producer.send(topic, value=b"x").get(timeout=10)
    producer.close()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        response = admin.describe_log_dirs()
    finally:
        admin.close()
    text = repr(response)
    assert topic in text


# Old protocol versions: Produce v1/v2 with magic 0/1 message sets (converted
# to v2 batches on append) and Fetch v1-v3 (down-converted on the way out).
# kafka-python needs xxhash for lz4 with magic 0, so that pair is left out.
@pytest.mark.parametrize(
    "api_version, codec",
    [
        ((0, 9), None),
        ((0, 9), "gzip"),
        ((0, 9), "snappy"),
        ((0, 10, 1), None),
        ((0, 10, 1), "gzip"),
        ((0, 10, 1), "lz4"),
    ],
)
def test_legacy_message_formats(broker, topic, api_version, codec):
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap_servers, api_version=api_version, compression_type=codec
    )
    offsets = [
        producer.send(topic, key=b"k", value=b"v%d" % i).get(timeout=10).offset for i in range(5)
    ]
    producer.close()
    assert offsets == list(range(5))
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        api_version=api_version,
        group_id=None,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10000,
    )
    try:
        consumer.assign([TopicPartition(topic, 0)])
        messages = [m for _, m in zip(range(5), consumer)]
    finally:
        consumer.close()
    assert [(m.offset, m.key, m.value) for m in messages] == [
        (i, b"k", b"v%d" % i) for i in range(5)
    ]
    # Modern clients read the converted records too.
    assert [m.value for m in consume(broker, topic, 5)] == [b"v%d" % i for i in range(5)]
