"""Options of the kfast data sources, with the names, defaults and rules of
Spark's Kafka source (KafkaSourceProvider), checked when the query is planned.

A job written for ``format("kafka")`` must run on ``format("kfast")``
unchanged, so every option Spark's Kafka source documents is accepted here with
the same meaning, and the checks Spark makes fail here with Spark's messages:

- exactly one of ``subscribe`` / ``subscribePattern`` / ``assign``;
- ``kafka.bootstrap.servers`` is required; ``kafka.auto.offset.reset``,
  ``kafka.key.deserializer``, ``kafka.value.deserializer``,
  ``kafka.enable.auto.commit`` and ``kafka.interceptor.classes`` are refused;
- batch queries: starting offsets may not be latest, ending offsets may not be
  earliest, specific start and end offsets name the same partitions and
  start <= end;
- streaming queries: ``endingOffsets`` / ``endingOffsetsByTimestamp`` (and,
  stricter than Spark, which ignores it there, ``endingTimestamp``) are refused.

Where Spark silently ignores an option name it does not know, kfast refuses
it: a misspelt ``startingOffset`` would otherwise read from the default
position without a word. Options starting with ``kafka.`` are Kafka client
properties, read with kfast's client property table
(kfast.client.properties): a read's strictly (:func:`parse_consumer_properties`:
TLS, SASL, read_committed, invalid values and unknown names are refused with
their names), a write's leniently (``sink.producer_arguments``: unknown names
logged and ignored, as Kafka's producer does).

Option names are case-insensitive, as in Spark (PySpark hands a data source a
map with lower-cased keys); messages use Spark's spelling.

Offsets inside JSON use Kafka's sentinels: -2 earliest, -1 latest.
"""

from __future__ import annotations

import enum
import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Union, overload

# EARLIEST, LATEST: Kafka's ListOffsets sentinels, also used in the offsets
# JSON options.
from kfast.client import EARLIEST, LATEST
from kfast.client.connection import DEFAULT_CLIENT_ID
from kfast.client.fetcher import READ_COMMITTED
from kfast.client.properties import Client, parse_client_properties, security_properties
from kfast.config import ConfigException
from kfast.controller.topics import INTERNAL_TOPICS

logger = logging.getLogger(__name__)


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        # Kafka's TopicPartition.toString, which Spark's messages print.
        return f"{self.topic}-{self.partition}"


# ---------------------------------------------------------------------------
# Option names. Each source lists what it accepts; anything else is refused.

ASSIGN = "assign"
SUBSCRIBE = "subscribe"
SUBSCRIBE_PATTERN = "subscribePattern"
STRATEGY_OPTIONS = (ASSIGN, SUBSCRIBE, SUBSCRIBE_PATTERN)

STARTING_OFFSETS = "startingOffsets"
ENDING_OFFSETS = "endingOffsets"
STARTING_OFFSETS_BY_TIMESTAMP = "startingOffsetsByTimestamp"
ENDING_OFFSETS_BY_TIMESTAMP = "endingOffsetsByTimestamp"
STARTING_TIMESTAMP = "startingTimestamp"
ENDING_TIMESTAMP = "endingTimestamp"
STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY = "startingOffsetsByTimestampStrategy"
FAIL_ON_DATA_LOSS = "failOnDataLoss"
MIN_PARTITIONS = "minPartitions"
MAX_OFFSETS_PER_TRIGGER = "maxOffsetsPerTrigger"
MIN_OFFSETS_PER_TRIGGER = "minOffsetsPerTrigger"
MAX_TRIGGER_DELAY = "maxTriggerDelay"
INCLUDE_HEADERS = "includeHeaders"
GROUP_ID_PREFIX = "groupIdPrefix"
CONSUMER_POLL_TIMEOUT = "kafkaConsumer.pollTimeoutMs"
FETCH_OFFSET_NUM_RETRIES = "fetchOffset.numRetries"
FETCH_OFFSET_RETRY_INTERVAL_MS = "fetchOffset.retryIntervalMs"
PATH = "path"

KAFKA_PREFIX = "kafka."
BOOTSTRAP_SERVERS = "kafka.bootstrap.servers"

