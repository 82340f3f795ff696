# Produce (API key 0) request bodies and responses, v3-v13, without the
# generic codec's message objects: the broker's Produce fast path
# (kfast.server.produce_fast). The generic, schema-driven codec
# (protocol_codec.pyx, schema in kfast/protocol/messages/produce.py) stays the
# definition; tests/protocol/test_produce_codec.py checks this module against
# it byte for byte, and for every input this decoder accepts the generic one
# decodes the same values.
#
# Request body grammar (after the request header; "c" = compact in the
# flexible versions v9+, see protocol_codec.pyx for the primitives):
#   transactional_id  nullable string (c)
#   acks              int16
#   timeout_ms        int32
#   topic_data        array (c) of
#     name            string (c)            v3-v12
#     topic_id        uuid                  v13+
#     partition_data  array (c) of
#       index         int32
#       records       nullable records (c)
#       [tagged fields]                     v9+
#     [tagged fields]                       v9+
#   [tagged fields]                         v9+
#
# Response (header: correlation_id int32, then v9+ an empty tagged-field
# section):
#   responses                array (c) of
#     name                   string (c)     v3-v12
#     topic_id               uuid           v13+
#     partition_responses    array (c) of
#       index                int32
#       error_code           int16
#       base_offset          int64
#       log_append_time_ms   int64
#       log_start_offset     int64          v5+
#       record_errors        array (c)      v8+ of
#         batch_index                int32
#         batch_index_error_message  nullable string (c)
#         [tagged fields]                   v9+
#       error_message        nullable string (c)  v8+
#       [tagged fields]      v9+; tag 0 current_leader (KIP-951) is never
#                            written here: the fast path hands a response
#                            that needs it to the generic encoder
#     [tagged fields]                       v9+
#   throttle_time_ms         int32
#   [tagged fields]          v9+; tag 0 node_endpoints: as current_leader
#
# Every read is checked against the end of the frame and every length or
# count against the bytes that remain before anything is allocated; a
# violation raises MalformedRequestException (INVALID_REQUEST), as the
# generic decoder does. A well-formed body this module leaves to the generic
# decoder (tagged fields present, a null topic name) gives None.

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy
from libc.stdlib cimport malloc, realloc, free

from kfast._ext.varint cimport read_uvarint32, write_uvarint32, VARINT_OK
from kfast._ext.views cimport view_slice

import uuid as _uuid_module

from kfast.protocol.errors import MalformedRequestException as _Malformed

cdef extern from "Python.h":
    object PyMemoryView_FromObject(object o)
    Py_buffer* PyMemoryView_GET_BUFFER(object mv)
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL

cdef object _UUID = _uuid_module.UUID

# First flexible version, first version with topic ids, served range.
cdef enum:
    FLEXIBLE_FROM = 9
    TOPIC_ID_FROM = 13
    MIN_VERSION = 3
    MAX_VERSION = 13


cdef class PartitionResult:
    """One partition of the response: what ReplicaManager.append_records
    fills in (kfast.server.delayed_produce.PartitionProduceResult), with the
    schema's defaults."""
    cdef public int32_t index
    cdef public int error_code
    cdef public int64_t base_offset
    cdef public int64_t log_append_time_ms
    cdef public int64_t log_start_offset
    cdef public object error_message
    cdef public object record_errors

    def __init__(self, int32_t index):
        self.index = index
        self.error_code = 0
        self.base_offset = -1
        self.log_append_time_ms = -1
        self.log_start_offset = -1
        self.error_message = None
        self.record_errors = []


