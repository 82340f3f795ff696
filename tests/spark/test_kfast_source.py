"""The ``kfast`` source and sink against a kfast broker in this process, fed
and checked by independent clients (kafka-python)."""
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition as KafkaTopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from kfast.testing import KfastBroker
from kfast_spark.options import parse_kafka_source_options
from kfast_spark.source import KafkaBatchReader

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

CODECS = ("gzip", "snappy", "lz4", "zstd", None)
TOPIC = "orders"
PARTITIONS = 3
PER_PARTITION = 25
BASE_TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    broker = KfastBroker({"num.partitions": PARTITIONS},
                         data_dir=str(tmp_path_factory.mktemp("kfast-source"))).start()
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
    chunks = [numbers[k::len(CODECS)] for k in range(len(CODECS))]
    for codec, chunk in zip(CODECS, chunks):
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all",
                                 compression_type=codec, linger_ms=20)
        futures = []
        for i in chunk:
            r = record(i)
            futures.append((i, producer.send(
                topic, key=r["key"], value=r["value"], partition=i % partitions,
                headers=[(h["key"], h["value"]) for h in r["headers"] or []],
                timestamp_ms=r["timestamp"])))
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
            rows.append({**r, "topic": topic, "partition": partition, "offset": offset,
                         "timestampType": 0})
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
    reader = spark.read.format("kfast").option("kafka.bootstrap.servers",
                                                broker.bootstrap_servers)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


# ---- batch reads --------------------------------------------------------------------

def test_batch_read_returns_every_record_in_all_columns(spark, broker, orders):
    df = read(spark, broker, subscribe=TOPIC, includeHeaders="true")
    assert [f.name for f in df.schema.fields] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    assert collect(df) == expected_rows(TOPIC, orders)


def test_batch_read_without_headers_has_no_headers_column(spark, broker, orders):
    rows = collect(read(spark, broker, subscribePattern="ord.*"))
    assert rows == [{k: v for k, v in r.items() if k != "headers"}
                    for r in expected_rows(TOPIC, orders)]


def test_batch_read_offset_range_json(spark, broker, orders):
    df = read(spark, broker, assign='{"orders":[0,2]}', includeHeaders="true",
              startingOffsets='{"orders":{"0":3,"2":-2}}',
              endingOffsets='{"orders":{"0":10,"2":-1}}')
    assert collect(df) == expected_rows(
        TOPIC, orders, lambda p, o: (p == 0 and 3 <= o < 10) or p == 2)


def test_batch_read_timestamp_range(spark, broker, orders):
    # A timestamp resolves to the first offset, in log order, of a record at
    # least that recent (ListOffsets); records are not in timestamp order
    # here (one producer per codec), so the range is by offset.
    start_ts, end_ts = BASE_TS + 30, BASE_TS + 45

    def first_offset_at(partition, timestamp):
        return min((o for (p, o), i in orders.items()
                    if p == partition and record(i)["timestamp"] >= timestamp),
                   default=PER_PARTITION)

    df = read(spark, broker, subscribe=TOPIC, includeHeaders="true",
              startingTimestamp=str(start_ts), endingTimestamp=str(end_ts))
    assert collect(df) == expected_rows(
        TOPIC, orders, lambda p, o: first_offset_at(p, start_ts) <= o < first_offset_at(p, end_ts))


def test_min_partitions_splits_ranges_without_changing_rows(spark, broker, orders):
    options = {"kafka.bootstrap.servers": broker.bootstrap_servers, "subscribe": TOPIC,
               "minPartitions": "9"}
    partitions = KafkaBatchReader(parse_kafka_source_options(options)).partitions()
    assert len(partitions) == 9
    df = read(spark, broker, subscribe=TOPIC, minPartitions="9")
    assert df.count() == len(orders)


def test_segment_reader_returns_the_same_rows_as_the_broker_read(spark, broker, orders):
    broker_rows = collect(read(spark, broker, subscribe=TOPIC, includeHeaders="true"))
    segment_rows = collect(spark.read.format("kfast-segments").option("path", broker.data_dir)
                           .option("subscribe", TOPIC).option("includeHeaders", "true").load())
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


# ---- bad options ----------------------------------------------------------------------

@pytest.mark.parametrize("options, message", [
    ({}, "One of the following options must be specified"),
    ({"subscribe": TOPIC, "assign": '{"orders":[0]}'}, "Only one of the following options"),
    ({"subscribe": TOPIC, "startingOffsets": "latest"},
     "starting offset can't be latest for batch queries"),
    ({"subscribe": TOPIC, "endingOffsets": "earliest"},
     "ending offset can't be earliest for batch queries"),
    ({"subscribe": TOPIC, "kafka.auto.offset.reset": "earliest"},
     "'auto.offset.reset' is not supported"),
    ({"subscribe": TOPIC, "startingOffset": "earliest"}, "Unknown option"),
])
def test_bad_options_fail_with_sparks_messages(spark, broker, options, message):
    with pytest.raises(Exception, match=message):
        read(spark, broker, **options).collect()


def test_missing_bootstrap_servers(spark):
    with pytest.raises(Exception, match="kafka.bootstrap.servers' must be specified"):
        spark.read.format("kfast").option("subscribe", TOPIC).load().collect()
