"""The offline log-directory reader: the files, then the kfast-segments source in Spark."""

import json
import os

import pytest
from kafka_log_writer import PartitionLogWriter, records
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kfast.compression import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
)
from kfast.protocol.errors import CorruptRecordException
from kfast_spark.options import TopicPartition, parse_segments_source_options
from kfast_spark.planning import KafkaDataLossError
from kfast_spark.schema import KAFKA_SCHEMA, KAFKA_SCHEMA_WITH_HEADERS, arrow_schema
from kfast_spark.segments import (
    list_partition_dirs,
    log_offsets,
    offset_for_timestamp,
    read_range,
)
from kfast_spark.segments_source import KafkaSegmentsReader

pytestmark = pytest.mark.spark

ORDERS = "orders"
EVENTS = "events.v1"
CODECS = (COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD)


def write_log_dir(log_dir):
    """orders-0: three segments, every codec, headers, null keys, a control
    batch, a LogAppendTime batch, an offset gap, a torn tail. orders-1: one
    segment with a preallocated (zero-padded) index. orders-2: empty.
    events.v1-0: a few records. Plus what must be ignored."""
    p0 = PartitionLogWriter(str(log_dir), ORDERS, 0)
    for codec in CODECS:
        p0.append(
            records(
                4,
                start=p0.next_offset,
                headers=lambda i: [("h", b"%d" % i), ("empty", None)] if i % 2 else [],
            ),
            codec=codec,
        )
    p0.append(records(3, start=100, key=lambda i: None), transactional=True)
    p0.append_control(commit=True)
    p0.roll()
    p0.append(records(5, start=200), codec=COMPRESSION_ZSTD, log_append_time=1_800_000_000_123)
    p0.append(records(2, start=300), offset_gap=3)
    p0.roll()
    p0.append(
        records(6, start=400, headers=lambda i: [("trace", b"t%d" % i)]), codec=COMPRESSION_LZ4
    )
    p0.append(records(1, start=500))
    p0.append_torn_tail(records(3, start=600))
    p0.close()

    p1 = PartitionLogWriter(str(log_dir), ORDERS, 1)
    for n in range(6):
        p1.append(records(5, start=1000 + 5 * n), codec=CODECS[n % len(CODECS)])
    p1.roll(preallocated_index_tail=32)
    p1.append(records(2, start=2000))
    p1.close()

    p2 = PartitionLogWriter(str(log_dir), ORDERS, 2)
    p2.close()

    events = PartitionLogWriter(str(log_dir), EVENTS, 0)
    events.append(records(3, start=0, headers=lambda i: [("a", b"b")]))
    events.close()

    # Not part of the log: partition dirs pending deletion, being moved or
    # stray, a deleted segment, the metadata log.
    for suffix in ("delete", "future", "stray"):
        moved_dir = log_dir / f"orders-3.0123456789abcdef-{suffix}"
        moved_dir.mkdir()
        (moved_dir / f"{0:020d}.log").write_bytes(b"garbage")
    (log_dir / f"{ORDERS}-0" / f"{0:020d}.log.deleted").write_bytes(b"garbage")
    (log_dir / "__cluster_metadata-0").mkdir()
    return {
        TopicPartition(ORDERS, 0): p0,
        TopicPartition(ORDERS, 1): p1,
        TopicPartition(ORDERS, 2): p2,
        TopicPartition(EVENTS, 0): events,
    }


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("log-dir")
    writers = write_log_dir(path)
    return path, writers


def expected_rows(writers, include_headers=True, select=lambda row: True):
    rows = [row for w in writers.values() for row in w.rows if select(row)]
    if not include_headers:
        rows = [{k: v for k, v in row.items() if k != "headers"} for row in rows]
    return sorted(rows, key=lambda r: (r["topic"], r["partition"], r["offset"]))


def rows_from_arrow(batches):
    rows = []
    for batch in batches:
        for row in batch.to_pylist():
            row["timestamp_ms"] = int(row.pop("timestamp").timestamp() * 1000)
            if row.get("headers") is not None:
                row["headers"] = [(h["key"], h["value"]) for h in row["headers"]]
            rows.append(row)
    return rows


# --- the files, without Spark -------------------------------------------------------


