"""One home per byte layout: kfast/_ext/layout.pxd (the kernels) and
kfast/_ext/layout.py (the Python readers) hold every offset, size and bit of
the record batch, legacy message and index entry formats.

These tests keep the two files equal, the struct formats consistent with the
offsets, the compiled kernels in agreement with the Python side, and the
readers free of the bare numbers the layouts replaced: change a layout in its
home and every reader follows, or a test here says which one did not.
"""

import ast
import re
import struct
import zlib
from pathlib import Path

import pytest

import kfast._ext.layout as layout
from kfast._ext import batch as batch_kernel
from kfast.records import (
    COMPRESSION_GZIP,
    CONTROL_TYPE_COMMIT,
    TIMESTAMP_LOG_APPEND_TIME,
    RecordBatch,
    RecordBatchBuilder,
    build_control_batch,
)
from kfast.storage.file_records import check_batch, read_header, read_legacy_header
from kfast.storage.producer_state import parse_end_txn_marker

ROOT = Path(__file__).resolve().parents[3]
PXD = ROOT / "kfast" / "_ext" / "layout.pxd"

# Readers of the layouts. Python files are checked by their AST, Cython files
# by their text with comments and strings removed.
PYTHON_READERS = [
    "kfast/storage/file_records.py",
    "kfast/storage/index.py",
    "kfast/storage/segment.py",
    "kfast/storage/cleaner.py",
    "kfast/storage/log.py",
    "kfast/storage/loader.py",
    "kfast/storage/records_access.py",
    "kfast/storage/producer_state.py",
    "kfast/coordinator/group/runtime.py",
    "kfast/records.py",
    "kfast/tools/dump_log.py",
    "spark/kfast_spark/segments.py",
]
CYTHON_READERS = [
    "kfast/_ext/batch.pyx",
    "kfast/_ext/batch_builder.pxi",
    "kfast/_ext/batch.pxd",
    "kfast/_ext/columnar.pyx",
    "kfast/_ext/log_append.pyx",
    "kfast/_ext/log_append.pxd",
    "kfast/_ext/index.pyx",
    "kfast/_ext/index.pxd",
    "kfast/_ext/legacy.pyx",
    "kfast/_ext/legacy.pxd",
]


def pxd_constants(text: str) -> dict[str, int]:
    """NAME = value lines of the .pxd's ``cdef enum:`` blocks."""
    constants: dict[str, int] = {}
    in_enum = False
    for line in text.splitlines():
        code = line.split("#", 1)[0].rstrip()
        if code.startswith("cdef enum"):
            in_enum = True
            continue
        if in_enum and code and not code.startswith((" ", "\t")):
            in_enum = False
        match = re.fullmatch(r"\s+([A-Z][A-Z0-9_]*)\s*=\s*(\S+)", code)
        if in_enum and match:
            constants[match[1]] = int(match[2], 0)
    return constants


def py_constants() -> dict[str, int]:
    return {
        name: value for name, value in vars(layout).items() if name.isupper() and type(value) is int
    }


def test_pxd_and_python_module_hold_the_same_constants():
    pxd = pxd_constants(PXD.read_text())
    assert len(pxd) > 40  # the parser found the enum
    assert pxd == py_constants()


def test_pxd_parser_sees_a_changed_value():
    text = PXD.read_text().replace("    MAGIC_OFFSET = 16", "    MAGIC_OFFSET = 15")
    assert pxd_constants(text) != py_constants()


def _field_offsets(fmt: str) -> list[int]:
    """Byte offset of each field of a big-endian struct format."""
    codes = fmt.lstrip(">")
    return [struct.calcsize(">" + codes[:i]) for i in range(len(codes))]


