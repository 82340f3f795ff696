"""Option parsing of the kfast data sources against Spark's Kafka source rules."""

import json
import logging
import pickle
import re

import pytest

from kfast.client import Fetcher
from kfast.client.fetcher import READ_COMMITTED, READ_UNCOMMITTED
from kfast_spark.options import (
    KAFKA_SOURCE_OPTIONS,
    AssignStrategy,
    EarliestOffsetRangeLimit,
    GlobalTimestampRangeLimit,
    KafkaConsumerSettings,
    LatestOffsetRangeLimit,
    SpecificOffsetRangeLimit,
    SpecificTimestampRangeLimit,
    StrategyOnNoMatchStartingOffset,
    SubscribePatternStrategy,
    SubscribeStrategy,
    TopicPartition,
    parse_kafka_sink_options,
    parse_kafka_source_options,
    parse_partition_offsets_json,
    parse_segments_source_options,
    parse_time_as_ms,
    partition_offsets_json,
)

pytestmark = pytest.mark.spark

BOOTSTRAP = {"kafka.bootstrap.servers": "localhost:9092"}


def kafka(**options):
    return parse_kafka_source_options({**BOOTSTRAP, **options})


def tp(topic, partition):
    return TopicPartition(topic, partition)


# --- subscription strategies -------------------------------------------------


def test_subscribe_splits_trims_and_drops_empty_topic_names():
    opts = kafka(subscribe=" a, b ,,c ")
    assert opts.strategy == SubscribeStrategy(("a", "b", "c"))


def test_assign_parses_partitions_json():
    opts = kafka(assign='{"t1":[0,2],"t2":[1]}')
    assert opts.strategy == AssignStrategy((tp("t1", 0), tp("t1", 2), tp("t2", 1)))


def test_subscribe_pattern_matches_whole_topic_names():
    strategy = kafka(subscribePattern="topic.*").strategy
    assert strategy == SubscribePatternStrategy("topic.*")
    available = {"topic1": [0, 1], "topicX": [0], "mytopic": [0]}
    assert strategy.assigned(available) == [tp("topic1", 0), tp("topic1", 1), tp("topicX", 0)]


def test_patterns_leave_internal_topics_out_but_subscribe_can_name_them():
    available = {"__consumer_offsets": [0], "__transaction_state": [0], "__mine": [0]}
    assert kafka(subscribePattern="__.*").strategy.assigned(available) == [tp("__mine", 0)]
    assert kafka(subscribe="__consumer_offsets").strategy.assigned(available) == [
        tp("__consumer_offsets", 0)
    ]


def test_subscribe_assigns_only_existing_topics():
    strategy = kafka(subscribe="a,missing").strategy
    assert strategy.assigned({"a": [1, 0], "b": [0]}) == [tp("a", 0), tp("a", 1)]


def test_assign_keeps_partitions_that_do_not_exist():
    # Assign means exactly these partitions; a missing one is reported when
    # the offsets are resolved, not silently dropped here.
    strategy = kafka(assign='{"a":[5]}').strategy
    assert strategy.assigned({"a": [0]}) == [tp("a", 5)]


def test_no_strategy_is_refused():
    with pytest.raises(
        ValueError,
        match="One of the following options must be specified "
        "for Kafka source: assign, subscribe, subscribepattern",
    ):
        kafka()


@pytest.mark.parametrize("extra", [{"assign": '{"a":[0]}'}, {"subscribePattern": "a.*"}])
def test_two_strategies_are_refused(extra):
    with pytest.raises(ValueError, match="Only one of the following options can be specified"):
        kafka(subscribe="a", **extra)


