"""``kfast groups``: list, describe, delete consumer groups and reset their
offsets, like kafka-consumer-groups.sh.

    kfast groups list --bootstrap-server H:P [--state]
    kfast groups describe --bootstrap-server H:P --group g
    kfast groups delete --bootstrap-server H:P --group g
    kfast groups reset-offsets --bootstrap-server H:P --group g --topic t
        (--to-earliest | --to-latest | --to-offset N) [--execute]

describe prints kafka-consumer-groups.sh's table: one row per partition
with the committed offset, the log end offset, the lag and the member that
owns the partition. reset-offsets only prints the plan unless --execute is
given, and works only on a group without active members, as Kafka's tool.
The requests go over kfast.client.connection.BlockingConnection: to the
group's coordinator (FindCoordinator) and to each partition's leader
(ListOffsets).
"""

from __future__ import annotations

import sys

from kfast.client.connection import BlockingConnection
from kfast.config import ConfigException
from kfast.coordinator.group.consumer_protocol import assigned_partitions
from kfast.protocol import api_keys, errors
from kfast.protocol.constants import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from kfast.tools.command_config import add_command_config, connection_options

_KEY = api_keys.BY_NAME


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "groups",
        help="list, describe, delete consumer groups and reset their offsets "
        "(like kafka-consumer-groups.sh)",
        description="Manage consumer groups on a running Kafka-compatible cluster.",
    )
    p.add_argument("action", choices=("list", "describe", "delete", "reset-offsets"))
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    add_command_config(p)
    p.add_argument("--group", action="append", default=[], help="group id; repeatable")
    p.add_argument("--state", action="store_true", help="list: print each group's state")
    p.add_argument(
        "--topic",
        action="append",
        default=[],
        help="reset-offsets: topic, or topic:partition[,partition]; repeatable",
    )
    target = p.add_mutually_exclusive_group()
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-offset", type=int, metavar="OFFSET")
    p.add_argument("--execute", action="store_true", help="reset-offsets: apply the plan")
    p.set_defaults(handler=run)


class CommandError(Exception):
    pass


def _check(code: int, what: str) -> None:
    if code:
        error = errors.for_code(code)
        raise CommandError(f"{what}: {error.__name__}: {error().message}")


class GroupsTool:
    def __init__(self, bootstrap: str, options: dict | None = None):
        # BlockingConnection settings (client id, --command-config security).
        self._options = {"client_id": "kfast-groups", **(options or {})}
        host, _, port = bootstrap.split(",")[0].rpartition(":")
        self.bootstrap = BlockingConnection(host or "localhost", int(port), **self._options)
        self._connections: dict[tuple[str, int], BlockingConnection] = {}

    def close(self) -> None:
        self.bootstrap.close()
        for connection in self._connections.values():
            connection.close()

    def _node(self, host: str, port: int) -> BlockingConnection:
        key = (host, port)
        if key not in self._connections:
            self._connections[key] = BlockingConnection(host, port, **self._options)
        return self._connections[key]

    def send(self, connection, api: str, version: int, body: dict):
        return connection.send(dict(body), api_key=_KEY[api].key, version=version)

    def coordinator(self, group: str) -> BlockingConnection:
        for _ in range(20):
            response = self.send(
                self.bootstrap, "FindCoordinator", 3, {"key": group, "key_type": 0}
            )
            if response.error_code != errors.CoordinatorNotAvailableException.code:
                break
        _check(response.error_code, f"finding the coordinator of group {group}")
        return self._node(response.host, response.port)

    # -- queries ---------------------------------------------------------------------
    def list_groups(self):
        response = self.send(self.bootstrap, "ListGroups", 4, {"states_filter": []})
        _check(response.error_code, "listing groups")
        return [(g.group_id, g.group_state) for g in response.groups]

    def describe(self, group: str):
        response = self.send(
            self.coordinator(group),
            "DescribeGroups",
            5,
            {"groups": [group], "include_authorized_operations": False},
        )
        described = response.groups[0]
        _check(described.error_code, f"describing group {group}")
        return described

    def committed(self, group: str) -> dict:
        response = self.send(
            self.coordinator(group),
            "OffsetFetch",
            7,
            {"group_id": group, "topics": None, "require_stable": False},
        )
        _check(response.error_code, f"fetching the offsets of group {group}")
        return {
            (t.name, p.partition_index): p.committed_offset
            for t in response.topics
            for p in t.partitions
            if p.committed_offset >= 0
        }

    def list_offsets(self, partitions, timestamp: int) -> dict:
        """{(topic, partition): offset} from each partition's leader."""
        topics = sorted({t for t, _ in partitions})
        metadata = self.send(
            self.bootstrap,
            "Metadata",
            9,
            {"topics": [{"name": t} for t in topics], "allow_auto_topic_creation": False},
        )
        brokers = {b.node_id: (b.host, b.port) for b in metadata.brokers}
        leaders = {
            (t.name, p.partition_index): p.leader_id for t in metadata.topics for p in t.partitions
        }
        by_leader: dict[int, list] = {}
        for tp in partitions:
            if tp in leaders:
                by_leader.setdefault(leaders[tp], []).append(tp)
        offsets = {}
        for leader, tps in by_leader.items():
            if leader not in brokers:
                continue
            grouped: dict[str, list] = {}
            for topic, index in tps:
                grouped.setdefault(topic, []).append(
                    {"partition_index": index, "timestamp": timestamp}
                )
            response = self.send(
                self._node(*brokers[leader]),
                "ListOffsets",
                4,
                {
                    "replica_id": -1,
                    "isolation_level": 0,
                    "topics": [{"name": t, "partitions": ps} for t, ps in grouped.items()],
                },
            )
            for t in response.topics:
                for p in t.partitions:
                    if not p.error_code:
                        offsets[(t.name, p.partition_index)] = p.offset
        return offsets

    def topic_partitions(self, topic: str) -> list[tuple[str, int]]:
        metadata = self.send(
            self.bootstrap,
            "Metadata",
            9,
            {"topics": [{"name": topic}], "allow_auto_topic_creation": False},
        )
        found = metadata.topics[0]
        _check(found.error_code, f"topic {topic}")
        return sorted((topic, p.partition_index) for p in found.partitions)


