"""The kfast command imports only the module of the subcommand it runs."""

import subprocess
import sys

import pytest

from kfast.cli import COMMANDS, build_parser, main

# What each subcommand must not load: the broker for the offline and client
# tools, the client for the broker.
MUST_NOT_IMPORT = {
    "serve": ["kfast.client", "kfast.tools.topics", "kfast.tools.console", "kfast.tools.groups"],
    "dump-log": ["kfast.server", "kfast.client"],
    "topics": ["kfast.server", "kfast.tools.console"],
    "produce": ["kfast.server", "kfast.tools.topics"],
    "groups": ["kfast.server", "kfast.tools.console"],
}


@pytest.mark.parametrize("command", sorted(MUST_NOT_IMPORT))
def test_a_subcommand_imports_only_its_module(command):
    probe = (
        f"import sys\nsys.argv = ['kfast', {command!r}, '--help']\n"
        "from kfast import cli\n"
        "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('kfast.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    loaded = out.strip().splitlines()[-1]
    assert COMMANDS[command] in loaded
    for module in MUST_NOT_IMPORT[command]:
        assert f"'{module}'" not in loaded and f"'{module}." not in loaded, (command, module)


def test_help_without_a_subcommand_lists_every_subcommand(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    listed = capsys.readouterr().out
    for command in COMMANDS:
        assert command in listed


def test_an_unknown_subcommand_is_refused_naming_the_choices(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["serv"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'serv'" in err and "serve" in err


def test_the_one_subcommand_parser_parses_like_the_full_one():
    argv = ["serve", "--override", "num.partitions=3"]
    assert vars(build_parser("serve").parse_args(argv)) == vars(build_parser().parse_args(argv))