#: Every option of Spark's Kafka source (reading); ``kafka.*`` comes on top.
KAFKA_SOURCE_OPTIONS = STRATEGY_OPTIONS + (
    STARTING_OFFSETS,
    ENDING_OFFSETS,
    STARTING_OFFSETS_BY_TIMESTAMP,
    ENDING_OFFSETS_BY_TIMESTAMP,
    STARTING_TIMESTAMP,
    ENDING_TIMESTAMP,
    STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY,
    FAIL_ON_DATA_LOSS,
    MIN_PARTITIONS,
    MAX_OFFSETS_PER_TRIGGER,
    MIN_OFFSETS_PER_TRIGGER,
    MAX_TRIGGER_DELAY,
    INCLUDE_HEADERS,
    GROUP_ID_PREFIX,
    CONSUMER_POLL_TIMEOUT,
    FETCH_OFFSET_NUM_RETRIES,
    FETCH_OFFSET_RETRY_INTERVAL_MS,
)

#: The offline log-directory source: no broker, so no client properties, and
#: batch only, so no triggers.
SEGMENTS_SOURCE_OPTIONS = (
    (PATH,)
    + STRATEGY_OPTIONS
    + (
        STARTING_OFFSETS,
        ENDING_OFFSETS,
        STARTING_OFFSETS_BY_TIMESTAMP,
        ENDING_OFFSETS_BY_TIMESTAMP,
        STARTING_TIMESTAMP,
        ENDING_TIMESTAMP,
        STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY,
        FAIL_ON_DATA_LOSS,
        MIN_PARTITIONS,
        INCLUDE_HEADERS,
    )
)

# Spark's stream-only options, which a batch query ignores with a warning.
_STREAM_ONLY_OPTIONS = (MAX_OFFSETS_PER_TRIGGER, MIN_OFFSETS_PER_TRIGGER, MAX_TRIGGER_DELAY)

# Client properties Spark refuses, with its reasons.
_REFUSED_KAFKA_PROPERTIES = {
    "auto.offset.reset": (
        "Kafka option 'auto.offset.reset' is not supported. Instead set the source "
        "option 'startingOffsets' to 'earliest' or 'latest' to specify where to "
        "start. Structured Streaming manages which offsets are consumed internally, "
        "rather than relying on the kafkaConsumer to do it."
    ),
    "key.deserializer": (
        "Kafka option 'key.deserializer' is not supported as keys are deserialized "
        "as byte arrays with ByteArrayDeserializer. Use DataFrame operations to "
        "explicitly deserialize the keys."
    ),
    "value.deserializer": (
        "Kafka option 'value.deserializer' is not supported as values are "
        "deserialized as byte arrays with ByteArrayDeserializer. Use DataFrame "
        "operations to explicitly deserialize the values."
    ),
    "enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported",
    "interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
}


# ---------------------------------------------------------------------------
# Kafka consumer properties of a read (``kafka.*`` minus the prefix).


@dataclass(frozen=True)
class KafkaConsumerSettings:
    """The ``kafka.*`` properties of a read that kfast's client honours, with
    the consumer's names and units; ``None`` leaves kfast's default. Used by
    the driver (metadata, ListOffsets) and by every task (Fetch)."""

    client_id: str = DEFAULT_CLIENT_ID
    request_timeout_ms: int | None = None  # each request's answer
    default_api_timeout_ms: int | None = None  # waiting for metadata (leaders)
    retry_backoff_ms: int | None = None
    retry_backoff_max_ms: int | None = None
    fetch_max_bytes: int | None = None  # per Fetch response
    #: Per partition and Fetch. kfast's default (``data_consumer``) is 8 MiB,
    #: not the consumer's 1 MiB: a task reads a known range, not a live tail.
    max_partition_fetch_bytes: int | None = None
    fetch_min_bytes: int | None = None
    #: kfast's default is 0: a task's range lies below the high watermark,
    #: so there is nothing worth waiting for.
    fetch_max_wait_ms: int | None = None
    check_crcs: bool = True
    #: ``read_committed``: latest offsets are last stable offsets, fetches
    #: stop there, and aborted transactions' records are dropped (Spark's
    #: Kafka source does the same through its consumer; offsets then have gaps).
    read_committed: bool = False
    #: security.protocol, ssl.* and sasl.* as given (passwords among them,
    #: hence no repr): every process parses them again into its client's
    #: TLS / SASL settings, as an SSL context does not travel to executors.
    security: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def client_arguments(self) -> dict:
        """Keyword arguments of kfast's ``Fetcher`` (and its ``Cluster``)."""
        arguments: dict = {"client_id": self.client_id}
        seconds = {
            "request_timeout": self.request_timeout_ms,
            "metadata_timeout": self.default_api_timeout_ms,
            "retry_backoff": self.retry_backoff_ms,
            "retry_backoff_max": self.retry_backoff_max_ms,
        }
        arguments.update({name: ms / 1000.0 for name, ms in seconds.items() if ms is not None})
        if self.fetch_max_bytes is not None:
            arguments["max_bytes"] = self.fetch_max_bytes
        if self.fetch_min_bytes is not None:
            arguments["min_bytes"] = self.fetch_min_bytes
        if self.read_committed:
            arguments["isolation_level"] = READ_COMMITTED
        if self.security:
            parsed = parse_client_properties(dict(self.security), Client.CONSUMER, strict=True)
            arguments.update(parsed.cluster_arguments())
        return arguments


