"""Client metrics subscriptions (KIP-714): the configs of a CLIENT_METRICS
config resource, their validation, and which clients a subscription matches
(Kafka's ClientMetricsConfigs and ClientMetricsInstanceMetadata).

A subscription is a config resource named by the subscription::

    kafka-client-metrics.sh --alter --name basic \\
        --metrics org.apache.kafka.producer. --interval 1000 \\
        --match client_software_name=librdkafka

is IncrementalAlterConfigs on (CLIENT_METRICS, "basic") with
``metrics=org.apache.kafka.producer.``, ``interval.ms=1000`` and
``match=client_software_name=librdkafka``. ``metrics`` are name prefixes
(``*`` for all), ``match`` is a list of ``param=regex`` that must all
match the client in full; an empty ``match`` matches every client.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

from kfast.config import CLIENT_METRICS_CONFIGS, ConfigException, coerce
from kfast.protocol import errors

ALL_SUBSCRIBED_METRICS = "*"
DEFAULT_INTERVAL_MS = CLIENT_METRICS_CONFIGS["interval.ms"].default
MIN_INTERVAL_MS = 100
MAX_INTERVAL_MS = 3_600_000
# The client attributes a match pattern may name.
MATCH_PARAMS = frozenset(
    {
        "client_instance_id",
        "client_id",
        "client_software_name",
        "client_software_version",
        "client_source_address",
        "client_source_port",
    }
)


class Subscription(NamedTuple):
    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: Mapping[str, re.Pattern]


def validate(name: str, configs: Mapping[str, str]) -> None:
    """ClientMetricsConfigs.validate: INVALID_REQUEST for an empty name, an
    unknown key or an interval outside 100 ms .. 1 h; INVALID_CONFIG for a
    value that does not parse or an illegal match pattern."""
    parse(name, configs)


def parse(name: str, configs: Mapping[str, str]) -> Subscription:
    if not name:
        raise errors.InvalidRequestException("Subscription name can't be empty")
    for key in configs:
        if key not in CLIENT_METRICS_CONFIGS:
            raise errors.InvalidRequestException(f"Unknown client metrics configuration: {key}")
    values = {}
    for key, definition in CLIENT_METRICS_CONFIGS.items():
        try:
            values[key] = (
                coerce(key, definition.type, configs[key]) if key in configs else definition.default
            )
        except ConfigException as exc:
            raise errors.InvalidConfigurationException(str(exc)) from None
    interval = values["interval.ms"]
    if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
        raise errors.InvalidRequestException(
            f"Invalid value {interval} for interval.ms, interval must be between 100 and "
            f"3600000 (1 hour)"
        )
    return Subscription(name, tuple(values["metrics"]), interval, parse_match(values["match"]))


def parse_match(patterns) -> dict[str, re.Pattern]:
    """``param=regex`` items (Kafka splits on '=' and wants exactly two parts)."""
    parsed = {}
    for pattern in patterns or ():
        parts = pattern.split("=")
        if len(parts) != 2 or parts[0].strip() not in MATCH_PARAMS:
            raise errors.InvalidConfigurationException(
                f"Illegal client matching pattern: {pattern}"
            )
        try:
            parsed[parts[0].strip()] = re.compile(parts[1].strip())
        except re.error:
            raise errors.InvalidConfigurationException(
                f"Illegal client matching pattern: {pattern}"
            ) from None
    return parsed


def matches(subscription: Subscription, attributes: Mapping[str, str | None]) -> bool:
    """Every pattern matches the whole attribute (Java's Matcher.matches);
    an attribute the client did not give matches nothing."""
    for param, pattern in subscription.match.items():
        value = attributes.get(param)
        if value is None or pattern.fullmatch(value) is None:
            return False
    return True
