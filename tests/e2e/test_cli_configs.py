"""`kfast configs` against a kfast broker: the output of kafka-configs.sh,
cross-checked with kafka-python's admin client."""

from __future__ import annotations

import logging

import pytest
from configs_support import kfast_configs
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    yield client
    client.close()


def test_topic_alter_and_describe(broker, admin, topic):
    admin.create_topics([NewTopic(topic, 1, 1)])
    status, out, err = kfast_configs(
        broker,
        "--entity-type",
        "topics",
        "--entity-name",
        topic,
        "--alter",
        "--add-config",
        "retention.ms=1000,cleanup.policy=[compact,delete]",
    )
    assert (status, out, err) == (0, f"Completed updating config for topic {topic}.\n", "")
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    values = {name: entry["value"] for name, entry in described["topic"][topic].items()}
    assert values["retention.ms"] == "1000" and values["cleanup.policy"] == "compact,delete"

    status, out, _ = kfast_configs(broker, "--topic", topic, "--describe")
    assert status == 0
    assert out == (
        f"Dynamic configs for topic {topic} are:\n"
        "  cleanup.policy=compact,delete sensitive=false "
        "synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, "
        "DEFAULT_CONFIG:log.cleanup.policy=delete}\n"
        "  retention.ms=1000 sensitive=false "
        "synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, "
        "DEFAULT_CONFIG:log.retention.hours=168}\n"
    )

    status, out, _ = kfast_configs(
        broker,
        "--entity-type",
        "topics",
        "--entity-name",
        topic,
        "--alter",
        "--delete-config",
        "retention.ms",
    )
    assert status == 0
    status, out, _ = kfast_configs(broker, "--topic", topic, "--describe")
    assert "retention.ms" not in out and "cleanup.policy=compact,delete" in out

    # Deleting a config that is not set fails as kafka-configs.sh does.
    status, out, err = kfast_configs(
        broker, "--topic", topic, "--alter", "--delete-config", "segment.ms"
    )
    assert (status, out, err) == (1, "", "Invalid config(s): segment.ms\n")


def test_broker_default_alter_and_describe(broker):
    status, out, _ = kfast_configs(
        broker,
        "--entity-type",
        "brokers",
        "--entity-default",
        "--alter",
        "--add-config",
        "log.cleaner.backoff.ms=16000",
    )
    assert (status, out) == (0, "Completed updating default config for brokers in the cluster.\n")
    status, out, _ = kfast_configs(
        broker, "--entity-type", "brokers", "--entity-default", "--describe"
    )
    assert status == 0
    assert out.startswith(
        "Default configs for brokers in the cluster are:\n"
        "  log.cleaner.backoff.ms=16000 sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.backoff.ms=16000"
    )
    status, out, _ = kfast_configs(
        broker, "--broker-defaults", "--alter", "--delete-config", "log.cleaner.backoff.ms"
    )
    assert status == 0
    _, out, _ = kfast_configs(broker, "--entity-type", "brokers", "--describe")
    # Every broker, then the cluster-wide default, each with no dynamic config left.
    assert out == (
        "Dynamic configs for broker 1 are:\nDefault configs for brokers in the cluster are:\n"
    )


def test_broker_logger_level(broker):
    name = "kfast.test.configs.cli"
    logging.getLogger(name)
    status, out, _ = kfast_configs(
        broker,
        "--entity-type",
        "broker-loggers",
        "--entity-name",
        "1",
        "--alter",
        "--add-config",
        f"{name}=DEBUG",
    )
    assert (status, out) == (0, "Completed updating config for broker-logger 1.\n")
    assert logging.getLogger(name).level == logging.DEBUG
    _, out, _ = kfast_configs(broker, "--broker-logger", "1", "--describe")
    assert out.startswith("Dynamic configs for broker-logger 1 are:\n")
    assert f"  {name}=DEBUG sensitive=false synonyms={{}}\n" in out
    status, _, err = kfast_configs(
        broker, "--broker-logger", "1", "--alter", "--add-config", "no.such.logger.anywhere=INFO"
    )
    assert (status, err) == (1, "Invalid broker logger(s): no.such.logger.anywhere\n")


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--entity-type", "topics", "--describe", "--alter"],
            "Command must include exactly one action: --describe, --alter",
        ),
        (
            ["--entity-type", "topics", "--entity-type", "brokers", "--describe"],
            "Only 'users' and 'clients' entity types may be specified together",
        ),
        (
            ["--entity-type", "brokers", "--entity-name", "x", "--describe"],
            "The entity name for brokers must be a valid integer broker id, but it is: x",
        ),
        (
            ["--entity-type", "broker-loggers", "--describe"],
            "An entity name must be specified with --describe of broker-loggers",
        ),
        (
            [
                "--entity-type",
                "clients",
                "--entity-name",
                "c",
                "--alter",
                "--add-config",
                "retention.ms=1",
            ],
            "Only quota configs can be added for 'clients' using --bootstrap-server. "
            "Unexpected config names: ['retention.ms']",
        ),
    ],
)
def test_usage_errors(broker, argv, message):
    status, out, err = kfast_configs(broker, *argv)
    assert (status, out, err) == (1, "", message + "\n")
