"""Every Kafka 4.2 broker config through real admin clients: DescribeConfigs
on a BROKER resource lists each name of kfast.kafka_broker_configs (Kafka's
default and read-only where kfast does not serve it), and
IncrementalAlterConfigs / AlterConfigs refuse what Kafka refuses with
Kafka's messages (DynamicBrokerConfig.validateConfigs) and accept the
dynamic configs kfast serves, listener-prefixed names included."""

from __future__ import annotations

import asyncio

import pytest
from configs_support import kfast_configs
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from kfast.client.admin import KafkaAdmin
from kfast.kafka_broker_configs import KAFKA_BROKER_CONFIGS, READ_ONLY
from kfast.protocol import errors
from kfast.protocol.constants import CONFIG_RESOURCE_BROKER, OP_SET
from kfast.testing import KfastBroker

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]
TIMEOUT = 15
KERBEROS_RELOGIN = "sasl.kerberos.min.time.before.relogin"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    # Its own broker: the tests set and delete cluster-wide configs.
    instance = KfastBroker(
        {"num.partitions": 1}, data_dir=str(tmp_path_factory.mktemp("catalogue") / "data")
    )
    instance.start()
    yield instance
    instance.close()


@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def _describe(admin, name="1") -> dict:
    resource = ConfigResource(ConfigResource.Type.BROKER, name)
    return admin.describe_configs([resource])[resource].result(TIMEOUT)


def _alter_error(admin, name, key, value, op=AlterConfigOpType.SET) -> str | None:
    """The error message of one incremental SET (None: accepted)."""
    resource = ConfigResource(
        ConfigResource.Type.BROKER,
        name,
        incremental_configs=[ConfigEntry(key, value, incremental_operation=op)],
    )
    try:
        admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    except KafkaException as exc:
        error = exc.args[0]
        assert error.name() == "INVALID_REQUEST", error
        return error.str()
    return None


def test_describe_lists_every_kafka_broker_config(admin):
    configs = _describe(admin)
    assert set(KAFKA_BROKER_CONFIGS) <= set(configs)
    # Not a config kfast defines: Kafka's default, read-only (kfast does
    # not change it), from DEFAULT_CONFIG.
    entry = configs["remote.log.manager.task.interval.ms"]
    assert (entry.value, entry.is_read_only, entry.source) == (
        "30000",
        True,
        ConfigSource.DEFAULT_CONFIG.value,
    )
    # Read-only in Kafka although its primary synonym is dynamic.
    assert configs["log.retention.hours"].is_read_only
    assert not configs["log.retention.ms"].is_read_only
    assert not configs[KERBEROS_RELOGIN].is_read_only
    assert configs[KERBEROS_RELOGIN].value == "60000"
    # Passwords never leave the broker.
    assert configs["ssl.keystore.password"].is_sensitive
    assert configs["ssl.keystore.password"].value is None
    # Gone with ZooKeeper in Kafka 4.0.
    assert "zookeeper.connect" not in configs and "inter.broker.protocol.version" not in configs


def _raw_error(broker, name: str, configs: dict, legacy: bool = False) -> str:
    """The INVALID_REQUEST message of an alter on broker resource ``name``
    through the wire protocol (confluent-kafka cannot name the default
    resource "")."""

    async def alter():
        async with KafkaAdmin(broker.bootstrap_servers) as client:
            if legacy:
                await client.alter_configs(CONFIG_RESOURCE_BROKER, name, configs)
            else:
                await client.incremental_alter_configs(
                    CONFIG_RESOURCE_BROKER, name, {k: (OP_SET, v) for k, v in configs.items()}
                )

    with pytest.raises(errors.InvalidRequestException) as raised:
        asyncio.run(alter())
    return str(raised.value).split(": ", 1)[1]


def test_kafka_python_describes_the_catalogue(broker):
    client = KafkaAdminClient(
        bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=TIMEOUT * 1000
    )
    try:
        entries = client.describe_configs(
            [KpConfigResource(ConfigResourceType.BROKER, "1")], config_filter="all"
        )["broker"]["1"]
    finally:
        client.close()
    assert set(KAFKA_BROKER_CONFIGS) <= set(entries)
    entry = entries["remote.log.manager.task.interval.ms"]
    assert (entry["value"], entry["config_source"], entry["read_only"]) == (
        "30000",
        "DEFAULT_CONFIG",
        True,
    )


