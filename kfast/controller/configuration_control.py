"""ConfigurationControlManager: dynamic config overrides of topics and brokers.

State: (resource type, resource name) -> {key: value}, built from
ConfigRecords (a null value deletes the key). Topic resources are named by
the topic; broker resources by the broker id, or "" for the cluster-wide
default of every broker; group resources by the group id (any group, known
to the coordinator or not, as in Kafka).

IncrementalAlterConfigs applies SET / DELETE / APPEND / SUBTRACT per key
(APPEND and SUBTRACT only for LIST-typed configs); the legacy AlterConfigs
replaces a resource's whole set. Either way the resulting set is validated
before any record is written: topic configs through kfast.config's
LogConfig (unknown key or bad value -> INVALID_CONFIG); broker configs as
Kafka's DynamicBrokerConfig.validateConfigs, with the update modes of
kfast.kafka_broker_configs (listener-prefixed names by the config they
set), each refusal INVALID_REQUEST with Kafka's message: a read-only config
("Cannot update these configs dynamically"), an SSL store config without a
listener prefix ("... only per-listener using the listener prefix"), a
per-broker config on the cluster-wide default resource ("... broker id must
be specified"). Of Kafka's dynamic configs kfast accepts those it serves
(DYNAMIC_BROKER_CONFIGS, the configs that exist only dynamically such as the
replication throttle rates); the others are refused with a message saying
kfast does not update them dynamically, rather than stored and silently
ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import NamedTuple

from kfast.config import (
    CLIENT_METRICS_CONFIGS,
    DYNAMIC_ONLY_BROKER_CONFIGS,
    GROUP_CONFIGS,
    SERVER_CONFIGS,
    TOPIC_CONFIGS,
    TOPIC_TO_SERVER,
    ConfigException,
    ConfigKey,
    KafkaConfig,
    LogConfig,
    Type,
    coerce,
)
from kfast.controller.controller_result import ControllerResult
from kfast.controller.group_config import validate_group_configs
from kfast.controller.metadata.records import ConfigRecord, MetadataRecord
from kfast.kafka_broker_configs import (
    KAFKA_BROKER_CONFIGS,
    LISTENER_ONLY_SECURITY_CONFIGS,
    PER_BROKER,
    READ_ONLY,
    listener_base_name,
    update_mode,
)
from kfast.metrics import subscriptions
from kfast.protocol import errors
from kfast.protocol.constants import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_CLIENT_METRICS,
    CONFIG_RESOURCE_GROUP,
    CONFIG_RESOURCE_TOPIC,
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
)

# Broker configs kfast accepts as dynamic overrides (the rest are read-only,
# as in Kafka):
# - the broker-level defaults of topic configs (Kafka's
#   DynamicLogConfig.ReconfigurableConfigs, the server side of
#   ServerTopicConfigSynonyms): applied live to every log without a topic
#   override;
# - connection limits (SocketServer.ReconfigurableConfigs) and the log
#   cleaner's pass interval (log.cleaner.backoff.ms): applied live;
# - thread-pool and cleaner sizing (DynamicThreadPool, LogCleaner
#   .ReconfigurableConfigs). Kafka treats these as per-broker tunables with
#   no client-visible effect; kfast runs one event loop plus an executor, so
#   it stores and describes them and otherwise ignores them.
APPLIED_BROKER_CONFIGS = frozenset(
    {
        "max.connections",
        "max.connections.per.ip",
        "max.connection.creation.rate",
        "log.cleaner.backoff.ms",
    }
)
# Listener-prefixed configs kfast applies per listener
# (listener.name.<l>.<config>).
APPLIED_LISTENER_CONFIGS = frozenset({"max.connection.creation.rate"})
THREAD_POOL_CONFIGS = frozenset(
    {
        "num.io.threads",
        "num.network.threads",
        "num.replica.fetchers",
        "num.recovery.threads.per.data.dir",
        "background.threads",
        "log.cleaner.threads",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.size",
        "log.cleaner.io.max.bytes.per.second",
    }
)
# - the Kerberos and login-refresh settings of SASL listeners: dynamic in
#   Kafka (DynamicListenerConfig), and without effect in kfast as in a Kafka
#   broker with no GSSAPI or OAUTHBEARER login, so stored and described.
SASL_LOGIN_CONFIGS = frozenset(
    {
        "sasl.kerberos.service.name",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.buffer.seconds",
    }
)
# Only the names Kafka itself updates dynamically (log.retention.hours and
# the other secondary synonyms are read-only there).
DYNAMIC_BROKER_CONFIGS = (
    frozenset(name for name, key in SERVER_CONFIGS.items() if key.topic_synonym is not None)
    | APPLIED_BROKER_CONFIGS
    | (THREAD_POOL_CONFIGS & SERVER_CONFIGS.keys())
    | SASL_LOGIN_CONFIGS
) & {name for name, key in KAFKA_BROKER_CONFIGS.items() if key.mode != READ_ONLY}


def broker_config_type(name: str) -> tuple[Type, object] | None:
    """(type, default) of a broker config name: kfast's define() row, else
    Kafka's catalogue (a listener-prefixed name by the config it sets)."""
    base = listener_base_name(name) or name
    key = SERVER_CONFIGS.get(base) or DYNAMIC_ONLY_BROKER_CONFIGS.get(base)
    if key is not None:
        return key.type, key.default
    catalogued = KAFKA_BROKER_CONFIGS.get(base)
    return (catalogued.type, catalogued.default) if catalogued else None