def test_struct_formats_put_each_field_at_its_offset():
    assert _field_offsets(layout.BATCH_HEADER.format) == [
        layout.BASE_OFFSET_OFFSET,
        layout.LENGTH_OFFSET,
        layout.PARTITION_LEADER_EPOCH_OFFSET,
        layout.MAGIC_OFFSET,
        layout.CRC_OFFSET,
        layout.ATTRIBUTES_OFFSET,
        layout.LAST_OFFSET_DELTA_OFFSET,
        layout.BASE_TIMESTAMP_OFFSET,
        layout.MAX_TIMESTAMP_OFFSET,
        layout.PRODUCER_ID_OFFSET,
        layout.PRODUCER_EPOCH_OFFSET,
        layout.BASE_SEQUENCE_OFFSET,
        layout.RECORDS_COUNT_OFFSET,
    ]
    assert layout.BATCH_HEADER.size == layout.RECORDS_OFFSET == layout.RECORD_BATCH_OVERHEAD
    assert layout.MIN_BATCH_LENGTH == layout.RECORD_BATCH_OVERHEAD - layout.LOG_OVERHEAD
    assert layout.LOG_OVERHEAD == layout.PARTITION_LEADER_EPOCH_OFFSET
    legacy = [
        layout.LEGACY_OFFSET_AT,
        layout.LEGACY_SIZE_AT,
        layout.LEGACY_CRC_AT,
        layout.LEGACY_MAGIC_AT,
        layout.LEGACY_ATTRIBUTES_AT,
        layout.LEGACY_TIMESTAMP_AT,
    ]
    assert _field_offsets(layout.LEGACY_HEADER_V1.format) == legacy
    assert _field_offsets(layout.LEGACY_HEADER_V0.format) == legacy[:-1]
    # The magic byte is where a reader looks before knowing the format.
    assert layout.LEGACY_MAGIC_AT == layout.MAGIC_OFFSET
    assert layout.LEGACY_SIZE_AT == layout.LENGTH_OFFSET
    assert layout.RECORD_OVERHEAD_V0 == layout.LEGACY_HEADER_V0.size - layout.LOG_OVERHEAD + 8
    assert layout.RECORD_OVERHEAD_V1 == layout.LEGACY_HEADER_V1.size - layout.LOG_OVERHEAD + 8
    assert _field_offsets(layout.OFFSET_INDEX_ENTRY.format) == [
        layout.OFFSET_INDEX_RELATIVE_OFFSET_AT,
        layout.OFFSET_INDEX_POSITION_AT,
    ]
    assert layout.OFFSET_INDEX_ENTRY.size == layout.OFFSET_INDEX_ENTRY_SIZE
    assert _field_offsets(layout.TIME_INDEX_ENTRY.format) == [
        layout.TIME_INDEX_TIMESTAMP_AT,
        layout.TIME_INDEX_RELATIVE_OFFSET_AT,
    ]
    assert layout.TIME_INDEX_ENTRY.size == layout.TIME_INDEX_ENTRY_SIZE
    assert struct.calcsize(">i") == layout.INDEX_RELATIVE_OFFSET_WIDTH
    assert struct.calcsize(">q") == layout.INDEX_TIMESTAMP_WIDTH
    assert layout.INDEX_RELATIVE_OFFSET_MAX == 2**31 - 1
    assert _field_offsets(layout.CONTROL_RECORD_KEY.format) == [
        layout.CONTROL_KEY_VERSION_AT,
        layout.CONTROL_KEY_TYPE_AT,
    ]
    assert layout.CONTROL_RECORD_KEY.size == layout.CONTROL_KEY_SIZE
    assert _field_offsets(layout.END_TXN_MARKER_VALUE.format) == [
        layout.END_TXN_MARKER_VERSION_AT,
        layout.END_TXN_MARKER_COORDINATOR_EPOCH_AT,
    ]
    assert layout.END_TXN_MARKER_VALUE.size == layout.END_TXN_MARKER_SIZE


def test_compiled_kernels_agree_with_the_python_layout():
    assert batch_kernel.LOG_OVERHEAD_BYTES == layout.LOG_OVERHEAD
    assert batch_kernel.RECORD_BATCH_OVERHEAD_BYTES == layout.RECORD_BATCH_OVERHEAD
    assert batch_kernel.MAGIC_VALUE_V2 == layout.CURRENT_MAGIC
    # A batch the kernel builds, read through the Python layout.
    builder = RecordBatchBuilder(
        COMPRESSION_GZIP,
        producer_id=7,
        producer_epoch=3,
        base_sequence=11,
        is_transactional=True,
    )
    for i in range(5):
        builder.append(1_000 + i, b"k", b"v")
    data = bytearray(builder.build())
    RecordBatch(data, 0).set_max_timestamp(TIMESTAMP_LOG_APPEND_TIME, 2_000)
    check_batch(data, 0, len(data))
    header = read_header(data, 0)
    kernel = RecordBatch(data, 0)
    assert header.size_in_bytes == len(data) == kernel.size_in_bytes
    assert header.last_offset_delta == 4 == kernel.last_offset - kernel.base_offset
    assert header.max_timestamp == 2_000 == kernel.max_timestamp
    assert header.producer_id == 7 and header.producer_epoch == 3
    assert header.base_sequence == 11 and header.records_count == 5
    assert header.compression == COMPRESSION_GZIP == kernel.compression
    assert header.is_transactional and header.is_log_append_time and not header.is_control
    marker = build_control_batch(CONTROL_TYPE_COMMIT, 7, 3, 42, 2_000)
    control = read_header(marker, 0)
    assert control.is_control and control.attributes & layout.CONTROL_FLAG_MASK
    # The kernel's control record, read with the Python layout.
    assert parse_end_txn_marker(marker) == (CONTROL_TYPE_COMMIT, 42)


def test_legacy_header_reads_the_legacy_layout():
    # A magic 1 message: offset 5, no key, value b"v", LogAppendTime, CRC-32.
    body = struct.pack(">bbqii", 1, layout.LEGACY_TIMESTAMP_TYPE_MASK, 123, -1, 1) + b"v"
    message = struct.pack(">qiI", 5, 4 + len(body), zlib.crc32(body)) + body
    check_batch(message, 0, len(message))
    header = read_legacy_header(message, 0, message[layout.LEGACY_MAGIC_AT])
    assert (header.base_offset, header.magic, header.max_timestamp) == (5, 1, 123)
    assert header.is_log_append_time


