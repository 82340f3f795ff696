"""The ``kfast-segments`` data source: batch reads of a broker's log
directory, with no broker running (backfills, forensics).

    spark.dataSource.register(KafkaSegmentsDataSource)
    df = (spark.read.format("kfast-segments")
          .option("path", "/var/lib/kfast/data")      # one of log.dirs
          .option("subscribe", "orders")
          .load())

Rows have Spark's Kafka source schema; the options are the Kafka source's
``subscribe`` / ``subscribePattern`` / ``assign``, ``startingOffsets`` /
``endingOffsets``, the timestamp variants (``startingTimestamp``,
``startingOffsetsByTimestamp``, ``endingTimestamp``,
``endingOffsetsByTimestamp``, ``startingOffsetsByTimestampStrategy``),
``includeHeaders``, ``failOnDataLoss`` and ``minPartitions``, plus ``path``. The driver lists partitions and resolves
offsets from the files; each Spark task reads one offset range of one
partition from its segment files and decodes it with kfast's codec into Arrow.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from kfast_spark.options import (
    KafkaSourceOptions,
    TopicPartition,
    parse_segments_source_options,
)
from kfast_spark.planning import OffsetRangeCalculator, resolve_offset_ranges
from kfast_spark.schema import kafka_schema
from kfast_spark.segments import (
    check_log_dir,
    list_partition_dirs,
    log_offsets,
    offset_for_timestamp,
    read_log_start_offsets,
    read_range,
)


class SegmentRangePartition(InputPartition):
    """Offsets ``[from_offset, until_offset)`` of one partition directory."""

    def __init__(
        self, topic: str, partition: int, partition_dir: str, from_offset: int, until_offset: int
    ):
        super().__init__((topic, partition, from_offset, until_offset))
        self.topic = topic
        self.partition = partition
        self.partition_dir = partition_dir
        self.from_offset = from_offset
        self.until_offset = until_offset


class KafkaSegmentsReader(DataSourceReader):
    def __init__(self, options: KafkaSourceOptions):
        self.options = options
        # Batch rules (no latest start, no earliest end, start <= end) fail
        # here, when Spark plans the read, before any task runs.
        self.starting, self.ending = options.batch_offsets()

    def partitions(self) -> list[SegmentRangePartition]:
        log_dir = self.options.path
        assert log_dir is not None  # the kfast-segments options refuse a missing path
        partition_dirs = list_partition_dirs(log_dir)
        available: dict = {}
        for tp in sorted(partition_dirs):
            available.setdefault(tp.topic, []).append(tp.partition)
        assigned = self.options.strategy.assigned(available)
        checkpointed = read_log_start_offsets(log_dir)
        earliest, latest = {}, {}
        for tp in assigned:
            if tp in partition_dirs:
                earliest[tp], latest[tp] = log_offsets(partition_dirs[tp], checkpointed.get(tp))
        ranges = resolve_offset_ranges(
            assigned,
            self.starting,
            self.ending,
            earliest,
            latest,
            fail_on_data_loss=self.options.fail_on_data_loss,
            offsets_for_times=lambda timestamps: {
                tp: offset_for_timestamp(partition_dirs[tp], timestamp, earliest[tp])
                for tp, timestamp in timestamps.items()
            },
        )
        ranges = OffsetRangeCalculator(self.options.min_partitions).get_ranges(ranges)
        return [
            SegmentRangePartition(
                r.topic_partition.topic,
                r.topic_partition.partition,
                partition_dirs[r.topic_partition],
                r.from_offset,
                r.until_offset,
            )
            for r in ranges
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SegmentRangePartition):
            # PySpark plans one placeholder InputPartition(None) when
            # partitions() is empty: nothing to read.
            return
        yield from read_range(
            partition.partition_dir,
            TopicPartition(partition.topic, partition.partition),
            partition.from_offset,
            partition.until_offset,
            self.options.include_headers,
            fail_on_data_loss=self.options.fail_on_data_loss,
        )


class KafkaSegmentsDataSource(DataSource):
    """Registered as ``kfast-segments``."""

    def __init__(self, options):
        super().__init__(options)
        # Unknown or malformed options fail at load(), as Spark's Kafka source's do.
        self.source_options = parse_segments_source_options(options)
        check_log_dir(self.source_options.path)

    @classmethod
    def name(cls) -> str:
        return "kfast-segments"

    def schema(self) -> StructType:
        return kafka_schema(self.source_options.include_headers)

    def reader(self, schema: StructType) -> KafkaSegmentsReader:
        return KafkaSegmentsReader(self.source_options)
