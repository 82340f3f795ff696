"""``kfast serve`` as a subprocess: configuration errors, SIGTERM, restart,
and kill -9 in the middle of a produce stream."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from e2e_support import REPO

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def run_serve(*args, timeout=30):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "kfast", "serve", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=str(REPO),
    )


@pytest.mark.parametrize(
    "args, named",
    [
        (["--override", "no.such.property=1"], "no.such.property"),
        (["--override", "num.partitions=many"], "num.partitions"),
        (["--override", "log.message.timestamp.type=Sometimes"], "log.message.timestamp.type"),
        (["--override", "novalue"], "--override"),
    ],
)
def test_invalid_configuration_stops_the_start(args, named):
    result = run_serve(*args)
    assert result.returncode != 0
    assert named in result.stderr


@pytest.mark.parametrize(
    "listeners,named",
    [
        # Kafka's default sasl.enabled.mechanisms is GSSAPI, which kfast lacks.
        ("SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms"),
        ("SSL://127.0.0.1:0", "ssl.keystore.location"),  # TLS without a key
        ("PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0", "listener.security.protocol.map"),
    ],
)
def test_configuration_the_broker_cannot_serve_stops_like_an_invalid_property(
    listeners, named, tmp_path
):
    """Valid properties kfast cannot serve (GSSAPI, a TLS listener without a
    keystore, a listener without a security protocol) are refused as an
    unknown property is: one line naming the property, exit status 2, no
    traceback."""
    unknown = run_serve("--override", "no.such.property=1")
    refused = run_serve(
        "--override", f"listeners={listeners}", "--override", f"log.dirs={tmp_path / 'data'}"
    )
    for result in (unknown, refused):
        assert result.returncode == 2
        assert len(result.stderr.splitlines()) == 1, result.stderr
        assert result.stderr.startswith("kfast serve: Invalid value ")
    assert f" for configuration {named}" in refused.stderr
    assert "'" not in refused.stderr.split(" for configuration ")[0]  # the value as written
    assert not (tmp_path / "data").exists()


def test_invalid_property_in_config_file(tmp_path):
    properties = tmp_path / "server.properties"
    properties.write_text("num.partitions=3\nlog.segment.bytes=12\n")
    result = run_serve("--config", str(properties))
    assert result.returncode != 0 and "log.segment.bytes" in result.stderr


def consume_all(bootstrap, topic, expected_count, timeout=20.0):
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < expected_count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                raise KafkaException(message.error())
            out.append((message.offset(), message.value()))
        return out
    finally:
        consumer.close()


def test_sigterm_shuts_down_cleanly_and_restart_keeps_records(serve, tmp_path):
    node = serve("num.partitions=1").start()
    ready_line = next(line for line in node.output if " ready in " in line)
    assert f"127.0.0.1:{node.port}" in ready_line and "broker 1" in ready_line
    producer = Producer({"bootstrap.servers": node.bootstrap_servers, "acks": "all"})
    for i in range(100):
        producer.produce("kept", value=b"%d" % i)
    assert producer.flush(15) == 0
    assert node.terminate() == 0
    marker = os.path.join(node.data_dir, ".kafka_cleanshutdown")
    assert os.path.exists(marker)
    node.start()
    assert not os.path.exists(marker)  # removed at start, rewritten at the next stop
    assert consume_all(node.bootstrap_servers, "kept", 100) == [(i, b"%d" % i) for i in range(100)]
    assert node.terminate() == 0


@pytest.mark.slow
def test_kill_9_keeps_every_acknowledged_record(serve):
    node = serve("num.partitions=1").start()
    acknowledged: list[tuple[int, bytes]] = []
    enough = threading.Event()
    stop = threading.Event()

    def on_delivery(err, msg):
        if err is None:
            acknowledged.append((msg.offset(), msg.value()))
            if len(acknowledged) >= 2000:
                enough.set()

    def produce_stream():
        producer = Producer(
            {
                "bootstrap.servers": node.bootstrap_servers,
                "acks": "all",
                "linger.ms": 2,
                "message.timeout.ms": 5000,
                "enable.idempotence": True,
            }
        )
        i = 0
        while not stop.is_set():
            try:
                producer.produce("stream", value=b"%08d" % i, on_delivery=on_delivery)
                i += 1
            except BufferError:
                producer.poll(0.01)
            producer.poll(0)
        producer.flush(6)

    thread = threading.Thread(target=produce_stream)
    thread.start()
    try:
        assert enough.wait(60), "the producer made no progress"
        node.kill()  # SIGKILL while the stream is running
    finally:
        stop.set()
        thread.join(30)
    acked = sorted(acknowledged)
    assert len(acked) >= 2000
    node.start()
    records = consume_all(node.bootstrap_servers, "stream", acked[-1][0] + 1)
    by_offset = dict(records)
    # Every acknowledged record is there, at its acknowledged offset, in order.
    assert all(by_offset.get(offset) == value for offset, value in acked)
    offsets = [offset for offset, _ in records]
    assert offsets == sorted(offsets)
    assert node.terminate() == 0


def test_kafka_stock_kraft_server_properties(tmp_path):
    """Kafka's config/kraft/server.properties (ports and dirs changed) works
    as is: the CONTROLLER listener is the in-process controller's, PLAINTEXT
    is served and advertised as configured."""
    from e2e_support import ServeProcess, free_port

    port, controller_port = free_port(), free_port()
    properties = tmp_path / "server.properties"
    properties.write_text(f"""
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:{controller_port}
listeners=PLAINTEXT://:{port},CONTROLLER://:{controller_port}
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs={tmp_path / "kraft-combined-logs"}
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
""")

    class StockServe(ServeProcess):
        def command(self):
            return [sys.executable, "-m", "kfast", "serve", "--config", str(properties)]

    node = StockServe(str(tmp_path), port).start()
    try:
        producer = Producer({"bootstrap.servers": f"localhost:{port}", "acks": "all"})
        producer.produce("stock", value=b"hello")
        assert producer.flush(15) == 0
        assert consume_all(f"localhost:{port}", "stock", 1) == [(0, b"hello")]
        assert node.terminate() == 0
    finally:
        node.kill()


def test_port_in_use_fails_the_start(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_serve(
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override",
            f"log.dirs={tmp_path}",
        )
    assert result.returncode == 1
    assert f"Cannot listen on PLAINTEXT://127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr
