# cython: freethreading_compatible = True
"""Decode v2 record batches straight into columns.

Grammar (Kafka's DefaultRecordBatch / DefaultRecord; byte positions in batch.pxd)::

    batches      := batch* [partial batch]      a fetch may end mid-batch
    batch        := baseOffset int64, batchLength int32 (bytes after it),
                    partitionLeaderEpoch int32, magic int8 (= 2),
                    crc uint32 (CRC-32C of attributes..end),
                    attributes int16 (0-2 codec, 3 timestamp type,
                                      4 transactional, 5 control),
                    lastOffsetDelta int32, baseTimestamp int64,
                    maxTimestamp int64, producerId int64, producerEpoch int16,
                    baseSequence int32, recordsCount int32,
                    records  (compressed as one payload when codec != 0)
    record       := length varint, attributes int8, timestampDelta varlong,
                    offsetDelta varint, keyLength varint, key,
                    valueLength varint, value, headerCount varint, header*
    header       := keyLength varint (>= 0), key (UTF-8),
                    valueLength varint (-1 = null), value

Output: one entry per record in flat arrays (offset, timestamp in ms,
timestamp type, key/value position and length in ONE contiguous buffer
``data``, length -1 = null), plus, with ``include_headers``, per-record header
ranges into flat header arrays. For uncompressed input ``data`` is the input
itself (zero copy); as soon as one batch is compressed, ``data`` is an owned
buffer holding every included batch's (decompressed) records section.

Two passes: the first walks batch headers (CRC, plausibility of
recordsCount against the bytes there, decompression), the second decodes
every record in C without the GIL, checking every read against the end of
its record and every record against the end of its batch.
"""
cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBUF_FORMAT, PyBUF_ND, PyBUF_STRIDES
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, INT32_MAX
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy, memset

from kfast._ext.varint cimport read_varint_fast, read_varlong_fast, VARINT_OK
from kfast._ext.crc32c cimport crc32c_update

from collections import namedtuple

from kfast._ext.batch import LegacyRecordFormatError
from kfast.compression import DEFAULT_MAX_OUTPUT, decompress
from kfast.protocol.errors import CorruptRecordException


# Batch layout: kfast/_ext/layout.pxd (the one definition of the v2 format).
from kfast._ext.batch cimport load_be16, load_be32, load_be64
from kfast._ext.layout cimport (
    ATTRIBUTES_OFFSET, BASE_OFFSET_OFFSET, BASE_SEQUENCE_OFFSET, BASE_TIMESTAMP_OFFSET,
    COMPRESSION_CODEC_MASK, CONTROL_FLAG_MASK, CRC_OFFSET, CURRENT_MAGIC,
    LAST_OFFSET_DELTA_OFFSET, LENGTH_OFFSET, LOG_OVERHEAD, MAGIC_OFFSET, MAX_TIMESTAMP_OFFSET,
    MIN_BATCH_LENGTH, PARTITION_LEADER_EPOCH_OFFSET, PRODUCER_EPOCH_OFFSET, PRODUCER_ID_OFFSET,
    RECORDS_COUNT_OFFSET, RECORDS_OFFSET, TIMESTAMP_TYPE_MASK, TRANSACTIONAL_FLAG_MASK,
)

cdef enum:
    MIN_RECORD_SIZE = 7         # seven one-byte varints/fields, empty key and value
    MIN_RECORD_BODY = 6         # a record after its length varint
    MIN_HEADER_SIZE = 2         # key length 0 + value length

# Errors the nogil record pass reports (turned into CorruptRecordException).
cdef enum:
    DECODE_OK = 0
    ERR_LENGTH = 1
    ERR_FIELD = 2
    ERR_KEY = 3
    ERR_VALUE = 4
    ERR_HEADER_COUNT = 5
    ERR_HEADER_KEY = 6
    ERR_HEADER_VALUE = 7
    ERR_RECORD_SIZE = 8
    ERR_TRAILING = 9
    ERR_NOMEM = 10

_ERROR_TEXT = {
    ERR_LENGTH: "record length is truncated, negative or beyond the batch",
    ERR_FIELD: "record attributes/timestampDelta/offsetDelta truncated or overlong",
    ERR_KEY: "record key length invalid or beyond the record",
    ERR_VALUE: "record value length invalid or beyond the record",
    ERR_HEADER_COUNT: "record header count invalid",
    ERR_HEADER_KEY: "header key length invalid or beyond the record",
    ERR_HEADER_VALUE: "header value length invalid or beyond the record",
    ERR_RECORD_SIZE: "record fields do not add up to its length",
    ERR_TRAILING: "bytes remain after recordsCount records",
}


# ---------------------------------------------------------------- Column
@cython.final
cdef class Column:
    """A read-only 1-D array (int64 'q', int32 'i' or bytes 'B').

    Supports the buffer protocol (``memoryview(col)``, ``pyarrow.py_buffer``),
    ``len``, indexing and ``tolist``.
    """

    def __cinit__(self):
        self.ptr = NULL
        self.length = 0

    def __dealloc__(self):
        free(self.ptr)

    def __len__(self):
        return self.length

    @property
    def itemsize(self):
        return self.itemsize

    @property
    def format(self):
        return self.format.decode()

    def __getitem__(self, index):
        if isinstance(index, slice):
            return memoryview(self)[index]
        cdef Py_ssize_t i = index
        if i < 0:
            i += self.length
        if i < 0 or i >= self.length:
            raise IndexError("Column index out of range")
        if self.itemsize == 8:
            return (<int64_t*>self.ptr)[i]
        if self.itemsize == 4:
            return (<int32_t*>self.ptr)[i]
        return (<uint8_t*>self.ptr)[i]

    def tolist(self):
        return memoryview(self).tolist()

    def __repr__(self):
        return f"Column({self.format.decode()!r}, {self.length})"

    def __getbuffer__(self, Py_buffer* buf, int flags):
        if flags & PyBUF_WRITABLE:
            raise BufferError("Column is read-only")
        buf.buf = self.ptr
        buf.obj = self
        buf.len = self.length * self.itemsize
        buf.readonly = 1
        buf.itemsize = self.itemsize
        buf.format = self.format if flags & PyBUF_FORMAT else NULL
        buf.ndim = 1
        buf.shape = self.shape if flags & PyBUF_ND else NULL
        buf.strides = self.strides if (flags & PyBUF_STRIDES) == PyBUF_STRIDES else NULL
        buf.suboffsets = NULL
        buf.internal = NULL

    def __releasebuffer__(self, Py_buffer* buf):
        pass


cdef Column new_column(Py_ssize_t length, Py_ssize_t itemsize, char* format):
    cdef Column col = Column.__new__(Column)
    # malloc(0) may return NULL; an empty column still needs a valid pointer.
    col.ptr = <char*>malloc(length * itemsize if length > 0 else 1)
    if col.ptr == NULL:
        raise MemoryError()
    col.length = length
    col.itemsize = itemsize
    col.format = format
    col.shape[0] = length
    col.strides[0] = itemsize
    return col


# ---------------------------------------------------------------- record pass
ctypedef struct RecordColumns:
    int64_t* offsets
    int64_t* timestamps
    int32_t* timestamp_types
    int64_t* key_offsets
    int32_t* key_lengths
    int64_t* value_offsets
    int32_t* value_lengths
    # Headers (NULL unless requested). header_offsets has num_records + 1
    # entries; the flat arrays grow as headers are found.
    int32_t* header_offsets
    int64_t* header_key_offsets
    int32_t* header_key_lengths
    int64_t* header_value_offsets
    int32_t* header_value_lengths
    Py_ssize_t header_count
    Py_ssize_t header_capacity
    int64_t key_bytes
    int64_t value_bytes
    int64_t header_key_bytes
    int64_t header_value_bytes
    Py_ssize_t key_nulls
    Py_ssize_t value_nulls
    Py_ssize_t header_value_nulls
    Py_ssize_t failed_record       # index within its batch of the bad record


cdef int _grow_headers(RecordColumns* out) noexcept nogil:
    cdef Py_ssize_t capacity = out.header_capacity * 2 if out.header_capacity else 64
    cdef void* p
    p = realloc(out.header_key_offsets, capacity * sizeof(int64_t))
    if p == NULL:
        return ERR_NOMEM
    out.header_key_offsets = <int64_t*>p
    p = realloc(out.header_key_lengths, capacity * sizeof(int32_t))
    if p == NULL:
        return ERR_NOMEM
    out.header_key_lengths = <int32_t*>p
    p = realloc(out.header_value_offsets, capacity * sizeof(int64_t))
    if p == NULL:
        return ERR_NOMEM
    out.header_value_offsets = <int64_t*>p
    p = realloc(out.header_value_lengths, capacity * sizeof(int32_t))
    if p == NULL:
        return ERR_NOMEM
    out.header_value_lengths = <int32_t*>p
    out.header_capacity = capacity
    return DECODE_OK


