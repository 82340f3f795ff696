"""Dynamic broker configs take effect live (Kafka's DynamicBrokerConfig):
IncrementalAlterConfigs on broker "1" or on the cluster default "" changes
the defaults of every log without a topic override, now and for logs
created later, and after a restart; DescribeConfigs reports the sources."""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from e2e_support import wait_until

from kfast.client.admin import KafkaAdmin
from kfast.controller.configuration_control import OP_DELETE, OP_SET
from kfast.protocol.constants import CONFIG_RESOURCE_BROKER
from kfast.testing import KfastBroker

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]
TIMEOUT = 15
MIB = 1024 * 1024


@pytest.fixture
def broker(tmp_path):
    # One broker per test: cluster-wide configs must not leak between tests.
    instance = KfastBroker({"num.partitions": 1}, data_dir=str(tmp_path / "data"))
    instance.start()
    yield instance
    instance.close()


@pytest.fixture
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def _result(futures):
    return {key: future.result(TIMEOUT) for key, future in futures.items()}


def _alter(admin, resource_type, name, **ops):
    """ops: key (dots as underscores) -> value, or None to DELETE."""
    entries = [
        ConfigEntry(
            key.replace("_", "."),
            value,
            incremental_operation=AlterConfigOpType.DELETE
            if value is None
            else AlterConfigOpType.SET,
        )
        for key, value in ops.items()
    ]
    _result(
        admin.incremental_alter_configs(
            [ConfigResource(resource_type, name, incremental_configs=entries)]
        )
    )


def _alter_cluster_default(broker, **ops):
    """The cluster-wide default (broker resource "", kafka-configs.sh
    --entity-default): neither confluent-kafka nor kafka-python can name it,
    so kfast's own admin client sends the IncrementalAlterConfigs."""

    async def alter():
        async with KafkaAdmin(broker.bootstrap_servers) as client:
            await client.incremental_alter_configs(
                CONFIG_RESOURCE_BROKER,
                "",
                {
                    key.replace("_", "."): (OP_DELETE, None) if value is None else (OP_SET, value)
                    for key, value in ops.items()
                },
            )
            return await client.describe_configs(CONFIG_RESOURCE_BROKER, [""])

    return {entry.name: entry for entry in asyncio.run(alter())[""]}


def _describe(admin, resource_type, name):
    [configs] = _result(admin.describe_configs([ConfigResource(resource_type, name)])).values()
    return configs


def _log(broker, topic, partition=0):
    return broker.call_soon(broker.broker.log_manager.get_log, topic, partition)


def _segment_files(broker, topic) -> list[str]:
    return sorted(f for f in os.listdir(_log(broker, topic).dir) if f.endswith(".log"))


def _produce(broker, topic, count, size):
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0, "batch.size": size + 1024}
    )
    for _ in range(count):
        producer.produce(topic, b"x" * size)
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0


def test_per_broker_segment_bytes_rolls_a_live_log(broker, admin, topic):
    _result(admin.create_topics([NewTopic(topic, 1, 1)]))
    assert _log(broker, topic).config.segment_bytes == 1024 * MIB
    _alter(admin, "broker", "1", log_segment_bytes=str(MIB))

    described = _describe(admin, "broker", "1")["log.segment.bytes"]
    assert (described.value, described.source) == (
        str(MIB),
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
    )
    described = _describe(admin, "topic", topic)["segment.bytes"]
    assert (described.value, described.source) == (
        str(MIB),
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
    )
    assert _log(broker, topic).config.segment_bytes == MIB

    _produce(broker, topic, 30, 100 * 1024)  # ~3 MiB: rolls at 1 MiB
    assert len(_segment_files(broker, topic)) >= 3

    # Deleting the override goes back to server.properties (1 GiB).
    _alter(admin, "broker", "1", log_segment_bytes=None)
    assert _log(broker, topic).config.segment_bytes == 1024 * MIB


