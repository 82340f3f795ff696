# Variable-length integers as Kafka uses them (protobuf wire format).
#
#   uvarint  := byte* ; 7 payload bits per byte, least significant group first,
#               high bit set on every byte but the last.
#               int32 fits in <= 5 bytes, int64 in <= 10.
#   varint   := uvarint of zigzag(int32)   zigzag(n) = (n << 1) ^ (n >> 31)
#   varlong  := uvarint of zigzag(int64)   zigzag(n) = (n << 1) ^ (n >> 63)
#
# Records use varint/varlong (DefaultRecord); flexible protocol versions use
# unsigned varints for compact lengths and tagged fields.
#
# Contract: every reader takes the current position by pointer and the end of
# the buffer; it never touches a byte at or past `end`. Readers return
#    0  on success (the position is advanced past the integer),
#   -1  if the buffer ends inside the integer (truncated),
#   -2  if the encoding is longer than the type allows (overlong / corrupt).
# They never raise: the caller turns the status into the Kafka error that fits
# its context (CorruptRecordException for records, a protocol error for
# requests). Writers need room for 5 (int32) or 10 (int64) bytes and return the
# position after the last byte written.
#
# Everything is `inline` here, in the .pxd, so each kernel that cimports this
# gets the code compiled in place: a varint read per field per record must not
# cost a call through a module's C-API table.

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t

# The *_fast readers sit in every record walker's per-field path, where a call
# costs as much as the read (decode + iterate: ~8 ns a record). GCC's inliner
# leaves them out of line whenever a kernel's translation unit has used up its
# growth budget, which small unrelated edits flip. So they are declared
# always_inline under the names Cython gives them (module path + name; a
# renamed function only loses the attribute: the declaration is then unused).
cdef extern from *:
    """
    #if defined(__GNUC__)
    static CYTHON_INLINE int __pyx_f_5kfast_4_ext_6varint_read_varint_fast(
        uint8_t const **, uint8_t const *, int32_t *) __attribute__((always_inline));
    static CYTHON_INLINE int __pyx_f_5kfast_4_ext_6varint_read_varlong_fast(
        uint8_t const **, uint8_t const *, int64_t *) __attribute__((always_inline));
    #endif
    """


cdef enum:
    VARINT_OK = 0
    VARINT_TRUNCATED = -1
    VARINT_OVERLONG = -2


cdef inline int read_uvarint64(const uint8_t** pos, const uint8_t* end,
                               uint64_t* out) noexcept nogil:
    cdef const uint8_t* p = pos[0]
    cdef uint64_t value = 0
    cdef uint64_t b
    cdef int shift = 0
    while True:
        if p >= end:
            return VARINT_TRUNCATED
        b = p[0]
        p += 1
        if shift == 63 and b > 1:
            return VARINT_OVERLONG
        value |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 63:
            return VARINT_OVERLONG
    pos[0] = p
    out[0] = value
    return VARINT_OK


cdef inline int read_uvarint32(const uint8_t** pos, const uint8_t* end,
                               uint32_t* out) noexcept nogil:
    cdef const uint8_t* p = pos[0]
    cdef uint32_t value
    cdef uint32_t b
    # Fast path: one byte (the common case for lengths and deltas).
    if p < end and p[0] < 0x80:
        out[0] = p[0]
        pos[0] = p + 1
        return VARINT_OK
    value = 0
    cdef int shift = 0
    while True:
        if p >= end:
            return VARINT_TRUNCATED
        b = p[0]
        p += 1
        if shift == 28 and b > 0x0F:
            return VARINT_OVERLONG
        value |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    pos[0] = p
    out[0] = value
    return VARINT_OK


cdef inline int read_varint(const uint8_t** pos, const uint8_t* end,
                            int32_t* out) noexcept nogil:
    cdef uint32_t raw
    cdef int rc = read_uvarint32(pos, end, &raw)
    if rc == VARINT_OK:
        out[0] = <int32_t>((raw >> 1) ^ (~(raw & 1) + 1))
    return rc


