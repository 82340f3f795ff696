"""kfast.config: Kafka property names, defaults, precedence and validation."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfast.config import (
    LONG_MAX,
    SERVER_CONFIGS,
    TOPIC_CONFIGS,
    ConfigException,
    KafkaConfig,
    LogConfig,
    parse_properties,
)


def test_kafka_defaults():
    config = KafkaConfig()
    assert config["log.segment.bytes"] == 1073741824
    assert config["log.index.size.max.bytes"] == 10485760
    assert config["log.index.interval.bytes"] == 4096
    assert config["log.retention.bytes"] == -1
    assert config["log.retention.check.interval.ms"] == 300000
    assert config["log.flush.interval.messages"] == LONG_MAX
    assert config["log.segment.delete.delay.ms"] == 60000
    assert config["message.max.bytes"] == 1048588
    assert config["num.partitions"] == 1
    assert config["socket.request.max.bytes"] == 104857600
    assert config["offsets.topic.num.partitions"] == 50
    assert config["offsets.retention.minutes"] == 10080
    assert config["group.initial.rebalance.delay.ms"] == 3000
    assert config["auto.create.topics.enable"] is True
    assert config["log.cleanup.policy"] == ["delete"]
    assert config.log_retention_ms == 168 * 3600 * 1000
    assert config.log_roll_ms == 168 * 3600 * 1000
    assert config.log_roll_jitter_ms == 0
    assert config.log_flush_interval_ms == config["log.flush.scheduler.interval.ms"]
    assert config.log_dirs == ["/tmp/kafka-logs"]


def test_retention_precedence():
    assert KafkaConfig({"log.retention.hours": "1"}).log_retention_ms == 3600000
    assert (
        KafkaConfig({"log.retention.hours": "1", "log.retention.minutes": "2"}).log_retention_ms
        == 120000
    )
    assert (
        KafkaConfig(
            {"log.retention.hours": "1", "log.retention.minutes": "2", "log.retention.ms": "5"}
        ).log_retention_ms
        == 5
    )
    assert KafkaConfig({"log.retention.ms": "-5"}).log_retention_ms == -1


def test_roll_and_flush_precedence():
    config = KafkaConfig(
        {
            "log.roll.hours": "2",
            "log.roll.jitter.hours": "1",
            "log.flush.scheduler.interval.ms": "7",
        }
    )
    assert config.log_roll_ms == 7200000 and config.log_roll_jitter_ms == 3600000
    assert config.log_flush_interval_ms == 7
    config = KafkaConfig({"log.roll.hours": "2", "log.roll.ms": "9", "log.flush.interval.ms": "3"})
    assert config.log_roll_ms == 9 and config.log_flush_interval_ms == 3


def test_server_properties_text():
    text = """
# a comment
! another comment
node.id=3
log.dirs = /data/a,/data/b
listeners: PLAINTEXT://localhost:9092
log.retention.hours 24
advertised.listeners=PLAINTEXT://\\
  host:9092
"""
    config = KafkaConfig.from_properties_text(text)
    assert config.node_id == 3
    assert config.log_dirs == ["/data/a", "/data/b"]
    assert config["listeners"] == ["PLAINTEXT://localhost:9092"]
    assert config.log_retention_ms == 86400000
    assert config["advertised.listeners"] == ["PLAINTEXT://host:9092"]


def test_unknown_and_invalid_properties_are_named():
    with pytest.raises(ConfigException, match="log.segmnet.bytes"):
        KafkaConfig({"log.segmnet.bytes": "1"})
    with pytest.raises(ConfigException, match="log.segment.bytes"):
        KafkaConfig({"log.segment.bytes": "10"})  # below Kafka's 1 MiB minimum
    with pytest.raises(ConfigException, match="num.partitions"):
        KafkaConfig({"num.partitions": "many"})
    with pytest.raises(ConfigException, match="log.message.timestamp.type"):
        KafkaConfig({"log.message.timestamp.type": "WallClock"})
    with pytest.raises(ConfigException, match="auto.create.topics.enable"):
        KafkaConfig({"auto.create.topics.enable": "yes"})
    with pytest.raises(ConfigException, match="log.cleanup.policy"):
        KafkaConfig({"log.cleanup.policy": "delete,shred"})
    with pytest.raises(ConfigException, match="message.max.bytes"):
        KafkaConfig({"message.max.bytes": str(2**31)})  # not an INT
    # Prefixed families are accepted and kept aside.
    assert KafkaConfig({"listener.name.internal.ssl.keystore.location": "x"}).extra


def test_log_config_inherits_broker_synonyms():
    broker = KafkaConfig(
        {
            "log.segment.bytes": str(2 * 1024 * 1024),
            "log.retention.minutes": "3",
            "log.roll.hours": "1",
            "log.segment.delete.delay.ms": "5",
            "message.max.bytes": "100",
            "log.cleanup.policy": "compact",
            "log.message.timestamp.type": "LogAppendTime",
        }
    )
    config = LogConfig.from_broker(broker)
    assert config.segment_bytes == 2 * 1024 * 1024
    assert config.retention_ms == 180000
    assert config.segment_ms == 3600000
    assert config.file_delete_delay_ms == 5
    assert config.max_message_bytes == 100
    assert config.compact and not config.delete
    assert config.log_append_time
    assert config.flush_ms == LONG_MAX  # log.flush.scheduler.interval.ms default
    topic = LogConfig.from_broker(broker, {"retention.ms": "10", "segment.bytes": 1048576})
    assert topic.retention_ms == 10 and topic.segment_bytes == 1048576
    assert topic.max_message_bytes == 100
    changed = topic.with_overrides({"retention.bytes": "5"})
    assert changed.retention_ms == 180000 and changed.retention_bytes == 5


def test_log_config_rejects_bad_topic_configs():
    with pytest.raises(ConfigException, match="retention.mss"):
        LogConfig({"retention.mss": "1"})
    with pytest.raises(ConfigException, match="min.cleanable.dirty.ratio"):
        LogConfig({"min.cleanable.dirty.ratio": "1.5"})
    with pytest.raises(ConfigException, match="segment.bytes"):
        LogConfig({"segment.bytes": "100"})


def test_every_synonym_names_a_topic_config():
    for key in SERVER_CONFIGS.values():
        if key.topic_synonym:
            assert key.topic_synonym in TOPIC_CONFIGS, key.name


@pytest.mark.slow
@given(
    st.dictionaries(
        st.from_regex(r"[a-z][a-z.]{0,20}", fullmatch=True),
        st.from_regex(r"[A-Za-z0-9/,:._-]{0,20}", fullmatch=True),
    )
)
def test_properties_round_trip(props):
    text = "\n".join(f"{k}={v}" for k, v in props.items())
    assert parse_properties(text) == props


KAFKA_4_SERVER_PROPERTIES = """
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


def test_stock_kafka_server_properties_are_accepted():
    config = KafkaConfig.from_properties_text(KAFKA_4_SERVER_PROPERTIES)
    assert config.node_id == 1 and config["process.roles"] == ["broker", "controller"]
    assert config.log_dirs == ["/tmp/kraft-combined-logs"]
    assert config["offsets.topic.replication.factor"] == 1