def parse_consumer_properties(kafka_params: Mapping[str, str]) -> KafkaConsumerSettings:
    """Map a read's ``kafka.*`` properties (prefix removed) onto kfast's
    client with the client property table (kfast.client.properties),
    strictly: a name the consumer does not define is refused, as is a TLS or
    SASL setting kfast's client does not apply (a bad truststore or JAAS
    config fails here, on the driver). Spark's refused properties
    (``auto.offset.reset`` ...) are checked before this."""
    try:
        parsed = parse_client_properties(kafka_params, Client.CONSUMER, strict=True)
    except ConfigException as exc:
        raise ValueError(
            f"Kafka option 'kafka.{exc.name}' refused by the kfast source: {exc}"
        ) from None
    if parsed.without_effect:
        logger.info(
            "Kafka options without effect on the kfast source (it has no consumer "
            "group or poll loop): %s",
            ", ".join("kafka." + p for p in parsed.without_effect),
        )
    settings = {
        field_name: parsed.get(prop)
        for prop, field_name in _CONSUMER_SETTINGS.items()
        if prop in parsed.values
    }
    return KafkaConsumerSettings(
        **settings,
        read_committed=parsed.get("isolation.level") == "read_committed",
        security=tuple(sorted(security_properties(kafka_params).items()))
        if parsed.security is not None
        else (),
    )


#: Consumer property -> KafkaConsumerSettings field.
_CONSUMER_SETTINGS = {
    "client.id": "client_id",
    "request.timeout.ms": "request_timeout_ms",
    "default.api.timeout.ms": "default_api_timeout_ms",
    "retry.backoff.ms": "retry_backoff_ms",
    "retry.backoff.max.ms": "retry_backoff_max_ms",
    "fetch.max.bytes": "fetch_max_bytes",
    "max.partition.fetch.bytes": "max_partition_fetch_bytes",
    "fetch.min.bytes": "fetch_min_bytes",
    "fetch.max.wait.ms": "fetch_max_wait_ms",
    "check.crcs": "check_crcs",
}


# ---------------------------------------------------------------------------
# Where to start and stop (Spark's KafkaOffsetRangeLimit).


class StrategyOnNoMatchStartingOffset(enum.Enum):
    """``startingOffsetsByTimestampStrategy``: what to do when no record of a
    partition has a timestamp >= the one asked for."""

    ERROR = "error"
    LATEST = "latest"


@dataclass(frozen=True)
class EarliestOffsetRangeLimit:
    pass


@dataclass(frozen=True)
class LatestOffsetRangeLimit:
    pass


@dataclass(frozen=True)
class SpecificOffsetRangeLimit:
    partition_offsets: Mapping[TopicPartition, int]


@dataclass(frozen=True)
class SpecificTimestampRangeLimit:
    topic_timestamps: Mapping[TopicPartition, int]
    strategy_on_no_match: StrategyOnNoMatchStartingOffset


@dataclass(frozen=True)
class GlobalTimestampRangeLimit:
    timestamp: int
    strategy_on_no_match: StrategyOnNoMatchStartingOffset


OffsetRangeLimit = Union[
    EarliestOffsetRangeLimit,
    LatestOffsetRangeLimit,
    SpecificOffsetRangeLimit,
    SpecificTimestampRangeLimit,
    GlobalTimestampRangeLimit,
]


# ---------------------------------------------------------------------------
# Which partitions (Spark's ConsumerStrategy).


