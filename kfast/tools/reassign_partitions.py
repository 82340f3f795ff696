"""``kfast reassign-partitions``: move partition replicas between brokers,
like kafka-reassign-partitions.sh.

    kfast reassign-partitions --bootstrap-server H:P --generate \\
        --topics-to-move-json-file topics.json --broker-list 2,3,4
    kfast reassign-partitions --bootstrap-server H:P --execute \\
        --reassignment-json-file plan.json [--throttle 1000000] [--additional]
    kfast reassign-partitions --bootstrap-server H:P --verify --reassignment-json-file plan.json
    kfast reassign-partitions --bootstrap-server H:P --cancel --reassignment-json-file plan.json
    kfast reassign-partitions --bootstrap-server H:P --list

The JSON files are Kafka's: topics to move ``{"topics": [{"topic": "t"}],
"version": 1}``; a reassignment ``{"version": 1, "partitions": [{"topic":
"t", "partition": 0, "replicas": [2, 3], "log_dirs": ["any", "any"]}]}``
(``log_dirs`` optional; kfast does not move replicas between the log
directories of a broker, so each must be "any").

``--generate`` prints the current assignment of the topics and a proposal
that spreads their partitions over the broker list (Kafka's placement,
rack-aware unless --disable-rack-aware), both as reassignment JSON.
``--execute`` prints the current assignment (to roll back with) and starts
the reassignment (AlterPartitionReassignments); with ``--throttle B`` it
first throttles the replication of the moving partitions the way
ReassignPartitionsCommand does: the topic config
leader.replication.throttled.replicas lists each moving partition's current
replicas, follower.replication.throttled.replicas its added replicas, and
every broker involved gets leader/follower.replication.throttled.rate = B.
``--verify`` reports each partition; once no reassignment is left in the
cluster it removes those throttles from every broker and from the topics
(unless --preserve-throttles). ``--cancel`` reverts the partitions still
moving to their original replicas and removes the throttles too. ``--list``
shows the reassignments in progress.

Output lines and exit statuses are the Kafka tool's: a usage error prints
the problem and the options on stderr, a failure prints ``Error: ...`` (or
the message alone for the tool's own refusals) and exits 1.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterable, Mapping
from typing import NamedTuple, TypeVar

from kfast.client.admin import (
    OP_DELETE,
    OP_SET,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    KafkaAdmin,
)
from kfast.config import ConfigException
from kfast.controller.placement import place_replicas
from kfast.protocol import (
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
    errors,
)
from kfast.tools.command_config import add_command_config, admin_options

ANY_LOG_DIR = "any"
EARLIEST_VERSION = 1
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
BROKER_LEVEL_THROTTLES = (LEADER_RATE, FOLLOWER_RATE)
TOPIC_LEVEL_THROTTLES = (LEADER_REPLICAS, FOLLOWER_REPLICAS)

CANNOT_EXECUTE_BECAUSE_OF_EXISTING = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to "
    "override this and create a new partition assignment in addition to the existing one. "
    "The --additional flag can also be used to change the throttle by resubmitting the "
    "current reassignment."
)
RUN_VERIFY_PERIODICALLY = (
    "Warning: You must run --verify periodically, until the "
    "reassignment completes, to ensure the throttle is removed."
)
ACTIONS = ("generate", "execute", "verify", "cancel", "list")
REQUIRED = {
    "generate": ("topics_to_move_json_file", "broker_list"),
    "execute": ("reassignment_json_file",),
    "verify": ("reassignment_json_file",),
    "cancel": ("reassignment_json_file",),
    "list": (),
}
PERMITTED = {
    "generate": ("disable_rack_aware",),
    "execute": ("additional", "throttle"),
    "verify": ("preserve_throttles",),
    "cancel": ("preserve_throttles",),
    "list": (),
}
OPTION_NAMES = (
    "reassignment_json_file",
    "topics_to_move_json_file",
    "broker_list",
    "disable_rack_aware",
    "throttle",
    "additional",
    "preserve_throttles",
)

TopicPartition = tuple  # (topic, partition), as Kafka's TopicPartition

_T = TypeVar("_T")


class TerseError(Exception):
    """A refusal printed as its message alone (Kafka's TerseException)."""


class CommandFailed(Exception):
    """Bad input or a failed step, printed as ``Error: ...`` (Kafka's
    AdminCommandFailedException / AdminOperationException)."""


class UsageError(Exception):
    """Bad options: the message and the usage go to stderr."""


class PartitionMove(NamedTuple):
    """Where a partition's data comes from and where it is going."""

    sources: frozenset
    destinations: frozenset


class PartitionReassignmentState(NamedTuple):
    current_replicas: list
    target_replicas: list
    done: bool


class OngoingReassignment(NamedTuple):
    replicas: list
    adding_replicas: list
    removing_replicas: list


def partition_name(part: TopicPartition) -> str:
    return f"{part[0]}-{part[1]}"


def _sorted_parts(parts):
    return sorted(parts, key=lambda part: (part[0], part[1]))


# -- JSON -----------------------------------------------------------------------------------
def _load_json(text: str):
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CommandFailed(f"The input string is not a valid JSON: {exc}") from None


def _int(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CommandFailed(f"Expected an integer for {what}, got {json.dumps(value)}")
    return value


def _version(data) -> int:
    if not isinstance(data, dict):
        raise CommandFailed("The input JSON must be an object")
    version = _int(data.get("version", EARLIEST_VERSION), "version")
    if version != 1:
        raise CommandFailed(f"Not supported version field value {version}")
    return version


def parse_topics_to_move(text: str) -> list[str]:
    """The topics of a --topics-to-move-json-file (duplicates refused)."""
    data = _load_json(text)
    _version(data)
    topics = []
    for entry in data.get("topics") or []:
        topic = entry.get("topic") if isinstance(entry, dict) else None
        if not isinstance(topic, str):
            raise CommandFailed(f"Expected a topic name in {json.dumps(entry)}")
        topics.append(topic)
    duplicates = _duplicates(topics)
    if duplicates:
        raise CommandFailed(
            f"List of topics to reassign contains duplicate entries: {_set_text(duplicates)}"
        )
    return topics


def parse_broker_list(text: str) -> list[int]:
    try:
        brokers = [int(item.strip()) for item in text.split(",")]
    except ValueError:
        raise CommandFailed(f"Invalid broker list: {text}") from None
    duplicates = _duplicates(brokers)
    if duplicates:
        raise CommandFailed(f"Broker list contains duplicate entries: {_set_text(duplicates)}")
    return brokers


def parse_reassignment(text: str) -> list[tuple[TopicPartition, list[int]]]:
    """The (partition, target replicas) entries of a reassignment JSON, in
    file order and not deduplicated, so --execute can refuse duplicates."""
    data = _load_json(text)
    _version(data)
    out = []
    for entry in data.get("partitions") or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str):
            raise CommandFailed(f"Expected a topic in {json.dumps(entry)}")
        part = (entry["topic"], _int(entry.get("partition"), "partition"))
        replicas = [_int(r, "a replica") for r in entry.get("replicas") or []]
        log_dirs = entry.get("log_dirs")
        if log_dirs is None:
            log_dirs = [ANY_LOG_DIR] * len(replicas)
        if len(log_dirs) != len(replicas):
            raise CommandFailed(
                f"Size of replicas list {_list_text(replicas)} is different from "
                f"size of log dirs list {_list_text(log_dirs)} for partition "
                f"{partition_name(part)}"
            )
        moved = [f"{r} -> {d}" for r, d in zip(replicas, log_dirs) if d != ANY_LOG_DIR]
        if moved:
            raise CommandFailed(
                f"kfast does not move replicas between log directories; "
                f"{partition_name(part)} asks for {', '.join(moved)} "
                f'(use "any")'
            )
        out.append((part, replicas))
    return out


def validate_execute(entries) -> dict[TopicPartition, list[int]]:
    """Kafka's parseExecuteAssignmentArgs checks: something to move, no
    empty replica list, no partition twice, no replica twice."""
    if not entries:
        raise CommandFailed("Partition reassignment list cannot be empty")
    if any(not replicas for _, replicas in entries):
        raise CommandFailed("Partition replica list cannot be empty")
    duplicate_parts = _duplicates([part for part, _ in entries])
    if duplicate_parts:
        raise CommandFailed(
            "Partition reassignment contains duplicate topic partitions: "
            + ",".join(partition_name(p) for p in _sorted_parts(duplicate_parts))
        )
    repeated = [
        (part, _duplicates(replicas)) for part, replicas in entries if _duplicates(replicas)
    ]
    if repeated:
        raise CommandFailed(
            "Partition replica lists may not contain duplicate entries: "
            + ". ".join(
                f"{partition_name(part)} contains multiple entries for "
                f"{','.join(map(str, sorted(dups)))}"
                for part, dups in repeated
            )
        )
    return dict(entries)


def format_reassignment_json(assignment: dict[TopicPartition, list[int]]) -> str:
    """Kafka's formatAsReassignmentJson: compact, partitions sorted."""
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {
                    "topic": part[0],
                    "partition": part[1],
                    "replicas": list(assignment[part]),
                    "log_dirs": [ANY_LOG_DIR] * len(assignment[part]),
                }
                for part in _sorted_parts(assignment)
            ],
        },
        separators=(",", ":"),
        ensure_ascii=False,
    )


