"""Kafka's configuration properties, defined once.

Each property is one ``define(...)`` row: Kafka's name, type, default, an
optional validator, a short doc and, for server properties that set a topic's
default, the topic-level synonym (``log.segment.bytes`` -> ``segment.bytes``).
``KafkaConfig`` parses ``server.properties`` text (Java properties syntax) and
rejects an unknown or invalid property with a ``ConfigException`` that names
it. ``LogConfig`` is a topic's effective configuration: the topic's overrides
over the broker's synonyms, validated by the same rows.

Later issues add server properties as more ``define`` rows in this table.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LONG_MIN = -(2**63)


class ConfigException(Exception):
    """A property is unknown, missing or has an invalid value (Kafka's
    ``org.apache.kafka.common.config.ConfigException``)."""

    def __init__(self, name: str, value: Any = None, message: str | None = None):
        self.name = name
        self.value = value
        text = f"Invalid value {value} for configuration {name}"
        super().__init__(f"{text}: {message}" if message else text)


class Type(enum.Enum):
    BOOLEAN = "boolean"
    STRING = "string"
    INT = "int"
    SHORT = "short"
    LONG = "long"
    DOUBLE = "double"
    LIST = "list"
    CLASS = "class"
    PASSWORD = "password"


_INT_RANGES = {
    Type.INT: (INT_MIN, INT_MAX),
    Type.SHORT: (-32768, 32767),
    Type.LONG: (LONG_MIN, LONG_MAX),
}


def coerce(name: str, type_: Type, value: Any) -> Any:
    """Turn a properties-file string (or a Python value) into the property's type."""
    if value is None:
        return None
    try:
        if type_ is Type.BOOLEAN:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text not in ("true", "false"):
                raise ValueError("Expected value to be either true or false")
            return text == "true"
        if type_ in _INT_RANGES:
            if isinstance(value, bool):
                raise ValueError("Expected an integer")
            number = value if isinstance(value, int) else int(str(value).strip())
            low, high = _INT_RANGES[type_]
            if not low <= number <= high:
                raise ValueError(f"Not a number of type {type_.value.upper()}")
            return number
        if type_ is Type.DOUBLE:
            return float(value) if not isinstance(value, str) else float(value.strip())
        if type_ is Type.LIST:
            if isinstance(value, (list, tuple)):
                return [str(v).strip() for v in value]
            text = str(value).strip()
            return [item.strip() for item in text.split(",")] if text else []
        return str(value).strip() if type_ is not Type.PASSWORD else str(value)
    except ValueError as exc:
        raise ConfigException(name, value, str(exc)) from None


# -- validators ----------------------------------------------------------
@dataclass(frozen=True)
class Range:
    min: float | None = None
    max: float | None = None

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        if self.min is not None and value < self.min:
            raise ConfigException(name, value, f"Value must be at least {self.min}")
        if self.max is not None and value > self.max:
            raise ConfigException(name, value, f"Value must be no more than {self.max}")


def at_least(minimum: float) -> Range:
    return Range(minimum, None)


def between(minimum: float, maximum: float) -> Range:
    return Range(minimum, maximum)


@dataclass(frozen=True)
class ValidString:
    choices: tuple[str, ...]
    case_sensitive: bool = True

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        pool = self.choices if self.case_sensitive else [c.lower() for c in self.choices]
        probe = value if self.case_sensitive else value.lower()
        if probe not in pool:
            raise ConfigException(name, value, f"String must be one of: {', '.join(self.choices)}")


@dataclass(frozen=True)
class ValidList:
    choices: tuple[str, ...]
    allow_empty: bool = False

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        if not value and not self.allow_empty:
            raise ConfigException(name, value, "Empty list is not allowed")
        for item in value:
            if item not in self.choices:
                raise ConfigException(
                    name, value, f"Invalid value {item}; valid values are {', '.join(self.choices)}"
                )


_THROTTLED_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


def throttled_replica_list(name: str, value: Any) -> None:
    """``*`` or ``partition:broker`` entries (Kafka's
    ThrottledReplicaListValidator; an empty entry passes, as there)."""
    if value is None:
        return
    items = [str(item).strip() for item in value]
    if all(_THROTTLED_REPLICA.fullmatch(item) for item in items) or "".join(items) == "*":
        return
    raise ConfigException(
        name,
        ", ".join(items).join("[]"),
        f"{name} must be the literal '*' or a list of replicas in the following format: "
        f"[partitionId]:[brokerId],[partitionId]:[brokerId],...",
    )


def non_empty_string(name: str, value: Any) -> None:
    if value is not None and not value:
        raise ConfigException(name, value, "String may not be empty")


# -- the table ---------------------------------------------------------------
NO_DEFAULT = object()  # the property must be set


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: Type
    default: Any
    doc: str
    validator: Callable[[str, Any], None] | None = None
    topic_synonym: str | None = None  # for server properties: the topic config

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT


SERVER_CONFIGS: dict[str, ConfigKey] = {}
TOPIC_CONFIGS: dict[str, ConfigKey] = {}
# Broker configs that exist only as dynamic configs (Kafka's
# DynamicConfig.Broker quota configs): set with (Incremental)AlterConfigs on
# a BROKER resource, never in server.properties, and listed by
# DescribeConfigs only where set.
DYNAMIC_ONLY_BROKER_CONFIGS: dict[str, ConfigKey] = {}
# Client quota configs (Kafka's QuotaConfig.userAndClientQuotaConfigs and
# ipConfigs): set per user / client-id / ip entity with AlterClientQuotas,
# stored as ClientQuotaRecords, never in server.properties.
CLIENT_QUOTA_CONFIGS: dict[str, ConfigKey] = {}
IP_QUOTA_CONFIGS: dict[str, ConfigKey] = {}
# Topic property -> server property that provides its default.
TOPIC_TO_SERVER: dict[str, str] = {}
# Group configs (Kafka's GroupConfig): set per group id on a GROUP config
# resource (type 32), defaulting to the broker's group.* property named by
# GROUP_TO_SERVER where kfast has one.
GROUP_CONFIGS: dict[str, ConfigKey] = {}
GROUP_TO_SERVER: dict[str, str] = {}


def define(
    name: str,
    type_: Type,
    default: Any,
    doc: str,
    validator: Callable[[str, Any], None] | None = None,
    topic_synonym: str | None = None,
) -> ConfigKey:
    """Define a server property (one row per property)."""
    if name in SERVER_CONFIGS:
        raise ValueError(f"{name} is defined twice")
    key = ConfigKey(name, type_, default, doc, validator, topic_synonym)
    SERVER_CONFIGS[name] = key
    if topic_synonym is not None:
        TOPIC_TO_SERVER.setdefault(topic_synonym, name)
    return key


def define_topic(
    name: str,
    type_: Type,
    default: Any,
    doc: str,
    validator: Callable[[str, Any], None] | None = None,
) -> ConfigKey:
    """Define a topic-level property. Its default is the server synonym's
    value when one exists; ``default`` applies otherwise."""
    key = ConfigKey(name, type_, default, doc, validator)
    TOPIC_CONFIGS[name] = key
    return key


def define_group(
    name: str,
    type_: Type,
    default: Any,
    doc: str,
    validator: Callable[[str, Any], None] | None = None,
    server_default: str | None = None,
) -> ConfigKey:
    """Define a group config; ``server_default`` names the broker property
    giving its default (its value when set, else ``default``)."""
    key = ConfigKey(name, type_, default, doc, validator)
    GROUP_CONFIGS[name] = key
    if server_default is not None:
        GROUP_TO_SERVER[name] = server_default
    return key


def define_dynamic_only(
    name: str,
    type_: Type,
    default: Any,
    doc: str,
    validator: Callable[[str, Any], None] | None = None,
) -> ConfigKey:
    """Define a broker config that can only be set dynamically."""
    key = ConfigKey(name, type_, default, doc, validator)
    DYNAMIC_ONLY_BROKER_CONFIGS[name] = key
    return key


B, S, I, SH, L, D, LI, C, P = (
    Type.BOOLEAN,
    Type.STRING,
    Type.INT,
    Type.SHORT,
    Type.LONG,
    Type.DOUBLE,
    Type.LIST,
    Type.CLASS,
    Type.PASSWORD,
)
HOUR_MS = 3600 * 1000
CLEANUP_POLICIES = ("compact", "delete")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

