"""kfast-segments over the data dir of a real kfast broker, fed by a real client."""

import pytest
from kafka import KafkaProducer

from kfast.testing import KfastBroker
from kfast_spark.options import TopicPartition, parse_segments_source_options
from kfast_spark.segments import read_range
from kfast_spark.segments_source import KafkaSegmentsReader

pytestmark = [pytest.mark.spark, pytest.mark.e2e, pytest.mark.timeout(240)]

TOPIC = "payments"


@pytest.fixture(scope="module")
def broker_data(tmp_path_factory):
    """Produce with kafka-python (gzip, keys, headers) to 3 partitions; the
    broker keeps running for the live read, and is stopped by the last test."""
    data_dir = str(tmp_path_factory.mktemp("broker-data"))
    broker = KfastBroker({"num.partitions": 3}, data_dir=data_dir).start()
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap_servers, acks="all", compression_type="gzip", linger_ms=5
    )
    sent = {}
    for i in range(60):
        partition = i % 3
        metadata = producer.send(
            TOPIC,
            key=None if i % 4 == 0 else b"key-%d" % i,
            value=b"value-%d" % i,
            headers=[("seq", b"%d" % i)] if i % 2 else [],
            partition=partition,
            timestamp_ms=1_700_000_000_000 + i,
        ).get(timeout=30)
        sent[(partition, metadata.offset)] = i
    producer.close()
    yield broker, data_dir, sent
    broker.close()


def expected(sent, partition=None):
    rows = []
    for (p, offset), i in sorted(sent.items()):
        if partition is not None and p != partition:
            continue
        rows.append(
            {
                "key": None if i % 4 == 0 else b"key-%d" % i,
                "value": b"value-%d" % i,
                "topic": TOPIC,
                "partition": p,
                "offset": offset,
                "timestamp": 1_700_000_000_000 + i,
                "timestampType": 0,
                "headers": [{"key": "seq", "value": b"%d" % i}] if i % 2 else None,
            }
        )
    return rows


def arrow_rows(batches):
    rows = []
    for batch in batches:
        for row in batch.to_pylist():
            row["timestamp"] = round(row["timestamp"].timestamp() * 1000)
            rows.append(row)
    return rows


def test_live_broker_data_dir_reads_as_produced(broker_data):
    # The broker is running: active segments, preallocated indexes.
    _, data_dir, sent = broker_data
    reader = KafkaSegmentsReader(
        parse_segments_source_options(
            {"path": data_dir, "subscribe": TOPIC, "includeHeaders": "true"}
        )
    )
    partitions = reader.partitions()
    assert sorted((p.partition, p.from_offset, p.until_offset) for p in partitions) == [
        (0, 0, 20),
        (1, 0, 20),
        (2, 0, 20),
    ]
    for p in partitions:
        got = arrow_rows(
            read_range(
                p.partition_dir,
                TopicPartition(TOPIC, p.partition),
                p.from_offset,
                p.until_offset,
                True,
            )
        )
        assert got == expected(sent, p.partition)


def test_stopped_broker_data_dir_in_spark(broker_data, spark):
    broker, data_dir, sent = broker_data
    broker.stop()  # clean shutdown: checkpoints written, indexes trimmed
    df = (
        spark.read.format("kfast-segments")
        .option("path", data_dir)
        .option("subscribePattern", "pay.*")
        .option("includeHeaders", "true")
        .load()
    )
    rows = [
        row.asDict(recursive=True)
        for row in df.selectExpr("*", "unix_millis(timestamp) AS ms").drop("timestamp").collect()
    ]
    for row in rows:
        row["timestamp"] = row.pop("ms")
        row["key"] = None if row["key"] is None else bytes(row["key"])
        row["value"] = bytes(row["value"])
        for header in row["headers"] or []:
            header["value"] = bytes(header["value"])
    assert sorted(rows, key=lambda r: (r["partition"], r["offset"])) == expected(sent)
