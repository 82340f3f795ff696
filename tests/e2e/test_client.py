"""kfast's own async client against a kfast broker, cross-checked with kafka-python;
each scenario runs on asyncio's loop and on uvloop."""

from __future__ import annotations

import asyncio
import time

import pytest
import uvloop
from kafka import KafkaConsumer, TopicPartition
from kafka import KafkaProducer as KafkaPythonProducer

from kfast.client.admin import EARLIEST, LATEST, KafkaAdmin, NewTopic
from kfast.client.fetcher import Fetcher
from kfast.client.producer import KafkaProducer
from kfast.protocol import errors
from kfast.records import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    decode_columnar,
    iter_batches,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request):
    def runner(coroutine):
        loop = asyncio.new_event_loop() if request.param == "asyncio" else uvloop.new_event_loop()
        try:
            return loop.run_until_complete(coroutine)
        finally:
            loop.close()

    return runner


def kafka_python_consume(broker, topic, partitions, count):
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10000,
    )
    try:
        consumer.assign([TopicPartition(topic, p) for p in partitions])
        out = []
        for message in consumer:
            out.append(message)
            if len(out) == count:
                break
        return out
    finally:
        consumer.close()


def test_fetch_raw_and_decode_columnar_equal_what_kafka_python_consumes(broker, topic, run):
    producer = KafkaPythonProducer(
        bootstrap_servers=broker.bootstrap_servers,
        compression_type="gzip",
        linger_ms=5,
        batch_size=2000,
    )
    for i in range(300):
        producer.send(topic, key=b"k%d" % i if i % 7 else None, value=b"value-%d" % i, partition=0)
    producer.flush()
    producer.close()
    expected = kafka_python_consume(broker, topic, [0], 300)

    async def scenario():
        async with Fetcher(broker.bootstrap_servers) as fetcher:
            offset, rows = 0, []
            while offset < 300:
                # A small max_bytes: responses end in partial batches, which are cut off.
                part = await fetcher.fetch_raw(topic, 0, offset, max_bytes=1500)
                assert part.high_watermark == 300 and part.log_start_offset == 0
                assert part.next_offset > offset
                columns = decode_columnar(part.records)
                assert columns.truncated_bytes == 0
                for i in range(columns.num_records):
                    if columns.offsets[i] >= offset:
                        rows.append(
                            (
                                columns.offsets[i],
                                columns.timestamps[i],
                                columns.key(i),
                                columns.value(i),
                            )
                        )
                offset = part.next_offset
            return rows

    rows = run(scenario())
    assert rows == [(m.offset, m.timestamp, m.key, m.value) for m in expected]


def test_fetch_records_from_a_middle_offset(broker, topic, run):
    producer = KafkaPythonProducer(
        bootstrap_servers=broker.bootstrap_servers, compression_type="lz4", linger_ms=50
    )
    for i in range(20):
        producer.send(topic, key=b"k", value=b"v%d" % i, headers=[("n", b"%d" % i)])
    producer.flush()
    producer.close()

    async def scenario():
        async with Fetcher(broker.bootstrap_servers) as fetcher:
            return await fetcher.fetch_records(topic, 0, 7)

    records = run(scenario())
    assert [(r.offset, r.value, r.headers) for r in records] == [
        (i, b"v%d" % i, [("n", b"%d" % i)]) for i in range(7, 20)
    ]


@pytest.mark.parametrize(
    "codec",
    [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD],
)
def test_producer_codecs_read_by_kafka_python(broker, topic, codec):
    async def scenario():
        async with KafkaAdmin(broker.bootstrap_servers) as admin:
            await admin.create_topics([NewTopic(topic, 2, 1)])
        async with KafkaProducer(broker.bootstrap_servers, compression=codec) as producer:
            futures = [
                await producer.send(
                    topic, b"v%d" % i, key=b"key-%d" % i, headers=[("h", b"%d" % i)]
                )
                for i in range(50)
            ]
            await producer.flush()
            return [f.result() for f in futures]

    metadata = asyncio.run(scenario())
    consumed = kafka_python_consume(broker, topic, [0, 1], 50)
    by_key = {m.key: m for m in consumed}
    assert len(by_key) == 50
    for i, sent in enumerate(metadata):
        message = by_key[b"key-%d" % i]
        assert (message.partition, message.offset, message.value, message.headers) == (
            sent.partition,
            sent.offset,
            b"v%d" % i,
            [("h", b"%d" % i)],
        )