@pytest.mark.parametrize(
    "options, message",
    [
        (
            {"subscribe": " , "},
            "No topics to subscribe to as specified value for option 'subscribe'",
        ),
        ({"subscribePattern": "  "}, "Pattern to subscribe is empty"),
        (
            {"assign": "a:0"},
            "No topicpartitions to assign as specified value for option 'assign' is 'a:0'",
        ),
        ({"assign": '{"a":0}'}, 'Expected e.g. {"topicA":\\[0,1\\],"topicB":\\[0,1\\]}, got'),
        ({"subscribePattern": "a("}, "Invalid regex 'a\\(' for option 'subscribePattern'"),
    ],
)
def test_bad_strategy_values_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        kafka(**options)


# --- names: case, unknown options, kafka.* -----------------------------------


def test_option_names_are_case_insensitive():
    opts = parse_kafka_source_options(
        {
            "KAFKA.BOOTSTRAP.SERVERS": "h:1",
            "SubScribe": "a",
            "INCLUDEHEADERS": "TRUE",
            "startingoffsets": "EARLIEST",
        }
    )
    assert opts.strategy == SubscribeStrategy(("a",))
    assert opts.include_headers is True
    assert opts.starting_offsets == EarliestOffsetRangeLimit()
    assert opts.kafka_params == {"bootstrap.servers": "h:1"}


def test_unknown_options_are_refused_by_name():
    with pytest.raises(ValueError) as info:
        kafka(subscribe="a", startingOffset="earliest", topic="x")
    message = str(info.value)
    assert "Unknown options for the kfast source: 'startingoffset', 'topic'" in message
    assert "startingOffsets" in message  # the accepted list helps fix the typo


def test_every_documented_spark_option_is_accepted():
    values = {
        "startingOffsets": "earliest",
        "endingOffsets": "latest",
        "startingOffsetsByTimestamp": '{"a":{"0":1}}',
        "endingOffsetsByTimestamp": '{"a":{"0":2}}',
        "startingTimestamp": "1",
        "endingTimestamp": "2",
        "startingOffsetsByTimestampStrategy": "latest",
        "failOnDataLoss": "false",
        "minPartitions": "3",
        "maxOffsetsPerTrigger": "10",
        "minOffsetsPerTrigger": "5",
        "maxTriggerDelay": "30s",
        "includeHeaders": "true",
        "groupIdPrefix": "p",
        "kafkaConsumer.pollTimeoutMs": "500",
        "fetchOffset.numRetries": "1",
        "fetchOffset.retryIntervalMs": "20",
    }
    assert set(values) | {"subscribe", "subscribePattern", "assign"} == set(KAFKA_SOURCE_OPTIONS)
    opts = kafka(subscribe="a", **values)
    assert opts.fail_on_data_loss is False
    assert opts.min_partitions == 3
    assert (opts.max_offsets_per_trigger, opts.min_offsets_per_trigger) == (10, 5)
    assert opts.max_trigger_delay_ms == 30_000
    assert opts.group_id_prefix == "p"
    assert (
        opts.poll_timeout_ms,
        opts.fetch_offset_num_retries,
        opts.fetch_offset_retry_interval_ms,
    ) == (500, 1, 20)
    # startingTimestamp takes precedence over the other two starting options.
    assert opts.starting_offsets == GlobalTimestampRangeLimit(
        1, StrategyOnNoMatchStartingOffset.LATEST
    )
    assert opts.ending_offsets == GlobalTimestampRangeLimit(
        2, StrategyOnNoMatchStartingOffset.LATEST
    )


def test_defaults_are_sparks():
    opts = kafka(subscribe="a")
    assert opts.include_headers is False
    assert opts.fail_on_data_loss is True
    assert opts.min_partitions is None
    assert opts.max_trigger_delay_ms == 15 * 60 * 1000
    assert (opts.fetch_offset_num_retries, opts.fetch_offset_retry_interval_ms) == (3, 10)
    assert opts.batch_offsets() == (EarliestOffsetRangeLimit(), LatestOffsetRangeLimit())
    assert opts.streaming_starting_offsets() == LatestOffsetRangeLimit()


