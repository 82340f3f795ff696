"""Caught-up long polls across transactions (the caught-up read in C,
kfast._ext.fetch_codec.read_caught_up): librdkafka and kafka-python
consumers, read_committed and read_uncommitted, long-poll a partition with a
committed and an aborted transaction behind them and one still open.

A read_committed consumer is caught up at the last stable offset -- the open
transaction's first offset, below the high watermark -- and gets nothing of
it however many long polls it makes; its commit wakes the consumer with the
transaction's records. A read_uncommitted consumer is caught up at the high
watermark and gets the open transaction's records at once. Every consumer
gets exactly the records its isolation level allows, in order."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from e2e_support import wait_until

from kfast.server.fetch_fast import STATS

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

MAX_WAIT_MS = 100
COMMITTED = [b"committed-%d" % i for i in range(3)]
ABORTED = [b"aborted-%d" % i for i in range(3)]
PLAIN = [b"plain"]
OPEN = [b"open-%d" % i for i in range(2)]


class ConfluentReader:
    def __init__(self, bootstrap: str, topic: str, isolation: str) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"g-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": MAX_WAIT_MS,
                "isolation.level": isolation,
            }
        )
        self.consumer.assign([TopicPartition(topic, 0, 0)])
        self.values: list[bytes] = []

    def poll(self) -> None:
        message = self.consumer.poll(0.05)
        if message is not None and not message.error():
            self.values.append(message.value())

    def close(self) -> None:
        self.consumer.close()


class KafkaPythonReader:
    def __init__(self, bootstrap: str, topic: str, isolation: str) -> None:
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KafkaTopicPartition

        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            fetch_max_wait_ms=MAX_WAIT_MS,
            isolation_level=isolation,
            # Sessionless: the fast path's fetches (a session's take the
            # generic handler, which reads through the same C check).
            enable_incremental_fetch_sessions=False,
        )
        partition = KafkaTopicPartition(topic, 0)
        self.consumer.assign([partition])
        self.consumer.seek(partition, 0)
        self.values: list[bytes] = []

    def poll(self) -> None:
        for records in self.consumer.poll(timeout_ms=50).values():
            self.values.extend(record.value for record in records)

    def close(self) -> None:
        self.consumer.close()


def _poll_until(readers, done, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        for reader in readers:
            reader.poll()
    assert done()


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_caught_up_long_polls_see_what_their_isolation_level_allows(broker, topic, client):
    bootstrap = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"t-{topic}"})
    producer.init_transactions(30)
    for values, commit in ((COMMITTED, True), (ABORTED, False)):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value=value, partition=0)
        producer.flush(15)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    plain.produce(topic, value=PLAIN[0], partition=0)
    assert plain.flush(15) == 0

    reader = ConfluentReader if client == "confluent" else KafkaPythonReader
    committed = reader(bootstrap, topic, "read_committed")
    uncommitted = reader(bootstrap, topic, "read_uncommitted")
    readers = (committed, uncommitted)
    fell_back = STATS.fell_back
    try:
        _poll_until(readers, lambda: len(committed.values) == 4 and len(uncommitted.values) == 7)
        assert committed.values == COMMITTED + PLAIN
        assert uncommitted.values == COMMITTED + ABORTED + PLAIN

        # A transaction stays open: read_uncommitted gets it, read_committed
        # long-polls at the LSO (below the HW) and gets none of it.
        producer.begin_transaction()
        for value in OPEN:
            producer.produce(topic, value=value, partition=0)
        producer.flush(15)
        _poll_until(readers, lambda: len(uncommitted.values) == 9)
        assert uncommitted.values[7:] == OPEN
        log = broker.broker.replica_manager.get_partition(topic, 0).log
        assert log.last_stable_offset < log.high_watermark
        answered = STATS.answered
        wait_until(lambda: (committed.poll(), STATS.answered >= answered + 6)[1], timeout=30)
        assert committed.values == COMMITTED + PLAIN

        # Its commit moves the LSO: the caught-up consumer gets it.
        producer.commit_transaction(30)
        _poll_until(readers, lambda: len(committed.values) == 6)
        assert committed.values == COMMITTED + PLAIN + OPEN
        assert uncommitted.values == COMMITTED + ABORTED + PLAIN + OPEN
        assert log.last_stable_offset == log.high_watermark
    finally:
        for each in readers:
            each.close()
    assert STATS.fell_back == fell_back  # every fetch was the fast path's