@pytest.mark.parametrize("acks", [0, 1, -1])
def test_producer_acks(broker, topic, acks, run):
    async def scenario():
        async with KafkaProducer(
            broker.bootstrap_servers, acks=acks, allow_auto_topic_creation=True
        ) as producer:
            return [await producer.send_and_wait(topic, b"v%d" % i, partition=0) for i in range(3)]

    sent = run(scenario())
    # acks=0 gets no answer, so no offsets.
    assert [m.offset for m in sent] == ([-1, -1, -1] if acks == 0 else [0, 1, 2])
    consumed = kafka_python_consume(broker, topic, [0], 3)
    assert [(m.offset, m.value) for m in consumed] == [(i, b"v%d" % i) for i in range(3)]


def test_idempotent_producer_numbers_batches(broker, topic, run):
    async def scenario():
        async with KafkaProducer(
            broker.bootstrap_servers,
            enable_idempotence=True,
            batch_size=200,
            allow_auto_topic_creation=True,
        ) as producer:
            futures = [await producer.send(topic, b"%03d" % i, partition=0) for i in range(100)]
            await producer.flush()
            assert producer.producer_id >= 0
            offsets = [f.result().offset for f in futures]
        async with Fetcher(broker.bootstrap_servers) as fetcher:
            part = await fetcher.fetch_raw(topic, 0, offsets[0])
        return producer.producer_id, offsets, list(iter_batches(part.records))

    producer_id, offsets, batches = run(scenario())
    assert offsets == list(range(offsets[0], offsets[0] + 100))
    assert len(batches) > 1
    expected_sequence = 0
    for batch in batches:
        if batch.producer_id != producer_id:
            continue
        assert batch.base_sequence == expected_sequence
        expected_sequence += batch.records_count
    assert expected_sequence == 100


def test_admin_offsets_delete_records_and_out_of_range(broker, topic, run):
    producer = KafkaPythonProducer(bootstrap_servers=broker.bootstrap_servers)
    base = int(time.time() * 1000) - 100_000
    for i in range(10):
        producer.send(topic, value=b"v%d" % i, partition=0, timestamp_ms=base + i * 1000)
    producer.flush()
    producer.close()

    async def scenario():
        async with (
            KafkaAdmin(broker.bootstrap_servers) as admin,
            Fetcher(broker.bootstrap_servers) as fetcher,
        ):
            key = (topic, 0)
            before = await admin.list_offsets({key: EARLIEST})
            latest = await admin.list_offsets({key: LATEST})
            by_time = await admin.list_offsets({key: base + 4500})
            low = await admin.delete_records({key: 6})
            after = await admin.list_offsets({key: EARLIEST})
            with pytest.raises(errors.OffsetOutOfRangeException) as caught:
                await fetcher.fetch_raw(topic, 0, 2)
            records = await fetcher.fetch_records(topic, 0, 6)
            return before, latest, by_time, low, after, caught.value, records

    before, latest, by_time, low, after, out_of_range, records = run(scenario())
    assert before[topic, 0].offset == 0 and latest[topic, 0].offset == 10
    assert (by_time[topic, 0].offset, by_time[topic, 0].timestamp) == (5, base + 5000)
    assert low == {(topic, 0): 6} and after[topic, 0].offset == 6
    assert out_of_range.log_start_offset == 6 and out_of_range.high_watermark == 10
    assert [r.value for r in records] == [b"v6", b"v7", b"v8", b"v9"]


def test_admin_topics_configs_and_cluster(broker, topic, run):
    async def scenario():
        async with KafkaAdmin(broker.bootstrap_servers) as admin:
            await admin.create_topics([NewTopic(topic + "-v", 1, 1)], validate_only=True)
            created = await admin.create_topics([NewTopic(topic, 2, 1, {"retention.ms": "1234"})])
            with pytest.raises(errors.TopicExistsException):
                await admin.create_topics([NewTopic(topic, 2, 1)])
            await admin.create_partitions({topic: 3})
            await admin.alter_configs(2, topic, {"segment.ms": "100000"})
            [described] = await admin.describe_topics([topic])
            configs = (await admin.describe_configs(2, [topic]))[topic]
            cluster = await admin.describe_cluster()
            listed = await admin.list_topics()
            await admin.delete_topics([topic])
            return created, described, configs, cluster, listed, await admin.list_topics()

    created, described, configs, cluster, listed, after = run(scenario())
    assert created[topic].num_partitions == 2 and created[topic].configs["retention.ms"] == "1234"
    assert described.topic_id == created[topic].topic_id and described.partition_count == 3
    overrides = {c.name: c.value for c in configs if not c.is_default}
    # Legacy AlterConfigs replaces the whole set of overrides.
    assert overrides == {"segment.ms": "100000"}
    assert cluster.controller_id == 1 and [b[0] for b in cluster.brokers] == [1]
    assert topic in listed and topic + "-v" not in listed and topic not in after


def test_fetch_from_an_unknown_topic_fails(broker, topic, run):
    async def scenario():
        async with Fetcher(
            broker.bootstrap_servers, metadata_timeout=0.3, retry_backoff=0.01
        ) as fetcher:
            with pytest.raises(errors.UnknownTopicOrPartitionException):
                await fetcher.fetch_raw(topic, 0, 0)

    run(scenario())