def test_kafka_params_lose_their_prefix():
    opts = kafka(subscribe="a", **{"kafka.security.protocol": "PLAINTEXT", "kafka.group.id": "g"})
    assert opts.kafka_params == {
        "bootstrap.servers": "localhost:9092",
        "security.protocol": "PLAINTEXT",
        "group.id": "g",
    }


# --- kafka.* consumer properties of a read ---------------------------------------


def test_consumer_properties_map_onto_kfasts_client():
    opts = kafka(
        subscribe="a",
        **{
            "kafka.client.id": "nightly-etl",
            "kafka.request.timeout.ms": "5000",
            "kafka.default.api.timeout.ms": "7000",
            "kafka.retry.backoff.ms": "50",
            "kafka.retry.backoff.max.ms": "600",
            "kafka.fetch.max.bytes": "1000000",
            "kafka.max.partition.fetch.bytes": "2000",
            "kafka.fetch.min.bytes": "3",
            "kafka.fetch.max.wait.ms": "40",
            "kafka.check.crcs": "false",
            "kafka.security.protocol": "plaintext",
            "kafka.isolation.level": "read_uncommitted",
        },
    )
    assert opts.consumer == KafkaConsumerSettings(
        client_id="nightly-etl",
        request_timeout_ms=5000,
        default_api_timeout_ms=7000,
        retry_backoff_ms=50,
        retry_backoff_max_ms=600,
        fetch_max_bytes=1_000_000,
        max_partition_fetch_bytes=2000,
        fetch_min_bytes=3,
        fetch_max_wait_ms=40,
        check_crcs=False,
    )
    # The arguments are the client's own: a Fetcher built from them carries them.
    fetcher = Fetcher("localhost:9092", **opts.consumer.client_arguments())
    cluster = fetcher.cluster
    assert (
        cluster.client_id,
        cluster.request_timeout,
        cluster.metadata_timeout,
        cluster.retry_backoff,
        cluster.retry_backoff_max,
    ) == ("nightly-etl", 5.0, 7.0, 0.05, 0.6)
    assert (fetcher.max_bytes, fetcher.min_bytes) == (1_000_000, 3)
    assert fetcher.isolation_level == READ_UNCOMMITTED


def test_tls_and_sasl_reach_the_client_of_every_process(tmp_path):
    from kfast.testing.certificates import TestCA

    ca = TestCA(str(tmp_path))
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="alice" password="alice-secret";'
    )
    opts = kafka(
        subscribe="a",
        **{
            "kafka.security.protocol": "sasl_ssl",
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": ca.cert_path,
            "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.jaas.config": jaas,
        },
    )
    # Carried as the strings given (an SSL context does not pickle), never shown.
    assert dict(opts.consumer.security)["sasl.jaas.config"] == jaas
    assert "alice-secret" not in repr(opts.consumer)
    settings = pickle.loads(pickle.dumps(opts.consumer))
    security = Fetcher("localhost:9092", **settings.client_arguments()).cluster.security
    assert security.protocol == "SASL_SSL"
    assert security.ssl_context is not None
    assert (security.mechanism, security.username) == ("PLAIN", "alice")


def test_read_committed_reaches_the_client():
    opts = kafka(subscribe="a", **{"kafka.isolation.level": "read_committed"})
    assert opts.consumer.read_committed
    fetcher = Fetcher("localhost:9092", **opts.consumer.client_arguments())
    assert fetcher.isolation_level == READ_COMMITTED


def test_without_consumer_properties_the_client_keeps_its_defaults():
    assert kafka(subscribe="a").consumer == KafkaConsumerSettings()
    assert KafkaConsumerSettings().client_arguments() == {"client_id": "kfast"}