@dataclass(frozen=True)
class AssignStrategy:
    """``assign``: exactly these partitions, whether or not they exist."""

    partitions: tuple[TopicPartition, ...]

    def assigned(self, available: Mapping[str, Sequence[int]]) -> list:
        return sorted(set(self.partitions))


@dataclass(frozen=True)
class SubscribeStrategy:
    """``subscribe``: every partition of the named topics that exist."""

    topics: tuple[str, ...]

    def assigned(self, available: Mapping[str, Sequence[int]]) -> list:
        return sorted(TopicPartition(t, p) for t in set(self.topics) for p in available.get(t, ()))


@dataclass(frozen=True)
class SubscribePatternStrategy:
    """``subscribePattern``: every partition of the topics whose whole name
    matches the regex (Java's ``Matcher.matches``, hence ``fullmatch``).
    Internal topics (``__consumer_offsets``, ``__transaction_state``) never
    match a pattern, as Kafka's topic listing leaves them out; ``subscribe``
    or ``assign`` can still name them."""

    pattern: str

    def assigned(self, available: Mapping[str, Sequence[int]]) -> list:
        regex = re.compile(self.pattern)
        return sorted(
            TopicPartition(t, p)
            for t, parts in available.items()
            if t not in INTERNAL_TOPICS and regex.fullmatch(t)
            for p in parts
        )


ConsumerStrategy = Union[AssignStrategy, SubscribeStrategy, SubscribePatternStrategy]


# ---------------------------------------------------------------------------
# Parsed options.


@dataclass(frozen=True)
class KafkaSourceOptions:
    """The options of one read, parsed and checked as far as they can be
    without knowing whether it is a batch or a streaming query; call
    :meth:`batch_offsets` or :meth:`streaming_starting_offsets` for the rest."""

    strategy: ConsumerStrategy
    include_headers: bool = False
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    starting_offsets: OffsetRangeLimit | None = None  # None: not given
    ending_offsets: OffsetRangeLimit | None = None  # None: not given
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000  # Spark's default "15m"
    group_id_prefix: str | None = None
    poll_timeout_ms: int | None = None  # None: spark.network.timeout
    fetch_offset_num_retries: int = 3
    fetch_offset_retry_interval_ms: int = 10
    #: ``kafka.*`` options without the prefix: the client's properties.
    kafka_params: Mapping[str, str] = field(default_factory=dict)
    #: What those properties ask of kfast's client (``kfast`` source only).
    consumer: KafkaConsumerSettings = KafkaConsumerSettings()
    #: ``path`` of the offline source (a broker's log directory).
    path: str | None = None
    #: Options given by name (lower-cased), to tell "default" from "given".
    given: frozenset = frozenset()

    def batch_offsets(self) -> tuple[OffsetRangeLimit, OffsetRangeLimit]:
        """(starting, ending) limits of a batch query, checked as Spark checks
        them (validateBatchOptions and checkOffsetLimitValidity)."""
        start = self.starting_offsets or EarliestOffsetRangeLimit()
        end = self.ending_offsets or LatestOffsetRangeLimit()
        if isinstance(start, LatestOffsetRangeLimit):
            raise ValueError("starting offset can't be latest for batch queries on Kafka")
        if isinstance(start, SpecificOffsetRangeLimit):
            for tp, offset in start.partition_offsets.items():
                if offset == LATEST:
                    raise ValueError(
                        f"startingOffsets for {tp} can't be latest for batch queries on Kafka"
                    )
        if isinstance(end, EarliestOffsetRangeLimit):
            raise ValueError("ending offset can't be earliest for batch queries on Kafka")
        if isinstance(end, SpecificOffsetRangeLimit):
            for tp, offset in end.partition_offsets.items():
                if offset == EARLIEST:
                    raise ValueError(
                        f"ending offset for {tp} can't be earliest for batch queries on Kafka"
                    )
        for name in _STREAM_ONLY_OPTIONS:
            if name.lower() in self.given:
                logger.warning("%s option ignored in batch queries", name)
        _check_offset_limit_validity(start, end)
        return start, end

    def streaming_starting_offsets(self) -> OffsetRangeLimit:
        """Where a new streaming query starts, after Spark's
        validateStreamOptions (no ending options in a stream)."""
        if ENDING_OFFSETS.lower() in self.given:
            raise ValueError("ending offset not valid in streaming queries")
        if (
            ENDING_OFFSETS_BY_TIMESTAMP.lower() in self.given
            or ENDING_TIMESTAMP.lower() in self.given
        ):
            raise ValueError("ending timestamp not valid in streaming queries")
        return self.starting_offsets or LatestOffsetRangeLimit()