def test_partitions_in_the_log_dir(log_dir):
    path, _ = log_dir
    assert sorted(list_partition_dirs(str(path))) == [
        TopicPartition(EVENTS, 0),
        TopicPartition(ORDERS, 0),
        TopicPartition(ORDERS, 1),
        TopicPartition(ORDERS, 2),
    ]


def test_log_offsets_ignore_the_torn_tail(log_dir):
    path, writers = log_dir
    for tp, writer in writers.items():
        start, end = log_offsets(os.path.join(path, f"{tp.topic}-{tp.partition}"))
        assert (start, end) == (0, writer.next_offset), tp


def test_log_start_offset_from_checkpoint_wins_when_higher(log_dir):
    path, _ = log_dir
    assert log_offsets(str(path / "orders-1"), 12) == (12, 32)


@pytest.mark.parametrize("include_headers", [False, True])
def test_read_range_returns_every_record_with_the_arrow_types(log_dir, include_headers):
    path, writers = log_dir
    tp = TopicPartition(ORDERS, 0)
    batches = list(
        read_range(str(path / "orders-0"), tp, 0, writers[tp].next_offset, include_headers)
    )
    assert all(b.schema.equals(arrow_schema(include_headers)) for b in batches)
    expected = expected_rows({tp: writers[tp]}, include_headers)
    assert rows_from_arrow(batches) == expected


@pytest.mark.parametrize(
    "start, end", [(0, 1), (3, 9), (21, 31), (22, 27), (24, 34), (35, 41), (10, 10)]
)
def test_read_range_cuts_batches_at_the_range(log_dir, start, end):
    path, writers = log_dir
    tp = TopicPartition(ORDERS, 0)
    got = rows_from_arrow(read_range(str(path / "orders-0"), tp, start, end, True))
    assert got == expected_rows({tp: writers[tp]}, True, lambda row: start <= row["offset"] < end)


@pytest.mark.parametrize("chunk_bytes", [64, 300, 1 << 20])
def test_read_range_chunking_does_not_change_rows(log_dir, chunk_bytes):
    path, writers = log_dir
    tp = TopicPartition(ORDERS, 1)
    got = rows_from_arrow(
        read_range(str(path / "orders-1"), tp, 7, 31, False, chunk_bytes=chunk_bytes)
    )
    assert got == expected_rows({tp: writers[tp]}, False, lambda row: 7 <= row["offset"] < 31)


def test_range_below_the_first_segment_is_data_loss(tmp_path):
    writer = PartitionLogWriter(str(tmp_path), "t", 0, next_offset=50)
    writer.append(records(2))
    writer.close()
    with pytest.raises(KafkaDataLossError, match="COULD_NOT_READ_OFFSET_RANGE"):
        list(read_range(str(tmp_path / "t-0"), TopicPartition("t", 0), 10, 52, False))
    got = rows_from_arrow(
        read_range(
            str(tmp_path / "t-0"), TopicPartition("t", 0), 10, 52, False, fail_on_data_loss=False
        )
    )
    assert [row["offset"] for row in got] == [50, 51]


def test_bad_batch_in_a_middle_segment_is_corruption(tmp_path):
    writer = PartitionLogWriter(str(tmp_path), "t", 0)
    writer.append(records(2))
    writer.append_torn_tail(records(2))
    writer.roll()
    writer.append(records(2))
    writer.close()
    with pytest.raises(CorruptRecordException, match="not the last segment"):
        list(read_range(str(tmp_path / "t-0"), TopicPartition("t", 0), 0, 4, False))


T0 = 1_700_000_000_000  # kafka_log_writer.records' first timestamp
LOG_APPEND_TIME = 1_800_000_000_123


@pytest.mark.parametrize(
    "timestamp, offset",
    [
        (0, 0),
        (T0 + 2, 2),
        (T0 + 19, 19),
        (T0 + 101, 21),
        # The LogAppendTime batch (offsets 24-28) is the first whose records are
        # this recent, though later batches hold smaller CreateTimes: Kafka answers
        # with the first such record in log order.
        (T0 + 150, 24),
        (T0 + 450, 24),
        (LOG_APPEND_TIME, 24),
        (LOG_APPEND_TIME + 1, None),
    ],
)
def test_offset_for_timestamp_is_kafkas_list_offsets_answer(log_dir, timestamp, offset):
    path, _ = log_dir
    assert offset_for_timestamp(str(path / "orders-0"), timestamp) == offset


