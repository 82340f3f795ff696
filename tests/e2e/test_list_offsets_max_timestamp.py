"""ListOffsets with MAX_TIMESTAMP (-3, KIP-734): the offset and timestamp of
the record with the largest timestamp, even when it is not the last record of
its batch (KAFKA-16310), through confluent-kafka's and kafka-python's admin
clients and on the wire."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

import kfast.protocol as p
from kfast.client.connection import BlockingConnection
from kfast.protocol import api_keys, errors
from kfast.protocol.constants import MAX_TIMESTAMP
from kfast.records import COMPRESSION_NONE, RecordBatchBuilder

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

LIST_OFFSETS = api_keys.BY_NAME["ListOffsets"]
# ListOffsets v7 is the first that may ask for MAX_TIMESTAMP (KIP-734).
FIRST_MAX_TIMESTAMP_VERSION = 7


def _timestamps():
    """Batch one: the largest timestamp is the second of four records; batch
    two: older records after it."""
    t = int(time.time() * 1000) - 60_000
    return t, [t - 3000, t, t - 2000, t - 1000], [t - 5000, t - 4000]


def _produce_batches(broker, topic, batches):
    """Each list of timestamps as one batch: with a long linger.ms librdkafka
    holds the records until flush() sends them together. The producer learns
    the partition's leader first: records produced while it is unknown wait
    in a queue of their own and may reach the partition (and the wire) in
    two parts."""
    for timestamps in batches:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 60_000})
        producer.list_topics(topic, timeout=15)
        for i, timestamp in enumerate(timestamps):
            producer.produce(topic, key=b"k%d" % i, value=b"v", partition=0, timestamp=timestamp)
        assert producer.flush(15) == 0


def _batch_layout(broker, topic):
    """(base offset, last offset) of each batch the broker stored."""

    def layout():
        log = broker.broker.replica_manager.get_partition(topic, 0).log
        return [
            (header.base_offset, header.last_offset)
            for segment in log.segments
            for _, header, _ in segment.log.batches_from(0)
        ]

    return broker.call_soon(layout)


def _create(broker, topic):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)


def test_confluent_kafka_admin_list_offsets_max_timestamp(broker, topic):
    _create(broker, topic)
    t, first, second = _timestamps()
    _produce_batches(broker, topic, [first, second])
    assert _batch_layout(broker, topic) == [(0, 3), (4, 5)]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    partition = TopicPartition(topic, 0)
    found = admin.list_offsets({partition: OffsetSpec.max_timestamp()})[partition].result(15)
    assert (found.offset, found.timestamp) == (1, t)
    latest = admin.list_offsets({partition: OffsetSpec.latest()})[partition].result(15)
    assert latest.offset == 6


def test_kafka_python_admin_list_partition_offsets_max_timestamp(broker, topic):
    from kafka import TopicPartition as KafkaPythonTopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.admin import OffsetSpec as KafkaPythonOffsetSpec

    _create(broker, topic)
    t, first, second = _timestamps()
    _produce_batches(broker, topic, [first, second])
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        partition = KafkaPythonTopicPartition(topic, 0)
        found = admin.list_partition_offsets({partition: KafkaPythonOffsetSpec.MAX_TIMESTAMP})
    finally:
        admin.close()
    assert (found[partition].offset, found[partition].timestamp) == (1, t)


def _list_max_timestamp(connection, topic, version):
    Topic, Partition = (
        p.ListOffsetsRequest.ListOffsetsTopic,
        p.ListOffsetsRequest.ListOffsetsPartition,
    )
    response = connection.send(
        p.ListOffsetsRequest(
            replica_id=-1,
            topics=[
                Topic(
                    name=topic,
                    partitions=[
                        Partition(
                            partition_index=0,
                            timestamp=MAX_TIMESTAMP,
                            current_leader_epoch=-1,
                            max_num_offsets=1,
                        )
                    ],
                )
            ],
        ),
        version=version,
    )
    [topic_response] = response.topics
    [partition] = topic_response.partitions
    return partition


@pytest.mark.parametrize(
    "version", range(LIST_OFFSETS.min_version, LIST_OFFSETS.max_stable_version + 1)
)
def test_list_offsets_max_timestamp_on_the_wire(broker, topic, version):
    _create(broker, topic)
    t, first, second = _timestamps()
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    with BlockingConnection(host, int(port)) as connection:
        for timestamps in (first, second):
            builder = RecordBatchBuilder(COMPRESSION_NONE)
            for i, timestamp in enumerate(timestamps):
                builder.append(timestamp, b"k%d" % i, b"v")
            TopicData, PartitionData = (
                p.ProduceRequest.TopicProduceData,
                p.ProduceRequest.PartitionProduceData,
            )
            produced = connection.send(
                p.ProduceRequest(
                    acks=-1,
                    timeout_ms=5000,
                    topic_data=[
                        TopicData(
                            name=topic,
                            partition_data=[PartitionData(index=0, records=builder.build())],
                        )
                    ],
                ),
                version=9,
            )
            assert produced.responses[0].partition_responses[0].error_code == 0
        partition = _list_max_timestamp(connection, topic, version)
    if version < FIRST_MAX_TIMESTAMP_VERSION:
        assert partition.error_code == errors.UnsupportedVersionException.code
        return
    assert partition.error_code == 0
    assert (partition.timestamp, partition.offset) == (t, 1)
    assert partition.leader_epoch == 0
