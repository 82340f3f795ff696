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
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

from kfast._ext.views cimport view_slice
from kfast._ext.wire cimport (
    Reader, Writer, malformed, rd_array, rd_be, rd_length, rd_need, rd_no_tags, rd_string,
    rd_topic_id, wr_be, wr_bytes, wr_count, wr_free, wr_init, wr_raw, wr_string,
)

import uuid as _uuid_module

cdef extern from "Python.h":
    object PyMemoryView_FromObject(object o)
    Py_buffer* PyMemoryView_GET_BUFFER(object mv)

cdef object _UUID = _uuid_module.UUID
# The topic ids of Produce v13+ requests, as UUIDs (wire.rd_topic_id).
cdef dict _TOPIC_IDS = {}

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
    cdef Reader r
    cdef Py_ssize_t topic_count, part_count, n, i, j
    cdef int16_t acks
    cdef int32_t timeout_ms, index
    PyObject_GetBuffer(frame, &pb, PyBUF_SIMPLE)
    try:
        if offset < 0 or offset > pb.len:
            malformed(f"offset {offset} outside a buffer of {pb.len} bytes")
        view = PyMemoryView_FromObject(frame)
        if view.ndim != 1 or view.itemsize != 1:
            view = view.cast("B")
        r.start = <const uint8_t*>pb.buf
        r.p = r.start + offset
        r.end = r.start + pb.len
        transactional_id = rd_string(&r, compact)
        acks = <int16_t>rd_be(&r, 2)
        timeout_ms = <int32_t>rd_be(&r, 4)
        # A topic takes at least 3 bytes (empty name or 16-byte id, empty array).
        topic_count = rd_array(&r, compact, 2, "topic_data")
        topics = []
        for i in range(topic_count):
            if by_id:
                name = rd_topic_id(&r, _TOPIC_IDS, _UUID)
            else:
                name = rd_string(&r, compact)
                if name is None:
                    return None
            part_count = rd_array(&r, compact, 5, "partition_data")
            parts = []
            for j in range(part_count):
                index = <int32_t>rd_be(&r, 4)
                n = rd_length(&r, compact)
                if n == -1:
                    records = None
                elif n < 0:
                    malformed(f"invalid records length {n}")
                else:
                    rd_need(&r, n)
                    records = view_slice(view, r.p - r.start, n)
                    r.p += n
                if compact and not rd_no_tags(&r):
                    return None
                parts.append((index, records))
            if compact and not rd_no_tags(&r):
                return None
            topics.append((name, parts))
        if compact and not rd_no_tags(&r):
            return None
        return transactional_id, acks, timeout_ms, topics
    finally:
        PyBuffer_Release(&pb)


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
    cdef Writer w
    cdef PartitionResult result
    cdef list parts
    cdef Py_ssize_t n
    wr_init(&w, 256)
    try:
        wr_be(&w, <uint32_t>correlation_id, 4)
        if compact:
            wr_be(&w, 0, 1)
        wr_count(&w, len(topics), compact)
        for name, parts in topics:
            if by_id:
                raw = name.bytes
                wr_raw(&w, <const char*>raw, 16)
            else:
                wr_string(&w, name, compact)
            wr_count(&w, len(parts), compact)
            for result in parts:
                wr_be(&w, <uint32_t>result.index, 4)
                wr_be(&w, <uint16_t>result.error_code, 2)
                wr_be(&w, <uint64_t>result.base_offset, 8)
                wr_be(&w, <uint64_t>result.log_append_time_ms, 8)
                if version >= 5:
                    wr_be(&w, <uint64_t>result.log_start_offset, 8)
                if version >= 8:
                    errors = result.record_errors
                    wr_count(&w, len(errors), compact)
                    for error in errors:
                        wr_be(&w, <uint32_t><int32_t>error.batch_index, 4)
                        wr_string(&w, error.batch_index_error_message, compact)
                        if compact:
                            wr_be(&w, 0, 1)
                    wr_string(&w, result.error_message, compact)
                if compact:
                    wr_be(&w, 0, 1)
            if compact:
                wr_be(&w, 0, 1)
        wr_be(&w, <uint32_t>throttle_time_ms, 4)
        if compact:
            wr_be(&w, 0, 1)
        return wr_bytes(&w)
    finally:
        wr_free(&w)
