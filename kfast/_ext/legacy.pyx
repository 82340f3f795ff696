# cython: freethreading_compatible = True
"""Legacy message sets (magic 0 and 1): decode, build, and convert to and
from v2 record batches (grammar in legacy.pxd).

The broker meets these formats at two edges: Produce v0-v2 requests carry
message sets, which are up-converted to one v2 batch before the log sees
them (Kafka's LogValidator), and Fetch v0-v3 responses must carry message
sets, which are down-converted from the log's v2 batches (Kafka's
RecordsUtil.downConvert). Neither is a hot path for modern clients, so the
per-message work here creates Python objects; every read is still checked
against the end of its buffer before it happens.
"""
from cpython.buffer cimport PyBUF_SIMPLE, PyObject_GetBuffer, PyBuffer_Release
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t, INT32_MAX

from kfast._ext.layout cimport (
    LEGACY_ATTRIBUTES_AT, LEGACY_CODEC_MASK, LEGACY_CRC_AT, LEGACY_MAGIC_AT, LEGACY_SIZE_AT,
    LEGACY_TIMESTAMP_AT, LEGACY_TIMESTAMP_TYPE_MASK, LOG_OVERHEAD, RECORD_OVERHEAD_V0,
    RECORD_OVERHEAD_V1,
)

from collections import namedtuple
import struct
import zlib

from kfast._ext.batch import (
    NO_TIMESTAMP,
    RecordBatchBuilder,
    TIMESTAMP_CREATE_TIME as CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME as LOG_APPEND_TIME,
)
from kfast._ext.columnar import decode_columnar
from kfast._ext.layout import LEGACY_HEADER_V0, LEGACY_HEADER_V1
from kfast.compression import (
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_ZSTD,
    DEFAULT_MAX_OUTPUT,
    compress,
    decompress,
    xxh32,
)
from kfast.protocol.errors import CorruptRecordException, UnsupportedCompressionTypeException

#: Timestamp type of a magic 0 message, as Kafka's TimestampType.NO_TIMESTAMP_TYPE
#: (its timestamp is NO_TIMESTAMP).
NO_TIMESTAMP_TYPE = -1

LegacyRecord = namedtuple("LegacyRecord", ["offset", "timestamp", "timestamp_type", "key",
                                           "value", "magic"])
LegacyRecord.__doc__ = """One message of a legacy message set, after unwrapping.

timestamp is NO_TIMESTAMP (-1) and timestamp_type NO_TIMESTAMP_TYPE (-1) for
magic 0; key and value are bytes or None."""

_entry_header_v0 = LEGACY_HEADER_V0
_entry_header_v1 = LEGACY_HEADER_V1
_int32 = struct.Struct(">i")
_crc_field = struct.Struct(">I")


cdef inline int32_t _be32(const uint8_t* p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16)
                     | (<uint32_t>p[2] << 8) | <uint32_t>p[3])


cdef inline int64_t _be64(const uint8_t* p) noexcept nogil:
    return <int64_t>((<uint64_t><uint32_t>_be32(p) << 32) | <uint32_t>_be32(p + 4))


# ---------------------------------------------------------------- reading
cdef struct Message:
    int64_t offset
    int magic
    int attributes
    int64_t timestamp              # NO_TIMESTAMP for magic 0
    Py_ssize_t key_at              # position in the buffer; length -1 = null
    int32_t key_length
    Py_ssize_t value_at
    int32_t value_length
    Py_ssize_t end                 # one past the entry


