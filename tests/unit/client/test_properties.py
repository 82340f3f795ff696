"""The client property table (kfast.client.properties): Kafka's names,
types, defaults and validation, and the arguments it gives kfast's clients."""

from __future__ import annotations

import logging
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfast.client import READ_COMMITTED, Fetcher, KafkaProducer
from kfast.client.properties import (
    CLIENT_PROPERTIES,
    CODECS,
    Client,
    parse_client_properties,
    read_properties,
    security_properties,
)
from kfast.config import ConfigException, Type, coerce


@pytest.mark.parametrize("name", sorted(CLIENT_PROPERTIES))
def test_every_default_is_a_valid_value_of_its_property(name):
    row = CLIENT_PROPERTIES[name]
    assert row.name == name and row.clients
    if row.default is not None:
        value = coerce(name, row.type, row.default)
        if row.validator is not None:
            row.validator(name, value)


def test_kafkas_defaults():
    # ProducerConfig / ConsumerConfig / CommonClientConfigs.
    defaults = {name: row.default for name, row in CLIENT_PROPERTIES.items()}
    assert defaults["acks"] == "all" and defaults["enable.idempotence"] is True
    assert defaults["retries"] == 2**31 - 1 and defaults["delivery.timeout.ms"] == 120000
    assert defaults["batch.size"] == 16384 and defaults["linger.ms"] == 0
    assert defaults["max.partition.fetch.bytes"] == 1 << 20
    assert defaults["fetch.max.bytes"] == 50 << 20 and defaults["fetch.max.wait.ms"] == 500
    assert defaults["isolation.level"] == "read_uncommitted"
    assert defaults["auto.offset.reset"] == "latest" and defaults["session.timeout.ms"] == 45000
    assert CLIENT_PROPERTIES["acks"].clients == {Client.PRODUCER}
    assert CLIENT_PROPERTIES["isolation.level"].clients == {Client.CONSUMER}
    assert CLIENT_PROPERTIES["default.api.timeout.ms"].clients == {Client.CONSUMER, Client.ADMIN}


def test_producer_properties_become_the_producers_arguments():
    parsed = parse_client_properties(
        {
            "bootstrap.servers": "127.0.0.1:9092",
            "client.id": "etl",
            "acks": "1",
            "linger.ms": "7",
            "batch.size": "1000",
            "compression.type": "zstd",
            "enable.idempotence": "false",
            "retries": "3",
            "delivery.timeout.ms": "9000",
            "buffer.memory": "65536",
            "request.timeout.ms": "4000",
            "retry.backoff.ms": "20",
        },
        Client.PRODUCER,
        strict=True,
    )
    producer = KafkaProducer("127.0.0.1:9092", **parsed.producer_arguments())
    assert (
        producer.acks,
        producer.linger,
        producer.batch_size,
        producer.compression,
        producer.enable_idempotence,
        producer.retries,
        producer.delivery_timeout,
        producer.buffer_memory,
        producer.request_timeout_ms,
    ) == (1, 0.007, 1000, CODECS["zstd"], False, 3, 9.0, 65536, 4000)
    cluster = producer.cluster
    assert (cluster.client_id, cluster.request_timeout, cluster.retry_backoff) == ("etl", 4.0, 0.02)
    assert parse_client_properties(
        {"acks": "all"}, Client.PRODUCER, strict=True
    ).producer_arguments() == {"acks": -1}


def test_consumer_properties_become_the_fetchers_arguments():
    parsed = parse_client_properties(
        {
            "isolation.level": "READ_COMMITTED",
            "fetch.min.bytes": "10",
            "fetch.max.wait.ms": "50",
            "fetch.max.bytes": "1000",
            "max.partition.fetch.bytes": "500",
            "default.api.timeout.ms": "2000",
        },
        Client.CONSUMER,
        strict=True,
    )
    fetcher = Fetcher("127.0.0.1:9092", **parsed.fetcher_arguments())
    assert (
        fetcher.isolation_level,
        fetcher.min_bytes,
        fetcher.max_wait_ms,
        fetcher.max_bytes,
        fetcher.cluster.metadata_timeout,
    ) == (READ_COMMITTED, 10, 50, 1000, 2.0)
    assert parsed.get("max.partition.fetch.bytes") == 500


@pytest.mark.parametrize(
    "client, props, message",
    [
        (
            Client.PRODUCER,
            {"acks": "2"},
            "Invalid value 2 for configuration acks: String must be one of: all, -1, 0, 1",
        ),
        (
            Client.PRODUCER,
            {"compression.type": "brotli"},
            "Invalid value brotli for configuration compression.type: String must be one of: none",
        ),
        (
            Client.PRODUCER,
            {"linger.ms": "-5"},
            "Invalid value -5 for configuration linger.ms: Value must be at least 0",
        ),
        (
            Client.PRODUCER,
            {"batch.size": "3000000000"},
            "Invalid value 3000000000 for configuration batch.size: Not a number of type INT",
        ),
        (
            Client.PRODUCER,
            {"max.in.flight.requests.per.connection": "0"},
            "Value must be at least 1",
        ),
        (
            Client.PRODUCER,
            {"enable.idempotence": "yes"},
            "Invalid value yes for configuration enable.idempotence: Expected value to be either "
            "true or false",
        ),
        (
            Client.CONSUMER,
            {"auto.offset.reset": "smallest"},
            "Invalid value smallest for configuration auto.offset.reset: String must be one of: "
            "latest, earliest, none",
        ),
        (
            Client.CONSUMER,
            {"session.timeout.ms": "soon"},
            "Invalid value soon for configuration session.timeout.ms",
        ),
    ],
)
@pytest.mark.parametrize("strict", [True, False])
def test_invalid_values_raise_kafkas_config_exception(client, props, message, strict):
    with pytest.raises(ConfigException, match=message.replace(".", r"\.")):
        parse_client_properties(props, client, strict=strict)


