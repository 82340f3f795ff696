"""The ``kfast`` data source: Spark's Kafka source and sink over a kfast (or
any Kafka) broker, with kfast's client and codec.

    register(spark)
    df = (spark.read.format("kfast")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "orders")
          .load())
    stream = spark.readStream.format("kfast").option(...).load()
    df.write.format("kfast").option("kafka.bootstrap.servers", ...).option("topic", "out").save()

Options are parsed when they are first needed: reads and writes take
different ones (``subscribe`` vs ``topic``), and Spark hands both to the
same DataSource. A read's options fail at ``load()`` (Spark asks for the
schema there), a write's when the write is planned.

Reads: the driver resolves offsets (:mod:`kfast_spark.offset_reader`), one
input partition per Kafka partition and offset range; each task fetches its
range and decodes it into Arrow (:mod:`kfast_spark.data_consumer`).
Streaming offsets are Spark's Kafka offset JSON, ``{"topic": {"0": 23}}``.
Writes: :mod:`kfast_spark.sink`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import StructType

from kfast_spark.data_consumer import read_offset_range
from kfast_spark.offset_reader import KafkaOffsetReader
from kfast_spark.options import (
    KafkaSourceOptions,
    LatestOffsetRangeLimit,
    TopicPartition,
    parse_kafka_sink_options,
    parse_kafka_source_options,
    parse_partition_offsets_json,
    partition_offsets_json,
)
from kfast_spark.planning import (
    KafkaOffsetRange,
    OffsetRangeCalculator,
    rate_limit,
    report_data_loss,
)
from kfast_spark.schema import kafka_schema, validate_sink_schema
from kfast_spark.sink import KafkaBatchWriter, KafkaStreamWriter, producer_arguments

try:  # PySpark 4.2+: admission control (ReadLimit) and Trigger.AvailableNow.
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )

    #: This PySpark passes ``latestOffset(start, limit)`` and has Trigger.AvailableNow
    #: for Python sources (4.2+).
    ADMISSION_CONTROL = True
except ImportError:  # pragma: no cover - older PySpark
    # Names of what this PySpark lacks: None, checked before use.
    ReadAllAvailable = ReadMaxRows = None  # type: ignore[misc, assignment]
    ADMISSION_CONTROL = False

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """PySpark before 4.2 has no Trigger.AvailableNow for Python sources."""


logger = logging.getLogger(__name__)


class KafkaOffsetRangePartition(InputPartition):
    """Offsets ``[from_offset, until_offset)`` of one Kafka partition, and
    what a task needs to read them (input partitions are pickled to it)."""

    def __init__(self, bootstrap_servers: str, offset_range: KafkaOffsetRange):
        tp = offset_range.topic_partition
        super().__init__(
            (tp.topic, tp.partition, offset_range.from_offset, offset_range.until_offset)
        )
        self.bootstrap_servers = bootstrap_servers
        self.topic_partition = tp
        self.from_offset = offset_range.from_offset
        self.until_offset = offset_range.until_offset


def _read(options: KafkaSourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, KafkaOffsetRangePartition):
        # PySpark plans one placeholder InputPartition(None) when
        # partitions() is empty: nothing to read.
        return iter(())
    return read_offset_range(
        partition.bootstrap_servers,
        partition.topic_partition,
        partition.from_offset,
        partition.until_offset,
        options.include_headers,
        fail_on_data_loss=options.fail_on_data_loss,
        consumer=options.consumer,
    )


def _input_partitions(bootstrap_servers: str, ranges: list[KafkaOffsetRange]) -> list:
    return [KafkaOffsetRangePartition(bootstrap_servers, r) for r in ranges]


class KafkaBatchReader(DataSourceReader):
    """A batch read (``spark.read``): startingOffsets (default earliest) to
    endingOffsets (default latest), fixed when the query is planned."""

    def __init__(self, options: KafkaSourceOptions):
        self.options = options
        # Batch rules (no latest start, no earliest end, start <= end) fail
        # when Spark plans the read, before any task runs.
        options.batch_offsets()

    def partitions(self) -> list[KafkaOffsetRangePartition]:
        bootstrap = self.options.kafka_params["bootstrap.servers"]
        with KafkaOffsetReader(bootstrap, self.options.consumer) as offsets:
            return _input_partitions(bootstrap, offsets.batch_offset_ranges(self.options))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)


class KafkaMicroBatchStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A streaming read (``spark.readStream``), offsets as Spark's Kafka
    offset JSON.

    How each micro-batch's end respects ``maxOffsetsPerTrigger``:

    - PySpark 4.2+ passes ``latestOffset(start, limit)``: ``start`` is the
      previous batch's end (from the checkpoint after a restart) and
      ``limit`` is :meth:`getDefaultReadLimit`'s ``ReadMaxRows`` (or
      ``ReadAllAvailable`` for Trigger.AvailableNow / Once). The end is
      ``rate_limit(limit, start, latest)``: stateless, hence right across
      restarts.
    - PySpark before 4.2 calls ``latestOffset()`` with no start, and the
      reader limits from the last end it knows. How 4.0's engine drives it:

      * a new query: ``latestOffset()`` comes *before* ``initialOffset()``
        (which Spark asks only when it plans the first batch). The reader
        resolves the starting offsets once, limits the first batch from
        them and answers ``initialOffset()`` with the same offsets;
      * a restarted query: before any ``latestOffset()``, Spark hands the
        last offset of its checkpoint to the source (``AcceptsLatestSeenOffset``),
        which PySpark forwards as ``partitions(last, last)``; that is the
        restart's true start. (The next calls, re-planning an uncommitted
        batch or ``commit``, end there too);
      * afterwards every batch starts where the previous ``latestOffset()``
        answer ended: the engine runs one batch per new end it is given.

    PySpark checks the signature (no parameters = the old API), so the one
    method with optional parameters serves both.

    Trigger.AvailableNow: :meth:`prepareForTriggerAvailableNow` notes the
    latest offsets when the query starts; no batch ends beyond them (still
    split by ``maxOffsetsPerTrigger``), and partitions that appear later are
    not read, as in Spark's Kafka source. Python sources get this trigger
    from PySpark 4.2; before, Spark runs it through its single-batch
    fallback (it logs that the source "does not support
    Trigger.AvailableNow"), which calls ``latestOffset()`` once, without
    telling the reader a restarted query's checkpoint. With
    ``maxOffsetsPerTrigger`` that cannot work: the reader warns when it is
    created and, if a batch then turns out to start past the end it
    computed, fails naming the cause instead of reporting data loss.
    """

    def __init__(self, options: KafkaSourceOptions):
        self.options = options
        self.starting = options.streaming_starting_offsets()
        if options.min_offsets_per_trigger is not None:
            raise ValueError(
                "minOffsetsPerTrigger (and maxTriggerDelay) are not supported by "
                "the kfast source: PySpark's data source API admits one read "
                "limit per trigger, used for maxOffsetsPerTrigger"
            )
        self.bootstrap_servers = options.kafka_params["bootstrap.servers"]
        self._offset_reader: KafkaOffsetReader | None = None
        # The query's starting offsets, resolved once: PySpark before 4.2
        # asks for them after the first latestOffset(), which must have used
        # the same ones (``startingOffsets=latest`` moves meanwhile).
        self._initial: dict[TopicPartition, int] | None = None
        # Where the next micro-batch starts, for PySpark without admission control.
        self._known_end: dict[TopicPartition, int] | None = None
        # An end computed from the starting offsets because Spark had not yet
        # said where the query stands (PySpark before 4.2): checked in partitions().
        self._assumed_new_query_end: dict[TopicPartition, int] | None = None
        # Trigger.AvailableNow: the latest offsets when the query started.
        self._available_now_end: dict[TopicPartition, int] | None = None
        if not ADMISSION_CONTROL and options.max_offsets_per_trigger is not None:
            logger.warning(
                "maxOffsetsPerTrigger with this PySpark (before 4.2) applies to "
                "processing-time triggers only: Python data sources get "
                "Trigger.AvailableNow from PySpark 4.2, and Spark's single-batch fallback "
                "for older versions does not tell the source where a restarted query "
                "stands"
            )

    @property
    def offset_reader(self) -> KafkaOffsetReader:
        # Made on first use: the reader object is pickled to the planner process.
        if self._offset_reader is None:
            self._offset_reader = KafkaOffsetReader(self.bootstrap_servers, self.options.consumer)
        return self._offset_reader

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_offset_reader"] = None
        return state

    def _initial_offsets(self) -> dict[TopicPartition, int]:
        if self._initial is None:
            ranges = self.offset_reader.resolve(
                self.options, self.starting, LatestOffsetRangeLimit()
            )
            self._initial = {r.topic_partition: r.from_offset for r in ranges}
        return self._initial

    def initialOffset(self) -> dict:
        start = self._initial_offsets()
        if self._known_end is None:
            self._known_end = dict(start)
        return partition_offsets_json(start)

    def prepareForTriggerAvailableNow(self) -> None:
        reader = self.offset_reader
        available = reader.available_partitions(self.options)
        _, self._available_now_end = reader.earliest_and_latest(
            self.options.strategy.assigned(available), available
        )

    def getDefaultReadLimit(self):
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        if limit is None:  # PySpark before 4.2: the option is the limit
            max_offsets = self.options.max_offsets_per_trigger
        elif ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            max_offsets = limit.max_rows
        else:
            max_offsets = None
        assumed_new_query = False
        start_offsets: dict[TopicPartition, int] | None
        if start is not None:
            start_offsets = parse_partition_offsets_json(start)
        else:
            if self._known_end is None and max_offsets is not None:
                # PySpark before 4.2 and Spark has said nothing yet: a new
                # query (a restarted one is told its checkpoint first).
                # Resolved before the latest offsets are asked, so that
                # startingOffsets=latest is never ahead of them.
                self._known_end = dict(self._initial_offsets())
                assumed_new_query = True
            start_offsets = self._known_end
        reader = self.offset_reader
        available = reader.available_partitions(self.options)
        assigned = self.options.strategy.assigned(available)
        # Not below where the query stands, unless that persists: a leader
        # elected since the last batch may not know the high watermark yet.
        earliest, latest = reader.earliest_and_latest(assigned, available, reached=start_offsets)
        end = dict(latest)
        if self._available_now_end is not None:
            cap = self._available_now_end
            end = {
                tp: min(offset, cap[tp])
                if tp in cap
                else (start_offsets or {}).get(tp, earliest[tp])
                for tp, offset in end.items()
            }
        if max_offsets is not None:
            # Resolved above whenever there is a limit.
            assert start_offsets is not None
            # Limited within the AvailableNow cap, not beyond it.
            end = rate_limit(max_offsets, start_offsets, end, earliest)
        self._known_end = end
        self._assumed_new_query_end = end if assumed_new_query else None
        return partition_offsets_json(end)

    def reportLatestOffset(self) -> dict | None:
        reader = self.offset_reader
        available = reader.available_partitions(self.options)
        _, latest = reader.earliest_and_latest(self.options.strategy.assigned(available), available)
        return partition_offsets_json(latest)

    def partitions(self, start: dict, end: dict) -> list[KafkaOffsetRangePartition]:
        start_offsets = parse_partition_offsets_json(start)
        end_offsets = parse_partition_offsets_json(end)
        if self._known_end is None:
            # PySpark before 4.2, restarted query: partitions(last, last) is
            # how the checkpoint's last offset reaches the reader.
            self._known_end = end_offsets
        if self._assumed_new_query_end is not None and end_offsets == self._assumed_new_query_end:
            self._assumed_new_query_end = None
            behind = sorted(
                tp for tp, offset in end_offsets.items() if offset < start_offsets.get(tp, offset)
            )
            if behind:
                raise ValueError(
                    "maxOffsetsPerTrigger was applied from the query's starting offsets, but "
                    f"the batch starts later ({', '.join(map(str, behind))}): Spark restarted "
                    "the query without telling the source its checkpoint, which PySpark "
                    "before 4.2 does for Trigger.AvailableNow (run by Spark's single-batch "
                    "fallback). Use a processing-time trigger, or PySpark 4.2+, with "
                    "maxOffsetsPerTrigger."
                )
        fail = self.options.fail_on_data_loss
        deleted = sorted(set(start_offsets) - set(end_offsets))
        if deleted:
            report_data_loss(
                fail, "PARTITIONS_DELETED", f"{', '.join(map(str, deleted))} are gone."
            )
        new = [tp for tp in end_offsets if tp not in start_offsets]
        if new:
            # Partitions added since the previous batch are read from their start.
            earliest, _ = self.offset_reader.earliest_and_latest(
                new, {tp.topic: [p.partition for p in new if p.topic == tp.topic] for tp in new}
            )
            for tp in new:
                if tp not in earliest:
                    report_data_loss(
                        fail,
                        "ADDED_PARTITION_DOES_NOT_EXIST",
                        f"Added partition {tp} starts from 0 instead.",
                    )
                start_offsets[tp] = earliest.get(tp, 0)
        ranges = []
        for tp in sorted(end_offsets):
            from_offset, until_offset = start_offsets[tp], end_offsets[tp]
            if until_offset < from_offset:
                report_data_loss(
                    fail,
                    "PARTITION_OFFSET_CHANGED",
                    f"Partition {tp}'s offset was changed from {from_offset} to {until_offset}.",
                )
                continue
            ranges.append(KafkaOffsetRange(tp, from_offset, until_offset))
        ranges = OffsetRangeCalculator(self.options.min_partitions).get_ranges(ranges)
        return _input_partitions(self.bootstrap_servers, ranges)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)

    def commit(self, end: dict) -> None:
        # Kafka keeps no consumer state for Spark's source: the checkpoint is the truth.
        if self._known_end is None:
            self._known_end = parse_partition_offsets_json(end)

    def stop(self) -> None:
        if self._offset_reader is not None:
            self._offset_reader.close()
            self._offset_reader = None