cdef int _decode_batch_records(const uint8_t* data, const BatchEntry* batch,
                               RecordColumns* out, bint with_headers) noexcept nogil:
    """Decode one batch's records section into the columns at batch.first_record."""
    # Everything the loop touches lives in locals: stores through the int64
    # column pointers could otherwise alias fields of *out and force reloads.
    cdef const uint8_t* p = data + batch.records_start
    cdef const uint8_t* end = data + batch.records_end
    cdef const uint8_t* record_end
    cdef int64_t* offsets = out.offsets + batch.first_record
    cdef int64_t* timestamps = out.timestamps + batch.first_record
    cdef int32_t* timestamp_types = out.timestamp_types + batch.first_record
    cdef int64_t* key_offsets = out.key_offsets + batch.first_record
    cdef int32_t* key_lengths = out.key_lengths + batch.first_record
    cdef int64_t* value_offsets = out.value_offsets + batch.first_record
    cdef int32_t* value_lengths = out.value_lengths + batch.first_record
    cdef int64_t key_bytes = 0, value_bytes = 0
    cdef Py_ssize_t key_nulls = 0, value_nulls = 0
    cdef int64_t base_offset = batch.base_offset
    cdef int64_t base_timestamp = batch.base_timestamp
    cdef int64_t max_timestamp = batch.max_timestamp
    cdef int32_t records_count = batch.records_count
    cdef int32_t length, offset_delta, key_length, value_length, header_count
    cdef int64_t timestamp_delta
    cdef int32_t timestamp_type = 1 if batch.attributes & TIMESTAMP_TYPE_MASK else 0
    cdef bint log_append_time = timestamp_type == 1
    cdef Py_ssize_t i = 0
    cdef int rc = DECODE_OK
    while i < records_count:
        if read_varint_fast(&p, end, &length) != VARINT_OK:
            rc = ERR_LENGTH
            break
        if length < MIN_RECORD_BODY or length > end - p:
            rc = ERR_LENGTH
            break
        record_end = p + length
        p += 1                                   # record attributes: unused
        if (read_varlong_fast(&p, record_end, &timestamp_delta) != VARINT_OK
                or read_varint_fast(&p, record_end, &offset_delta) != VARINT_OK):
            rc = ERR_FIELD
            break

        if read_varint_fast(&p, record_end, &key_length) != VARINT_OK:
            rc = ERR_KEY
            break
        if key_length < -1 or key_length > record_end - p:
            rc = ERR_KEY
            break
        key_offsets[i] = p - data
        key_lengths[i] = key_length
        if key_length >= 0:
            p += key_length
            key_bytes += key_length
        else:
            key_nulls += 1

        if read_varint_fast(&p, record_end, &value_length) != VARINT_OK:
            rc = ERR_VALUE
            break
        if value_length < -1 or value_length > record_end - p:
            rc = ERR_VALUE
            break
        value_offsets[i] = p - data
        value_lengths[i] = value_length
        if value_length >= 0:
            p += value_length
            value_bytes += value_length
        else:
            value_nulls += 1

        if read_varint_fast(&p, record_end, &header_count) != VARINT_OK:
            rc = ERR_HEADER_COUNT
            break
        if header_count != 0:
            if header_count < 0 or header_count > (record_end - p) // MIN_HEADER_SIZE:
                rc = ERR_HEADER_COUNT
                break
            rc = _decode_headers(data, &p, record_end, header_count, out, with_headers)
            if rc != DECODE_OK:
                break
        if with_headers:
            out.header_offsets[batch.first_record + i + 1] = <int32_t>out.header_count
        if p != record_end:
            rc = ERR_RECORD_SIZE
            break

        offsets[i] = base_offset + offset_delta
        # LogAppendTime: the broker's time, kept once as maxTimestamp, is
        # every record's timestamp (DefaultRecordBatch semantics).
        timestamps[i] = max_timestamp if log_append_time else base_timestamp + timestamp_delta
        timestamp_types[i] = timestamp_type
        i += 1
    if rc == DECODE_OK and p != end:
        rc = ERR_TRAILING
    out.failed_record = i
    out.key_bytes += key_bytes
    out.value_bytes += value_bytes
    out.key_nulls += key_nulls
    out.value_nulls += value_nulls
    return rc