def test_tls_and_sasl_properties_build_the_clients_security(tmp_path):
    from kfast.testing.certificates import TestCA

    ca = TestCA(str(tmp_path))
    parsed = parse_client_properties(
        {
            "security.protocol": "sasl_ssl",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": ca.cert_path,
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="alice" password="pw";',
        },
        Client.CONSUMER,
        strict=True,
    )
    security = parsed.fetcher_arguments()["security"]
    assert (security.protocol, security.mechanism, security.username, security.password) == (
        "SASL_SSL",
        "SCRAM-SHA-256",
        "alice",
        "pw",
    )
    assert security.ssl_context.check_hostname  # ssl.endpoint.identification.algorithm=https
    fetcher = Fetcher("127.0.0.1:9092", **parsed.fetcher_arguments())
    assert fetcher.cluster._new_connection().security is security
    assert (
        parse_client_properties(
            {"security.protocol": "PLAINTEXT"}, Client.PRODUCER, strict=True
        ).producer_arguments()
        == {}
    )


@pytest.mark.parametrize(
    "props, message",
    [
        (
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "GSSAPI",
                "sasl.jaas.config": "x required;",
            },
            "sasl.mechanism: not supported",
        ),
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"},
            "Invalid value None for configuration sasl.jaas.config: set it for PLAIN",
        ),
        (
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="a";',
            },
            "Invalid value [hidden] for configuration sasl.jaas.config: set username and password",
        ),
        ({"security.protocol": "SSL", "ssl.truststore.type": "PEM3"}, "ssl.truststore.type"),
        (
            {"ssl.keymanager.algorithm": "PKIX"},
            "Invalid value [hidden] for configuration "
            "ssl.keymanager.algorithm: not a TLS or SASL setting",
        ),
    ],
)
@pytest.mark.parametrize("strict", [True, False])
def test_security_settings_kfasts_client_cannot_apply_are_refused_even_leniently(
    props, message, strict
):
    # Ignoring them would connect without the protection asked for.
    with pytest.raises(ConfigException, match=re.escape(message)):
        parse_client_properties(props, Client.PRODUCER, strict=strict)


def test_security_properties_are_the_tls_and_sasl_ones_as_given():
    props = {
        "security.protocol": "sasl_ssl",
        "ssl.truststore.location": "/ts.pem",
        "sasl.jaas.config": "x",
        "acks": "1",
        "client.id": "c",
    }
    assert security_properties(props) == {
        "security.protocol": "sasl_ssl",
        "ssl.truststore.location": "/ts.pem",
        "sasl.jaas.config": "x",
    }


def test_unknown_names_strict_refused_lenient_logged_and_ignored(caplog):
    props = {"linger.mss": "5", "isolation.level": "read_committed", "acks": "0"}
    with pytest.raises(ConfigException, match="linger.mss: not a known producer configuration"):
        parse_client_properties({"linger.mss": "5"}, Client.PRODUCER, strict=True)
    # A consumer's property given to a producer is unknown to it, as in Kafka.
    with pytest.raises(ConfigException, match="not a known producer configuration"):
        parse_client_properties({"isolation.level": "read_committed"}, Client.PRODUCER, strict=True)
    with caplog.at_level(logging.WARNING, logger="kfast.client.properties"):
        parsed = parse_client_properties(props, Client.PRODUCER, strict=False)
    assert parsed.unknown == ("isolation.level", "linger.mss")
    assert parsed.producer_arguments() == {"acks": 0}
    assert "The configuration 'linger.mss' was supplied but isn't a known config." in caplog.text


def test_properties_without_effect_are_accepted_and_listed():
    parsed = parse_client_properties(
        {"group.id": "g", "send.buffer.bytes": "1024", "fetch.min.bytes": "1"},
        Client.CONSUMER,
        strict=True,
    )
    assert parsed.without_effect == ("group.id", "send.buffer.bytes")
    assert parsed.fetcher_arguments() == {"min_bytes": 1}
    # Their values are still checked.
    with pytest.raises(ConfigException, match="receive.buffer.bytes"):
        parse_client_properties({"receive.buffer.bytes": "x"}, Client.CONSUMER, strict=True)


@given(
    st.sampled_from(
        sorted(
            n
            for n, r in CLIENT_PROPERTIES.items()
            if r.type in (Type.INT, Type.LONG) and r.validator is not None
        )
    ),
    st.integers(-10, 10**12),
)
def test_numeric_properties_accept_exactly_their_range(name, number):
    row = CLIENT_PROPERTIES[name]
    client = next(iter(row.clients))
    low = row.validator.min
    high = 2**31 - 1 if row.type is Type.INT else 2**63 - 1
    if low <= number <= high:
        parsed = parse_client_properties({name: str(number)}, client, strict=True)
        assert parsed.values.get(name, number) == number
    else:
        with pytest.raises(ConfigException, match=f"for configuration {name}"):
            parse_client_properties({name: str(number)}, client, strict=True)


def test_read_properties_file_then_items(tmp_path):
    path = tmp_path / "producer.properties"
    path.write_text("# comment\nacks = 1\nlinger.ms: 20\nclient.id file\n")
    assert read_properties(["acks=all", "batch.size= 10 "], str(path)) == {
        "acks": "all",
        "linger.ms": "20",
        "client.id": "file",
        "batch.size": "10",
    }
    with pytest.raises(ConfigException, match="expected NAME=VALUE"):
        read_properties(["acks"])
