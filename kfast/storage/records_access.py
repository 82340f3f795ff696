"""Record-level reads storage needs: timestamp lookup and dump-log.

Storage works on batch headers; only ListOffsets-by-timestamp and the
dump-log tool look inside a batch. Records (FORMATS.md):

    records := record*            (compressed as a whole per the codec bits)
    record  := length varint, attributes int8, timestampDelta varlong,
               offsetDelta varint, keyLength varint, key, valueLength varint,
               value, headerCount varint,
               (headerKeyLength varint, headerKey, headerValueLength varint,
                headerValue)*
    length -1 = null

This walker checks every length against the end of the buffer.
TODO(codec): use kfast.records.RecordBatch iteration once it is committed, so
the record grammar has one implementation.
"""
from __future__ import annotations

from typing import Iterator, NamedTuple

from kfast._ext.varint import decode_varint, decode_varlong
from kfast.compression import decompress
from kfast.protocol.errors import CorruptRecordException
from kfast.storage.file_records import RECORD_BATCH_OVERHEAD, read_header


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list


def _bytes_field(buf, pos: int, end: int) -> tuple[bytes | None, int]:
    length, pos = decode_varint(buf, pos)
    if length < 0:
        return None, pos
    if pos + length > end:
        raise CorruptRecordException("record field runs past the end of the record")
    return bytes(buf[pos:pos + length]), pos + length


def iter_records(batch_view) -> Iterator[Record]:
    """Records of one whole v2 batch (``batch_view`` starts at its baseOffset)."""
    header = read_header(batch_view, 0)
    body = batch_view[RECORD_BATCH_OVERHEAD:header.size_in_bytes]
    if header.compression:
        body = decompress(header.compression, bytes(body))
    log_append_time = header.is_log_append_time
    pos = 0
    total = len(body)
    for _ in range(header.records_count):
        length, pos = decode_varint(body, pos)
        end = pos + length
        if length < 0 or end > total:
            raise CorruptRecordException("record length runs past the end of the batch")
        pos += 1  # attributes (unused in v2)
        ts_delta, pos = decode_varlong(body, pos)
        offset_delta, pos = decode_varint(body, pos)
        key, pos = _bytes_field(body, pos, end)
        value, pos = _bytes_field(body, pos, end)
        count, pos = decode_varint(body, pos)
        headers = []
        for _ in range(max(count, 0)):
            hkey, pos = _bytes_field(body, pos, end)
            hvalue, pos = _bytes_field(body, pos, end)
            headers.append(((hkey or b"").decode("utf-8", "replace"), hvalue))
        if pos > end:
            raise CorruptRecordException("record fields run past its length")
        pos = end
        timestamp = header.max_timestamp if log_append_time else header.base_timestamp + ts_delta
        yield Record(header.base_offset + offset_delta, timestamp, key, value, headers)


def first_record_at_or_after(batch_view, timestamp: int, starting_offset: int):
    """(timestamp, offset) of the first record of the batch with
    timestamp >= ``timestamp`` and offset >= ``starting_offset``, or None."""
    for record in iter_records(batch_view):
        if record.timestamp >= timestamp and record.offset >= starting_offset:
            return record.timestamp, record.offset
    return None