# Identity and roles (KRaft).
define("node.id", I, -1, "The node ID of this server (KRaft).", at_least(-1))
define(
    "broker.id",
    I,
    -1,
    "The broker id of this server (ZooKeeper-era synonym of node.id).",
    at_least(-1),
)
define(
    "process.roles",
    LI,
    [],
    "The roles this process plays: broker, controller or both.",
    ValidList(("broker", "controller"), allow_empty=True),
)
define("controller.quorum.voters", LI, [], "Map of id/endpoint of the voter set, id@host:port.")
define(
    "controller.quorum.bootstrap.servers", LI, [], "host:port of the controllers to bootstrap from."
)
define("controller.listener.names", LI, [], "Names of the listeners used by the controller.")
# KRaft quorum timing (Kafka's QuorumConfig).
define(
    "controller.quorum.election.timeout.ms",
    I,
    1000,
    "Maximum time without a leader before a voter starts an election.",
    at_least(0),
)
define(
    "controller.quorum.fetch.timeout.ms",
    I,
    2000,
    "Maximum time without a successful fetch from the leader before a voter starts an election.",
    at_least(0),
)
define(
    "controller.quorum.election.backoff.max.ms",
    I,
    1000,
    "Maximum backoff before a voter starts a new election after losing one.",
    at_least(0),
)
define(
    "controller.quorum.request.timeout.ms",
    I,
    2000,
    "Maximum time to wait for the answer to a quorum request.",
    at_least(0),
)
define(
    "controller.quorum.retry.backoff.ms",
    I,
    20,
    "Time to wait before retrying a failed quorum request.",
    at_least(0),
)
define(
    "broker.rack",
    S,
    None,
    "Rack of the broker, used in rack-aware replica placement "
    "(and by consumers fetching from the closest replica).",
)
# Broker membership (KIP-631).
define(
    "broker.heartbeat.interval.ms",
    I,
    2000,
    "The length of time in milliseconds between broker heartbeats.",
    at_least(1),
)
define(
    "broker.session.timeout.ms",
    I,
    9000,
    "The length of time in milliseconds that a broker lease lasts if no heartbeats are made.",
    at_least(1),
)
define(
    "controller.quorum.append.linger.ms",
    I,
    25,
    "How long the leader waits to batch writes to the metadata log.",
    at_least(0),
)
define("reserved.broker.max.id", I, 1000, "Max number for a generated broker id.", at_least(0))
define("cluster.id", S, None, "kfast only: the cluster id to format empty log dirs with.")

# Listeners and sockets.
define("listeners", LI, ["PLAINTEXT://:9092"], "Listener URIs, comma separated.")
define("advertised.listeners", LI, None, "Listeners to publish for clients to use.")
define(
    "listener.security.protocol.map",
    LI,
    ["PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT", "SASL_SSL:SASL_SSL"],
    "Map between listener names and security protocols.",
)
define("inter.broker.listener.name", S, None, "Listener used between brokers.")
define(
    "num.network.threads", I, 3, "Threads receiving requests and sending responses.", at_least(1)
)
define("num.io.threads", I, 8, "Threads processing requests.", at_least(1))
define("socket.send.buffer.bytes", I, 100 * 1024, "SO_SNDBUF of server sockets (-1: OS default).")
define(
    "socket.receive.buffer.bytes", I, 100 * 1024, "SO_RCVBUF of server sockets (-1: OS default)."
)
define(
    "socket.request.max.bytes", I, 100 * 1024 * 1024, "Max bytes in a socket request.", at_least(1)
)
define("socket.listen.backlog.size", I, 50, "Max pending connections on the socket.", at_least(1))
define("connections.max.idle.ms", L, 10 * 60 * 1000, "Idle connections timeout.")
define("max.connections", I, INT_MAX, "Max connections allowed in the broker.", at_least(0))
define("max.connections.per.ip", I, INT_MAX, "Max connections from each ip address.", at_least(0))
# KIP-612; also per listener as listener.name.<listener>.max.connection.creation.rate.
define(
    "max.connection.creation.rate",
    I,
    INT_MAX,
    "The maximum connection creation rate the broker allows in any listener at any time.",
    at_least(0),
)
define(
    "queued.max.requests",
    I,
    500,
    "Queued requests before blocking the network threads.",
    at_least(1),
)
define("request.timeout.ms", I, 30000, "Default request timeout.", at_least(0))

# Authorization (Kafka's StandardAuthorizer configs).
define(
    "authorizer.class.name",
    S,
    "",
    "The authorizer: org.apache.kafka.metadata.authorizer.StandardAuthorizer (ACLs in the "
    "metadata log), or empty for none.",
)
define(
    "super.users",
    S,
    None,
    "Principals allowed everything, separated by semicolons (User:admin;User:ops).",
)
define(
    "allow.everyone.if.no.acl.found",
    B,
    False,
    "Whether a resource no ACL applies to is open to everyone (else only to super users).",
)

