"""``kfast storage``: prepare log directories, like kafka-storage.sh.

    kfast storage random-uuid
    kfast storage format --cluster-id ID --config server.properties [--ignore-formatted]
          [--standalone | --initial-controllers ID@HOST:PORT:DIRID,... | --no-initial-controllers]
          [--add-scram 'SCRAM-SHA-512=[name=alice,password=...]' ...]

``format`` writes meta.properties (version 1: cluster.id, node.id, a new
directory.id) into every directory of log.dirs and metadata.log.dir, so
that the nodes of one cluster share its id and a node started against
another cluster's directories refuses to start. A directory that already
has a meta.properties stops the command (exit 1) unless
``--ignore-formatted`` is given.

A dynamic quorum (KIP-853) starts from the voters given here:
``--standalone`` (this controller alone, at its advertised controller
listener, with a new directory id) or ``--initial-controllers`` (every
first voter with the directory id its metadata directory gets). Either way
the metadata log directory gets the bootstrap checkpoint
``__cluster_metadata-0/00000000000000000000-0000000000.checkpoint``: a
snapshot holding only KRaftVersionRecord (kraft.version 1) and VotersRecord,
as Kafka's Formatter writes it; and a voter's metadata directory takes its
directory id from the voter set. ``--no-initial-controllers`` formats a
controller that will join an existing dynamic quorum (AddRaftVoter) and
writes no checkpoint. A controller configured with
controller.quorum.bootstrap.servers and no controller.quorum.voters must be
given one of the three, as kafka-storage.sh demands.

``--add-scram`` (repeatable) adds SCRAM credentials to the bootstrap
metadata: the metadata log directory gets ``bootstrap.checkpoint``
(kfast.controller.bootstrap_metadata) holding the default feature levels and
one UserScramCredentialRecord per argument, which the first active
controller commits into the empty metadata log, so brokers can log in to the
controller and to each other with SCRAM from the cluster's first start.

Differences from kafka-storage.sh: without ``--add-scram`` kfast's first
active controller commits the bootstrap metadata records (metadata.version)
itself, so no bootstrap.checkpoint is written; a combined node
without any quorum setting (the embedded single node) needs none of the
three options. Output lines are kafka-storage.sh's before 3.9.
"""

from __future__ import annotations

import os
import sys

from kfast.config import ConfigException
from kfast.controller.bootstrap_metadata import write_bootstrap_metadata
from kfast.controller.feature_control import FeatureControlManager
from kfast.storage.meta_properties import (
    MetaProperties,
    random_uuid_base64,
    read_meta_properties,
    uuid_base64,
    write_meta_properties,
)
from kfast.tools.scram_credentials import AddScramError, add_scram_record

EXIT_FAILURE = 1


def _directories(config) -> list[str]:
    dirs = list(config["log.dirs"])
    metadata_dir = config.get("metadata.log.dir")
    if metadata_dir and metadata_dir not in dirs:
        dirs.append(metadata_dir)
    return dirs


def _metadata_dir(config) -> str:
    return config.get("metadata.log.dir") or config["log.dirs"][0]


class FormatError(Exception):
    """A format request kafka-storage.sh refuses (TerseFailure / FormatterException)."""


def initial_voters(args, config):
    """The VoterSet a dynamic quorum starts with, or None (static quorum, or
    a controller joining later)."""
    from kfast.raft.voter_set import parse_dynamic_voters
    from kfast.server.controller_server import advertised_controller_endpoints

    is_controller = "controller" in config["process.roles"]
    names = config["controller.listener.names"]
    if args.standalone:
        if not is_controller:
            raise FormatError("You can only use --standalone on a controller.")
        try:
            endpoint = advertised_controller_endpoints(config)[0]
        except ConfigException:
            raise FormatError("No controller listeners found.") from None
        host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
        return parse_dynamic_voters(
            f"{config.node_id}@{host}:{endpoint.port}:{random_uuid_base64()}", endpoint.name
        )
    if args.initial_controllers:
        if not names:
            raise FormatError("You must specify the name of the initial controller listener.")
        try:
            return parse_dynamic_voters(args.initial_controllers, names[0].upper())
        except ValueError as exc:
            raise FormatError(str(exc)) from None
    dynamic_controller = (
        is_controller
        and not config["controller.quorum.voters"]
        and bool(config["controller.quorum.bootstrap.servers"])
    )
    if dynamic_controller and not args.no_initial_controllers:
        raise FormatError(
            "Because controller.quorum.voters is not set on this controller, you "
            "must specify one of the following: --standalone, "
            "--initial-controllers, or --no-initial-controllers."
        )
    return None


