"""Kafka client properties, one table for every caller of kfast's client.

Each row is a property of Kafka's Java clients (ProducerConfig,
ConsumerConfig, AdminClientConfig, CommonClientConfigs): its name, type,
Kafka's default, validation and the clients that define it; and whether
kfast's client acts on it. Callers (the Spark source and sink, ``kfast
produce`` / ``consume``, ``kfast perf``) parse what users give with
:func:`parse_client_properties` and hand the result's arguments to
``KafkaProducer`` / ``Fetcher``, so a property means the same everywhere.

Invalid values raise :class:`kfast.config.ConfigException` with Kafka's
message (``Invalid value X for configuration N: ...``). Names a client does
not define are, as in Kafka's clients (AbstractConfig.logUnused), logged
("supplied but isn't a known config") and ignored with ``strict=False``;
callers that must not let a misspelling pass unnoticed (the Spark source)
use ``strict=True`` and get a ConfigException.

TLS and SASL: ``security.protocol``, the ``ssl.*`` settings of
kfast.security.ssl_factory (truststore, keystore for mTLS, protocols,
hostname check) and ``sasl.mechanism`` + ``sasl.jaas.config`` (PLAIN,
SCRAM-SHA-256/512 with username/password, OAUTHBEARER with an unsecured
token) become a ClientSecurity that every connection uses, built while
parsing so a bad truststore or JAAS config fails there. Any other ``ssl.*``
/ ``sasl.*`` property is refused, strict or not: ignoring it would connect
without the protection asked for. Callers whose clients are built in other
processes (the Spark source's tasks) carry :func:`security_properties` there
and parse them again.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kfast.client.security import ClientSecurity
from kfast.compression import CODEC_NAMES
from kfast.config import (
    INT_MAX,
    SERVER_CONFIGS,
    ConfigException,
    Type,
    ValidString,
    at_least,
    coerce,
    parse_properties,
)

logger = logging.getLogger(__name__)


class Client(enum.Enum):
    PRODUCER = "producer"
    CONSUMER = "consumer"
    ADMIN = "admin"


P, C, A = Client.PRODUCER, Client.CONSUMER, Client.ADMIN
ALL = frozenset(Client)

#: compression.type (producer) -> the record-batch codec.
CODECS = {name: codec for codec, name in CODEC_NAMES.items()}

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: Families of Kafka's security properties (ssl.*, sasl.*, security.providers).
SECURITY_PREFIXES = ("ssl.", "sasl.")
#: The TLS settings kfast's client applies (kfast.security.ssl_factory).
CLIENT_SSL_PROPERTIES = (
    "ssl.protocol",
    "ssl.enabled.protocols",
    "ssl.cipher.suites",
    "ssl.endpoint.identification.algorithm",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
)


@dataclass(frozen=True)
class ClientProperty:
    name: str
    type: Type
    default: Any  # Kafka's default (None: none)
    clients: frozenset
    validator: Callable[[str, Any], None] | None = None
    #: False: Kafka defines it, kfast's client has nothing to act on
    #: (socket tuning, metrics, consumer-group membership): accepted, logged.
    effective: bool = True


def _row(name, type_, default, clients, validator=None, effective=True) -> ClientProperty:
    return ClientProperty(name, type_, default, frozenset(clients), validator, effective)


_NON_NEGATIVE = at_least(0)

CLIENT_PROPERTIES: dict[str, ClientProperty] = {
    row.name: row
    for row in (
        # -- every client (CommonClientConfigs)
        _row("bootstrap.servers", Type.LIST, None, ALL),
        _row("client.id", Type.STRING, "", ALL),
        _row("request.timeout.ms", Type.INT, 30000, ALL, _NON_NEGATIVE),
        _row("retry.backoff.ms", Type.LONG, 100, ALL, _NON_NEGATIVE),
        _row("retry.backoff.max.ms", Type.LONG, 1000, ALL, _NON_NEGATIVE),
        _row(
            "security.protocol",
            Type.STRING,
            "PLAINTEXT",
            ALL,
            ValidString(SECURITY_PROTOCOLS, case_sensitive=False),
        ),
        _row("default.api.timeout.ms", Type.INT, 60000, (C, A), _NON_NEGATIVE),
        # SASL (SaslConfigs): the mechanisms kfast's client speaks.
        _row("sasl.mechanism", Type.STRING, "GSSAPI", ALL),
        _row("sasl.jaas.config", Type.PASSWORD, None, ALL),
        # TLS (SslConfigs): the broker's own definitions, the same for clients.
        *(
            _row(
                name,
                SERVER_CONFIGS[name].type,
                SERVER_CONFIGS[name].default,
                ALL,
                SERVER_CONFIGS[name].validator,
            )
            for name in CLIENT_SSL_PROPERTIES
        ),
        # -- producer (ProducerConfig)
        _row("acks", Type.STRING, "all", (P,), ValidString(("all", "-1", "0", "1"))),
        _row("linger.ms", Type.LONG, 0, (P,), _NON_NEGATIVE),
        _row("batch.size", Type.INT, 16384, (P,), _NON_NEGATIVE),
        _row("compression.type", Type.STRING, "none", (P,), ValidString(tuple(CODECS))),
        _row("enable.idempotence", Type.BOOLEAN, True, (P,)),
        _row(
            "max.in.flight.requests.per.connection", Type.INT, 5, (P,), at_least(1), effective=False
        ),  # kfast's producer keeps one Produce in flight per partition
        _row("retries", Type.INT, INT_MAX, (P,), _NON_NEGATIVE),
        _row("delivery.timeout.ms", Type.INT, 120000, (P,), _NON_NEGATIVE),
        _row("buffer.memory", Type.LONG, 32 * 1024 * 1024, (P,), _NON_NEGATIVE),
        # -- consumer (ConsumerConfig)
        _row(
            "isolation.level",
            Type.STRING,
            "read_uncommitted",
            (C,),
            ValidString(("read_uncommitted", "read_committed"), case_sensitive=False),
        ),
        _row("fetch.min.bytes", Type.INT, 1, (C,), _NON_NEGATIVE),
        _row("fetch.max.wait.ms", Type.INT, 500, (C,), _NON_NEGATIVE),
        _row("fetch.max.bytes", Type.INT, 50 * 1024 * 1024, (C,), _NON_NEGATIVE),
        _row("max.partition.fetch.bytes", Type.INT, 1024 * 1024, (C,), _NON_NEGATIVE),
        _row("check.crcs", Type.BOOLEAN, True, (C,)),
        _row(
            "auto.offset.reset",
            Type.STRING,
            "latest",
            (C,),
            ValidString(("latest", "earliest", "none"), case_sensitive=False),
        ),
        # kfast's client reads by assignment: no group membership, no commits.
        *(
            _row(name, type_, default, (C,), effective=False)
            for name, type_, default in (
                ("group.id", Type.STRING, None),
                ("group.instance.id", Type.STRING, None),
                ("group.protocol", Type.STRING, "classic"),
                ("group.remote.assignor", Type.STRING, None),
                ("session.timeout.ms", Type.INT, 45000),
                ("heartbeat.interval.ms", Type.INT, 3000),
                ("max.poll.records", Type.INT, 500),
                ("max.poll.interval.ms", Type.INT, 300000),
                ("enable.auto.commit", Type.BOOLEAN, True),
                ("auto.commit.interval.ms", Type.INT, 5000),
                ("partition.assignment.strategy", Type.LIST, None),
                ("client.rack", Type.STRING, ""),
                ("allow.auto.create.topics", Type.BOOLEAN, True),
                ("exclude.internal.topics", Type.BOOLEAN, True),
                ("key.deserializer", Type.CLASS, None),
                ("value.deserializer", Type.CLASS, None),
                ("interceptor.classes", Type.LIST, None),
            )
        ),
        *(
            _row(name, Type.CLASS, None, (P,), effective=False)
            for name in ("key.serializer", "value.serializer", "partitioner.class")
        ),
        *(
            _row(name, type_, default, (P,), effective=False)
            for name, type_, default in (
                ("max.block.ms", Type.LONG, 60000),
                ("max.request.size", Type.INT, 1024 * 1024),
            )
        ),
        # Socket and metrics tuning of the Java clients.
        *(
            _row(name, type_, default, ALL, effective=False)
            for name, type_, default in (
                ("metadata.max.age.ms", Type.LONG, 300000),
                ("receive.buffer.bytes", Type.INT, 65536),
                ("send.buffer.bytes", Type.INT, 131072),
                ("connections.max.idle.ms", Type.LONG, 540000),
                ("reconnect.backoff.ms", Type.LONG, 50),
                ("reconnect.backoff.max.ms", Type.LONG, 1000),
                ("socket.connection.setup.timeout.ms", Type.LONG, 10000),
                ("socket.connection.setup.timeout.max.ms", Type.LONG, 30000),
                ("client.dns.lookup", Type.STRING, "use_all_dns_ips"),
                ("metric.reporters", Type.LIST, None),
                ("metrics.num.samples", Type.INT, 2),
                ("metrics.recording.level", Type.STRING, "INFO"),
                ("metrics.sample.window.ms", Type.LONG, 30000),
                ("auto.include.jmx.reporter", Type.BOOLEAN, True),
                ("enable.metrics.push", Type.BOOLEAN, True),
            )
        ),
    )
}


@dataclass(frozen=True)
class ClientProperties:
    """Parsed properties of one client: typed values of those given."""

    client: Client
    values: Mapping[str, Any] = field(default_factory=dict)
    #: Given, defined by Kafka, nothing for kfast's client to act on.
    without_effect: tuple = ()
    #: Given, not defined for this client (``strict=False`` only).
    unknown: tuple = ()
    #: TLS / SASL of every connection (kfast.client.security.ClientSecurity);
    #: None: PLAINTEXT.
    security: Any = None

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    def cluster_arguments(self) -> dict:
        """Keyword arguments of kfast's ``Cluster`` (seconds, not ms)."""
        arguments: dict = {}
        if self.security is not None:
            arguments["security"] = self.security
        if "client.id" in self.values:
            arguments["client_id"] = self.values["client.id"]
        for prop, argument in (
            ("request.timeout.ms", "request_timeout"),
            ("default.api.timeout.ms", "metadata_timeout"),
            ("retry.backoff.ms", "retry_backoff"),
            ("retry.backoff.max.ms", "retry_backoff_max"),
        ):
            if prop in self.values:
                arguments[argument] = self.values[prop] / 1000.0
        return arguments

    def producer_arguments(self) -> dict:
        """Keyword arguments of kfast's ``KafkaProducer``."""
        arguments = self.cluster_arguments()
        values = self.values
        if "acks" in values:
            arguments["acks"] = -1 if values["acks"] == "all" else int(values["acks"])
        if "compression.type" in values:
            arguments["compression"] = CODECS[values["compression.type"]]
        if "request.timeout.ms" in values:
            arguments["request_timeout_ms"] = values["request.timeout.ms"]
        for prop, argument in (
            ("linger.ms", "linger_ms"),
            ("batch.size", "batch_size"),
            ("enable.idempotence", "enable_idempotence"),
            ("retries", "retries"),
            ("delivery.timeout.ms", "delivery_timeout_ms"),
            ("buffer.memory", "buffer_memory"),
        ):
            if prop in values:
                arguments[argument] = values[prop]
        return arguments

    def fetcher_arguments(self) -> dict:
        """Keyword arguments of kfast's ``Fetcher`` (max.partition.fetch.bytes
        and check.crcs are per-call settings, read with :meth:`get`)."""
        from kfast.client.fetcher import READ_COMMITTED, READ_UNCOMMITTED

        arguments = self.cluster_arguments()
        values = self.values
        if "isolation.level" in values:
            arguments["isolation_level"] = (
                READ_COMMITTED
                if values["isolation.level"] == "read_committed"
                else READ_UNCOMMITTED
            )
        for prop, argument in (
            ("fetch.max.bytes", "max_bytes"),
            ("fetch.min.bytes", "min_bytes"),
            ("fetch.max.wait.ms", "max_wait_ms"),
        ):
            if prop in values:
                arguments[argument] = values[prop]
        return arguments


