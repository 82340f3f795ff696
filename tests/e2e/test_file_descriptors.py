"""Many partitions under a descriptor limit, and running out of descriptors.

A partition holds one descriptor (its active segment's .log; indexes are
mapped and their files closed, as in Kafka), so ``kfast serve`` under
``ulimit -n 1024`` serves 900 partitions. When the process does run out,
accept pauses and a produce that needs a new segment fails with
KAFKA_STORAGE_ERROR; once descriptors are free again the broker accepts and
appends as before.
"""

from __future__ import annotations

import os
import socket
import time

import pytest
from confluent_kafka import KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from e2e_support import ServeProcess, free_port, wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture
def serve_limited(tmp_path):
    """Factory of ``kfast serve`` processes under RLIMIT_NOFILE = ``fd_limit``."""
    started = []

    def make(fd_limit: int, *overrides) -> ServeProcess:
        process = ServeProcess(str(tmp_path / "data"), free_port(), overrides, fd_limit=fd_limit)
        started.append(process)
        return process.start()

    yield make
    for process in started:
        process.kill()


def _create(broker, topics: dict[str, int], configs=None) -> None:
    # librdkafka times out an in-flight request after socket.timeout.ms
    # (60 s) whatever the admin call's request_timeout says: 5,000
    # partitions on a loaded 2-core machine may need longer (seen in CI).
    admin = AdminClient(
        {"bootstrap.servers": broker.bootstrap_servers, "socket.timeout.ms": 200_000}
    )
    for name, count in topics.items():
        # One request per topic: the controller writes at most 10,000
        # records per operation (MAX_RECORDS_PER_USER_OP), across topics.
        request = admin.create_topics(
            [NewTopic(name, count, 1, config=configs or {})], request_timeout=180
        )
        request[name].result(200)


def _produce_to_every_partition(broker, topics: dict[str, int]) -> None:
    delivered = {}

    def on_delivery(err, msg):
        delivered[(msg.topic(), msg.partition())] = (err, msg.offset())

    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "acks": "all",
            "linger.ms": 20,
            "queue.buffering.max.messages": 200_000,
        }
    )
    for name, count in topics.items():
        for partition in range(count):
            producer.produce(
                name,
                value=b"%s/%d" % (name.encode(), partition),
                partition=partition,
                on_delivery=on_delivery,
            )
            producer.poll(0)
    assert producer.flush(300) == 0
    expected = {(name, p) for name, count in topics.items() for p in range(count)}
    assert set(delivered) == expected
    assert all(result == (None, 0) for result in delivered.values()), [
        r for r in delivered.items() if r[1] != (None, 0)
    ][:5]


def _consume_every_partition(broker, topics: dict[str, int]) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        consumer.assign(
            [TopicPartition(name, p, 0) for name, count in topics.items() for p in range(count)]
        )
        seen = {}
        total = sum(topics.values())
        deadline = time.monotonic() + 300
        while len(seen) < total and time.monotonic() < deadline:
            for message in consumer.consume(5000, 1.0):
                assert message.error() is None, message.error()
                seen[(message.topic(), message.partition())] = (message.offset(), message.value())
        assert len(seen) == total
        assert all(
            value == (0, b"%s/%d" % (name.encode(), partition))
            for (name, partition), value in seen.items()
        )
    finally:
        consumer.close()


def test_900_partitions_under_ulimit_1024(serve_limited, topic):
    broker = serve_limited(1024)
    topics = {topic: 900}
    _create(broker, topics)
    _produce_to_every_partition(broker, topics)
    _consume_every_partition(broker, topics)
    # One descriptor per partition, the 50 __consumer_offsets partitions the
    # consumer's group brought in included: three each would be 2,850.
    assert broker.open_fds() < 1024


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_10000_partitions_under_ulimit_16384(serve_limited, topic):
    # Two topics: a topic of 10,000 partitions is 10,001 records, one more
    # than an operation may write.
    broker = serve_limited(16384)
    topics = {f"{topic}-a": 5000, f"{topic}-b": 5000}
    _create(broker, topics)
    _produce_to_every_partition(broker, topics)
    _consume_every_partition(broker, topics)
    assert broker.open_fds() < 10_000 + 200