def test_read_only_configs_refused_as_kafka(broker, admin):
    assert (
        _alter_error(admin, "1", "log.retention.hours", "2")
        == "Cannot update these configs dynamically: Set(log.retention.hours)"
    )
    assert (
        _raw_error(broker, "", {"remote.log.manager.task.interval.ms": "1000"})
        == "Cannot update these configs dynamically: Set(remote.log.manager.task.interval.ms)"
    )
    # Every read-only name at once, through the legacy AlterConfigs.
    read_only = sorted(name for name, key in KAFKA_BROKER_CONFIGS.items() if key.mode == READ_ONLY)
    assert (
        _raw_error(broker, "1", {name: "1" for name in read_only}, legacy=True)
        == f"Cannot update these configs dynamically: Set({', '.join(read_only)})"
    )


def test_security_and_per_broker_rules(broker, admin):
    assert _alter_error(admin, "1", "ssl.keystore.location", "/tmp/k.jks") == (
        "These security configs can be dynamically updated only per-listener using the "
        "listener prefix: Set(ssl.keystore.location)"
    )
    assert _raw_error(broker, "", {KERBEROS_RELOGIN: "30000"}) == (
        "Cannot update these configs at default cluster level, broker id must be specified: "
        f"Set({KERBEROS_RELOGIN})"
    )
    # Kafka-dynamic, but kfast would not apply it: refused, never ignored.
    assert _alter_error(
        admin, "1", "listener.name.plaintext.ssl.keystore.location", "/tmp/k.jks"
    ) == (
        "kfast does not update these configs dynamically: "
        "Set(listener.name.plaintext.ssl.keystore.location)"
    )
    # A listener-prefixed read-only config is read-only.
    assert (
        _alter_error(admin, "1", "listener.name.plaintext.log.dirs", "/x")
        == "Cannot update these configs dynamically: Set(listener.name.plaintext.log.dirs)"
    )


def test_dynamic_sasl_login_configs_accepted_and_described(admin):
    prefixed = "listener.name.plaintext.sasl.kerberos.service.name"
    try:
        assert _alter_error(admin, "1", KERBEROS_RELOGIN, "30000") is None
        assert _alter_error(admin, "1", prefixed, "kafka") is None
        configs = _describe(admin)
        assert (configs[KERBEROS_RELOGIN].value, configs[KERBEROS_RELOGIN].source) == (
            "30000",
            ConfigSource.DYNAMIC_BROKER_CONFIG.value,
        )
        assert (configs[prefixed].value, configs[prefixed].source) == (
            "kafka",
            ConfigSource.DYNAMIC_BROKER_CONFIG.value,
        )
        # A value of the wrong type is INVALID_CONFIG, as for any config.
        resource = ConfigResource(
            ConfigResource.Type.BROKER,
            "1",
            incremental_configs=[
                ConfigEntry(KERBEROS_RELOGIN, "soon", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        with pytest.raises(KafkaException) as raised:
            admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
        assert raised.value.args[0].name() == "INVALID_CONFIG"
    finally:
        _alter_error(admin, "1", KERBEROS_RELOGIN, None, AlterConfigOpType.DELETE)
        _alter_error(admin, "1", prefixed, None, AlterConfigOpType.DELETE)
    configs = _describe(admin)
    assert configs[KERBEROS_RELOGIN].source == ConfigSource.DEFAULT_CONFIG.value
    assert prefixed not in configs


def test_kfast_configs_describe_all_shows_the_catalogue(broker):
    status, out, _ = kfast_configs(
        broker, "--entity-type", "brokers", "--entity-name", "1", "--describe", "--all"
    )
    assert status == 0
    assert "remote.log.manager.task.interval.ms=30000 sensitive=false" in out
    assert f"{KERBEROS_RELOGIN}=60000 sensitive=false" in out
