"""aiokafka's AIOKafkaAdminClient against kfast, driven from asyncio.run."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import InvalidTopicError, TopicAlreadyExistsError

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5


def _admin_run(broker, body):
    async def main():
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        await admin.start()
        try:
            return await asyncio.wait_for(body(admin), 30)
        finally:
            await admin.close()

    return asyncio.run(main())


def test_topics_and_partitions(broker, topic):
    async def body(admin):
        response = await admin.create_topics(
            [NewTopic(topic, 2, 1, topic_configs={"retention.ms": "5000"})]
        )
        # topic_errors: (name, error_code, error_message)
        assert response.topic_errors[0][:2] == (topic, 0)
        response = await admin.create_topics([NewTopic(topic, 2, 1), NewTopic("bad name", 1, 1)])
        assert [entry[:2] for entry in response.topic_errors] == [
            (topic, TopicAlreadyExistsError.errno),
            ("bad name", InvalidTopicError.errno),
        ]
        assert topic in await admin.list_topics()
        await admin.create_partitions({topic: NewPartitions(total_count=3)})
        [description] = await admin.describe_topics([topic])
        partitions = description["partitions"]
        assert sorted(
            p["partition"] if "partition" in p else p["partition_index"] for p in partitions
        ) == [0, 1, 2]
        await admin.delete_topics([topic])
        assert topic not in await admin.list_topics()

    _admin_run(broker, body)


def test_configs(broker, topic):
    async def body(admin):
        await admin.create_topics([NewTopic(topic, 1, 1)])
        await admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, {"segment.bytes": "4000000"})]
        )
        [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        return response, await admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, "1")]
        )

    response, broker_responses = _admin_run(broker, body)
    [resource] = response.resources
    error_code, _, _, name, configs = resource[:5]
    assert (error_code, name) == (0, topic)
    by_name = {c[0]: c for c in configs}
    # (name, value, read_only, config_source, is_sensitive, synonyms)
    assert by_name["segment.bytes"][1] == "4000000"
    assert by_name["segment.bytes"][3] == DYNAMIC_TOPIC_CONFIG
    assert by_name["retention.ms"][3] == DEFAULT_CONFIG
    log = broker.call_soon(broker.broker.log_manager.get_log, topic, 0)
    assert log.config.segment_bytes == 4000000
    [broker_response] = broker_responses
    broker_configs = {c[0]: c for c in broker_response.resources[0][4]}
    assert broker_configs["node.id"][1] == "1"
    assert broker_configs["node.id"][3] == STATIC_BROKER_CONFIG


def test_describe_cluster(broker):
    async def body(admin):
        return await admin.describe_cluster()

    cluster = _admin_run(broker, body)
    assert cluster["controller_id"] == 1
    assert cluster["cluster_id"] == broker.broker.cluster_id
    assert [b["node_id"] if "node_id" in b else b["broker_id"] for b in cluster["brokers"]] == [1]