def parse_kafka_source_options(options: Mapping[str, str]) -> KafkaSourceOptions:
    """Parse the options of the ``kfast`` source (Spark's Kafka source)."""
    opts = _lower_keys(options)
    _refuse_unknown(opts, KAFKA_SOURCE_OPTIONS, "the kfast source", allow_kafka_params=True)
    kafka_params = {
        k[len(KAFKA_PREFIX) :]: v for k, v in opts.items() if k.startswith(KAFKA_PREFIX)
    }
    for prop, message in _REFUSED_KAFKA_PROPERTIES.items():
        if prop in kafka_params:
            raise ValueError(message)
    if "group.id" in kafka_params:
        logger.warning(
            "Kafka option 'kafka.group.id' has been set on this query; queries sharing "
            "a group id interfere with each other%s",
            "; option groupIdPrefix will be ignored" if GROUP_ID_PREFIX.lower() in opts else "",
        )
    if BOOTSTRAP_SERVERS not in opts:
        raise ValueError(
            f"Option '{BOOTSTRAP_SERVERS}' must be specified for configuring Kafka consumer"
        )
    strategy_on_no_match = _enum_option(
        opts,
        STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY,
        StrategyOnNoMatchStartingOffset,
        StrategyOnNoMatchStartingOffset.ERROR,
    )
    max_offsets = _long_option(opts, MAX_OFFSETS_PER_TRIGGER)
    min_offsets = _long_option(opts, MIN_OFFSETS_PER_TRIGGER)
    if max_offsets is not None and min_offsets is not None and min_offsets > max_offsets:
        raise ValueError(
            f"The value of minOffsetPerTrigger({min_offsets}) is higher "
            f"than the maxOffsetsPerTrigger({max_offsets})."
        )
    delay = opts.get(MAX_TRIGGER_DELAY.lower())
    return KafkaSourceOptions(
        strategy=_strategy(opts),
        include_headers=_boolean_option(opts, INCLUDE_HEADERS, False),
        fail_on_data_loss=_boolean_option(opts, FAIL_ON_DATA_LOSS, True),
        min_partitions=_min_partitions(opts),
        starting_offsets=_offset_range_limit(
            opts,
            STARTING_TIMESTAMP,
            STARTING_OFFSETS_BY_TIMESTAMP,
            STARTING_OFFSETS,
            strategy_on_no_match,
        ),
        ending_offsets=_offset_range_limit(
            opts,
            ENDING_TIMESTAMP,
            ENDING_OFFSETS_BY_TIMESTAMP,
            ENDING_OFFSETS,
            strategy_on_no_match,
        ),
        max_offsets_per_trigger=max_offsets,
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=(
            15 * 60 * 1000 if delay is None else parse_time_as_ms(delay, MAX_TRIGGER_DELAY)
        ),
        group_id_prefix=opts.get(GROUP_ID_PREFIX.lower()),
        poll_timeout_ms=_long_option(opts, CONSUMER_POLL_TIMEOUT),
        fetch_offset_num_retries=_long_option(opts, FETCH_OFFSET_NUM_RETRIES, 3),
        fetch_offset_retry_interval_ms=_long_option(opts, FETCH_OFFSET_RETRY_INTERVAL_MS, 10),
        kafka_params=kafka_params,
        consumer=parse_consumer_properties(kafka_params),
        given=frozenset(opts),
    )


