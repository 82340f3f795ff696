"""The clients ``kfast perf`` drives: confluent-kafka (librdkafka, the
fastest Python client, used when installed) or kfast's own asyncio client.
Both speak only the Kafka protocol, so either measures any Kafka-compatible
broker.

Each driver produces, consumes or does the end-to-end round trip and feeds
a LatencyStats; option parsing and printing stay in kfast.tools.perf.
"""

from __future__ import annotations

import asyncio
import functools
import time

from kfast.tools.perf_stats import LatencyStats

CLIENTS = ("confluent", "kfast")


def default_client() -> str:
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return "kfast"
    return "confluent"


class Throttler:
    """Kafka's ThroughputThrottler: after ``sent`` records, wait until the
    run is no longer ahead of ``records_per_sec`` (-1: never wait)."""

    def __init__(self, records_per_sec: float):
        self.rate = records_per_sec
        self.start = time.monotonic()

    def delay(self, sent: int) -> float:
        if self.rate <= 0:
            return 0.0
        return self.start + sent / self.rate - time.monotonic()


def _kfast_properties(props: dict[str, str], client):
    """Kafka client properties for kfast's client, read with its property
    table as Kafka's perf tools hand them to Kafka's clients: an unknown
    name is logged and ignored, an invalid value stops the run."""
    from kfast.client.properties import parse_client_properties
    from kfast.config import ConfigException

    try:
        return parse_client_properties(props, client, strict=False)
    except ConfigException as exc:
        raise SystemExit(f"ERROR {exc}") from None


def _kfast_producer_options(props: dict[str, str]) -> dict:
    from kfast.client.properties import Client

    return _kfast_properties(props, Client.PRODUCER).producer_arguments()


def _kfast_fetcher_options(props: dict[str, str], fetch_max_wait_ms: int) -> dict:
    from kfast.client.properties import Client

    return {
        **_kfast_properties(props, Client.CONSUMER).fetcher_arguments(),
        "max_wait_ms": fetch_max_wait_ms,
    }


# ---- produce ---------------------------------------------------------------------------


def produce_confluent(
    bootstrap: str,
    topic: str,
    payloads,
    count: int,
    throughput: float,
    props: dict[str, str],
    stats: LatencyStats,
) -> int:
    """Returns the number of failed sends."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, **props})
    failed = 0

    def done(error, message, sent):
        nonlocal failed
        if error is not None:
            failed += 1
        else:
            stats.record((time.monotonic() - sent) * 1000.0, len(message.value()))

    throttler = Throttler(throughput)
    for i in range(count):
        payload = payloads[i % len(payloads)]
        sent = time.monotonic()
        while True:
            try:
                producer.produce(topic, payload, on_delivery=functools.partial(done, sent=sent))
                break
            except BufferError:  # queue.buffering.max.messages: let deliveries drain
                producer.poll(0.005)
        producer.poll(0)
        wait = throttler.delay(i + 1)
        if wait > 0:
            producer.poll(wait)
    producer.flush()
    return failed


async def _produce_kfast(bootstrap, topic, payloads, count, throughput, props, stats) -> int:
    from kfast.client.producer import KafkaProducer

    failed = 0

    def done(future, sent, size):
        nonlocal failed
        if future.exception() is not None:
            failed += 1
        else:
            stats.record((time.monotonic() - sent) * 1000.0, size)

    throttler = Throttler(throughput)
    async with KafkaProducer(bootstrap, **_kfast_producer_options(props)) as producer:
        for i in range(count):
            payload = payloads[i % len(payloads)]
            sent = time.monotonic()
            future = await producer.send(topic, payload)
            future.add_done_callback(lambda f, s=sent, n=len(payload): done(f, s, n))  # noqa: B008 -- binds now
            wait = throttler.delay(i + 1)
            if wait > 0:
                await asyncio.sleep(wait)
        await producer.flush()
    return failed


def produce_kfast(*args) -> int:
    return asyncio.run(_produce_kfast(*args))


# ---- consume ---------------------------------------------------------------------------


def consume_confluent(
    bootstrap: str,
    topic: str,
    group: str,
    messages: int,
    timeout_ms: int,
    from_latest: bool,
    fetch_max_wait_ms: int,
    props: dict[str, str],
    timeline: list | None = None,
):
    """Subscribe as ``group`` and read ``messages`` records: (records, bytes,
    rebalance ms), stopping early after ``timeout_ms`` without a record.
    ``timeline`` gets (monotonic time, records, bytes so far) per batch."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "latest" if from_latest else "earliest",
            "fetch.wait.max.ms": fetch_max_wait_ms,
            "enable.auto.commit": True,
            **props,
        }
    )
    joined_at: list[float] = []
    started = time.monotonic()
    consumer.subscribe([topic], on_assign=lambda c, parts: joined_at.append(time.monotonic()))
    records = size = 0
    last_record = time.monotonic()
    try:
        while records < messages and time.monotonic() - last_record < timeout_ms / 1000.0:
            batch = consumer.consume(num_messages=min(10000, messages - records), timeout=0.2)
            for message in batch:
                if message.error() is not None:
                    continue
                records += 1
                size += len(message.value() or b"") + len(message.key() or b"")
            if batch:
                last_record = time.monotonic()
                if timeline is not None:
                    timeline.append((last_record, records, size))
    finally:
        consumer.close()
    rebalance_ms = int((joined_at[0] - started) * 1000) if joined_at else 0
    return records, size, rebalance_ms


