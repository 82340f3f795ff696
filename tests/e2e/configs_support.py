"""`kfast configs` run in-process against a test broker (its exit status,
stdout and stderr)."""

from __future__ import annotations

import io

from kfast.cli import build_parser
from kfast.tools import configs as configs_tool


def kfast_configs(broker, *argv) -> tuple[int, str, str]:
    args = build_parser("configs").parse_args(
        ["configs", "--bootstrap-server", broker.bootstrap_servers, *argv]
    )
    out, err = io.StringIO(), io.StringIO()
    return configs_tool.run(args, out=out, err=err), out.getvalue(), err.getvalue()
