"""``kfast topics``: create, list, describe, alter and delete topics, like kafka-topics.sh.

    kfast topics create --bootstrap-server H:P --topic t --partitions 3 --config retention.ms=1000
    kfast topics describe --bootstrap-server H:P --topic t
    kfast topics alter --bootstrap-server H:P --topic t --partitions 6 --config cleanup.policy=compact

The action may also be given kafka-topics.sh's way (``--create``, ``--list``
...). ``--topic`` selects topics by regular expression for list, describe,
alter and delete (kafka-topics.sh's include list: commas separate
alternatives). Output and error lines are kafka-topics.sh's: ``Created topic
t.``; describe prints one line per topic (``Topic: t<TAB>TopicId: ...``)
then one per partition; a failure prints ``Error while executing topic
command : <message>`` and exits 1. Unlike kafka-topics.sh (which moved config
changes to kafka-configs.sh), ``alter`` also sets (``--config``) and removes
(``--delete-config``) topic configs, through IncrementalAlterConfigs.
"""

from __future__ import annotations

import asyncio
import re
import sys

from kfast.client.admin import OP_DELETE, OP_SET, RESOURCE_TOPIC, KafkaAdmin, NewTopic
from kfast.client.cluster import PartitionMetadata, TopicMetadata, topic_id_string
from kfast.config import ConfigException
from kfast.protocol import errors
from kfast.tools.command_config import add_command_config, admin_options

ACTIONS = ("create", "list", "describe", "alter", "delete")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "topics",
        help="create, list, describe, alter and delete topics (like kafka-topics.sh)",
        description="Manage topics on a running Kafka-compatible cluster, like kafka-topics.sh.",
    )
    p.add_argument("action", nargs="?", choices=ACTIONS, help="what to do")
    for action in ACTIONS:
        p.add_argument(
            f"--{action}",
            dest="action_flag",
            action="append_const",
            const=action,
            help=f"same as the '{action}' action",
        )
    p.add_argument(
        "--bootstrap-server",
        required=True,
        metavar="HOST:PORT",
        help="comma-separated brokers to connect to",
    )
    p.add_argument("--topic", help="topic name (create) or regular expression (other actions)")
    p.add_argument("--partitions", type=int, help="partition count (create, alter: the new total)")
    p.add_argument("--replication-factor", type=int, help="replicas per partition (create)")
    p.add_argument(
        "--replica-assignment",
        metavar="B:B,B:B",
        help="explicit replicas: partitions separated by ',', brokers by ':'",
    )
    p.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="topic config (create, alter); repeatable",
    )
    p.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="NAME",
        help="topic config to remove (alter); repeatable",
    )
    p.add_argument(
        "--if-not-exists", action="store_true", help="create: no error if the topic exists"
    )
    p.add_argument(
        "--if-exists",
        action="store_true",
        help="alter, describe, delete: no error if no topic matches",
    )
    p.add_argument("--exclude-internal", action="store_true", help="leave internal topics out")
    p.add_argument(
        "--topics-with-overrides",
        action="store_true",
        help="describe: only topics with config overrides, without partitions",
    )
    for option in (
        "under-replicated-partitions",
        "unavailable-partitions",
        "under-min-isr-partitions",
        "at-min-isr-partitions",
    ):
        p.add_argument(
            f"--{option}",
            action="store_true",
            help=f"describe: only the {option.replace('-', ' ')}",
        )
    p.add_argument(
        "--command-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="give up on the cluster after this long",
    )
    add_command_config(p)
    p.set_defaults(handler=run)


class CommandError(Exception):
    """A usage error, reported like kafka-topics.sh reports its own."""


def run(args, out=None) -> int:
    out = out or sys.stdout
    try:
        action = _action(args)
        return asyncio.run(_run(action, args, out))
    except (CommandError, errors.KafkaError, ValueError, ConfigException) as exc:
        out.write(f"Error while executing topic command : {exc}\n")
        return 1


