"""The kfast source and sink across a leader change, without a cluster
(tests/spark/test_kfast_source_cluster.py kills real brokers).

A leader elected since planning has a high watermark that lags the old
leader's until its followers fetch from it; the client here is a stand-in
that answers as such a leader does:

- a task's fetch finds nothing below its range's end: it asks again, parked
  at the broker, until the client's default.api.timeout.ms, and reports data
  loss only if the log still ends early;
- the driver's latest offsets below where a streaming query already stands
  are asked again, for as long, before the query sees them.

The sink's producer retries, as Kafka's, until delivery.timeout.ms rather
than a few times: a dead leader stays in Metadata for a session timeout.
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest

from kfast.client import FetchedPartition
from kfast.client.cluster import Cluster
from kfast.records import RecordBatchBuilder
from kfast_spark import data_consumer
from kfast_spark.offset_reader import KafkaOffsetReader
from kfast_spark.options import KafkaConsumerSettings, TopicPartition, parse_kafka_sink_options
from kfast_spark.planning import KafkaDataLossError
from kfast_spark.sink import producer_arguments

pytestmark = pytest.mark.spark

TP = TopicPartition("t", 0)


def records(first: int, last: int) -> bytes:
    builder = RecordBatchBuilder(base_offset=first)
    for offset in range(first, last + 1):
        builder.append(1_700_000_000_000 + offset, None, b"v%d" % offset)
    return builder.build()


def fetched(offset: int, data: bytes, high_watermark: int, next_offset: int) -> FetchedPartition:
    return FetchedPartition(
        "t", 0, offset, memoryview(data), high_watermark, high_watermark, 0, next_offset
    )


class LaggingLeaderFetcher:
    """BlockingFetcher stand-in: offsets [0, 5) at once; then, at 5, nothing
    (high watermark 5) ``empty_answers`` times, then [5, 10)."""

    def __init__(self, empty_answers: int, metadata_timeout: float):
        self.empty_answers = empty_answers
        self.metadata_timeout = metadata_timeout
        self.fetches: list[tuple[int, int]] = []  # (offset, max_wait_ms)

    def __call__(self, bootstrap_servers, **options):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        pass

    def fetch_raw(self, topic, partition, offset, max_bytes, max_wait_ms=None):
        self.fetches.append((offset, max_wait_ms))
        if offset < 5:
            return fetched(offset, records(0, 4), 5, 5)
        if self.empty_answers > 0:
            self.empty_answers -= 1
            return fetched(offset, b"", 5, offset)
        return fetched(offset, records(5, 9), 10, 10)


def read(monkeypatch, fetcher, fail_on_data_loss=True):
    monkeypatch.setattr(data_consumer, "BlockingFetcher", fetcher)
    batches = data_consumer.read_offset_range(
        "127.0.0.1:1",
        TP,
        0,
        10,
        False,
        fail_on_data_loss=fail_on_data_loss,
        consumer=KafkaConsumerSettings(),
    )
    return [offset for batch in batches for offset in batch.column("offset").to_pylist()]


def test_a_task_waits_for_a_new_leaders_high_watermark(monkeypatch):
    fetcher = LaggingLeaderFetcher(empty_answers=3, metadata_timeout=30)
    assert read(monkeypatch, fetcher) == list(range(10))
    # Parked at the broker while waiting, the task's own wait otherwise.
    wait = data_consumer.CATCH_UP_WAIT_MS
    assert fetcher.fetches == [(0, 0), (5, 0), (5, wait), (5, wait), (5, wait)]


def test_a_log_that_stays_short_is_data_loss_after_the_timeout(monkeypatch):
    fetcher = LaggingLeaderFetcher(empty_answers=10**9, metadata_timeout=0.2)
    started = time.monotonic()
    with pytest.raises(KafkaDataLossError, match="high watermark is 5"):
        read(monkeypatch, fetcher)
    assert time.monotonic() - started >= 0.2
    fetcher = LaggingLeaderFetcher(empty_answers=10**9, metadata_timeout=0.2)
    assert read(monkeypatch, fetcher, fail_on_data_loss=False) == list(range(5))


def offset_reader(latest_answers: list[int], metadata_timeout: float):
    """A KafkaOffsetReader whose ListOffsets LATEST for t-0 answers
    ``latest_answers`` in turn (the last one from then on); EARLIEST is 0."""
    reader = KafkaOffsetReader.__new__(KafkaOffsetReader)
    reader._loop = asyncio.new_event_loop()
    reader._fetcher = SimpleNamespace(
        cluster=Cluster(
            "127.0.0.1:1",
            retry_backoff=0.001,
            retry_backoff_max=0.002,
            metadata_timeout=metadata_timeout,
        )
    )
    asked = []

    def list_offsets(specs):
        if set(specs.values()) == {-2}:
            return {tp: 0 for tp in specs}
        asked.append(dict(specs))
        answer = latest_answers.pop(0) if len(latest_answers) > 1 else latest_answers[0]
        return {tp: answer for tp in specs}

    reader._list_offsets = list_offsets
    return reader, asked


def test_latest_offsets_below_where_a_query_stands_are_asked_again():
    reader, asked = offset_reader([7, 7, 10, 12], metadata_timeout=30)
    try:
        earliest, latest = reader.earliest_and_latest([TP], {"t": [0]}, reached={TP: 10})
    finally:
        reader._loop.close()
    assert (earliest, latest) == ({TP: 0}, {TP: 10})
    assert len(asked) == 3


def test_latest_offsets_are_taken_as_they_are_without_a_position_or_after_the_timeout():
    reader, asked = offset_reader([7], metadata_timeout=0.2)
    try:
        assert reader.earliest_and_latest([TP], {"t": [0]})[1] == {TP: 7}
        assert len(asked) == 1
        started = time.monotonic()
        assert reader.earliest_and_latest([TP], {"t": [0]}, reached={TP: 10})[1] == {TP: 7}
        assert time.monotonic() - started >= 0.2
    finally:
        reader._loop.close()


def test_the_sink_retries_until_the_delivery_timeout_as_kafkas_producer():
    def arguments(**kafka):
        return producer_arguments(
            parse_kafka_sink_options(
                {
                    "kafka.bootstrap.servers": "127.0.0.1:9092",
                    "topic": "t",
                    **{f"kafka.{name.replace('_', '.')}": value for name, value in kafka.items()},
                }
            )
        )

    assert arguments() == {"acks": -1, "retries": 2**31 - 1, "delivery_timeout_ms": 120_000}
    assert arguments(retries="3", delivery_timeout_ms="5000", acks="1") == {
        "acks": 1,
        "retries": 3,
        "delivery_timeout_ms": 5000,
    }
