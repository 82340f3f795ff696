"""``kfast transactions``: inspect transactions and abort hanging ones, like
kafka-transactions.sh (KIP-664).

    kfast transactions --bootstrap-server H:P list [--duration-filter MS]
        [--transactional-id-pattern REGEX]
    kfast transactions --bootstrap-server H:P describe --transactional-id ID
    kfast transactions --bootstrap-server H:P describe-producers --topic T --partition P
        [--broker-id N]
    kfast transactions --bootstrap-server H:P abort --topic T --partition P --start-offset O
    kfast transactions --bootstrap-server H:P find-hanging (--broker-id N | --topic T
        [--partition P]) [--max-transaction-timeout MINUTES]

``list`` asks every broker (each coordinator knows the transactional ids of
the __transaction_state partitions it leads); ``describe`` asks the id's
coordinator. A transaction hangs when a partition holds its records but no
coordinator will ever write its marker (the coordinator lost it, or it was
written by a client that never registered the partition): the partition's
last stable offset stops there and read_committed consumers with it.
``find-hanging`` lists the open transactions of the partitions a broker
replicates that are older than the longest transaction timeout and that
no coordinator has the partition for; ``abort`` looks up the producer whose
open transaction starts at --start-offset (DescribeProducers) and writes an
ABORT marker for it to the partition's leader (WriteTxnMarkers).

Tables, error lines and exit statuses are the Kafka tool's: columns padded
to their widest value, each followed by a tab; a failure prints
"<what failed>: <why>. Enable debug logging for additional detail." to
stderr and exits 1. --bootstrap-server may also follow the command.
"""

from __future__ import annotations

import argparse
import sys
import time

from kfast.config import ConfigException
from kfast.tools.command_config import COMMAND_CONFIG_HELP, connection_options
from kfast.tools.transactions_admin import (
    AbortTransactionSpec,
    AdminError,
    TransactionalIdNotFound,
    TransactionsAdmin,
)

EXIT_FAILURE = 1
# Kafka's FindHangingTransactionsCommand: partitions per DescribeProducers.
MAX_BATCH_SIZE = 500

LIST_HEADERS = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
DESCRIBE_HEADERS = [
    "CoordinatorId",
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TransactionDurationMs",
    "TopicPartitions",
]
PRODUCERS_HEADERS = [
    "ProducerId",
    "ProducerEpoch",
    "LatestCoordinatorEpoch",
    "LastSequence",
    "LastTimestamp",
    "CurrentTransactionStartOffset",
]
HANGING_HEADERS = [
    "Topic",
    "Partition",
    "ProducerId",
    "ProducerEpoch",
    "CoordinatorEpoch",
    "StartOffset",
    "LastTimestamp",
    "Duration(min)",
]


class CommandError(Exception):
    """Printed as is to stderr, exit status 1 (Kafka's printErrorAndExit)."""


def _failed(what: str, exc: Exception) -> CommandError:
    return CommandError(f"{what}: {exc}. Enable debug logging for additional detail.")


def _now_ms() -> int:
    return int(time.time() * 1000)


def print_table(headers: list[str], rows: list[list], out) -> None:
    """Kafka's ToolsUtils.prettyPrintTable."""
    rows = [[str(value) for value in row] for row in rows]
    widths = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(headers)]
    for row in [headers] + rows:
        print("".join(value.ljust(width) + "\t" for value, width in zip(row, widths)), file=out)


# -- list ----------------------------------------------------------------------------------
def _list(admin: TransactionsAdmin, args, out) -> None:
    try:
        listings = admin.list_transactions(
            duration_ms=-1 if args.duration_filter is None else args.duration_filter,
            pattern=args.transactional_id_pattern,
        )
    except AdminError as exc:
        raise _failed("Failed to list transactions", exc) from None
    print_table(
        LIST_HEADERS,
        [
            [state.transactional_id, broker, state.producer_id, state.transaction_state]
            for broker, states in listings.items()
            for state in states
        ],
        out,
    )


# -- describe ------------------------------------------------------------------------------
def _describe(admin: TransactionsAdmin, args, out) -> None:
    transactional_id = args.transactional_id
    try:
        coordinator, state = admin.describe_transaction(transactional_id)
    except AdminError as exc:
        raise _failed(
            f"Failed to describe transaction state of transactional-id `{transactional_id}`", exc
        ) from None
    if state.transaction_start_time_ms >= 0:
        start = str(state.transaction_start_time_ms)
        duration = str(_now_ms() - state.transaction_start_time_ms)
    else:
        start = duration = "None"
    partitions = ",".join(
        f"{topic.topic}-{index}" for topic in state.topics for index in topic.partitions
    )
    print_table(
        DESCRIBE_HEADERS,
        [
            [
                coordinator,
                transactional_id,
                state.producer_id,
                state.producer_epoch,
                state.transaction_state,
                state.transaction_timeout_ms,
                start,
                duration,
                partitions,
            ]
        ],
        out,
    )


