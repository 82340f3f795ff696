"""confluent-kafka's AdminClient (librdkafka) against kfast."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]
TIMEOUT = 15


@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def _result(futures):
    return {key: future.result(TIMEOUT) for key, future in futures.items()}


def _error_code(future) -> int:
    with pytest.raises(KafkaException) as info:
        future.result(TIMEOUT)
    return info.value.args[0].code()


def _log(broker, topic, partition=0):
    return broker.call_soon(broker.broker.log_manager.get_log, topic, partition)


def test_create_describe_and_delete(broker, admin, topic):
    _result(admin.create_topics([NewTopic(topic, 2, 1, config={"cleanup.policy": "compact"})]))
    metadata = admin.list_topics(timeout=TIMEOUT)
    assert sorted(metadata.topics[topic].partitions) == [0, 1]
    assert _log(broker, topic, 1).config.compact
    [description] = _result(
        admin.describe_topics(__import__("confluent_kafka").TopicCollection([topic]))
    ).values()
    assert [p.id for p in description.partitions] == [0, 1]
    assert description.partitions[0].leader.id == 1
    _result(admin.delete_topics([topic]))
    assert topic not in admin.list_topics(timeout=TIMEOUT).topics


def test_create_errors_and_validate_only(admin, topic):
    _result(admin.create_topics([NewTopic(topic, 1, 1)]))
    futures = admin.create_topics(
        [
            NewTopic(topic, 1, 1),
            NewTopic(topic + "-rf", 1, 2),
            NewTopic(topic + "-bad", 1, 1, config={"retention.ms": "x"}),
        ]
    )
    assert _error_code(futures[topic]) == KafkaError.TOPIC_ALREADY_EXISTS
    assert _error_code(futures[topic + "-rf"]) == KafkaError.INVALID_REPLICATION_FACTOR
    assert _error_code(futures[topic + "-bad"]) == KafkaError.INVALID_CONFIG
    _result(admin.create_topics([NewTopic(topic + "-dry", 3, 1)], validate_only=True))
    assert topic + "-dry" not in admin.list_topics(timeout=TIMEOUT).topics


def test_create_partitions(broker, admin, topic):
    _result(admin.create_topics([NewTopic(topic, 1, 1)]))
    _result(admin.create_partitions([NewPartitions(topic, 3)]))
    assert sorted(admin.list_topics(timeout=TIMEOUT).topics[topic].partitions) == [0, 1, 2]
    futures = admin.create_partitions([NewPartitions(topic, 2)])
    assert _error_code(futures[topic]) == KafkaError.INVALID_PARTITIONS


def test_describe_and_incremental_alter_configs(broker, admin, topic):
    _result(admin.create_topics([NewTopic(topic, 1, 1)]))
    resource = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "120000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(
                "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
            ),
        ],
    )
    _result(admin.incremental_alter_configs([resource]))
    [configs] = _result(admin.describe_configs([ConfigResource("topic", topic)])).values()
    assert configs["retention.ms"].value == "120000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].value == "delete,compact"
    assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    log = _log(broker, topic)
    assert log.config.retention_ms == 120000 and log.config.compact and log.config.delete

    delete = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)
        ],
    )
    _result(admin.incremental_alter_configs([delete]))
    assert _log(broker, topic).config.retention_ms == 7 * 24 * 3600 * 1000


def test_broker_configs(admin):
    [configs] = _result(admin.describe_configs([ConfigResource("broker", "1")])).values()
    assert configs["node.id"].value == "1" and configs["node.id"].is_read_only
    assert configs["node.id"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["log.retention.hours"].source == ConfigSource.DEFAULT_CONFIG.value
    # A read-only broker config cannot change at runtime.
    resource = ConfigResource(
        "broker",
        "1",
        incremental_configs=[
            ConfigEntry("log.dirs", "/elsewhere", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    [future] = admin.incremental_alter_configs([resource]).values()
    assert _error_code(future) == KafkaError.INVALID_REQUEST
    # A dynamic one can, per broker; its source says so.
    resource = ConfigResource(
        "broker",
        "1",
        incremental_configs=[
            ConfigEntry(
                "log.cleaner.delete.retention.ms",
                "3600000",
                incremental_operation=AlterConfigOpType.SET,
            )
        ],
    )
    _result(admin.incremental_alter_configs([resource]))
    [configs] = _result(admin.describe_configs([ConfigResource("broker", "1")])).values()
    entry = configs["log.cleaner.delete.retention.ms"]
    assert entry.value == "3600000"
    assert entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value


def test_describe_cluster(broker, admin):
    cluster = admin.describe_cluster(request_timeout=TIMEOUT).result(TIMEOUT)
    assert cluster.cluster_id == broker.broker.cluster_id
    assert cluster.controller.id == 1
    assert [(n.id, n.port) for n in cluster.nodes] == [(1, broker.port)]


def test_produce_after_delete_auto_creates(broker, admin, topic):
    _result(admin.create_topics([NewTopic(topic, 3, 1)]))
    _result(admin.delete_topics([topic]))
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    delivered = []
    producer.produce(topic, b"v", on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(TIMEOUT)
    assert delivered == [None]
    # Re-created by auto-creation with the broker's num.partitions (1).
    assert sorted(admin.list_topics(timeout=TIMEOUT).topics[topic].partitions) == [0]


def test_elect_leaders_not_needed(admin, topic):
    from confluent_kafka import ElectionType, TopicPartition

    _result(admin.create_topics([NewTopic(topic, 1, 1)]))
    future = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)])
    results = future.result(TIMEOUT)
    [(partition, error)] = results.items()
    assert (partition.topic, partition.partition) == (topic, 0)
    assert error.code() == KafkaError.ELECTION_NOT_NEEDED