def _is_security_property(name: str) -> bool:
    return name.startswith(SECURITY_PREFIXES) or name == "security.providers"


def security_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """The TLS / SASL properties among ``properties`` (security.protocol,
    ssl.*, sasl.*), as given: what a caller that rebuilds its client in
    other processes (the Spark source's tasks) carries there, since the
    ClientSecurity built from them (an SSL context) does not travel."""
    return {
        name: raw
        for name, raw in properties.items()
        if name == "security.protocol" or _is_security_property(name)
    }


def parse_client_properties(
    properties: Mapping[str, str], client: Client, *, strict: bool
) -> ClientProperties:
    """Check and type ``properties`` (Kafka names, string values, as in a
    properties file) for ``client``; see the module docstring for what is
    refused, and when."""
    values: dict = {}
    without_effect, unknown = [], []
    for name, raw in sorted(properties.items()):
        row = CLIENT_PROPERTIES.get(name)
        if row is None and _is_security_property(name):
            raise ConfigException(
                name, "[hidden]", "not a TLS or SASL setting kfast's client applies"
            )
        if row is None or client not in row.clients:
            if strict:
                raise ConfigException(name, raw, f"not a known {client.value} configuration")
            unknown.append(name)
            continue
        value = coerce(name, row.type, raw)
        if row.validator is not None:
            row.validator(name, value)
        if not row.effective:
            without_effect.append(name)
            continue
        if name in ("isolation.level", "auto.offset.reset"):
            value = value.lower()
        values[name] = value
    if str(values.get("security.protocol", "PLAINTEXT")).upper() != "PLAINTEXT":
        # Built now so that a missing truststore or JAAS config fails here.
        values["security.protocol"] = values["security.protocol"].upper()
        security = ClientSecurity.for_client_properties(
            lambda name: values.get(name, CLIENT_PROPERTIES[name].default)
        )
    else:
        security = None
    for name in unknown:
        # Kafka's AbstractConfig.logUnused.
        logger.warning("The configuration '%s' was supplied but isn't a known config.", name)
    return ClientProperties(client, values, tuple(without_effect), tuple(unknown), security)


def read_properties(items: Iterable[str] = (), path: str | None = None) -> dict[str, str]:
    """Client properties as the Kafka tools take them: a properties file
    (``--producer.config``), then ``NAME=VALUE`` items (``--producer-property``),
    which win."""
    properties: dict[str, str] = {}
    if path:
        with open(path, encoding="utf-8") as f:
            properties.update(parse_properties(f.read()))
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigException(item, None, "expected NAME=VALUE")
        properties[name.strip()] = value.strip()
    return properties


__all__ = [
    "CLIENT_PROPERTIES",
    "CODECS",
    "Client",
    "ClientProperties",
    "ClientProperty",
    "parse_client_properties",
    "read_properties",
    "security_properties",
]
