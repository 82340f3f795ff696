"""The Kafka 4.2 broker config catalogue: update modes as Kafka's
DynamicBrokerConfig gives them, listener-prefixed names read as its
ListenerConfigRegex, and kfast's own rows all catalogued."""
from __future__ import annotations

import pytest

from kfast.config import SERVER_CONFIGS
from kfast.controller.configuration_control import DYNAMIC_BROKER_CONFIGS
from kfast.kafka_broker_configs import (
    CLUSTER_WIDE, KAFKA_BROKER_CONFIGS, PER_BROKER, READ_ONLY, listener_base_name, update_mode,
)


def test_every_kafka_name_kfast_defines_is_catalogued():
    own = {name for name in SERVER_CONFIGS if not name.startswith("kfast.") and name != "cluster.id"}
    assert own <= set(KAFKA_BROKER_CONFIGS)


def test_kfast_accepts_only_configs_kafka_updates_dynamically():
    assert all(KAFKA_BROKER_CONFIGS[name].mode != READ_ONLY for name in DYNAMIC_BROKER_CONFIGS)


@pytest.mark.parametrize("name, mode", [
    ("log.retention.ms", CLUSTER_WIDE), ("log.retention.hours", READ_ONLY),
    ("num.io.threads", CLUSTER_WIDE), ("max.connections", CLUSTER_WIDE),
    ("sasl.kerberos.min.time.before.relogin", PER_BROKER), ("listeners", PER_BROKER),
    ("ssl.keystore.location", PER_BROKER), ("node.id", READ_ONLY), ("process.roles", READ_ONLY),
    ("listener.name.external.max.connections", CLUSTER_WIDE),
    ("listener.name.external.ssl.keystore.location", PER_BROKER),
    ("listener.name.external.scram-sha-256.sasl.jaas.config", PER_BROKER),
    ("listener.name.external.log.dirs", READ_ONLY),
    ("zookeeper.connect", None), ("listener.name.external.no.such.config", None),
])
def test_update_modes(name, mode):
    assert update_mode(name) == mode


def test_listener_base_name():
    assert listener_base_name("listener.name.a.plain.sasl.jaas.config") == "sasl.jaas.config"
    assert listener_base_name("listener.name.a.ssl.key.password") == "ssl.key.password"
    assert listener_base_name("listener.name.a") is None
    assert listener_base_name("log.dirs") is None
