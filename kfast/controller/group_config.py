"""Group configs (config resource type GROUP, 32): what a group's overrides
mean, and which overrides the controller accepts (Kafka's GroupConfig and
GroupConfigManager.validate).

A group's effective config is, per name of kfast.config.GROUP_CONFIGS, its
override (a ConfigRecord on the GROUP resource named by the group id), else
the broker property GROUP_TO_SERVER names (consumer.session.timeout.ms ->
group.consumer.session.timeout.ms), else the definition's default.

Validation, in Kafka's order: every name known ("Unknown group config name"),
no null value, each value of its type and range, then the whole effective
set against the broker's bounds (group.consumer.min/max.session.timeout.ms,
group.consumer.min/max.heartbeat.interval.ms) and session timeouts above
heartbeat intervals. Every failure is INVALID_CONFIG.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kfast.config import GROUP_CONFIGS, GROUP_TO_SERVER, ConfigException, KafkaConfig, coerce
from kfast.protocol import errors

# (group config, broker property bounding it from below, from above).
_BOUNDS = (
    (
        "consumer.heartbeat.interval.ms",
        "group.consumer.min.heartbeat.interval.ms",
        "group.consumer.max.heartbeat.interval.ms",
    ),
    (
        "consumer.session.timeout.ms",
        "group.consumer.min.session.timeout.ms",
        "group.consumer.max.session.timeout.ms",
    ),
)
# (session timeout, heartbeat interval) pairs of one group type.
_SESSION_OVER_HEARTBEAT = (
    ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
    ("streams.session.timeout.ms", "streams.heartbeat.interval.ms"),
)


def group_config_default(broker_config: KafkaConfig, name: str) -> Any:
    server_name = GROUP_TO_SERVER.get(name)
    if server_name is not None:
        return broker_config[server_name]
    return GROUP_CONFIGS[name].default


def group_config_value(broker_config: KafkaConfig, overrides: Mapping[str, str], name: str) -> Any:
    """One group config of a group, typed: its override or the default."""
    if name in overrides:
        return coerce(name, GROUP_CONFIGS[name].type, overrides[name])
    return group_config_default(broker_config, name)


def effective_group_config(
    broker_config: KafkaConfig, overrides: Mapping[str, str] | None
) -> dict[str, Any]:
    """Every group config of a group, typed: its overrides over the defaults."""
    overrides = overrides or {}
    return {name: group_config_value(broker_config, overrides, name) for name in GROUP_CONFIGS}


def validate_group_configs(broker_config: KafkaConfig, overrides: Mapping[str, str | None]) -> None:
    """Raise InvalidConfigurationException unless ``overrides`` may become
    a group's whole set of overrides."""
    unknown = [name for name in overrides if name not in GROUP_CONFIGS]
    if unknown:
        raise errors.InvalidConfigurationException(f"Unknown group config name: {unknown[0]}")
    nulls = sorted(name for name, value in overrides.items() if value is None)
    if nulls:
        raise errors.InvalidConfigurationException(
            f"Null value not supported for group configs: {','.join(nulls)}"
        )
    given = {name: value for name, value in overrides.items() if value is not None}
    try:
        for name, value in given.items():
            key = GROUP_CONFIGS[name]
            typed = coerce(name, key.type, value)
            if key.validator is not None:
                key.validator(name, typed)
        values = effective_group_config(broker_config, given)
    except ConfigException as exc:
        raise errors.InvalidConfigurationException(str(exc)) from None
    for name, low, high in _BOUNDS:
        if values[name] < broker_config[low]:
            raise errors.InvalidConfigurationException(
                f"{name} must be greater than or equal to {low}"
            )
        if values[name] > broker_config[high]:
            raise errors.InvalidConfigurationException(
                f"{name} must be less than or equal to {high}"
            )
    for session, heartbeat in _SESSION_OVER_HEARTBEAT:
        if values[session] <= values[heartbeat]:
            raise errors.InvalidConfigurationException(
                f"{session} must be greater than {heartbeat}"
            )