def _action(args) -> str:
    chosen = set(args.action_flag or ())
    if args.action:
        chosen.add(args.action)
    if len(chosen) != 1:
        raise CommandError(
            "Command must include exactly one action: create, list, describe, alter, delete"
        )
    return chosen.pop()


async def _run(action: str, args, out) -> int:
    admin = KafkaAdmin(
        args.bootstrap_server,
        **admin_options(
            args,
            client_id="kfast-topics",
            request_timeout=args.command_timeout,
            metadata_timeout=args.command_timeout,
        ),
    )
    await admin.start()
    try:
        return await globals()[f"_{action}"](admin, args, out)
    finally:
        await admin.close()


def parse_configs(items: list[str]) -> dict[str, str]:
    configs = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise CommandError(
                "requirement failed: Invalid topic config: all configs to be added "
                'must be in the format "key=val".'
            )
        configs[name.strip()] = value.strip()
    return configs


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    assignment: dict[int, list[int]] = {}
    for partition, replicas in enumerate(text.split(",")):
        brokers = [int(b.strip()) for b in replicas.split(":")]
        if len(set(brokers)) != len(brokers):
            raise CommandError(
                f"Partition replica lists may not contain duplicate entries: {replicas}"
            )
        if assignment and len(brokers) != len(assignment[0]):
            raise CommandError(f"Partition {partition} has different replication factor: {brokers}")
        assignment[partition] = brokers
    return assignment


def _require_topic(args) -> str:
    if not args.topic:
        raise CommandError('Missing required argument "[topic]"')
    return args.topic


async def _matching_topics(admin: KafkaAdmin, args) -> list[str]:
    names = await admin.list_topics(include_internal=not args.exclude_internal)
    if not args.topic:
        return names
    # kafka-topics.sh's IncludeList: a regular expression, ',' meaning '|'.
    pattern = re.compile(args.topic.strip().replace(",", "|"))
    return [name for name in names if pattern.fullmatch(name)]


def _ensure_found(found: list[str], args) -> None:
    if args.topic and not found and not args.if_exists:
        raise CommandError(f"Topic '{args.topic}' does not exist as expected")


async def _create(admin: KafkaAdmin, args, out) -> int:
    name = _require_topic(args)
    if args.partitions is not None and args.partitions < 1:
        raise CommandError("The partitions must be greater than 0")
    if args.replication_factor is not None and not 1 <= args.replication_factor <= 32767:
        raise CommandError("The replication factor must be between 1 and 32767 inclusive")
    topic = NewTopic(
        name,
        args.partitions if args.partitions is not None else -1,
        args.replication_factor if args.replication_factor is not None else -1,
        parse_configs(args.config),
    )
    if args.replica_assignment:
        topic.assignments = parse_replica_assignment(args.replica_assignment)
    if ("." in name) or ("_" in name):
        out.write(
            "WARNING: Due to limitations in metric names, topics with a period ('.') or "
            "underscore ('_') could collide. To avoid issues it is best to use either, "
            "but not both.\n"
        )
    try:
        await admin.create_topics([topic])
    except errors.TopicExistsException:
        if args.if_not_exists:
            return 0
        raise errors.TopicExistsException(f"Topic '{name}' already exists.") from None
    out.write(f"Created topic {name}.\n")
    return 0


async def _list(admin: KafkaAdmin, args, out) -> int:
    # kafka-topics.sh prints the names joined by newlines, so no match is one empty line.
    out.write("\n".join(await _matching_topics(admin, args)) + "\n")
    return 0


def _nodes(nodes: list[int] | None) -> str:
    # Unknown eligible leader replicas (a broker without DescribeTopicPartitions) print as N/A.
    return "N/A" if nodes is None else ",".join(map(str, nodes))


def describe_lines(topic: TopicMetadata, configs) -> list[str]:
    """kafka-topics.sh --describe lines of one topic."""
    return [topic_line(topic, configs)] + [
        partition_line(topic, topic.partitions[i]) for i in sorted(topic.partitions)
    ]