def _duplicates(items: Iterable[_T]) -> set[_T]:
    seen: set[_T] = set()
    repeated: set[_T] = set()
    for item in items:
        (repeated if item in seen else seen).add(item)
    return repeated


def _set_text(items) -> str:
    return "[" + ", ".join(str(i) for i in sorted(items)) + "]"


def _list_text(items) -> str:
    return "[" + ", ".join(str(i) for i in items) + "]"


# -- plans ----------------------------------------------------------------------------------
def calculate_assignment(
    current: dict[TopicPartition, list[int]],
    brokers: list[int],
    racks: dict[int, str | None] | None = None,
) -> dict[TopicPartition, list[int]]:
    """A proposal for --generate: each topic's partitions placed afresh on
    ``brokers`` (Kafka's assignReplicasToBrokers, with its random start),
    keeping the topic's replication factor."""
    by_topic: dict[str, dict[int, list[int]]] = {}
    for (topic, partition), replicas in current.items():
        by_topic.setdefault(topic, {})[partition] = replicas
    proposed = {}
    for topic, partitions in by_topic.items():
        factor = len(partitions[min(partitions)])
        try:
            placed = place_replicas(brokers, len(partitions), factor, racks)
        except errors.KafkaError as exc:
            raise CommandFailed(str(exc)) from None
        for partition, replicas in enumerate(placed):
            proposed[topic, partition] = replicas
    return proposed


