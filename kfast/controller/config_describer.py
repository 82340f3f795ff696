"""Effective configs of topics and brokers as DescribeConfigs reports them
(Kafka's ConfigHelper + DynamicBrokerConfig synonyms).

A broker resource lists every Kafka 4.2 broker config
(kfast.kafka_broker_configs): kfast's own value where kfast defines the
config, Kafka's default otherwise, read-only unless kfast updates it
dynamically. Properties outside that catalogue (kfast.*, Kafka's internal
ones such as unstable.api.versions.enable, the authorizer's) are listed
only where set, as Kafka lists a config's originals.

A config's value comes from the first level that sets it, in precedence
order; each level is a config source:

    DYNAMIC_TOPIC_CONFIG (1)           topic override (ConfigRecord)
    DYNAMIC_BROKER_CONFIG (2)          broker override for this broker id
    DYNAMIC_DEFAULT_BROKER_CONFIG (3)  broker override for every broker ("")
    STATIC_BROKER_CONFIG (4)           server.properties
    DEFAULT_CONFIG (5)                 the definition's default

A topic config falls back to its broker synonyms (``retention.ms`` ->
``log.retention.ms``, ``log.retention.minutes``, ``log.retention.hours``),
converted to the topic config's unit. Synonyms, when asked for, list every
level that sets the config or one of its synonyms, highest precedence
first. Password values are never returned (is_sensitive).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Collection, Mapping
from typing import NamedTuple

from kfast.config import (
    CLIENT_METRICS_CONFIGS,
    DYNAMIC_ONLY_BROKER_CONFIGS,
    GROUP_CONFIGS,
    SERVER_CONFIGS,
    TOPIC_CONFIGS,
    KafkaConfig,
    Type,
)
from kfast.controller.configuration_control import DYNAMIC_BROKER_CONFIGS, format_value
from kfast.controller.group_config import group_config_default
from kfast.controller.metadata.image import MetadataImage
from kfast.kafka_broker_configs import KAFKA_BROKER_CONFIGS, listener_base_name
from kfast.protocol.constants import (
    SOURCE_CLIENT_METRICS_CONFIG,
    SOURCE_DEFAULT_CONFIG,
    SOURCE_DYNAMIC_BROKER_CONFIG,
    SOURCE_DYNAMIC_BROKER_LOGGER_CONFIG,
    SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
    SOURCE_DYNAMIC_TOPIC_CONFIG,
    SOURCE_GROUP_CONFIG,
    SOURCE_STATIC_BROKER_CONFIG,
)

# DescribeConfigsResponse ConfigType (v3+).
CONFIG_TYPES = {
    Type.BOOLEAN: 1,
    Type.STRING: 2,
    Type.INT: 3,
    Type.SHORT: 4,
    Type.LONG: 5,
    Type.DOUBLE: 6,
    Type.LIST: 7,
    Type.CLASS: 8,
    Type.PASSWORD: 9,
}

# Broker property name suffix -> factor to the topic config's milliseconds.
_UNIT_FACTORS = ((".hours", 3600 * 1000), (".minutes", 60 * 1000))


# (name, value, source) of one level that sets a config.
Synonym = tuple[str, str | None, int]


class DescribedConfig(NamedTuple):
    name: str
    value: str | None
    read_only: bool
    source: int
    is_sensitive: bool
    synonyms: list[Synonym]
    config_type: int
    documentation: str | None


@functools.cache
def _server_synonyms(topic_name: str) -> tuple[str, ...]:
    """Broker properties that default a topic config, highest precedence
    first (definition order in kfast.config: log.retention.ms before
    log.retention.minutes before log.retention.hours)."""
    return tuple(name for name, key in SERVER_CONFIGS.items() if key.topic_synonym == topic_name)


def _in_topic_units(server_name: str, value: str | None) -> object:
    for suffix, factor in _UNIT_FACTORS:
        if server_name.endswith(suffix) and value is not None:
            return int(value) * factor
    return value


def dynamic_broker_overrides(image: MetadataImage | None, broker_id: int) -> dict[str, str]:
    """The dynamic broker configs in force on ``broker_id``: the cluster-wide
    defaults ("") with this broker's own overrides over them, key by key
    (Kafka's DynamicBrokerConfig). ``KafkaConfig.with_dynamic`` lays them
    over server.properties to give the broker's current configuration."""
    if image is None:
        return {}
    merged = dict(image.broker_configs.get("", {}))
    merged.update(image.broker_configs.get(str(broker_id), {}))
    return merged


class ConfigDescriber:
    """Describes configs for one broker: its static ``config`` and the
    dynamic overrides of a MetadataImage."""

    def __init__(self, config: KafkaConfig, broker_id: int):
        self.config = config
        self.broker_id = broker_id

    def _broker_levels(
        self, image: MetadataImage | None, name: str
    ) -> list[tuple[str | None, int]]:
        """(value, source) of broker property ``name`` at every level that sets it."""
        levels: list[tuple[str | None, int]] = []
        per_broker = image.broker_configs.get(str(self.broker_id), {}) if image else {}
        cluster = image.broker_configs.get("", {}) if image else {}
        if name in per_broker:
            levels.append((per_broker[name], SOURCE_DYNAMIC_BROKER_CONFIG))
        if name in cluster:
            levels.append((cluster[name], SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG))
        key = SERVER_CONFIGS.get(name)
        if key is None:  # a Kafka config kfast does not define: Kafka's default
            default = KAFKA_BROKER_CONFIGS[name].default
        else:
            if self.config.is_set(name):
                levels.append((format_value(self.config[name]), SOURCE_STATIC_BROKER_CONFIG))
            default = format_value(key.default) if key.has_default else None
        if default is not None:
            levels.append((default, SOURCE_DEFAULT_CONFIG))
        return levels

    # -- topics ----------------------------------------------------------------------
    def describe_topic(
        self,
        image: MetadataImage | None,
        overrides: Mapping[str, str],
        keys: Collection[str] | None = None,
        include_synonyms: bool = False,
        include_documentation: bool = False,
    ) -> list[DescribedConfig]:
        out = []
        for name in sorted(TOPIC_CONFIGS):
            if keys is not None and name not in keys:
                continue
            key = TOPIC_CONFIGS[name]
            synonyms: list[Synonym] = []
            if name in overrides:
                synonyms.append((name, overrides[name], SOURCE_DYNAMIC_TOPIC_CONFIG))
            broker_entries: list[Synonym] = []
            for server_name in _server_synonyms(name):
                for value, source in self._broker_levels(image, server_name):
                    broker_entries.append((server_name, value, source))
            # Highest precedence first: by source level, then synonym order.
            broker_entries.sort(key=lambda entry: entry[2])
            synonyms += broker_entries
            if synonyms and synonyms[0][2] != SOURCE_DEFAULT_CONFIG:
                first_name, first_value, source = synonyms[0]
                value = (
                    format_value(_in_topic_units(first_name, first_value))
                    if source != SOURCE_DYNAMIC_TOPIC_CONFIG
                    else first_value
                )
            else:
                value, source = format_value(key.default), SOURCE_DEFAULT_CONFIG
            sensitive = key.type is Type.PASSWORD
            out.append(
                DescribedConfig(
                    name,
                    None if sensitive else value,
                    False,
                    source,
                    sensitive,
                    synonyms if include_synonyms else [],
                    CONFIG_TYPES[key.type],
                    key.doc if include_documentation else None,
                )
            )
        return out

    # -- brokers ---------------------------------------------------------------------
    def describe_broker(
        self,
        image: MetadataImage | None,
        resource_name: str,
        keys: Collection[str] | None = None,
        include_synonyms: bool = False,
        include_documentation: bool = False,
    ) -> list[DescribedConfig]:
        """Every property of this broker; for ``resource_name`` "" only the
        cluster-wide dynamic defaults (as Kafka describes the default
        broker resource)."""
        out = []
        cluster_defaults = image.broker_configs.get("", {}) if image else {}
        for name in sorted(SERVER_CONFIGS.keys() | KAFKA_BROKER_CONFIGS.keys()):
            if keys is not None and name not in keys:
                continue
            key = SERVER_CONFIGS.get(name)
            config_type = key.type if key else KAFKA_BROKER_CONFIGS[name].type
            if resource_name == "":
                if name not in cluster_defaults:
                    continue
                levels: list[tuple[str | None, int]] = [
                    (cluster_defaults[name], SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG)
                ]
            else:
                levels = self._broker_levels(image, name)
                if name not in KAFKA_BROKER_CONFIGS and (
                    not levels or levels[0][1] == SOURCE_DEFAULT_CONFIG
                ):
                    # kfast's own properties (kfast.*) and the ones Kafka
                    # defines as internal (unstable.api.versions.enable) are
                    # listed only where set, named or not, as Kafka's
                    # ConfigHelper.allConfigs lists originals plus the
                    # non-internal values: clients and tools do not expect them.
                    continue
            if levels:
                value, source = levels[0]
            else:
                value, source = None, SOURCE_DEFAULT_CONFIG
            synonyms = []
            if include_synonyms:
                topic_name = key.topic_synonym if key else None
                names = _server_synonyms(topic_name) if topic_name else [name]
                for synonym in names:
                    levels_of = [
                        (v, s)
                        for v, s in self._broker_levels(image, synonym)
                        if resource_name != "" or s == SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG
                    ]
                    synonyms += [(synonym, v, s) for v, s in levels_of]
                synonyms.sort(key=lambda entry: entry[2])
            sensitive = config_type is Type.PASSWORD
            out.append(
                DescribedConfig(
                    name,
                    None if sensitive else value,
                    name not in DYNAMIC_BROKER_CONFIGS,
                    source,
                    sensitive,
                    synonyms,
                    CONFIG_TYPES[config_type],
                    key.doc if include_documentation and key else None,
                )
            )
        out += self._describe_dynamic_only(
            image, resource_name, keys, include_synonyms, include_documentation
        )
        out += self._describe_listener_overrides(image, resource_name, keys, include_synonyms)
        out.sort(key=lambda c: c.name)
        return out

    def _describe_dynamic_only(
        self,
        image: MetadataImage | None,
        resource_name: str,
        keys: Collection[str] | None,
        include_synonyms: bool,
        include_documentation: bool,
    ) -> list[DescribedConfig]:
        """The dynamic-only configs (replication throttle rates) set for this
        broker or cluster-wide. Kafka lists them only where set, and
        read-only: they are not among its DynamicBrokerConfig reconfigurables,
        although AlterConfigs changes them."""
        per_broker = image.broker_configs.get(str(self.broker_id), {}) if image else {}
        cluster = image.broker_configs.get("", {}) if image else {}
        out = []
        for name, key in DYNAMIC_ONLY_BROKER_CONFIGS.items():
            if keys is not None and name not in keys:
                continue
            levels = (
                []
                if resource_name == "" or name not in per_broker
                else [(per_broker[name], SOURCE_DYNAMIC_BROKER_CONFIG)]
            )
            if name in cluster:
                levels.append((cluster[name], SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG))
            if not levels:
                continue
            value, source = levels[0]
            out.append(
                DescribedConfig(
                    name,
                    value,
                    True,
                    source,
                    False,
                    [(name, v, s) for v, s in levels] if include_synonyms else [],
                    CONFIG_TYPES[key.type],
                    key.doc if include_documentation else None,
                )
            )
        return out

    def _describe_listener_overrides(
        self,
        image: MetadataImage | None,
        resource_name: str,
        keys: Collection[str] | None,
        include_synonyms: bool,
    ) -> list[DescribedConfig]:
        """Dynamic listener-prefixed configs (listener.name.<l>.<config>):
        Kafka lists them as set, with the unprefixed config as a synonym
        (DynamicBrokerConfig.brokerConfigSynonyms)."""
        per_broker = image.broker_configs.get(str(self.broker_id), {}) if image else {}
        cluster = image.broker_configs.get("", {}) if image else {}
        out = []
        for name in sorted((per_broker.keys() if resource_name else set()) | cluster.keys()):
            base = listener_base_name(name)
            if base is None or (keys is not None and name not in keys):
                continue
            levels: list[Synonym] = (
                []
                if resource_name == "" or name not in per_broker
                else [(name, per_broker[name], SOURCE_DYNAMIC_BROKER_CONFIG)]
            )
            if name in cluster:
                levels.append((name, cluster[name], SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG))
            if (
                resource_name
                and base in KAFKA_BROKER_CONFIGS
                and base not in SERVER_CONFIGS
                and KAFKA_BROKER_CONFIGS[base].default is not None
            ):
                levels.append((base, KAFKA_BROKER_CONFIGS[base].default, SOURCE_DEFAULT_CONFIG))
            config_type = (
                KAFKA_BROKER_CONFIGS[base].type
                if base in KAFKA_BROKER_CONFIGS
                else SERVER_CONFIGS[base].type
            )
            sensitive = config_type is Type.PASSWORD
            _, value, source = levels[0]
            out.append(
                DescribedConfig(
                    name,
                    None if sensitive else value,
                    False,
                    source,
                    sensitive,
                    levels if include_synonyms else [],
                    CONFIG_TYPES[config_type],
                    None,
                )
            )
        return out

    # -- groups ----------------------------------------------------------------------
    def describe_group(
        self,
        overrides: Mapping[str, str],
        keys: Collection[str] | None = None,
        include_synonyms: bool = False,
        include_documentation: bool = False,
    ) -> list[DescribedConfig]:
        """Every group config of one group: its override (GROUP_CONFIG) or
        the default (DEFAULT_CONFIG, the broker's group.* value where one
        gives it), never read-only (Kafka's createGroupConfigEntry)."""
        out = []
        for name in sorted(GROUP_CONFIGS):
            if keys is not None and name not in keys:
                continue
            key = GROUP_CONFIGS[name]
            if name in overrides:
                value: str | None = overrides[name]
                source = SOURCE_GROUP_CONFIG
            else:
                value = format_value(group_config_default(self.config, name))
                source = SOURCE_DEFAULT_CONFIG
            out.append(
                DescribedConfig(
                    name,
                    value,
                    False,
                    source,
                    False,
                    [(name, value, source)] if include_synonyms else [],
                    CONFIG_TYPES[key.type],
                    key.doc if include_documentation else None,
                )
            )
        return out

    # -- broker loggers ------------------------------------------------------------------
    def describe_loggers(self, keys: Collection[str] | None = None) -> list[DescribedConfig]:
        """Python loggers with Kafka's level names (the root logger is
        "root", as log4j's)."""
        names = ["root"] + sorted(logging.Logger.manager.loggerDict)
        out = []
        for name in names:
            if keys is not None and name not in keys:
                continue
            logger = logging.getLogger() if name == "root" else logging.getLogger(name)
            out.append(
                DescribedConfig(
                    name,
                    kafka_level_name(logger.getEffectiveLevel()),
                    False,
                    SOURCE_DYNAMIC_BROKER_LOGGER_CONFIG,
                    False,
                    [],
                    CONFIG_TYPES[Type.STRING],
                    None,
                )
            )
        return out

    # -- client metrics subscriptions (KIP-714) ------------------------------------------
    @staticmethod
    def describe_client_metrics(
        image: MetadataImage | None,
        name: str,
        keys: Collection[str] | None = None,
        include_docs: bool = False,
    ) -> list[DescribedConfig]:
        """The configs set on the subscription, and only those (Kafka's
        ConfigHelper: no defaults, no synonyms); none for an unknown name."""
        configs = image.client_metrics_configs.get(name, {}) if image else {}
        out = []
        for key, value in configs.items():
            if keys is not None and key not in keys:
                continue
            definition = CLIENT_METRICS_CONFIGS.get(key)
            out.append(
                DescribedConfig(
                    key,
                    value,
                    False,
                    SOURCE_CLIENT_METRICS_CONFIG,
                    False,
                    [],
                    CONFIG_TYPES[definition.type] if definition else CONFIG_TYPES[Type.STRING],
                    definition.doc if include_docs and definition else None,
                )
            )
        return out


# log4j level names <-> Python logging levels.
LOG4J_LEVELS = {
    "TRACE": 5,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "OFF": logging.CRITICAL + 10,
}


def kafka_level_name(level: int) -> str:
    best = "TRACE"
    for name, value in sorted(LOG4J_LEVELS.items(), key=lambda item: item[1]):
        if level >= value:
            best = name
    return best
