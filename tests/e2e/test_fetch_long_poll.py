"""A consumer long-polling many idle partitions (issue 21 item 5), with real
clients: librdkafka (sessionless full fetches) and kafka-python (KIP-227
incremental fetch sessions). The broker must not busy-loop while nothing is
produced -- its thread's CPU over a few seconds stays low and the consumer's
fetches wait their fetch.max.wait.ms -- and one append must wake the waiting
fetch at once, not at the wait's expiry."""

from __future__ import annotations

import os
import threading
import time

import pytest
from e2e_support import wait_until

pytestmark = pytest.mark.e2e

PARTITIONS = 200
# Long enough that a record delivered at the expiry, not by the wake-up,
# fails the latency check with a wide margin.
MAX_WAIT_MS = 4_000
IDLE_S = 3.0
# The partition the tests append to; the others stay empty.
WAKE = PARTITIONS - 3
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _thread_cpu_s(tid: int) -> float:
    with open(f"/proc/self/task/{tid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def _fetch_requests(broker) -> int:
    versions, _ = broker.call_soon(broker.broker.metrics.requests.snapshot).get(1, ({}, []))
    return sum(versions.values())


@pytest.fixture(scope="module")
def topic(broker) -> str:
    """One topic of PARTITIONS partitions for the module (creating and
    closing their logs is most of the module's time)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    name = "long-poll"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)], operation_timeout=60)[name].result(90)
    return name


class Confluent:
    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "long-poll",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": MAX_WAIT_MS,
                "socket.timeout.ms": MAX_WAIT_MS * 3,
            }
        )
        # Explicit positions (OFFSET_END would be resolved partition by
        # partition, maybe after the append): the end of WAKE, which the
        # module's tests append to, and 0 elsewhere (always empty).
        _, end = self.consumer.get_watermark_offsets(TopicPartition(topic, WAKE), timeout=30)
        self.consumer.assign(
            [TopicPartition(topic, p, end if p == WAKE else 0) for p in range(PARTITIONS)]
        )

    def poll(self, seconds: float) -> list[bytes]:
        # librdkafka fetches in its own threads; this waits for one record
        # (consume(n, timeout) would wait for n or the whole timeout).
        message = self.consumer.poll(seconds)
        return [] if message is None or message.error() is not None else [message.value()]

    def close(self) -> None:
        self.consumer.close()


class KafkaPython:
    def __init__(self, bootstrap: str, topic: str) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            fetch_max_wait_ms=MAX_WAIT_MS,
            request_timeout_ms=MAX_WAIT_MS * 3,
        )
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        self.consumer.assign(partitions)
        end = self.consumer.end_offsets([partitions[WAKE]])[partitions[WAKE]]
        for partition in partitions:  # explicit positions, as above
            self.consumer.seek(partition, end if partition.partition == WAKE else 0)

    def poll(self, seconds: float) -> list[bytes]:
        # kafka-python fetches inside poll(): fetch sessions, long polls.
        batches = self.consumer.poll(timeout_ms=int(seconds * 1000))
        return [r.value for records in batches.values() for r in records]

    def close(self) -> None:
        self.consumer.close()


@pytest.mark.parametrize("client", [Confluent, KafkaPython], ids=["confluent", "kafka-python"])
def test_idle_long_poll_is_cheap_and_an_append_wakes_it(broker, topic, client):
    from confluent_kafka import Producer

    tid = broker.call_soon(threading.get_native_id)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    producer.list_topics(topic, timeout=30)  # connected before anything is timed
    consumer = client(broker.bootstrap_servers, topic)
    purgatory = broker.broker.replica_manager.fetch_purgatory
    sessions = broker.broker.fetch_session_cache
    key = (topic, WAKE)

    def waiting_on_wake() -> bool:
        # A waiting fetch an append to WAKE would wake: watched under the
        # partition (a full fetch), or under a session holding it.
        return bool(purgatory.pending(key)) or any(
            purgatory.pending(session) for session in sessions.sessions_holding(key)
        )

    def until_waiting_on_wake() -> None:
        # Until the consumer's fetch that covers WAKE waits in the broker
        # (librdkafka fetches in the background and may first send fetches
        # without partitions whose position it is still validating;
        # kafka-python fetches only inside poll(), hence the short polls).
        wait_until(
            lambda: consumer.poll(0.1) == [] and broker.call_soon(waiting_on_wake),
            timeout=60,
            message="a waiting fetch covering the partition appended to",
        )

    try:
        # One append to one partition, just after the fetch began to wait
        # (so its expiry is most of MAX_WAIT_MS away): the append wakes it.
        until_waiting_on_wake()
        sent = time.monotonic()
        producer.produce(topic, b"wake", partition=WAKE)
        producer.flush(30)
        got: list[bytes] = []
        while not got and time.monotonic() - sent < MAX_WAIT_MS / 1000:
            got = consumer.poll(MAX_WAIT_MS / 1000)
        latency = time.monotonic() - sent
        assert got == [b"wake"]
        assert latency < MAX_WAIT_MS / 2000, f"woken after {latency:.1f} s"

        # Idle long polls: the broker sleeps between them.
        until_waiting_on_wake()
        requests_before = _fetch_requests(broker)
        cpu_before, started = _thread_cpu_s(tid), time.monotonic()
        assert consumer.poll(IDLE_S) == []
        idle_cpu = (_thread_cpu_s(tid) - cpu_before) / (time.monotonic() - started)
        fetches = _fetch_requests(broker) - requests_before
        # A busy loop would take the whole core and answer fetches at once;
        # generous bounds, so a loaded machine does not fail the test.
        assert idle_cpu < 0.30, f"broker thread at {idle_cpu:.0%} of a core while idle"
        assert fetches <= 5, f"{fetches} fetches in {IDLE_S} s with a {MAX_WAIT_MS} ms wait"
        if client is KafkaPython:
            # Its fetches went through a session holding every partition.
            assert broker.call_soon(lambda: sessions.total_partitions) >= PARTITIONS
    finally:
        consumer.close()
