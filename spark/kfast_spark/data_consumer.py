"""One Spark task's read of one offset range of one partition from the
broker (Spark's KafkaDataConsumer), as Arrow batches of the Kafka schema.

The task fetches raw record batches with kfast's client (``fetch_raw``: the
bytes the broker sent, complete batches only) and hands them to the columnar
decoder (:func:`kfast_spark.decoding.records_to_arrow`), so no Python object
is made per record; with ``kafka.isolation.level=read_committed`` the
broker answers up to the last stable offset and the batches of aborted
transactions are left out first (kfast.client.fetcher.committed_records), so
offsets have gaps, as with Spark's own source. A fetch returns whole batches, which may begin before the
range (a compressed batch is sent whole) or run past its end: the decoder's
cut keeps ``[start, end)`` only.

A leader change while the task runs is the client's business (it follows
the new leader, retrying in time), but one thing shows here: a leader
elected since planning may answer with a high watermark below the range's
end for a moment (it learns the old leader's only once its followers fetch
from it), so an empty answer below the end is asked again, parked at the
broker until the high watermark moves, up to the client's
``default.api.timeout.ms``, as Spark's consumer polls up to its poll timeout
before it decides that records are gone.

Data loss, as Spark's consumer sees it:

- the range starts below the log start offset (retention or DeleteRecords
  since planning): OFFSET_OUT_OF_RANGE; with ``failOnDataLoss`` it raises,
  otherwise the read goes on from the log start offset;
- the log ends before the range does (the partition was recreated or
  truncated), still after that wait: the same rule, and the read stops
  there.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pyarrow as pa

from kfast.client import EARLIEST, BlockingFetcher
from kfast.client.fetcher import committed_records
from kfast.protocol import errors
from kfast_spark.decoding import records_to_arrow
from kfast_spark.options import KafkaConsumerSettings, TopicPartition
from kfast_spark.planning import report_data_loss

#: Bytes asked of the broker per partition and fetch, unless
#: ``kafka.max.partition.fetch.bytes`` says otherwise: large enough that
#: per-request costs vanish next to decoding, small enough to bound a task's
#: memory.
FETCH_MAX_BYTES = 8 * 1024 * 1024

#: How long the broker may park a fetch that found nothing below the range's
#: end, waiting for the high watermark to move.
CATCH_UP_WAIT_MS = 500


def read_offset_range(
    bootstrap_servers: str,
    topic_partition: TopicPartition,
    start: int,
    end: int,
    include_headers: bool,
    *,
    fail_on_data_loss: bool = True,
    consumer: KafkaConsumerSettings | None = None,
) -> Iterator[pa.RecordBatch]:
    """Rows of the records with offsets in ``[start, end)``, fetched with the
    client settings of ``consumer`` (the read's ``kafka.*`` options)."""
    if start >= end:
        return
    consumer = consumer or KafkaConsumerSettings()
    partition_bytes = (
        FETCH_MAX_BYTES
        if consumer.max_partition_fetch_bytes is None
        else consumer.max_partition_fetch_bytes
    )
    max_wait_ms = 0 if consumer.fetch_max_wait_ms is None else consumer.fetch_max_wait_ms
    topic, partition = topic_partition
    with BlockingFetcher(bootstrap_servers, **consumer.client_arguments()) as fetcher:
        offset = start
        catch_up_deadline: float | None = None
        while offset < end:
            try:
                fetched = fetcher.fetch_raw(
                    topic,
                    partition,
                    offset,
                    partition_bytes,
                    max_wait_ms=max_wait_ms
                    if catch_up_deadline is None
                    else max(max_wait_ms, CATCH_UP_WAIT_MS),
                )
            except errors.OffsetOutOfRangeException:
                log_start = fetcher.list_offsets({(topic, partition): EARLIEST})[topic, partition]
                if offset >= log_start:
                    # Past the end of the log: nothing more of this range exists.
                    _lost(
                        fail_on_data_loss,
                        topic_partition,
                        offset,
                        end,
                        f"the log now ends before {offset}",
                    )
                    return
                _lost(
                    fail_on_data_loss,
                    topic_partition,
                    offset,
                    min(log_start, end),
                    f"the log now starts at {log_start}",
                )
                offset = log_start
                continue
            if fetched.next_offset <= offset:
                # Nothing at or after ``offset``: a new leader's high
                # watermark not yet caught up, or a log that ends below the
                # range's end. Only time tells them apart.
                now = time.monotonic()
                if catch_up_deadline is None:
                    catch_up_deadline = now + fetcher.metadata_timeout
                if now < catch_up_deadline:
                    continue
                _lost(
                    fail_on_data_loss,
                    topic_partition,
                    offset,
                    end,
                    f"the high watermark is {fetched.high_watermark}",
                )
                return
            catch_up_deadline = None
            batch = records_to_arrow(
                committed_records(fetched) if consumer.read_committed else fetched.records,
                topic,
                partition,
                offset,
                end,
                include_headers,
                check_crc=consumer.check_crcs,
            )
            if batch is not None:
                yield batch
            offset = fetched.next_offset


def _lost(
    fail_on_data_loss: bool, topic_partition: TopicPartition, start: int, end: int, why: str
) -> None:
    report_data_loss(
        fail_on_data_loss,
        "COULD_NOT_READ_OFFSET_RANGE",
        f"Could not read records in offset [{start}, {end}) for topic partition "
        f"{topic_partition}: {why}.",
    )