def _exhaust(broker, fd_limit: int) -> list[socket.socket]:
    """Idle connections until the broker holds every descriptor it may."""
    idle = []
    while broker.open_fds() < fd_limit:
        # The broker accepts them (one descriptor each) up to its limit;
        # the rest wait in its listen backlog.
        for _ in range(fd_limit - broker.open_fds()):
            idle.append(socket.create_connection(("127.0.0.1", broker.port), timeout=5))
        wait_until(
            lambda: broker.open_fds() >= fd_limit or len(idle) > 4 * fd_limit,
            message="the broker accepting the idle connections",
        )
    # And clients the broker cannot accept now: they wait in its backlog.
    idle += [socket.create_connection(("127.0.0.1", broker.port), timeout=5) for _ in range(3)]
    wait_until(
        lambda: any("accept failed" in line for line in broker.output),
        message="accept failing for want of descriptors",
    )
    return idle


def _cpu_seconds(broker) -> float:
    fields = open(f"/proc/{broker.proc.pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def test_out_of_descriptors_fails_requests_then_recovers(serve_limited, topic):
    fd_limit = 128
    broker = serve_limited(fd_limit)
    # segment.ms by record timestamps: a record 10 s after the segment's
    # first one needs a new segment (a new .log descriptor).
    _create(broker, {topic: 1}, {"segment.ms": "1000"})
    results = []
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "retries": 0, "linger.ms": 0}
    )

    def produce(timestamp_ms: int, value: bytes):
        results.clear()
        producer.produce(
            topic,
            value=value,
            partition=0,
            timestamp=timestamp_ms,
            on_delivery=lambda err, msg: results.append((err, msg.offset())),
        )
        assert producer.flush(30) == 0
        return results[0]

    now = int(time.time() * 1000)
    assert produce(now, b"first") == (None, 0)
    idle = _exhaust(broker, fd_limit)
    try:
        # Appending within the segment needs no descriptor.
        assert produce(now + 1, b"second") == (None, 1)
        # A roll does: refused for this request, nothing written.
        err, _ = produce(now + 10_000, b"needs a new segment")
        assert err is not None and err.code() == KafkaError.KAFKA_STORAGE_ERROR
        # The connection still gets answers, Metadata included.
        assert topic in producer.list_topics(timeout=10).topics
        # Connections still wait in the backlog: accept is paused, not
        # retried in a loop that would take a whole core. (The sleep is the
        # measurement window, not a wait for something.)
        cpu_before = _cpu_seconds(broker)
        time.sleep(1.0)
        busy = _cpu_seconds(broker) - cpu_before
        assert busy < 0.5, f"the broker used {busy:.0%} of a core while out of descriptors"
    finally:
        for sock in idle:
            sock.close()
    # Descriptors are free again: the roll succeeds and new clients connect.
    assert produce(now + 10_000, b"after") == (None, 2)
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "unused",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values = []
        deadline = time.monotonic() + 30
        while len(values) < 3 and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None:
                assert message.error() is None, message.error()
                values.append((message.offset(), message.value()))
        assert values == [(0, b"first"), (1, b"second"), (2, b"after")]
    finally:
        consumer.close()


def test_a_partition_created_without_descriptors_comes_online_once_they_are_free(
    serve_limited, topic
):
    """A topic created while the broker is out of descriptors: the
    controller takes it, the broker cannot create the log, and the partition
    is offline (KAFKA_STORAGE_ERROR, as Kafka's markPartitionOffline) -- not
    until the next metadata change but until descriptors are free: the
    creation is tried again, and a waiting producer's record is appended."""
    fd_limit = 128
    broker = serve_limited(fd_limit)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    strict = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "retries": 0})
    waiting = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "linger.ms": 0}
    )
    # Connected before the descriptors run out.
    for client in (admin, strict, waiting):
        client.list_topics(timeout=10)
    results: dict[bytes, tuple] = {}

    def on_delivery(err, msg):
        results[msg.value()] = (err.code() if err is not None else None, msg.offset())

    idle = _exhaust(broker, fd_limit)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        wait_until(
            lambda: any(f"could not create the log of {topic}-0" in l for l in broker.output),
            message="the log creation failing",
        )
        strict.produce(topic, b"refused", partition=0, on_delivery=on_delivery)
        assert strict.flush(30) == 0
        assert results[b"refused"][0] == KafkaError.KAFKA_STORAGE_ERROR
        waiting.produce(topic, b"waits", partition=0, on_delivery=on_delivery)
    finally:
        for sock in idle:
            sock.close()
    # No metadata change: the broker's retry creates the log.
    assert waiting.flush(60) == 0
    assert results[b"waits"] == (None, 0)
    assert "Traceback" not in "".join(broker.output)