# -- actions ---------------------------------------------------------------------------
def _table(rows: list[list], out) -> None:
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(" ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip(), file=out)


def _list(tool: GroupsTool, args, out) -> None:
    groups = tool.list_groups()
    if args.state:
        _table([["GROUP", "STATE"]] + [[g, s] for g, s in groups], out)
    else:
        for group, _ in groups:
            print(group, file=out)


def _describe(tool: GroupsTool, group: str, out) -> None:
    described = tool.describe(group)
    committed = tool.committed(group)
    owners = {}
    for member in described.members:
        for tp in assigned_partitions(member.member_assignment):
            owners[tp] = member
    partitions = sorted(set(committed) | set(owners))
    if described.group_state == "Dead":
        raise CommandError(f"Consumer group '{group}' does not exist.")
    if not described.members:
        print(f"\nConsumer group '{group}' has no active members.", file=out)
    end_offsets = tool.list_offsets(partitions, LATEST_TIMESTAMP) if partitions else {}
    rows: list[list[object]] = [
        [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ]
    ]
    for tp in partitions:
        current = committed.get(tp)
        end = end_offsets.get(tp)
        lag = end - current if current is not None and end is not None else "-"
        member = owners.get(tp)
        rows.append(
            [
                group,
                tp[0],
                tp[1],
                "-" if current is None else current,
                "-" if end is None else end,
                lag,
                member.member_id if member else "-",
                member.client_host if member else "-",
                member.client_id if member else "-",
            ]
        )
    print(file=out)
    _table(rows, out)


def _delete(tool: GroupsTool, groups: list[str], out) -> None:
    failures = {}
    for group in groups:
        response = tool.send(tool.coordinator(group), "DeleteGroups", 2, {"groups_names": [group]})
        code = response.results[0].error_code
        if code:
            failures[group] = errors.for_code(code).__name__
    done = [g for g in groups if g not in failures]
    if done:
        names = ", ".join(f"'{g}'" for g in done)
        print(f"Deletion of requested consumer groups ({names}) was successful.", file=out)
    if failures:
        print("Deletion of some consumer groups failed:", file=out)
        for group, error in failures.items():
            print(f"* Group '{group}' could not be deleted due to: {error}", file=out)
        raise CommandError("")


def _reset(tool: GroupsTool, group: str, args, out) -> None:
    if not args.topic:
        raise CommandError("reset-offsets needs --topic")
    described = tool.describe(group)
    if described.group_state not in ("Empty", "Dead"):
        raise CommandError(
            f"Assignments can only be reset if the group '{group}' is inactive, "
            f"but the current state is {described.group_state}."
        )
    partitions: list[tuple[str, int]] = []
    for spec in args.topic:
        topic, _, indexes = spec.partition(":")
        partitions += (
            [(topic, int(i)) for i in indexes.split(",")]
            if indexes
            else tool.topic_partitions(topic)
        )
    if args.to_offset is not None:
        plan = {tp: args.to_offset for tp in partitions}
    elif args.to_earliest or args.to_latest:
        plan = tool.list_offsets(
            partitions, EARLIEST_TIMESTAMP if args.to_earliest else LATEST_TIMESTAMP
        )
    else:
        raise CommandError("give one of --to-earliest, --to-latest, --to-offset")
    if args.execute:
        grouped: dict[str, list] = {}
        for (topic, index), offset in sorted(plan.items()):
            grouped.setdefault(topic, []).append(
                {
                    "partition_index": index,
                    "committed_offset": offset,
                    "committed_leader_epoch": -1,
                    "committed_metadata": "",
                }
            )
        response = tool.send(
            tool.coordinator(group),
            "OffsetCommit",
            8,
            {
                "group_id": group,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "group_instance_id": None,
                "topics": [{"name": t, "partitions": ps} for t, ps in grouped.items()],
            },
        )
        for topic in response.topics:
            for p in topic.partitions:
                _check(p.error_code, f"committing {topic.name}-{p.partition_index}")
    rows: list[list[object]] = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]]
    rows += [[group, t, p, offset] for (t, p), offset in sorted(plan.items())]
    print(file=out)
    _table(rows, out)


def run(args, out=None) -> int:
    out = out or sys.stdout
    try:
        tool = GroupsTool(args.bootstrap_server, connection_options(args))
    except (OSError, errors.KafkaError, ConfigException) as exc:
        print(f"Error: cannot connect to {args.bootstrap_server}: {exc}", file=sys.stderr)
        return 1
    try:
        if args.action == "list":
            _list(tool, args, out)
            return 0
        if not args.group:
            raise CommandError(f"{args.action} needs --group")
        if args.action == "describe":
            for group in args.group:
                _describe(tool, group, out)
        elif args.action == "delete":
            _delete(tool, args.group, out)
        else:
            for group in args.group:
                _reset(tool, group, args, out)
        return 0
    except CommandError as exc:
        if str(exc):
            print(f"Error: {exc}", file=sys.stderr)
        return 1
    finally:
        tool.close()