cdef int _parse_entry(const uint8_t* base, Py_ssize_t n, Py_ssize_t pos, object view,
                      Message* m) except -1:
    """Parse the entry at pos: 1 if whole, 0 if the buffer ends inside it
    (a partial entry), CorruptRecordException if it is invalid."""
    cdef const uint8_t* p = base + pos
    cdef Py_ssize_t remaining = n - pos
    cdef int32_t size, length
    cdef Py_ssize_t at, end
    if remaining < LOG_OVERHEAD:
        return 0
    size = _be32(p + LEGACY_SIZE_AT)
    # Checked before knowing whether the entry is whole, as Kafka's
    # ByteBufferLogInputStream does: a size this small is never valid.
    if size < RECORD_OVERHEAD_V0:
        raise CorruptRecordException(
            f"Message at byte {pos} has size {size}, below the minimum {RECORD_OVERHEAD_V0}")
    if size > remaining - LOG_OVERHEAD:
        return 0
    end = pos + LOG_OVERHEAD + size
    m.offset = _be64(p)
    m.magic = <int8_t>p[LEGACY_MAGIC_AT]
    m.attributes = p[LEGACY_ATTRIBUTES_AT]
    m.end = end
    if m.magic == 0:
        m.timestamp = NO_TIMESTAMP
        at = pos + LEGACY_TIMESTAMP_AT
    elif m.magic == 1:
        if size < RECORD_OVERHEAD_V1:
            raise CorruptRecordException(
                f"Magic 1 message at byte {pos} has size {size}, below the minimum {RECORD_OVERHEAD_V1}")
        m.timestamp = _be64(p + LEGACY_TIMESTAMP_AT)
        at = pos + LEGACY_TIMESTAMP_AT + 8
    else:
        raise CorruptRecordException(
            f"Message at byte {pos} has magic {m.magic}; a message set holds magic 0 or 1")
    stored_crc = <uint32_t>_be32(p + LEGACY_CRC_AT)
    if zlib.crc32(view[pos + LEGACY_MAGIC_AT:end]) != stored_crc:
        raise CorruptRecordException(f"Message at byte {pos} (offset {m.offset}) fails its CRC check")
    # key: length, bytes; the overhead checks above leave room for both lengths.
    length = _be32(base + at)
    at += 4
    if length < -1 or length > end - at - 4:
        raise CorruptRecordException(f"Message at byte {pos}: key length {length} is invalid")
    m.key_at = at
    m.key_length = length
    if length > 0:
        at += length
    length = _be32(base + at)
    at += 4
    if length < -1 or length > end - at:
        raise CorruptRecordException(f"Message at byte {pos}: value length {length} is invalid")
    m.value_at = at
    m.value_length = length
    if length > 0:
        at += length
    if at != end:
        raise CorruptRecordException(
            f"Message at byte {pos}: {end - at} bytes follow the value inside the message")
    return 1


cdef inline object _bytes_or_none(object view, Py_ssize_t at, int32_t length):
    if length < 0:
        return None
    return bytes(view[at:at + length])


cdef int _decode_into(object buffer, list out, Py_ssize_t max_output) except -1:
    """Append the LegacyRecords of a message set to out; returns the codec
    of the last compressed wrapper (0 if none)."""
    cdef Py_buffer pybuf
    cdef Message m
    cdef Py_ssize_t pos = 0
    cdef int codec, last_codec = 0
    PyObject_GetBuffer(buffer, &pybuf, PyBUF_SIMPLE)
    try:
        view = memoryview(buffer).cast("B")
        while _parse_entry(<const uint8_t*>pybuf.buf, pybuf.len, pos, view, &m):
            codec = m.attributes & LEGACY_CODEC_MASK
            if codec == COMPRESSION_NONE:
                if m.magic == 0:
                    timestamp_type = NO_TIMESTAMP_TYPE
                else:
                    timestamp_type = LOG_APPEND_TIME if m.attributes & LEGACY_TIMESTAMP_TYPE_MASK else CREATE_TIME
                out.append(LegacyRecord(m.offset, m.timestamp, timestamp_type,
                                        _bytes_or_none(view, m.key_at, m.key_length),
                                        _bytes_or_none(view, m.value_at, m.value_length), m.magic))
            else:
                _unwrap(view, &m, out, max_output)
                last_codec = codec
            pos = m.end
    finally:
        PyBuffer_Release(&pybuf)
    return last_codec