def current_move_map(
    reassignments: dict[TopicPartition, OngoingReassignment],
) -> dict[str, dict[int, PartitionMove]]:
    """The moves in progress: sources are the replicas not being added."""
    moves: dict[str, dict[int, PartitionMove]] = {}
    for (topic, partition), ongoing in reassignments.items():
        adding = set(ongoing.adding_replicas)
        moves.setdefault(topic, {})[partition] = PartitionMove(
            frozenset(r for r in ongoing.replicas if r not in adding), frozenset(adding)
        )
    return moves


def proposed_move_map(
    reassignments: dict[TopicPartition, OngoingReassignment],
    proposed: dict[TopicPartition, list[int]],
    current: dict[TopicPartition, list[int]],
) -> dict[str, dict[int, PartitionMove]]:
    """Every partition moving once the proposal starts (Kafka's
    calculateProposedMoveMap): a partition already moving keeps its
    sources, otherwise they are its current replicas; destinations are the
    target replicas not among the sources."""
    moves = current_move_map(reassignments)
    for (topic, partition), replicas in proposed.items():
        partition_moves = moves.setdefault(topic, {})
        if partition in partition_moves:
            sources = partition_moves[partition].sources
        elif (topic, partition) in current:
            sources = frozenset(current[topic, partition])
        else:
            raise CommandFailed(
                f"Trying to reassign a topic partition {topic}-{partition} with 0 replicas"
            )
        partition_moves[partition] = PartitionMove(sources, frozenset(replicas) - sources)
    return moves


def leader_throttles(moves: dict[str, dict[int, PartitionMove]]) -> dict[str, str]:
    """leader.replication.throttled.replicas per topic: every source replica
    of every moving partition (whichever of them leads sends the data)."""
    return {
        topic: ",".join(
            sorted(
                {
                    f"{partition}:{source}"
                    for partition, move in partition_moves.items()
                    for source in move.sources
                }
            )
        )
        for topic, partition_moves in moves.items()
    }