def test_offset_for_timestamp_ignores_records_below_the_log_start(log_dir):
    path, _ = log_dir
    assert offset_for_timestamp(str(path / "orders-0"), T0 + 2, log_start_offset=5) == 5
    assert offset_for_timestamp(str(path / "orders-0"), T0 + 101, log_start_offset=22) == 22


def test_offset_for_timestamp_in_legacy_messages(legacy_log):
    directory, _ = legacy_log
    assert offset_for_timestamp(str(directory), T0 + 4) == 4  # inside the gzip wrapper
    assert offset_for_timestamp(str(directory), T0 + 13) == 13


def test_planning_honours_the_log_start_offset_checkpoint(tmp_path):
    # Planning runs on the driver; called here directly, without Spark.
    writer = PartitionLogWriter(str(tmp_path), "t", 0)
    writer.append(records(10))
    writer.close()
    (tmp_path / "log-start-offset-checkpoint").write_text("0\n1\nt 0 4\n")
    reader = KafkaSegmentsReader(
        parse_segments_source_options(
            {"path": str(tmp_path), "subscribe": "t", "minPartitions": "2"}
        )
    )
    assert [(p.topic, p.partition, p.from_offset, p.until_offset) for p in reader.partitions()] == [
        ("t", 0, 4, 7),
        ("t", 0, 7, 10),
    ]
    reader = KafkaSegmentsReader(
        parse_segments_source_options(
            {"path": str(tmp_path), "subscribe": "t", "startingOffsets": '{"t":{"0":2}}'}
        )
    )
    with pytest.raises(KafkaDataLossError, match="\\[2, 10\\) for topic partition t-0"):
        reader.partitions()


# --- the data source in Spark --------------------------------------------------------


def read(spark, path, **options):
    reader = spark.read.format("kfast-segments").option("path", str(path))
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def collect_rows(df):
    """Rows as the writer's dicts, sorted, and the number of Spark tasks that
    produced them (one query: each Spark action costs seconds)."""
    rows, tasks = [], set()
    # Sorted here, not by Spark: a sort is a shuffle, seconds on a small machine.
    for row in (
        df.selectExpr("*", "unix_millis(timestamp) AS timestamp_ms", "spark_partition_id() AS task")
        .drop("timestamp")
        .collect()
    ):
        row = row.asDict()
        tasks.add(row.pop("task"))
        row["key"] = None if row["key"] is None else bytes(row["key"])
        row["value"] = None if row["value"] is None else bytes(row["value"])
        if row.get("headers") is not None:
            row["headers"] = [
                (h["key"], None if h["value"] is None else bytes(h["value"]))
                for h in row["headers"]
            ]
        rows.append(row)
    return sorted(rows, key=lambda r: (r["topic"], r["partition"], r["offset"])), len(tasks)


def test_schema_is_sparks_kafka_schema(spark, log_dir):
    # Written out here as Spark's KafkaRecordToRowConverter declares it, not
    # taken from kfast_spark.schema.
    spark_kafka_schema = StructType(
        [
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("offset", LongType()),
            StructField("timestamp", TimestampType()),
            StructField("timestampType", IntegerType()),
        ]
    )
    with_headers = StructType(
        spark_kafka_schema.fields
        + [
            StructField(
                "headers",
                ArrayType(
                    StructType(
                        [StructField("key", StringType()), StructField("value", BinaryType())]
                    )
                ),
            )
        ]
    )
    path, _ = log_dir
    assert read(spark, path, subscribe=ORDERS).schema == spark_kafka_schema == KAFKA_SCHEMA
    assert (
        read(spark, path, subscribe=ORDERS, includeHeaders="true").schema
        == with_headers
        == KAFKA_SCHEMA_WITH_HEADERS
    )


def test_reads_exactly_the_written_records(spark, log_dir):
    path, writers = log_dir
    df = read(spark, path, subscribePattern="orders|events\\..*", includeHeaders="true")
    rows, tasks = collect_rows(df)
    assert rows == expected_rows(writers)
    assert tasks == 3  # one input partition per non-empty Kafka partition


