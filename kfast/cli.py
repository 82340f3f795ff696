"""The ``kfast`` command: one argparse parser, one subcommand per module.

Each subcommand lives in its own module, which defines
``register(subparsers)``: it adds its parser and sets ``handler`` (a function
taking the parsed arguments and returning an exit status). Adding a
subcommand is one line in SUBCOMMANDS; the module is imported only when the
command line is parsed, so ``kfast dump-log`` never loads the broker.
"""
from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = [
    "kfast.tools.dump_log",
    "kfast.tools.serve",
    "kfast.tools.topics",
    "kfast.tools.console",
    "kfast.tools.groups",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kfast", description="A Kafka-compatible broker.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for module_name in SUBCOMMANDS:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        status = args.handler(args)
    except BrokenPipeError:  # `kfast dump-log ... | head`
        sys.stderr.close()
        status = 0
    if argv is None:
        sys.exit(status or 0)
    return status or 0