cdef class _In:
    cdef const uint8_t* start
    cdef const uint8_t* p
    cdef const uint8_t* end

    cdef inline int need(self, Py_ssize_t n) except -1:
        if n < 0 or self.end - self.p < n:
            raise _Malformed(f"truncated at byte {self.p - self.start}: need {n} more, "
                             f"{self.end - self.p} remain")
        return 0

    cdef inline uint32_t uvarint(self) except? 0xFFFFFFFF:
        cdef uint32_t v
        if read_uvarint32(&self.p, self.end, &v) != VARINT_OK:
            raise _Malformed(f"bad unsigned varint at byte {self.p - self.start}")
        return v

    cdef inline uint64_t be(self, int width) except? 0xFFFFFFFFFFFFFFFF:
        """A big-endian unsigned integer of ``width`` bytes."""
        self.need(width)
        cdef uint64_t v = 0
        cdef int k
        for k in range(width):
            v = (v << 8) | self.p[k]
        self.p += width
        return v

    cdef inline Py_ssize_t length(self, bint compact) except -2:
        """A string/bytes length or array count: -1 for null."""
        if compact:
            return <Py_ssize_t>self.uvarint() - 1
        return <int32_t>self.be(4)

    cdef inline Py_ssize_t count(self, bint compact, Py_ssize_t min_size) except -2:
        """An array count, checked against the bytes left (each element
        takes at least ``min_size``); -1 for null."""
        cdef Py_ssize_t n = self.length(compact)
        if n < -1:
            raise _Malformed(f"invalid array length {n}")
        if n > 0 and n > (self.end - self.p) // min_size:
            raise _Malformed(f"array of {n} elements exceeds the {self.end - self.p} "
                             f"bytes that remain")
        return n

    cdef inline object string(self, bint compact):
        cdef Py_ssize_t n
        if compact:
            n = <Py_ssize_t>self.uvarint() - 1
        else:
            n = <int16_t>self.be(2)
        if n == -1:
            return None
        if n < 0:
            raise _Malformed(f"invalid string length {n}")
        self.need(n)
        # Invalid UTF-8 decodes with U+FFFD, as the generic codec (and Java's String).
        s = PyUnicode_DecodeUTF8(<const char*>self.p, n, "replace")
        self.p += n
        return s

    cdef inline bint no_tags(self) except -1:
        """The tagged-field section: True if empty (the only case served)."""
        return self.uvarint() == 0


def decode_produce_request(frame, Py_ssize_t offset, int version):
    """The Produce request body at ``frame[offset:]`` (``version`` 3-13):
    (transactional_id, acks, timeout_ms, topics), topics a list of (name, or
    topic id from v13, [(index, records), ...]), records a memoryview slice
    of ``frame`` or None. None: well formed, but for the generic decoder."""
    if version < MIN_VERSION or version > MAX_VERSION:
        return None
    cdef bint compact = version >= FLEXIBLE_FROM
    cdef bint by_id = version >= TOPIC_ID_FROM
    cdef Py_buffer pb
    cdef _In r = _In.__new__(_In)
    cdef Py_ssize_t topic_count, part_count, n, i, j
    cdef int16_t acks
    cdef int32_t timeout_ms, index
    PyObject_GetBuffer(frame, &pb, PyBUF_SIMPLE)
    try:
        if offset < 0 or offset > pb.len:
            raise _Malformed(f"offset {offset} outside a buffer of {pb.len} bytes")
        view = PyMemoryView_FromObject(frame)
        if view.ndim != 1 or view.itemsize != 1:
            view = view.cast("B")
        r.start = <const uint8_t*>pb.buf
        r.p = r.start + offset
        r.end = r.start + pb.len
        transactional_id = r.string(compact)
        acks = <int16_t>r.be(2)
        timeout_ms = <int32_t>r.be(4)
        # A topic takes at least 3 bytes (empty name or 16-byte id, empty array).
        topic_count = r.count(compact, 2)
        if topic_count < 0:
            raise _Malformed("non-nullable field topic_data was serialized as null")
        topics = []
        for i in range(topic_count):
            if by_id:
                r.need(16)
                name = _UUID(bytes=PyBytes_FromStringAndSize(<const char*>r.p, 16))
                r.p += 16
            else:
                name = r.string(compact)
                if name is None:
                    return None
            part_count = r.count(compact, 5)
            if part_count < 0:
                raise _Malformed("non-nullable field partition_data was serialized as null")
            parts = []
            for j in range(part_count):
                index = <int32_t>r.be(4)
                n = r.length(compact)
                if n == -1:
                    records = None
                elif n < 0:
                    raise _Malformed(f"invalid records length {n}")
                else:
                    r.need(n)
                    records = view_slice(view, r.p - r.start, n)
                    r.p += n
                if compact and not r.no_tags():
                    return None
                parts.append((index, records))
            if compact and not r.no_tags():
                return None
            topics.append((name, parts))
        if compact and not r.no_tags():
            return None
        return transactional_id, acks, timeout_ms, topics
    finally:
        PyBuffer_Release(&pb)