def test_offset_ranges_and_min_partitions(spark, log_dir):
    path, writers = log_dir
    df = read(
        spark,
        path,
        assign=json.dumps({ORDERS: [0, 1]}),
        startingOffsets=json.dumps({ORDERS: {"0": 3, "1": -2}}),
        endingOffsets=json.dumps({ORDERS: {"0": 30, "1": -1}}),
        minPartitions="6",
    )

    def wanted(row):
        return row["topic"] == ORDERS and (
            (row["partition"] == 0 and 3 <= row["offset"] < 30) or row["partition"] == 1
        )

    rows, tasks = collect_rows(df)
    assert rows == expected_rows(writers, False, wanted)
    # 27 + 32 offsets cut into round(27/59*6) = 3 and round(32/59*6) = 3 pieces.
    assert tasks == 6


def test_timestamp_options(spark, log_dir):
    path, writers = log_dir
    # orders-1's records carry timestamps T0 + 1000 + offset.
    df = read(
        spark,
        path,
        assign=json.dumps({ORDERS: [0, 1]}),
        startingTimestamp=str(T0 + 2),
        endingOffsetsByTimestamp=json.dumps({ORDERS: {"0": T0 + 101, "1": T0 + 1020}}),
    )
    rows, _ = collect_rows(df)

    def wanted(row):
        return (2 <= row["offset"] < 21) if row["partition"] == 0 else row["offset"] < 20

    assert rows == expected_rows(writers, False, lambda row: row["topic"] == ORDERS and wanted(row))


def test_count_and_filters(spark, log_dir):
    path, writers = log_dir
    df = read(spark, path, subscribe=ORDERS)
    counts = df.selectExpr(
        "count(*)",
        "count_if(partition = 0 AND key IS NULL)",
        "count_if(timestampType = 1)",
        "count_if(partition = 1 AND offset >= 30)",
    ).first()
    assert list(counts) == [
        len(writers[TopicPartition(ORDERS, 0)].rows) + len(writers[TopicPartition(ORDERS, 1)].rows),
        3,
        5,
        2,
    ]
    assert df.filter("offset >= 30 AND partition = 1").count() == 2
    # No input partition at all (an empty partition) is an empty result.
    assert read(spark, path, assign=json.dumps({ORDERS: [2]})).count() == 0


def test_planning_errors_name_the_option(spark, log_dir):
    path, _ = log_dir
    with pytest.raises(
        Exception, match="Unknown option for the kfast-segments source: 'startingoffset'"
    ):
        read(spark, path, subscribe=ORDERS, startingOffset="earliest")
    with pytest.raises(Exception, match="starting offset can't be latest for batch queries"):
        read(spark, path, subscribe=ORDERS, startingOffsets="latest").collect()
    with pytest.raises(Exception, match="Partitions \\[orders-9\\] have been deleted"):
        read(spark, path, assign=json.dumps({ORDERS: [9]})).collect()


def test_reads_seek_through_the_offset_index(tmp_path):
    writer = PartitionLogWriter(str(tmp_path), "t", 0)
    writer.append(records(3))
    writer.append(records(3, start=3))
    writer.append(records(3, start=6))
    writer.close()
    log = tmp_path / "t-0" / f"{0:020d}.log"
    # Wreck the first batch's length: only a read that seeks past it (the
    # index names the second and third batches) can still find offsets 6..8.
    data = bytearray(log.read_bytes())
    data[8:12] = b"\x00\x00\x00\x01"
    log.write_bytes(bytes(data))
    got = rows_from_arrow(read_range(str(tmp_path / "t-0"), TopicPartition("t", 0), 6, 9, False))
    assert [row["offset"] for row in got] == [6, 7, 8]
    # Without the index the same read starts at the wrecked batch, which in
    # the last segment reads as a torn tail: nothing.
    (tmp_path / "t-0" / f"{0:020d}.index").unlink()
    assert list(read_range(str(tmp_path / "t-0"), TopicPartition("t", 0), 6, 9, False)) == []


