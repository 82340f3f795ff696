"""A record without a key produced to a compacted topic (cleanup.policy=compact)
is rejected with INVALID_RECORD and per-record errors (KIP-467), as Kafka's
LogValidator.validateKey does; the batch is not stored."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import kfast.protocol as p
from kfast.client.connection import BlockingConnection
from kfast.protocol import api_keys, errors
from kfast.protocol.constants import LATEST_TIMESTAMP
from kfast.records import COMPRESSION_NONE, RecordBatchBuilder

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

PRODUCE = api_keys.BY_NAME["Produce"]
# Produce v8 added record_errors and error_message (KIP-467).
FIRST_RECORD_ERRORS_VERSION = 8


def _create_compacted(broker, topic):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})])[
        topic
    ].result(15)


def _message(topic):
    return f"Compacted topic cannot accept message without key in topic partition {topic}-0"


def _log_end_offset(connection, topic):
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
                            partition_index=0, timestamp=LATEST_TIMESTAMP, current_leader_epoch=-1
                        )
                    ],
                )
            ],
        ),
        version=7,
    )
    return response.topics[0].partitions[0].offset


def test_confluent_kafka_producer_gets_invalid_record(broker, topic):
    _create_compacted(broker, topic)
    reports = []
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})

    def on_delivery(error, message):
        reports.append((message.key(), error, message.offset()))

    producer.produce(topic, value=b"no key", on_delivery=on_delivery)
    assert producer.flush(15) == 0
    producer.produce(topic, key=b"k", value=b"keyed", on_delivery=on_delivery)
    assert producer.flush(15) == 0
    (_, rejected, _), (key, accepted, offset) = reports
    assert rejected is not None and rejected.code() == KafkaError.INVALID_RECORD
    assert not rejected.retriable()
    # The broker kept serving and stored nothing for the rejected record.
    assert (key, accepted, offset) == (b"k", None, 0)


def test_kafka_python_producer_gets_invalid_record(broker, topic):
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError

    _create_compacted(broker, topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, retries=0)
    try:
        with pytest.raises(InvalidRecordError):
            producer.send(topic, value=b"no key", partition=0).get(timeout=15)
        assert producer.send(topic, key=b"k", value=b"v", partition=0).get(timeout=15).offset == 0
    finally:
        producer.close()


@pytest.mark.parametrize("version", range(3, PRODUCE.max_stable_version + 1))
def test_raw_produce_reports_record_errors(broker, topic, version):
    _create_compacted(broker, topic)
    builder = RecordBatchBuilder(COMPRESSION_NONE)
    for key in (b"a", None, b"c", None):
        builder.append(0, key, b"v")
    TopicData, PartitionData = (
        p.ProduceRequest.TopicProduceData,
        p.ProduceRequest.PartitionProduceData,
    )
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    with BlockingConnection(host, int(port)) as connection:
        topic_id = broker.call_soon(
            lambda: broker.broker.metadata_image.topics_by_name[topic].topic_id
        )
        response = connection.send(
            p.ProduceRequest(
                acks=-1,
                timeout_ms=5000,
                topic_data=[
                    TopicData(
                        name=topic,
                        topic_id=topic_id,
                        partition_data=[PartitionData(index=0, records=builder.build())],
                    )
                ],
            ),
            version=version,
        )
        end_offset = _log_end_offset(connection, topic)
    [partition] = response.responses[0].partition_responses
    assert partition.error_code == errors.InvalidRecordException.code
    assert partition.base_offset == -1
    assert end_offset == 0
    if version < FIRST_RECORD_ERRORS_VERSION:
        return
    assert [(e.batch_index, e.batch_index_error_message) for e in partition.record_errors] == [
        (1, _message(topic)),
        (3, _message(topic)),
    ]
    assert partition.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only "
        "showing the first three errors at most: "
        f"[RecordError(batchIndex=1, message='{_message(topic)}'), "
        f"RecordError(batchIndex=3, message='{_message(topic)}')]"
    )