# -- describe-producers --------------------------------------------------------------------
def _describe_producers(admin: TransactionsAdmin, args, out) -> None:
    tp = (args.topic, args.partition)
    try:
        producers = admin.describe_producers([tp], args.broker_id)[tp]
    except AdminError as exc:
        where = "leader" if args.broker_id is None else f"broker {args.broker_id}"
        raise _failed(
            f"Failed to describe producers for partition {tp[0]}-{tp[1]} on {where}", exc
        ) from None
    print_table(
        PRODUCERS_HEADERS,
        [
            [
                p.producer_id,
                p.producer_epoch,
                p.coordinator_epoch,
                p.last_sequence,
                p.last_timestamp,
                "None" if p.current_txn_start_offset < 0 else p.current_txn_start_offset,
            ]
            for p in producers
        ],
        out,
    )


# -- abort ---------------------------------------------------------------------------------
def _abort_spec(admin: TransactionsAdmin, args) -> AbortTransactionSpec:
    tp = (args.topic, args.partition)
    if args.start_offset is None:
        if args.producer_epoch is None:
            raise CommandError("Missing required argument --producer-epoch")
        if args.coordinator_epoch is None:
            raise CommandError("Missing required argument --coordinator-epoch")
        # A producer that hung before its first marker shows coordinator
        # epoch -1; 0 is at or below every real coordinator epoch.
        return AbortTransactionSpec(
            *tp, args.producer_id, args.producer_epoch, max(args.coordinator_epoch, 0)
        )
    try:
        producers = admin.describe_producers([tp])[tp]
    except AdminError as exc:
        raise _failed(
            f"Failed to validate producer state for partition {tp[0]}-{tp[1]}", exc
        ) from None
    for p in producers:
        if p.current_txn_start_offset == args.start_offset:
            return AbortTransactionSpec(
                *tp, p.producer_id, p.producer_epoch, max(p.coordinator_epoch, 0)
            )
    raise CommandError(
        f"Could not find any open transactions starting at offset "
        f"{args.start_offset} on partition {tp[0]}-{tp[1]}"
    )


def _abort(admin: TransactionsAdmin, args, out) -> None:
    if args.start_offset is None and args.producer_id is None:
        raise CommandError(
            "The transaction to abort must be identified either with "
            "--start-offset (for brokers on 3.0 or above) or with --producer-id, "
            "--producer-epoch, and --coordinator-epoch (for older brokers)"
        )
    spec = _abort_spec(admin, args)
    try:
        admin.abort_transaction(spec)
    except AdminError as exc:
        raise _failed(f"Failed to abort transaction {spec}", exc) from None


# -- find-hanging --------------------------------------------------------------------------
def _partitions_to_search(admin: TransactionsAdmin, args) -> list[tuple[str, int]]:
    if args.topic is not None and args.partition is not None:
        return [(args.topic, args.partition)]
    try:
        found = admin.metadata(None if args.topic is None else [args.topic])
    except AdminError as exc:
        raise _failed("Failed to describe topics", exc) from None
    return sorted(
        tp
        for tp, (_, replicas) in found.items()
        if args.broker_id is None or args.broker_id in replicas
    )


def _open_transactions(admin: TransactionsAdmin, args, partitions) -> list[tuple]:
    """(topic partition, producer state) of each transaction open longer
    than the longest transaction timeout."""
    max_timeout_ms = args.max_transaction_timeout * 60_000
    candidates = []
    for start in range(0, len(partitions), MAX_BATCH_SIZE):
        batch = partitions[start : start + MAX_BATCH_SIZE]
        try:
            producers = admin.describe_producers(batch, args.broker_id)
        except AdminError as exc:
            raise _failed(
                f"Failed to describe producers for {len(batch)} partitions on broker "
                f"{args.broker_id}",
                exc,
            ) from None
        now_ms = _now_ms()
        for tp in batch:
            for p in producers[tp]:
                if p.current_txn_start_offset >= 0 and now_ms - p.last_timestamp > max_timeout_ms:
                    candidates.append((tp, p))
    return candidates


def _hanging(admin: TransactionsAdmin, candidates: list[tuple]) -> list[tuple]:
    """The candidates no coordinator will end: their producer id has no
    transactional id, the id has no state, or its transaction does not
    hold the partition (Kafka lists the partitions of an ongoing
    transaction and those still waiting for markers)."""
    producer_ids = sorted({p.producer_id for _, p in candidates})
    try:
        listings = admin.list_transactions(producer_ids=producer_ids)
    except AdminError as exc:
        raise _failed(
            f"Failed to list transactions for {len(producer_ids)} producers", exc
        ) from None
    transactional_ids = {
        state.producer_id: state.transactional_id
        for states in listings.values()
        for state in states
        if state.producer_id in producer_ids
    }
    descriptions = {}
    for transactional_id in sorted(set(transactional_ids.values())):
        try:
            descriptions[transactional_id] = admin.describe_transaction(transactional_id)[1]
        except TransactionalIdNotFound:
            descriptions[transactional_id] = None
        except AdminError as exc:
            raise _failed(
                f"Failed to describe {len(set(transactional_ids.values()))} transactions", exc
            ) from None
    hanging = []
    for tp, p in candidates:
        description = descriptions.get(transactional_ids.get(p.producer_id))
        if description is None or tp not in {
            (t.topic, i) for t in description.topics for i in t.partitions
        }:
            hanging.append((tp, p))
    return hanging