def config_type(resource_type: int, key: str) -> ConfigKey | _TypeOnly | None:
    """The ConfigKey defining ``key`` for a resource type, or None."""
    if resource_type == CONFIG_RESOURCE_TOPIC:
        return TOPIC_CONFIGS.get(key)
    if resource_type == CONFIG_RESOURCE_CLIENT_METRICS:
        return CLIENT_METRICS_CONFIGS.get(key)
    if resource_type == CONFIG_RESOURCE_GROUP:
        return GROUP_CONFIGS.get(key)
    found = broker_config_type(key)
    return None if found is None else _TypeOnly(*found)


class _TypeOnly(NamedTuple):
    type: Type
    default: object


def format_value(value: object) -> str | None:
    """A config value as Kafka prints it (lists comma-separated, booleans
    lower case)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


class ConfigurationControlManager:
    """``topic_exists(name)`` and ``broker_exists(id)`` come from the other
    managers (a resource must exist before it is configured);
    ``broker_config`` bounds group configs (None: groups are not
    configurable)."""

    def __init__(
        self,
        topic_exists: Callable[[str], bool],
        broker_exists: Callable[[int], bool],
        broker_config: KafkaConfig | None = None,
    ):
        self.topic_exists = topic_exists
        self.broker_exists = broker_exists
        self.broker_config = broker_config
        self.configs: dict[tuple[int, str], dict[str, str]] = {}

    def get(self, resource_type: int, name: str) -> dict[str, str]:
        return self.configs.get((resource_type, name), {})

    # -- operations ----------------------------------------------------------------
    def incremental_alter_configs(
        self, changes: list[tuple[int, str, list[tuple[str, int, str | None]]]]
    ) -> ControllerResult[list[errors.KafkaError | None]]:
        """``changes``: (resource type, name, [(key, op, value)]) per resource.
        Response: one KafkaError or None per resource."""
        results: list[errors.KafkaError | None] = []
        records: list[MetadataRecord] = []
        counts = _resource_counts(changes)
        for resource_type, name, ops in changes:
            try:
                if counts[resource_type, name] > 1:
                    raise errors.InvalidRequestException("Duplicate resource.")
                self._check_resource(resource_type, name)
                current = self.get(resource_type, name)
                updated: dict[str, str | None] = dict(current)
                for key, op, value in ops:
                    self._apply_op(resource_type, updated, key, op, value)
                records += self._validated_records(resource_type, name, current, updated)
                results.append(None)
            except errors.KafkaError as exc:
                results.append(exc)
        return ControllerResult(results, records)

    def legacy_alter_configs(
        self, changes: list[tuple[int, str, Mapping[str, str | None]]]
    ) -> ControllerResult[list[errors.KafkaError | None]]:
        """AlterConfigs: each resource's set becomes exactly the given one."""
        results: list[errors.KafkaError | None] = []
        records: list[MetadataRecord] = []
        counts = _resource_counts(changes)
        for resource_type, name, new_set in changes:
            try:
                if counts[resource_type, name] > 1:
                    raise errors.InvalidRequestException("Duplicate resource.")
                self._check_resource(resource_type, name)
                for key, value in new_set.items():
                    if value is None:
                        raise errors.InvalidRequestException(
                            f"Null value not supported for : {key}"
                        )
                records += self._validated_records(
                    resource_type, name, self.get(resource_type, name), dict(new_set)
                )
                results.append(None)
            except errors.KafkaError as exc:
                results.append(exc)
        return ControllerResult(results, records)

    def _check_resource(self, resource_type: int, name: str) -> None:
        if resource_type == CONFIG_RESOURCE_TOPIC:
            if not self.topic_exists(name):
                raise errors.UnknownTopicOrPartitionException(f"The topic '{name}' does not exist.")
        elif resource_type == CONFIG_RESOURCE_BROKER:
            if name == "":
                return
            try:
                broker_id = int(name)
            except ValueError:
                raise errors.InvalidRequestException(f"Invalid broker name {name}") from None
            if broker_id < 0 or not self.broker_exists(broker_id):
                raise errors.BrokerIdNotRegisteredException(f"Broker {name} is not registered.")
        elif resource_type == CONFIG_RESOURCE_CLIENT_METRICS:
            # A subscription exists once it has configs: any name but "".
            if not name:
                raise errors.InvalidRequestException("Subscription name can't be empty")
        elif resource_type == CONFIG_RESOURCE_GROUP and self.broker_config is not None:
            if not name:
                raise errors.InvalidRequestException("Default group resources are not allowed.")
        else:
            raise errors.InvalidRequestException(
                f"Unsupported resource type {resource_type} for altering configs"
            )

    def _apply_op(
        self,
        resource_type: int,
        updated: dict[str, str | None],
        key: str,
        op: int,
        value: str | None,
    ) -> None:
        if op == OP_SET:
            updated[key] = value
        elif op == OP_DELETE:
            updated.pop(key, None)
        elif op in (OP_APPEND, OP_SUBTRACT):
            key_type = config_type(resource_type, key)
            if key_type is None or key_type.type is not Type.LIST:
                verb = "APPEND to" if op == OP_APPEND else "SUBTRACT from"
                raise errors.InvalidConfigurationException(
                    f"Can't {verb} key {key} because its type is not LIST."
                )
            present = updated.get(key)
            if present is not None:
                items = [v.strip() for v in present.split(",") if v.strip()]
            else:
                default = _default_value(resource_type, key, key_type)
                if isinstance(default, str):  # Kafka's catalogue spells LIST defaults as text
                    items = [v.strip() for v in default.split(",") if v.strip()]
                elif isinstance(default, (list, tuple)):
                    items = [str(v) for v in default]
                else:
                    items = []
            given = [v.strip() for v in (value or "").split(",") if v.strip()]
            if op == OP_APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            updated[key] = ",".join(items)
        else:
            raise errors.InvalidRequestException(f"Unknown alter configs op type {op}")

    def _validated_records(
        self,
        resource_type: int,
        name: str,
        current: Mapping[str, str],
        requested: Mapping[str, str | None],
    ) -> list[MetadataRecord]:
        updated = {k: v for k, v in requested.items() if v is not None}
        if resource_type == CONFIG_RESOURCE_TOPIC:
            try:
                LogConfig.validate(updated)
            except ConfigException as exc:
                raise errors.InvalidConfigurationException(str(exc)) from None
        elif resource_type == CONFIG_RESOURCE_CLIENT_METRICS:
            subscriptions.validate(name, updated)
        elif resource_type == CONFIG_RESOURCE_GROUP:
            if self.broker_config is None:  # _check_resource refused it already
                raise errors.InvalidRequestException(
                    f"Unsupported resource type {resource_type} for altering configs"
                )
            validate_group_configs(self.broker_config, updated)
        else:
            changed = {k for k in set(updated) | set(current) if updated.get(k) != current.get(k)}
            unknown = sorted(k for k in changed if config_type(resource_type, k) is None)
            if unknown:
                raise errors.InvalidConfigurationException(
                    f"Unknown broker config(s): {', '.join(unknown)}"
                )
            _check_broker_update_modes(changed, per_broker=name != "")
            for key, value in updated.items():
                try:
                    base = listener_base_name(key) or key
                    definition = SERVER_CONFIGS.get(base) or DYNAMIC_ONLY_BROKER_CONFIGS.get(base)
                    if definition is None:
                        if base in KAFKA_BROKER_CONFIGS:
                            coerce(key, KAFKA_BROKER_CONFIGS[base].type, value)
                        continue
                    coerced = coerce(key, definition.type, value)
                    if definition.validator is not None:
                        definition.validator(key, coerced)
                except ConfigException as exc:
                    raise errors.InvalidConfigurationException(str(exc)) from None
        records: list[MetadataRecord] = []
        for key in sorted(set(current) | set(updated)):
            if current.get(key) != updated.get(key):
                records.append(
                    ConfigRecord(
                        resource_type=resource_type,
                        resource_name=name,
                        name=key,
                        value=updated.get(key),
                    )
                )
        return records

    # -- replay --------------------------------------------------------------------
    def replay(self, record: ConfigRecord) -> tuple[int, str]:
        resource = (record.resource_type, record.resource_name)
        if record.value is None:
            configs = self.configs.get(resource)
            if configs is not None:
                configs.pop(record.name, None)
                if not configs:
                    del self.configs[resource]
        else:
            self.configs.setdefault(resource, {})[record.name] = record.value
        return resource

    def delete_topic_configs(self, name: str) -> bool:
        """A removed topic loses its overrides (replay of RemoveTopicRecord)."""
        return self.configs.pop((CONFIG_RESOURCE_TOPIC, name), None) is not None