# Security: TLS and SASL listeners (Kafka's BrokerSecurityConfigs, SslConfigs,
# SaslConfigs). Each ssl.*/sasl.* property may also be set for one listener as
# listener.name.<listener>.<property>, which wins (sasl.jaas.config only so,
# as listener.name.<listener>.<mechanism>.sasl.jaas.config).
TLS_PROTOCOLS = ("TLSv1.2", "TLSv1.3")
KEYSTORE_TYPES = ("JKS", "PKCS12", "PEM")
define(
    "security.inter.broker.protocol",
    S,
    "PLAINTEXT",
    "Security protocol between brokers when inter.broker.listener.name is not set.",
    ValidString(("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
)
define(
    "ssl.protocol",
    S,
    "TLSv1.3",
    "The TLS protocol of the SSLContext.",
    ValidString(TLS_PROTOCOLS + ("TLS",)),
)
define(
    "ssl.enabled.protocols",
    LI,
    ["TLSv1.2", "TLSv1.3"],
    "TLS versions enabled on connections.",
    ValidList(TLS_PROTOCOLS),
)
define(
    "ssl.cipher.suites", LI, None, "TLS 1.2 cipher suites (OpenSSL or IANA names); all by default."
)
define(
    "ssl.keystore.type",
    S,
    "JKS",
    "Keystore file format: PEM, PKCS12 (JKS files kfast "
    "reads only when they are PKCS12, as keytool writes them since Java 9).",
    ValidString(KEYSTORE_TYPES),
)
define(
    "ssl.keystore.location",
    S,
    None,
    "Path of the keystore (the broker's key and certificate chain).",
)
define("ssl.keystore.password", P, None, "Password of the keystore file.")
define("ssl.key.password", P, None, "Password of the private key (PEM: of the encrypted key).")
define("ssl.keystore.key", P, None, "Inline PEM private key (ssl.keystore.type=PEM).")
define(
    "ssl.keystore.certificate.chain",
    P,
    None,
    "Inline PEM certificate chain (ssl.keystore.type=PEM).",
)
define(
    "ssl.truststore.type",
    S,
    "JKS",
    "Truststore file format: PEM, PKCS12.",
    ValidString(KEYSTORE_TYPES),
)
define("ssl.truststore.location", S, None, "Path of the truststore (CA certificates).")
define("ssl.truststore.password", P, None, "Password of the truststore file.")
define(
    "ssl.truststore.certificates",
    P,
    None,
    "Inline PEM trusted certificates (ssl.truststore.type=PEM).",
)
define(
    "ssl.client.auth",
    S,
    "none",
    "Client certificate authentication: required, requested or none.",
    ValidString(("required", "requested", "none")),
)
define(
    "ssl.principal.mapping.rules",
    S,
    "DEFAULT",
    "RULE:pattern/replacement/[LU] rules mapping a client certificate's subject to a user name.",
)
define(
    "ssl.endpoint.identification.algorithm",
    S,
    "https",
    "Host name verification of the server certificate by kfast's own client ('' disables it).",
)
define("ssl.keymanager.algorithm", S, "SunX509", "Key manager algorithm (Java's; OpenSSL has one).")
define(
    "ssl.trustmanager.algorithm", S, "PKIX", "Trust manager algorithm (Java's; OpenSSL has one)."
)
define("ssl.allow.dn.changes", B, False, "Allow a keystore update to change the certificate's DN.")
define(
    "ssl.allow.san.changes", B, False, "Allow a keystore update to change the certificate's SANs."
)
define("sasl.enabled.mechanisms", LI, ["GSSAPI"], "SASL mechanisms enabled on SASL listeners.")
define("sasl.mechanism.inter.broker.protocol", S, "GSSAPI", "SASL mechanism between brokers.")
define("sasl.mechanism.controller.protocol", S, "GSSAPI", "SASL mechanism toward the controllers.")
define("sasl.jaas.config", P, None, "JAAS login context (brokers: per listener and mechanism).")
define(
    "sasl.server.max.receive.size",
    I,
    524288,
    "Largest SASL token before authentication.",
    at_least(1),
)
define(
    "sasl.oauthbearer.jwks.endpoint.url",
    S,
    None,
    "JWKS of the keys OAUTHBEARER tokens are verified with (kfast: a file: URL).",
)
define(
    "sasl.oauthbearer.expected.audience",
    LI,
    None,
    "Audiences an OAUTHBEARER token must name one of.",
)
define("sasl.oauthbearer.expected.issuer", S, None, "Issuer an OAUTHBEARER token must name.")
define("sasl.oauthbearer.sub.claim.name", S, "sub", "Claim naming the OAUTHBEARER principal.")
define("sasl.oauthbearer.scope.claim.name", S, "scope", "Claim holding the OAUTHBEARER scopes.")
define(
    "sasl.oauthbearer.clock.skew.seconds",
    I,
    30,
    "Clock skew tolerated on token times.",
    at_least(0),
)
define(
    "sasl.oauthbearer.jwks.endpoint.refresh.ms",
    L,
    3600000,
    "How often the JWKS is reread.",
    at_least(0),
)
define(
    "sasl.server.callback.handler.class",
    C,
    None,
    "SASL server callback handler (kfast: Kafka's OAuthBearerValidatorCallbackHandler only).",
)
define(
    "connections.max.reauth.ms",
    L,
    0,
    "Longest SASL session before re-authentication (KIP-368); 0: sessions do not expire.",
    at_least(0),
)
# Delegation tokens (KIP-48; on KRaft KIP-900): the feature is on only when
# the secret is set (the same on every broker and controller).
define(
    "delegation.token.secret.key",
    P,
    None,
    "Secret key that signs and verifies delegation tokens (HmacSHA512); unset or empty: "
    "delegation tokens are disabled.",
)
define(
    "delegation.token.max.lifetime.ms",
    L,
    7 * 24 * 60 * 60 * 1000,
    "Lifetime of a delegation token beyond which it cannot be renewed.",
    at_least(1),
)
define(
    "delegation.token.expiry.time.ms",
    L,
    24 * 60 * 60 * 1000,
    "Validity of a delegation token before it must be renewed.",
    at_least(1),
)
define(
    "delegation.token.expiry.check.interval.ms",
    L,
    60 * 60 * 1000,
    "How often the active controller removes expired delegation tokens.",
    at_least(1),
)
define(
    "connection.failed.authentication.delay.ms",
    I,
    100,
    "Delay before closing a connection whose authentication failed.",
    at_least(0),
)
define(
    "principal.builder.class",
    C,
    "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
    "Builds a connection's principal (kfast: Kafka's default builder only).",
)

# Topics.
define("num.partitions", I, 1, "Default number of log partitions per topic.", at_least(1))
define("default.replication.factor", I, 1, "Default replication factor of auto-created topics.")
define("auto.create.topics.enable", B, True, "Enable auto creation of topics on the server.")
define("delete.topic.enable", B, True, "Enables delete topic.")
define(
    "controlled.shutdown.enable",
    B,
    True,
    "On SIGTERM, move this broker's leaderships to other in-sync replicas before stopping.",
)
define("auto.leader.rebalance.enable", B, True, "Periodic preferred leader rebalancing.")
define(
    "leader.imbalance.check.interval.seconds",
    L,
    300,
    "How often the active controller moves leaderships back to preferred replicas.",
    at_least(1),
)
define(
    "leader.imbalance.per.broker.percentage",
    I,
    10,
    "Accepted for compatibility; KRaft controllers (Kafka's and kfast's) balance every "
    "imbalanced partition whose preferred replica is in sync.",
    at_least(0),
)
define(
    "unclean.leader.election.enable",
    B,
    False,
    "Allow replicas not in the ISR to be elected leader as a last resort.",
    topic_synonym="unclean.leader.election.enable",
)
define(
    "compression.type",
    S,
    "producer",
    "The final compression type for a topic.",
    ValidString(COMPRESSION_TYPES),
    topic_synonym="compression.type",
)
define(
    "compression.gzip.level",
    I,
    -1,
    "Gzip compression level.",
    between(-1, 9),
    topic_synonym="compression.gzip.level",
)
define(
    "compression.lz4.level",
    I,
    9,
    "LZ4 compression level.",
    between(1, 17),
    topic_synonym="compression.lz4.level",
)
define(
    "compression.zstd.level",
    I,
    3,
    "Zstd compression level.",
    between(-131072, 22),
    topic_synonym="compression.zstd.level",
)

# Log storage.
define("log.dirs", LI, None, "Directories where the log data is stored (falls back to log.dir).")
define("log.dir", S, "/tmp/kafka-logs", "The directory where the log data is kept (see log.dirs).")
define(
    "log.dir.failure.timeout.ms",
    L,
    30000,
    "If the broker is unable to successfully communicate to the controller that some log "
    "directory has failed for longer than this time, the broker will fail and shut down.",
    at_least(1),
)
define(
    "log.segment.bytes",
    I,
    1024 * 1024 * 1024,
    "The maximum size of a single log file.",
    at_least(1024 * 1024),
    topic_synonym="segment.bytes",
)
define(
    "log.roll.ms",
    L,
    None,
    "Max time before a new segment is rolled (overrides log.roll.hours).",
    topic_synonym="segment.ms",
)
define(
    "log.roll.hours",
    I,
    24 * 7,
    "Max time in hours before a new segment is rolled.",
    at_least(1),
    topic_synonym="segment.ms",
)
define(
    "log.roll.jitter.ms",
    L,
    None,
    "Max jitter subtracted from the roll time (ms).",
    topic_synonym="segment.jitter.ms",
)
define(
    "log.roll.jitter.hours",
    I,
    0,
    "Max jitter subtracted from the roll time (hours).",
    at_least(0),
    topic_synonym="segment.jitter.ms",
)
define(
    "log.index.size.max.bytes",
    I,
    10 * 1024 * 1024,
    "Max size in bytes of the offset index.",
    at_least(4),
    topic_synonym="segment.index.bytes",
)
define(
    "log.index.interval.bytes",
    I,
    4096,
    "Bytes of log between offset index entries.",
    at_least(0),
    topic_synonym="index.interval.bytes",
)
define(
    "log.retention.ms",
    L,
    None,
    "Time to keep a log file (ms); -1 keeps forever.",
    topic_synonym="retention.ms",
)
define(
    "log.retention.minutes",
    I,
    None,
    "Time to keep a log file (minutes).",
    topic_synonym="retention.ms",
)
define(
    "log.retention.hours",
    I,
    24 * 7,
    "Time to keep a log file (hours).",
    topic_synonym="retention.ms",
)
define(
    "log.retention.bytes",
    L,
    -1,
    "Max size of a partition's log before deleting it.",
    topic_synonym="retention.bytes",
)
define(
    "log.retention.check.interval.ms",
    L,
    5 * 60 * 1000,
    "How often the log cleaner checks whether a log is eligible for deletion.",
    at_least(1),
)
define(
    "log.cleanup.policy",
    LI,
    ["delete"],
    "Default cleanup policy for segments beyond retention.",
    ValidList(CLEANUP_POLICIES, allow_empty=True),
    topic_synonym="cleanup.policy",
)
define(
    "log.segment.delete.delay.ms",
    L,
    60000,
    "Time to wait before deleting a file.",
    at_least(0),
    topic_synonym="file.delete.delay.ms",
)
define(
    "log.flush.interval.messages",
    L,
    LONG_MAX,
    "Messages accumulated before a flush.",
    at_least(1),
    topic_synonym="flush.messages",
)
define(
    "log.flush.interval.ms",
    L,
    None,
    "Max time a message stays in memory before a flush (unset: log.flush.scheduler.interval.ms).",
    topic_synonym="flush.ms",
)
define(
    "log.flush.scheduler.interval.ms",
    L,
    LONG_MAX,
    "How often the flusher checks whether any log needs a flush.",
)
define(
    "log.flush.offset.checkpoint.interval.ms",
    I,
    60000,
    "How often the recovery point is checkpointed.",
    at_least(0),
)
define(
    "log.flush.start.offset.checkpoint.interval.ms",
    I,
    60000,
    "How often the log start offset is checkpointed.",
    at_least(0),
)
define(
    "log.preallocate",
    B,
    False,
    "Preallocate the file when creating a segment.",
    topic_synonym="preallocate",
)
define(
    "log.message.timestamp.type",
    S,
    "CreateTime",
    "CreateTime or LogAppendTime.",
    ValidString(TIMESTAMP_TYPES),
    topic_synonym="message.timestamp.type",
)
define(
    "log.message.timestamp.before.max.ms",
    L,
    LONG_MAX,
    "Max allowed age of a record timestamp relative to the broker's time.",
    at_least(0),
    topic_synonym="message.timestamp.before.max.ms",
)
define(
    "log.message.timestamp.after.max.ms",
    L,
    HOUR_MS,
    "Max allowed distance of a record timestamp into the future.",
    at_least(0),
    topic_synonym="message.timestamp.after.max.ms",
)
define(
    "log.local.retention.ms",
    L,
    -2,
    "Local retention time with tiered storage (-2: retention.ms).",
    at_least(-2),
    topic_synonym="local.retention.ms",
)
define(
    "log.local.retention.bytes",
    L,
    -2,
    "Local retention size with tiered storage.",
    at_least(-2),
    topic_synonym="local.retention.bytes",
)
define(
    "message.max.bytes",
    I,
    1024 * 1024 + 12,
    "Largest record batch size allowed.",
    at_least(0),
    topic_synonym="max.message.bytes",
)
define(
    "fetch.max.bytes",
    I,
    55 * 1024 * 1024,
    "Most bytes a consumer's fetch response carries (KIP-541; followers are not capped).",
    at_least(1024),
)
define(
    "min.insync.replicas",
    I,
    1,
    "Min replicas that must acknowledge a write with acks=all.",
    at_least(1),
    topic_synonym="min.insync.replicas",
)
define(
    "num.recovery.threads.per.data.dir",
    I,
    2,
    "Threads per data directory for log recovery at startup and flushing at shutdown.",
    at_least(1),
)
define("log.cleaner.enable", B, True, "Enable the log cleaner process.")
define("log.cleaner.threads", I, 1, "Background threads for log cleaning.", at_least(0))
define("log.cleaner.dedupe.buffer.size", L, 128 * 1024 * 1024, "Memory for log deduplication.")
define(
    "log.cleaner.io.buffer.size", I, 512 * 1024, "Memory for log cleaner I/O buffers.", at_least(0)
)
define(
    "log.cleaner.io.max.bytes.per.second",
    D,
    float(2**1024 - 2**971),
    "I/O throttle of the log cleaner.",
)
define("log.cleaner.backoff.ms", L, 15000, "Sleep when there are no logs to clean.", at_least(0))
define(
    "log.cleaner.min.cleanable.ratio",
    D,
    0.5,
    "Min dirty ratio for a log to be cleaned.",
    between(0, 1),
    topic_synonym="min.cleanable.dirty.ratio",
)
define(
    "log.cleaner.delete.retention.ms",
    L,
    24 * HOUR_MS,
    "How long tombstones are kept.",
    at_least(0),
    topic_synonym="delete.retention.ms",
)
define(
    "log.cleaner.min.compaction.lag.ms",
    L,
    0,
    "Min time a message stays uncompacted.",
    at_least(0),
    topic_synonym="min.compaction.lag.ms",
)
define(
    "log.cleaner.max.compaction.lag.ms",
    L,
    LONG_MAX,
    "Max time a message stays uncompacted.",
    at_least(1),
    topic_synonym="max.compaction.lag.ms",
)

# Replication.
define("replica.lag.time.max.ms", L, 30000, "Time before a lagging follower leaves the ISR.")
define(
    "replica.fetch.max.bytes",
    I,
    1024 * 1024,
    "Bytes a follower fetches per partition.",
    at_least(0),
)
define("replica.fetch.wait.max.ms", I, 500, "Max wait of a follower fetch.")
define(
    "replica.high.watermark.checkpoint.interval.ms",
    L,
    5000,
    "How often the high watermark is saved to disk.",
)
define("num.replica.fetchers", I, 1, "Fetcher threads per source broker.")
define(
    "replica.selector.class",
    S,
    None,
    "How the leader picks the replica a consumer should fetch from (KIP-392): unset = "
    "the leader; org.apache.kafka.common.replica.RackAwareReplicaSelector = an in-sync "
    "replica in the consumer's client.rack.",
)
define("replica.fetch.min.bytes", I, 1, "Min bytes a follower fetch waits for.", at_least(1))
define(
    "replica.fetch.response.max.bytes",
    I,
    10 * 1024 * 1024,
    "Max bytes of a whole follower fetch response.",
    at_least(0),
)
define(
    "replica.fetch.backoff.ms",
    I,
    1000,
    "Sleep of a follower fetcher after a fetch error.",
    at_least(0),
)
define("replica.socket.timeout.ms", I, 30000, "Socket timeout of follower fetch requests.")
define("background.threads", I, 10, "Threads for background processing tasks.", at_least(1))
# Client quotas (Kafka's QuotaConfig): the sliding window each client's
# byte rates and request time are measured over, and the controller mutation
# rate's own window.
define(
    "quota.window.num",
    I,
    11,
    "The number of samples to retain in memory for client quotas.",
    at_least(1),
)
define(
    "quota.window.size.seconds",
    I,
    1,
    "The time span of each sample for client quotas.",
    at_least(1),
)
define(
    "controller.quota.window.num",
    I,
    11,
    "The number of samples to retain in memory for controller mutation quotas.",
    at_least(1),
)
define(
    "controller.quota.window.size.seconds",
    I,
    1,
    "The time span of each sample for controller mutations quotas.",
    at_least(1),
)
# Replication throttles (Kafka's QuotaConfig, KIP-73): the sliding window
# the throttled rates are measured over.
define(
    "replication.quota.window.num",
    I,
    11,
    "The number of samples to retain in memory for replication quotas.",
    at_least(1),
)
define(
    "replication.quota.window.size.seconds",
    I,
    1,
    "The time span of each sample for replication quotas.",
    at_least(1),
)
define_dynamic_only(
    "leader.replication.throttled.rate",
    L,
    LONG_MAX,
    "Upper bound (bytes/sec) on the replication traffic a leader sends for the replicas "
    "enumerated in each topic's leader.replication.throttled.replicas. Only settable "
    "dynamically.",
    at_least(0),
)
define_dynamic_only(
    "replica.alter.log.dirs.io.max.bytes.per.second",
    L,
    LONG_MAX,
    "A long representing the upper bound (bytes/sec) on disk IO used for moving replica "
    "between log directories on the same broker.",
    at_least(0),
)
define_dynamic_only(
    "follower.replication.throttled.rate",
    L,
    LONG_MAX,
    "Upper bound (bytes/sec) on the replication traffic a follower fetches for the replicas "
    "enumerated in each topic's follower.replication.throttled.replicas. Only settable "
    "dynamically.",
    at_least(0),
)

for _table, _name, _type, _doc in (
    (
        CLIENT_QUOTA_CONFIGS,
        "producer_byte_rate",
        L,
        "A rate representing the upper bound (bytes/sec) for producer traffic.",
    ),
    (
        CLIENT_QUOTA_CONFIGS,
        "consumer_byte_rate",
        L,
        "A rate representing the upper bound (bytes/sec) for consumer traffic.",
    ),
    (
        CLIENT_QUOTA_CONFIGS,
        "request_percentage",
        D,
        "A percentage representing the upper bound of time spent for processing requests.",
    ),
    (
        CLIENT_QUOTA_CONFIGS,
        "controller_mutation_rate",
        D,
        "The rate at which mutations are accepted for the create topics request, the create "
        "partitions request and the delete topics request. The rate is accumulated by the "
        "number of partitions created or deleted.",
    ),
    (
        IP_QUOTA_CONFIGS,
        "connection_creation_rate",
        I,
        "An int representing the upper bound of connections accepted for the specified IP.",
    ),
):
    _table[_name] = ConfigKey(_name, _type, None, _doc)
del _table, _name, _type, _doc

# KRaft metadata log (__cluster_metadata-0).
define(
    "metadata.log.dir",
    S,
    None,
    "Directory of the cluster metadata log (unset: the first of log.dirs).",
)
define(
    "metadata.log.max.record.bytes.between.snapshots",
    L,
    20 * 1024 * 1024,
    "Bytes of metadata records appended before a new snapshot is written.",
    at_least(1),
)
define(
    "metadata.log.max.snapshot.interval.ms",
    L,
    3600 * 1000,
    "Maximum time between metadata snapshots while records are being applied (0: no "
    "time-based snapshots).",
    at_least(0),
)
define(
    "metadata.log.segment.bytes",
    I,
    1024 * 1024 * 1024,
    "Maximum size of a single metadata log segment.",
    at_least(8 * 1024 * 1024),
)
define(
    "metadata.log.segment.ms",
    L,
    7 * 24 * HOUR_MS,
    "Max time before a new metadata log segment is rolled.",
    at_least(1),
)

# Group coordinator and offsets.
define("offsets.topic.num.partitions", I, 50, "Partitions of the offset commit topic.", at_least(1))
define(
    "offsets.topic.replication.factor",
    SH,
    3,
    "Replication factor of the offsets topic.",
    at_least(1),
)
define(
    "offsets.topic.segment.bytes",
    I,
    100 * 1024 * 1024,
    "Segment bytes of the offsets topic.",
    at_least(1),
)
define(
    "offsets.retention.minutes",
    I,
    7 * 24 * 60,
    "How long committed offsets of an empty group are kept.",
    at_least(1),
)
define(
    "offsets.retention.check.interval.ms",
    L,
    600000,
    "How often stale offsets are checked.",
    at_least(1),
)
define("offsets.commit.timeout.ms", I, 5000, "Offset commit wait for replication.", at_least(1))
define("offset.metadata.max.bytes", I, 4096, "Maximum size of the metadata of an offset commit.")
define(
    "offsets.load.buffer.size", I, 5 * 1024 * 1024, "Batch size when loading offsets.", at_least(1)
)
define("group.initial.rebalance.delay.ms", I, 3000, "Delay of the first rebalance of a new group.")
define("group.min.session.timeout.ms", I, 6000, "Minimum allowed session timeout.")
define("group.max.session.timeout.ms", I, 1800000, "Maximum allowed session timeout.")
define("group.max.size", I, INT_MAX, "Maximum number of consumers in a group.", at_least(1))
define(
    "group.consumer.heartbeat.interval.ms",
    I,
    5000,
    "Heartbeat interval given to members of consumer (KIP-848) groups.",
    at_least(1),
)
define(
    "group.consumer.session.timeout.ms",
    I,
    45000,
    "Session timeout of members of consumer (KIP-848) groups.",
    at_least(1),
)
define(
    "group.consumer.min.session.timeout.ms",
    I,
    45000,
    "Minimum consumer.session.timeout.ms a group may set.",
    at_least(1),
)
define(
    "group.consumer.max.session.timeout.ms",
    I,
    60000,
    "Maximum consumer.session.timeout.ms a group may set.",
    at_least(1),
)
define(
    "group.consumer.min.heartbeat.interval.ms",
    I,
    5000,
    "Minimum consumer.heartbeat.interval.ms a group may set.",
    at_least(1),
)
define(
    "group.consumer.max.heartbeat.interval.ms",
    I,
    15000,
    "Maximum consumer.heartbeat.interval.ms a group may set.",
    at_least(1),
)
define(
    "group.consumer.assignors",
    LI,
    ["uniform", "range"],
    "Server-side assignors of consumer groups; the first is the default.",
)
define("group.consumer.max.size", I, INT_MAX, "Maximum members of a consumer group.", at_least(1))
define(
    "group.coordinator.rebalance.protocols",
    LI,
    ["classic", "consumer"],
    "Enabled rebalance protocols.",
    ValidList(("classic", "consumer", "share", "streams")),
)

# Transactions.
define(
    "transactional.id.expiration.ms",
    I,
    7 * 24 * HOUR_MS,
    "Time before an idle transactional id expires.",
    at_least(1),
)
define(
    "transaction.max.timeout.ms",
    I,
    15 * 60 * 1000,
    "Maximum allowed transaction timeout.",
    at_least(1),
)
define(
    "transaction.state.log.num.partitions",
    I,
    50,
    "Partitions of the transaction topic.",
    at_least(1),
)
define(
    "transaction.state.log.replication.factor",
    SH,
    3,
    "Replication factor of the transaction topic.",
    at_least(1),
)
define(
    "transaction.state.log.min.isr",
    I,
    2,
    "min.insync.replicas of the transaction topic.",
    at_least(1),
)
define(
    "transaction.state.log.segment.bytes",
    I,
    100 * 1024 * 1024,
    "Segment bytes of the transaction topic.",
    at_least(1),
)
define(
    "transaction.state.log.load.buffer.size",
    I,
    5 * 1024 * 1024,
    "Batch size when loading the transaction topic.",
    at_least(1),
)
define(
    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    I,
    10000,
    "Interval at which timed-out transactions are rolled back.",
    at_least(1),
)
define(
    "transaction.remove.expired.transaction.cleanup.interval.ms",
    I,
    3600000,
    "Interval at which expired transactional ids are removed.",
    at_least(1),
)
define(
    "unstable.api.versions.enable",
    B,
    False,
    "Serve and advertise the newest version of an API that Kafka still marks unstable "
    "(Kafka's internal setting; in 4.2 only InitProducerId v6, KIP-939's two-phase commit).",
)
define(
    "transaction.two.phase.commit.enable",
    B,
    False,
    "Allow producers to take part in two-phase commit (KIP-939): InitProducerId with "
    "enable2Pc, whose transactions never time out. While false it is refused with "
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED.",
)
define(
    "transaction.partition.verification.enable",
    B,
    True,
    "Verify with the transaction coordinator that a partition was added to the "
    "transaction before its first transactional write (KIP-890).",
)
define(
    "producer.id.expiration.ms",
    I,
    86400000,
    "Time a producer id is kept after its last write.",
    at_least(1),
)
define(
    "producer.id.expiration.check.interval.ms",
    I,
    600000,
    "How often expired producer ids are removed.",
    at_least(1),
)
define(
    "max.incremental.fetch.session.cache.slots",
    I,
    1000,
    "Max incremental fetch sessions.",
    at_least(0),
)

# Share groups (Kafka 4's stock server.properties sets these).
define(
    "share.coordinator.state.topic.replication.factor",
    SH,
    3,
    "Replication factor of the share-group state topic.",
    at_least(1),
)
define(
    "share.coordinator.state.topic.min.isr",
    SH,
    2,
    "min.insync.replicas of the share-group state topic.",
    at_least(1),
)

# Group configs, per group id (Kafka 4.2's GroupConfig, as stored in
# apache/kafka group-coordinator/.../GroupConfig.java with
# share.renew.acknowledge.enable). The coordinator applies the consumer.*
# ones to KIP-848 consumer groups; kfast serves no share or streams groups,
# so their configs are validated, stored and described only.
_SHARE_OFFSET_RESET = re.compile(r"earliest|latest|by_duration:P.+", re.IGNORECASE)


def share_auto_offset_reset(name: str, value: Any) -> None:
    """earliest, latest or by_duration:<ISO-8601 duration> (Kafka's
    ShareGroupAutoOffsetResetStrategy.Validator)."""
    if value is not None and not _SHARE_OFFSET_RESET.fullmatch(value):
        raise ConfigException(name, value, "Invalid value for share.auto.offset.reset")


define_group(
    "consumer.session.timeout.ms",
    I,
    45000,
    "Session timeout of the group's consumer (KIP-848) members.",
    at_least(1),
    "group.consumer.session.timeout.ms",
)
define_group(
    "consumer.heartbeat.interval.ms",
    I,
    5000,
    "Heartbeat interval given to the group's consumer (KIP-848) members.",
    at_least(1),
    "group.consumer.heartbeat.interval.ms",
)
define_group(
    "share.session.timeout.ms",
    I,
    45000,
    "Session timeout of the share group's members.",
    at_least(1),
)
define_group(
    "share.heartbeat.interval.ms",
    I,
    5000,
    "Heartbeat interval given to the share group's members.",
    at_least(1),
)
define_group(
    "share.record.lock.duration.ms",
    I,
    30000,
    "Acquisition lock duration of the share group's records.",
    at_least(1000),
)
define_group(
    "share.delivery.count.limit",
    I,
    5,
    "Deliveries of a record to the share group before it is archived.",
    at_least(2),
)
define_group(
    "share.partition.max.record.locks",
    I,
    2000,
    "In-flight records per share-partition of the group.",
    at_least(100),
)
define_group(
    "share.auto.offset.reset",
    S,
    "latest",
    "Where a share-partition of the group starts.",
    share_auto_offset_reset,
)
define_group(
    "share.isolation.level",
    S,
    "read_uncommitted",
    "Whether the share group delivers aborted transactional records.",
    ValidString(("read_committed", "read_uncommitted")),
)
define_group(
    "share.renew.acknowledge.enable",
    B,
    True,
    "Whether the share group accepts the RENEW acknowledge type.",
)
define_group(
    "streams.session.timeout.ms",
    I,
    45000,
    "Session timeout of the streams group's members.",
    at_least(1),
)
define_group(
    "streams.heartbeat.interval.ms",
    I,
    5000,
    "Heartbeat interval given to the streams group's members.",
    at_least(1),
)
define_group(
    "streams.num.standby.replicas",
    I,
    0,
    "Standby replicas per task of the streams group.",
    at_least(0),
)
define_group(
    "streams.initial.rebalance.delay.ms",
    I,
    3000,
    "Delay of the streams group's first rebalance.",
    at_least(0),
)

# Metrics (docs/metrics.md). Kafka publishes JMX and leaves HTTP to the JMX
# exporter agent; kfast serves the exporter's names itself, on a port of its
# own (kfast-specific properties: Kafka has none). -1: no endpoint.
define(
    "kfast.metrics.port",
    I,
    -1,
    "Port of the Prometheus metrics endpoint (0: any free port; -1: no endpoint).",
    at_least(-1),
)
define("kfast.metrics.host", S, "127.0.0.1", "Address the Prometheus metrics endpoint binds.")
# Free space kept in every log dir (kfast.storage.free_space; Redpanda's
# storage_min_free_bytes, Kafka has none): below min(bytes, percent of the
# filesystem) client produce and topic creation are refused until space is
# freed. Either at 0 turns the check off.
define(
    "kfast.log.dirs.min.free.bytes",
    L,
    1 << 30,
    "Free bytes to keep in each log dir (the smaller of this and "
    "kfast.log.dirs.min.free.percent applies); below it produce and topic creation are "
    "refused. 0: no check.",
    at_least(0),
)
define(
    "kfast.log.dirs.min.free.percent",
    D,
    5.0,
    "Percent of each log dir's filesystem to keep free (the smaller of this and "
    "kfast.log.dirs.min.free.bytes applies). 0: no check.",
    between(0, 100),
)
# Blocks the active segment reserves ahead of its writes (fallocate with
# FALLOC_FL_KEEP_SIZE; Redpanda's segment_fallocation_step, Kafka has none:
# its log.preallocate sizes the whole file). Writes into reserved blocks cost
# the kernel less (kfast._ext.log_append.FileState); the reservation grows
# with the segment up to this step and is given back at roll and close.
define(
    "kfast.log.segment.fallocate.step.bytes",
    I,
    16 << 20,
    "Most bytes the active segment reserves on disk ahead of its writes (it reserves as "
    "much again as it holds, from 64 KiB up to this); given back when the segment rolls "
    "or the log closes. 0: no reservation.",
    at_least(0),
)
define(
    "kfast.log.dirs.free.space.check.interval.ms",
    I,
    1000,
    "How often a log dir's free space is read (statvfs) at most.",
    at_least(1),
)
# KIP-714 client telemetry (Kafka's ServerConfigs.TELEMETRY_MAX_BYTES).
define(
    "telemetry.max.bytes",
    I,
    1048576,
    "The maximum size (after compression if compression is used) of telemetry metrics "
    "pushed from a client to the broker.",
    at_least(1),
)

# -- client metrics subscriptions (KIP-714, Kafka's ClientMetricsConfigs) --------
# The configs of a CLIENT_METRICS config resource (one per subscription,
# named by it); validated by kfast.metrics.subscriptions.
CLIENT_METRICS_CONFIGS: dict[str, ConfigKey] = {
    key.name: key
    for key in (
        ConfigKey("metrics", Type.LIST, [], "Subscription metrics list"),
        ConfigKey("interval.ms", Type.INT, 5 * 60 * 1000, "Push interval in milliseconds"),
        ConfigKey("match", Type.LIST, [], "Client match pattern list"),
    )
}

# -- topic-level properties (Kafka's TopicConfig) ------------------------------
define_topic(
    "cleanup.policy",
    LI,
    ["delete"],
    "delete and/or compact.",
    ValidList(CLEANUP_POLICIES, allow_empty=True),
)
define_topic(
    "compression.type",
    S,
    "producer",
    "Final compression type of the topic.",
    ValidString(COMPRESSION_TYPES),
)
define_topic("compression.gzip.level", I, -1, "Gzip level.", between(-1, 9))
define_topic("compression.lz4.level", I, 9, "LZ4 level.", between(1, 17))
define_topic("compression.zstd.level", I, 3, "Zstd level.", between(-131072, 22))
define_topic("delete.retention.ms", L, 24 * HOUR_MS, "How long tombstones are kept.", at_least(0))
define_topic("file.delete.delay.ms", L, 60000, "Time to wait before deleting a file.", at_least(0))
define_topic("flush.messages", L, LONG_MAX, "Messages between forced fsyncs.", at_least(1))
define_topic("flush.ms", L, LONG_MAX, "Time between forced fsyncs.", at_least(0))
define_topic(
    "follower.replication.throttled.replicas",
    LI,
    [],
    "Replicas whose fetches are throttled on the follower side: partitionId:brokerId "
    "entries, or * for every replica of the topic.",
    throttled_replica_list,
)
define_topic(
    "leader.replication.throttled.replicas",
    LI,
    [],
    "Replicas whose replication is throttled on the leader side: partitionId:brokerId "
    "entries, or * for every replica of the topic.",
    throttled_replica_list,
)
define_topic("index.interval.bytes", I, 4096, "Bytes between offset index entries.", at_least(0))
define_topic("local.retention.bytes", L, -2, "Local retention size (tiered storage).", at_least(-2))
define_topic("local.retention.ms", L, -2, "Local retention time (tiered storage).", at_least(-2))
define_topic(
    "max.compaction.lag.ms", L, LONG_MAX, "Max time a message stays uncompacted.", at_least(1)
)
define_topic(
    "max.message.bytes", I, 1024 * 1024 + 12, "Largest record batch size allowed.", at_least(0)
)
define_topic(
    "message.timestamp.type",
    S,
    "CreateTime",
    "CreateTime or LogAppendTime.",
    ValidString(TIMESTAMP_TYPES),
)
define_topic(
    "message.timestamp.before.max.ms", L, LONG_MAX, "Max age of a record timestamp.", at_least(0)
)
define_topic(
    "message.timestamp.after.max.ms",
    L,
    HOUR_MS,
    "Max distance of a record timestamp into the future.",
    at_least(0),
)
define_topic("min.cleanable.dirty.ratio", D, 0.5, "Min dirty ratio for cleaning.", between(0, 1))
define_topic("min.compaction.lag.ms", L, 0, "Min time a message stays uncompacted.", at_least(0))
define_topic("min.insync.replicas", I, 1, "Min in-sync replicas for acks=all.", at_least(1))
define_topic("preallocate", B, False, "Preallocate segment files.")
define_topic("remote.storage.enable", B, False, "Tiered storage for the topic.")
define_topic("remote.log.copy.disable", B, False, "Stop copying to remote storage.")
define_topic("remote.log.delete.on.disable", B, False, "Delete remote data when disabled.")
define_topic("retention.bytes", L, -1, "Max partition size before old segments go.")
define_topic(
    "retention.ms", L, 7 * 24 * HOUR_MS, "Max time a segment is kept; -1 forever.", at_least(-1)
)
define_topic("segment.bytes", I, 1024 * 1024 * 1024, "Segment file size.", at_least(1024 * 1024))
define_topic("segment.index.bytes", I, 10 * 1024 * 1024, "Offset index size.", at_least(4))
define_topic(
    "segment.jitter.ms", L, 0, "Max random jitter subtracted from segment.ms.", at_least(0)
)
define_topic("segment.ms", L, 7 * 24 * HOUR_MS, "Time after which a segment rolls.", at_least(1))
define_topic(
    "unclean.leader.election.enable", B, False, "Allow out-of-sync replicas to become leader."
)


# -- properties text -------------------------------------------------------------
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 6 <= len(text):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


_SEPARATOR = re.compile(r"(?<!\\)(?:\s*[=:]\s*|\s+)")


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text: ``key=value``, ``key: value`` or
    ``key value``; ``#``/``!`` comments; a trailing backslash continues a line."""
    props: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.lstrip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            logical += line[:-1]
            continue
        logical += line
        match = _SEPARATOR.search(logical)
        if match:
            key, value = logical[: match.start()], logical[match.end() :]
        else:
            key, value = logical, ""
        props[_unescape(key)] = _unescape(value)
        logical = ""
    if logical:
        key, _, value = logical.partition("=")
        props[_unescape(key.strip())] = _unescape(value.strip())
    return props


def format_properties(props: Mapping[str, Any], header: Iterable[str] = ()) -> str:
    """Java-properties text for simple values (meta.properties and the like)."""
    lines = [f"#{line}" for line in header]
    lines += [f"{key}={value}" for key, value in props.items()]
    return "\n".join(lines) + "\n"


def _validate(defs: Mapping[str, ConfigKey], name: str, value: Any) -> Any:
    key = defs[name]
    value = coerce(name, key.type, value)
    if value is None and not key.has_default:
        raise ConfigException(name, value, "Missing required configuration with no default value")
    if key.validator is not None and value is not None:
        key.validator(name, value)
    return value


# Property families Kafka accepts by prefix (per-listener settings); the
# ssl.* and sasl.* properties are rows of the table, and their per-listener
# forms are checked against it (_check_listener_property).
ALLOWED_PREFIXES = ("listener.name.", "kfast.", "log4j.")
# Log output (kfast.server.log_config): log4j.properties' lines for logger
# levels, and kfast's choice of text or JSON lines.
LOG4J_LOGGER_PREFIX = "log4j.logger."
LOG4J_ROOT_LOGGER = "log4j.rootLogger"
LOG_FORMAT = "kfast.log.format"
LISTENER_PREFIX = "listener.name."
# Mechanisms a listener.name.<l>.<mechanism>.<property> may name (Kafka's
# lower-case form); which of them kfast serves is kfast.security's business.
SASL_MECHANISM_PREFIXES = ("plain", "scram-sha-256", "scram-sha-512", "oauthbearer", "gssapi")
# Properties Kafka allows per listener and mechanism.
MECHANISM_PROPERTIES = (
    "sasl.jaas.config",
    "sasl.server.callback.handler.class",
    "connections.max.reauth.ms",
)
# Security settings kfast does not implement: setting one stops the start
# (naming it) rather than leaving a user believing it is in force.
UNSUPPORTED_SECURITY_PREFIXES = {
    "sasl.kerberos.": "kfast does not implement Kerberos (GSSAPI)",
    "sasl.login.": "kfast does not run SASL login modules (it reads the JAAS options)",
}
UNSUPPORTED_SECURITY_PROPERTIES = {
    "ssl.engine.factory.class": "kfast builds its TLS engine from the ssl.* settings only",
    "ssl.provider": "kfast uses OpenSSL, not a Java security provider",
    "ssl.secure.random.implementation": "kfast uses OpenSSL's random generator",
    "sasl.client.callback.handler.class": "kfast runs no custom SASL callback handlers",
    "security.providers": "kfast loads no Java security providers",
}
# Properties kfast serves only with one of these values (Kafka's defaults and
# the classes kfast implements).
SUPPORTED_SECURITY_VALUES = {
    "principal.builder.class": (
        "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
    ),
    "ssl.keymanager.algorithm": ("SunX509", "PKIX"),
    "ssl.trustmanager.algorithm": ("PKIX", "SunX509"),
    "sasl.server.callback.handler.class": (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
        "OAuthBearerUnsecuredValidatorCallbackHandler",
    ),
}


_JAAS_PER_MECHANISM = (
    "a broker reads JAAS configs per listener and mechanism: "
    "listener.name.<listener>.<mechanism>.sasl.jaas.config"
)


def _check_security_support(name: str, property_name: str, value: Any) -> None:
    """``property_name`` is ``name`` without its listener/mechanism prefix."""
    for prefix, reason in UNSUPPORTED_SECURITY_PREFIXES.items():
        if property_name.startswith(prefix):
            raise ConfigException(name, value, f"not supported: {reason}")
    if property_name in UNSUPPORTED_SECURITY_PROPERTIES:
        raise ConfigException(
            name, value, f"not supported: {UNSUPPORTED_SECURITY_PROPERTIES[property_name]}"
        )
    allowed = SUPPORTED_SECURITY_VALUES.get(property_name)
    if allowed is not None and value is not None and str(value).strip() not in allowed:
        raise ConfigException(
            name, value, f"not supported: kfast implements only {' or '.join(allowed)}"
        )


# Per-listener limits checked as their broker-wide property.
_LISTENER_LIMITS = frozenset({"max.connection.creation.rate"})


def _check_listener_property(name: str, value: Any) -> None:
    """listener.name.<listener>.<property> and
    listener.name.<listener>.<mechanism>.<property>: a security property
    there must be one Kafka defines, with a valid value."""
    listener, _, rest = name[len(LISTENER_PREFIX) :].partition(".")
    mechanism, _, mechanism_rest = rest.partition(".")
    if mechanism in SASL_MECHANISM_PREFIXES and mechanism_rest:
        if mechanism_rest not in MECHANISM_PROPERTIES and not (
            mechanism_rest.startswith("sasl.") and mechanism_rest in SERVER_CONFIGS
        ):
            _check_security_support(name, mechanism_rest, value)
            raise ConfigException(name, "[hidden]", "Unknown configuration for a SASL mechanism")
        rest = mechanism_rest
    elif rest == "sasl.jaas.config":
        raise ConfigException(name, "[hidden]", f"not used: {_JAAS_PER_MECHANISM}")
    elif rest in _LISTENER_LIMITS:
        _validate(SERVER_CONFIGS, rest, value)
        return
    elif not rest.startswith(("ssl.", "sasl.", "connections.max.reauth.ms")):
        return  # other per-listener settings (e.g. max.connections) are not security's
    if not listener:
        raise ConfigException(name, None, "expected listener.name.<listener>.<property>")
    _check_security_support(name, rest, value)
    if rest not in SERVER_CONFIGS:
        raise ConfigException(
            name, None if SERVER_CONFIGS.get(rest) is None else value, "Unknown configuration"
        )
    _validate(SERVER_CONFIGS, rest, value)


class KafkaConfig:
    """The broker's configuration: every defined property with its value.

    ``config["log.segment.bytes"]`` gives the coerced value; the properties
    with a precedence rule in Kafka have their own accessors below.
    """

    def __init__(self, props: Mapping[str, Any] | None = None, *, strict: bool = True):
        props = dict(props or {})
        values: dict[str, Any] = {}
        self.extra: dict[str, str] = {}
        for name, raw in props.items():
            if name in DYNAMIC_ONLY_BROKER_CONFIGS:
                if strict:
                    raise ConfigException(
                        name,
                        raw,
                        "This config can only be set dynamically "
                        "(IncrementalAlterConfigs on the broker)",
                    )
                values[name] = _validate(DYNAMIC_ONLY_BROKER_CONFIGS, name, raw)
                continue
            if strict and name.startswith(LISTENER_PREFIX):
                _check_listener_property(name, raw)
            elif strict:
                _check_security_support(name, name, raw)
                if name == "sasl.jaas.config":
                    # Kafka ignores it on a broker; a user setting it believes
                    # otherwise.
                    raise ConfigException(name, "[hidden]", f"not used: {_JAAS_PER_MECHANISM}")
            if name not in SERVER_CONFIGS:
                if not strict or name.startswith(ALLOWED_PREFIXES):
                    self.extra[name] = raw
                    continue
                raise ConfigException(name, raw, "Unknown configuration")
            values[name] = _validate(SERVER_CONFIGS, name, raw)
        for name, key in (*SERVER_CONFIGS.items(), *DYNAMIC_ONLY_BROKER_CONFIGS.items()):
            if name not in values:
                if not key.has_default:
                    raise ConfigException(
                        name, None, "Missing required configuration with no default value"
                    )
                values[name] = key.default
        self.originals = props
        self._values = values
        self._check_relations()

    @classmethod
    def from_properties_text(cls, text: str, **kwargs) -> KafkaConfig:
        return cls(parse_properties(text), **kwargs)

    @classmethod
    def from_file(cls, path: str, **kwargs) -> KafkaConfig:
        with open(path, encoding="utf-8") as f:
            return cls.from_properties_text(f.read(), **kwargs)

    def __getitem__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise ConfigException(name, None, "Unknown configuration") from None

    def get(self, name: str, default: Any = None) -> Any:
        return self._values.get(name, default)

    def is_set(self, name: str) -> bool:
        return name in self.originals

    def with_dynamic(self, dynamic: Mapping[str, Any]) -> KafkaConfig:
        """The broker's current configuration: dynamic overrides (already
        merged cluster default < per-broker, and validated by the
        controller) over these static properties, as Kafka's
        DynamicBrokerConfig builds its current KafkaConfig. Synonyms keep
        their own precedence across levels: a static log.retention.ms still
        wins over a dynamic log.retention.hours, as in Kafka."""
        if not dynamic:
            return self
        merged = dict(self.originals)
        merged.update(dynamic)
        return KafkaConfig(merged, strict=False)

    def listener_override(self, listener: str, name: str) -> Any:
        """listener.name.<listener>.<name> when set (validated as ``name``),
        else None: for settings whose listener value does not fall back to
        the broker's (max.connection.creation.rate, a separate limit)."""
        raw = self.originals.get(f"{LISTENER_PREFIX}{listener.lower()}.{name}")
        return None if raw is None else _validate(SERVER_CONFIGS, name, raw)

    def listener_value(self, listener: str, name: str, mechanism: str | None = None) -> Any:
        """``name`` for one listener, with Kafka's precedence:
        listener.name.<listener>.<mechanism>.<name> (where a mechanism is
        given), then listener.name.<listener>.<name>, then ``name`` itself
        (the listener and mechanism in lower case, as Kafka's ListenerName
        prefixes)."""
        prefix = f"{LISTENER_PREFIX}{listener.lower()}."
        keys = [f"{prefix}{mechanism.lower()}.{name}"] if mechanism else []
        keys.append(prefix + name)
        for key in keys:
            if key in self.originals:
                return _validate(SERVER_CONFIGS, name, self.originals[key])
        return self[name]

    def _check_relations(self) -> None:
        if not self.log_dirs:
            raise ConfigException("log.dirs", self["log.dirs"], "At least one log dir is required")
        node, broker = self["node.id"], self["broker.id"]
        if node >= 0 and broker >= 0 and node != broker:
            raise ConfigException(
                "broker.id", broker, f"broker.id must equal node.id ({node}) when both are set"
            )

    # -- Kafka's precedence rules ----------------------------------------
    @property
    def node_id(self) -> int:
        """node.id, falling back to broker.id; -1 if neither is set."""
        node = self["node.id"]
        return node if node >= 0 else self["broker.id"]

    @property
    def log_dirs(self) -> list[str]:
        dirs = self["log.dirs"]
        return list(dirs) if dirs else [self["log.dir"]]

    @property
    def log_retention_ms(self) -> int:
        """log.retention.ms > log.retention.minutes > log.retention.hours;
        any negative value means unlimited (-1)."""
        if self["log.retention.ms"] is not None:
            millis = self["log.retention.ms"]
        elif self["log.retention.minutes"] is not None:
            millis = self["log.retention.minutes"] * 60 * 1000
        else:
            millis = self["log.retention.hours"] * HOUR_MS
        return -1 if millis < 0 else millis

    @property
    def log_roll_ms(self) -> int:
        millis = self["log.roll.ms"]
        return millis if millis is not None else self["log.roll.hours"] * HOUR_MS

    @property
    def log_roll_jitter_ms(self) -> int:
        millis = self["log.roll.jitter.ms"]
        return millis if millis is not None else self["log.roll.jitter.hours"] * HOUR_MS

    @property
    def log_flush_interval_ms(self) -> int:
        millis = self["log.flush.interval.ms"]
        return millis if millis is not None else self["log.flush.scheduler.interval.ms"]

    _DERIVED = {
        "log.retention.ms": "log_retention_ms",
        "log.roll.ms": "log_roll_ms",
        "log.roll.jitter.ms": "log_roll_jitter_ms",
        "log.flush.interval.ms": "log_flush_interval_ms",
    }

    def topic_defaults(self) -> dict[str, Any]:
        """Topic-level properties with this broker's values for their synonyms."""
        defaults = {}
        for topic_name, key in TOPIC_CONFIGS.items():
            server_name = TOPIC_TO_SERVER.get(topic_name)
            if server_name is None:
                defaults[topic_name] = key.default
            elif server_name in self._DERIVED:
                defaults[topic_name] = getattr(self, self._DERIVED[server_name])
            else:
                defaults[topic_name] = self[server_name]
        return defaults


class LogConfig:
    """A topic's effective configuration: overrides over the broker defaults.

    Attribute access maps underscores to dots (``config.segment_bytes`` is
    ``segment.bytes``), so every topic property is readable without a second
    list of names.
    """

    __slots__ = ("_values", "_defaults", "overrides")

    def __init__(
        self, overrides: Mapping[str, Any] | None = None, defaults: Mapping[str, Any] | None = None
    ):
        if defaults is None:
            defaults = {name: key.default for name, key in TOPIC_CONFIGS.items()}
        self._defaults = dict(defaults)
        self.overrides = dict(LogConfig.validate(overrides or {}))
        values = dict(defaults)
        values.update(self.overrides)
        self._values = values
        if values["retention.ms"] is not None and values["retention.ms"] < 0:
            values["retention.ms"] = -1

    @staticmethod
    def validate(props: Mapping[str, Any]) -> dict[str, Any]:
        """Coerce and check topic properties; ConfigException names a bad one."""
        out = {}
        for name, raw in props.items():
            if name not in TOPIC_CONFIGS:
                raise ConfigException(name, raw, "Unknown topic config name")
            out[name] = _validate(TOPIC_CONFIGS, name, raw)
        return out

    @classmethod
    def from_broker(
        cls, broker: KafkaConfig, overrides: Mapping[str, Any] | None = None
    ) -> LogConfig:
        return cls(overrides, broker.topic_defaults())

    def with_overrides(self, overrides: Mapping[str, Any]) -> LogConfig:
        """A new LogConfig with ``overrides`` replacing this one's overrides
        (same broker defaults): how a topic config change is applied live."""
        return LogConfig(overrides, self._defaults)

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __getattr__(self, attr: str) -> Any:
        name = attr.replace("_", ".")
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(attr) from None

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    @property
    def compact(self) -> bool:
        return "compact" in self._values["cleanup.policy"]

    @property
    def delete(self) -> bool:
        return "delete" in self._values["cleanup.policy"]

    @property
    def log_append_time(self) -> bool:
        return self._values["message.timestamp.type"] == "LogAppendTime"

    @property
    def max_index_size(self) -> int:
        return self._values["segment.index.bytes"]

    def __repr__(self) -> str:
        return f"LogConfig(overrides={self.overrides})"
