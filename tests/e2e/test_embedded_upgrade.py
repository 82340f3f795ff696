"""A data directory written by the embedded single node before it ran on the
KRaft path starts on it: ``data/embedded-node-before-raft.tgz`` is what
``KfastBroker`` of main at a400047 left after a clean shutdown (its
QuorumController's ``__cluster_metadata-0``: batches in epoch 1, a metadata
snapshot at offset 14, no quorum-state) with a topic ``legacy`` (2
partitions, retention.ms=86400000, records v0..v4 in partition 1), a topic
``later`` and group ``legacy-group`` at offset 3 of legacy-1, with
metadata.log.max.record.bytes.between.snapshots=400,
offsets.topic.num.partitions=1 and num.partitions=1."""

from __future__ import annotations

import os
import tarfile
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from kfast.client.connection import BlockingConnection
from kfast.protocol import DescribeQuorumRequest
from kfast.testing import KfastBroker

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

ARCHIVE = os.path.join(os.path.dirname(__file__), "data", "embedded-node-before-raft.tgz")
OVERRIDES = {"offsets.topic.num.partitions": 1, "num.partitions": 1}


def quorum(broker: KfastBroker):
    request = DescribeQuorumRequest(
        topics=[
            DescribeQuorumRequest.TopicData(
                topic_name="__cluster_metadata",
                partitions=[DescribeQuorumRequest.PartitionData(partition_index=0)],
            )
        ]
    )
    with BlockingConnection("127.0.0.1", broker.port) as connection:
        return connection.send(request, version=1).topics[0].partitions[0]


def consume_legacy(bootstrap: str) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition("legacy", 1, 0)])
        values, deadline = [], time.monotonic() + 30
        while len(values) < 5 and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": "legacy-group"})
    try:
        return values, group.committed([TopicPartition("legacy", 1)], timeout=30)[0].offset
    finally:
        group.close()


def test_a_data_dir_of_the_embedded_node_before_raft_starts_with_everything(tmp_path):
    with tarfile.open(ARCHIVE) as archive:
        archive.extractall(tmp_path)
    data_dir = str(tmp_path / "data")
    assert not os.path.exists(os.path.join(data_dir, "quorum-state"))
    broker = KfastBroker(OVERRIDES, data_dir=data_dir).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        topics = admin.list_topics(timeout=30).topics
        assert {"legacy", "later"} <= set(topics) and len(topics["legacy"].partitions) == 2
        [configs] = admin.describe_configs([ConfigResource("topic", "legacy")]).values()
        assert configs.result(30)["retention.ms"].value == "86400000"
        assert consume_legacy(broker.bootstrap_servers) == ([b"v%d" % i for i in range(5)], 3)
        # The old log's batches are in epoch 1: the new leader takes a later one.
        state = quorum(broker)
        assert (state.error_code, state.leader_id, state.leader_epoch) == (0, 1, 2)
        assert state.high_watermark > 14
        admin.create_topics([NewTopic("after", 1, 1)])["after"].result(30)
        broker.restart()
        assert {"legacy", "later", "after"} <= set(
            AdminClient({"bootstrap.servers": broker.bootstrap_servers})
            .list_topics(timeout=30)
            .topics
        )
        assert quorum(broker).leader_epoch == 3
    finally:
        broker.close()
    # Where Kafka keeps it: in the metadata partition's directory.
    assert os.path.exists(os.path.join(data_dir, "__cluster_metadata-0", "quorum-state"))
    assert not os.path.exists(os.path.join(data_dir, "quorum-state"))
