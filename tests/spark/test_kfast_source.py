"""The ``kfast`` source and sink against a kfast broker in this process, fed
and checked by independent clients (kafka-python)."""

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from kfast.testing import KfastBroker
from kfast_spark import data_consumer
from kfast_spark.options import TopicPartition, parse_kafka_source_options
from kfast_spark.source import ADMISSION_CONTROL, KafkaBatchReader, KafkaMicroBatchStreamReader

pytestmark = [pytest.mark.spark, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

CODECS = ("gzip", "snappy", "lz4", "zstd", None)
TOPIC = "orders"
PARTITIONS = 3
PER_PARTITION = 25
BASE_TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    broker = KfastBroker(
        {"num.partitions": PARTITIONS}, data_dir=str(tmp_path_factory.mktemp("kfast-source"))
    ).start()
    yield broker
    broker.close()


def create_topic(broker, name, partitions=PARTITIONS):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()


def record(i):
    """The i-th produced record: null keys, headers on odd ones, increasing timestamps."""
    return {
        "key": None if i % 4 == 0 else b"key-%d" % i,
        "value": b"value-%d" % i,
        "headers": [{"key": "seq", "value": b"%d" % i}] if i % 2 else None,
        "timestamp": BASE_TS + i,
    }


def produce(broker, topic, numbers, partitions=PARTITIONS):
    """Produce record(i) for i in numbers to partition i % partitions, every
    codec in turn (one producer per codec); returns {(partition, offset): i}."""
    sent = {}
    chunks = [numbers[k :: len(CODECS)] for k in range(len(CODECS))]
    for codec, chunk in zip(CODECS, chunks):
        producer = KafkaProducer(
            bootstrap_servers=broker.bootstrap_servers,
            acks="all",
            compression_type=codec,
            linger_ms=20,
        )
        futures = []
        for i in chunk:
            r = record(i)
            futures.append(
                (
                    i,
                    producer.send(
                        topic,
                        key=r["key"],
                        value=r["value"],
                        partition=i % partitions,
                        headers=[(h["key"], h["value"]) for h in r["headers"] or []],
                        timestamp_ms=r["timestamp"],
                    ),
                )
            )
        producer.flush()
        for i, future in futures:
            metadata = future.get(timeout=30)
            sent[(metadata.partition, metadata.offset)] = i
        producer.close()
    return sent


def expected_rows(topic, sent, keep=lambda partition, offset: True):
    rows = []
    for (partition, offset), i in sorted(sent.items()):
        if keep(partition, offset):
            r = record(i)
            rows.append(
                {**r, "topic": topic, "partition": partition, "offset": offset, "timestampType": 0}
            )
    return rows


def plain(rows):
    """Spark rows -> dicts of Python values comparable with expected_rows."""
    out = []
    for row in rows:
        d = row.asDict(recursive=True)
        d["timestamp"] = d.pop("ms")
        d["key"] = None if d["key"] is None else bytes(d["key"])
        d["value"] = None if d["value"] is None else bytes(d["value"])
        if "headers" in d:
            for header in d["headers"] or []:
                header["value"] = bytes(header["value"])
        out.append(d)
    return sorted(out, key=lambda r: (r["topic"], r["partition"], r["offset"]))


def collect(df):
    return plain(df.selectExpr("*", "unix_millis(timestamp) AS ms").drop("timestamp").collect())


@pytest.fixture(scope="module")
def orders(broker):
    create_topic(broker, TOPIC)
    return produce(broker, TOPIC, list(range(PARTITIONS * PER_PARTITION)))


def read(spark, broker, **options):
    reader = spark.read.format("kfast").option("kafka.bootstrap.servers", broker.bootstrap_servers)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


# ---- batch reads --------------------------------------------------------------------


def test_batch_read_returns_every_record_in_all_columns(spark, broker, orders):
    df = read(spark, broker, subscribe=TOPIC, includeHeaders="true")
    assert [f.name for f in df.schema.fields] == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    assert collect(df) == expected_rows(TOPIC, orders)


def test_batch_read_without_headers_has_no_headers_column(spark, broker, orders):
    rows = collect(read(spark, broker, subscribePattern="ord.*"))
    assert rows == [
        {k: v for k, v in r.items() if k != "headers"} for r in expected_rows(TOPIC, orders)
    ]


def test_batch_read_offset_range_json(spark, broker, orders):
    df = read(
        spark,
        broker,
        assign='{"orders":[0,2]}',
        includeHeaders="true",
        startingOffsets='{"orders":{"0":3,"2":-2}}',
        endingOffsets='{"orders":{"0":10,"2":-1}}',
    )
    assert collect(df) == expected_rows(
        TOPIC, orders, lambda p, o: (p == 0 and 3 <= o < 10) or p == 2
    )


def test_batch_read_timestamp_range(spark, broker, orders):
    # A timestamp resolves to the first offset, in log order, of a record at
    # least that recent (ListOffsets); records are not in timestamp order
    # here (one producer per codec), so the range is by offset.
    start_ts, end_ts = BASE_TS + 30, BASE_TS + 45

    def first_offset_at(partition, timestamp):
        return min(
            (
                o
                for (p, o), i in orders.items()
                if p == partition and record(i)["timestamp"] >= timestamp
            ),
            default=PER_PARTITION,
        )

    df = read(
        spark,
        broker,
        subscribe=TOPIC,
        includeHeaders="true",
        startingTimestamp=str(start_ts),
        endingTimestamp=str(end_ts),
    )
    assert collect(df) == expected_rows(
        TOPIC, orders, lambda p, o: first_offset_at(p, start_ts) <= o < first_offset_at(p, end_ts)
    )


def test_min_partitions_splits_ranges_without_changing_rows(spark, broker, orders):
    options = {
        "kafka.bootstrap.servers": broker.bootstrap_servers,
        "subscribe": TOPIC,
        "minPartitions": "9",
    }
    partitions = KafkaBatchReader(parse_kafka_source_options(options)).partitions()
    assert len(partitions) == 9
    df = read(spark, broker, subscribe=TOPIC, minPartitions="9")
    assert df.count() == len(orders)


def test_segment_reader_returns_the_same_rows_as_the_broker_read(spark, broker, orders):
    broker_rows = collect(read(spark, broker, subscribe=TOPIC, includeHeaders="true"))
    segment_rows = collect(
        spark.read.format("kfast-segments")
        .option("path", broker.data_dir)
        .option("subscribe", TOPIC)
        .option("includeHeaders", "true")
        .load()
    )
    assert segment_rows == broker_rows


def test_offsets_below_log_start_fail_or_are_skipped(spark, broker):
    create_topic(broker, "trimmed", 1)
    sent = produce(broker, "trimmed", list(range(10)), partitions=1)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    admin.delete_records({KafkaTopicPartition("trimmed", 0): 4})
    admin.close()
    options = dict(assign='{"trimmed":[0]}', startingOffsets='{"trimmed":{"0":0}}')
    with pytest.raises(Exception, match="KAFKA_DATA_LOSS"):
        read(spark, broker, **options).collect()
    rows = collect(read(spark, broker, failOnDataLoss="false", **options))
    assert [r["offset"] for r in rows] == [o for (_, o) in sorted(sent) if o >= 4]


def test_consumer_properties_reach_the_client_of_every_fetch(broker, orders, monkeypatch):
    made, fetches = [], []

    class RecordingFetcher(data_consumer.BlockingFetcher):
        def __init__(self, bootstrap_servers, **options):
            made.append(options)
            super().__init__(bootstrap_servers, **options)

        def fetch_raw(self, topic, partition, offset, max_bytes, max_wait_ms=None):
            fetches.append((max_bytes, max_wait_ms))
            return super().fetch_raw(topic, partition, offset, max_bytes, max_wait_ms)

    monkeypatch.setattr(data_consumer, "BlockingFetcher", RecordingFetcher)
    consumer = parse_kafka_source_options(
        {
            "kafka.bootstrap.servers": broker.bootstrap_servers,
            "subscribe": TOPIC,
            "kafka.client.id": "etl-7",
            "kafka.request.timeout.ms": "9000",
            "kafka.max.partition.fetch.bytes": "1",
            "kafka.fetch.max.wait.ms": "5",
        }
    ).consumer
    batches = list(
        data_consumer.read_offset_range(
            broker.bootstrap_servers,
            TopicPartition(TOPIC, 1),
            0,
            PER_PARTITION,
            False,
            consumer=consumer,
        )
    )
    assert sum(b.num_rows for b in batches) == PER_PARTITION
    assert made == [{"client_id": "etl-7", "request_timeout": 9.0}]
    # One byte per partition and fetch: the broker still answers one whole
    # batch each time (KIP-74), so the range takes one fetch per batch.
    assert len(fetches) > 1 and set(fetches) == {(1, 5)}


def test_batch_read_with_consumer_properties_returns_every_record(spark, broker, orders):
    df = read(
        spark,
        broker,
        subscribe=TOPIC,
        includeHeaders="true",
        **{
            "kafka.client.id": "spark-etl",
            "kafka.request.timeout.ms": "10000",
            "kafka.max.partition.fetch.bytes": "64",
            "kafka.fetch.max.bytes": "1048576",
            "kafka.security.protocol": "PLAINTEXT",
            "kafka.group.id": "ignored",
            "kafka.check.crcs": "true",
        },
    )
    assert collect(df) == expected_rows(TOPIC, orders)


# ---- bad options ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "options, message",
    [
        ({}, "One of the following options must be specified"),
        ({"subscribe": TOPIC, "assign": '{"orders":[0]}'}, "Only one of the following options"),
        (
            {"subscribe": TOPIC, "startingOffsets": "latest"},
            "starting offset can't be latest for batch queries",
        ),
        (
            {"subscribe": TOPIC, "endingOffsets": "earliest"},
            "ending offset can't be earliest for batch queries",
        ),
        (
            {"subscribe": TOPIC, "kafka.auto.offset.reset": "earliest"},
            "'auto.offset.reset' is not supported",
        ),
        ({"subscribe": TOPIC, "startingOffset": "earliest"}, "Unknown option"),
        (
            {"subscribe": TOPIC, "kafka.security.protocol": "SASL_SSL"},
            "'kafka.sasl.mechanism' refused by the kfast source: Invalid value GSSAPI",
        ),
        (
            {
                "subscribe": TOPIC,
                "kafka.security.protocol": "SSL",
                "kafka.ssl.keystore.location": "/k.jks",
            },
            "'kafka.ssl.keystore.location' refused by the kfast source: Invalid value /k.jks for "
            "configuration ssl.keystore.location: cannot read the file",
        ),
    ],
)
def test_bad_options_fail_with_sparks_messages(spark, broker, options, message):
    with pytest.raises(Exception, match=message):
        read(spark, broker, **options).collect()


