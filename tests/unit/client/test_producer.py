"""KafkaProducer batching, partitioning and failure handling against a real kfast broker."""

from __future__ import annotations

import pytest

from kfast.client.admin import KafkaAdmin, NewTopic
from kfast.client.fetcher import Fetcher
from kfast.client.partitioner import partition_for_key
from kfast.client.producer import KafkaProducer
from kfast.protocol import errors
from kfast.records import COMPRESSION_NONE, iter_batches


async def create(broker, name, partitions=1):
    async with KafkaAdmin(broker.bootstrap_servers) as admin:
        await admin.create_topics([NewTopic(name, partitions, 1)])


async def batches_of(broker, name, partition=0):
    async with Fetcher(broker.bootstrap_servers) as fetcher:
        part = await fetcher.fetch_raw(name, partition, 0, max_bytes=1 << 22)
    return list(iter_batches(part.records))


def test_batch_size_bounds_each_batch(broker, run, request):
    name = f"batch-size-{request.node.callspec.id}"

    async def scenario():
        await create(broker, name)
        async with KafkaProducer(
            broker.bootstrap_servers,
            batch_size=1000,
            linger_ms=10_000,
            compression=COMPRESSION_NONE,
        ) as producer:
            for _i in range(100):
                await producer.send(name, b"x" * 50, partition=0)
            await producer.flush()
        return await batches_of(broker, name)

    batches = run(scenario())
    assert sum(b.records_count for b in batches) == 100
    assert len(batches) > 1
    assert all(b.size_in_bytes <= 1000 for b in batches)


def test_records_sent_together_share_a_batch_until_flush(broker, run, request):
    name = f"linger-{request.node.callspec.id}"

    async def scenario():
        await create(broker, name)
        async with KafkaProducer(broker.bootstrap_servers, linger_ms=10_000) as producer:
            futures = [await producer.send(name, b"v%d" % i, partition=0) for i in range(10)]
            assert not any(f.done() for f in futures)  # lingering
            await producer.flush()
            offsets = [f.result().offset for f in futures]
        return offsets, await batches_of(broker, name)

    offsets, batches = run(scenario())
    assert offsets == list(range(10))
    assert [b.records_count for b in batches] == [10]


def test_keyed_records_follow_murmur2_and_unkeyed_stick_to_one_partition(broker, run, request):
    name = f"partitioning-{request.node.callspec.id}"

    async def scenario():
        await create(broker, name, partitions=5)
        async with KafkaProducer(broker.bootstrap_servers, linger_ms=10_000) as producer:
            keyed = [await producer.send(name, b"v", key=b"key-%d" % i) for i in range(30)]
            unkeyed = [await producer.send(name, b"v") for _ in range(10)]
            await producer.flush()
        return [f.result() for f in keyed], [f.result() for f in unkeyed]

    keyed, unkeyed = run(scenario())
    assert [m.partition for m in keyed] == [partition_for_key(b"key-%d" % i, 5) for i in range(30)]
    assert len({m.partition for m in unkeyed}) == 1


def test_a_missing_partition_fails_the_record(broker, run, request):
    name = f"missing-partition-{request.node.callspec.id}"

    async def scenario():
        await create(broker, name)
        async with KafkaProducer(
            broker.bootstrap_servers, retries=1, metadata_timeout=0.5, retry_backoff=0.01
        ) as producer:
            with pytest.raises(errors.UnknownTopicOrPartitionException):
                await producer.send_and_wait(name, b"v", partition=3)
            # The producer still works for good partitions.
            return await producer.send_and_wait(name, b"ok", partition=0)

    assert run(scenario()).offset == 0


def test_send_before_start_is_an_error(run):
    async def scenario():
        producer = KafkaProducer("127.0.0.1:1")
        with pytest.raises(RuntimeError):
            await producer.send("t", b"v")

    run(scenario())


def test_idempotence_needs_acks_all():
    with pytest.raises(ValueError):
        KafkaProducer("127.0.0.1:1", acks=1, enable_idempotence=True)


def test_send_waits_while_the_buffer_is_full(broker, run, request):
    name = f"buffer-memory-{request.node.callspec.id}"

    async def scenario():
        await create(broker, name)
        async with KafkaProducer(
            broker.bootstrap_servers, batch_size=500, buffer_memory=2000, linger_ms=0
        ) as producer:
            futures = []
            for _i in range(200):
                futures.append(await producer.send(name, b"x" * 100, partition=0))
                assert producer._buffered < 2000 + 600  # at most one batch past the limit
            await producer.flush()
            return [f.result().offset for f in futures]

    assert run(scenario()) == list(range(200))


def test_records_fail_instead_of_hanging_when_the_broker_goes_away(run, tmp_path):
    from kfast.testing import KfastBroker

    gone = KfastBroker(data_dir=str(tmp_path)).start()

    async def scenario():
        async with KafkaProducer(
            gone.bootstrap_servers, retries=2, retry_backoff=0.01, allow_auto_topic_creation=True
        ) as producer:
            first = await producer.send_and_wait("t", b"v", partition=0)
            gone.close()
            with pytest.raises(errors.NetworkException):
                await producer.send_and_wait("t", b"lost", partition=0)
            return first

    try:
        assert run(scenario()).offset == 0
    finally:
        gone.close()