cdef int _unwrap(object view, Message* wrapper, list out, Py_ssize_t max_output) except -1:
    """Decode a compressed wrapper's inner message set into out."""
    cdef int codec = wrapper.attributes & LEGACY_CODEC_MASK
    cdef Py_buffer pybuf
    cdef Message m
    cdef Py_ssize_t pos = 0, first = len(out)
    cdef int64_t absolute_base = -1
    if codec > LEGACY_MAX_CODEC:
        raise UnsupportedCompressionTypeException(
            f"Compression codec {codec} is not valid for magic {wrapper.magic} messages")
    if wrapper.value_length < 0:
        raise CorruptRecordException(
            f"Compressed message at offset {wrapper.offset} has a null value")
    # Kafka < 0.10 wrote magic 0 LZ4 frames with a header checksum over the
    # frame magic too; Kafka reads them without checking it, and so do we.
    payload = decompress(codec, view[wrapper.value_at:wrapper.value_at + wrapper.value_length],
                         max_output=max_output,
                         lz4_broken_header_checksum=wrapper.magic == 0 and codec == COMPRESSION_LZ4)
    PyObject_GetBuffer(payload, &pybuf, PyBUF_SIMPLE)
    try:
        inner_view = memoryview(payload).cast("B")
        inner = []
        while pos < pybuf.len:
            if not _parse_entry(<const uint8_t*>pybuf.buf, pybuf.len, pos, inner_view, &m):
                raise CorruptRecordException(
                    f"Compressed message at offset {wrapper.offset}: inner message set is truncated")
            if m.magic != wrapper.magic:
                raise CorruptRecordException(
                    f"Compressed message at offset {wrapper.offset}: inner magic {m.magic} "
                    f"differs from the wrapper's {wrapper.magic}")
            if m.attributes & LEGACY_CODEC_MASK:
                raise CorruptRecordException(
                    f"Compressed message at offset {wrapper.offset} nests another compressed message")
            inner.append((m.offset, m.timestamp,
                          _bytes_or_none(inner_view, m.key_at, m.key_length),
                          _bytes_or_none(inner_view, m.value_at, m.value_length)))
            pos = m.end
    finally:
        PyBuffer_Release(&pybuf)
    if not inner:
        raise CorruptRecordException(
            f"Compressed message at offset {wrapper.offset} has no inner messages")
    if wrapper.magic == 0:
        for offset, _, key, value in inner:
            out.append(LegacyRecord(offset, NO_TIMESTAMP, NO_TIMESTAMP_TYPE, key, value, 0))
        return 0
    # Magic 1: inner offsets are relative; the wrapper carries the last
    # absolute one. A producer's wrapper says 0 (the broker assigns offsets),
    # leaving a negative base: then the relative offsets stand, as in Kafka.
    absolute_base = wrapper.offset - inner[len(inner) - 1][0]
    log_append_time = bool(wrapper.attributes & LEGACY_TIMESTAMP_TYPE_MASK)
    timestamp_type = LOG_APPEND_TIME if log_append_time else CREATE_TIME
    for offset, timestamp, key, value in inner:
        out.append(LegacyRecord(offset + absolute_base if absolute_base >= 0 else offset,
                                wrapper.timestamp if log_append_time else timestamp,
                                timestamp_type, key, value, 1))
    return 0


def decode_message_set(buffer, *, Py_ssize_t max_decompressed_bytes=DEFAULT_MAX_OUTPUT):
    """Every message of a legacy message set as a list of LegacyRecord,
    compressed wrappers unwrapped. A trailing partial entry is ignored;
    anything invalid raises CorruptRecordException."""
    out = []
    _decode_into(buffer, out, max_decompressed_bytes)
    return out


# ---------------------------------------------------------------- writing
cdef void _append_message(bytearray out, int64_t offset, int magic, int attributes,
                          int64_t timestamp, key, value) except *:
    cdef Py_ssize_t start = len(out)
    cdef Py_ssize_t key_length = -1 if key is None else len(key)
    cdef Py_ssize_t value_length = -1 if value is None else len(value)
    cdef Py_ssize_t size = ((RECORD_OVERHEAD_V0 if magic == 0 else RECORD_OVERHEAD_V1)
                            + max(key_length, 0) + max(value_length, 0))
    if size > INT32_MAX:
        raise ValueError("message larger than 2 GiB")
    if magic == 0:
        out += _entry_header_v0.pack(offset, size, 0, 0, attributes)
    else:
        out += _entry_header_v1.pack(offset, size, 0, 1, attributes, timestamp)
    out += _int32.pack(key_length)
    if key_length > 0:
        out += key
    out += _int32.pack(value_length)
    if value_length > 0:
        out += value
    _crc_field.pack_into(out, start + LEGACY_CRC_AT,
                         zlib.crc32(memoryview(out)[start + LEGACY_MAGIC_AT:]))


def _lz4_with_broken_header_checksum(frame) -> bytes:
    # What Kafka < 0.10 (and Kafka itself, for magic 0) writes: the frame
    # header checksum computed from the frame magic on, not from FLG.
    fixed = bytearray(frame)
    flg = fixed[4]
    hc_at = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    fixed[hc_at] = (xxh32(bytes(fixed[:hc_at])) >> 8) & 0xFF
    return bytes(fixed)