def test_cluster_default_then_per_broker_then_topic_override(broker, admin, topic):
    _result(
        admin.create_topics(
            [
                NewTopic(topic, 1, 1),
                NewTopic(topic + "-own", 1, 1, config={"retention.ms": "777000"}),
            ]
        )
    )
    defaults = _alter_cluster_default(broker, log_retention_ms="3600000")
    assert defaults["log.retention.ms"].value == "3600000"
    retention = _describe(admin, "topic", topic)["retention.ms"]
    assert (retention.value, retention.source) == (
        "3600000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
    )
    assert _log(broker, topic).config.retention_ms == 3600000

    _alter(admin, "broker", "1", log_retention_ms="7200000")
    retention = _describe(admin, "topic", topic)["retention.ms"]
    assert (retention.value, retention.source) == (
        "7200000",
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
    )
    assert _log(broker, topic).config.retention_ms == 7200000

    # A topic override wins over every broker level.
    own = _describe(admin, "topic", topic + "-own")["retention.ms"]
    assert (own.value, own.source) == ("777000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert _log(broker, topic + "-own").config.retention_ms == 777000

    # A topic created afterwards starts with the dynamic default.
    _result(admin.create_topics([NewTopic(topic + "-new", 1, 1)]))
    assert _log(broker, topic + "-new").config.retention_ms == 7200000

    # Removing the per-broker level uncovers the cluster default.
    _alter(admin, "broker", "1", log_retention_ms=None)
    assert _log(broker, topic).config.retention_ms == 3600000
    assert _log(broker, topic + "-own").config.retention_ms == 777000


def test_dynamic_defaults_survive_a_restart(broker, admin, topic):
    _result(admin.create_topics([NewTopic(topic, 1, 1)]))
    _alter_cluster_default(broker, log_segment_bytes=str(2 * MIB), log_cleanup_policy="compact")
    broker.restart()
    log = _log(broker, topic)
    assert log.config.segment_bytes == 2 * MIB
    assert log.config.compact


def test_thread_pools_are_dynamic_and_static_configs_are_not(broker, admin):
    _alter(admin, "broker", "1", num_io_threads="4", max_connections_per_ip="1000")
    described = _describe(admin, "broker", "1")
    assert (described["num.io.threads"].value, described["num.io.threads"].source) == (
        "4",
        ConfigSource.DYNAMIC_BROKER_CONFIG.value,
    )
    assert not described["num.io.threads"].is_read_only
    assert described["log.dirs"].is_read_only
    [server] = broker.broker.socket_servers.values()
    assert server.max_connections_per_ip == 1000

    futures = admin.incremental_alter_configs(
        [
            ConfigResource(
                "broker",
                "1",
                incremental_configs=[
                    ConfigEntry(
                        "log.dirs", "/elsewhere", incremental_operation=AlterConfigOpType.SET
                    )
                ],
            )
        ]
    )
    with pytest.raises(KafkaException) as info:
        _result(futures)
    assert info.value.args[0].code() == KafkaError.INVALID_REQUEST


def test_the_log_cleaner_compacts_every_backoff_interval(tmp_path, topic):
    """log.cleaner.enable (default true) runs compaction passes every
    log.cleaner.backoff.ms, a dynamic config that takes effect at once
    (the default, 15 s, would outlast the wait below): older values of a
    key disappear from a compacted topic's rolled segments."""
    instance = KfastBroker(data_dir=str(tmp_path / "data"))
    instance.start()
    try:
        admin = AdminClient({"bootstrap.servers": instance.bootstrap_servers})
        _alter(admin, "broker", "1", log_cleaner_backoff_ms="100")
        _result(
            admin.create_topics(
                [
                    NewTopic(
                        topic,
                        1,
                        1,
                        config={
                            "cleanup.policy": "compact",
                            "min.cleanable.dirty.ratio": "0.01",
                            "segment.ms": "1",
                        },
                    )
                ]
            )
        )
        producer = Producer({"bootstrap.servers": instance.bootstrap_servers, "linger.ms": 0})
        first_timestamp = int(time.time() * 1000)
        for round_ in range(5):
            # One batch per round, 10 ms after the previous one: segment.ms=1
            # rolls a segment per round (rolls go by record timestamps), so
            # only the last round stays in the active, uncleanable segment.
            for key in (b"a", b"b"):
                producer.produce(
                    topic, key=key, value=b"%d" % round_, timestamp=first_timestamp + 10 * round_
                )
            assert producer.flush(TIMEOUT) == 0
        log = _log(instance, topic)

        def records_left():
            return sum(1 for _ in _read_all(instance, log))

        wait_until(lambda: records_left() <= 4, timeout=10, message="compaction")
        values = {}
        for key, value in _read_all(instance, log):
            values[key] = value
        assert values == {b"a": b"4", b"b": b"4"}
    finally:
        instance.close()


def _read_all(instance, log):
    from kfast.records import iter_batches

    def read():
        out, offset = [], log.log_start_offset
        while offset < log.log_end_offset:
            info = log.read(offset, 1 << 20)
            data = info.records.read()
            for batch in iter_batches(data):
                out += [(bytes(r.key), bytes(r.value)) for r in batch]
                offset = batch.last_offset + 1
        return out

    return instance.call_soon(read)


def test_kfast_and_internal_properties_are_listed_only_where_set(tmp_path):
    """Kafka's ConfigHelper lists a broker's originals plus its non-internal
    values: a property outside Kafka's catalogue (kfast.*, the internal
    unstable.api.versions.enable) appears only when set, whether named or
    not, so clients and tools see the rows a Kafka broker shows."""
    with KfastBroker(
        {"unstable.api.versions.enable": "true", "kfast.metrics.host": "127.0.0.1"},
        data_dir=str(tmp_path / "data"),
    ) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        described = _describe(admin, "broker", "1")
        assert described["unstable.api.versions.enable"].value == "true"
        assert described["unstable.api.versions.enable"].source == (
            ConfigSource.STATIC_BROKER_CONFIG.value
        )
        assert described["kfast.metrics.host"].value == "127.0.0.1"
        unset = {"kfast.metrics.port", "kfast.log.dirs.min.free.bytes", "super.users"}
        assert not unset & described.keys()
        assert not {n for n in described if n.startswith("kfast.")} - {"kfast.metrics.host"}
        # Every Kafka broker config is still there.
        assert {"log.retention.ms", "num.io.threads", "max.connections"} <= described.keys()

        # Named, an unset one is not returned either; a set one is.
        async def named():
            async with KafkaAdmin(broker.bootstrap_servers) as client:
                keys = ["kfast.metrics.port", "kfast.metrics.host", "num.io.threads"]
                return await client.describe_configs(CONFIG_RESOURCE_BROKER, ["1"], keys)

        [entries] = asyncio.run(named()).values()
        assert sorted(e.name for e in entries) == ["kfast.metrics.host", "num.io.threads"]
