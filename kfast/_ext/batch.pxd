# Record batch v2 (magic 2), shared declarations. Grammar (big-endian), from
# Kafka's DefaultRecordBatch:
#
#   RecordBatch :=
#     the 61-byte header (offsets, attribute bits: kfast/_ext/layout.pxd)
#     records            Record * recordsCount (the only part that is compressed)
#
#   Record :=                                   (DefaultRecord; all varints zigzag)
#     length          varint   bytes after this field
#     attributes      int8     unused, 0
#     timestampDelta  varlong  timestamp - baseTimestamp
#     offsetDelta     varint   offset - baseOffset
#     keyLength       varint   -1 = null key
#     key             byte * keyLength
#     valueLength     varint   -1 = null value
#     value           byte * valueLength
#     headerCount     varint
#     Header * headerCount
#
#   Header :=
#     headerKeyLength    varint   >= 0 (a null header key is invalid)
#     headerKey          UTF-8 * headerKeyLength
#     headerValueLength  varint   -1 = null value
#     headerValue        byte * headerValueLength
#
# Legacy message sets (magic 0 and 1) put their magic byte at offset 16 too,
# which is how a reader tells the formats apart (see peek_magic).
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

from kfast._ext.varint cimport (read_varint, read_varint_fast, read_varlong, read_varlong_fast,
                                VARINT_OK)

cdef enum:
    # Outcome of parse_record.
    RECORD_OK = 0
    RECORD_BAD_LENGTH = 1          # length varint malformed, <= 0 or past the section
    RECORD_MALFORMED = 2           # a field runs past the record's declared length
    RECORD_BAD_KEY_LENGTH = 3
    RECORD_BAD_VALUE_LENGTH = 4
    RECORD_BAD_HEADER_COUNT = 5
    RECORD_BAD_HEADER_KEY = 6
    RECORD_BAD_HEADER_VALUE = 7
    RECORD_SIZE_MISMATCH = 8       # fields end before the declared length


# ------------------------------------------------------------- byte order
cdef inline uint16_t load_be16(const uint8_t* p) noexcept nogil:
    return <uint16_t>((<uint16_t>p[0] << 8) | p[1])

cdef inline uint32_t load_be32(const uint8_t* p) noexcept nogil:
    return ((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16)
            | (<uint32_t>p[2] << 8) | <uint32_t>p[3])

cdef inline uint64_t load_be64(const uint8_t* p) noexcept nogil:
    return (<uint64_t>load_be32(p) << 32) | load_be32(p + 4)

cdef inline void store_be16(uint8_t* p, uint16_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 8)
    p[1] = <uint8_t>v

cdef inline void store_be32(uint8_t* p, uint32_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 24)
    p[1] = <uint8_t>(v >> 16)
    p[2] = <uint8_t>(v >> 8)
    p[3] = <uint8_t>v

cdef inline void store_be64(uint8_t* p, uint64_t v) noexcept nogil:
    store_be32(p, <uint32_t>(v >> 32))
    store_be32(p + 4, <uint32_t>v)


# ------------------------------------------------------------- records
# One record's fields, as pointers into the records section (no copies).
cdef struct RecordView:
    int8_t attributes
    int64_t timestamp_delta
    int32_t offset_delta
    const uint8_t* key             # NULL for a null key
    int32_t key_length             # -1 for a null key
    const uint8_t* value
    int32_t value_length
    const uint8_t* headers         # first Header
    int32_t header_count
    const uint8_t* end             # one past the record


# Per-field in every record walker (key, value, each header): forced inline
# for the reason given at the top of varint.pxd.
cdef extern from *:
    """
    #if defined(__GNUC__)
    static CYTHON_INLINE int __pyx_f_5kfast_4_ext_5batch_read_bytes_field(
        uint8_t const **, uint8_t const *, int32_t, int, uint8_t const **, int32_t *)
        __attribute__((always_inline));
    #endif
    """


cdef inline int read_bytes_field(const uint8_t** pos, const uint8_t* rend, int32_t min_length,
                                 int bad_length, const uint8_t** data,
                                 int32_t* length) noexcept nogil:
    """One length-prefixed field of a record (grammar: length varint, then
    that many bytes; -1 = null where ``min_length`` is -1), ending by
    ``rend``. On RECORD_OK pos[0] moves past it; data[0] is NULL for null."""
    cdef const uint8_t* p = pos[0]
    cdef int32_t n
    if read_varint_fast(&p, rend, &n) != VARINT_OK:
        return RECORD_MALFORMED
    if n < min_length or n > rend - p:
        return bad_length
    length[0] = n
    if n >= 0:
        data[0] = p
        pos[0] = p + n
    else:
        data[0] = NULL
        pos[0] = p
    return RECORD_OK


cdef inline int skip_headers(const uint8_t** pos, const uint8_t* rend,
                             int32_t count) noexcept nogil:
    """Walk ``count`` headers (grammar: headerKeyLength varint, headerKey,
    headerValueLength varint (-1 = null), headerValue) ending by ``rend``;
    pos[0] moves past them. The one header walk of parse_record and
    check_record."""
    cdef const uint8_t* data
    cdef int32_t n, i
    cdef int rc
    for i in range(count):
        rc = read_bytes_field(pos, rend, 0, RECORD_BAD_HEADER_KEY, &data, &n)
        if rc != RECORD_OK:
            return rc
        rc = read_bytes_field(pos, rend, -1, RECORD_BAD_HEADER_VALUE, &data, &n)
        if rc != RECORD_OK:
            return rc
    return RECORD_OK