def build_message_set(int magic, records, int compression=COMPRESSION_NONE, *,
                      int timestamp_type=CREATE_TIME, int64_t log_append_time=NO_TIMESTAMP):
    """A message set of ``records`` ((offset, timestamp, key, value) tuples),
    written as Kafka's MemoryRecordsBuilder writes magic 0/1.

    With a codec, the records go into one wrapper message: magic 1 inner
    offsets relative to the first record, wrapper offset = the last offset,
    wrapper timestamp = log_append_time for LogAppendTime else the largest
    timestamp; magic 0 inner offsets absolute. Magic 0 ignores timestamps;
    LogAppendTime (magic 1) replaces every timestamp with log_append_time.
    """
    cdef int attributes = 0
    cdef int64_t max_timestamp = NO_TIMESTAMP
    if magic not in (0, 1):
        raise ValueError(f"magic must be 0 or 1, not {magic}")
    if compression < 0 or compression > LEGACY_MAX_CODEC:
        raise UnsupportedCompressionTypeException(
            f"Compression codec {compression} is not valid for magic {magic} messages")
    if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
        raise ValueError(f"timestamp_type must be 0 or 1, not {timestamp_type}")
    if magic == 1 and timestamp_type == LOG_APPEND_TIME:
        attributes = LEGACY_TIMESTAMP_TYPE_MASK
    records = list(records)
    out = bytearray()
    if not records:
        return b""
    base_offset = records[0][0]
    for offset, timestamp, key, value in records:
        if magic == 0:
            timestamp = NO_TIMESTAMP
        elif timestamp_type == LOG_APPEND_TIME:
            timestamp = log_append_time
        if timestamp > max_timestamp:
            max_timestamp = timestamp
        if compression != COMPRESSION_NONE and magic == 1:
            offset -= base_offset
        _append_message(out, offset, magic, attributes, timestamp, key, value)
    if compression == COMPRESSION_NONE:
        return bytes(out)
    payload = compress(compression, out)
    if compression == COMPRESSION_LZ4 and magic == 0:
        payload = _lz4_with_broken_header_checksum(payload)
    wrapper = bytearray()
    _append_message(wrapper, records[len(records) - 1][0], magic, attributes | compression,
                    log_append_time if timestamp_type == LOG_APPEND_TIME else max_timestamp,
                    None, payload)
    return bytes(wrapper)


# ---------------------------------------------------------------- conversion
def convert_message_set_to_v2(buffer, *, compression=None,
                              Py_ssize_t max_decompressed_bytes=DEFAULT_MAX_OUTPUT):
    """Up-convert a magic 0/1 message set to one v2 batch, as Kafka's
    LogValidator does for Produce v0-v2: offsets relative from 0 (the broker
    assigns the real ones), magic 0 timestamps NO_TIMESTAMP (-1), no
    producer id, and the codec of the message set's (last) compressed
    wrapper unless ``compression`` names one. A LogAppendTime wrapper makes a
    LogAppendTime batch. An empty message set gives b""."""
    records = []
    source_codec = _decode_into(buffer, records, max_decompressed_bytes)
    if not records:
        return b""
    codec = source_codec if compression is None else compression
    timestamp_type = (LOG_APPEND_TIME if all(r.timestamp_type == LOG_APPEND_TIME for r in records)
                      else CREATE_TIME)
    builder = RecordBatchBuilder(codec, base_offset=0, timestamp_type=timestamp_type)
    for i, record in enumerate(records):
        builder.append(record.timestamp, record.key, record.value, offset=i)
    return builder.build()


def convert_v2_to_message_set(buffer, int magic, *, int64_t first_offset=-1,
                              Py_ssize_t max_decompressed_bytes=DEFAULT_MAX_OUTPUT):
    """Down-convert v2 batches to a magic 0/1 message set, as Kafka's
    RecordsUtil.downConvert does for Fetch v0-v3: control batches dropped,
    headers dropped, one message set per batch keeping its codec and
    timestamp type (LogAppendTime wrapper timestamp = the batch's
    maxTimestamp), records of uncompressed batches below first_offset
    dropped. A zstd batch raises UnsupportedCompressionTypeException (no
    legacy format can carry it). A trailing partial batch is ignored."""
    if magic not in (0, 1):
        raise ValueError(f"magic must be 0 or 1, not {magic}")
    columns = decode_columnar(buffer, max_decompressed_bytes=max_decompressed_bytes)
    offsets = columns.offsets
    timestamps = columns.timestamps
    parts = []
    for batch in columns.batches:
        if batch.first_record < 0:
            continue                                    # control batch
        if batch.compression == COMPRESSION_ZSTD:
            raise UnsupportedCompressionTypeException(
                "Down-conversion of zstandard-compressed batches is not supported")
        records = []
        for i in range(batch.first_record, batch.first_record + batch.records_count):
            if batch.compression == COMPRESSION_NONE and offsets[i] < first_offset:
                continue
            records.append((offsets[i], timestamps[i], columns.key(i), columns.value(i)))
        if records:
            parts.append(build_message_set(
                magic, records, batch.compression, timestamp_type=batch.timestamp_type,
                log_append_time=batch.max_timestamp if batch.timestamp_type == LOG_APPEND_TIME
                else NO_TIMESTAMP))
    return b"".join(parts)