def follower_throttles(moves: dict[str, dict[int, PartitionMove]]) -> dict[str, str]:
    """follower.replication.throttled.replicas per topic: the replicas being
    added (the ones that fetch the data)."""
    return {
        topic: ",".join(
            sorted(
                {
                    f"{partition}:{destination}"
                    for partition, move in partition_moves.items()
                    for destination in move.destinations
                    if destination not in move.sources
                }
            )
        )
        for topic, partition_moves in moves.items()
    }


def reassigning_brokers(moves: dict[str, dict[int, PartitionMove]]) -> list[int]:
    return sorted(
        {
            broker
            for partition_moves in moves.values()
            for move in partition_moves.values()
            for broker in move.sources | move.destinations
        }
    )


# -- text -----------------------------------------------------------------------------------
def current_assignment_text(proposed: dict, current: dict) -> str:
    moving = {part: replicas for part, replicas in current.items() if part in proposed}
    return (
        f"Current partition replica assignment\n\n{format_reassignment_json(moving)}\n\n"
        f"Save this to use as the --reassignment-json-file option during rollback"
    )


def reassignment_states_text(states: dict[TopicPartition, PartitionReassignmentState]) -> str:
    lines = ["Status of partition reassignment:"]
    for part in _sorted_parts(states):
        state = states[part]
        name = partition_name(part)
        if not state.done:
            lines.append(f"Reassignment of partition {name} is still in progress.")
        elif list(state.current_replicas) == list(state.target_replicas):
            lines.append(f"Reassignment of partition {name} is completed.")
        else:
            lines.append(
                f"There is no active reassignment of partition {name}, but replica set "
                f"is {','.join(map(str, state.current_replicas))} rather than "
                f"{','.join(map(str, state.target_replicas))}."
            )
    return "\n".join(lines)


def ongoing_reassignments_text(reassignments: dict[TopicPartition, OngoingReassignment]) -> str:
    lines = []
    for part in _sorted_parts(reassignments):
        ongoing = reassignments[part]
        line = f"{partition_name(part)}: replicas: {','.join(map(str, ongoing.replicas))}."
        if ongoing.adding_replicas:
            line += f" adding: {','.join(map(str, ongoing.adding_replicas))}."
        if ongoing.removing_replicas:
            line += f" removing: {','.join(map(str, ongoing.removing_replicas))}."
        lines.append(line)
    if not lines:
        return "No partition reassignments found."
    return "Current partition reassignments:\n" + "\n".join(lines)


def _plural(items) -> str:
    return "" if len(items) == 1 else "s"


# -- the cluster ------------------------------------------------------------------------------
class ReassignmentAdmin:
    """What the tool asks of the cluster, over kfast's admin client."""

    def __init__(self, admin):
        self.admin = admin

    async def list_reassignments(self, parts=None) -> dict[TopicPartition, OngoingReassignment]:
        Request = ListPartitionReassignmentsRequest
        topics = None
        if parts is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in parts:
                by_topic.setdefault(topic, []).append(partition)
            topics = [
                Request.ListPartitionReassignmentsTopics(name=t, partition_indexes=p)
                for t, p in by_topic.items()
            ]
        response = await self.admin.cluster.send(None, Request(topics=topics))
        _raise(response.error_code, response.error_message)
        return {
            (t.name, p.partition_index): OngoingReassignment(
                list(p.replicas), list(p.adding_replicas), list(p.removing_replicas)
            )
            for t in response.topics
            for p in t.partitions
        }

    async def alter_reassignments(
        self, targets: Mapping[TopicPartition, list[int] | None]
    ) -> dict[TopicPartition, str]:
        """Start (replicas) or cancel (None) reassignments; the failures'
        messages by partition."""
        Request = AlterPartitionReassignmentsRequest
        by_topic: dict[str, list] = {}
        for (topic, partition), replicas in targets.items():
            by_topic.setdefault(topic, []).append(
                Request.ReassignablePartition(partition_index=partition, replicas=replicas)
            )
        response = await self.admin.cluster.send(
            None,
            Request(
                topics=[
                    Request.ReassignableTopic(name=t, partitions=p) for t, p in by_topic.items()
                ]
            ),
        )
        _raise(response.error_code, response.error_message)
        failed = {}
        for topic in response.responses:
            for p in topic.partitions:
                if p.error_code:
                    failed[topic.name, p.partition_index] = (
                        p.error_message or errors.for_code(p.error_code).default_message
                    )
        return failed

    async def brokers(self) -> dict[int, str | None]:
        """Broker id -> rack, of the brokers in service."""
        description = await self.admin.describe_cluster()
        return {broker_id: rack for broker_id, _, _, rack in description.brokers}

    async def replica_assignment(self, topics) -> dict[TopicPartition, list[int]]:
        out = {}
        for topic in sorted(set(topics)):
            try:
                [described] = await self.admin.describe_topics([topic])
            except errors.UnknownTopicOrPartitionException:
                raise CommandFailed(f"Topic {topic} not found.") from None
            for index, partition in described.partitions.items():
                out[topic, index] = list(partition.replicas)
        return out

    async def partition_assignment(self, parts) -> dict[TopicPartition, list[int]]:
        found = await self.replica_assignment({topic for topic, _ in parts})
        missing = [p for p in _sorted_parts(parts) if p not in found]
        if missing:
            raise CommandFailed(
                "Unable to find partition: " + ", ".join(partition_name(p) for p in missing)
            )
        return {part: found[part] for part in parts}

    async def alter_configs(self, resource_type: int, name: str, operations: dict) -> None:
        await self.admin.incremental_alter_configs(resource_type, name, operations)


