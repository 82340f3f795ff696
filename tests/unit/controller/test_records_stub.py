"""kfast/controller/metadata/records.pyi is the type checker's view of the
metadata record classes, which records.py builds from their grammars at
import time. The grammars stay the one definition: this test renders the
stub from them (with kfast.protocol.message_stubs, as the message classes'
stub is) and fails when the file differs.

    python -m tests.unit.controller.test_records_stub   # rewrites the stub
"""

from __future__ import annotations

import difflib
import os
import subprocess
import sys

from kfast.controller.metadata import records
from kfast.protocol.message_stubs import render_message

STUB = os.path.join(os.path.dirname(records.__file__), "records.pyi")

_HEADER = '''"""Type stub of records.py, whose record classes are built from their
grammars at import time. Rendered from those grammars by
tests/unit/controller/test_records_stub.py (run it as a module to rewrite
this file); edit the grammars, not this file."""

from typing import NamedTuple, TypeAlias
from uuid import UUID

from kfast.protocol.schema import Message, MessageSchema

FRAME_VERSION: int

class _RecordSchema(NamedTuple):
    record_type: int
    name: str
    version: int
    max_version: int
    grammar: str

class _MetadataRecordSchema(MessageSchema):
    record_type: int
    write_version: int
    def __init__(self, spec: _RecordSchema) -> None: ...

_SCHEMAS: tuple[_RecordSchema, ...]
_BY_TYPE: dict[int, _MetadataRecordSchema]
_BY_CLASS: dict[type[Message], _MetadataRecordSchema]
'''

_FOOTER = """
def _uvarint(value: int) -> bytes: ...
def _read_uvarint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]: ...
def record_type(record: MetadataRecord) -> int: ...
def encode_record(record: MetadataRecord, version: int | None = None) -> bytes: ...
def decode_record(value: bytes | bytearray | memoryview) -> tuple[MetadataRecord, int]: ...
"""


def render() -> str:
    """The stub, as ruff formats it (make lint checks .pyi files too)."""
    schemas = [records._BY_TYPE[spec.record_type] for spec in records._SCHEMAS]
    lines = [_HEADER]
    for schema in schemas:
        lines += [*render_message(schema), ""]
    lines.append("MetadataRecord: TypeAlias = (")
    lines += [f"    {'| ' if i else ''}{schema.name}" for i, schema in enumerate(schemas)]
    lines.append(")")
    formatted = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", STUB, "-"],
        input="\n".join(lines) + "\n" + _FOOTER,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return formatted.stdout


def test_the_stub_is_the_grammars():
    with open(STUB) as f:
        written = f.read()
    expected = render()
    diff = "".join(difflib.unified_diff(written.splitlines(True), expected.splitlines(True)))
    assert written == expected, f"records.pyi is stale; rerun this module to rewrite it:\n{diff}"


def test_every_record_class_is_in_the_stub():
    with open(STUB) as f:
        written = f.read()
    for spec in records._SCHEMAS:
        assert f"\nclass {spec.name}(Message):" in written
        assert getattr(records, spec.name).__name__ == spec.name


if __name__ == "__main__":
    with open(STUB, "w") as f:
        f.write(render())
