"""``kfast storage``: prepare log directories, like kafka-storage.sh.

    kfast storage random-uuid
    kfast storage format --cluster-id ID --config server.properties [--ignore-formatted]

``format`` writes meta.properties (version 1: cluster.id, node.id, a new
directory.id) into every directory of log.dirs and metadata.log.dir, so
that the nodes of one cluster share its id and a node started against
another cluster's directories refuses to start. A directory that already
has a meta.properties stops the command (exit 1) unless
``--ignore-formatted`` is given. Output lines are kafka-storage.sh's.

Differences from kafka-storage.sh: kfast's first active controller commits
the bootstrap records (metadata.version) itself, so no bootstrap checkpoint
is written; and kfast's quorums are static (controller.quorum.voters), so
the dynamic-quorum options (--standalone, --initial-controllers, KIP-853)
are refused with a message.
"""
from __future__ import annotations

import os
import sys

from kfast.config import ConfigException
from kfast.storage.meta_properties import (
    MetaProperties,
    random_uuid_base64,
    read_meta_properties,
    write_meta_properties,
)

EXIT_FAILURE = 1


def _directories(config) -> list[str]:
    dirs = list(config["log.dirs"])
    metadata_dir = config.get("metadata.log.dir")
    if metadata_dir and metadata_dir not in dirs:
        dirs.append(metadata_dir)
    return dirs


def format_storage(args) -> int:
    from kfast.tools.serve import build_config

    if args.standalone or args.initial_controllers:
        print("kfast storage: dynamic controller quorums (KIP-853: --standalone, "
              "--initial-controllers) are not supported yet; configure "
              "controller.quorum.voters instead", file=sys.stderr)
        return EXIT_FAILURE
    try:
        config = build_config(args.config, [])
    except ConfigException as exc:
        print(f"kfast storage: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    if config.node_id < 0:
        print("kfast storage: node.id must be set to format a node's directories",
              file=sys.stderr)
        return EXIT_FAILURE
    formatted, unformatted = [], []
    for directory in _directories(config):
        meta = read_meta_properties(directory) if os.path.isdir(directory) else None
        (formatted if meta is not None else unformatted).append(directory)
    if formatted and not args.ignore_formatted:
        print(f"Log directory {formatted[0]} is already formatted. Use --ignore-formatted to "
              f"ignore this directory and format the others.", file=sys.stderr)
        return EXIT_FAILURE
    if not unformatted:
        print("All of the log directories are already formatted.")
        return 0
    for directory in unformatted:
        os.makedirs(directory, exist_ok=True)
        write_meta_properties(directory, MetaProperties(1, args.cluster_id, config.node_id,
                                                        random_uuid_base64()))
        print(f"Formatting {directory} with cluster id {args.cluster_id}.")
    return 0


def random_uuid(args) -> int:
    print(random_uuid_base64())
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("storage", help="format log directories (like kafka-storage.sh)",
                              description="Prepare log directories, like kafka-storage.sh.")
    actions = p.add_subparsers(dest="storage_command", metavar="ACTION")
    actions.required = True
    fmt = actions.add_parser("format", help="write meta.properties into the log directories")
    fmt.add_argument("--config", "-c", required=True, metavar="server.properties")
    fmt.add_argument("--cluster-id", "-t", required=True, help="the cluster id (a Kafka Uuid)")
    fmt.add_argument("--ignore-formatted", "-g", action="store_true",
                     help="skip directories that are already formatted")
    fmt.add_argument("--standalone", "-s", action="store_true",
                     help="(dynamic quorums; not supported)")
    fmt.add_argument("--initial-controllers", "-I", help="(dynamic quorums; not supported)")
    fmt.set_defaults(handler=format_storage)
    uuid_parser = actions.add_parser("random-uuid", help="print a random cluster id")
    uuid_parser.set_defaults(handler=random_uuid)