def _find_hanging(admin: TransactionsAdmin, args, out) -> None:
    if args.topic is None and args.broker_id is None:
        raise CommandError(
            "The `find-hanging` command requires either --topic or --broker-id "
            "to limit the scope of the search"
        )
    if args.partition is not None and args.topic is None:
        raise CommandError("The --partition argument requires --topic to be provided")
    candidates = _open_transactions(admin, args, _partitions_to_search(admin, args))
    hanging = _hanging(admin, candidates) if candidates else []
    now_ms = _now_ms()
    print_table(
        HANGING_HEADERS,
        [
            [
                tp[0],
                tp[1],
                p.producer_id,
                p.producer_epoch,
                p.coordinator_epoch,
                p.current_txn_start_offset,
                p.last_timestamp,
                (now_ms - p.last_timestamp) // 60_000,
            ]
            for tp, p in hanging
        ],
        out,
    )


COMMANDS = {
    "list": _list,
    "describe": _describe,
    "describe-producers": _describe_producers,
    "abort": _abort,
    "find-hanging": _find_hanging,
}


def run(args, out=None) -> int:
    out = out or sys.stdout
    if args.bootstrap_server is None:
        print("Missing required argument --bootstrap-server", file=sys.stderr)
        return EXIT_FAILURE
    try:
        with TransactionsAdmin(args.bootstrap_server, options=connection_options(args)) as admin:
            COMMANDS[args.transactions_command](admin, args, out)
    except (CommandError, ConfigException) as exc:
        print(exc, file=sys.stderr)
        return EXIT_FAILURE
    except AdminError as exc:
        print(_failed(f"Failed to run {args.transactions_command}", exc), file=sys.stderr)
        return EXIT_FAILURE
    return 0


def _bootstrap_argument(parser, default) -> None:
    parser.add_argument(
        "--bootstrap-server",
        metavar="host:port",
        default=default,
        help="the broker(s) to connect to (comma-separated host:port)",
    )
    parser.add_argument(
        "--command-config", metavar="FILE", default=default, help=COMMAND_CONFIG_HELP
    )


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "transactions",
        help="list, describe and abort transactions (like kafka-transactions.sh)",
        description="Analyze the transactional state of producers in the cluster; detect and "
        "recover from hanging transactions, like kafka-transactions.sh.",
    )
    _bootstrap_argument(p, None)
    commands = p.add_subparsers(dest="transactions_command", metavar="COMMAND")
    commands.required = True
    # After the command too; SUPPRESS keeps a value given before it.
    listing = commands.add_parser("list", help="list transactions")
    listing.add_argument(
        "--duration-filter",
        type=int,
        metavar="MS",
        help="only transactions running longer than this many milliseconds",
    )
    listing.add_argument(
        "--transactional-id-pattern",
        metavar="REGEX",
        help="only transactional ids matching this regular expression",
    )
    describe = commands.add_parser(
        "describe", help="describe the state of an active transactional-id"
    )
    describe.add_argument("--transactional-id", required=True)
    producers = commands.add_parser(
        "describe-producers", help="describe the states of active producers for a topic partition"
    )
    producers.add_argument(
        "--broker-id", type=int, help="describe the producer state on this replica's broker"
    )
    producers.add_argument("--topic", required=True)
    producers.add_argument("--partition", type=int, required=True)
    abort = commands.add_parser("abort", help="abort a hanging transaction")
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=int, required=True)
    abort.add_argument("--start-offset", type=int, help="start offset of the transaction to abort")
    abort.add_argument("--producer-id", type=int, help="(brokers older than 3.0)")
    abort.add_argument("--producer-epoch", type=int, help="(brokers older than 3.0)")
    abort.add_argument("--coordinator-epoch", type=int, help="(brokers older than 3.0)")
    hanging = commands.add_parser("find-hanging", help="find hanging transactions")
    hanging.add_argument(
        "--broker-id", type=int, help="broker id to search for hanging transactions"
    )
    hanging.add_argument(
        "--max-transaction-timeout",
        type=int,
        default=15,
        metavar="MINUTES",
        help="maximum transaction timeout in minutes to limit the scope of the search (default 15)",
    )
    hanging.add_argument("--topic", help="topic name to limit the search to")
    hanging.add_argument("--partition", type=int, help="partition number (with --topic)")
    for command in (listing, describe, producers, abort, hanging):
        _bootstrap_argument(command, argparse.SUPPRESS)
    p.set_defaults(handler=run)