def _raise(code: int, message: str | None) -> None:
    if code:
        raise errors.for_code(code)(message or errors.for_code(code).default_message)


# -- actions ----------------------------------------------------------------------------------
async def generate(
    cluster: ReassignmentAdmin, topics_json: str, broker_list: str, rack_aware: bool, out
) -> None:
    topics = parse_topics_to_move(topics_json)
    wanted = parse_broker_list(broker_list)
    current = await cluster.replica_assignment(topics)
    registered = await cluster.brokers()
    brokers = [b for b in wanted if b in registered]
    racks = {b: registered[b] for b in brokers} if rack_aware else {}
    rackless = sum(1 for b in brokers if racks.get(b) is None)
    if rack_aware and rackless not in (0, len(brokers)):
        raise CommandFailed(
            "Not all brokers have rack information. Add --disable-rack-aware in "
            "command line to make replica assignment without rack information."
        )
    proposed = calculate_assignment(current, brokers, racks)
    out.write(f"Current partition replica assignment\n{format_reassignment_json(current)}\n\n")
    out.write(
        f"Proposed partition reassignment configuration\n{format_reassignment_json(proposed)}\n"
    )


async def execute(
    cluster: ReassignmentAdmin, reassignment_json: str, additional: bool, throttle: int, out
) -> None:
    proposed = validate_execute(parse_reassignment(reassignment_json))
    ongoing = await cluster.list_reassignments()
    if ongoing and not additional:
        raise TerseError(CANNOT_EXECUTE_BECAUSE_OF_EXISTING)
    registered = await cluster.brokers()
    unknown = sorted({b for replicas in proposed.values() for b in replicas} - set(registered))
    if unknown:
        raise CommandFailed(f"Unknown broker id {unknown[0]}")
    current = await cluster.partition_assignment(list(proposed))
    out.write(current_assignment_text(proposed, current) + "\n")
    if throttle >= 0:
        out.write(RUN_VERIFY_PERIODICALLY + "\n")
        await modify_reassignment_throttle(
            cluster, proposed_move_map(ongoing, proposed, current), throttle, out
        )
    failed = await cluster.alter_reassignments(proposed)
    if failed:
        raise TerseError(
            "Error reassigning partition(s):\n"
            + "\n".join(f"{partition_name(p)}: {failed[p]}" for p in _sorted_parts(failed))
        )
    out.write(
        f"Successfully started partition reassignment{_plural(proposed)} for "
        f"{','.join(partition_name(p) for p in _sorted_parts(proposed))}\n"
    )