# ------------------------------------------------------------ bare numbers
# Values that are layout facts wherever they appear in a reader. 0, 1, 2, 4,
# 6, 8, 32 and 64 have other everyday uses (sizes in KiB, doubling, widths), so
# they are caught only where they act as layout: added to a position
# (``position + 8``), as an entry stride (``slot * 8``), or compared with a
# magic byte (``magic == 2``).
_EVERYDAY = {0, 1, 2, 4, 6, 8, 32, 64}
_LAYOUT_VALUES = set(py_constants().values()) | {2**31 - 1}
_DISTINCTIVE = _LAYOUT_VALUES - _EVERYDAY
_OFFSETS = _LAYOUT_VALUES - {0, 1, 2}
_STRIDES = {layout.OFFSET_INDEX_ENTRY_SIZE, layout.TIME_INDEX_ENTRY_SIZE}


def bare_layout_numbers(source: str) -> list[str]:
    """Where a Python reader spells a layout fact as a number."""
    found = []
    tree = ast.parse(source)

    def literal(node: ast.AST) -> int | None:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        return None

    for node in ast.walk(tree):
        value = literal(node)
        if value is not None and value in _DISTINCTIVE:
            found.append(f"line {node.lineno}: {value}")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
            operands = [literal(node.left), literal(node.right)]
            suspect = _OFFSETS if isinstance(node.op, (ast.Add, ast.Sub)) else _STRIDES
            if None in operands and suspect & set(operands):  # arithmetic with a variable
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Compare) and "magic" in ast.unparse(node).lower():
            for value in map(literal, [node.left, *node.comparators]):
                if value in _LAYOUT_VALUES - {0, 1}:
                    found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def _cython_code(text: str) -> str:
    """Cython source without comments and string literals (line numbers kept)."""

    def blank(match: re.Match[str]) -> str:
        return "\n" * match[0].count("\n")

    text = re.sub(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'', blank, text)
    text = re.sub(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', "", text)
    return re.sub(r"#[^\n]*", "", text)


# In Cython, byte and varint shifts (7, 16, 24, ...) are everyday too; entry
# sizes show up as ``* 8`` / ``* 12`` strides.
_CYTHON_DISTINCTIVE = _DISTINCTIVE - {7, 16}
_CYTHON_BARE = re.compile(
    r"\b(?:0x7fffffff|2147483647|"
    + "|".join(str(v) for v in sorted(_CYTHON_DISTINCTIVE - {2**31 - 1}))
    + r")\b|(?<![*/])\*\s*(?:8|12)\b",
    re.IGNORECASE,
)


def bare_cython_numbers(text: str) -> list[str]:
    found = []
    for lineno, line in enumerate(_cython_code(text).splitlines(), 1):
        if not re.match(r"\s*(cdef\s+)?enum\b|\s+[A-Z][A-Z0-9_]* = ", line):
            found += [f"line {lineno}: {line.strip()}" for _ in _CYTHON_BARE.finditer(line)]
    return found


@pytest.mark.parametrize("path", PYTHON_READERS)
def test_python_readers_take_layouts_from_their_home(path):
    assert bare_layout_numbers((ROOT / path).read_text()) == []


@pytest.mark.parametrize("path", CYTHON_READERS)
def test_kernels_take_layouts_from_their_home(path):
    assert bare_cython_numbers((ROOT / path).read_text()) == []


@pytest.mark.parametrize(
    "line",
    [
        "x = buf[offset + 16]",
        "delta = unpack(buf, position + 23)",
        "n = slot * 8",
        "ok = header.magic == 2",
        "limit = 0x7FFFFFFF",
        "LOG_OVERHEAD = 12",
    ],
)
def test_the_python_check_catches_a_bare_number(line):
    assert bare_layout_numbers(line) != []


@pytest.mark.parametrize(
    "line",
    [
        "chunk = 8 * 1024",
        "x = run[2]",
        "n = len(parts) >= 2",
        "m = 2 * count",
        "least = max(n, 4 * size)",
    ],
)
def test_the_python_check_allows_everyday_numbers(line):
    assert bare_layout_numbers(line) == []


@pytest.mark.parametrize(
    "line",
    [
        "q = index + entries * 12",
        "if relative > 0x7FFFFFFF:",
        "p = base + 61",
        "crc = load_be32(p + 17)",
    ],
)
def test_the_cython_check_catches_a_bare_number(line):
    assert bare_cython_numbers(line) != []


def test_the_cython_check_ignores_comments_strings_and_shifts():
    text = '# bytes 21 .. end\n"""the 61-byte header"""\nx = (p[0] << 16) | p[1]\ny = a // 8\n'
    assert bare_cython_numbers(text) == []