def topic_line(topic: TopicMetadata, configs) -> str:
    overrides = ",".join(f"{c.name}={c.value}" for c in configs if not c.is_default)
    first = topic.partitions.get(min(topic.partitions)) if topic.partitions else None
    replication_factor = len(first.replicas) if first is not None else 0
    return (
        f"Topic: {topic.name}\tTopicId: {topic_id_string(topic.topic_id)}\t"
        f"PartitionCount: {len(topic.partitions)}\tReplicationFactor: {replication_factor}\t"
        f"Configs: {overrides}"
    )


def partition_line(topic: TopicMetadata, p: PartitionMetadata) -> str:
    leader = p.leader if p.leader >= 0 else "none"
    return (
        f"\tTopic: {topic.name}\tPartition: {p.partition}\tLeader: {leader}\t"
        f"Replicas: {_nodes(p.replicas)}\tIsr: {_nodes(p.isr)}\t"
        f"Elr: {_nodes(p.eligible_leader_replicas)}\t"
        f"LastKnownElr: {_nodes(p.last_known_elr)}"
    )


# kafka-topics.sh's partition reports: (option, test of a partition given
# the live brokers and the topic's min.insync.replicas).
PARTITION_REPORTS = {
    "under_replicated_partitions": lambda p, live, min_isr: len(p.isr) < len(p.replicas),
    "unavailable_partitions": lambda p, live, min_isr: p.leader < 0 or p.leader not in live,
    "under_min_isr_partitions": lambda p, live, min_isr: p.leader < 0 or len(p.isr) < min_isr,
    "at_min_isr_partitions": lambda p, live, min_isr: len(p.isr) == min_isr,
}


async def _describe(admin: KafkaAdmin, args, out) -> int:
    names = await _matching_topics(admin, args)
    _ensure_found(names, args)
    if not names:
        return 0
    topics = await admin.describe_topics(names)
    configs = await admin.describe_configs(RESOURCE_TOPIC, [t.name for t in topics])
    reports = [test for option, test in PARTITION_REPORTS.items() if getattr(args, option)]
    live = set(admin.cluster.brokers)
    for topic in topics:
        entries = configs.get(topic.name, [])
        # As kafka-topics.sh: a partition report prints partitions only;
        # --topics-with-overrides prints topic lines only, of topics with overrides.
        if not reports and (
            not args.topics_with_overrides or any(not c.is_default for c in entries)
        ):
            out.write(topic_line(topic, entries) + "\n")
        if args.topics_with_overrides:
            continue
        min_isr = next(
            (
                int(c.value)
                for c in entries
                if c.name == "min.insync.replicas" and c.value is not None
            ),
            1,
        )
        for index in sorted(topic.partitions):
            partition = topic.partitions[index]
            if not reports or any(test(partition, live, min_isr) for test in reports):
                out.write(partition_line(topic, partition) + "\n")
    return 0


async def _alter(admin: KafkaAdmin, args, out) -> int:
    _require_topic(args)
    if args.partitions is None and not args.config and not args.delete_config:
        raise CommandError("alter needs --partitions, --config or --delete-config")
    names = await _matching_topics(admin, args)
    _ensure_found(names, args)
    if args.partitions is not None and names:
        await admin.create_partitions({name: args.partitions for name in names})
    operations = {name: (OP_SET, value) for name, value in parse_configs(args.config).items()}
    operations.update({name.strip(): (OP_DELETE, None) for name in args.delete_config})
    if operations:
        for name in names:
            await admin.incremental_alter_configs(RESOURCE_TOPIC, name, operations)
    return 0


async def _delete(admin: KafkaAdmin, args, out) -> int:
    _require_topic(args)
    names = await _matching_topics(admin, args)
    _ensure_found(names, args)
    if names:
        await admin.delete_topics(names)
    return 0
