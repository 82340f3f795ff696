# Kafka's wire primitives for the per-API kernels (produce_codec.pyx,
# fetch_codec.pyx): a bounds-checked reader over a request frame and a
# growing writer for a response. A declaration-only module: the inline
# functions compile into each kernel that cimports it, so a field read or
# write is plain C at the call site. The grammar of each primitive is
# protocol_codec.pyx's (the generic codec, which defines it).
#
# Every read is checked against the end of the frame and every length or
# count against the bytes that remain before anything is allocated; a
# violation raises MalformedRequestException (INVALID_REQUEST).

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy

from kfast._ext.varint cimport read_uvarint32, write_uvarint32, VARINT_OK

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL


cdef struct Reader:
    const uint8_t* start
    const uint8_t* p
    const uint8_t* end


cdef inline int malformed(str message) except -1:
    from kfast.protocol.errors import MalformedRequestException
    raise MalformedRequestException(message)


cdef inline int rd_need(Reader* r, Py_ssize_t n) except -1:
    if n < 0 or r.end - r.p < n:
        malformed(f"truncated at byte {r.p - r.start}: need {n} more, {r.end - r.p} remain")
    return 0


cdef inline uint32_t rd_uvarint(Reader* r) except? 0xFFFFFFFF:
    cdef uint32_t v
    if read_uvarint32(&r.p, r.end, &v) != VARINT_OK:
        malformed(f"bad unsigned varint at byte {r.p - r.start}")
    return v


cdef inline uint64_t rd_be(Reader* r, int width) except? 0xFFFFFFFFFFFFFFFF:
    """A big-endian unsigned integer of ``width`` bytes."""
    rd_need(r, width)
    cdef uint64_t v = 0
    cdef int k
    for k in range(width):
        v = (v << 8) | r.p[k]
    r.p += width
    return v


cdef inline Py_ssize_t rd_length(Reader* r, bint compact) except -2:
    """A bytes length or array count: -1 for null."""
    if compact:
        return <Py_ssize_t>rd_uvarint(r) - 1
    return <int32_t>rd_be(r, 4)


cdef inline Py_ssize_t rd_count(Reader* r, bint compact, Py_ssize_t min_size) except -2:
    """An array count, checked against the bytes left (each element takes
    at least ``min_size``); -1 for null."""
    cdef Py_ssize_t n = rd_length(r, compact)
    if n < -1:
        malformed(f"invalid array length {n}")
    if n > 0 and n > (r.end - r.p) // min_size:
        malformed(f"array of {n} elements exceeds the {r.end - r.p} bytes that remain")
    return n


cdef inline Py_ssize_t rd_array(Reader* r, bint compact, Py_ssize_t min_size, str field) except -2:
    """A non-nullable array's count (rd_count); null is malformed, with the
    generic decoder's message for ``field``."""
    cdef Py_ssize_t n = rd_count(r, compact, min_size)
    if n < 0:
        malformed(f"non-nullable field {field} was serialized as null")
    return n


cdef inline object rd_string(Reader* r, bint compact):
    """A nullable string (None for null)."""
    cdef Py_ssize_t n
    if compact:
        n = <Py_ssize_t>rd_uvarint(r) - 1
    else:
        n = <int16_t>rd_be(r, 2)
    if n == -1:
        return None
    if n < 0:
        malformed(f"invalid string length {n}")
    rd_need(r, n)
    # Invalid UTF-8 decodes with U+FFFD, as the generic codec (and Java's String).
    s = PyUnicode_DecodeUTF8(<const char*>r.p, n, "replace")
    r.p += n
    return s


cdef inline object rd_uuid_bytes(Reader* r):
    """The 16 bytes of a uuid."""
    rd_need(r, 16)
    raw = PyBytes_FromStringAndSize(<const char*>r.p, 16)
    r.p += 16
    return raw


# How many topic ids a kernel's cache (rd_topic_id) holds before it starts
# over: far more than the topics a broker serves, and a client sending
# made-up ids cannot grow it without bound.
cdef enum:
    TOPIC_ID_CACHE_MAX = 4096