def test_consumer_group_and_socket_properties_are_accepted_without_effect(caplog):
    with caplog.at_level(logging.INFO, logger="kfast_spark.options"):
        opts = kafka(
            subscribe="a",
            **{
                "kafka.session.timeout.ms": "10000",
                "kafka.max.poll.records": "500",
                "kafka.receive.buffer.bytes": "65536",
            },
        )
    assert opts.consumer == KafkaConsumerSettings()
    assert "kafka.max.poll.records" in caplog.text and "without effect" in caplog.text


@pytest.mark.parametrize(
    "options, message",
    [
        # Kafka's ConfigException message, behind the option's name.
        (
            {"kafka.security.protocol": "SASL_SSL"},
            "Kafka option 'kafka.sasl.mechanism' refused by the kfast source: Invalid value GSSAPI "
            "for configuration sasl.mechanism: not supported",
        ),
        (
            {"kafka.security.protocol": "TLS"},
            "Invalid value TLS for configuration security.protocol: String must be one of: PLAINTEXT",
        ),
        (
            {"kafka.security.protocol": "SSL", "kafka.ssl.truststore.location": "/nonexistent.jks"},
            "Kafka option 'kafka.ssl.truststore.location' refused by the kfast source: Invalid value "
            "/nonexistent.jks for configuration ssl.truststore.location: cannot read the file",
        ),
        (
            {"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN"},
            "'kafka.sasl.jaas.config' refused by the kfast source: Invalid value None for "
            "configuration sasl.jaas.config: set it for PLAIN",
        ),
        (
            {
                "kafka.security.protocol": "SASL_PLAINTEXT",
                "kafka.sasl.mechanism": "PLAIN",
                "kafka.sasl.jaas.config": "password=secret",
            },
            "Invalid value [hidden] for configuration sasl.jaas.config: Invalid JAAS config",
        ),
        ({"kafka.ssl.keymanager.algorithm": "PKIX"}, "not a TLS or SASL setting kfast's client"),
        (
            {"kafka.isolation.level": "snapshot"},
            "Invalid value snapshot for configuration isolation.level: String must be one of: "
            "read_uncommitted, read_committed",
        ),
        # Strict: a name the consumer does not define (a typo, or a producer's).
        (
            {"kafka.fetch.max.byte": "1"},
            "Kafka option 'kafka.fetch.max.byte' refused by the kfast source: Invalid value 1 for "
            "configuration fetch.max.byte: not a known consumer configuration",
        ),
        ({"kafka.acks": "all"}, "configuration acks: not a known consumer configuration"),
        (
            {"kafka.request.timeout.ms": "-1"},
            "Invalid value -1 for configuration request.timeout.ms: Value must be at least 0",
        ),
        (
            {"kafka.max.partition.fetch.bytes": "1MB"},
            "Invalid value 1MB for configuration max.partition.fetch.bytes",
        ),
        (
            {"kafka.check.crcs": "yes"},
            "Invalid value yes for configuration check.crcs: Expected value to be either true or false",
        ),
    ],
)
def test_consumer_properties_kfast_cannot_honour_are_refused_by_name(options, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        kafka(subscribe="a", **options)


def test_bootstrap_servers_are_required():
    with pytest.raises(
        ValueError,
        match="Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer",
    ):
        parse_kafka_source_options({"subscribe": "a"})


@pytest.mark.parametrize(
    "prop",
    [
        "auto.offset.reset",
        "key.deserializer",
        "value.deserializer",
        "enable.auto.commit",
        "interceptor.classes",
    ],
)
def test_client_properties_spark_refuses_are_refused(prop):
    with pytest.raises(ValueError, match=f"Kafka option '{prop}' is not supported"):
        kafka(subscribe="a", **{f"kafka.{prop}": "x"})


def test_group_id_is_accepted_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="kfast_spark.options"):
        kafka(subscribe="a", **{"kafka.group.id": "g", "groupIdPrefix": "p"})
    assert "kafka.group.id" in caplog.text and "groupIdPrefix will be ignored" in caplog.text


# --- values --------------------------------------------------------------------


