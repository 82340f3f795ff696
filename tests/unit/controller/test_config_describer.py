"""DescribeConfigs values and sources over static config and image overrides."""

from __future__ import annotations

import logging

from kfast.config import KafkaConfig
from kfast.controller.config_describer import (
    SOURCE_DEFAULT_CONFIG,
    SOURCE_DYNAMIC_BROKER_CONFIG,
    SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
    SOURCE_DYNAMIC_TOPIC_CONFIG,
    SOURCE_STATIC_BROKER_CONFIG,
    ConfigDescriber,
    dynamic_broker_overrides,
    kafka_level_name,
)
from kfast.controller.metadata.image import MetadataImage


def describer(**props) -> ConfigDescriber:
    return ConfigDescriber(KafkaConfig({"node.id": 1, "log.dirs": "/tmp/x", **props}), 1)


def image(broker_configs=None) -> MetadataImage:
    return MetadataImage(cluster_id="c", broker_configs=broker_configs or {})


def by_name(configs):
    return {c.name: c for c in configs}


def test_topic_defaults_and_overrides():
    configs = by_name(describer().describe_topic(image(), {"retention.ms": "5"}))
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == (
        "5",
        SOURCE_DYNAMIC_TOPIC_CONFIG,
    )
    assert (configs["segment.ms"].value, configs["segment.ms"].source) == (
        "604800000",
        SOURCE_DEFAULT_CONFIG,
    )
    assert configs["cleanup.policy"].value == "delete"
    assert configs["preallocate"].value == "false"
    assert not any(c.read_only for c in configs.values())


def test_static_broker_synonym_in_topic_units():
    configs = by_name(
        describer(**{"log.retention.hours": "2"}).describe_topic(
            image(), {}, keys={"retention.ms"}, include_synonyms=True
        )
    )
    retention = configs["retention.ms"]
    assert (retention.value, retention.source) == ("7200000", SOURCE_STATIC_BROKER_CONFIG)
    assert retention.synonyms == [
        ("log.retention.hours", "2", SOURCE_STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", SOURCE_DEFAULT_CONFIG),
    ]


def test_dynamic_broker_levels_order():
    overrides = {
        "1": {"log.retention.ms": "100"},
        "": {"log.retention.ms": "200", "log.segment.bytes": "2000000"},
    }
    d = describer(**{"log.retention.ms": "300"})
    topic = by_name(d.describe_topic(image(overrides), {}, include_synonyms=True))
    assert (topic["retention.ms"].value, topic["retention.ms"].source) == (
        "100",
        SOURCE_DYNAMIC_BROKER_CONFIG,
    )
    assert [s[2] for s in topic["retention.ms"].synonyms] == [
        SOURCE_DYNAMIC_BROKER_CONFIG,
        SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
        SOURCE_STATIC_BROKER_CONFIG,
        SOURCE_DEFAULT_CONFIG,
    ]
    assert (topic["segment.bytes"].value, topic["segment.bytes"].source) == (
        "2000000",
        SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    broker = by_name(d.describe_broker(image(overrides), "1"))
    assert (broker["log.retention.ms"].value, broker["log.retention.ms"].source) == (
        "100",
        SOURCE_DYNAMIC_BROKER_CONFIG,
    )
    assert broker["log.retention.ms"].read_only is False
    assert broker["node.id"].read_only is True
    assert (broker["node.id"].value, broker["node.id"].source) == ("1", SOURCE_STATIC_BROKER_CONFIG)
    assert (broker["num.partitions"].value, broker["num.partitions"].source) == (
        "1",
        SOURCE_DEFAULT_CONFIG,
    )
    defaults = by_name(d.describe_broker(image(overrides), ""))
    assert set(defaults) == {"log.retention.ms", "log.segment.bytes"}


def test_dynamic_overrides_make_the_current_config():
    overrides = {
        "1": {"log.retention.minutes": "2", "log.segment.bytes": "2000000"},
        "": {"log.segment.bytes": "3000000", "log.cleanup.policy": "compact"},
    }
    assert dynamic_broker_overrides(image(overrides), 1) == {
        "log.retention.minutes": "2",
        "log.segment.bytes": "2000000",
        "log.cleanup.policy": "compact",
    }
    assert dynamic_broker_overrides(image(overrides), 2) == {
        "log.segment.bytes": "3000000",
        "log.cleanup.policy": "compact",
    }
    static = KafkaConfig({"node.id": 1, "log.dirs": "/tmp/x", "log.retention.hours": "5"})
    current = static.with_dynamic(dynamic_broker_overrides(image(overrides), 1))
    defaults = current.topic_defaults()
    assert defaults["retention.ms"] == 120000
    assert defaults["segment.bytes"] == 2000000
    assert defaults["cleanup.policy"] == ["compact"]
    assert static.topic_defaults()["retention.ms"] == 5 * 3600 * 1000
    # Across levels a synonym keeps its own precedence (Kafka merges the
    # properties, then log.retention.ms beats .minutes beats .hours).
    ms_static = KafkaConfig({"node.id": 1, "log.dirs": "/tmp/x", "log.retention.ms": "7"})
    assert ms_static.with_dynamic({"log.retention.hours": "1"}).log_retention_ms == 7
    assert static.with_dynamic({}) is static


def test_documentation_and_types_only_when_asked():
    [entry] = describer().describe_topic(image(), {}, keys={"cleanup.policy"})
    assert entry.documentation is None and entry.config_type == 7
    [entry] = describer().describe_topic(
        image(), {}, keys={"cleanup.policy"}, include_documentation=True
    )
    assert entry.documentation


def test_logger_levels_use_log4j_names():
    assert kafka_level_name(logging.WARNING) == "WARN"
    assert kafka_level_name(logging.CRITICAL) == "FATAL"
    assert kafka_level_name(logging.INFO) == "INFO"
    logging.getLogger("kfast.test.describer").setLevel(logging.ERROR)
    [entry] = describer().describe_loggers({"kfast.test.describer"})
    assert entry.value == "ERROR"
    logging.getLogger("kfast.test.describer").setLevel(logging.NOTSET)