def test_index_entries_that_do_not_check_out_are_not_used(tmp_path):
    writer = PartitionLogWriter(str(tmp_path), "t", 0)
    writer.append(records(3))
    writer.append(records(3, start=3))
    writer.close()
    index = tmp_path / "t-0" / f"{0:020d}.index"
    # An entry claiming offset 1 sits at the second batch (base offset 3):
    # seeking there for offset 1 would lose offsets 1 and 2.
    index.write_bytes(
        index.read_bytes()[:4].replace(b"\x00\x00\x00\x05", b"\x00\x00\x00\x01")
        + index.read_bytes()[4:8]
    )
    got = rows_from_arrow(read_range(str(tmp_path / "t-0"), TopicPartition("t", 0), 1, 6, False))
    assert [row["offset"] for row in got] == [1, 2, 3, 4, 5]


@pytest.fixture(scope="module")
def legacy_log(tmp_path_factory):
    """A partition written before and after a message format upgrade: magic 0,
    magic 1 (plain and a gzip wrapper), then v2 batches, over two segments."""
    path = tmp_path_factory.mktemp("legacy")
    writer = PartitionLogWriter(str(path), "old", 0)
    writer.append_legacy(0, records(3, key=lambda i: None if i == 1 else b"k%d" % i))
    writer.append_legacy(1, records(4, start=3), codec=COMPRESSION_GZIP)
    writer.append_legacy(1, records(2, start=7))
    writer.append(records(3, start=9), codec=COMPRESSION_LZ4)
    writer.roll()
    writer.append_legacy(1, records(2, start=12))
    writer.append(records(2, start=14))
    writer.close()
    return path / "old-0", writer


def test_legacy_message_sets_read_like_kafka_consumers_see_them(legacy_log):
    directory, writer = legacy_log
    assert log_offsets(str(directory)) == (0, 16)
    tp = TopicPartition("old", 0)
    for include_headers in (False, True):
        got = rows_from_arrow(read_range(str(directory), tp, 0, 16, include_headers))
        assert got == expected_rows({tp: writer}, include_headers)
    assert got[0]["timestamp_ms"] == -1 and got[0]["timestampType"] == -1  # magic 0


@pytest.mark.parametrize("start, end", [(4, 8), (5, 6), (6, 10), (12, 13), (8, 15)])
def test_legacy_ranges_cut_inside_wrappers_and_across_formats(legacy_log, start, end):
    directory, writer = legacy_log
    tp = TopicPartition("old", 0)
    got = rows_from_arrow(read_range(str(directory), tp, start, end, False, chunk_bytes=64))
    assert got == expected_rows({tp: writer}, False, lambda row: start <= row["offset"] < end)


def test_reads_a_log_written_by_kfast_storage_while_open_and_after_close(tmp_path):
    """kfast's own Log writes the directory: its segments, rolls, preallocated
    indexes (zero tail while the segment is active) and LogAppendTime."""
    from kfast.config import LogConfig
    from kfast.records import RecordBatchBuilder
    from kfast.storage.log import Log

    log = Log(
        str(tmp_path / "live-0"),
        LogConfig({"index.interval.bytes": "512", "message.timestamp.type": "LogAppendTime"}),
    )
    for n in range(40):
        builder = RecordBatchBuilder(CODECS[n % len(CODECS)])
        for i in range(7):
            builder.append(
                T0 + i,
                b"k%d" % (n * 7 + i),
                b"v" * 200,
                headers=[("n", b"%d" % n)] if i % 3 else [],
            )
        log.append_as_leader(builder.build(), leader_epoch=0, now=LOG_APPEND_TIME)
        if n % 10 == 9 and n < 39:
            log.roll()
    appended = 40 * 7
    tp = TopicPartition("live", 0)
    directory = str(tmp_path / "live-0")
    assert len([f for f in os.listdir(directory) if f.endswith(".log")]) == 4

    def check():
        assert log_offsets(directory) == (0, appended)
        got = rows_from_arrow(read_range(directory, tp, 10, appended - 5, True))
        assert [row["offset"] for row in got] == list(range(10, appended - 5))
        for row in got:
            n, i = divmod(row["offset"], 7)
            assert row["key"] == b"k%d" % row["offset"]
            assert row["headers"] == ([("n", b"%d" % n)] if i % 3 else None)
            assert (row["timestampType"], row["timestamp_ms"]) == (1, LOG_APPEND_TIME)

    check()  # while open: the active segment's index is preallocated
    log.close()
    check()