@pytest.mark.parametrize(
    "options, message",
    [
        ({"minPartitions": "0"}, "minPartitions must be positive"),
        ({"minPartitions": "-3"}, "minPartitions must be positive"),
        ({"minPartitions": "two"}, "Invalid value 'two' for option 'minPartitions'"),
        ({"includeHeaders": "yes"}, "Invalid value 'yes' for option 'includeHeaders'"),
        ({"failOnDataLoss": "1"}, "Invalid value '1' for option 'failOnDataLoss'"),
        ({"maxOffsetsPerTrigger": "1e3"}, "Invalid value '1e3' for option 'maxOffsetsPerTrigger'"),
        (
            {"maxOffsetsPerTrigger": "5", "minOffsetsPerTrigger": "6"},
            "The value of minOffsetPerTrigger\\(6\\) is higher than the maxOffsetsPerTrigger\\(5\\)",
        ),
        ({"maxTriggerDelay": "soon"}, "Invalid value 'soon' for option 'maxTriggerDelay'"),
        (
            {"startingOffsetsByTimestampStrategy": "earliest"},
            "Invalid value 'earliest' for option 'startingOffsetsByTimestampStrategy'",
        ),
        ({"startingTimestamp": "noon"}, "Expected a single long value, got noon"),
        (
            {"startingOffsets": "first"},
            'Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}, got first',
        ),
        ({"endingOffsets": '{"a":{"0":1.5}}'}, "Expected e.g."),
        ({"startingOffsetsByTimestamp": '{"a":[1]}'}, 'Expected e.g. {"topicA": {"0": 123456789'),
    ],
)
def test_bad_values_are_refused_naming_the_option(options, message):
    with pytest.raises(ValueError, match=message):
        kafka(subscribe="a", **options)


def test_offsets_json_with_sentinels():
    opts = kafka(
        subscribe="a,b",
        startingOffsets='{"a":{"0":23,"1":-2},"b":{"0":-2}}',
        endingOffsets='{"a":{"0":50,"1":-1},"b":{"0":-1}}',
    )
    start, end = opts.batch_offsets()
    assert start == SpecificOffsetRangeLimit({tp("a", 0): 23, tp("a", 1): -2, tp("b", 0): -2})
    assert end == SpecificOffsetRangeLimit({tp("a", 0): 50, tp("a", 1): -1, tp("b", 0): -1})


def test_timestamps_per_partition_and_precedence_over_offsets():
    opts = kafka(
        subscribe="a", startingOffsetsByTimestamp='{"a":{"0":1000}}', startingOffsets="earliest"
    )
    assert opts.starting_offsets == SpecificTimestampRangeLimit(
        {tp("a", 0): 1000}, StrategyOnNoMatchStartingOffset.ERROR
    )


@pytest.mark.parametrize(
    "value, ms",
    [
        ("15m", 900_000),
        ("250", 250),
        ("2s", 2000),
        ("1h", 3_600_000),
        ("1d", 86_400_000),
        ("3min", 180_000),
    ],
)
def test_durations(value, ms):
    assert parse_time_as_ms(value, "maxTriggerDelay") == ms


# --- batch / streaming rules ---------------------------------------------------