# read_varint with the one- and two-byte encodings decoded inline: record
# lengths, key/value lengths and offset deltas of a typical batch take one or
# two bytes, so the record walkers (batch validation, columnar decode) call
# this per field; anything longer goes through read_varint.
cdef inline int read_varint_fast(const uint8_t** pos, const uint8_t* end,
                                 int32_t* out) noexcept nogil:
    cdef const uint8_t* p = pos[0]
    cdef uint32_t raw
    if end - p >= 2:
        if p[0] < 0x80:
            raw = p[0]
            pos[0] = p + 1
            out[0] = <int32_t>((raw >> 1) ^ (~(raw & 1) + 1))
            return VARINT_OK
        if p[1] < 0x80:
            raw = (p[0] & 0x7F) | (<uint32_t>p[1] << 7)
            pos[0] = p + 2
            out[0] = <int32_t>((raw >> 1) ^ (~(raw & 1) + 1))
            return VARINT_OK
    return read_varint(pos, end, out)


cdef inline int read_varlong(const uint8_t** pos, const uint8_t* end,
                             int64_t* out) noexcept nogil:
    cdef uint64_t raw
    cdef const uint8_t* p = pos[0]
    if p < end and p[0] < 0x80:
        raw = p[0]
        pos[0] = p + 1
        out[0] = <int64_t>((raw >> 1) ^ (~(raw & 1) + 1))
        return VARINT_OK
    cdef int rc = read_uvarint64(pos, end, &raw)
    if rc == VARINT_OK:
        out[0] = <int64_t>((raw >> 1) ^ (~(raw & 1) + 1))
    return rc


# read_varlong with the one- and two-byte encodings decoded inline: a
# record's timestampDelta takes one or two bytes in a batch spanning up to
# ~8 s of milliseconds (record walkers: batch iteration and validation,
# columnar decode).
cdef inline int read_varlong_fast(const uint8_t** pos, const uint8_t* end,
                                  int64_t* out) noexcept nogil:
    cdef const uint8_t* p = pos[0]
    cdef uint64_t raw
    if end - p >= 2:
        if p[0] < 0x80:
            raw = p[0]
            pos[0] = p + 1
            out[0] = <int64_t>((raw >> 1) ^ (~(raw & 1) + 1))
            return VARINT_OK
        if p[1] < 0x80:
            raw = (p[0] & 0x7F) | (<uint64_t>p[1] << 7)
            pos[0] = p + 2
            out[0] = <int64_t>((raw >> 1) ^ (~(raw & 1) + 1))
            return VARINT_OK
    return read_varlong(pos, end, out)


cdef inline uint8_t* write_uvarint64(uint8_t* p, uint64_t value) noexcept nogil:
    while value >= 0x80:
        p[0] = <uint8_t>(value | 0x80)
        value >>= 7
        p += 1
    p[0] = <uint8_t>value
    return p + 1


cdef inline uint8_t* write_uvarint32(uint8_t* p, uint32_t value) noexcept nogil:
    while value >= 0x80:
        p[0] = <uint8_t>(value | 0x80)
        value >>= 7
        p += 1
    p[0] = <uint8_t>value
    return p + 1


cdef inline uint8_t* write_varint(uint8_t* p, int32_t value) noexcept nogil:
    return write_uvarint32(p, (<uint32_t>value << 1) ^ <uint32_t>(value >> 31))


cdef inline uint8_t* write_varlong(uint8_t* p, int64_t value) noexcept nogil:
    return write_uvarint64(p, (<uint64_t>value << 1) ^ <uint64_t>(value >> 63))


cdef inline int uvarint64_size(uint64_t value) noexcept nogil:
    cdef int n = 1
    while value >= 0x80:
        value >>= 7
        n += 1
    return n


cdef inline int varint_size(int32_t value) noexcept nogil:
    return uvarint64_size((<uint32_t>value << 1) ^ <uint32_t>(value >> 31))


cdef inline int varlong_size(int64_t value) noexcept nogil:
    return uvarint64_size((<uint64_t>value << 1) ^ <uint64_t>(value >> 63))