def test_missing_bootstrap_servers(spark):
    with pytest.raises(Exception, match="kafka.bootstrap.servers' must be specified"):
        spark.read.format("kfast").option("subscribe", TOPIC).load().collect()


# ---- streaming reads ------------------------------------------------------------------


def stream(spark, broker, **options):
    reader = spark.readStream.format("kfast").option(
        "kafka.bootstrap.servers", broker.bootstrap_servers
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def run_until_caught_up(df, checkpoint):
    """Run a query with a checkpoint until it has read everything available;
    returns the rows of each micro-batch, in order. Spark's memory sink
    cannot restart from a checkpoint (append mode), so the batches are
    collected with foreachBatch, which sees a batch again if it is re-run."""
    batches = []

    def collect_batch(batch_df, batch_id):
        batches.append(collect(batch_df))

    query = (
        df.writeStream.foreachBatch(collect_batch).option("checkpointLocation", checkpoint).start()
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    return [rows for rows in batches if rows]


def test_stream_restarts_from_its_checkpoint_without_loss_or_duplicates(spark, broker, tmp_path):
    topic = "events"
    create_topic(broker, topic, 2)
    first = produce(broker, topic, list(range(30)), partitions=2)
    df = stream(
        spark,
        broker,
        subscribe=topic,
        startingOffsets="earliest",
        includeHeaders="true",
        maxOffsetsPerTrigger="10",
    )
    checkpoint = str(tmp_path / "checkpoint")
    batches = run_until_caught_up(df, checkpoint)
    assert len(batches) >= 3 and max(len(rows) for rows in batches) <= 10
    assert sorted(sum(batches, []), key=lambda r: (r["partition"], r["offset"])) == expected_rows(
        topic, first
    )

    second = produce(broker, topic, list(range(30, 55)), partitions=2)
    batches = run_until_caught_up(df, checkpoint)
    assert max(len(rows) for rows in batches) <= 10
    assert sorted(sum(batches, []), key=lambda r: (r["partition"], r["offset"])) == expected_rows(
        topic, second
    )


def test_stream_starts_at_latest_by_default(spark, broker, tmp_path):
    topic = "late"
    create_topic(broker, topic, 1)
    produce(broker, topic, list(range(5)), partitions=1)
    df = stream(spark, broker, subscribe=topic)
    query = (
        df.writeStream.format("memory")
        .queryName("late_rows")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .start()
    )
    try:
        query.processAllAvailable()
        later = produce(broker, topic, list(range(5, 9)), partitions=1)
        query.processAllAvailable()
    finally:
        query.stop()
    offsets = sorted(row.offset for row in spark.table("late_rows").collect())
    assert offsets == sorted(o for (_, o) in later)


def rate_limited_options(broker, **extra):
    return parse_kafka_source_options(
        {
            "kafka.bootstrap.servers": broker.bootstrap_servers,
            "subscribe": TOPIC,
            "startingOffsets": "earliest",
            "maxOffsetsPerTrigger": "30",
            **extra,
        }
    )


def offsets(*per_partition):
    return {TOPIC: {str(p): o for p, o in enumerate(per_partition)}}


def test_latest_offset_without_start_applies_max_offsets_per_trigger(broker, orders):
    # PySpark before 4.2 calls latestOffset() with no arguments, and on a new
    # query before initialOffset(): the reader limits from the starting offsets.
    options = rate_limited_options(broker)
    reader = KafkaMicroBatchStreamReader(options)
    try:
        end = reader.latestOffset()
        assert end == offsets(10, 10, 10)
        start = reader.initialOffset()
        assert start == offsets(0, 0, 0)
        assert sum(p.until_offset - p.from_offset for p in reader.partitions(start, end)) == 30
        reader.commit(end)
        assert reader.latestOffset() == offsets(20, 20, 20)
    finally:
        reader.stop()
    # A restarted query: Spark hands the checkpoint's last offset to the
    # source first, which PySpark forwards as partitions(last, last).
    committed = KafkaMicroBatchStreamReader(options)
    uncommitted = KafkaMicroBatchStreamReader(options)
    try:
        assert committed.partitions(offsets(20, 20, 20), offsets(20, 20, 20)) == []
        assert committed.latestOffset() == offsets(25, 25, 25)
        # The last batch was not committed: Spark re-plans it, then goes on from its end.
        uncommitted.partitions(offsets(20, 20, 20), offsets(20, 20, 20))
        replanned = uncommitted.partitions(offsets(10, 10, 10), offsets(20, 20, 20))
        assert sum(p.until_offset - p.from_offset for p in replanned) == 30
        assert uncommitted.latestOffset() == offsets(25, 25, 25)
    finally:
        committed.stop()
        uncommitted.stop()


def test_new_query_from_latest_starts_where_its_first_batch_was_limited_from(broker, orders):
    # initialOffset() after latestOffset() (PySpark before 4.2) answers the
    # offsets the first batch was limited from, resolved once.
    reader = KafkaMicroBatchStreamReader(rate_limited_options(broker, startingOffsets="latest"))
    try:
        end = reader.latestOffset()
        assert reader.initialOffset() == end == offsets(PER_PARTITION, PER_PARTITION, PER_PARTITION)
    finally:
        reader.stop()


def test_a_batch_starting_past_an_end_limited_from_the_starting_offsets_is_refused(broker, orders):
    # What Spark's Trigger.AvailableNow fallback (PySpark before 4.2) does
    # on a restart: latestOffset() before the reader knows the checkpoint.
    reader = KafkaMicroBatchStreamReader(rate_limited_options(broker))
    try:
        end = reader.latestOffset()
        assert end == offsets(10, 10, 10)
        with pytest.raises(ValueError, match="Trigger.AvailableNow"):
            reader.partitions(offsets(20, 20, 20), end)
    finally:
        reader.stop()


@pytest.mark.skipif(
    not ADMISSION_CONTROL,
    reason=(
        "this PySpark (before 4.2) has no admission control for Python sources: "
        "latestOffset() takes no start or ReadLimit"
    ),
)
def test_latest_offset_with_start_and_read_limit(broker, orders):
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    reader = KafkaMicroBatchStreamReader(rate_limited_options(broker))
    try:
        assert reader.getDefaultReadLimit() == ReadMaxRows(30)
        assert reader.latestOffset(offsets(0, 5, 25), ReadMaxRows(6)) == offsets(3, 7, 25)
        assert reader.latestOffset(offsets(0, 0, 0), ReadAllAvailable()) == offsets(25, 25, 25)
    finally:
        reader.stop()


def test_stream_refuses_ending_offsets(spark, broker):
    with pytest.raises(Exception, match="ending offset not valid in streaming queries"):
        (
            stream(spark, broker, subscribe=TOPIC, endingOffsets="latest")
            .writeStream.format("memory")
            .queryName("never")
            .start()
            .processAllAvailable()
        )


# ---- writes ---------------------------------------------------------------------------


def consume_all(broker, topic, partitions):
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=3000,
    )
    consumer.assign([KafkaTopicPartition(topic, p) for p in range(partitions)])
    records = sorted(consumer, key=lambda r: (r.partition, r.offset))
    consumer.close()
    return [(r.partition, r.key, r.value, [(k, v) for k, v in r.headers]) for r in records]


def test_batch_write_then_read_back(spark, broker):
    topic = "written"
    create_topic(broker, topic, 2)
    data = [
        (None if i % 3 == 0 else "k%d" % i, b"v%d" % i, i % 2, [("n", b"%d" % i)] if i % 2 else [])
        for i in range(40)
    ]
    df = spark.createDataFrame(
        data,
        "key string, value binary, partition int, headers array<struct<key:string,value:binary>>",
    )
    # Spark writes Python data sources in append (or overwrite) mode only.
    (
        df.write.format("kfast")
        .mode("append")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", topic)
        .option("kafka.compression.type", "lz4")
        .save()
    )
    expected = sorted(
        ((p, None if k is None else k.encode(), v, h) for k, v, p, h in data),
        key=lambda r: (r[0], int(r[2][1:])),
    )
    # Two Spark tasks write to the same Kafka partitions at once: compare
    # records, not their interleaving.
    assert sorted(consume_all(broker, topic, 2), key=lambda r: (r[0], int(r[2][1:]))) == expected

    back = read(spark, broker, subscribe=topic, includeHeaders="true").collect()
    got = sorted(
        (
            (
                r.partition,
                None if r.key is None else bytes(r.key),
                bytes(r.value),
                [(h.key, bytes(h.value)) for h in r.headers or []],
            )
            for r in back
        ),
        key=lambda r: (r[0], int(r[2][1:])),
    )
    assert got == expected


def test_write_uses_the_topic_column_and_refuses_bad_schemas(spark, broker):
    create_topic(broker, "by_column", 1)
    df = spark.createDataFrame(
        [("by_column", "a"), ("by_column", "b")], "topic string, value string"
    )
    df.write.format("kfast").mode("append").option(
        "kafka.bootstrap.servers", broker.bootstrap_servers
    ).save()
    # One row per Spark task, written concurrently: order is not defined.
    assert sorted(r[2] for r in consume_all(broker, "by_column", 1)) == [b"a", b"b"]
    with pytest.raises(Exception, match="topic option required"):
        (
            spark.createDataFrame([("a",)], "value string")
            .write.format("kfast")
            .mode("append")
            .option("kafka.bootstrap.servers", broker.bootstrap_servers)
            .save()
        )
    with pytest.raises(Exception, match="value attribute unsupported type int"):
        (
            spark.createDataFrame([(1,)], "value int")
            .write.format("kfast")
            .mode("append")
            .option("kafka.bootstrap.servers", broker.bootstrap_servers)
            .option("topic", "x")
            .save()
        )
    with pytest.raises(Exception, match="Save mode Overwrite not allowed for Kafka"):
        (
            df.write.format("kfast")
            .mode("overwrite")
            .option("kafka.bootstrap.servers", broker.bootstrap_servers)
            .save()
        )


def test_stream_write_copies_a_topic(spark, broker, orders, tmp_path):
    create_topic(broker, "copied", PARTITIONS)
    query = (
        stream(spark, broker, subscribe=TOPIC, startingOffsets="earliest")
        .selectExpr("key", "value", "partition")
        .writeStream.format("kfast")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", "copied")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .start()
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    copied = consume_all(broker, "copied", PARTITIONS)
    by_value = lambda r: (r[0], r[2])
    assert sorted(((p, k, v) for p, k, v, _ in copied), key=by_value) == sorted(
        ((r["partition"], r["key"], r["value"]) for r in expected_rows(TOPIC, orders)), key=by_value
    )


@pytest.mark.skipif(
    not ADMISSION_CONTROL,
    reason=(
        "this PySpark (before 4.2) has no Trigger.AvailableNow for Python data sources: Spark "
        "runs the trigger as one batch and maxOffsetsPerTrigger cannot split it "
        "(spark/README.md)"
    ),
)
def test_available_now_reads_what_was_there_at_start_in_limited_batches(spark, broker, tmp_path):
    topic = "available_now"
    create_topic(broker, topic, 2)
    sent = produce(broker, topic, list(range(24)), partitions=2)
    batches = []
    query = (
        stream(
            spark, broker, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="10"
        )
        .writeStream.foreachBatch(lambda df, batch_id: batches.append(df.count()))
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert sum(batches) == len(sent) and max(batches) <= 10 and len(batches) >= 3


def test_available_now_without_max_offsets_reads_everything_on_every_version(
    spark, broker, tmp_path
):
    # Without a limit, PySpark before 4.2 (Spark's single-batch fallback)
    # and 4.2+ (the source's own AvailableNow) read the same.
    topic = "available_now_unlimited"
    create_topic(broker, topic, 2)
    sent = produce(broker, topic, list(range(12)), partitions=2)
    offsets_read = []

    def run():
        query = (
            stream(spark, broker, subscribe=topic, startingOffsets="earliest")
            .writeStream.option("checkpointLocation", str(tmp_path / "cp"))
            .foreachBatch(
                lambda df, batch_id: offsets_read.extend(
                    (r.partition, r.offset) for r in df.select("partition", "offset").collect()
                )
            )
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120)

    run()
    assert sorted(offsets_read) == sorted(sent)
    more = produce(broker, topic, list(range(12, 20)), partitions=2)
    run()  # restarted from the checkpoint: only what came since
    assert sorted(offsets_read) == sorted({**sent, **more})


@pytest.mark.skipif(
    not ADMISSION_CONTROL,
    reason=("this PySpark (before 4.2) has no Trigger.AvailableNow for Python data sources"),
)
def test_available_now_batches_never_end_past_the_offsets_at_its_start(broker):
    from pyspark.sql.streaming.datasource import ReadMaxRows

    topic = "available_now_cap"
    create_topic(broker, topic, 1)
    produce(broker, topic, list(range(6)), partitions=1)
    reader = KafkaMicroBatchStreamReader(
        parse_kafka_source_options(
            {
                "kafka.bootstrap.servers": broker.bootstrap_servers,
                "subscribe": topic,
                "startingOffsets": "earliest",
                "maxOffsetsPerTrigger": "4",
            }
        )
    )
    try:
        reader.prepareForTriggerAvailableNow()
        produce(broker, topic, list(range(6, 10)), partitions=1)  # after the start
        assert reader.latestOffset({topic: {"0": 0}}, ReadMaxRows(4)) == {topic: {"0": 4}}
        assert reader.latestOffset({topic: {"0": 4}}, ReadMaxRows(4)) == {topic: {"0": 6}}
        assert reader.latestOffset({topic: {"0": 6}}, ReadMaxRows(4)) == {topic: {"0": 6}}
    finally:
        reader.stop()


def test_stream_skips_deleted_records_without_fail_on_data_loss(spark, broker, tmp_path):
    topic = "pruned_stream"
    create_topic(broker, topic, 1)
    produce(broker, topic, list(range(10)), partitions=1)
    df = stream(spark, broker, subscribe=topic, startingOffsets="earliest", failOnDataLoss="false")
    checkpoint = str(tmp_path / "cp")
    assert [r["offset"] for rows in run_until_caught_up(df, checkpoint) for r in rows] == list(
        range(10)
    )
    produce(broker, topic, list(range(10, 20)), partitions=1)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    admin.delete_records({KafkaTopicPartition(topic, 0): 15})
    admin.close()
    offsets = sorted(r["offset"] for rows in run_until_caught_up(df, checkpoint) for r in rows)
    assert offsets == list(range(15, 20))
