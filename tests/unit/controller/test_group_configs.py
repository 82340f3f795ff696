"""GROUP config resources (type 32): Kafka's GroupConfig names, validation
against the broker's bounds, replay, description, snapshots, and the
coordinator giving a KIP-848 group its own session timeout and heartbeat."""

from __future__ import annotations

import uuid

import pytest

from kfast.config import GROUP_CONFIGS, KafkaConfig
from kfast.controller.config_describer import ConfigDescriber
from kfast.controller.configuration_control import OP_DELETE, OP_SET, ConfigurationControlManager
from kfast.controller.group_config import effective_group_config
from kfast.controller.metadata.image import MetadataImage
from kfast.controller.snapshot import image_records
from kfast.protocol import errors
from kfast.protocol.constants import (
    CONFIG_RESOURCE_GROUP,
    SOURCE_DEFAULT_CONFIG,
    SOURCE_GROUP_CONFIG,
)

from ..coordinator.harness import Harness as CoordinatorHarness

GROUP = CONFIG_RESOURCE_GROUP
BROKER_CONFIG = KafkaConfig({"node.id": "1", "log.dirs": "/tmp/unused"})


def manager():
    return ConfigurationControlManager(
        lambda name: False, lambda broker_id: broker_id == 1, BROKER_CONFIG
    )


def alter(m, name, *ops):
    result = m.incremental_alter_configs([(GROUP, name, list(ops))])
    for record in result.records:
        m.replay(record)
    return result.response[0]


def test_kafka_group_config_names():
    assert set(GROUP_CONFIGS) == {
        "consumer.session.timeout.ms",
        "consumer.heartbeat.interval.ms",
        "share.session.timeout.ms",
        "share.heartbeat.interval.ms",
        "share.record.lock.duration.ms",
        "share.delivery.count.limit",
        "share.partition.max.record.locks",
        "share.auto.offset.reset",
        "share.isolation.level",
        "share.renew.acknowledge.enable",
        "streams.session.timeout.ms",
        "streams.heartbeat.interval.ms",
        "streams.num.standby.replicas",
        "streams.initial.rebalance.delay.ms",
    }


def test_a_group_takes_overrides_and_loses_them_on_delete():
    m = manager()
    assert (
        alter(
            m,
            "g",
            ("consumer.session.timeout.ms", OP_SET, "50000"),
            ("share.auto.offset.reset", OP_SET, "by_duration:PT1H"),
        )
        is None
    )
    assert m.get(GROUP, "g") == {
        "consumer.session.timeout.ms": "50000",
        "share.auto.offset.reset": "by_duration:PT1H",
    }
    values = effective_group_config(BROKER_CONFIG, m.get(GROUP, "g"))
    assert values["consumer.session.timeout.ms"] == 50000
    assert values["consumer.heartbeat.interval.ms"] == 5000  # the broker's default
    assert alter(m, "g", ("consumer.session.timeout.ms", OP_DELETE, None)) is None
    assert m.get(GROUP, "g") == {"share.auto.offset.reset": "by_duration:PT1H"}


@pytest.mark.parametrize(
    "ops, message",
    [
        ([("no.such.config", OP_SET, "1")], "Unknown group config name: no.such.config"),
        ([("consumer.session.timeout.ms", OP_SET, "ten")], "consumer.session.timeout.ms"),
        (
            [("consumer.session.timeout.ms", OP_SET, "30000")],
            "consumer.session.timeout.ms must be greater than or equal to "
            "group.consumer.min.session.timeout.ms",
        ),
        (
            [("consumer.session.timeout.ms", OP_SET, "70000")],
            "consumer.session.timeout.ms must be less than or equal to "
            "group.consumer.max.session.timeout.ms",
        ),
        (
            [("consumer.heartbeat.interval.ms", OP_SET, "4000")],
            "consumer.heartbeat.interval.ms must be greater than or equal to "
            "group.consumer.min.heartbeat.interval.ms",
        ),
        (
            [("share.session.timeout.ms", OP_SET, "5000")],
            "share.session.timeout.ms must be greater than share.heartbeat.interval.ms",
        ),
        ([("share.record.lock.duration.ms", OP_SET, "999")], "share.record.lock.duration.ms"),
        ([("share.isolation.level", OP_SET, "dirty")], "share.isolation.level"),
        ([("share.auto.offset.reset", OP_SET, "sometimes")], "share.auto.offset.reset"),
    ],
)
def test_invalid_group_configs_are_refused_with_invalid_config(ops, message):
    m = manager()
    error = alter(m, "g", *ops)
    assert isinstance(error, errors.InvalidConfigurationException)
    assert message in str(error)
    assert m.get(GROUP, "g") == {}


def test_the_default_group_resource_is_refused():
    error = alter(manager(), "", ("consumer.session.timeout.ms", OP_SET, "50000"))
    assert isinstance(error, errors.InvalidRequestException)


def test_legacy_alter_refuses_null_values():
    result = manager().legacy_alter_configs([(GROUP, "g", {"share.isolation.level": None})])
    assert isinstance(result.response[0], errors.InvalidRequestException)


def test_describe_a_group_sources_and_read_only():
    described = {
        c.name: c
        for c in ConfigDescriber(BROKER_CONFIG, 1).describe_group(
            {"consumer.heartbeat.interval.ms": "6000"}, include_synonyms=True
        )
    }
    assert set(described) == set(GROUP_CONFIGS)
    overridden = described["consumer.heartbeat.interval.ms"]
    assert (overridden.value, overridden.source, overridden.read_only) == (
        "6000",
        SOURCE_GROUP_CONFIG,
        False,
    )
    default = described["consumer.session.timeout.ms"]
    assert (default.value, default.source) == ("45000", SOURCE_DEFAULT_CONFIG)
    assert described["share.isolation.level"].value == "read_uncommitted"


def test_group_configs_are_in_snapshots():
    image = MetadataImage(
        cluster_id="c", group_configs={"g": {"consumer.session.timeout.ms": "50000"}}
    )
    records = [r for r in image_records(image, 0) if getattr(r, "resource_type", None) == GROUP]
    assert [(r.resource_name, r.name, r.value) for r in records] == [
        ("g", "consumer.session.timeout.ms", "50000")
    ]


def test_the_coordinator_gives_a_group_its_own_heartbeat_interval():
    h = CoordinatorHarness()
    topics = {"t": (uuid.UUID(int=7), 2)}
    overrides = {"cg": {"consumer.heartbeat.interval.ms": "7000"}}
    h.coordinator.group_config_overrides = lambda group_id: overrides.get(group_id, {})

    def beat(group):
        return h.coordinator.consumer_group_heartbeat(
            group, "", 0, None, None, 5000, ["t"], None, None, "client", "/h", topics
        )

    assert beat("cg")["heartbeat_interval_ms"] == 7000
    assert beat("other")["heartbeat_interval_ms"] == 5000
