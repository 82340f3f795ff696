"""The ``kfast`` command: one argparse parser, one subcommand per module.

Each subcommand lives in a module that defines ``register(subparsers)``: it
adds its parser(s) and sets ``handler`` (a function taking the parsed
arguments and returning an exit status). Adding a subcommand is one line in
COMMANDS. When the command line names a subcommand, only that module is
imported, so ``kfast serve`` never loads the client and ``kfast dump-log``
never loads the broker (each tools module costs 30-150 ms to import); a
command line without one (``kfast --help``, a typo) gets the full parser.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# subcommand -> the module that registers it (one module may register two)
COMMANDS = {
    "dump-log": "kfast.tools.dump_log",
    "serve": "kfast.tools.serve",
    "topics": "kfast.tools.topics",
    "produce": "kfast.tools.console",
    "consume": "kfast.tools.console",
    "groups": "kfast.tools.groups",
    "storage": "kfast.tools.storage",
    "metadata-quorum": "kfast.tools.metadata_quorum",
    "cluster": "kfast.tools.cluster",
    "leader-election": "kfast.tools.leader_election",
    "reassign-partitions": "kfast.tools.reassign_partitions",
    "transactions": "kfast.tools.transactions",
    "perf": "kfast.tools.perf",
    "configs": "kfast.tools.configs",
    "client-metrics": "kfast.tools.client_metrics",
    "console": "kfast.tools.console_web.command",
    "acls": "kfast.tools.acls",
    "features": "kfast.tools.features",
}


def _command_in(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names: its first word, when it is one (the
    top-level parser has no options but --help, so nothing comes before)."""
    return argv[0] if argv and argv[0] in COMMANDS else None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with every subcommand, or with only ``command``'s."""
    parser = argparse.ArgumentParser(prog="kfast", description="A Kafka-compatible broker.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    modules = [COMMANDS[command]] if command is not None else list(dict.fromkeys(COMMANDS.values()))
    for module_name in modules:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    args = build_parser(_command_in(words)).parse_args(words)
    try:
        status = args.handler(args)
    except BrokenPipeError:  # `kfast dump-log ... | head`
        sys.stderr.close()
        status = 0
    if argv is None:
        sys.exit(status or 0)
    return status or 0