def write_bootstrap_checkpoint(metadata_dir: str, voters) -> str:
    """The bootstrap snapshot of a dynamic quorum (Formatter.writeDynamicQuorumSnapshot)."""
    from kfast.raft.file_log import METADATA_PARTITION_DIR
    from kfast.raft.snapshots import (
        BOOTSTRAP_SNAPSHOT_ID,
        snapshot_bytes,
        snapshot_name,
        write_snapshot_file,
    )
    from kfast.raft.voter_set import KRAFT_VERSION_1, KRaftVersionRecord, VotersRecord

    directory = os.path.join(metadata_dir, METADATA_PARTITION_DIR)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, snapshot_name(*BOOTSTRAP_SNAPSHOT_ID))
    data = snapshot_bytes(
        (),
        BOOTSTRAP_SNAPSHOT_ID.epoch,
        bytes,
        kraft_records=(KRaftVersionRecord(KRAFT_VERSION_1), VotersRecord(voters)),
    )
    write_snapshot_file(path, (data,))
    return path


def format_storage(args) -> int:
    from kfast.tools.serve import build_config

    try:
        config = build_config(args.config, [])
    except ConfigException as exc:
        print(f"kfast storage: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    if config.node_id < 0:
        print("kfast storage: node.id must be set to format a node's directories", file=sys.stderr)
        return EXIT_FAILURE
    try:
        voters = initial_voters(args, config)
    except FormatError as exc:
        print(f"kfast storage: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    try:
        scram_records = [add_scram_record(a) for a in args.add_scram or ()]
    except AddScramError as exc:
        print(f"kfast storage: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    formatted: list[str] = []
    unformatted: list[str] = []
    for directory in _directories(config):
        meta = read_meta_properties(directory) if os.path.isdir(directory) else None
        (formatted if meta is not None else unformatted).append(directory)
    if formatted and not args.ignore_formatted:
        print(
            f"Log directory {formatted[0]} is already formatted. Use --ignore-formatted to "
            f"ignore this directory and format the others.",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    if not unformatted:
        print("All of the log directories are already formatted.")
        return 0
    metadata_dir = _metadata_dir(config)
    own_voter = voters.get(config.node_id) if voters is not None else None
    for directory in unformatted:
        os.makedirs(directory, exist_ok=True)
        directory_id = random_uuid_base64()
        if directory == metadata_dir and own_voter is not None:
            # The voter set names this node's metadata directory by its id.
            directory_id = uuid_base64(own_voter.directory_id)
        write_meta_properties(
            directory, MetaProperties(1, args.cluster_id, config.node_id, directory_id)
        )
        if directory == metadata_dir and voters is not None:
            write_bootstrap_checkpoint(directory, voters)
        if directory == metadata_dir and scram_records:
            write_bootstrap_metadata(
                directory, FeatureControlManager().bootstrap_records() + scram_records
            )
        print(f"Formatting {directory} with cluster id {args.cluster_id}.")
    return 0


def random_uuid(args) -> int:
    print(random_uuid_base64())
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "storage",
        help="format log directories (like kafka-storage.sh)",
        description="Prepare log directories, like kafka-storage.sh.",
    )
    actions = p.add_subparsers(dest="storage_command", metavar="ACTION")
    actions.required = True
    fmt = actions.add_parser("format", help="write meta.properties into the log directories")
    fmt.add_argument("--config", "-c", required=True, metavar="server.properties")
    fmt.add_argument("--cluster-id", "-t", required=True, help="the cluster id (a Kafka Uuid)")
    fmt.add_argument(
        "--ignore-formatted",
        "-g",
        action="store_true",
        help="skip directories that are already formatted",
    )
    voters = fmt.add_mutually_exclusive_group()
    voters.add_argument(
        "--standalone", "-s", action="store_true", help="a dynamic quorum of this controller alone"
    )
    voters.add_argument(
        "--initial-controllers",
        "-I",
        metavar="ID@HOST:PORT:DIRID,...",
        help="the first voters of a dynamic quorum",
    )
    voters.add_argument(
        "--no-initial-controllers",
        "-N",
        action="store_true",
        help="a controller that joins a dynamic quorum later",
    )
    fmt.add_argument(
        "--add-scram",
        "-S",
        action="append",
        metavar="MECHANISM=[name=...,...]",
        help="a SCRAM credential for the bootstrap metadata (repeatable)",
    )
    fmt.set_defaults(handler=format_storage)
    uuid_parser = actions.add_parser("random-uuid", help="print a random cluster id")
    uuid_parser.set_defaults(handler=random_uuid)
