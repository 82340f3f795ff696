"""kill -9 and restart: recovery re-reads the segments past the recovery
point, so a batch torn by the crash is cut away and everything acknowledged
before it is served, at its offsets; and a metadata change acknowledged
just before the kill (its fsync runs off the event loop) is there after."""

from __future__ import annotations

import glob
import os
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def _consume(bootstrap, topic, count):
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        out = []
        deadline = time.monotonic() + 30
        while len(out) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                out.append((message.offset(), message.value()))
        return out
    finally:
        consumer.close()


def test_torn_last_batch_is_cut_and_acknowledged_records_stay(serve, topic):
    node = serve("num.partitions=1").start()
    producer = Producer(
        {"bootstrap.servers": node.bootstrap_servers, "acks": "all", "linger.ms": 0}
    )
    for i in range(20):
        producer.produce(topic, value=b"record %d" % i, partition=0)
        assert producer.flush(15) == 0  # one batch per record
    node.kill()
    [log_file] = glob.glob(os.path.join(node.data_dir, f"{topic}-0", "*.log"))
    size = os.path.getsize(log_file)
    # What a crash in the middle of the last write leaves: its batch cut short.
    with open(log_file, "r+b") as f:
        f.truncate(size - 7)

    node.start()
    records = _consume(node.bootstrap_servers, topic, 19)
    assert records == [(i, b"record %d" % i) for i in range(19)]
    # The torn batch is gone from the file, and its offset is the next one.
    batch_size = size - os.path.getsize(log_file)
    assert 7 < batch_size < 200
    producer = Producer({"bootstrap.servers": node.bootstrap_servers, "acks": "all"})
    delivered = []
    producer.produce(
        topic,
        value=b"after",
        partition=0,
        on_delivery=lambda err, msg: delivered.append((err, msg.offset())),
    )
    assert producer.flush(15) == 0
    assert delivered == [(None, 19)]
    assert _consume(node.bootstrap_servers, topic, 20)[-1] == (19, b"after")


def test_topics_acknowledged_just_before_kill_9_survive_the_restart(serve, topic):
    """The controller answers CreateTopics once the records are committed,
    which on a quorum of one means once its own fsync of them (on the
    Raft I/O thread) is done: a kill right after the answer loses nothing."""
    node = serve().start()
    admin = AdminClient({"bootstrap.servers": node.bootstrap_servers})
    names = [f"{topic}-{i}" for i in range(5)]
    for name in names:  # one at a time: each kill-able right after its answer
        admin.create_topics([NewTopic(name, num_partitions=3)])[name].result(15)
    node.kill()

    node.start()
    admin = AdminClient({"bootstrap.servers": node.bootstrap_servers})
    topics = admin.list_topics(timeout=15).topics
    assert {name: len(topics[name].partitions) for name in names if name in topics} == {
        name: 3 for name in names
    }