cdef int _decode_headers(const uint8_t* data, const uint8_t** pos, const uint8_t* record_end,
                         int32_t header_count, RecordColumns* out, bint with_headers) noexcept nogil:
    cdef const uint8_t* p = pos[0]
    cdef int32_t header_key_length, header_value_length
    cdef Py_ssize_t h
    cdef int rc
    for h in range(header_count):
        if read_varint_fast(&p, record_end, &header_key_length) != VARINT_OK:
            return ERR_HEADER_KEY
        # Header keys are strings and never null (DefaultRecord.readHeaders).
        if header_key_length < 0 or header_key_length > record_end - p:
            return ERR_HEADER_KEY
        if with_headers:
            if out.header_count == out.header_capacity:
                rc = _grow_headers(out)
                if rc != DECODE_OK:
                    return rc
            out.header_key_offsets[out.header_count] = p - data
            out.header_key_lengths[out.header_count] = header_key_length
            out.header_key_bytes += header_key_length
        p += header_key_length
        if read_varint_fast(&p, record_end, &header_value_length) != VARINT_OK:
            return ERR_HEADER_VALUE
        if header_value_length < -1 or header_value_length > record_end - p:
            return ERR_HEADER_VALUE
        if with_headers:
            out.header_value_offsets[out.header_count] = p - data
            out.header_value_lengths[out.header_count] = header_value_length
            if header_value_length >= 0:
                out.header_value_bytes += header_value_length
            else:
                out.header_value_nulls += 1
            out.header_count += 1
        if header_value_length > 0:
            p += header_value_length
    pos[0] = p
    return DECODE_OK


# ---------------------------------------------------------------- result
BatchInfo = namedtuple("BatchInfo", [
    "base_offset", "last_offset_delta", "partition_leader_epoch", "attributes",
    "compression", "timestamp_type", "is_transactional", "is_control",
    "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
    "base_sequence", "records_count", "first_record", "position", "size_in_bytes",
])
BatchInfo.__doc__ = """One v2 batch header as decode_columnar saw it.

first_record is the index of the batch's first record in the columns, or -1
when its records are not in them (a control batch, unless requested)."""


@cython.final
cdef class ColumnarRecords:
    """Records of one or more v2 batches as columns (see module docstring).

    Columns (each a :class:`Column`, one entry per record unless noted):
    ``offsets`` int64, ``timestamps`` int64 (ms), ``timestamp_types`` int32
    (0 CreateTime, 1 LogAppendTime), ``key_offsets``/``value_offsets`` int64
    positions in ``data``, ``key_lengths``/``value_lengths`` int32 (-1 =
    null). With headers: ``header_offsets`` int32 (num_records + 1 entries;
    record i owns headers header_offsets[i]..header_offsets[i+1]-1) and the
    flat ``header_key_offsets``/``header_key_lengths``/
    ``header_value_offsets``/``header_value_lengths``; otherwise these are
    None. ``truncated_bytes`` counts the bytes of a trailing partial batch
    that was ignored; ``bytes_consumed`` the bytes of whole batches.
    """

    def __cinit__(self):
        self.batch_entries = NULL
        self.num_batches = 0
        self.batch_capacity = 0

    def __dealloc__(self):
        free(self.batch_entries)

    def __len__(self):
        return self.num_records

    @property
    def batches(self):
        """List of :class:`BatchInfo`, one per whole batch in the input."""
        cdef Py_ssize_t i
        cdef BatchEntry* b
        out = []
        for i in range(self.num_batches):
            b = &self.batch_entries[i]
            out.append(BatchInfo(
                b.base_offset, b.last_offset_delta, b.partition_leader_epoch,
                b.attributes, b.attributes & COMPRESSION_CODEC_MASK,
                1 if b.attributes & TIMESTAMP_TYPE_MASK else 0,
                bool(b.attributes & TRANSACTIONAL_FLAG_MASK), bool(b.attributes & CONTROL_FLAG_MASK),
                b.base_timestamp, b.max_timestamp, b.producer_id, b.producer_epoch,
                b.base_sequence, b.records_count, b.first_record, b.position,
                b.size_in_bytes))
        return out

    def key(self, Py_ssize_t i):
        """The key of record i as bytes, or None (a copy; for tests and tools)."""
        return _slice(self.data, self.key_offsets, self.key_lengths, i)

    def value(self, Py_ssize_t i):
        """The value of record i as bytes, or None (a copy)."""
        return _slice(self.data, self.value_offsets, self.value_lengths, i)

    def headers(self, Py_ssize_t i):
        """Headers of record i as a list of (str key, bytes-or-None value)."""
        if not self.has_headers:
            raise ValueError("decoded without include_headers=True")
        if i < 0 or i >= self.num_records:
            raise IndexError("record index out of range")
        start = (<int32_t*>self.header_offsets.ptr)[i]
        stop = (<int32_t*>self.header_offsets.ptr)[i + 1]
        # Invalid UTF-8 in a key becomes U+FFFD, as Java's String decoding does.
        return [(_slice(self.data, self.header_key_offsets, self.header_key_lengths, h).decode(
                    "utf-8", "replace"),
                 _slice(self.data, self.header_value_offsets, self.header_value_lengths, h))
                for h in range(start, stop)]


    def to_arrow(self, include_headers=None):
        """A ``pyarrow.RecordBatch`` with Spark's Kafka source column types:
        key binary, value binary, offset int64, timestamp timestamp[us, UTC],
        timestampType int32 and, with headers, headers
        list<struct<key: string, value: binary>>."""
        if include_headers is None:
            include_headers = self.has_headers
        if include_headers and not self.has_headers:
            raise ValueError("decoded without include_headers=True")
        return _to_arrow(self, include_headers)

    def __repr__(self):
        return (f"<ColumnarRecords {self.num_records} records in {self.num_batches} batches, "
                f"{self.truncated_bytes} trailing bytes ignored>")


