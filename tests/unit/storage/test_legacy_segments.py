"""Segments written before Kafka 0.11 (magic 0/1 messages) are read, never truncated."""

import io
import os
import struct

from kfast.config import LogConfig
from kfast.records import build_message_set
from kfast.storage.log import Log

from .batches import make_batch, record_values


def build_dir(tmp_path):
    """A partition whose first segment is magic 0/1 (plain and gzip-wrapped)
    and whose second segment is v2, as an upgraded Kafka leaves it."""
    d = tmp_path / "old-0"
    d.mkdir()
    legacy = (
        build_message_set(0, [(0, -1, b"a", b"v0-0"), (1, -1, None, b"v0-1")])
        + build_message_set(1, [(2, 1000, b"b", b"v1-2"), (3, 1001, b"c", b"v1-3")])
        + build_message_set(1, [(4, 1002, b"d", b"zip-4"), (5, 1003, b"e", b"zip-5")], 1)
    )
    (d / "00000000000000000000.log").write_bytes(legacy)
    v2 = bytearray(make_batch(2, timestamp=2000))
    struct.pack_into(">q", v2, 0, 6)
    (d / "00000000000000000006.log").write_bytes(bytes(v2))
    return d


def legacy_values(data: bytes):
    from kfast.storage.records_access import iter_records

    out = []
    pos = 0
    while pos + 12 <= len(data):
        size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
        if pos + size > len(data):
            break
        out.extend((r.offset, r.value) for r in iter_records(memoryview(data)[pos : pos + size]))
        pos += size
    return out


def test_legacy_segment_recovered_and_read(tmp_path):
    d = build_dir(tmp_path)
    size = os.path.getsize(d / "00000000000000000000.log")
    for clean in (False, True):
        log = Log(str(d), LogConfig({"index.interval.bytes": "1"}), had_clean_shutdown=clean)
        assert os.path.getsize(d / "00000000000000000000.log") == size  # nothing truncated
        assert log.log_end_offset == 8
        first = log.read(0, 1 << 20).records.read()
        assert legacy_values(first) == [
            (0, b"v0-0"),
            (1, b"v0-1"),
            (2, b"v1-2"),
            (3, b"v1-3"),
            (4, b"zip-4"),
            (5, b"zip-5"),
        ]
        # An offset inside the compressed wrapper finds the wrapper.
        assert legacy_values(log.read(5, 1).records.read())[-1] == (5, b"zip-5")
        assert log.fetch_offset_by_timestamp(1002) == (1002, 4)
        assert [o for o, _ in record_values(log.read(6, 1 << 20).records.read())] == [6, 7]
        log.close()


def test_corrupt_legacy_message_truncates_there(tmp_path):
    d = build_dir(tmp_path)
    path = d / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF  # inside the gzip wrapper's value
    path.write_bytes(bytes(data))
    (d / "00000000000000000006.log").unlink()
    log = Log(str(d), LogConfig(), had_clean_shutdown=False)
    assert log.log_end_offset == 4
    log.close()


def test_dump_log_prints_legacy_entries(tmp_path):
    from kfast.cli import build_parser
    from kfast.tools.dump_log import run

    d = build_dir(tmp_path)
    args = build_parser().parse_args(
        ["dump-log", "--print-data-log", str(d / "00000000000000000000.log")]
    )
    out = io.StringIO()
    assert run(args, out, io.StringIO()) == 0
    lines = out.getvalue().splitlines()
    assert lines[2].startswith("offset: 0 position: 0 NoTimestampType: -1 size: ")
    assert lines[2].endswith("magic: 0 compresscodec: none crc: " + lines[2].split("crc: ")[1])
    assert "isvalid: true" in lines[2]
    assert (
        lines[3] == "| offset: 0 NoTimestampType: -1 keySize: 1 valueSize: 4 key: a payload: v0-0"
    )
    assert any(
        line.startswith("offset: 5 position: ") and "magic: 1 compresscodec: gzip" in line
        for line in lines
    )
    assert "| offset: 5 CreateTime: 1003 keySize: 1 valueSize: 5 key: e payload: zip-5" in lines
