"""Produce validation driven by broker/topic configuration, topic ids, and
OffsetForLeaderEpoch; each test runs its own broker with the properties it
needs (ControllerDouble from test_apis)."""

from __future__ import annotations

import time
import uuid

import pytest

import kfast.protocol as p
from kfast.protocol import errors
from kfast.records import TIMESTAMP_LOG_APPEND_TIME, RecordBatchBuilder, iter_batches
from kfast.testing import KfastBroker

from .test_apis import Client, ControllerDouble, _fetch, _metadata, _produce


def batch(values, timestamp=None):
    builder = RecordBatchBuilder(0)
    for value in values:
        builder.append(int(time.time() * 1000) if timestamp is None else timestamp, None, value)
    return builder.build()


@pytest.fixture
def make_client(tmp_path):
    started = []

    def make(**properties):
        broker = KfastBroker(
            properties,
            data_dir=str(tmp_path / f"d{len(started)}"),
            controller_factory=ControllerDouble,
        ).start()
        client = Client(broker)
        started.append((broker, client))
        return client

    yield make
    for broker, client in started:
        client.close()
        broker.close()


def first_partition(response):
    return response.responses[0].partition_responses[0]


def test_log_append_time_patches_batches(make_client):
    client = make_client(**{"log.message.timestamp.type": "LogAppendTime"})
    _metadata(client, ["lat"])
    before = int(time.time() * 1000)
    part = first_partition(_produce(client, "lat", 0, batch([b"x"], timestamp=5)))
    assert part.error_code == 0 and part.log_append_time_ms >= before
    fetched = _fetch(client, "lat", 0, 0).responses[0].partitions[0]
    (stored,) = list(iter_batches(fetched.records))
    assert stored.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
    assert stored.max_timestamp == part.log_append_time_ms


def test_timestamp_bounds_and_message_size(make_client):
    client = make_client(
        **{"log.message.timestamp.before.max.ms": 60000, "message.max.bytes": 1000}
    )
    _metadata(client, ["bounds"])
    old = first_partition(_produce(client, "bounds", 0, batch([b"x"], timestamp=1000)))
    assert old.error_code == errors.InvalidTimestampException.code
    future = first_partition(
        _produce(client, "bounds", 0, batch([b"x"], timestamp=int(time.time() * 1000) + 7200_000))
    )
    assert future.error_code == errors.InvalidTimestampException.code
    large = first_partition(_produce(client, "bounds", 0, batch([b"y" * 2000])))
    assert large.error_code == errors.RecordTooLargeException.code
    assert first_partition(_produce(client, "bounds", 0, batch([b"ok"]))).error_code == 0


def test_auto_create_disabled(make_client):
    client = make_client(**{"auto.create.topics.enable": "false"})
    (topic,) = _metadata(client, ["nope"]).topics
    assert topic.error_code == errors.UnknownTopicOrPartitionException.code


def test_topic_ids_in_produce_fetch_and_metadata(make_client):
    client = make_client()
    _metadata(client, ["ids"])
    (topic,) = _metadata(client, ["ids"]).topics
    topic_id = topic.topic_id
    body = p.ProduceRequest(
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            p.ProduceRequest.TopicProduceData(
                topic_id=topic_id,
                partition_data=[
                    p.ProduceRequest.PartitionProduceData(index=0, records=batch([b"by-id"]))
                ],
            )
        ],
    )
    assert first_partition(client.request(0, 13, body)).error_code == 0
    body.topic_data[0].topic_id = uuid.uuid4()
    assert (
        first_partition(client.request(0, 13, body)).error_code
        == errors.UnknownTopicIdException.code
    )
    fetch = p.FetchRequest(
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        topics=[
            p.FetchRequest.FetchTopic(
                topic_id=topic_id,
                partitions=[
                    p.FetchRequest.FetchPartition(
                        partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                    )
                ],
            )
        ],
    )
    response = client.request(1, 16, fetch)
    assert response.responses[0].topic_id == topic_id
    assert [
        bytes(r.value) for b in iter_batches(response.responses[0].partitions[0].records) for r in b
    ] == [b"by-id"]
    fetch.topics[0].topic_id = uuid.uuid4()
    unknown = client.request(1, 16, fetch).responses[0].partitions[0]
    assert unknown.error_code == errors.UnknownTopicIdException.code
    by_id = client.request(
        3,
        12,
        p.MetadataRequest(
            topics=[p.MetadataRequest.MetadataRequestTopic(topic_id=topic_id, name=None)]
        ),
    )
    assert by_id.topics[0].name == "ids"
    # The Java client's describeTopics(TopicCollection.ofTopicIds(...)) sends
    # the id with name "", the field's default: still a lookup by id.
    by_id = client.request(
        3,
        12,
        p.MetadataRequest(
            topics=[p.MetadataRequest.MetadataRequestTopic(topic_id=topic_id, name="")]
        ),
    )
    assert (by_id.topics[0].error_code, by_id.topics[0].name, by_id.topics[0].topic_id) == (
        0,
        "ids",
        topic_id,
    )