def parse_segments_source_options(options: Mapping[str, str]) -> KafkaSourceOptions:
    """Parse the options of the ``kfast-segments`` source (offline, batch)."""
    opts = _lower_keys(options)
    _refuse_unknown(
        opts, SEGMENTS_SOURCE_OPTIONS, "the kfast-segments source", allow_kafka_params=False
    )
    path = opts.get(PATH)
    if not path or not path.strip():
        raise ValueError(
            "Option 'path' must be specified for the kfast-segments source: "
            "a broker log directory (one of log.dirs)"
        )
    strategy_on_no_match = _enum_option(
        opts,
        STARTING_OFFSETS_BY_TIMESTAMP_STRATEGY,
        StrategyOnNoMatchStartingOffset,
        StrategyOnNoMatchStartingOffset.ERROR,
    )
    return KafkaSourceOptions(
        strategy=_strategy(opts),
        include_headers=_boolean_option(opts, INCLUDE_HEADERS, False),
        fail_on_data_loss=_boolean_option(opts, FAIL_ON_DATA_LOSS, True),
        min_partitions=_min_partitions(opts),
        starting_offsets=_offset_range_limit(
            opts,
            STARTING_TIMESTAMP,
            STARTING_OFFSETS_BY_TIMESTAMP,
            STARTING_OFFSETS,
            strategy_on_no_match,
        ),
        ending_offsets=_offset_range_limit(
            opts,
            ENDING_TIMESTAMP,
            ENDING_OFFSETS_BY_TIMESTAMP,
            ENDING_OFFSETS,
            strategy_on_no_match,
        ),
        path=path.strip(),
        given=frozenset(opts),
    )


# ---------------------------------------------------------------------------
# Writing (Spark's Kafka sink).

TOPIC = "topic"
#: A streaming query's own option, which Spark also hands to its sink.
CHECKPOINT_LOCATION = "checkpointLocation"

#: Options of Spark's Kafka sink (batch and streaming writes); ``kafka.*`` on top.
KAFKA_SINK_OPTIONS = (TOPIC, INCLUDE_HEADERS, CHECKPOINT_LOCATION)

_REFUSED_PRODUCER_PROPERTIES = {
    "key.serializer": (
        "Kafka option 'key.serializer' is not supported as keys are "
        "serialized with ByteArraySerializer."
    ),
    "value.serializer": (
        "Kafka option 'value.serializer' is not supported as value are "
        "serialized with ByteArraySerializer."
    ),
}


@dataclass(frozen=True)
class KafkaSinkOptions:
    #: The ``topic`` option: every row goes there, whatever its topic column says.
    topic: str | None
    include_headers: bool
    #: ``kafka.*`` options without the prefix: the producer's properties.
    kafka_params: Mapping[str, str]


def parse_kafka_sink_options(options: Mapping[str, str]) -> KafkaSinkOptions:
    """Parse the options of a write to the ``kfast`` sink (Spark's Kafka sink)."""
    opts = _lower_keys(options)
    _refuse_unknown(opts, KAFKA_SINK_OPTIONS, "the kfast sink", allow_kafka_params=True)
    kafka_params = {
        k[len(KAFKA_PREFIX) :]: v for k, v in opts.items() if k.startswith(KAFKA_PREFIX)
    }
    for prop, message in _REFUSED_PRODUCER_PROPERTIES.items():
        if prop in kafka_params:
            raise ValueError(message)
    if BOOTSTRAP_SERVERS not in opts:
        raise ValueError(
            f"Option '{BOOTSTRAP_SERVERS}' must be specified for configuring Kafka producer"
        )
    topic = opts.get(TOPIC)
    return KafkaSinkOptions(
        topic=None if topic is None else topic.strip(),
        include_headers=_boolean_option(opts, INCLUDE_HEADERS, False),
        kafka_params=kafka_params,
    )


# ---------------------------------------------------------------------------
# JSON values (Spark's JsonUtils), also used for streaming offsets.


def parse_partitions(value: str) -> tuple[TopicPartition, ...]:
    """``{"topicA":[0,1],"topicB":[0,1]}`` -> partitions."""
    try:
        parsed = json.loads(value)
        if not isinstance(parsed, dict):
            raise TypeError
        return tuple(
            TopicPartition(topic, _json_int(p))
            for topic, parts in parsed.items()
            for p in _json_list(parts)
        )
    except (ValueError, TypeError):
        raise ValueError(f'Expected e.g. {{"topicA":[0,1],"topicB":[0,1]}}, got {value}') from None


def parse_partition_offsets(value: str) -> dict:
    """``{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}`` -> {partition: offset}."""
    try:
        return _partition_map(value)
    except (ValueError, TypeError):
        raise ValueError(
            f'Expected e.g. {{"topicA":{{"0":23,"1":-1}},"topicB":{{"0":-2}}}}, got {value}'
        ) from None


