"""``kfast client-metrics``: KIP-714 subscriptions, like kafka-client-metrics.sh.

    kfast client-metrics --bootstrap-server H:P --alter --name producers \\
        --metrics org.apache.kafka.producer. --interval 1000 \\
        --match client_software_name=librdkafka
    kfast client-metrics --bootstrap-server H:P --alter --generate-name --metrics '*'
    kfast client-metrics --bootstrap-server H:P --describe [--name producers]
    kfast client-metrics --bootstrap-server H:P --list
    kfast client-metrics --bootstrap-server H:P --delete --name producers

A subscription is a CLIENT_METRICS config resource (docs/metrics.md):
``--alter`` sets the given keys with IncrementalAlterConfigs (an empty value
deletes the key), ``--delete`` deletes every key the subscription has,
``--describe`` prints DescribeConfigs of each subscription (all of them,
from ListConfigResources, without ``--name``), ``--list`` their names.
Output is the Kafka tool's: ``Altered client metrics config for N.``,
``Deleted client metrics config for N.``, ``Client metrics configs for N
are:`` then ``  key=value`` lines. A usage error prints its message to
stderr and exits 1; a failure reported by the cluster prints ``Error while
executing client metrics command : <message>`` and exits 1.
"""

from __future__ import annotations

import asyncio
import sys
import uuid

from kfast.client.admin import KafkaAdmin
from kfast.config import ConfigException
from kfast.protocol import errors
from kfast.protocol.constants import CONFIG_RESOURCE_CLIENT_METRICS, OP_DELETE, OP_SET
from kfast.tools.command_config import add_command_config, admin_options

_ACTIONS = ("alter", "delete", "describe", "list")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "client-metrics",
        help="KIP-714 client metrics subscriptions (like kafka-client-metrics.sh)",
        description="List, describe, alter and delete client metrics subscriptions, "
        "like kafka-client-metrics.sh.",
    )
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    for action in _ACTIONS:
        p.add_argument(f"--{action}", action="store_true")
    p.add_argument("--name", help="name of the client metrics configuration resource")
    p.add_argument("--generate-name", action="store_true", help="a UUID as the name (--alter)")
    p.add_argument("--interval", type=int, metavar="MS", help="push interval in milliseconds")
    p.add_argument("--metrics", metavar="m1,m2", help="telemetry metric name prefixes")
    p.add_argument("--match", metavar="k1=v1,k2=v2", help="client matching selectors")
    p.add_argument("--command-timeout", type=float, default=30.0, metavar="SECONDS")
    add_command_config(p)
    p.set_defaults(handler=run)


def _check(args) -> str:
    actions = [a for a in _ACTIONS if getattr(args, a)]
    if len(actions) != 1:
        raise ValueError(
            "Command must include exactly one action: --alter, --delete, --describe or --list"
        )
    action = actions[0]
    if action == "alter" and bool(args.name) == args.generate_name:
        raise ValueError("One of --name or --generate-name must be specified with --alter.")
    if action == "delete" and not args.name:
        raise ValueError("A client metrics resource name must be specified with --delete.")
    if action != "alter" and (
        args.generate_name
        or args.interval is not None
        or args.metrics is not None
        or args.match is not None
    ):
        raise ValueError(
            "--generate-name, --interval, --metrics and --match can only be used with --alter."
        )
    return action


def run(args, out=None, err=None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        action = _check(args)
    except ValueError as exc:
        err.write(f"{exc}\n")
        return 1
    try:
        return asyncio.run(_run(args, action, out))
    except ConfigException as exc:
        out.write(f"Error while executing client metrics command : {exc}\n")
        return 1
    except errors.KafkaError as exc:
        # The broker's message, without the admin client's "<resource>: ".
        message = str(exc)
        resource = getattr(exc, "resource", None)
        if resource is not None and message.startswith(f"{resource}: "):
            message = message[len(resource) + 2 :]
        out.write(f"Error while executing client metrics command : {message}\n")
        return 1


async def _run(args, action: str, out) -> int:
    admin = KafkaAdmin(
        args.bootstrap_server,
        **admin_options(
            args,
            client_id="kfast-client-metrics",
            request_timeout=args.command_timeout,
            metadata_timeout=args.command_timeout,
        ),
    )
    await admin.start()
    try:
        if action == "alter":
            name = str(uuid.uuid4()) if args.generate_name else args.name
            changes = {}
            for key, value in (
                ("interval.ms", None if args.interval is None else str(args.interval)),
                ("metrics", args.metrics),
                ("match", args.match),
            ):
                if value is not None:
                    changes[key] = (OP_SET, value) if value else (OP_DELETE, None)
            await admin.incremental_alter_configs(CONFIG_RESOURCE_CLIENT_METRICS, name, changes)
            out.write(f"Altered client metrics config for {name}.\n")
        elif action == "delete":
            entries = (await admin.describe_configs(CONFIG_RESOURCE_CLIENT_METRICS, [args.name]))[
                args.name
            ]
            await admin.incremental_alter_configs(
                CONFIG_RESOURCE_CLIENT_METRICS,
                args.name,
                {entry.name: (OP_DELETE, None) for entry in entries},
            )
            out.write(f"Deleted client metrics config for {args.name}.\n")
        elif action == "describe":
            names = [args.name] if args.name else await _names(admin)
            for name in names:
                out.write(f"Client metrics configs for {name} are:\n")
                for entry in (await admin.describe_configs(CONFIG_RESOURCE_CLIENT_METRICS, [name]))[
                    name
                ]:
                    out.write(f"  {entry.name}={entry.value}\n")
        else:
            out.write("\n".join(await _names(admin)) + "\n")
        return 0
    finally:
        await admin.close()


async def _names(admin: KafkaAdmin) -> list[str]:
    return [name for _, name in await admin.list_config_resources([CONFIG_RESOURCE_CLIENT_METRICS])]