class KafkaDataSource(DataSource):
    """Registered as ``kfast``."""

    def __init__(self, options):
        super().__init__(options)
        self._source_options: KafkaSourceOptions | None = None

    @classmethod
    def name(cls) -> str:
        return "kfast"

    @property
    def source_options(self) -> KafkaSourceOptions:
        if self._source_options is None:
            self._source_options = parse_kafka_source_options(self.options)
        return self._source_options

    def schema(self) -> StructType:
        return kafka_schema(self.source_options.include_headers)

    def reader(self, schema: StructType) -> KafkaBatchReader:
        return KafkaBatchReader(self.source_options)

    def streamReader(self, schema: StructType) -> KafkaMicroBatchStreamReader:
        return KafkaMicroBatchStreamReader(self.source_options)

    def _sink_options(self, schema: StructType, overwrite: bool):
        # Checked when the write is planned, before any task runs.
        if overwrite:
            # Spark's Kafka sink: a topic cannot be emptied by a write. (Spark
            # lets Python data sources be written in append and overwrite
            # modes only, so ``mode("append")`` is the way to write.)
            raise ValueError(
                "Save mode Overwrite not allowed for Kafka. Allowed save modes "
                "are Append and ErrorIfExists (default)."
            )
        options = parse_kafka_sink_options(self.options)
        validate_sink_schema(schema, options.topic)
        producer_arguments(options)
        return options

    def writer(self, schema: StructType, overwrite: bool) -> KafkaBatchWriter:
        return KafkaBatchWriter(self._sink_options(schema, overwrite), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> KafkaStreamWriter:
        return KafkaStreamWriter(self._sink_options(schema, overwrite), schema)


__all__ = [
    "ADMISSION_CONTROL",
    "KafkaBatchReader",
    "KafkaDataSource",
    "KafkaMicroBatchStreamReader",
    "KafkaOffsetRangePartition",
]