def test_offset_for_leader_epoch(make_client):
    client = make_client()
    _metadata(client, ["epochs"])
    _produce(client, "epochs", 0, batch([b"a", b"b"]))
    body = p.OffsetForLeaderEpochRequest(
        replica_id=-1,
        topics=[
            p.OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
                topic="epochs",
                partitions=[
                    p.OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                        partition=0, current_leader_epoch=0, leader_epoch=0
                    )
                ],
            )
        ],
    )
    result = client.request(23, 4, body).topics[0].partitions[0]
    assert (result.error_code, result.leader_epoch, result.end_offset) == (0, 0, 2)
    body.topics[0].partitions[0].current_leader_epoch = 5
    result = client.request(23, 4, body).topics[0].partitions[0]
    assert result.error_code == errors.UnknownLeaderEpochException.code


def test_producer_state_survives_restart(tmp_path):
    broker = KfastBroker(
        data_dir=str(tmp_path / "restart"), controller_factory=ControllerDouble
    ).start()
    try:
        client = Client(broker)
        _metadata(client, ["pstate"])

        def send(sequence, values):
            builder = RecordBatchBuilder(
                0, producer_id=4242, producer_epoch=0, base_sequence=sequence
            )
            for value in values:
                builder.append(int(time.time() * 1000), None, value)
            return first_partition(_produce(client, "pstate", 0, builder.build()))

        assert send(0, [b"a", b"b"]).base_offset == 0
        client.close()
        broker.restart()
        client = Client(broker)
        _metadata(client, ["pstate"])  # the test controller forgets topics, the log stays
        retry = send(0, [b"a", b"b"])
        assert (retry.error_code, retry.base_offset) == (0, 0)
        assert send(3, [b"gap"]).error_code == errors.OutOfOrderSequenceException.code
        assert send(2, [b"c"]).base_offset == 2
        client.close()
    finally:
        broker.close()


def test_internal_topics_auto_created_with_their_own_settings(make_client):
    client = make_client(
        **{"offsets.topic.num.partitions": 3, "offsets.topic.replication.factor": 1}
    )
    _metadata(client, ["__consumer_offsets"])
    (topic,) = _metadata(client, ["__consumer_offsets"]).topics
    assert topic.error_code == 0 and topic.is_internal
    assert len(topic.partitions) == 3


def test_shutdown_answers_a_waiting_fetch(tmp_path):
    import threading

    broker = KfastBroker(
        data_dir=str(tmp_path / "stop"), controller_factory=ControllerDouble
    ).start()
    client = Client(broker)
    try:
        _metadata(client, ["parked"])
        body = p.FetchRequest(
            max_wait_ms=30000,
            min_bytes=1,
            max_bytes=1 << 20,
            topics=[
                p.FetchRequest.FetchTopic(
                    topic="parked",
                    partitions=[
                        p.FetchRequest.FetchPartition(
                            partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                        )
                    ],
                )
            ],
        )
        client.send_frame(p.encode_request(1, 12, 321, "test", body))
        purgatory = broker.broker.replica_manager.fetch_purgatory
        from .test_apis import _wait_for

        assert _wait_for(broker, lambda: purgatory.delayed() == 1)
        stopper = threading.Thread(target=broker.stop)
        stopper.start()
        # Answered (empty) well before max_wait_ms, then the connection closes.
        frame = client.read_frame()
        assert frame is not None
        correlation_id, response = p.decode_response(1, 12, frame)
        assert correlation_id == 321 and response.error_code == 0
        assert client.closed_by_peer()
        stopper.join(30)
        assert not stopper.is_alive()
    finally:
        client.close()
        broker.close()
