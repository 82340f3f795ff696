"""The replication throttle configs: the dynamic-only broker rates (set per
broker or cluster-wide, validated, described only where set, never in
server.properties) and the topic lists of throttled replicas (Kafka's
ThrottledReplicaListValidator)."""

from __future__ import annotations

import pytest

from kfast.config import LONG_MAX, ConfigException, KafkaConfig, LogConfig
from kfast.controller.config_describer import (
    SOURCE_DYNAMIC_BROKER_CONFIG,
    SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
    ConfigDescriber,
    dynamic_broker_overrides,
)
from kfast.controller.configuration_control import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    ConfigurationControlManager,
)
from kfast.controller.metadata.image import MetadataImage
from kfast.protocol import errors

TOPIC, BROKER = 2, 4
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
STATIC = {"node.id": 1, "log.dirs": "/tmp/x"}


def manager() -> ConfigurationControlManager:
    return ConfigurationControlManager(
        lambda name: name == "orders", lambda broker: broker in (1, 2)
    )


def alter(control, *changes):
    result = control.incremental_alter_configs(list(changes))
    for record in result.records:
        control.replay(record)
    return result.response


def test_rates_default_to_unthrottled_and_the_window_to_kafkas():
    config = KafkaConfig(STATIC)
    assert config[LEADER_RATE] == config[FOLLOWER_RATE] == LONG_MAX
    assert config["replication.quota.window.num"] == 11
    assert config["replication.quota.window.size.seconds"] == 1


def test_rates_cannot_be_set_in_server_properties():
    with pytest.raises(ConfigException, match=LEADER_RATE):
        KafkaConfig({**STATIC, LEADER_RATE: "1000"})


def test_the_dynamic_rates_make_the_current_config():
    image = MetadataImage(
        cluster_id="c",
        broker_configs={"": {LEADER_RATE: "500", FOLLOWER_RATE: "600"}, "1": {LEADER_RATE: "700"}},
    )
    current = KafkaConfig(STATIC).with_dynamic(dynamic_broker_overrides(image, 1))
    assert (current[LEADER_RATE], current[FOLLOWER_RATE]) == (700, 600)


def test_rates_are_set_per_broker_or_cluster_wide_and_validated():
    control = manager()
    assert alter(
        control, (BROKER, "1", [(LEADER_RATE, OP_SET, "1000"), (FOLLOWER_RATE, OP_SET, "2000")])
    ) == [None]
    assert alter(control, (BROKER, "", [(LEADER_RATE, OP_SET, "5")])) == [None]
    assert control.get(BROKER, "1") == {LEADER_RATE: "1000", FOLLOWER_RATE: "2000"}
    [negative] = alter(control, (BROKER, "1", [(LEADER_RATE, OP_SET, "-1")]))
    assert isinstance(negative, errors.InvalidConfigurationException)
    [not_a_number] = alter(control, (BROKER, "1", [(FOLLOWER_RATE, OP_SET, "fast")]))
    assert isinstance(not_a_number, errors.InvalidConfigurationException)
    [not_a_list] = alter(control, (BROKER, "1", [(LEADER_RATE, OP_APPEND, "1")]))
    assert isinstance(not_a_list, errors.InvalidConfigurationException)
    assert alter(
        control, (BROKER, "1", [(LEADER_RATE, OP_DELETE, None), (FOLLOWER_RATE, OP_DELETE, None)])
    ) == [None]
    assert control.get(BROKER, "1") == {}


def test_rates_are_described_only_where_set_with_their_source():
    describer = ConfigDescriber(KafkaConfig(STATIC), 1)
    unset = {c.name for c in describer.describe_broker(MetadataImage(cluster_id="c"), "1")}
    assert LEADER_RATE not in unset and "replication.quota.window.num" in unset
    image = MetadataImage(
        cluster_id="c",
        broker_configs={"": {LEADER_RATE: "500"}, "1": {LEADER_RATE: "700", FOLLOWER_RATE: "800"}},
    )
    described = {c.name: c for c in describer.describe_broker(image, "1", include_synonyms=True)}
    leader = described[LEADER_RATE]
    assert (leader.value, leader.source, leader.read_only) == (
        "700",
        SOURCE_DYNAMIC_BROKER_CONFIG,
        True,
    )
    assert leader.synonyms == [
        (LEADER_RATE, "700", SOURCE_DYNAMIC_BROKER_CONFIG),
        (LEADER_RATE, "500", SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG),
    ]
    assert described[FOLLOWER_RATE].value == "800"
    cluster = {c.name: c for c in describer.describe_broker(image, "")}
    assert (cluster[LEADER_RATE].value, cluster[LEADER_RATE].source) == (
        "500",
        SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    assert FOLLOWER_RATE not in cluster
    names = [c.name for c in describer.describe_broker(image, "1")]
    assert names == sorted(names)


@pytest.mark.parametrize("value", ["0:1,0:2,1:3", "*", "", " 0:1 , 1:2 ", "0:1,"])
def test_throttled_replica_lists_accept_kafkas_forms(value):
    assert LogConfig.validate({LEADER_REPLICAS: value, FOLLOWER_REPLICAS: value})


@pytest.mark.parametrize("value", ["foo", "0:1,*", "0-1", "0:", ":1", "a:1", "**"])
def test_throttled_replica_lists_reject_other_forms(value):
    with pytest.raises(ConfigException, match="must be the literal '\\*' or a list of replicas"):
        LogConfig.validate({FOLLOWER_REPLICAS: value})


def test_a_bad_throttled_replica_list_is_refused_by_the_controller():
    control = manager()
    [error] = alter(control, (TOPIC, "orders", [(LEADER_REPLICAS, OP_SET, "0:x")]))
    assert isinstance(error, errors.InvalidConfigurationException)
    assert alter(control, (TOPIC, "orders", [(LEADER_REPLICAS, OP_SET, "0:1,0:2")])) == [None]
    assert alter(control, (TOPIC, "orders", [(LEADER_REPLICAS, OP_APPEND, "1:2")])) == [None]
    assert control.get(TOPIC, "orders") == {LEADER_REPLICAS: "0:1,0:2,1:2"}