cdef object _byte_view(object buffer):
    # Positions are byte offsets: view any buffer (an array('q'), a 2-D
    # memoryview) as flat bytes so that slicing `data` means bytes.
    view = memoryview(buffer)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    return view


cdef object _slice(object data, Column offsets, Column lengths, Py_ssize_t i):
    if i < 0 or i >= offsets.length:
        raise IndexError("index out of range")
    cdef int32_t length = (<int32_t*>lengths.ptr)[i]
    if length < 0:
        return None
    cdef int64_t start = (<int64_t*>offsets.ptr)[i]
    return bytes(memoryview(data)[start:start + length])


cdef BatchEntry* _append_batch(ColumnarRecords result) except NULL:
    cdef Py_ssize_t capacity
    cdef void* p
    if result.num_batches == result.batch_capacity:
        capacity = result.batch_capacity * 2 if result.batch_capacity else 4
        p = realloc(result.batch_entries, capacity * sizeof(BatchEntry))
        if p == NULL:
            raise MemoryError()
        result.batch_entries = <BatchEntry*>p
        result.batch_capacity = capacity
    result.num_batches += 1
    return &result.batch_entries[result.num_batches - 1]


def decode_columnar(buffer, *, bint arrow=False, bint include_headers=False,
                    bint include_control_batches=False, bint check_crc=True,
                    Py_ssize_t max_decompressed_bytes=DEFAULT_MAX_OUTPUT):
    """Decode concatenated v2 record batches into columns.

    Returns a :class:`ColumnarRecords`, or with ``arrow=True`` the
    ``pyarrow.RecordBatch`` of :meth:`ColumnarRecords.to_arrow`. Control
    batches (transaction markers) are left out of the columns unless
    ``include_control_batches``; they still appear in ``.batches``. A trailing
    partial batch is ignored (``truncated_bytes``); anything corrupt (bad
    CRC-32C, sizes, magic, record structure) raises CorruptRecordException.
    """
    result = _decode(buffer, include_headers, include_control_batches, check_crc,
                     max_decompressed_bytes)
    if arrow:
        return _to_arrow(result, include_headers)
    return result


