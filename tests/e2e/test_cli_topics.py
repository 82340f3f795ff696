"""`kfast topics` against a kfast broker, cross-checked with kafka-python's admin client."""

from __future__ import annotations

import io
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

from kfast.cli import build_parser
from kfast.client.cluster import PartitionMetadata, TopicMetadata, topic_id_string
from kfast.tools import topics as topics_tool

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    yield client
    client.close()


@pytest.fixture
def topic(topic) -> str:
    """The shared fixture's name without '_' (which would add a collision warning)."""
    return topic.replace("_", "-")


def kfast_topics(broker, *argv) -> tuple[int, str]:
    args = build_parser().parse_args(
        ["topics", *argv, "--bootstrap-server", broker.bootstrap_servers]
    )
    out = io.StringIO()
    return topics_tool.run(args, out=out), out.getvalue()


def topic_configs(admin, topic) -> dict:
    described = admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all"
    )
    return {name: entry["value"] for name, entry in described["topic"][topic].items()}


def test_create_is_seen_by_kafka_python(broker, admin, topic):
    status, out = kfast_topics(
        broker,
        "create",
        "--topic",
        topic,
        "--partitions",
        "3",
        "--replication-factor",
        "1",
        "--config",
        "retention.ms=1000",
        "--config",
        "cleanup.policy=compact",
    )
    assert (status, out) == (0, f"Created topic {topic}.\n")
    [described] = admin.describe_topics([topic])
    assert [p["partition_index"] for p in described["partitions"]] == [0, 1, 2]
    configs = topic_configs(admin, topic)
    assert configs["retention.ms"] == "1000" and configs["cleanup.policy"] == "compact"


def test_create_warns_about_collision_characters(broker, topic):
    status, out = kfast_topics(broker, "create", "--topic", topic + "_x")
    assert status == 0
    assert out.splitlines() == [
        "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') "
        "could collide. To avoid issues it is best to use either, but not both.",
        f"Created topic {topic}_x.",
    ]


def test_create_existing_fails_unless_if_not_exists(broker, admin, topic):
    admin.create_topics([NewTopic(topic, 1, 1)])
    status, out = kfast_topics(broker, "create", "--topic", topic)
    assert status == 1
    assert out == f"Error while executing topic command : Topic '{topic}' already exists.\n"
    assert kfast_topics(broker, "create", "--topic", topic, "--if-not-exists") == (0, "")


def test_create_rejects_bad_arguments(broker, topic):
    status, out = kfast_topics(broker, "create", "--topic", topic, "--partitions", "0")
    assert status == 1 and "The partitions must be greater than 0" in out
    status, out = kfast_topics(broker, "create", "--topic", topic, "--config", "nonsense")
    assert status == 1 and 'format "key=val"' in out
    status, out = kfast_topics(broker, "create", "--topic", topic, "--replication-factor", "3")
    assert status == 1 and out.startswith("Error while executing topic command : ")


def test_list_matches_kafka_python(broker, admin, topic):
    admin.create_topics([NewTopic(topic, 1, 1), NewTopic(topic + "-b", 1, 1)])
    status, out = kfast_topics(broker, "list")
    assert status == 0
    listed = out.splitlines()
    assert listed == sorted(listed)
    assert set(listed) == set(admin.list_topics())
    assert kfast_topics(broker, "--list", "--topic", topic + ".*") == (0, f"{topic}\n{topic}-b\n")
    assert kfast_topics(broker, "--list", "--topic", topic + "-nothing") == (0, "\n")


def test_describe_prints_kafka_topics_format(broker, admin, topic):
    admin.create_topics([NewTopic(topic, 2, 1, topic_configs={"retention.ms": "5000"})])
    [described] = admin.describe_topics([topic])
    status, out = kfast_topics(broker, "describe", "--topic", topic)
    assert status == 0
    expected_id = topic_id_string(uuid.UUID(str(described["topic_id"])))
    assert out.splitlines() == [
        f"Topic: {topic}\tTopicId: {expected_id}\tPartitionCount: 2\tReplicationFactor: 1\t"
        f"Configs: retention.ms=5000",
        f"\tTopic: {topic}\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: ",
        f"\tTopic: {topic}\tPartition: 1\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: ",
    ]


