"""kafka-python's KafkaAdminClient against kfast: topics, partitions, configs,
cluster; changes take effect on the broker's logs."""

from __future__ import annotations

import pytest
from kafka import KafkaProducer
from kafka.admin import (
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
    NewPartitions,
    NewTopic,
)
from kafka.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    yield client
    client.close()


def _log(broker, topic, partition=0):
    return broker.call_soon(broker.broker.log_manager.get_log, topic, partition)


def test_create_list_describe_and_delete(broker, admin, topic):
    response = admin.create_topics([NewTopic(topic, 3, 1, topic_configs={"retention.ms": "1000"})])
    [result] = (
        response.to_object()["topics"] if hasattr(response, "to_object") else response["topics"]
    )
    assert result["error_code"] == 0 and result["num_partitions"] == 3
    assert result["configs"]["retention.ms"]["value"] == "1000"
    assert result["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert topic in admin.list_topics()
    [described] = admin.describe_topics([topic])
    assert [p["partition_index"] for p in described["partitions"]] == [0, 1, 2]
    assert all(p["leader_id"] == 1 and p["replica_nodes"] == [1] for p in described["partitions"])
    assert _log(broker, topic, 2) is not None
    assert _log(broker, topic).config.retention_ms == 1000

    admin.delete_topics([topic])
    assert topic not in admin.list_topics()
    assert _log(broker, topic) is None


def test_create_errors(admin, topic):
    admin.create_topics([NewTopic(topic, 1, 1)])
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic(topic, 1, 1)])
    with pytest.raises(InvalidTopicError):
        admin.create_topics([NewTopic("bad/name", 1, 1)])
    with pytest.raises(InvalidReplicationFactorError):
        admin.create_topics([NewTopic(topic + "-rf", 1, 2)])
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({topic: NewPartitions(1)})
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics([topic + "-missing"])


def test_validate_only_creates_nothing(admin, topic):
    admin.create_topics([NewTopic(topic, 2, 1)], validate_only=True)
    assert topic not in admin.list_topics()


def test_create_partitions(broker, admin, topic):
    admin.create_topics([NewTopic(topic, 1, 1)])
    admin.create_partitions({topic: NewPartitions(4)})
    [described] = admin.describe_topics([topic])
    assert len(described["partitions"]) == 4
    assert _log(broker, topic, 3) is not None


def test_describe_configs_with_sources(admin, topic):
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"cleanup.policy": "compact"})])
    configs = admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all"
    )["topic"][topic]
    assert configs["cleanup.policy"]["value"] == "compact"
    assert configs["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["retention.ms"]["value"] == "604800000"
    assert configs["retention.ms"]["config_source"] == "DEFAULT_CONFIG"
    broker_configs = admin.describe_configs(
        [ConfigResource(ConfigResourceType.BROKER, "1")], config_filter="all"
    )["broker"]["1"]
    assert broker_configs["node.id"]["value"] == "1"
    assert broker_configs["node.id"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert broker_configs["node.id"]["read_only"] is True
    assert broker_configs["log.retention.ms"]["read_only"] is False


def test_alter_configs_take_effect(broker, admin, topic):
    admin.create_topics([NewTopic(topic, 1, 1)])
    admin.alter_configs(
        [
            ConfigResource(
                ConfigResourceType.TOPIC,
                topic,
                configs={"segment.bytes": "2000000", "retention.ms": "60000"},
            )
        ]
    )
    configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    assert configs["topic"][topic]["segment.bytes"]["value"] == "2000000"
    log = _log(broker, topic)
    assert log.config.segment_bytes == 2000000 and log.config.retention_ms == 60000
    # The log applies it: records are still appended through the new config.
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    producer.send(topic, b"x").get(timeout=15)
    producer.close()


def test_describe_cluster(broker, admin):
    cluster = admin.describe_cluster()
    assert cluster["controller_id"] == 1
    assert cluster["cluster_id"] == broker.broker.cluster_id
    assert [(b["broker_id"], b["port"]) for b in cluster["brokers"]] == [(1, broker.port)]


def test_list_config_resources(admin, topic):
    admin.create_topics([NewTopic(topic, 1, 1)])
    everything = admin.list_config_resources()
    assert topic in everything["topic"]
    assert everything["broker"] == ["1"] and everything["broker_logger"] == ["1"]
    assert "group" not in everything and "client_metrics" not in everything
    assert admin.list_config_resources(["BROKER"]) == {"broker": ["1"]}
    topics = admin.list_config_resources(["TOPIC"])
    assert set(topics) == {"topic"} and topic in topics["topic"]