cdef ColumnarRecords _decode(object buffer, bint include_headers,
                             bint include_control_batches, bint check_crc,
                             Py_ssize_t max_decompressed_bytes):
    cdef ColumnarRecords result = ColumnarRecords.__new__(ColumnarRecords)
    cdef Py_buffer view
    cdef const uint8_t* base
    cdef const uint8_t* batch
    cdef Py_ssize_t n, pos = 0, remaining, total_records = 0
    cdef int32_t batch_length, records_count
    cdef int16_t attributes
    cdef int magic, codec
    cdef uint32_t stored_crc
    cdef BatchEntry* entry
    cdef Py_ssize_t payload_total = 0
    cdef bint any_compressed = False
    cdef Py_ssize_t i
    cdef int rc = DECODE_OK
    cdef Py_ssize_t failed_batch = -1
    cdef RecordColumns out
    cdef const uint8_t* data_ptr
    cdef char* owned
    payloads = []           # decompressed records sections, by batch index (None: in input)

    PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE)
    try:
        base = <const uint8_t*>view.buf
        n = view.len
        # ---- pass 1: batch headers
        while True:
            remaining = n - pos
            if remaining < LOG_OVERHEAD:
                break
            batch = base + pos
            batch_length = <int32_t>load_be32(batch + LENGTH_OFFSET)
            if remaining > MAGIC_OFFSET:
                magic = <int8_t>batch[MAGIC_OFFSET]
                if magic == 0 or magic == 1:
                    raise LegacyRecordFormatError(magic, (
                        f"Batch at byte {pos} is a magic {magic} message set; the columnar "
                        f"decoder reads magic 2 (legacy: kfast.records.decode_message_set)"))
                if magic != CURRENT_MAGIC:
                    raise CorruptRecordException(f"Batch at byte {pos} has unknown magic {magic}")
            if batch_length < MIN_BATCH_LENGTH:
                raise CorruptRecordException(
                    f"Batch at byte {pos} has batchLength {batch_length}, below the "
                    f"{MIN_BATCH_LENGTH} bytes of a v2 header")
            if batch_length > remaining - LOG_OVERHEAD:
                break                                    # partial batch: fetch ended inside it
            if check_crc:
                stored_crc = load_be32(batch + CRC_OFFSET)
                if crc32c_update(0, batch + ATTRIBUTES_OFFSET,
                                 batch_length + LOG_OVERHEAD - ATTRIBUTES_OFFSET) != stored_crc:
                    raise CorruptRecordException(
                        f"Batch at byte {pos} (baseOffset {<int64_t>load_be64(batch)}) fails its CRC-32C check")
            records_count = <int32_t>load_be32(batch + RECORDS_COUNT_OFFSET)
            attributes = <int16_t>load_be16(batch + ATTRIBUTES_OFFSET)
            if records_count < 0:
                raise CorruptRecordException(
                    f"Batch at byte {pos} has negative recordsCount {records_count}")
            entry = _append_batch(result)
            entry.base_offset = <int64_t>load_be64(batch + BASE_OFFSET_OFFSET)
            entry.partition_leader_epoch = <int32_t>load_be32(batch + PARTITION_LEADER_EPOCH_OFFSET)
            entry.attributes = attributes
            entry.last_offset_delta = <int32_t>load_be32(batch + LAST_OFFSET_DELTA_OFFSET)
            entry.base_timestamp = <int64_t>load_be64(batch + BASE_TIMESTAMP_OFFSET)
            entry.max_timestamp = <int64_t>load_be64(batch + MAX_TIMESTAMP_OFFSET)
            entry.producer_id = <int64_t>load_be64(batch + PRODUCER_ID_OFFSET)
            entry.producer_epoch = <int16_t>load_be16(batch + PRODUCER_EPOCH_OFFSET)
            entry.base_sequence = <int32_t>load_be32(batch + BASE_SEQUENCE_OFFSET)
            entry.records_count = records_count
            entry.position = pos
            entry.size_in_bytes = batch_length + LOG_OVERHEAD
            entry.records_start = pos + RECORDS_OFFSET
            entry.records_end = pos + LOG_OVERHEAD + batch_length
            entry.first_record = -1
            pos += LOG_OVERHEAD + batch_length

            if (attributes & CONTROL_FLAG_MASK) and not include_control_batches:
                payloads.append(None)
                continue
            codec = attributes & COMPRESSION_CODEC_MASK
            if codec != 0:
                payload = decompress(
                    codec, _byte_view(buffer)[entry.records_start:entry.records_end],
                    max_output=max_decompressed_bytes)
                if type(payload) is not bytes:           # copied below with PyBytes_AS_STRING
                    payload = bytes(payload)
                payloads.append(payload)
                any_compressed = True
                remaining = len(payload)
            else:
                payloads.append(None)
                remaining = entry.records_end - entry.records_start
            # Every record takes at least MIN_RECORD_SIZE bytes: a count the
            # bytes cannot hold is corrupt, and never sizes an allocation.
            if records_count > remaining // MIN_RECORD_SIZE:
                raise CorruptRecordException(
                    f"Batch at byte {entry.position} claims {records_count} records in "
                    f"{remaining} bytes of records")
            entry.first_record = total_records
            total_records += records_count
            payload_total += remaining
        result.bytes_consumed = pos
        result.truncated_bytes = n - pos

        # ---- the one contiguous `data` buffer
        if any_compressed:
            data = PyBytes_FromStringAndSize(NULL, payload_total)
            owned = PyBytes_AS_STRING(data)
            payload_total = 0
            for i in range(result.num_batches):
                entry = &result.batch_entries[i]
                if entry.first_record < 0:
                    continue
                payload = payloads[i]
                if payload is None:
                    memcpy(owned + payload_total, base + entry.records_start,
                           entry.records_end - entry.records_start)
                    entry.records_end = payload_total + (entry.records_end - entry.records_start)
                else:
                    memcpy(owned + payload_total, PyBytes_AS_STRING(payload), len(payload))
                    entry.records_end = payload_total + len(payload)
                entry.records_start = payload_total
                payload_total = entry.records_end
            result.data = data
            data_ptr = <const uint8_t*>owned
        else:
            result.data = _byte_view(buffer)
            data_ptr = base

        # ---- pass 2: records, in C
        result.num_records = total_records
        result.has_headers = include_headers
        result.offsets = new_column(total_records, 8, b"q")
        result.timestamps = new_column(total_records, 8, b"q")
        result.timestamp_types = new_column(total_records, 4, b"i")
        result.key_offsets = new_column(total_records, 8, b"q")
        result.key_lengths = new_column(total_records, 4, b"i")
        result.value_offsets = new_column(total_records, 8, b"q")
        result.value_lengths = new_column(total_records, 4, b"i")
        memset(&out, 0, sizeof(out))
        out.offsets = <int64_t*>result.offsets.ptr
        out.timestamps = <int64_t*>result.timestamps.ptr
        out.timestamp_types = <int32_t*>result.timestamp_types.ptr
        out.key_offsets = <int64_t*>result.key_offsets.ptr
        out.key_lengths = <int32_t*>result.key_lengths.ptr
        out.value_offsets = <int64_t*>result.value_offsets.ptr
        out.value_lengths = <int32_t*>result.value_lengths.ptr
        if include_headers:
            result.header_offsets = new_column(total_records + 1, 4, b"i")
            out.header_offsets = <int32_t*>result.header_offsets.ptr
            out.header_offsets[0] = 0
        try:
            with nogil:
                for i in range(result.num_batches):
                    if result.batch_entries[i].first_record < 0:
                        continue
                    rc = _decode_batch_records(data_ptr, &result.batch_entries[i], &out,
                                               include_headers)
                    if rc != DECODE_OK:
                        failed_batch = i
                        break
            if rc == ERR_NOMEM:
                raise MemoryError()
            if rc != DECODE_OK:
                entry = &result.batch_entries[failed_batch]
                raise CorruptRecordException(
                    f"Batch at byte {entry.position} (baseOffset {entry.base_offset}), record "
                    f"{out.failed_record}: {_ERROR_TEXT[rc]}")
            if out.header_count > INT32_MAX:
                raise CorruptRecordException("more than 2^31 headers in one decode")
            result.key_bytes = out.key_bytes
            result.value_bytes = out.value_bytes
            result.key_nulls = out.key_nulls
            result.value_nulls = out.value_nulls
            if include_headers:
                result.num_headers = out.header_count
                result.header_key_bytes = out.header_key_bytes
                result.header_value_bytes = out.header_value_bytes
                result.header_value_nulls = out.header_value_nulls
                result.header_key_offsets = _adopt(<char*>out.header_key_offsets, out.header_count, 8, b"q")
                out.header_key_offsets = NULL
                result.header_key_lengths = _adopt(<char*>out.header_key_lengths, out.header_count, 4, b"i")
                out.header_key_lengths = NULL
                result.header_value_offsets = _adopt(<char*>out.header_value_offsets, out.header_count, 8, b"q")
                out.header_value_offsets = NULL
                result.header_value_lengths = _adopt(<char*>out.header_value_lengths, out.header_count, 4, b"i")
                out.header_value_lengths = NULL
        finally:
            free(out.header_key_offsets)
            free(out.header_key_lengths)
            free(out.header_value_offsets)
            free(out.header_value_lengths)
    finally:
        PyBuffer_Release(&view)
    return result