cdef inline object rd_topic_id(Reader* r, dict cache, object uuid_type):
    """A topic id (uuid) as ``uuid_type`` (uuid.UUID), through the calling
    kernel's ``cache`` of them: building a UUID from its bytes is ~1.2 us of
    Python per topic of every request, a lookup ~30 ns, and UUIDs are
    immutable, so one object serves every request naming the topic."""
    raw = rd_uuid_bytes(r)
    topic_id = cache.get(raw)
    if topic_id is None:
        if len(cache) >= TOPIC_ID_CACHE_MAX:
            cache.clear()
        topic_id = cache[raw] = uuid_type(bytes=raw)
    return topic_id


cdef inline bint rd_no_tags(Reader* r) except -1:
    """The tagged-field section: True if empty (the only case the fast
    decoders serve)."""
    return rd_uvarint(r) == 0


cdef struct Writer:
    uint8_t* buf
    Py_ssize_t size
    Py_ssize_t cap


cdef inline int wr_init(Writer* w, Py_ssize_t cap) except -1:
    """Call wr_free(w) once done, also on an error."""
    w.buf = <uint8_t*>malloc(cap)
    if w.buf == NULL:
        raise MemoryError()
    w.size = 0
    w.cap = cap
    return 0


cdef inline void wr_free(Writer* w):
    free(w.buf)
    w.buf = NULL


cdef inline int grow_buffer(uint8_t** buf, Py_ssize_t* cap, Py_ssize_t want) except -1:
    """Double ``*cap`` until it holds ``want`` bytes and move ``*buf`` there:
    the one growth rule of kfast's response writers (this file's Writer and
    protocol_codec's _Writer). Doubling keeps a response's copies linear in
    its size."""
    cdef uint8_t* grown
    cdef Py_ssize_t c = cap[0]
    while c < want:
        c *= 2
    grown = <uint8_t*>realloc(buf[0], c)
    if grown == NULL:
        raise MemoryError()
    buf[0] = grown
    cap[0] = c
    return 0


cdef inline int wr_room(Writer* w, Py_ssize_t n) except -1:
    if w.size + n <= w.cap:
        return 0
    return grow_buffer(&w.buf, &w.cap, w.size + n)


cdef inline int wr_be(Writer* w, uint64_t v, int width) except -1:
    """The low ``width`` bytes of ``v``, big-endian (int8/16/32/64)."""
    wr_room(w, width)
    cdef uint8_t* p = w.buf + w.size
    cdef int k
    for k in range(width):
        p[k] = <uint8_t>(v >> (8 * (width - 1 - k)))
    w.size += width
    return 0


cdef inline int wr_uvarint(Writer* w, uint32_t v) except -1:
    wr_room(w, 5)
    w.size = write_uvarint32(w.buf + w.size, v) - w.buf
    return 0


cdef inline int wr_count(Writer* w, Py_ssize_t n, bint compact) except -1:
    """An array count or bytes length; -1 for null."""
    if compact:
        return wr_uvarint(w, <uint32_t>(n + 1))
    return wr_be(w, <uint32_t><int32_t>n, 4)


cdef inline int wr_raw(Writer* w, const void* data, Py_ssize_t n) except -1:
    wr_room(w, n)
    memcpy(w.buf + w.size, data, n)
    w.size += n
    return 0


cdef inline int wr_string(Writer* w, object s, bint compact) except -1:
    """A nullable string (None for null)."""
    cdef Py_ssize_t n
    cdef const char* data
    if s is None:
        if compact:
            return wr_be(w, 0, 1)
        return wr_be(w, 0xFFFF, 2)
    data = PyUnicode_AsUTF8AndSize(s, &n)
    if compact:
        wr_uvarint(w, <uint32_t>(n + 1))
    else:
        if n > 32767:
            raise ValueError(f"string of {n} bytes is too long for an int16 length")
        wr_be(w, <uint64_t>n, 2)
    return wr_raw(w, data, n)


cdef inline object wr_bytes(Writer* w):
    """What was written, as bytes."""
    return PyBytes_FromStringAndSize(<const char*>w.buf, w.size)
