"""JBOD: AlterReplicaLogDirs moves a partition between log.dirs while it
serves (Kafka's future replica, caught up and swapped), with kafka-python's
admin client as the oracle and an idempotent acks=all producer writing all
along: no record lost, none duplicated, every offset in place."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from e2e_support import wait_until
from kafka import TopicPartitionReplica
from kafka.admin import KafkaAdminClient
from kafka.errors import NoError

from kfast.testing import KfastBroker

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


@pytest.fixture
def kfast_broker_two_dirs(tmp_path):
    """A broker with log.dirs a,b (the metadata log in a); yields it and both dirs."""
    dir_a, dir_b = str(tmp_path / "a"), str(tmp_path / "b")
    with KfastBroker({"log.dirs": f"{dir_a},{dir_b}"}, data_dir=dir_a) as broker:
        yield broker, dir_a, dir_b


def _create(broker, topic: str) -> None:
    creator = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    creator.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def _placement(admin: KafkaAdminClient, topic: str) -> dict:
    """{log dir: [(partition, is_future, size, offset_lag)]} for ``topic``."""
    (answer,) = admin.describe_log_dirs()
    found = {}
    for result in answer["log_dirs"]:
        assert result["error_code"] == 0
        assert result["total_bytes"] > 0 and 0 <= result["usable_bytes"] <= result["total_bytes"]
        found[result["log_dir"]] = [
            (p["partition_index"], p["is_future_key"], p["partition_size"], p["offset_lag"])
            for t in result["topics"]
            if t["name"] == topic
            for p in t["partitions"]
        ]
    return found


def test_a_partition_moves_to_another_log_dir_while_a_producer_writes(kfast_broker_two_dirs):
    broker, dir_a, dir_b = kfast_broker_two_dirs
    topic = "moving"
    _create(broker, topic)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        assert [p for p, future, *_ in _placement(admin, topic)[dir_a]] == [0]

        acknowledged: list[tuple[int, bytes]] = []
        failures: list = []
        stop = threading.Event()

        def produce():
            producer = Producer(
                {
                    "bootstrap.servers": broker.bootstrap_servers,
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 2,
                }
            )

            def on_delivery(err, msg):
                if err is not None:
                    failures.append(err)
                else:
                    acknowledged.append((msg.offset(), msg.value()))

            i = 0
            while not stop.is_set():
                try:
                    producer.produce(
                        topic, b"%07d" % i + b"x" * 200, partition=0, on_delivery=on_delivery
                    )
                    i += 1
                except BufferError:
                    producer.poll(0.01)
                producer.poll(0)
                if i % 500 == 0:
                    time.sleep(0.005)
            assert producer.flush(30) == 0

        writer = threading.Thread(target=produce)
        writer.start()
        try:
            wait_until(lambda: len(acknowledged) >= 20_000, timeout=60)
            moved = admin.alter_replica_log_dirs(
                {TopicPartitionReplica(topic, 0, broker.broker.node_id): dir_b}
            )
            assert list(moved.values()) == [NoError]
            # Right after: still copying (a future replica in b, the current
            # one in a) or already swapped; never both current, never none.
            during = _placement(admin, topic)
            states = (
                [(p, f) for p, f, *_ in during[dir_a]],
                [(p, f) for p, f, *_ in during[dir_b]],
            )
            assert states in (([(0, False)], [(0, True)]), ([], [(0, False)])), states
            wait_until(
                lambda: (
                    [(p, future) for p, future, *_ in _placement(admin, topic)[dir_b]]
                    == [(0, False)]
                ),
                timeout=60,
                message="the move to finish",
            )
            wait_until(lambda: len(acknowledged) >= 30_000, timeout=60)
        finally:
            stop.set()
            writer.join(60)
        assert not failures, failures[:3]
        after = _placement(admin, topic)
        assert after[dir_a] == [] and after[dir_b][0][:2] == (0, False)
    finally:
        admin.close()

    # Every acknowledged record once, at the offset it was acknowledged at.
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "audit",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen: dict[int, bytes] = {}
    deadline = time.monotonic() + 60
    while len(seen) < len(acknowledged) and time.monotonic() < deadline:
        for message in consumer.consume(10_000, 0.5):
            if message.error() is None:
                assert message.offset() not in seen
                seen[message.offset()] = message.value()
    consumer.close()
    assert seen == dict(acknowledged)
    assert sorted(seen) == list(range(len(seen)))


def test_alter_replica_log_dirs_errors(kfast_broker_two_dirs, tmp_path):
    broker, dir_a, dir_b = kfast_broker_two_dirs
    _create(broker, "stays")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    node = broker.broker.node_id
    try:
        answers = admin.alter_replica_log_dirs(
            {TopicPartitionReplica("stays", 0, node): str(tmp_path / "not-a-log-dir")}
        )
        assert [e.__name__ for e in answers.values()] == ["LogDirNotFoundError"]
        answers = admin.alter_replica_log_dirs({TopicPartitionReplica("nothere", 0, node): dir_b})
        assert [e.__name__ for e in answers.values()] == ["ReplicaNotAvailableError"]
        # Its own dir: nothing to move.
        answers = admin.alter_replica_log_dirs({TopicPartitionReplica("stays", 0, node): dir_a})
        assert list(answers.values()) == [NoError]
        assert [p for p, future, *_ in _placement(admin, "stays")[dir_a]] == [0]
    finally:
        admin.close()