cdef Column _adopt(char* ptr, Py_ssize_t length, Py_ssize_t itemsize, char* format):
    """A Column owning memory the record pass allocated (NULL: empty)."""
    cdef Column col = Column.__new__(Column)
    if ptr == NULL:
        ptr = <char*>malloc(1)
        if ptr == NULL:
            raise MemoryError()
    col.ptr = ptr
    col.length = length
    col.itemsize = itemsize
    col.format = format
    col.shape[0] = length
    col.strides[0] = itemsize
    return col


# ---------------------------------------------------------------- Arrow
# Arrow's binary/string layout needs each column's bytes contiguous with int32
# offsets (offsets[i+1] - offsets[i] = length of element i). Keys and values
# are interleaved in a batch, so they are gathered once into their own
# buffers; offset, timestampType go to Arrow as they are.

cdef void _gather(const uint8_t* data, const int64_t* starts, const int32_t* lengths,
                  Py_ssize_t count, int32_t* arrow_offsets, uint8_t* out,
                  uint8_t* validity) noexcept nogil:
    cdef Py_ssize_t i
    cdef int32_t at = 0, length
    arrow_offsets[0] = 0
    for i in range(count):
        length = lengths[i]
        if length > 0:
            memcpy(out + at, data + starts[i], length)
            at += length
        if validity != NULL and length < 0:
            validity[i >> 3] &= ~(1 << (i & 7))
        arrow_offsets[i + 1] = at


