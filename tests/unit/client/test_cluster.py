"""Cluster: bootstrap parsing, topic id text, metadata cache and refresh, connections."""

from __future__ import annotations

import time
import uuid

import pytest

from kfast.client.admin import KafkaAdmin, NewTopic
from kfast.client.cluster import Cluster, parse_bootstrap_servers, parse_topic_id, topic_id_string
from kfast.protocol import errors


def test_parse_bootstrap_servers():
    assert parse_bootstrap_servers("a:1, b:2,") == [("a", 1), ("b", 2)]
    assert parse_bootstrap_servers(["[::1]:9093", "host"]) == [("::1", 9093), ("host", 9092)]
    with pytest.raises(ValueError):
        parse_bootstrap_servers("")


def test_topic_id_text_is_kafkas_base64url_form():
    assert topic_id_string(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    some = uuid.UUID("d6b2ed0f-a48c-4693-b5ea-50e1c83f6498")
    text = topic_id_string(some)
    assert len(text) == 22 and "=" not in text and "+" not in text and "/" not in text
    assert parse_topic_id(text) == some


def test_metadata_cache_connections_and_unknown_topics(broker, run, request):
    name = f"cluster-{request.node.callspec.id}"

    async def scenario():
        async with Cluster(
            broker.bootstrap_servers, metadata_timeout=0.3, retry_backoff=0.01
        ) as cluster:
            assert list(cluster.brokers) == [1] and cluster.controller_id == 1
            assert cluster.cluster_id
            async with KafkaAdmin(cluster=cluster) as admin:
                await admin.create_topics([NewTopic(name, 3, 1)])
            assert await cluster.partitions_for(name) == [0, 1, 2]
            assert await cluster.leader_for(name, 2) == 1
            first = await cluster.connection(1)
            assert await cluster.connection(1) is first  # reused
            await first.close()
            assert await cluster.connection(1) is not first  # reopened after it died
            started = time.monotonic()
            with pytest.raises(errors.UnknownTopicOrPartitionException):
                await cluster.topic(name + "-missing")  # retried until metadata_timeout
            assert time.monotonic() - started >= 0.3
            with pytest.raises(errors.UnknownTopicOrPartitionException):
                await cluster.leader_for(name, 7)

    run(scenario())


def test_no_reachable_bootstrap_server(run):
    async def scenario():
        cluster = Cluster("127.0.0.1:1", request_timeout=2)
        with pytest.raises(errors.NetworkException):
            await cluster.start()
        await cluster.close()

    run(scenario())