def test_a_recreated_topic_is_found_again_by_its_new_id(broker, topic, run):
    """Stale metadata (the old topic id) makes Produce and Fetch fail with a
    retriable error; the client refreshes and retries on the new topic."""
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KafkaPythonNewTopic

    async def scenario():
        async with (
            KafkaProducer(broker.bootstrap_servers, allow_auto_topic_creation=True) as producer,
            Fetcher(broker.bootstrap_servers) as fetcher,
        ):
            await producer.send_and_wait(topic, b"old-1", partition=0)
            await producer.send_and_wait(topic, b"old-2", partition=0)
            assert [r.value for r in await fetcher.fetch_records(topic, 0, 0)] == [
                b"old-1",
                b"old-2",
            ]
            old_id = (await fetcher.cluster.topic(topic)).topic_id

            admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
            try:
                admin.delete_topics([topic])
                admin.create_topics([KafkaPythonNewTopic(topic, 1, 1)])
            finally:
                admin.close()

            sent = await producer.send_and_wait(topic, b"new", partition=0)
            records = await fetcher.fetch_records(topic, 0, 0)
            return old_id, (await fetcher.cluster.topic(topic)).topic_id, sent, records

    old_id, new_id, sent, records = run(scenario())
    assert new_id != old_id
    assert sent.offset == 0
    assert [(r.offset, r.value) for r in records] == [(0, b"new")]


def test_describe_topics_follows_the_partition_cursor(broker, topic, run):
    async def scenario():
        async with KafkaAdmin(broker.bootstrap_servers) as admin:
            await admin.create_topics([NewTopic(topic + "-a", 5, 1), NewTopic(topic + "-b", 3, 1)])
            return await admin.describe_topics([topic + "-b", topic + "-a"], partition_limit=2)

    described = run(scenario())
    assert [(t.name, sorted(t.partitions)) for t in described] == [
        (topic + "-a", [0, 1, 2, 3, 4]),
        (topic + "-b", [0, 1, 2]),
    ]
    assert all(p.eligible_leader_replicas == [] for t in described for p in t.partitions.values())


def test_blocking_fetcher_for_synchronous_readers(broker, topic):
    from kfast.client import BlockingFetcher

    producer = KafkaPythonProducer(bootstrap_servers=broker.bootstrap_servers)
    for i in range(5):
        producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0)
    producer.flush()
    producer.close()
    expected = kafka_python_consume(broker, topic, [0], 5)
    with BlockingFetcher(broker.bootstrap_servers) as fetcher:
        assert fetcher.partitions_for(topic) == [0]
        assert fetcher.list_offsets({(topic, 0): EARLIEST}) == {(topic, 0): 0}
        assert fetcher.list_offsets({(topic, 0): LATEST}) == {(topic, 0): 5}
        part = fetcher.fetch_raw(topic, 0, 0)
        records = fetcher.fetch_records(topic, 0, 2)
    columns = decode_columnar(part.records)  # still valid after the fetcher closed
    assert [
        (columns.offsets[i], columns.key(i), columns.value(i)) for i in range(columns.num_records)
    ] == [(m.offset, m.key, m.value) for m in expected]
    assert (part.high_watermark, part.next_offset) == (5, 5)
    assert [r.value for r in records] == [b"v2", b"v3", b"v4"]


def test_iter_raw_reads_exactly_a_range(broker, topic, run):
    producer = KafkaPythonProducer(
        bootstrap_servers=broker.bootstrap_servers, linger_ms=5, batch_size=500
    )
    for i in range(100):
        producer.send(topic, value=b"value-%03d" % i, partition=0)
    producer.flush()
    producer.close()

    def offsets_in(parts, start, end):
        out = []
        for part in parts:
            columns = decode_columnar(part.records)
            out += [o for o in columns.offsets.tolist() if start <= o < end]
        return out

    async def scenario():
        async with Fetcher(broker.bootstrap_servers) as fetcher:
            middle = [p async for p in fetcher.iter_raw(topic, 0, 10, 55, max_bytes=300)]
            past_end = [
                p async for p in fetcher.iter_raw(topic, 0, 90, 1000)
            ]  # stops at the high watermark
            return middle, past_end

    middle, past_end = run(scenario())
    assert len(middle) > 1
    assert offsets_in(middle, 10, 55) == list(range(10, 55))
    assert offsets_in(past_end, 90, 1000) == list(range(90, 100))

    from kfast.client import BlockingFetcher

    with BlockingFetcher(broker.bootstrap_servers) as fetcher:
        assert offsets_in(fetcher.iter_raw(topic, 0, 0, 100, max_bytes=1000), 0, 100) == list(
            range(100)
        )
