"""kfast/controller/metadata/records.pyi is the type checker's view of the
metadata record classes, which records.py builds from their grammars at
import time. The grammars stay the one definition: this test renders the
stub from them and fails when the file differs.

    python -m tests.unit.controller.test_records_stub   # rewrites the stub
"""

from __future__ import annotations

import difflib
import os
import subprocess
import sys

from kfast.controller.metadata import records
from kfast.protocol.schema import FieldSpec, parse

STUB = os.path.join(os.path.dirname(records.__file__), "records.pyi")

_PYTHON_TYPES = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "int",
    "uint16": "int",
    "uint32": "int",
    "float64": "float",
    "bool": "bool",
    "string": "str",
    "bytes": "bytes",
    "uuid": "uuid.UUID",
}

_HEADER = '''"""Type stub of records.py, whose record classes are built from their
grammars at import time. Rendered from those grammars by
tests/unit/controller/test_records_stub.py (run it as a module to rewrite
this file); edit the grammars, not this file."""

import uuid
from typing import NamedTuple, TypeAlias

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


def _field_type(spec: FieldSpec, top: str) -> str:
    element = spec.element_type
    name = f"{top}.{element}" if spec.struct_name is not None else _PYTHON_TYPES[element]
    text = f"list[{name}]" if spec.is_array else name
    if bool(spec.nullable) or (spec.has_default and spec.default is None):
        text += " | None"
    return text


def _struct(name: str, qualified: str, fields: list[FieldSpec], top: str, indent: str) -> list:
    """One class: its nested struct classes (the top one holds them all, as
    records.py attaches every struct class to the record class), fields, and
    the keyword constructor."""
    lines = [f"{indent}class {name}(Message):"]
    inner = indent + "    "
    if qualified == top:
        seen: set[str] = set()

        def nested(specs: list[FieldSpec]) -> None:
            for spec in specs:
                if spec.fields is not None and spec.struct_name not in seen:
                    seen.add(spec.struct_name)
                    lines.extend(
                        _struct(
                            spec.struct_name, f"{top}.{spec.struct_name}", spec.fields, top, inner
                        )
                    )
                    nested(spec.fields)

        nested(fields)
    for spec in fields:
        lines.append(f"{inner}{spec.name}: {_field_type(spec, top)}")
    params = "".join(f", {spec.name}: {_field_type(spec, top)} = ..." for spec in fields)
    keywords = ", *" if params else ""
    lines.append(f"{inner}def __init__(self{keywords}{params}) -> None: ...")
    return lines


def render() -> str:
    """The stub, as ruff formats it (make lint checks .pyi files too)."""
    lines = [_HEADER]
    names = []
    for spec in records._SCHEMAS:
        names.append(spec.name)
        lines.extend(_struct(spec.name, spec.name, parse(spec.grammar), spec.name, ""))
        lines.append("")
    lines.append("MetadataRecord: TypeAlias = (")
    lines.extend(f"    {'| ' if i else ''}{name}" for i, name in enumerate(names))
    lines.append(")")
    text = "\n".join(lines) + "\n" + _FOOTER
    formatted = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", STUB, "-"],
        input=text,
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
    written = open(STUB).read()
    for spec in records._SCHEMAS:
        assert f"\nclass {spec.name}(Message):" in written
        assert getattr(records, spec.name).__name__ == spec.name


if __name__ == "__main__":
    with open(STUB, "w") as f:
        f.write(render())