def parse_partition_timestamps(value: str) -> dict:
    """``{"topicA":{"0":1000,"1":1000}}`` -> {partition: timestamp}."""
    try:
        return _partition_map(value)
    except (ValueError, TypeError):
        raise ValueError(
            'Expected e.g. {"topicA": {"0": 123456789, "1": 123456789}, '
            f'"topicB": {{"0": 123456789, "1": 123456789}}}}, got {value}'
        ) from None


def partition_offsets_json(partition_offsets: Mapping[TopicPartition, int]) -> dict:
    """{partition: offset} -> ``{"topic": {"0": offset}}`` (sorted, as Spark
    writes it), the JSON-ready form of streaming offsets."""
    result: dict = {}
    for tp in sorted(partition_offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = partition_offsets[tp]
    return result


def parse_partition_offsets_json(offsets: Mapping[str, Mapping[str, int]]) -> dict:
    """The inverse of :func:`partition_offsets_json`: ``{"topic": {"0": 5}}``
    (a streaming offset as Spark hands it back) -> {partition: offset}."""
    return {
        TopicPartition(topic, int(partition)): int(offset)
        for topic, per_partition in offsets.items()
        for partition, offset in per_partition.items()
    }


def parse_time_as_ms(value: str, option: str) -> int:
    """A duration such as ``15m`` or ``500ms`` (Spark's timeStringAsMs; a bare
    number is milliseconds)."""
    match = re.fullmatch(r"\s*(-?\d+)\s*([a-z]*)\s*", value.lower())
    units = {
        "": 1,
        "ms": 1,
        "us": 0.001,
        "s": 1000,
        "m": 60_000,
        "min": 60_000,
        "h": 3_600_000,
        "d": 86_400_000,
    }
    if not match or match.group(2) not in units:
        raise ValueError(
            f"Invalid value '{value}' for option '{option}': expected a "
            "duration such as 500ms, 30s, 15m, 1h or 1d"
        )
    return int(int(match.group(1)) * units[match.group(2)])


# ---------------------------------------------------------------------------


def _lower_keys(options: Mapping[str, str]) -> dict:
    return {k.lower(): v for k, v in options.items()}


def _refuse_unknown(
    opts: Mapping[str, str], accepted: Sequence[str], where: str, *, allow_kafka_params: bool
) -> None:
    known = {name.lower() for name in accepted}
    unknown = sorted(
        k
        for k in opts
        if k not in known and not (allow_kafka_params and k.startswith(KAFKA_PREFIX))
    )
    if unknown:
        kafka_note = (
            " and Kafka client properties prefixed with 'kafka.'" if allow_kafka_params else ""
        )
        raise ValueError(
            f"Unknown option{'s' if len(unknown) > 1 else ''} for {where}: "
            f"{', '.join(repr(k) for k in unknown)}. Accepted options: "
            f"{', '.join(accepted)}{kafka_note}."
        )


def _strategy(opts: Mapping[str, str]) -> ConsumerStrategy:
    specified = [name for name in STRATEGY_OPTIONS if name.lower() in opts]
    names = ", ".join(name.lower() for name in STRATEGY_OPTIONS)
    if not specified:
        raise ValueError(
            "One of the following options must be specified for Kafka "
            f"source: {names}. See the docs for more details."
        )
    if len(specified) > 1:
        raise ValueError(
            "Only one of the following options can be specified for Kafka "
            f"source: {names}. See the docs for more details."
        )
    name = specified[0]
    value = opts[name.lower()]
    if name == ASSIGN:
        if not value.strip().startswith("{"):
            raise ValueError(
                f"No topicpartitions to assign as specified value for option 'assign' is '{value}'"
            )
        return AssignStrategy(parse_partitions(value))
    if name == SUBSCRIBE:
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise ValueError(
                f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'"
            )
        return SubscribeStrategy(topics)
    pattern = value.strip()
    if not pattern:
        raise ValueError(
            "Pattern to subscribe is empty as specified value for option "
            f"'subscribePattern' is '{value}'"
        )
    try:
        re.compile(pattern)
    except re.error as e:
        raise ValueError(f"Invalid regex '{pattern}' for option 'subscribePattern': {e}") from None
    return SubscribePatternStrategy(pattern)


def _offset_range_limit(
    opts, global_timestamp_option, timestamps_option, offsets_option, strategy_on_no_match
) -> OffsetRangeLimit | None:
    # Spark's order of preference: one timestamp for all partitions, then a
    # timestamp per partition, then offsets.
    if global_timestamp_option and global_timestamp_option.lower() in opts:
        value = opts[global_timestamp_option.lower()].strip()
        try:
            return GlobalTimestampRangeLimit(int(value), strategy_on_no_match)
        except ValueError:
            raise ValueError(f"Expected a single long value, got {value}") from None
    if timestamps_option and timestamps_option.lower() in opts:
        return SpecificTimestampRangeLimit(
            parse_partition_timestamps(opts[timestamps_option.lower()].strip()),
            strategy_on_no_match,
        )
    value = opts.get(offsets_option.lower())
    if value is None:
        return None
    value = value.strip()
    if value.lower() == "latest":
        return LatestOffsetRangeLimit()
    if value.lower() == "earliest":
        return EarliestOffsetRangeLimit()
    return SpecificOffsetRangeLimit(parse_partition_offsets(value))


def _check_offset_limit_validity(start: OffsetRangeLimit, end: OffsetRangeLimit) -> None:
    if isinstance(start, SpecificOffsetRangeLimit) and isinstance(end, SpecificOffsetRangeLimit):
        _check_same_partitions_and_order(start.partition_offsets, end.partition_offsets, "offset")
    elif isinstance(start, SpecificTimestampRangeLimit) and isinstance(
        end, SpecificTimestampRangeLimit
    ):
        _check_same_partitions_and_order(start.topic_timestamps, end.topic_timestamps, "timestamp")


def _check_same_partitions_and_order(start: Mapping, end: Mapping, what: str) -> None:
    if set(start) != set(end):
        raise ValueError(
            "[MISMATCHED_TOPIC_PARTITIONS_BETWEEN_START_OFFSET_AND_END_OFFSET] The specified "
            "start offset and end offset should have the same topic-partitions. "
            f"Topic-partitions for start offset: {_tp_set(start)}, "
            f"topic-partitions for end offset: {_tp_set(end)}."
        )
    for tp in sorted(start):
        # Sentinels (negative) are resolved later and cannot be compared yet.
        if start[tp] > end[tp] >= 0 and start[tp] >= 0:
            code = "[UNRESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET] " if what == "offset" else ""
            raise ValueError(
                f"{code}The specified start {what} {start[tp]} is greater than the end "
                f"{what} {end[tp]} for topic {tp.topic} partition {tp.partition}."
            )


def _tp_set(partitions) -> str:
    return "{" + ", ".join(str(tp) for tp in sorted(partitions)) + "}"


def _partition_map(value: str) -> dict:
    parsed = json.loads(value)
    if not isinstance(parsed, dict):
        raise TypeError
    result = {}
    for topic, per_partition in parsed.items():
        if not isinstance(per_partition, dict):
            raise TypeError
        for partition, number in per_partition.items():
            result[TopicPartition(topic, _json_int(partition))] = _json_int(number)
    return result


def _json_int(value) -> int:
    # Jackson reads "0" and 0 as an Int key alike; refuse floats and booleans.
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError
    return int(value)


def _json_list(value) -> list:
    if not isinstance(value, list):
        raise TypeError
    return value


def _boolean_option(opts: Mapping[str, str], name: str, default: bool) -> bool:
    value = opts.get(name.lower())
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"Invalid value '{value}' for option '{name}': expected true or false")
    return lowered == "true"


@overload
def _long_option(opts: Mapping[str, str], name: str) -> int | None: ...
@overload
def _long_option(opts: Mapping[str, str], name: str, default: int) -> int: ...
def _long_option(opts: Mapping[str, str], name: str, default: int | None = None) -> int | None:
    value = opts.get(name.lower())
    if value is None:
        return default
    try:
        return int(value.strip())
    except ValueError:
        raise ValueError(
            f"Invalid value '{value}' for option '{name}': expected an integer"
        ) from None


def _min_partitions(opts: Mapping[str, str]) -> int | None:
    value = _long_option(opts, MIN_PARTITIONS)
    if value is not None and value <= 0:
        raise ValueError("minPartitions must be positive")
    return value


def _enum_option(opts, name, enum_type, default):
    value = opts.get(name.lower())
    if value is None:
        return default
    try:
        return enum_type(value.strip().lower())
    except ValueError:
        choices = " or ".join(repr(m.value) for m in enum_type)
        raise ValueError(
            f"Invalid value '{value}' for option '{name}': expected {choices}"
        ) from None
