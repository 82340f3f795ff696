"""The broker's fetch.max.bytes (KIP-541) caps a consumer's fetch response
below what the request asks; the first batch still comes whole, a replica
fetch from a broker that is no replica is refused, and DescribeConfigs
reports the setting."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

import kfast.protocol as p
from kfast.client.connection import BlockingConnection
from kfast.protocol import api_keys
from kfast.records import iter_batches
from kfast.testing import KfastBroker

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]
TIMEOUT = 15
TOPIC = "capped"
PARTITIONS = 3
VALUE = b"v" * 700  # one batch per partition, each over half the cap


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    instance = KfastBroker(
        {"fetch.max.bytes": 1024}, data_dir=str(tmp_path_factory.mktemp("kfast"))
    )
    instance.start()
    admin = AdminClient({"bootstrap.servers": instance.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(TIMEOUT)
    producer = Producer({"bootstrap.servers": instance.bootstrap_servers, "linger.ms": 0})
    for partition in range(PARTITIONS):
        producer.produce(TOPIC, VALUE, partition=partition)
        producer.flush(TIMEOUT)  # one batch each
    assert len(producer) == 0
    yield instance
    instance.close()


def _fetch(broker, version: int, replica_id: int = -1, error_code: int = 0) -> dict[int, int]:
    """One Fetch for every partition asking for 1 MiB each and 50 MiB in
    all: partition -> whole batches answered (after the cap a partition may
    get the head of a batch, as from Kafka, which clients drop)."""
    with BlockingConnection(broker.host, broker.port) as connection:
        metadata = connection.send(
            p.MetadataRequest(topics=[p.MetadataRequest.MetadataRequestTopic(name=TOPIC)]),
            api_keys.BY_NAME["Metadata"].key,
            12,
        )
        topic_id = metadata.topics[0].topic_id  # Fetch v13+ names topics by id
    body = p.FetchRequest(
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=50 * 1024 * 1024,
        topics=[
            p.FetchRequest.FetchTopic(
                topic=TOPIC,
                topic_id=topic_id,
                partitions=[
                    p.FetchRequest.FetchPartition(
                        partition=i, fetch_offset=0, partition_max_bytes=1024 * 1024
                    )
                    for i in range(PARTITIONS)
                ],
            )
        ],
    )
    if version >= 15:
        body.replica_state = p.FetchRequest.ReplicaState(replica_id=replica_id)
    else:
        body.replica_id = replica_id
    with BlockingConnection(broker.host, broker.port) as connection:
        response = connection.send(body, api_keys.FETCH, version)
    answered = {}
    for topic in response.responses:
        for part in topic.partitions:
            assert part.error_code == error_code
            answered[part.partition_index] = len(
                list(iter_batches(part.records or b"", allow_partial=True))
            )
    return answered


@pytest.mark.parametrize("version", [4, 12, 16])
def test_a_consumer_fetch_stops_at_the_broker_cap_after_the_first_batch(broker, version):
    # 50 MiB asked, 1024 allowed: the first batch (~800 bytes) fits, the
    # second would pass the cap.
    assert sorted(_fetch(broker, version).values()) == [0, 0, 1]


@pytest.mark.parametrize("version", [12, 16])
def test_a_replica_fetch_from_a_broker_that_is_no_replica_is_refused(broker, version):
    # Followers' fetches are not capped (they read to the log end, see
    # tests/e2e/test_replication.py), but only a replica of the partition
    # may fetch as one: Kafka answers NOT_LEADER_OR_FOLLOWER.
    assert _fetch(
        broker, version, replica_id=2, error_code=p.errors.NotLeaderOrFollowerException.code
    ) == {i: 0 for i in range(PARTITIONS)}


def test_a_consumer_reads_everything_through_the_cap(broker):
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "g",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(TOPIC, i, 0) for i in range(PARTITIONS)])
    got = []
    while len(got) < PARTITIONS:
        msg = consumer.poll(TIMEOUT)
        assert msg is not None, f"only {got} arrived"
        assert msg.error() is None, msg.error()
        got.append((msg.partition(), msg.value()))
    consumer.close()
    assert sorted(got) == [(i, VALUE) for i in range(PARTITIONS)]


def test_describe_configs_reports_the_cap(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    entries = admin.describe_configs([resource])[resource].result(TIMEOUT)
    entry = entries["fetch.max.bytes"]
    assert entry.value == "1024"
    assert entry.source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert entry.is_read_only
