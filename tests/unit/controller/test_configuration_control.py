"""ConfigurationControlManager: incremental and legacy alters, validation, replay."""

from __future__ import annotations

import pytest

from kfast.controller.configuration_control import (
    DYNAMIC_BROKER_CONFIGS,
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    ConfigurationControlManager,
)
from kfast.controller.metadata.records import ConfigRecord
from kfast.protocol import errors

TOPIC, BROKER = 2, 4


class Harness:
    def __init__(self):
        self.manager = ConfigurationControlManager(
            lambda name: name in ("orders", "logs"), lambda broker_id: broker_id == 1
        )
        self.log = []

    def apply(self, result):
        for record in result.records:
            self.manager.replay(record)
        self.log += result.records
        return result.response

    def incremental(self, *changes):
        return self.apply(self.manager.incremental_alter_configs(list(changes)))


def test_set_delete_and_records():
    h = Harness()
    assert h.incremental(
        (TOPIC, "orders", [("retention.ms", OP_SET, "1000"), ("segment.bytes", OP_SET, "2000000")])
    ) == [None]
    assert h.manager.get(TOPIC, "orders") == {"retention.ms": "1000", "segment.bytes": "2000000"}
    assert h.incremental((TOPIC, "orders", [("retention.ms", OP_DELETE, None)])) == [None]
    assert h.manager.get(TOPIC, "orders") == {"segment.bytes": "2000000"}
    assert h.log[-1] == ConfigRecord(
        resource_type=TOPIC, resource_name="orders", name="retention.ms", value=None
    )
    # Setting the same value again writes nothing.
    assert (
        h.manager.incremental_alter_configs(
            [(TOPIC, "orders", [("segment.bytes", OP_SET, "2000000")])]
        ).records
        == []
    )


def test_append_and_subtract_on_lists():
    h = Harness()
    h.incremental((TOPIC, "orders", [("cleanup.policy", OP_APPEND, "compact")]))
    # Appending starts from the default ("delete").
    assert h.manager.get(TOPIC, "orders")["cleanup.policy"] == "delete,compact"
    h.incremental((TOPIC, "orders", [("cleanup.policy", OP_SUBTRACT, "delete")]))
    assert h.manager.get(TOPIC, "orders")["cleanup.policy"] == "compact"
    [error] = h.incremental((TOPIC, "orders", [("retention.ms", OP_APPEND, "1")]))
    assert isinstance(error, errors.InvalidConfigurationException)


def test_legacy_alter_replaces_the_whole_set():
    h = Harness()
    h.incremental((TOPIC, "orders", [("retention.ms", OP_SET, "1000")]))
    assert h.apply(
        h.manager.legacy_alter_configs([(TOPIC, "orders", {"segment.bytes": "2000000"})])
    ) == [None]
    assert h.manager.get(TOPIC, "orders") == {"segment.bytes": "2000000"}


@pytest.mark.parametrize(
    "change, error",
    [
        ((TOPIC, "nope", [("retention.ms", OP_SET, "1")]), errors.UnknownTopicOrPartitionException),
        ((TOPIC, "orders", [("no.such", OP_SET, "1")]), errors.InvalidConfigurationException),
        ((TOPIC, "orders", [("retention.ms", OP_SET, "x")]), errors.InvalidConfigurationException),
        (
            (TOPIC, "orders", [("segment.bytes", OP_SET, "10")]),
            errors.InvalidConfigurationException,
        ),
        ((TOPIC, "orders", [("retention.ms", 9, "1")]), errors.InvalidRequestException),
        ((BROKER, "1", [("log.dirs", OP_SET, "/x")]), errors.InvalidRequestException),
        (
            (BROKER, "1", [("no.such.broker.config", OP_SET, "1")]),
            errors.InvalidConfigurationException,
        ),
        (
            (BROKER, "1", [("log.retention.ms", OP_SET, "abc")]),
            errors.InvalidConfigurationException,
        ),
        ((BROKER, "2", [("log.retention.ms", OP_SET, "1")]), errors.BrokerIdNotRegisteredException),
        ((BROKER, "x", [("log.retention.ms", OP_SET, "1")]), errors.InvalidRequestException),
        ((99, "x", [("a", OP_SET, "1")]), errors.InvalidRequestException),
    ],
)
def test_errors_write_nothing(change, error):
    h = Harness()
    result = h.manager.incremental_alter_configs([change])
    assert isinstance(result.response[0], error)
    assert result.records == []


def test_one_bad_resource_does_not_block_the_others():
    h = Harness()
    results = h.incremental(
        (TOPIC, "orders", [("retention.ms", OP_SET, "x")]),
        (TOPIC, "logs", [("retention.ms", OP_SET, "5")]),
    )
    assert isinstance(results[0], errors.InvalidConfigurationException) and results[1] is None
    assert h.manager.get(TOPIC, "logs") == {"retention.ms": "5"}
    assert h.manager.get(TOPIC, "orders") == {}


def test_duplicate_resources_are_rejected():
    h = Harness()
    results = h.incremental((TOPIC, "orders", []), (TOPIC, "orders", []))
    assert all(isinstance(e, errors.InvalidRequestException) for e in results)


def test_broker_dynamic_configs_per_broker_and_cluster_default():
    h = Harness()
    assert "log.retention.ms" in DYNAMIC_BROKER_CONFIGS and "log.dirs" not in DYNAMIC_BROKER_CONFIGS
    assert h.incremental(
        (BROKER, "1", [("log.retention.ms", OP_SET, "1000")]),
        (BROKER, "", [("log.segment.bytes", OP_SET, "2000000")]),
    ) == [None, None]
    assert h.manager.get(BROKER, "1") == {"log.retention.ms": "1000"}
    assert h.manager.get(BROKER, "") == {"log.segment.bytes": "2000000"}


def test_deleting_topic_configs():
    h = Harness()
    h.incremental((TOPIC, "orders", [("retention.ms", OP_SET, "1")]))
    assert h.manager.delete_topic_configs("orders") is True
    assert h.manager.get(TOPIC, "orders") == {}


def test_append_to_a_list_config_whose_default_is_text():
    """A LIST config known only from Kafka's catalogue has its default as
    comma-separated text; APPEND adds to its items (mypy found the text
    split into characters)."""
    manager = Harness().manager
    updated: dict[str, str | None] = {}
    manager._apply_op(BROKER, updated, "metric.reporters", OP_APPEND, "x.Reporter")
    assert updated == {"metric.reporters": "org.apache.kafka.common.metrics.JmxReporter,x.Reporter"}