@pytest.mark.parametrize(
    "options, message",
    [
        (
            {"startingOffsets": "latest"},
            "starting offset can't be latest for batch queries on Kafka",
        ),
        (
            {"startingOffsets": '{"a":{"0":-1}}'},
            "startingOffsets for a-0 can't be latest for batch queries on Kafka",
        ),
        (
            {"endingOffsets": "earliest"},
            "ending offset can't be earliest for batch queries on Kafka",
        ),
        (
            {"endingOffsets": '{"a":{"0":-2}}'},
            "ending offset for a-0 can't be earliest for batch queries on Kafka",
        ),
        (
            {"startingOffsets": '{"a":{"0":1}}', "endingOffsets": '{"a":{"0":5,"1":5}}'},
            "MISMATCHED_TOPIC_PARTITIONS_BETWEEN_START_OFFSET_AND_END_OFFSET.*"
            "start offset: {a-0}, topic-partitions for end offset: {a-0, a-1}",
        ),
        (
            {"startingOffsets": '{"a":{"0":9}}', "endingOffsets": '{"a":{"0":5}}'},
            "The specified start offset 9 is greater than the end offset 5 for topic a partition 0",
        ),
        (
            {
                "startingOffsetsByTimestamp": '{"a":{"0":9}}',
                "endingOffsetsByTimestamp": '{"b":{"0":9}}',
            },
            "should have the same topic-partitions",
        ),
        (
            {
                "startingOffsetsByTimestamp": '{"a":{"0":9}}',
                "endingOffsetsByTimestamp": '{"a":{"0":5}}',
            },
            "The specified start timestamp 9 is greater than the end timestamp 5",
        ),
    ],
)
def test_batch_rules(options, message):
    opts = kafka(subscribe="a", **options)  # parses: these are batch-only rules
    with pytest.raises(ValueError, match=message):
        opts.batch_offsets()


def test_batch_allows_sentinel_start_above_specific_end():
    # -2 resolves later; Spark does not compare sentinels with offsets.
    opts = kafka(subscribe="a", startingOffsets='{"a":{"0":-2}}', endingOffsets='{"a":{"0":5}}')
    assert opts.batch_offsets()[1] == SpecificOffsetRangeLimit({tp("a", 0): 5})


def test_batch_ignores_trigger_options_with_a_warning(caplog):
    opts = kafka(subscribe="a", maxOffsetsPerTrigger="10")
    with caplog.at_level(logging.WARNING, logger="kfast_spark.options"):
        opts.batch_offsets()
    assert "maxOffsetsPerTrigger option ignored in batch queries" in caplog.text


@pytest.mark.parametrize(
    "options, message",
    [
        ({"endingOffsets": "latest"}, "ending offset not valid in streaming queries"),
        (
            {"endingOffsetsByTimestamp": '{"a":{"0":1}}'},
            "ending timestamp not valid in streaming queries",
        ),
        ({"endingTimestamp": "5"}, "ending timestamp not valid in streaming queries"),
    ],
)
def test_streaming_refuses_ending_options(options, message):
    opts = kafka(subscribe="a", **options)
    with pytest.raises(ValueError, match=message):
        opts.streaming_starting_offsets()


def test_streaming_allows_latest_start():
    assert (
        kafka(subscribe="a", startingOffsets="latest").streaming_starting_offsets()
        == LatestOffsetRangeLimit()
    )


# --- the offline source --------------------------------------------------------


def test_segments_options():
    opts = parse_segments_source_options(
        {
            "path": " /data/kafka ",
            "subscribe": "a",
            "startingOffsets": '{"a":{"0":3}}',
            "includeHeaders": "true",
            "minPartitions": "4",
            "failOnDataLoss": "false",
        }
    )
    assert opts.path == "/data/kafka"
    assert opts.strategy == SubscribeStrategy(("a",))
    assert opts.include_headers and not opts.fail_on_data_loss and opts.min_partitions == 4
    assert opts.batch_offsets() == (
        SpecificOffsetRangeLimit({tp("a", 0): 3}),
        LatestOffsetRangeLimit(),
    )


def test_segments_accepts_timestamps():
    opts = parse_segments_source_options(
        {
            "path": "/d",
            "subscribe": "a",
            "startingTimestamp": "1000",
            "endingOffsetsByTimestamp": '{"a":{"0":2000}}',
            "startingOffsetsByTimestampStrategy": "latest",
        }
    )
    assert opts.batch_offsets() == (
        GlobalTimestampRangeLimit(1000, StrategyOnNoMatchStartingOffset.LATEST),
        SpecificTimestampRangeLimit({tp("a", 0): 2000}, StrategyOnNoMatchStartingOffset.LATEST),
    )


