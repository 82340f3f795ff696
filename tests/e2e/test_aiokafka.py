"""aiokafka (asyncio client) against kfast, driven from asyncio.run."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


async def _consume(bootstrap, topic, count, start=None):
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        if start is not None:
            await start(consumer, tp)
        out = []
        while len(out) < count:
            batches = await asyncio.wait_for(consumer.getmany(tp, timeout_ms=1000), 15)
            out.extend(batches.get(tp, []))
        return out
    finally:
        await consumer.stop()


@pytest.mark.parametrize("acks", [0, 1, "all"])
@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_consume(broker, topic, acks, codec):
    async def main():
        producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap_servers,
            acks=acks,
            compression_type=codec,
            linger_ms=5,
        )
        await producer.start()
        try:
            futures = [
                await producer.send(topic, key=b"k%d" % i, value=b"v%d" % i) for i in range(20)
            ]
            results = await asyncio.wait_for(asyncio.gather(*futures), 15)
        finally:
            await producer.stop()
        if acks != 0:
            assert [r.offset for r in results] == list(range(20))
        messages = await _consume(broker.bootstrap_servers, topic, 20)
        assert [(m.offset, m.key, m.value) for m in messages] == [
            (i, b"k%d" % i, b"v%d" % i) for i in range(20)
        ]

    asyncio.run(main())


def test_idempotent_producer_and_offsets(broker, topic):
    async def main():
        base = 1_700_000_000_000
        producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap_servers, enable_idempotence=True
        )
        await producer.start()
        try:
            offsets = [
                (
                    await producer.send_and_wait(
                        topic, value=b"%d" % i, timestamp_ms=base + i * 1000
                    )
                ).offset
                for i in range(5)
            ]
        finally:
            await producer.stop()
        assert offsets == list(range(5))
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None)
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            assert await consumer.beginning_offsets([tp]) == {tp: 0}
            assert await consumer.end_offsets([tp]) == {tp: 5}
            found = (await consumer.offsets_for_times({tp: base + 1500}))[tp]
            assert (found.offset, found.timestamp) == (2, base + 2000)
        finally:
            await consumer.stop()

        async def from_time(consumer, tp):
            consumer.seek(tp, found.offset)

        messages = await _consume(broker.bootstrap_servers, topic, 3, start=from_time)
        assert [m.value for m in messages] == [b"2", b"3", b"4"]

        async def from_latest(consumer, tp):
            await consumer.seek_to_end(tp)
            assert await consumer.position(tp) == 5
            extra = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
            await extra.start()
            try:
                await extra.send_and_wait(topic, value=b"later")
            finally:
                await extra.stop()

        messages = await _consume(broker.bootstrap_servers, topic, 1, start=from_latest)
        assert [(m.offset, m.value) for m in messages] == [(5, b"later")]

    asyncio.run(main())