async def _consume_kfast(
    bootstrap,
    topic,
    group,
    messages,
    timeout_ms,
    from_latest,
    fetch_max_wait_ms,
    props,
    timeline=None,
):
    """kfast's client has no group membership: it reads every partition by
    assignment (``group`` unused, rebalance time 0)."""
    from kfast.client.admin import EARLIEST, LATEST
    from kfast.client.fetcher import Fetcher, decode_records

    records = size = 0
    async with Fetcher(bootstrap, **_kfast_fetcher_options(props, fetch_max_wait_ms)) as fetcher:
        partitions = await fetcher.cluster.partitions_for(topic)
        spec = LATEST if from_latest else EARLIEST
        positions = await fetcher.list_offsets({(topic, p): spec for p in partitions})
        last_record = time.monotonic()
        while records < messages and time.monotonic() - last_record < timeout_ms / 1000.0:
            fetched = await fetcher.fetch_many(positions)
            for key, part in fetched.items():
                got = decode_records(part)
                for record in got:
                    records += 1
                    size += len(record.value or b"") + len(record.key or b"")
                if got:
                    last_record = time.monotonic()
                    if timeline is not None:
                        timeline.append((last_record, records, size))
                positions[key] = part.next_offset
    return records, size, 0


def consume_kfast(*args):
    return asyncio.run(_consume_kfast(*args))


# ---- end to end ------------------------------------------------------------------------


def e2e_confluent(
    bootstrap: str,
    topic: str,
    payloads,
    count: int,
    acks: str,
    props: dict[str, str],
    stats: LatencyStats,
    timeout_s: float,
) -> None:
    """EndToEndLatency: send one record, wait for its acknowledgement, poll
    until it comes back; the latency is send to receipt."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, **props})
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"kfast-perf-e2e-{time.time_ns()}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "fetch.error.backoff.ms": 0,
            **props,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s)
        partitions = sorted(metadata.topics[topic].partitions)
        ends = []
        for p in partitions:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
            ends.append(TopicPartition(topic, p, high))
        consumer.assign(ends)
        for i in range(count):
            payload = payloads[i % len(payloads)]
            begin = time.monotonic()
            producer.produce(topic, payload)
            if producer.flush(timeout_s):
                raise SystemExit(f"record {i} was not acknowledged within {timeout_s} s")
            message = consumer.poll(timeout_s)
            if message is None:
                raise SystemExit(
                    f"poll() timed out before finding record {i} (timeout: {timeout_s} s)"
                )
            if message.error() is not None:
                raise SystemExit(f"consumer error: {message.error()}")
            if message.value() != payload:
                raise SystemExit(f"record {i}: the record read did not match the record sent")
            stats.record((time.monotonic() - begin) * 1000.0, len(payload))
    finally:
        consumer.close()


async def _e2e_kfast(bootstrap, topic, payloads, count, acks, props, stats, timeout_s) -> None:
    from kfast.client.admin import LATEST
    from kfast.client.fetcher import Fetcher, decode_records
    from kfast.client.producer import KafkaProducer

    options = _kfast_producer_options({**props, "acks": acks})
    options["linger_ms"] = 0
    async with (
        KafkaProducer(bootstrap, **options) as producer,
        Fetcher(bootstrap, max_wait_ms=100) as fetcher,
    ):
        partitions = await fetcher.cluster.partitions_for(topic)
        positions = await fetcher.list_offsets({(topic, p): LATEST for p in partitions})
        for i in range(count):
            payload = payloads[i % len(payloads)]
            begin = time.monotonic()
            await asyncio.wait_for(producer.send_and_wait(topic, payload), timeout_s)
            received = None
            while received is None:
                if time.monotonic() - begin > timeout_s:
                    raise SystemExit(
                        f"fetch timed out before finding record {i} (timeout: {timeout_s} s)"
                    )
                fetched = await fetcher.fetch_many(positions)
                for key, part in fetched.items():
                    for record in decode_records(part):
                        received = record
                    positions[key] = part.next_offset
            if received.value != payload:
                raise SystemExit(f"record {i}: the record read did not match the record sent")
            stats.record((time.monotonic() - begin) * 1000.0, len(payload))


def e2e_kfast(*args) -> None:
    asyncio.run(_e2e_kfast(*args))


PRODUCE = {"confluent": produce_confluent, "kfast": produce_kfast}
CONSUME = {"confluent": consume_confluent, "kfast": consume_kfast}
E2E = {"confluent": e2e_confluent, "kfast": e2e_kfast}
