"""A waiting fetch completes at once when its partition's log start offset
moves under it (issue 21 item 5), with a real librdkafka consumer: after
DeleteRecords, and after retention deletes the segments it was reading. The
consumer waits for fetch.min.bytes it will never get, so without the
wake-up its fetch would come back only at fetch.wait.max.ms; with it, the
fetch re-reads, finds its offset below the new log start and answers
OFFSET_OUT_OF_RANGE, which a consumer with auto.offset.reset=error reports."""

from __future__ import annotations

import time

import pytest
from e2e_support import wait_until

from kfast.testing import KfastBroker

pytestmark = pytest.mark.e2e

# Far longer than the wake-up may take, so an answer at the expiry fails.
MAX_WAIT_MS = 30_000
RECORDS = 3


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    instance = KfastBroker(
        # Retention checks often, so the retention test waits on its deletion
        # only briefly.
        {"num.partitions": 1, "log.retention.check.interval.ms": 200},
        data_dir=str(tmp_path_factory.mktemp("kfast-wake")),
    )
    instance.start()
    yield instance
    instance.close()


def _produce(broker: KfastBroker, topic: str, timestamp_ms: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for i in range(RECORDS):
        producer.produce(topic, b"r%d" % i, partition=0, timestamp=timestamp_ms)
    assert producer.flush(30) == 0


def _waiting_consumer(broker: KfastBroker, topic: str):
    """A consumer at offset 0 whose fetch waits in the broker: it has read
    the records, fewer bytes than fetch.min.bytes."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "wake-ups",
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
            "fetch.min.bytes": 1 << 20,
            "fetch.wait.max.ms": MAX_WAIT_MS,
            "socket.timeout.ms": MAX_WAIT_MS * 2,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    purgatory = broker.broker.replica_manager.fetch_purgatory
    wait_until(
        lambda: consumer.poll(0.1) is None and broker.call_soon(purgatory.pending, (topic, 0)),
        timeout=60,
        message="the consumer's fetch waiting in the broker",
    )
    return consumer


def _out_of_range_within(consumer, seconds: float) -> float:
    """Seconds until the consumer reports the reset error (auto.offset.reset
    =error on OFFSET_OUT_OF_RANGE); fails after ``seconds``."""
    from confluent_kafka import KafkaError

    started = time.monotonic()
    while time.monotonic() - started < seconds:
        message = consumer.poll(0.5)
        if message is None:
            continue
        error = message.error()
        assert error is not None, f"got a record at offset {message.offset()}"
        assert error.code() == KafkaError._AUTO_OFFSET_RESET, error
        return time.monotonic() - started
    pytest.fail(f"no OFFSET_OUT_OF_RANGE within {seconds} s")


def _create(broker: KfastBroker, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=30)[topic].result(60)


def test_delete_records_wakes_a_waiting_fetch(broker, topic):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    _create(broker, topic)
    _produce(broker, topic, int(time.time() * 1000))
    consumer = _waiting_consumer(broker, topic)
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        (future,) = admin.delete_records([TopicPartition(topic, 0, RECORDS)]).values()
        assert future.result(30).low_watermark == RECORDS
        # Well under MAX_WAIT_MS: woken by DeleteRecords, not expired.
        assert _out_of_range_within(consumer, MAX_WAIT_MS / 3000) < MAX_WAIT_MS / 3000
    finally:
        consumer.close()


def test_retention_wakes_a_waiting_fetch(broker, topic):
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    _create(broker, topic)
    # An hour old: once retention.ms is an hour or less, all of it goes.
    _produce(broker, topic, int(time.time() * 1000) - 3_600_000)
    consumer = _waiting_consumer(broker, topic)
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        resource = ConfigResource(
            ConfigResource.Type.TOPIC,
            topic,
            incremental_configs=[
                ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        admin.incremental_alter_configs([resource])[resource].result(30)
        assert _out_of_range_within(consumer, MAX_WAIT_MS / 3000) < MAX_WAIT_MS / 3000
        log = broker.broker.replica_manager.get_partition(topic, 0).log
        assert broker.call_soon(lambda: log.log_start_offset) == RECORDS
    finally:
        consumer.close()
