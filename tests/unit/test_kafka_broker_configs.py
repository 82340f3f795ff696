"""The Kafka 4.2 broker config catalogue: update modes as Kafka's
DynamicBrokerConfig gives them, listener-prefixed names read as its
ListenerConfigRegex, and kfast's own rows all catalogued."""

from __future__ import annotations

import pytest

from kfast.config import SERVER_CONFIGS
from kfast.controller.configuration_control import DYNAMIC_BROKER_CONFIGS
from kfast.kafka_broker_configs import (
    CLUSTER_WIDE,
    KAFKA_BROKER_CONFIGS,
    PER_BROKER,
    READ_ONLY,
    listener_base_name,
    update_mode,
)


def test_every_kafka_name_kfast_defines_is_catalogued():
    # kfast's own properties, the StandardAuthorizer's (read from the
    # originals, not KafkaConfig's), two that Kafka 4.0 removed, and Kafka's
    # internal unstable.api.versions.enable (defineInternal: never described).
    not_kafka_4_2 = {
        "cluster.id",
        "kfast.metrics.host",
        "kfast.metrics.port",
        "kfast.log.dirs.min.free.bytes",
        "kfast.log.dirs.min.free.percent",
        "kfast.log.dirs.free.space.check.interval.ms",
        "kfast.log.segment.fallocate.step.bytes",
        "allow.everyone.if.no.acl.found",
        "super.users",
        "leader.imbalance.per.broker.percentage",
        "reserved.broker.max.id",
        "unstable.api.versions.enable",
    }
    assert set(SERVER_CONFIGS) - set(KAFKA_BROKER_CONFIGS) <= not_kafka_4_2


def test_no_removed_or_later_config():
    for name in (
        "zookeeper.connect",
        "inter.broker.protocol.version",
        "log.message.format.version",
        "password.encoder.secret",
        "cordoned.log.dirs",
        "group.coordinator.background.threads",
        "log.segment.ms",
        "internal.metadata.max.batch.size.in.bytes",
    ):
        assert name not in KAFKA_BROKER_CONFIGS, name
    assert KAFKA_BROKER_CONFIGS["group.streams.session.timeout.ms"].default == "45000"


def test_kfast_accepts_only_configs_kafka_updates_dynamically():
    assert all(KAFKA_BROKER_CONFIGS[name].mode != READ_ONLY for name in DYNAMIC_BROKER_CONFIGS)


@pytest.mark.parametrize(
    "name, mode",
    [
        ("log.retention.ms", CLUSTER_WIDE),
        ("log.retention.hours", READ_ONLY),
        ("num.io.threads", CLUSTER_WIDE),
        ("max.connections", CLUSTER_WIDE),
        ("sasl.kerberos.min.time.before.relogin", PER_BROKER),
        ("listeners", PER_BROKER),
        ("ssl.keystore.location", PER_BROKER),
        ("node.id", READ_ONLY),
        ("process.roles", READ_ONLY),
        ("listener.name.external.max.connections", CLUSTER_WIDE),
        ("listener.name.external.ssl.keystore.location", PER_BROKER),
        ("listener.name.external.scram-sha-256.sasl.jaas.config", PER_BROKER),
        ("listener.name.external.log.dirs", READ_ONLY),
        ("zookeeper.connect", None),
        ("listener.name.external.no.such.config", None),
    ],
)
def test_update_modes(name, mode):
    assert update_mode(name) == mode


def test_listener_base_name():
    assert listener_base_name("listener.name.a.plain.sasl.jaas.config") == "sasl.jaas.config"
    assert listener_base_name("listener.name.a.ssl.key.password") == "ssl.key.password"
    assert listener_base_name("listener.name.a") is None
    assert listener_base_name("log.dirs") is None