async def modify_reassignment_throttle(
    cluster: ReassignmentAdmin, moves, throttle: int, out
) -> None:
    leaders, followers = leader_throttles(moves), follower_throttles(moves)
    for topic in sorted(set(leaders) | set(followers)):
        await cluster.alter_configs(
            RESOURCE_TOPIC,
            topic,
            {
                LEADER_REPLICAS: (OP_SET, leaders.get(topic, "")),
                FOLLOWER_REPLICAS: (OP_SET, followers.get(topic, "")),
            },
        )
    for broker in reassigning_brokers(moves):
        await cluster.alter_configs(
            RESOURCE_BROKER,
            str(broker),
            {LEADER_RATE: (OP_SET, str(throttle)), FOLLOWER_RATE: (OP_SET, str(throttle))},
        )
    out.write(f"The inter-broker throttle limit was set to {throttle} B/s\n")


async def verify(
    cluster: ReassignmentAdmin, reassignment_json: str, preserve_throttles: bool, out
) -> None:
    targets = parse_reassignment(reassignment_json)
    states, ongoing = await reassignment_states(cluster, targets)
    out.write(reassignment_states_text(states) + "\n")
    # The log-directory moves kfast does not make: Kafka's (empty) report.
    out.write("\n")
    if not ongoing and not preserve_throttles:
        # Every throttle goes: which brokers earlier reassignments involved
        # is not known, so all of them are cleared (as Kafka does).
        await clear_all_throttles(cluster, targets, out)


async def reassignment_states(cluster: ReassignmentAdmin, targets):
    """Each target's state, and whether any reassignment is in progress in
    the cluster (not only these)."""
    ongoing = await cluster.list_reassignments()
    states = {}
    idle = [(part, replicas) for part, replicas in targets if part not in ongoing]
    assignment = {}
    for topic in {part[0] for part, _ in idle}:
        try:
            assignment.update(await cluster.replica_assignment([topic]))
        except CommandFailed:
            pass  # a deleted topic: no replicas
    for part, replicas in targets:
        if part in ongoing:
            states[part] = PartitionReassignmentState(ongoing[part].replicas, replicas, False)
        else:
            states[part] = PartitionReassignmentState(assignment.get(part, []), replicas, True)
    return states, bool(ongoing)


async def clear_all_throttles(cluster: ReassignmentAdmin, targets, out) -> None:
    brokers = sorted(
        set(await cluster.brokers()) | {b for _, replicas in targets for b in replicas}
    )
    out.write(
        f"Clearing broker-level throttles on broker{_plural(brokers)} "
        f"{','.join(map(str, brokers))}\n"
    )
    for broker in brokers:
        await cluster.alter_configs(
            RESOURCE_BROKER,
            str(broker),
            {name: (OP_DELETE, None) for name in BROKER_LEVEL_THROTTLES},
        )
    topics = sorted({part[0] for part, _ in targets})
    out.write(f"Clearing topic-level throttles on topic{_plural(topics)} {','.join(topics)}\n")
    for topic in topics:
        await cluster.alter_configs(
            RESOURCE_TOPIC, topic, {name: (OP_DELETE, None) for name in TOPIC_LEVEL_THROTTLES}
        )


async def cancel(
    cluster: ReassignmentAdmin, reassignment_json: str, preserve_throttles: bool, out
) -> None:
    targets = parse_reassignment(reassignment_json)
    ongoing = await cluster.list_reassignments([part for part, _ in targets])
    # Still moving: replicas being added or removed.
    moving = [part for part, o in ongoing.items() if o.adding_replicas or o.removing_replicas]
    if moving:
        failed = await cluster.alter_reassignments({part: None for part in moving})
        if failed:
            raise TerseError(
                f"Error cancelling partition reassignment{_plural(failed)} for:\n"
                + "\n".join(f"{partition_name(p)}: {failed[p]}" for p in _sorted_parts(failed))
            )
        out.write(
            f"Successfully cancelled partition reassignment{_plural(moving)} for: "
            f"{','.join(partition_name(p) for p in _sorted_parts(moving))}\n"
        )
    else:
        out.write("None of the specified partition reassignments are active.\n")
    out.write("None of the specified partition moves are active.\n")
    if not preserve_throttles:
        await clear_all_throttles(cluster, targets, out)


async def list_reassignments(cluster: ReassignmentAdmin, out) -> None:
    out.write(ongoing_reassignments_text(await cluster.list_reassignments()) + "\n")


