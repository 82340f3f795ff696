"""``kfast leader-election``: move leaderships, like kafka-leader-election.sh.

    kfast leader-election -b H:P --election-type PREFERRED --all-topic-partitions
    kfast leader-election -b H:P --election-type UNCLEAN --topic t --partition 0
    kfast leader-election -b H:P --election-type preferred --path-to-json-file f.json

Sends ElectLeaders (a broker forwards it to the active controller).
PREFERRED moves a partition's leadership to its first assigned replica when
that replica is in sync; UNCLEAN elects any live replica for a partition
without a leader (accepting the loss of what it lacks). The JSON file is
Kafka's: ``{"partitions": [{"topic": "t", "partition": 0}, ...]}``. Output
lines and the exit status are the Kafka tool's: succeeded partitions, those
that needed no election, then one line per failure and exit status 1.
"""

from __future__ import annotations

import json
import sys

from kfast.protocol import ElectLeadersRequest, errors
from kfast.tools.cluster import EXIT_FAILURE, _connect
from kfast.tools.command_config import add_command_config

ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}
_NOT_NEEDED = errors.ElectionNotNeededException.code


def _partitions(args) -> list[tuple[str, int]] | None:
    """The partitions asked for; None = every partition."""
    if args.path_to_json_file:
        with open(args.path_to_json_file, encoding="utf-8") as f:
            data = json.load(f)
        found = [(entry["topic"], int(entry["partition"])) for entry in data["partitions"]]
        if len(set(found)) != len(found):
            raise ValueError("Replica election data contains duplicate partitions")
        return found
    if args.topic is not None:
        return [(args.topic, args.partition)]
    return None


def _validate(args) -> str | None:
    sources = [args.all_topic_partitions, args.topic is not None, bool(args.path_to_json_file)]
    if sum(sources) != 1:
        return (
            "One and only one of the following options is required: "
            "--all-topic-partitions, --topic, --path-to-json-file"
        )
    if (args.topic is None) != (args.partition is None):
        return "Missing required option(s): --topic and --partition go together"
    return None


def elect(args) -> int:
    problem = _validate(args)
    if problem is not None:
        print(problem, file=sys.stderr)
        return EXIT_FAILURE
    election = args.election_type.upper()
    try:
        wanted = _partitions(args)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"Invalid replica election data: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    by_topic: dict[str, list[int]] = {}
    for topic, partition in wanted or ():
        by_topic.setdefault(topic, []).append(partition)
    request = ElectLeadersRequest(
        election_type=ELECTION_TYPES[election],
        timeout_ms=args.timeout_ms,
        topic_partitions=None
        if wanted is None
        else [
            ElectLeadersRequest.TopicPartitions(topic=t, partitions=p) for t, p in by_topic.items()
        ],
    )
    try:
        with _connect(args) as connection:
            response = connection.send(request, timeout=args.timeout_ms / 1000 + 5)
    except Exception as exc:
        print(f"Error while making request: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    if response.error_code:
        print(errors.for_code(response.error_code).__name__, file=sys.stderr)
        return EXIT_FAILURE
    succeeded, noop, failed = [], [], []
    for result in response.replica_election_results:
        for p in result.partition_result:
            name = f"{result.topic}-{p.partition_id}"
            if p.error_code == 0:
                succeeded.append(name)
            elif p.error_code == _NOT_NEEDED:
                noop.append(name)
            else:
                error = errors.for_code(p.error_code)
                failed.append((name, f"{error.__name__}: {p.error_message or ''}".rstrip(": ")))
    if succeeded:
        print(
            f"Successfully completed leader election ({election}) for partitions "
            f"{', '.join(succeeded)}"
        )
    if noop:
        print(f"Valid replica already elected for partitions {', '.join(noop)}")
    for name, message in failed:
        print(f"Error completing leader election ({election}) for partition: {name}: {message}")
    if failed:
        print(f"{len(failed)} replica(s) could not be elected", file=sys.stderr)
        return EXIT_FAILURE
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "leader-election",
        help="elect partition leaders (like kafka-leader-election.sh)",
        description="Preferred or unclean leader election, like kafka-leader-election.sh.",
    )
    p.add_argument("--bootstrap-server", "-b", required=True, metavar="HOST:PORT")
    add_command_config(p)
    p.add_argument(
        "--election-type",
        required=True,
        type=str.upper,
        choices=sorted(ELECTION_TYPES),
        help="PREFERRED or UNCLEAN",
    )
    p.add_argument("--topic", help="the topic of the partition to elect a leader for")
    p.add_argument("--partition", type=int, help="the partition (with --topic)")
    p.add_argument(
        "--all-topic-partitions", action="store_true", help="every partition of every topic"
    )
    p.add_argument("--path-to-json-file", help='{"partitions": [{"topic": t, "partition": n}]}')
    p.add_argument(
        "--timeout-ms",
        type=int,
        default=30000,
        help="how long the controller may take (default 30000)",
    )
    p.set_defaults(handler=elect)