cdef object _binary_array(object pa, object arrow_type, const uint8_t* data,
                          Column starts, Column lengths, int64_t total_bytes,
                          Py_ssize_t nulls):
    cdef Py_ssize_t count = starts.length
    if total_bytes > INT32_MAX:
        raise OverflowError(
            f"{total_bytes} bytes exceed the 2 GiB an Arrow binary column with int32 offsets holds")
    cdef Column arrow_offsets = new_column(count + 1, 4, b"i")
    cdef Column out = new_column(total_bytes, 1, b"B")
    cdef Column validity = None
    cdef uint8_t* validity_ptr = NULL
    if nulls:
        validity = new_column((count + 7) // 8, 1, b"B")
        memset(validity.ptr, 0xFF, validity.length)
        validity_ptr = <uint8_t*>validity.ptr
    with nogil:
        _gather(data, <int64_t*>starts.ptr, <int32_t*>lengths.ptr, count,
                <int32_t*>arrow_offsets.ptr, <uint8_t*>out.ptr, validity_ptr)
    return pa.Array.from_buffers(
        arrow_type, count,
        [None if validity is None else pa.py_buffer(validity),
         pa.py_buffer(arrow_offsets), pa.py_buffer(out)],
        null_count=nulls)


cdef object _pyarrow = None
# Arrow types and schemas of Spark's Kafka source, built once on first use.
cdef object _timestamp_type = None
cdef object _headers_type = None
cdef object _header_fields = None
cdef object _schema = None
cdef object _schema_with_headers = None


cdef object _import_pyarrow():
    global _pyarrow, _timestamp_type, _headers_type, _header_fields, _schema, _schema_with_headers
    if _pyarrow is None:
        import pyarrow as pa
        _timestamp_type = pa.timestamp("us", tz="UTC")
        _header_fields = [pa.field("key", pa.string()), pa.field("value", pa.binary())]
        # "element": the item name pyspark gives ArrayType in Arrow.
        _headers_type = pa.list_(pa.field("element", pa.struct(_header_fields)))
        fields = [pa.field("key", pa.binary()), pa.field("value", pa.binary()),
                  pa.field("offset", pa.int64()), pa.field("timestamp", _timestamp_type),
                  pa.field("timestampType", pa.int32())]
        _schema = pa.schema(fields)
        _schema_with_headers = pa.schema(fields + [pa.field("headers", _headers_type)])
        _pyarrow = pa
    return _pyarrow


cdef object _to_arrow(ColumnarRecords result, bint include_headers):
    pa = _import_pyarrow()
    cdef Py_buffer view
    cdef const uint8_t* data
    cdef Py_ssize_t i, count = result.num_records
    cdef Column timestamps_us = new_column(count, 8, b"q")
    cdef const int64_t* ms = <int64_t*>result.timestamps.ptr
    cdef int64_t* us = <int64_t*>timestamps_us.ptr
    with nogil:
        for i in range(count):
            us[i] = ms[i] * 1000
    PyObject_GetBuffer(result.data, &view, PyBUF_SIMPLE)
    try:
        data = <const uint8_t*>view.buf
        keys = _binary_array(pa, pa.binary(), data, result.key_offsets, result.key_lengths,
                             result.key_bytes, result.key_nulls)
        values = _binary_array(pa, pa.binary(), data, result.value_offsets, result.value_lengths,
                               result.value_bytes, result.value_nulls)
        columns = [
            keys,
            values,
            pa.Array.from_buffers(pa.int64(), count, [None, pa.py_buffer(result.offsets)]),
            pa.Array.from_buffers(_timestamp_type, count,
                                  [None, pa.py_buffer(timestamps_us)]),
            pa.Array.from_buffers(pa.int32(), count, [None, pa.py_buffer(result.timestamp_types)]),
        ]
        if include_headers:
            header_keys = _binary_array(
                pa, pa.string(), data, result.header_key_offsets, result.header_key_lengths,
                result.header_key_bytes, 0)
            try:
                header_keys.validate(full=True)          # Arrow strings must be UTF-8
            except pa.ArrowInvalid:
                header_keys = pa.array(
                    [_slice(result.data, result.header_key_offsets, result.header_key_lengths,
                            h).decode("utf-8", "replace") for h in range(result.num_headers)],
                    pa.string())
            header_values = _binary_array(
                pa, pa.binary(), data, result.header_value_offsets, result.header_value_lengths,
                result.header_value_bytes, result.header_value_nulls)
            header_struct = pa.StructArray.from_arrays(
                [header_keys, header_values], fields=_header_fields)
            columns.append(pa.Array.from_buffers(
                _headers_type, count,
                [None, pa.py_buffer(result.header_offsets)], children=[header_struct]))
    finally:
        PyBuffer_Release(&view)
    return pa.RecordBatch.from_arrays(
        columns, schema=_schema_with_headers if include_headers else _schema)