def test_describe_lines_without_eligible_leader_replicas_say_n_a():
    # What Metadata-only brokers give (no DescribeTopicPartitions): kafka-topics.sh prints N/A.
    topic = TopicMetadata("t", uuid.UUID(int=1), {0: PartitionMetadata(0, -1, 0, [1, 2], [2], [])})
    assert topics_tool.describe_lines(topic, []) == [
        "Topic: t\tTopicId: AAAAAAAAAAAAAAAAAAAAAQ\tPartitionCount: 1\tReplicationFactor: 2\tConfigs: ",
        "\tTopic: t\tPartition: 0\tLeader: none\tReplicas: 1,2\tIsr: 2\tElr: N/A\tLastKnownElr: N/A",
    ]


def test_describe_missing_topic(broker, topic):
    status, out = kfast_topics(broker, "describe", "--topic", topic)
    assert status == 1
    assert (
        out == f"Error while executing topic command : Topic '{topic}' does not exist as expected\n"
    )
    assert kfast_topics(broker, "describe", "--topic", topic, "--if-exists") == (0, "")


def test_alter_adds_partitions_and_changes_configs(broker, admin, topic):
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"retention.ms": "5000"})])
    status, out = kfast_topics(
        broker,
        "alter",
        "--topic",
        topic,
        "--partitions",
        "4",
        "--config",
        "cleanup.policy=compact",
        "--delete-config",
        "retention.ms",
    )
    assert (status, out) == (0, "")
    [described] = admin.describe_topics([topic])
    assert len(described["partitions"]) == 4
    configs = topic_configs(admin, topic)
    assert configs["cleanup.policy"] == "compact"
    assert configs["retention.ms"] == "604800000"  # back to the default
    status, out = kfast_topics(broker, "alter", "--topic", topic, "--partitions", "2")
    assert status == 1 and "Error while executing topic command : " in out


def test_delete(broker, admin, topic):
    admin.create_topics([NewTopic(topic, 1, 1)])
    assert kfast_topics(broker, "--delete", "--topic", topic) == (0, "")
    assert topic not in admin.list_topics()
    status, out = kfast_topics(broker, "delete", "--topic", topic)
    assert status == 1 and "does not exist as expected" in out
    assert kfast_topics(broker, "delete", "--topic", topic, "--if-exists") == (0, "")


def test_exactly_one_action(broker):
    status, out = kfast_topics(broker, "list", "--create")
    assert status == 1 and "exactly one action" in out


def test_the_kfast_command_runs_topics(broker, topic):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kfast",
            "topics",
            "--create",
            "--topic",
            topic,
            "--bootstrap-server",
            broker.bootstrap_servers,
        ],
        capture_output=True,
        text=True,
        cwd=str(REPO),
        timeout=60,
    )
    assert (result.returncode, result.stdout) == (0, f"Created topic {topic}.\n")


def test_describe_reports(broker, admin, topic):
    admin.create_topics(
        [
            NewTopic(topic + "-plain", 2, 1),
            NewTopic(topic + "-strict", 1, 1, topic_configs={"min.insync.replicas": "2"}),
        ]
    )
    pattern = topic + "-.*"

    def lines(*flags):
        status, out = kfast_topics(broker, "describe", "--topic", pattern, *flags)
        assert status == 0
        return [line.split("\tLeader:")[0] for line in out.splitlines()]

    assert lines("--under-replicated-partitions") == []
    assert lines("--unavailable-partitions") == []
    # One broker: every ISR is one replica, below the strict topic's minimum.
    assert lines("--under-min-isr-partitions") == [f"\tTopic: {topic}-strict\tPartition: 0"]
    assert lines("--at-min-isr-partitions") == [
        f"\tTopic: {topic}-plain\tPartition: 0",
        f"\tTopic: {topic}-plain\tPartition: 1",
    ]
    [only] = lines("--topics-with-overrides")
    assert only.startswith(f"Topic: {topic}-strict\t") and only.endswith(
        "Configs: min.insync.replicas=2"
    )