cdef inline int parse_record(const uint8_t** pos, const uint8_t* end,
                             RecordView* r) noexcept nogil:
    """Parse the Record at pos[0] (records section ends at `end`).

    Checks every length against the record's own declared length, which is
    checked against `end`, so nothing is read outside [pos[0], end). On
    RECORD_OK, pos[0] moves past the record. Varints go through the *_fast
    readers (short encodings inline; same bounds, same results).
    """
    cdef const uint8_t* p = pos[0]
    cdef const uint8_t* rend
    cdef int32_t length, n
    cdef int rc
    if read_varint_fast(&p, end, &length) != VARINT_OK or length <= 0 or length > end - p:
        return RECORD_BAD_LENGTH
    rend = p + length
    r.attributes = <int8_t>p[0]
    p += 1
    if read_varlong_fast(&p, rend, &r.timestamp_delta) != VARINT_OK:
        return RECORD_MALFORMED
    if read_varint_fast(&p, rend, &r.offset_delta) != VARINT_OK:
        return RECORD_MALFORMED
    rc = read_bytes_field(&p, rend, -1, RECORD_BAD_KEY_LENGTH, &r.key, &r.key_length)
    if rc != RECORD_OK:
        return rc
    rc = read_bytes_field(&p, rend, -1, RECORD_BAD_VALUE_LENGTH, &r.value, &r.value_length)
    if rc != RECORD_OK:
        return rc
    if read_varint_fast(&p, rend, &r.header_count) != VARINT_OK:
        return RECORD_MALFORMED
    # Each header takes at least two bytes: a count above that is a lie.
    if r.header_count < 0 or r.header_count > (rend - p) // 2:
        return RECORD_BAD_HEADER_COUNT
    r.headers = p
    rc = skip_headers(&p, rend, r.header_count)
    if rc != RECORD_OK:
        return rc
    if p != rend:
        return RECORD_SIZE_MISMATCH
    r.end = rend
    pos[0] = rend
    return RECORD_OK


# Validation walk: the checks of parse_record without keeping the fields.


cdef inline int _skip_varlong(const uint8_t** pos, const uint8_t* end) noexcept nogil:
    # read_varlong_fast without decoding the value: the walk only needs its
    # end (decoding the dropped timestampDelta made validate() ~9% slower).
    cdef const uint8_t* p = pos[0]
    cdef int64_t ignored
    if end - p >= 2:
        if p[0] < 0x80:
            pos[0] = p + 1
            return VARINT_OK
        if p[1] < 0x80:
            pos[0] = p + 2
            return VARINT_OK
    return read_varlong(pos, end, &ignored)


cdef inline int check_record(const uint8_t** pos, const uint8_t* end) noexcept nogil:
    """Validate the Record at pos[0] exactly as parse_record does; same outcomes."""
    cdef const uint8_t* p = pos[0]
    cdef const uint8_t* rend
    cdef const uint8_t* data
    cdef int32_t length, n, count
    if read_varint_fast(&p, end, &length) != VARINT_OK or length <= 0 or length > end - p:
        return RECORD_BAD_LENGTH
    rend = p + length
    p += 1                                     # attributes
    if _skip_varlong(&p, rend) != VARINT_OK:   # timestampDelta
        return RECORD_MALFORMED
    if read_varint_fast(&p, rend, &n) != VARINT_OK:   # offsetDelta
        return RECORD_MALFORMED
    n = read_bytes_field(&p, rend, -1, RECORD_BAD_KEY_LENGTH, &data, &length)
    if n != RECORD_OK:
        return n
    n = read_bytes_field(&p, rend, -1, RECORD_BAD_VALUE_LENGTH, &data, &length)
    if n != RECORD_OK:
        return n
    if read_varint_fast(&p, rend, &count) != VARINT_OK:
        return RECORD_MALFORMED
    if count != 0:
        if count < 0 or count > (rend - p) // 2:
            return RECORD_BAD_HEADER_COUNT
        n = skip_headers(&p, rend, count)
        if n != RECORD_OK:
            return n
    if p != rend:
        return RECORD_SIZE_MISMATCH
    pos[0] = rend
    return RECORD_OK


# ------------------------------------------------------------- classes
cdef class RecordBatch:
    cdef Py_buffer _view
    cdef bint _has_view
    cdef object _decompressed          # cached decompressed records section
    cdef const uint8_t* _base          # first byte of the batch
    cdef Py_ssize_t _size              # 12 + batchLength
    cdef Py_ssize_t _offset            # of the batch inside the buffer
    cdef object _decompress(self, Py_ssize_t max_output)
    cdef object _records_section(self)
    cdef uint8_t* _writable(self) except NULL


cdef class BufferSlice:
    cdef object _owner
    cdef const uint8_t* _ptr
    cdef Py_ssize_t _length


cdef class Record:
    # Python-visible fields are exposed as member descriptors (see batch.pyx,
    # _install_record_members) under the names without the underscore.
    cdef object _offset             # int
    cdef object _timestamp          # int
    cdef object _attributes         # int
    cdef object _key                # BufferSlice or None
    cdef object _value              # BufferSlice or None
    cdef object _owner              # keeps the records section alive
    cdef const uint8_t* _headers
    cdef const uint8_t* _end         # of the record: bounds the headers
    cdef int32_t _header_count


cdef Py_ssize_t patch_batch_header(uint8_t* p, Py_ssize_t available, int64_t base_offset,
                                   int32_t partition_leader_epoch, bint set_log_append_time,
                                   int64_t log_append_time) except -1