def _scala_set(names: Iterable[str]) -> str:
    """A set of names as Kafka's messages print it (a Scala Set)."""
    return f"Set({', '.join(sorted(names))})"


def _check_broker_update_modes(changed: Collection[str], per_broker: bool) -> None:
    """Kafka's DynamicBrokerConfig.validateConfigs over the changed names, in
    its order, then kfast's own limit: a dynamic config kfast does not apply."""
    dynamic_only = {k for k in changed if k in DYNAMIC_ONLY_BROKER_CONFIGS}
    modes = {k: update_mode(k) for k in changed if k not in dynamic_only}
    read_only = [k for k, mode in modes.items() if mode == READ_ONLY]
    if read_only:
        raise errors.InvalidRequestException(
            f"Cannot update these configs dynamically: {_scala_set(read_only)}"
        )
    unprefixed = [k for k in modes if k in LISTENER_ONLY_SECURITY_CONFIGS]
    if unprefixed:
        raise errors.InvalidRequestException(
            "These security configs can be dynamically updated only per-listener using the "
            f"listener prefix: {_scala_set(unprefixed)}"
        )
    if not per_broker:
        only_per_broker = [k for k, mode in modes.items() if mode == PER_BROKER]
        if only_per_broker:
            raise errors.InvalidRequestException(
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {_scala_set(only_per_broker)}"
            )
    # With a listener prefix only the connection creation rate and the SASL
    # login settings (no effect either way): kfast applies its other
    # connection limits to the broker as a whole.
    unserved = [
        k
        for k in modes
        if k not in DYNAMIC_BROKER_CONFIGS
        and listener_base_name(k) not in SASL_LOGIN_CONFIGS | APPLIED_LISTENER_CONFIGS
    ]
    if unserved:
        raise errors.InvalidRequestException(
            f"kfast does not update these configs dynamically: {_scala_set(unserved)}"
        )


def _resource_counts(changes: Iterable[tuple[int, str, object]]) -> dict[tuple[int, str], int]:
    counts: dict[tuple[int, str], int] = {}
    for resource_type, name, _ in changes:
        counts[resource_type, name] = counts.get((resource_type, name), 0) + 1
    return counts


def _default_value(resource_type: int, key: str, definition: ConfigKey | _TypeOnly) -> object:
    if resource_type == CONFIG_RESOURCE_TOPIC:
        server = TOPIC_TO_SERVER.get(key)
        if server is not None and SERVER_CONFIGS[server].default is not None:
            return SERVER_CONFIGS[server].default
        return TOPIC_CONFIGS[key].default
    return definition.default