cdef class _Out:
    cdef uint8_t* buf
    cdef Py_ssize_t size
    cdef Py_ssize_t cap

    def __cinit__(self):
        self.cap = 256
        self.buf = <uint8_t*>malloc(self.cap)
        if self.buf == NULL:
            raise MemoryError()
        self.size = 0

    def __dealloc__(self):
        free(self.buf)

    cdef inline int room(self, Py_ssize_t n) except -1:
        cdef uint8_t* grown
        cdef Py_ssize_t cap = self.cap
        if self.size + n <= cap:
            return 0
        while cap < self.size + n:
            cap *= 2
        grown = <uint8_t*>realloc(self.buf, cap)
        if grown == NULL:
            raise MemoryError()
        self.buf = grown
        self.cap = cap
        return 0

    cdef inline int be(self, uint64_t v, int width) except -1:
        """The low ``width`` bytes of ``v``, big-endian (int8/16/32/64)."""
        self.room(width)
        cdef uint8_t* p = self.buf + self.size
        cdef int k
        for k in range(width):
            p[k] = <uint8_t>(v >> (8 * (width - 1 - k)))
        self.size += width
        return 0

    cdef inline int uvarint(self, uint32_t v) except -1:
        self.room(5)
        self.size = write_uvarint32(self.buf + self.size, v) - self.buf
        return 0

    cdef inline int count(self, Py_ssize_t n, bint compact) except -1:
        if compact:
            self.uvarint(<uint32_t>(n + 1))
        else:
            self.be(<uint32_t>n, 4)
        return 0

    cdef inline int string(self, object s, bint compact) except -1:
        cdef Py_ssize_t n
        cdef const char* data
        if s is None:
            if compact:
                return self.be(0, 1)
            return self.be(0xFFFF, 2)
        data = PyUnicode_AsUTF8AndSize(s, &n)
        if compact:
            self.uvarint(<uint32_t>(n + 1))
        else:
            if n > 32767:
                raise ValueError(f"string of {n} bytes is too long for an int16 length")
            self.be(<uint64_t>n, 2)
        self.room(n)
        memcpy(self.buf + self.size, data, n)
        self.size += n
        return 0


def encode_produce_response(int version, int32_t correlation_id, int32_t throttle_time_ms,
                            list topics):
    """The response header and body (no size prefix) for ``version`` 3-13:
    ``topics`` a list of (name, or topic id from v13, [result, ...]), each
    result a PartitionResult; record_errors items have batch_index and
    batch_index_error_message."""
    if version < MIN_VERSION or version > MAX_VERSION:
        raise ValueError(f"Produce v{version} is not encoded here")
    cdef bint compact = version >= FLEXIBLE_FROM
    cdef bint by_id = version >= TOPIC_ID_FROM
    cdef _Out w = _Out()
    cdef PartitionResult result
    cdef list parts
    cdef Py_ssize_t n
    w.be(<uint32_t>correlation_id, 4)
    if compact:
        w.be(0, 1)
    w.count(len(topics), compact)
    for name, parts in topics:
        if by_id:
            raw = name.bytes
            w.room(16)
            memcpy(w.buf + w.size, <const char*>raw, 16)
            w.size += 16
        else:
            w.string(name, compact)
        w.count(len(parts), compact)
        for result in parts:
            w.be(<uint32_t>result.index, 4)
            w.be(<uint16_t>result.error_code, 2)
            w.be(<uint64_t>result.base_offset, 8)
            w.be(<uint64_t>result.log_append_time_ms, 8)
            if version >= 5:
                w.be(<uint64_t>result.log_start_offset, 8)
            if version >= 8:
                errors = result.record_errors
                w.count(len(errors), compact)
                for error in errors:
                    w.be(<uint32_t><int32_t>error.batch_index, 4)
                    w.string(error.batch_index_error_message, compact)
                    if compact:
                        w.be(0, 1)
                w.string(result.error_message, compact)
            if compact:
                w.be(0, 1)
        if compact:
            w.be(0, 1)
    w.be(<uint32_t>throttle_time_ms, 4)
    if compact:
        w.be(0, 1)
    return PyBytes_FromStringAndSize(<const char*>w.buf, w.size)