def test_segments_requires_path():
    with pytest.raises(ValueError, match="Option 'path' must be specified for the kfast-segments"):
        parse_segments_source_options({"subscribe": "a"})


@pytest.mark.parametrize(
    "name", ["kafka.bootstrap.servers", "groupIdPrefix", "maxOffsetsPerTrigger"]
)
def test_segments_refuses_broker_only_options(name):
    with pytest.raises(
        ValueError, match=f"Unknown option for the kfast-segments source: '{name.lower()}'"
    ):
        parse_segments_source_options({"path": "/d", "subscribe": "a", name: "1"})


def test_offsets_json_round_trip():
    offsets = {tp("b", 1): 7, tp("a", 10): 1, tp("a", 2): 3}
    as_json = partition_offsets_json(offsets)
    assert as_json == {"a": {"2": 3, "10": 1}, "b": {"1": 7}}
    assert parse_partition_offsets_json(json.loads(json.dumps(as_json))) == offsets


# --- writing -------------------------------------------------------------------


def test_sink_options():
    opts = parse_kafka_sink_options({**BOOTSTRAP, "Topic": " out ", "kafka.acks": "all"})
    assert opts.topic == "out"
    assert opts.include_headers is False
    assert opts.kafka_params == {"bootstrap.servers": "localhost:9092", "acks": "all"}
    assert parse_kafka_sink_options(BOOTSTRAP).topic is None


@pytest.mark.parametrize(
    "options, message",
    [
        ({"subscribe": "a"}, "Unknown option for the kfast sink: 'subscribe'"),
        ({"kafka.key.serializer": "x"}, "Kafka option 'key.serializer' is not supported as keys"),
        ({"kafka.value.serializer": "x"}, "Kafka option 'value.serializer' is not supported"),
    ],
)
def test_sink_refuses(options, message):
    with pytest.raises(ValueError, match=message):
        parse_kafka_sink_options({**BOOTSTRAP, **options})


def test_sink_requires_bootstrap_servers():
    with pytest.raises(ValueError, match="'kafka.bootstrap.servers' must be specified"):
        parse_kafka_sink_options({"topic": "t"})


# --- the sink's producer properties: lenient, as Kafka's producer ------------------


def _sink_producer_arguments(**kafka):
    from kfast_spark.sink import producer_arguments

    return producer_arguments(
        parse_kafka_sink_options(
            {**BOOTSTRAP, "topic": "t", **{f"kafka.{name}": value for name, value in kafka.items()}}
        )
    )


def test_sink_ignores_unknown_producer_properties_with_kafkas_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="kfast.client.properties"):
        arguments = _sink_producer_arguments(
            **{"linger.mss": "5", "fetch.min.bytes": "1", "compression.type": "lz4"}
        )
    assert arguments == {
        "acks": -1,
        "retries": 2**31 - 1,
        "delivery_timeout_ms": 120_000,
        "compression": 3,
    }
    assert "The configuration 'linger.mss' was supplied but isn't a known config." in caplog.text


@pytest.mark.parametrize(
    "props, message",
    [
        (
            {"acks": "2"},
            "Kafka option 'kafka.acks' refused by the kfast sink: Invalid value 2 for "
            "configuration acks: String must be one of: all, -1, 0, 1",
        ),
        (
            {"security.protocol": "SSL", "ssl.truststore.location": "/nonexistent.pem"},
            "Invalid value /nonexistent.pem for configuration ssl.truststore.location: cannot "
            "read the file",
        ),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": "x"},
            "Invalid value [hidden] for configuration sasl.jaas.config",
        ),
    ],
)
def test_sink_refuses_invalid_values_and_broken_tls_sasl_settings(props, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        _sink_producer_arguments(**props)
