"""JBOD: AlterReplicaLogDirs moves a partition between log.dirs while it
serves (Kafka's future replica, caught up and swapped), with kafka-python's
admin client as the oracle and an idempotent acks=all producer writing all
along: no record lost, none duplicated, every offset in place."""

from __future__ import annotations

import os
import re
import threading
import time
from unittest.mock import ANY

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


def test_a_move_interrupted_by_kill_9_resumes_at_the_restart(tmp_path):
    """Kafka keeps the -future replica of a move across a restart and
    resumes the copy from its log end. A kfast serve process with two log
    dirs moves an 8 MiB partition under a 2 MiB/s
    replica.alter.log.dirs.io.max.bytes.per.second; it is killed with
    SIGKILL a quarter of the way, restarted, and the move completes from
    where it stopped, every record at its offset."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    from e2e_support import ServeProcess, free_port

    dir_a, dir_b = str(tmp_path / "a"), str(tmp_path / "b")
    broker = ServeProcess(dir_a, free_port(), [f"log.dirs={dir_a},{dir_b}"])
    admin = None
    try:
        broker.start()
        _create(broker, "big")
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all"})
        acknowledged: dict[int, bytes] = {}
        for i in range(8192):
            producer.produce(
                "big",
                b"%07d" % i + b"v" * 1017,
                partition=0,
                on_delivery=lambda err, msg: (
                    err or acknowledged.update({msg.offset(): msg.value()})
                ),
            )
            producer.poll(0)
        assert producer.flush(30) == 0 and len(acknowledged) == 8192

        creator = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        node = creator.describe_cluster().result(30).nodes[0].id
        quota = ConfigResource(
            ConfigResource.Type.BROKER,
            str(node),
            incremental_configs=[
                ConfigEntry(
                    "replica.alter.log.dirs.io.max.bytes.per.second",
                    str(2 << 20),
                    incremental_operation=AlterConfigOpType.SET,
                )
            ],
        )
        creator.incremental_alter_configs([quota])[quota].result(30)
        moved = admin.alter_replica_log_dirs({TopicPartitionReplica("big", 0, node): dir_b})
        assert list(moved.values()) == [NoError]

        def future_size() -> int:
            sizes = [s for p, future, s, _ in _placement(admin, "big")[dir_b] if future]
            return sizes[0] if sizes else 0

        wait_until(lambda: future_size() >= 2 << 20, timeout=30, message="a quarter copied")
        admin.close()
        admin = None
        broker.kill()
        assert any(name.endswith("-future") for name in os.listdir(dir_b))

        broker.start()
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        wait_until(
            lambda: _placement(admin, "big") == {dir_a: [], dir_b: [(0, False, ANY, 0)]},
            timeout=60,
            message="the resumed move to finish",
        )
        output = "".join(broker.output)
        resumed = re.search(
            rf"resuming the move of big-0 to {re.escape(dir_b)} at offset (\d+)", output
        )
        assert resumed is not None, output[-3000:]
        assert int(resumed.group(1)) >= 1024  # from where it stopped, not from 0
        assert "Traceback" not in output, output[-5000:]

        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "audit"})
        consumer.assign([TopicPartition("big", 0, 0)])
        seen: dict[int, bytes] = {}
        deadline = time.monotonic() + 30
        while len(seen) < len(acknowledged) and time.monotonic() < deadline:
            for message in consumer.consume(10_000, 0.5):
                if message.error() is None:
                    seen[message.offset()] = message.value()
        consumer.close()
        assert seen == acknowledged
        assert broker.terminate() == 0
    finally:
        if admin is not None:
            admin.close()
        broker.kill()
