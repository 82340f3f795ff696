"""``kfast configs``: describe and alter dynamic configs and client quotas,
like kafka-configs.sh.

    kfast configs --bootstrap-server H:P --entity-type topics --entity-name t --describe [--all]
    kfast configs --bootstrap-server H:P --entity-type topics --entity-name t --alter \\
        --add-config retention.ms=1000,cleanup.policy=[compact,delete] --delete-config segment.ms
    kfast configs --bootstrap-server H:P --entity-type brokers --entity-default --alter \\
        --add-config log.cleaner.backoff.ms=1000
    kfast configs --bootstrap-server H:P --entity-type broker-loggers --entity-name 1 --alter \\
        --add-config kfast.server=DEBUG
    kfast configs --bootstrap-server H:P --entity-type users --entity-name alice \\
        --entity-type clients --entity-default --alter --add-config producer_byte_rate=1024
    kfast configs --bootstrap-server H:P --entity-type clients --describe

Entities: topics and brokers through DescribeConfigs / IncrementalAlterConfigs
(brokers through the legacy AlterConfigs with the broker's whole dynamic set,
as kafka-configs.sh does), broker-loggers through BROKER_LOGGER resources,
users / clients / ips through DescribeClientQuotas / AlterClientQuotas.
``--entity-name`` and ``--entity-default`` pair with the ``--entity-type``
options in command-line order (``users`` then ``clients`` for a user's
quota for one client). The shorthands ``--topic T``, ``--user U``,
``--client C``, ``--broker B``, ``--broker-logger B``, ``--ip I`` and
``--user-defaults`` ... are kafka-configs.sh's too.

Output is kafka-configs.sh's: ``Dynamic configs for topic t are:`` then
``  k=v sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:k=v, ...}`` per
config; ``Quota configs for user-principal 'alice', the default client-id
are producer_byte_rate=1024.0``; ``Completed updating config for topic t.``.
A usage or config error prints its message to stderr and exits 1; a failure
reported by the cluster prints ``Error while executing config command with
args '...'`` and the error to stderr and exits 1.

User configs other than quotas (SCRAM credentials) are handled by the
modules named in USER_CONFIG_MODULES: each defines ``handles(key) ->
bool``, ``async alter(admin, user, add: dict, delete: list)`` and ``async
describe(admin, users: list, out)``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import math
import re
import sys
from decimal import Decimal

from kfast.client.admin import KafkaAdmin
from kfast.config import (
    CLIENT_QUOTA_CONFIGS,
    IP_QUOTA_CONFIGS,
    ConfigException,
    parse_properties,
)
from kfast.protocol import errors
from kfast.protocol.constants import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_BROKER_LOGGER,
    CONFIG_RESOURCE_TOPIC,
    OP_DELETE,
    OP_SET,
    QUOTA_ENTITY_CLIENT_ID,
    QUOTA_ENTITY_IP,
    QUOTA_ENTITY_USER,
    QUOTA_MATCH_DEFAULT,
    QUOTA_MATCH_EXACT,
    QUOTA_MATCH_SPECIFIED,
    SOURCE_DYNAMIC_BROKER_CONFIG,
    SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
    SOURCE_DYNAMIC_TOPIC_CONFIG,
)
from kfast.tools.command_config import add_command_config, admin_options

TOPICS, BROKERS, BROKER_LOGGERS = "topics", "brokers", "broker-loggers"
USERS, CLIENTS, IPS = "users", "clients", "ips"
ENTITY_TYPES = (TOPICS, CLIENTS, USERS, BROKERS, BROKER_LOGGERS, IPS)
_QUOTA_ENTITY = {USERS: QUOTA_ENTITY_USER, CLIENTS: QUOTA_ENTITY_CLIENT_ID, IPS: QUOTA_ENTITY_IP}
# How kafka-configs.sh names each quota entity type in its output.
_QUOTA_ENTITY_WORDS = (
    (QUOTA_ENTITY_USER, "user-principal"),
    (QUOTA_ENTITY_CLIENT_ID, "client-id"),
    (QUOTA_ENTITY_IP, "ip"),
)
# Kafka's ConfigEntry.ConfigSource names, by DescribeConfigs' config_source.
SOURCE_NAMES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "DYNAMIC_CLIENT_METRICS_CONFIG",
    8: "DYNAMIC_GROUP_CONFIG",
}
_CONFIG_KEY = re.compile(r"[a-zA-Z0-9._-]*")
# kafka-configs.sh splits --add-config on commas outside [...], and each
# item on its first '=' outside [...].
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"
# Modules handling user configs other than quotas (see the module docstring).
USER_CONFIG_MODULES: list[str] = ["kfast.tools.scram_credentials"]


class UsageError(Exception):
    """kafka-configs.sh's IllegalArgumentException and
    InvalidConfigurationException: the message alone goes to stderr."""


class _EntityName(argparse.Action):
    """--entity-name and --entity-default fill one list in command-line
    order ("" is the default entity), as kafka-configs.sh pairs them with
    --entity-type."""

    def __call__(self, parser, namespace, values, option_string=None):
        names = getattr(namespace, "entity_names", None) or []
        names.append(values if isinstance(values, str) else "")
        namespace.entity_names = names


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "configs",
        help="describe and alter configs and client quotas (like kafka-configs.sh)",
        description="Describe and alter dynamic configs of topics, brokers and broker loggers, "
        "and quotas of users, clients and IPs, like kafka-configs.sh.",
    )
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--describe", action="store_true", help="list configs of the entity")
    p.add_argument("--alter", action="store_true", help="change configs of the entity")
    p.add_argument("--entity-type", action="append", default=[], choices=ENTITY_TYPES)
    p.add_argument("--entity-name", action=_EntityName, dest="entity_names")
    p.add_argument(
        "--entity-default",
        action=_EntityName,
        nargs=0,
        dest="entity_names",
        help="the default entity (clients, users, brokers, ips)",
    )
    for flag, entity_type in (
        ("topic", TOPICS),
        ("client", CLIENTS),
        ("user", USERS),
        ("broker", BROKERS),
        ("broker-logger", BROKER_LOGGERS),
        ("ip", IPS),
    ):
        p.add_argument(
            f"--{flag}",
            dest=f"flag_{entity_type}",
            metavar="NAME",
            help=f"same as --entity-type {entity_type} --entity-name NAME",
        )
    for flag, entity_type in (
        ("client-defaults", CLIENTS),
        ("user-defaults", USERS),
        ("broker-defaults", BROKERS),
        ("ip-defaults", IPS),
    ):
        p.add_argument(
            f"--{flag}",
            dest=f"default_{entity_type}",
            action="store_true",
            help=f"same as --entity-type {entity_type} --entity-default",
        )
    p.add_argument("--add-config", metavar="K=V,K=[V1,V2]", help="configs to set")
    p.add_argument("--add-config-file", metavar="FILE", help="a properties file of configs to set")
    p.add_argument(
        "--delete-config", action="append", default=[], metavar="K,K", help="configs to remove"
    )
    p.add_argument("--all", action="store_true", help="describe: every config, not only overrides")
    p.add_argument("--command-timeout", type=float, default=30.0, metavar="SECONDS")
    add_command_config(p)
    p.set_defaults(handler=run, entity_names=None)


def run(args, out=None, err=None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        entities = _entities(args)
        return asyncio.run(_run(args, entities, out))
    except UsageError as exc:
        err.write(f"{exc}\n")
        return 1
    except (errors.InvalidConfigurationException, ConfigException) as exc:
        err.write(f"{exc}\n")
        return 1
    except errors.KafkaError as exc:
        err.write(
            f"Error while executing config command with args '{_command_line(args)}'\n"
            f"{type(exc).__name__}: {exc}\n"
        )
        return 1


def _command_line(args) -> str:
    words = sys.argv[1:]
    return " ".join(words[1:] if words[:1] == ["configs"] else words)


# -- the command line -----------------------------------------------------------------
def _entities(args) -> list[tuple[str, str | None]]:
    """[(entity type, name)]: name "" for the default entity, None when the
    command names none (describe every entity of the type)."""
    names = list(args.entity_names or [])
    flags = [
        (t, getattr(args, f"flag_{t}"))
        for t in ENTITY_TYPES
        if getattr(args, f"flag_{t}") is not None
    ]
    flags += [(t, "") for t in ENTITY_TYPES if getattr(args, f"default_{t}", False)]
    if (args.entity_type or names) and flags:
        raise UsageError(
            "--entity-{type,name,default} should not be used in conjunction with "
            "specific entity flags"
        )
    if args.describe == args.alter:
        raise UsageError("Command must include exactly one action: --describe, --alter")
    if args.describe and (args.add_config or args.add_config_file or args.delete_config):
        raise UsageError(
            'Option "[describe]" can\'t be used with option '
            '"[add-config, add-config-file, delete-config]"'
        )
    types = list(args.entity_type) + [t for t, _ in flags]
    names += [n for _, n in flags]
    if not types:
        raise UsageError("At least one entity type must be specified")
    duplicates = sorted({t for t in types if types.count(t) > 1})
    if duplicates:
        raise UsageError(f"Duplicate entity type(s) specified: {','.join(duplicates)}")
    if len(types) > 1 and set(types) != {USERS, CLIENTS}:
        raise UsageError(f"Only '{USERS}' and '{CLIENTS}' entity types may be specified together")
    if len(names) > len(types):
        raise UsageError("More entity names specified than entity types")
    if args.alter and len(names) != len(types):
        raise UsageError("An entity name must be specified for every entity type")
    has_name = any(names)
    head = types[0]
    if has_name and head in (BROKERS, BROKER_LOGGERS):
        for name in names:
            if name and not name.isdigit():
                raise UsageError(
                    f"The entity name for {head} must be a valid integer broker id, "
                    f"but it is: {name}"
                )
    if args.describe:
        if "" in names and not set(types) & {USERS, CLIENTS, BROKERS, IPS}:
            raise UsageError(
                f"--entity-default must not be specified with --describe of {','.join(types)}"
            )
        if head == BROKER_LOGGERS and not has_name:
            raise UsageError(f"An entity name must be specified with --describe of {head}")
    if args.alter:
        if set(types) & {USERS, CLIENTS, BROKERS, IPS}:
            if not names:
                raise UsageError(
                    "An entity-name or default entity must be specified with "
                    "--alter of users, clients, brokers or ips"
                )
        elif not has_name:
            raise UsageError(f"An entity name must be specified with --alter of {','.join(types)}")
        if not (args.add_config or args.add_config_file or args.delete_config):
            raise UsageError(
                "At least one of --add-config, --add-config-file, or "
                "--delete-config must be specified with --alter"
            )
    return [(t, names[i] if i < len(names) else None) for i, t in enumerate(types)]


def parse_add_config(text: str | None) -> dict[str, str]:
    """kafka-configs.sh's --add-config: k=v pairs separated by commas, a
    value in [...] may hold commas (the brackets are dropped)."""
    configs: dict[str, str] = {}
    if not text:
        return configs
    for item in re.split("," + _OUTSIDE_BRACKETS, text):
        pair = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, item, maxsplit=1)
        if len(pair) != 2:
            raise UsageError(
                'Invalid entity config: all configs to be added must be in the format "key=val".'
            )
        configs[pair[0].strip()] = re.sub(r"\[?\]?", "", pair[1]).strip()
    return configs


def _configs_to_add(args) -> dict[str, str]:
    configs: dict[str, str] = {}
    if args.add_config_file:
        with open(args.add_config_file, encoding="utf-8") as f:
            configs.update(parse_properties(f.read()))
    configs.update(parse_add_config(args.add_config))
    for key in configs:
        if not _CONFIG_KEY.fullmatch(key):
            raise UsageError(f"Invalid character found for config key: {key}")
    return configs


def _configs_to_delete(args) -> list[str]:
    return [k.strip() for item in args.delete_config for k in item.split(",") if k.strip()]


# -- running ------------------------------------------------------------------------------
async def _run(args, entities, out) -> int:
    admin = KafkaAdmin(
        args.bootstrap_server,
        **admin_options(
            args,
            client_id="kfast-configs",
            request_timeout=args.command_timeout,
            metadata_timeout=args.command_timeout,
        ),
    )
    await admin.start()
    try:
        if args.alter:
            await _alter(admin, args, entities, out)
        else:
            await _describe(admin, args, entities, out)
        return 0
    finally:
        await admin.close()


async def _describe(admin: KafkaAdmin, args, entities, out) -> None:
    head, name = entities[0]
    if head in (USERS, CLIENTS, IPS):
        await _describe_quotas(admin, entities, out)
        if head == USERS and len(entities) == 1 and name != "":
            users = [name] if name else None
            for module in _user_config_modules():
                await module.describe(admin, users, out)
        return
    if name is not None:
        names = [name]
    elif head == TOPICS:
        names = await admin.list_topics(include_internal=True)
    else:
        cluster = await admin.describe_cluster()
        names = [str(broker[0]) for broker in cluster.brokers] + [""]
    for entity in names:
        if entity == "":
            out.write(f"Default configs for {head} in the cluster are:\n")
        else:
            out.write(f"{'All' if args.all else 'Dynamic'} configs for {head[:-1]} {entity} are:\n")
        for entry in await _resource_configs(admin, head, entity, True, args.all):
            synonyms = ", ".join(
                f"{SOURCE_NAMES.get(s, 'UNKNOWN')}:{n}={_java(v)}" for n, v, s in entry.synonyms
            )
            out.write(
                f"  {entry.name}={_java(entry.value)} "
                f"sensitive={_java(entry.is_sensitive)} synonyms={{{synonyms}}}\n"
            )


async def _resource_configs(
    admin: KafkaAdmin, entity_type: str, name: str, include_synonyms: bool, describe_all: bool
):
    """kafka-configs.sh's getResourceConfig: the entity's configs sorted by
    name, only its dynamic overrides unless ``describe_all``."""
    if entity_type == TOPICS:
        resource_type, source = CONFIG_RESOURCE_TOPIC, SOURCE_DYNAMIC_TOPIC_CONFIG
    elif entity_type == BROKERS:
        resource_type = CONFIG_RESOURCE_BROKER
        source = (
            SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG if name == "" else SOURCE_DYNAMIC_BROKER_CONFIG
        )
    else:
        resource_type, source, describe_all = CONFIG_RESOURCE_BROKER_LOGGER, None, True
    configs = (
        await admin.describe_configs(resource_type, [name], include_synonyms=include_synonyms)
    )[name]
    return sorted((c for c in configs if describe_all or c.source == source), key=lambda c: c.name)


async def _alter(admin: KafkaAdmin, args, entities, out) -> None:
    head, name = entities[0]
    add = _configs_to_add(args)
    delete = _configs_to_delete(args)
    if head == TOPICS:
        await _alter_incremental(admin, CONFIG_RESOURCE_TOPIC, head, name, add, delete)
    elif head == BROKERS:
        old = {c.name: c for c in await _resource_configs(admin, head, name, False, False)}
        missing = [k for k in delete if k not in old]
        if missing:
            raise errors.InvalidConfigurationException(f"Invalid config(s): {','.join(missing)}")
        new = {k: c.value for k, c in old.items() if k not in delete}
        new.update(add)
        sensitive = sorted(k for k, v in new.items() if v is None)
        if sensitive:
            raise errors.InvalidConfigurationException(
                f"All sensitive broker config entries must be specified for --alter, missing "
                f"entries: [{', '.join(sensitive)}]"
            )
        await admin.alter_configs(CONFIG_RESOURCE_BROKER, name, new)
    elif head == BROKER_LOGGERS:
        loggers = {c.name for c in await _resource_configs(admin, head, name, True, False)}
        invalid = [k for k in delete if k not in loggers] + [k for k in add if k not in loggers]
        if invalid:
            raise errors.InvalidConfigurationException(
                f"Invalid broker logger(s): {','.join(invalid)}"
            )
        await admin.incremental_alter_configs(
            CONFIG_RESOURCE_BROKER_LOGGER,
            name,
            {**{k: (OP_SET, v) for k, v in add.items()}, **{k: (OP_DELETE, "") for k in delete}},
        )
    elif head == IPS:
        unknown = [k for k in list(add) + delete if k not in IP_QUOTA_CONFIGS]
        if unknown:
            raise UsageError(
                f"Only connection quota configs can be added for '{IPS}' using "
                f"--bootstrap-server. Unexpected config names: {','.join(unknown)}"
            )
        await _alter_quotas(admin, entities, add, delete)
    else:
        await _alter_user_or_client(admin, entities, add, delete)
    if name:
        out.write(f"Completed updating config for {head[:-1]} {name}.\n")
    else:
        out.write(f"Completed updating default config for {head} in the cluster.\n")


async def _alter_incremental(
    admin: KafkaAdmin, resource_type: int, entity_type: str, name: str, add: dict, delete: list
) -> None:
    old = {c.name for c in await _resource_configs(admin, entity_type, name, False, False)}
    missing = [k for k in delete if k not in old]
    if missing:
        raise errors.InvalidConfigurationException(f"Invalid config(s): {','.join(missing)}")
    await admin.incremental_alter_configs(
        resource_type,
        name,
        {**{k: (OP_SET, v) for k, v in add.items()}, **{k: (OP_DELETE, "") for k in delete}},
    )


async def _alter_user_or_client(admin: KafkaAdmin, entities, add: dict, delete: list) -> None:
    """kafka-configs.sh's users/clients branch: quota configs through
    AlterClientQuotas; for a user alone, the other keys go to the module
    that handles them (SCRAM credentials), never both kinds at once."""
    head, name = entities[0]
    modules = _user_config_modules() if head == USERS and len(entities) == 1 else []

    def handler(key):
        return next((m for m in modules if m.handles(key)), None)

    quota_add = [k for k in add if k in CLIENT_QUOTA_CONFIGS]
    quota_delete = [k for k in delete if k in CLIENT_QUOTA_CONFIGS]
    other_add = [k for k in add if k not in CLIENT_QUOTA_CONFIGS]
    other_delete = [k for k in delete if k not in CLIENT_QUOTA_CONFIGS]
    if head == CLIENTS or len(entities) == 2:
        if other_add:
            raise UsageError(
                f"Only quota configs can be added for '{CLIENTS}' using "
                f"--bootstrap-server. Unexpected config names: {other_add}"
            )
        if other_delete:
            raise UsageError(
                f"Only quota configs can be deleted for '{CLIENTS}' using "
                f"--bootstrap-server. Unexpected config names: {other_delete}"
            )
    else:
        unknown_add = [k for k in other_add if handler(k) is None]
        unknown_delete = [k for k in other_delete if handler(k) is None]
        if unknown_add:
            raise UsageError(
                f"Only quota and SCRAM credential configs can be added for "
                f"'{USERS}' using --bootstrap-server. Unexpected config names: "
                f"{unknown_add}"
            )
        if unknown_delete:
            raise UsageError(
                f"Only quota and SCRAM credential configs can be deleted for "
                f"'{USERS}' using --bootstrap-server. Unexpected config names: "
                f"{unknown_delete}"
            )
        if other_add or other_delete:
            if name == "":
                raise UsageError(
                    "The use of --entity-default or --user-defaults is not allowed "
                    "with User SCRAM Credentials using --bootstrap-server."
                )
            if quota_add or quota_delete:
                raise UsageError(
                    f"Cannot alter both quota and SCRAM credential configs "
                    f"simultaneously for '{USERS}' using --bootstrap-server."
                )
    if quota_add or quota_delete:
        await _alter_quotas(admin, entities, add, delete)
        return
    for module in modules:
        mine_add = {k: v for k, v in add.items() if handler(k) is module}
        mine_delete = [k for k in delete if handler(k) is module]
        if mine_add or mine_delete:
            await module.alter(admin, name, mine_add, mine_delete)


def _user_config_modules() -> list:
    return [importlib.import_module(name) for name in USER_CONFIG_MODULES]


# -- quotas ---------------------------------------------------------------------------------
def _quota_filter(entities) -> list[tuple[str, int, str | None]]:
    """kafka-configs.sh's filter: a named entity matches exactly, "" the
    default, no name any entity of the type (strict: no other types)."""
    components: list[tuple[str, int, str | None]] = []
    for entity_type, name in entities:
        quota_type = _QUOTA_ENTITY[entity_type]
        if name is None:
            components.append((quota_type, QUOTA_MATCH_SPECIFIED, None))
        elif name == "":
            components.append((quota_type, QUOTA_MATCH_DEFAULT, None))
        else:
            components.append((quota_type, QUOTA_MATCH_EXACT, name))
    return components


async def _alter_quotas(admin: KafkaAdmin, entities, add: dict, delete: list) -> None:
    described = await admin.describe_client_quotas(_quota_filter(entities), strict=True)
    old = described[0][1] if described else {}
    missing = [k for k in delete if k not in old]
    if missing:
        raise errors.InvalidConfigurationException(f"Invalid config(s): {','.join(missing)}")
    ops: dict[str, float | None] = {}
    for key, value in add.items():
        try:
            ops[key] = float(value)
        except ValueError:
            raise UsageError(f"Cannot parse quota configuration value for {key}: {value}") from None
    ops.update({k: None for k in delete})
    entity = {_QUOTA_ENTITY[t]: (n or None) for t, n in entities}
    await admin.alter_client_quotas([(entity, ops)])


def quota_entity_text(entity: dict[str, str | None]) -> str:
    """How kafka-configs.sh names a quota entity: ``user-principal 'alice',
    the default client-id``."""
    parts = []
    for entity_type, word in _QUOTA_ENTITY_WORDS:
        if entity_type in entity:
            name = entity[entity_type]
            parts.append(f"the default {word}" if name is None else f"{word} '{name}'")
    return ", ".join(parts)


async def _describe_quotas(admin: KafkaAdmin, entities, out) -> None:
    described = await admin.describe_client_quotas(_quota_filter(entities), strict=True)
    for entity, values in sorted(
        described, key=lambda item: sorted((k, v or "") for k, v in item[0].items())
    ):
        text = ", ".join(f"{k}={_java(v)}" for k, v in sorted(values.items()))
        out.write(f"Quota configs for {quota_entity_text(entity)} are {text}\n")


def _java(value) -> str:
    """A value as Java's string conversion prints it (null, true, 1024.0,
    1.0E10)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value == 0 or not math.isfinite(value) or 1e-3 <= abs(value) < 1e7:
            return {"inf": "Infinity", "-inf": "-Infinity", "nan": "NaN"}.get(
                repr(value), repr(value)
            )
        # Java's Double.toString outside [1e-3, 1e7): d.dddE<n>, shortest digits.
        number = Decimal(repr(value))
        digits = "".join(map(str, number.normalize().as_tuple().digits))
        sign = "-" if value < 0 else ""
        return f"{sign}{digits[0]}.{digits[1:] or '0'}E{number.adjusted()}"
    return str(value)