# -- the command ------------------------------------------------------------------------------
def _action(args) -> str:
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        raise UsageError(
            "Command must include exactly one action: " + ", ".join(f"--{a}" for a in ACTIONS)
        )
    action = chosen[0]
    for name in REQUIRED[action]:
        if getattr(args, name) is None:
            raise UsageError(f'Missing required argument "[{name.replace("_", "-")}]"')
    for name in OPTION_NAMES:
        given = getattr(args, name)
        if given not in (None, False) and name not in REQUIRED[action] + PERMITTED[action]:
            raise UsageError(
                f'Option "[{name.replace("_", "-")}]" can\'t be used with action "[{action}]"'
            )
    return action


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise CommandFailed(f"{exc.strerror}: {path}") from None


async def _run(action: str, args, out) -> None:
    admin = KafkaAdmin(
        args.bootstrap_server, **admin_options(args, client_id="reassign-partitions-tool")
    )
    await admin.start()
    try:
        cluster = ReassignmentAdmin(admin)
        if action == "generate":
            await generate(
                cluster,
                _read(args.topics_to_move_json_file),
                args.broker_list,
                not args.disable_rack_aware,
                out,
            )
        elif action == "execute":
            await execute(
                cluster,
                _read(args.reassignment_json_file),
                args.additional,
                -1 if args.throttle is None else args.throttle,
                out,
            )
        elif action == "verify":
            await verify(cluster, _read(args.reassignment_json_file), args.preserve_throttles, out)
        elif action == "cancel":
            await cancel(cluster, _read(args.reassignment_json_file), args.preserve_throttles, out)
        else:
            await list_reassignments(cluster, out)
    finally:
        await admin.close()


def run(args, out=None) -> int:
    out = out or sys.stdout
    try:
        action = _action(args)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        args.parser.print_help(sys.stderr)
        return 1
    try:
        asyncio.run(_run(action, args, out))
    except TerseError as exc:
        out.write(f"{exc}\n")
        return 1
    except (TimeoutError, CommandFailed, errors.KafkaError, OSError, ConfigException) as exc:
        out.write(f"Error: {exc}\n")
        return 1
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "reassign-partitions",
        help="move partitions between brokers (like kafka-reassign-partitions.sh)",
        description="Move partition replicas between brokers, like kafka-reassign-partitions.sh.",
    )
    p.add_argument(
        "--bootstrap-server",
        required=True,
        metavar="HOST:PORT",
        help="the server(s) to use for bootstrapping",
    )
    add_command_config(p)
    p.add_argument(
        "--generate",
        action="store_true",
        help="generate a candidate partition reassignment configuration (it does not execute it)",
    )
    p.add_argument(
        "--execute",
        action="store_true",
        help="kick off the reassignment in --reassignment-json-file",
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="verify the reassignment in --reassignment-json-file; once complete, "
        "remove the throttles",
    )
    p.add_argument("--cancel", action="store_true", help="cancel an active reassignment")
    p.add_argument("--list", action="store_true", help="list all active partition reassignments")
    p.add_argument(
        "--reassignment-json-file",
        metavar="FILE",
        help='{"version":1,"partitions":[{"topic":"foo","partition":1,'
        '"replicas":[1,2,3],"log_dirs":["any","any","any"]}]}',
    )
    p.add_argument(
        "--topics-to-move-json-file",
        metavar="FILE",
        help='{"topics":[{"topic":"foo"},{"topic":"foo1"}],"version":1}',
    )
    p.add_argument(
        "--broker-list",
        metavar="BROKERLIST",
        help='the brokers to move the topics to, as "0,1,2" (--generate)',
    )
    p.add_argument(
        "--disable-rack-aware",
        action="store_true",
        help="disable rack aware replica assignment (--generate)",
    )
    p.add_argument(
        "--throttle",
        type=int,
        metavar="BYTES_PER_SEC",
        help="throttle the movement of partitions between brokers to this rate "
        "(--execute; with --additional it changes an ongoing one's)",
    )
    p.add_argument(
        "--additional",
        action="store_true",
        help="execute this reassignment in addition to ongoing ones",
    )
    p.add_argument(
        "--preserve-throttles",
        action="store_true",
        help="do not modify broker or topic throttles (--verify, --cancel)",
    )
    p.set_defaults(handler=run, parser=p)
