"""kfast/protocol/message_classes.pyi (the message classes' types for mypy)
is generated from the grammars; it must say what the run-time classes are."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import kfast.protocol as protocol
from kfast.protocol import message_stubs
from kfast.protocol.api_keys import API_KEYS

from ..declared_classes import declared_attributes

STUB = Path(protocol.__file__).with_name("message_classes.pyi")


def test_stub_is_regenerated_from_the_grammars():
    # The checked-in stub is exactly the generator's output after ruff format:
    # a grammar edited without regenerating fails here.
    formatted = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(STUB), "-"],
        input=message_stubs.render(),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert STUB.read_text() == formatted, (
        "message_classes.pyi is stale: python -m kfast.protocol.message_stubs > "
        "kfast/protocol/message_classes.pyi && ruff format kfast/protocol/message_classes.pyi"
    )


def _stub_classes() -> dict[str, list[str]]:
    """qualified class name -> its declared attributes, from the stub's AST."""
    return declared_attributes(ast.parse(STUB.read_text()).body)


def test_stub_declares_every_runtime_class_and_field():
    stub = _stub_classes()
    seen = 0
    for api in API_KEYS:
        for top in (protocol.request_class(api.key), protocol.response_class(api.key)):
            classes = [top] + [
                v for v in vars(top).values() if isinstance(v, type) and v is not top
            ]
            for cls in classes:
                assert stub[cls.__qualname__] == list(cls._field_names), cls.__qualname__
                seen += 1
    assert seen == len(stub)
