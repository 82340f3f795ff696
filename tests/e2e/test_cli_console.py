"""`kfast produce` read back by confluent-kafka; `kfast consume` of what kafka-python wrote."""

from __future__ import annotations

import asyncio
import io
import json
import shutil
import subprocess
import time

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from kfast.cli import build_parser
from kfast.client.fetcher import Fetcher
from kfast.records import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    RecordBatch,
)
from kfast.tools import console

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    yield client
    client.close()


def kfast_produce(broker, lines: str, *argv) -> tuple[int, str]:
    args = build_parser().parse_args(
        ["produce", *argv, "--bootstrap-server", broker.bootstrap_servers, "--linger-ms", "5"]
    )
    err = io.StringIO()
    return console.run_produce(args, stdin=io.StringIO(lines), err=err), err.getvalue()


def kfast_consume(broker, *argv) -> tuple[int, bytes, str]:
    args = build_parser().parse_args(
        ["consume", *argv, "--bootstrap-server", broker.bootstrap_servers]
    )
    out, err = io.BytesIO(), io.StringIO()
    status = console.run_consume(args, out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def confluent_read(broker, topic, partitions, count, timeout=15.0):
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "unused",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([ConfluentTopicPartition(topic, p, 0) for p in partitions])
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            out.append(message)
        return out
    finally:
        consumer.close()


def first_batch_codec(broker, topic, partition) -> int:
    async def fetch():
        async with Fetcher(broker.bootstrap_servers) as fetcher:
            return (await fetcher.fetch_raw(topic, partition, 0)).records

    return RecordBatch(asyncio.run(fetch())).compression


CODECS = {
    "gzip": COMPRESSION_GZIP,
    "snappy": COMPRESSION_SNAPPY,
    "lz4": COMPRESSION_LZ4,
    "zstd": COMPRESSION_ZSTD,
}


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_produce_keys_headers_partition_compression(broker, admin, topic, codec):
    admin.create_topics([NewTopic(topic, 3, 1)])
    lines = "h1:v1,h2:v2\tk1|one\n\tk2|two\nempty:\tk3|three\n"
    status, err = kfast_produce(
        broker,
        lines,
        "--topic",
        topic,
        "--partition",
        "2",
        "--headers",
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=|",
        "--compression",
        codec,
    )
    assert (status, err) == (0, "")
    messages = confluent_read(broker, topic, [2], 3)
    assert [(m.partition(), m.offset(), m.key(), m.value()) for m in messages] == [
        (2, 0, b"k1", b"one"),
        (2, 1, b"k2", b"two"),
        (2, 2, b"k3", b"three"),
    ]
    assert [m.headers() for m in messages] == [
        [("h1", b"v1"), ("h2", b"v2")],
        None,
        [("empty", b"")],
    ]
    assert first_batch_codec(broker, topic, 2) == CODECS[codec]


def test_produce_keyed_lines_land_where_kafka_clients_put_them(broker, admin, topic):
    admin.create_topics([NewTopic(topic, 4, 1)])
    keys = [f"key-{i}" for i in range(40)]
    status, _ = kfast_produce(
        broker,
        "".join(f"{k}\tvalue-{k}\n" for k in keys),
        "--topic",
        topic,
        "--property",
        "parse.key=true",
    )
    assert status == 0
    messages = confluent_read(broker, topic, range(4), len(keys))
    placed = {m.key().decode(): m.partition() for m in messages}
    # kafka-python's DefaultPartitioner rule (Kafka's default for keyed records).
    expected = {k: (kafka_python_murmur2(k.encode()) & 0x7FFFFFFF) % 4 for k in keys}
    assert placed == expected
    assert all(m.value() == b"value-" + m.key() for m in messages)


def test_produce_null_marker_and_line_errors(broker, admin, topic):
    admin.create_topics([NewTopic(topic, 1, 1)])
    status, _ = kfast_produce(
        broker,
        "NULL\tv\nk\tNULL\n",
        "--topic",
        topic,
        "--property",
        "parse.key=true",
        "--property",
        "null.marker=NULL",
    )
    assert status == 0
    messages = confluent_read(broker, topic, [0], 2)
    assert [(m.key(), m.value()) for m in messages] == [(None, b"v"), (b"k", None)]
    status, err = kfast_produce(
        broker, "no separator here\n", "--topic", topic, "--property", "parse.key=true"
    )
    assert status == 1 and "No key separator found on line number 1: 'no separator here'" in err


@pytest.fixture
def written_by_kafka_python(broker, admin, topic):
    admin.create_topics([NewTopic(topic, 2, 1)])
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    sent = []
    for i in range(6):
        future = producer.send(
            topic,
            key=None if i == 5 else b"k%d" % i,
            value=b"v%d" % i,
            partition=i % 2,
            headers=[("h", b"x%d" % i)] if i % 3 == 0 else [],
        )
        sent.append(future)
    producer.flush()
    metadata = [f.get(timeout=15) for f in sent]
    producer.close()
    return topic, metadata


def test_consume_prints_kafka_console_consumer_format(broker, written_by_kafka_python):
    topic, metadata = written_by_kafka_python
    status, out, err = kfast_consume(
        broker,
        "--topic",
        topic,
        "--partition",
        "0",
        "--from-beginning",
        "--max-messages",
        "3",
        "--property",
        "print.key=true",
        "--property",
        "print.offset=true",
        "--property",
        "print.partition=true",
        "--property",
        "print.headers=true",
        "--property",
        "print.timestamp=true",
    )
    assert status == 0 and err == "Processed a total of 3 messages\n"
    timestamps = {m.offset: m.timestamp for m in metadata if m.partition == 0}
    assert out.decode().splitlines() == [
        f"CreateTime:{timestamps[0]}\tPartition:0\tOffset:0\th:x0\tk0\tv0",
        f"CreateTime:{timestamps[1]}\tPartition:0\tOffset:1\tNO_HEADERS\tk2\tv2",
        f"CreateTime:{timestamps[2]}\tPartition:0\tOffset:2\tNO_HEADERS\tk4\tv4",
    ]


def test_consume_all_partitions_values_only_until_timeout(broker, written_by_kafka_python):
    topic, _ = written_by_kafka_python
    status, out, err = kfast_consume(
        broker, "--topic", topic, "--from-beginning", "--timeout-ms", "1000"
    )
    assert status == 0 and err == "Processed a total of 6 messages\n"
    assert sorted(out.decode().splitlines()) == [f"v{i}" for i in range(6)]


def test_consume_from_an_offset_with_custom_separator_and_null_key(broker, written_by_kafka_python):
    topic, _ = written_by_kafka_python
    status, out, _ = kfast_consume(
        broker,
        "--topic",
        topic,
        "--partition",
        "1",
        "--offset",
        "1",
        "--max-messages",
        "2",
        "--property",
        "print.key=true",
        "--property",
        "key.separator=::",
    )
    assert status == 0
    assert out.decode().splitlines() == ["k3::v3", "null::v5"]


def test_consume_json_format(broker, written_by_kafka_python):
    topic, metadata = written_by_kafka_python
    status, out, _ = kfast_consume(
        broker,
        "--topic",
        topic,
        "--partition",
        "1",
        "--offset",
        "earliest",
        "--max-messages",
        "3",
        "--format",
        "json",
    )
    assert status == 0
    lines = [json.loads(line) for line in out.decode().splitlines()]
    timestamps = {m.offset: m.timestamp for m in metadata if m.partition == 1}
    assert lines == [
        {
            "topic": topic,
            "partition": 1,
            "offset": 0,
            "tstype": "create",
            "ts": timestamps[0],
            "broker": 1,
            "key": "k1",
            "payload": "v1",
        },
        {
            "topic": topic,
            "partition": 1,
            "offset": 1,
            "tstype": "create",
            "ts": timestamps[1],
            "broker": 1,
            "headers": ["h", "x3"],
            "key": "k3",
            "payload": "v3",
        },
        {
            "topic": topic,
            "partition": 1,
            "offset": 2,
            "tstype": "create",
            "ts": timestamps[2],
            "broker": 1,
            "key": None,
            "payload": "v5",
        },
    ]


def test_consume_latest_sees_only_new_records(broker, written_by_kafka_python):
    topic, _ = written_by_kafka_python
    status, out, err = kfast_consume(broker, "--topic", topic, "--timeout-ms", "300")
    assert (status, out, err) == (0, b"", "Processed a total of 0 messages\n")


def test_consume_usage_errors(broker, topic):
    status, _, err = kfast_consume(broker, "--topic", topic, "--offset", "3")
    assert status == 1 and "partition is required" in err
    status, _, err = kfast_consume(
        broker, "--topic", topic, "--offset", "3", "--partition", "0", "--from-beginning"
    )
    assert status == 1 and "cannot be used together" in err


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
def test_json_format_is_kcat_json(broker, written_by_kafka_python):
    topic, _ = written_by_kafka_python
    kcat = subprocess.run(
        [
            "kcat",
            "-C",
            "-b",
            broker.bootstrap_servers,
            "-t",
            topic,
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-J",
            "-q",
        ],
        capture_output=True,
        timeout=30,
        check=True,
    )
    status, out, _ = kfast_consume(
        broker,
        "--topic",
        topic,
        "--partition",
        "0",
        "--from-beginning",
        "--max-messages",
        "3",
        "--format",
        "json",
    )
    assert status == 0
    assert out.splitlines() == kcat.stdout.splitlines()


def test_consume_from_past_the_end_is_not_an_error(broker, written_by_kafka_python):
    topic, _ = written_by_kafka_python
    status, out, err = kfast_consume(
        broker, "--topic", topic, "--partition", "0", "--offset", "100", "--timeout-ms", "300"
    )
    assert (status, out, err) == (0, b"", "Processed a total of 0 messages\n")


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
def test_log_append_time_records_print_the_brokers_time(broker, admin, topic):
    admin.create_topics(
        [NewTopic(topic, 1, 1, topic_configs={"message.timestamp.type": "LogAppendTime"})]
    )
    assert kfast_produce(broker, "a\nb\n", "--topic", topic) == (0, "")
    kcat = subprocess.run(
        [
            "kcat",
            "-C",
            "-b",
            broker.bootstrap_servers,
            "-t",
            topic,
            "-o",
            "beginning",
            "-e",
            "-J",
            "-q",
        ],
        capture_output=True,
        timeout=30,
        check=True,
    )
    status, out, _ = kfast_consume(
        broker, "--topic", topic, "--from-beginning", "--max-messages", "2", "--format", "json"
    )
    assert status == 0 and out.splitlines() == kcat.stdout.splitlines()
    broker_times = [json.loads(line)["ts"] for line in out.splitlines()]
    assert all(json.loads(line)["tstype"] == "logappend" for line in out.splitlines())
    status, out, _ = kfast_consume(
        broker,
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        "2",
        "--property",
        "print.timestamp=true",
    )
    assert out.decode().splitlines() == [
        f"LogAppendTime:{broker_times[0]}\ta",
        f"LogAppendTime:{broker_times[1]}\tb",
    ]


@pytest.mark.parametrize(
    "flags", [["--acks", "0"], ["--acks", "1", "--sync"], ["--request-required-acks", "all"]]
)
def test_produce_acks_options(broker, admin, topic, flags):
    admin.create_topics([NewTopic(topic, 1, 1)])
    assert kfast_produce(broker, "one\ntwo\n", "--topic", topic, *flags) == (0, "")
    assert [m.value() for m in confluent_read(broker, topic, [0], 2)] == [b"one", b"two"]


# --- Kafka client properties, as kafka-console-producer.sh / -consumer.sh take them ---


def test_producer_properties_file_then_property_then_flag(broker, admin, topic, tmp_path):
    admin.create_topics([NewTopic(topic, 3, 1)])
    config = tmp_path / "producer.properties"
    config.write_text("compression.type=gzip\nacks=1\n")
    common = ["--topic", topic, "--producer.config", str(config)]
    assert kfast_produce(broker, "a\n", *common, "--partition", "0") == (0, "")
    assert kfast_produce(
        broker, "b\n", *common, "--partition", "1", "--producer-property", "compression.type=lz4"
    ) == (0, "")
    assert kfast_produce(
        broker,
        "c\n",
        *common,
        "--partition",
        "2",
        "--producer-property",
        "compression.type=lz4",
        "--compression",
        "zstd",
    ) == (0, "")
    assert [first_batch_codec(broker, topic, p) for p in range(3)] == [
        COMPRESSION_GZIP,
        COMPRESSION_LZ4,
        COMPRESSION_ZSTD,
    ]


def test_producer_unknown_property_is_ignored_invalid_one_refused(broker, admin, topic, caplog):
    admin.create_topics([NewTopic(topic, 1, 1)])
    with caplog.at_level("WARNING", logger="kfast.client.properties"):
        assert kfast_produce(
            broker, "kept\n", "--topic", topic, "--producer-property", "linger.mss=3"
        ) == (0, "")
    assert "The configuration 'linger.mss' was supplied but isn't a known config." in caplog.text
    status, err = kfast_produce(
        broker, "refused\n", "--topic", topic, "--producer-property", "acks=2"
    )
    assert status == 1
    assert err == (
        "ERROR Invalid value 2 for configuration acks: String must be one of: all, -1, 0, 1\n"
    )
    assert (
        kfast_consume(broker, "--topic", topic, "--from-beginning", "--timeout-ms", "500")[1]
        == b"kept\n"
    )


def test_consumer_isolation_level_from_a_property_and_the_flag(broker, admin, topic, tmp_path):
    from confluent_kafka import Producer

    admin.create_topics([NewTopic(topic, 1, 1)])
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"{topic}-tx"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"committed")
    producer.commit_transaction(15)
    producer.begin_transaction()
    producer.produce(topic, b"open")
    assert producer.flush(15) == 0
    config = tmp_path / "consumer.properties"
    config.write_text("isolation.level=read_committed\nsession.timeout.ms=10000\n")
    try:
        # Two records stop a read at once; read_committed waits out the timeout.
        read = ["--topic", topic, "--from-beginning", "--max-messages", "2", "--timeout-ms", "800"]
        assert kfast_consume(broker, *read)[1] == b"committed\nopen\n"
        assert kfast_consume(broker, *read, "--consumer.config", str(config))[1] == b"committed\n"
        assert (
            kfast_consume(broker, *read, "--consumer-property", "isolation.level=read_committed")[1]
            == b"committed\n"
        )
        assert (
            kfast_consume(
                broker,
                *read,
                "--consumer.config",
                str(config),
                "--isolation-level",
                "read_uncommitted",
            )[1]
            == b"committed\nopen\n"
        )
        status, _, err = kfast_consume(broker, *read, "--consumer-property", "fetch.max.wait.ms=-1")
        assert (
            status == 1
            and (
                "ERROR Invalid value -1 for configuration fetch.max.wait.ms: "
                "Value must be at least 0"
            )
            in err
        )
    finally:
        producer.abort_transaction(15)
