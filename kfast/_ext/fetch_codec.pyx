# Fetch (API key 1) request bodies and responses, v4-v18, without the generic
# codec's message objects: the broker's Fetch fast path
# (kfast.server.fetch_fast). The generic, schema-driven codec
# (protocol_codec.pyx, schema in kfast/protocol/messages/fetch.py) stays the
# definition; tests/unit/protocol/test_fetch_codec.py checks this module
# against it: for every request this decoder accepts the generic one decodes
# the same values (or both raise INVALID_REQUEST), and the response bytes are
# the generic encoder's.
#
# Request body grammar (after the request header; "c" = compact in the
# flexible versions v12+, see protocol_codec.pyx for the primitives):
#   replica_id                int32                 v4-v14
#   max_wait_ms               int32
#   min_bytes                 int32
#   max_bytes                 int32
#   isolation_level           int8
#   session_id                int32                 v7+
#   session_epoch             int32                 v7+
#   topics                    array (c) of
#     topic                   string (c)            v4-v12
#     topic_id                uuid                  v13+
#     partitions              array (c) of
#       partition             int32
#       current_leader_epoch  int32                 v9+
#       fetch_offset          int64
#       last_fetched_epoch    int32                 v12+
#       log_start_offset      int64                 v5+
#       partition_max_bytes   int32
#       [tagged fields]       v12+: replica_directory_id (v17+), high_watermark (v18+)
#     [tagged fields]         v12+
#   forgotten_topics_data     array (c) of          v7+
#     topic                   string (c)            v7-v12
#     topic_id                uuid                  v13+
#     partitions              array (c) of int32
#     [tagged fields]         v12+
#   rack_id                   string (c)            v11+
#   [tagged fields]           v12+: cluster_id (tag 0), replica_state (tag 1, v15+:
#                             a follower's replica id)
#
# Response (header: correlation_id int32, then v12+ an empty tagged-field
# section):
#   throttle_time_ms          int32
#   error_code                int16                 v7+
#   session_id                int32                 v7+
#   responses                 array (c) of
#     topic                   string (c)            v4-v12
#     topic_id                uuid                  v13+
#     partitions              array (c) of
#       partition_index       int32
#       error_code            int16
#       high_watermark        int64
#       last_stable_offset    int64
#       log_start_offset      int64                 v5+
#       aborted_transactions  nullable array (c) of
#         producer_id         int64
#         first_offset        int64
#         [tagged fields]     v12+
#       preferred_read_replica int32                v11+
#       records               nullable records (c)
#       [tagged fields]       v12+, none written: tag 0 diverging_epoch is a
#                             follower's (never served here), tag 1
#                             current_leader (KIP-951) the generic encoder's,
#                             to which the fast path hands a response that
#                             needs it
#     [tagged fields]         v12+
#   [tagged fields]           v12+; tag 0 node_endpoints: as current_leader
#
# Every read is checked against the end of the frame and every length or
# count against the bytes that remain before anything is allocated; a
# violation raises MalformedRequestException (INVALID_REQUEST), as the
# generic decoder does. A well-formed body this module leaves to the generic
# decoder (any tagged field, a null topic name) gives None.

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyObject_CheckBuffer
from cpython.list cimport PyList_GET_SIZE, PyList_GET_ITEM
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_DECREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_SET_ITEM
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

from kfast._ext.log_append cimport LogState
from kfast._ext.wire cimport (
    Reader, Writer, malformed, rd_array, rd_be, rd_no_tags, rd_string, rd_topic_id, wr_be,
    wr_bytes, wr_count, wr_free, wr_init, wr_raw, wr_string,
)

import uuid as _uuid_module

cdef extern from "Python.h":
    ctypedef struct _TypeWithAlloc "PyTypeObject":
        PyObject* (*tp_alloc)(_TypeWithAlloc* t, Py_ssize_t n)

cdef object _UUID = _uuid_module.UUID
# The topic ids of Fetch v13+ requests, as UUIDs (wire.rd_topic_id).
cdef dict _TOPIC_IDS = {}

cdef enum:
    # First version with isolation_level (and so read_committed), sessions,
    # current_leader_epoch, the rack id, flexible encoding / last_fetched_epoch,
    # topic ids, replica_state instead of replica_id; served range.
    MIN_VERSION = 4
    LOG_START_FROM = 5
    SESSIONS_FROM = 7
    LEADER_EPOCH_FROM = 9
    RACK_FROM = 11
    FLEXIBLE_FROM = 12
    TOPIC_ID_FROM = 13
    REPLICA_STATE_FROM = 15
    MAX_VERSION = 18
    # Records and buffers of at least this many bytes go out as parts of
    # their own (protocol_codec's SEPARATE_PART_MIN: the same parts).
    SEPARATE_PART_MIN = 32768


cdef class FetchPartitionData:
    """What one partition contributes to a fetch response (the replica
    manager's read of it; kfast.server.replica_manager re-exports it). A C
    object: a caught-up long poll makes one per partition it names."""
    cdef public int error_code
    cdef public int64_t high_watermark
    cdef public int64_t last_stable_offset
    cdef public int64_t log_start_offset
    # FileRegion, a buffer, or None
    cdef public object records
    # [(producer id, first offset)] or None
    cdef public object aborted_transactions
    cdef public Py_ssize_t size
    # (epoch, end offset) where a follower's log leaves this leader's, or None.
    cdef public object diverging_epoch
    # KIP-392: the replica the consumer should fetch from instead (-1: none).
    cdef public int32_t preferred_read_replica

    def __init__(self, int error_code=0, int64_t high_watermark=-1,
                 int64_t last_stable_offset=-1, int64_t log_start_offset=-1,
                 records=None, aborted_transactions=None, diverging_epoch=None):
        self.error_code = error_code
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        self.records = records
        self.aborted_transactions = aborted_transactions
        self.size = 0 if records is None else len(records)
        self.diverging_epoch = diverging_epoch
        self.preferred_read_replica = -1


# A consumer's reads (kfast.server.replica_manager): a caught-up long poll's
# partitions are answered here without a Python frame, by the one definition
# of the caught-up case (read_caught_up); every other read is the replica
# manager's Python.

cdef enum:
    # isolation_level's wire value for read_committed (kfast.server.partition
    # names it), and "the client does not know the leader epoch".
    READ_COMMITTED = 1
    NO_EPOCH = -1


cpdef object read_caught_up(object partition, int64_t fetch_offset,
                            int32_t current_leader_epoch, int isolation_level):
    """A consumer's read of ``partition`` at ``fetch_offset`` when it is
    caught up: the offset is the high watermark (read_uncommitted) or the
    last stable offset (read_committed), the log is online and this broker
    leads the partition at the epoch the consumer knows (or it knows none).
    There is nothing to read, so the answer is the offsets alone
    (FetchPartitionData without records; read_committed's empty aborted
    list). None for anything else -- records to read, an error to raise
    (not the leader, a fenced or unknown epoch, an offset out of range, an
    offline log), a follower that may serve the read (KIP-392) -- which is
    the full read's (ReplicaManager._read_partition, Partition.read_records,
    Log.read). The rules of the caught-up case, in one place: the replica
    manager's Python read asks this first too."""
    log_object = partition.log
    if not isinstance(log_object, LogState):
        return None
    cdef LogState log = <LogState>log_object
    if log.offline:
        return None
    cdef int64_t high_watermark = log.high_watermark
    cdef int64_t last_stable = log.last_stable()
    cdef int64_t log_start = log.log_start_offset
    if fetch_offset != (last_stable if isolation_level == READ_COMMITTED else high_watermark) \
            or fetch_offset < log_start:
        return None
    # Partition.is_leader and check_leader_epoch's "nothing to raise".
    if <int32_t>partition.leader_id != <int32_t>partition.node_id:
        return None
    if current_leader_epoch != NO_EPOCH \
            and current_leader_epoch != <int32_t>partition.leader_epoch:
        return None
    cdef FetchPartitionData data = FetchPartitionData.__new__(FetchPartitionData)
    data.high_watermark = high_watermark
    data.last_stable_offset = last_stable
    data.log_start_offset = log_start
    data.aborted_transactions = [] if isolation_level == READ_COMMITTED else None
    data.preferred_read_replica = -1
    return data


def read_partitions(dict partitions, object requests, object params, bint caught_up_here,
                    object read_partition):
    """ReplicaManager.read_from_local_log's loop: each of ``requests``
    (PartitionFetchRequest) in order within the response's byte budget
    (``params``: FetchParams), as (results, total bytes, has_error). A
    partition's read is read_caught_up's answer when ``caught_up_here`` (a
    consumer's fetch without a rack-aware selector's say) and it has one,
    else ``read_partition(params, request, limit, min_one_message)``
    (``limit``: what is left of the budget). The first partition with data
    may exceed the budget by one batch (KIP-74) unless the hard limit
    applies; later ones stop at it."""
    cdef int64_t limit = params.max_bytes
    cdef bint min_one_message = not params.hard_max_bytes_limit
    cdef int isolation_level = params.isolation_level
    cdef list results = []
    cdef int64_t total = 0
    cdef bint has_error = False
    cdef FetchPartitionData data
    for request in requests:
        found = None
        if caught_up_here:
            partition = partitions.get(request[0])
            if partition is not None:
                found = read_caught_up(partition, request[1], request[3], isolation_level)
        if found is None:
            found = read_partition(params, request, limit, min_one_message)
        data = <FetchPartitionData?>found
        if data.error_code or data.diverging_epoch is not None:
            has_error = True  # something to report at once
        elif data.size:
            min_one_message = False
            limit = max(0, limit - data.size)
            total += data.size
        results.append((request, data))
    return results, total, has_error


cdef inline object _topic(Reader* r, bint by_id, bint compact):
    """A topic's id (v13+, a UUID) or name; None for a null name (the
    generic decoder's to answer)."""
    if by_id:
        return rd_topic_id(r, _TOPIC_IDS, _UUID)
    return rd_string(r, compact)


def decode_fetch_request(frame, Py_ssize_t offset, int version):
    """The Fetch request body at ``frame[offset:]`` (``version`` 4-18):
    (replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level,
    session_id, session_epoch, topics, forgotten_topics, rack_id), with the
    schema's defaults for fields the version lacks. ``topics``: a list of
    (name, or topic id from v13, [(partition, current_leader_epoch,
    fetch_offset, last_fetched_epoch, log_start_offset,
    partition_max_bytes), ...]); ``forgotten_topics``: (name or topic id,
    [partition, ...]). None: well formed, or not, but for the generic
    decoder (a version outside 4-18, tagged fields, a null topic name)."""
    if version < MIN_VERSION or version > MAX_VERSION:
        return None
    cdef bint compact = version >= FLEXIBLE_FROM
    cdef bint by_id = version >= TOPIC_ID_FROM
    cdef Py_buffer pb
    cdef Reader r
    cdef Py_ssize_t topic_count, part_count, i, j
    cdef int32_t replica_id = -1, max_wait_ms, min_bytes, max_bytes
    cdef int32_t session_id = 0, session_epoch = -1
    cdef int8_t isolation_level
    cdef int32_t partition, current_leader_epoch, last_fetched_epoch, partition_max_bytes
    cdef int64_t fetch_offset, log_start_offset
    cdef list topics, parts, forgotten, indexes
    PyObject_GetBuffer(frame, &pb, PyBUF_SIMPLE)
    try:
        if offset < 0 or offset > pb.len:
            malformed(f"offset {offset} outside a buffer of {pb.len} bytes")
        r.start = <const uint8_t*>pb.buf
        r.p = r.start + offset
        r.end = r.start + pb.len
        if version < REPLICA_STATE_FROM:
            replica_id = <int32_t>rd_be(&r, 4)
        max_wait_ms = <int32_t>rd_be(&r, 4)
        min_bytes = <int32_t>rd_be(&r, 4)
        max_bytes = <int32_t>rd_be(&r, 4)
        isolation_level = <int8_t>rd_be(&r, 1)
        if version >= SESSIONS_FROM:
            session_id = <int32_t>rd_be(&r, 4)
            session_epoch = <int32_t>rd_be(&r, 4)
        # A topic takes at least 2 bytes (empty name, empty array).
        topic_count = rd_array(&r, compact, 2, "topics")
        topics = []
        for i in range(topic_count):
            name = _topic(&r, by_id, compact)
            if name is None:
                return None
            # A partition takes at least 16 bytes (v4: int32, int64, int32).
            part_count = rd_array(&r, compact, 16, "partitions")
            parts = []
            for j in range(part_count):
                partition = <int32_t>rd_be(&r, 4)
                current_leader_epoch = -1
                if version >= LEADER_EPOCH_FROM:
                    current_leader_epoch = <int32_t>rd_be(&r, 4)
                fetch_offset = <int64_t>rd_be(&r, 8)
                last_fetched_epoch = -1
                if compact:
                    last_fetched_epoch = <int32_t>rd_be(&r, 4)
                log_start_offset = -1
                if version >= LOG_START_FROM:
                    log_start_offset = <int64_t>rd_be(&r, 8)
                partition_max_bytes = <int32_t>rd_be(&r, 4)
                if compact and not rd_no_tags(&r):
                    return None
                parts.append((partition, current_leader_epoch, fetch_offset,
                              last_fetched_epoch, log_start_offset, partition_max_bytes))
            if compact and not rd_no_tags(&r):
                return None
            topics.append((name, parts))
        forgotten = []
        if version >= SESSIONS_FROM:
            topic_count = rd_array(&r, compact, 2, "forgotten_topics_data")
            for i in range(topic_count):
                name = _topic(&r, by_id, compact)
                if name is None:
                    return None
                part_count = rd_array(&r, compact, 4, "partitions")
                indexes = []
                for j in range(part_count):
                    indexes.append(<int32_t>rd_be(&r, 4))
                if compact and not rd_no_tags(&r):
                    return None
                forgotten.append((name, indexes))
        rack_id = ""
        if version >= RACK_FROM:
            rack_id = rd_string(&r, compact)
            if rack_id is None:
                return None
        if compact and not rd_no_tags(&r):
            return None
        return (replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, session_id,
                session_epoch, topics, forgotten, rack_id)
    finally:
        PyBuffer_Release(&pb)


cdef inline int _put(object request, Py_ssize_t i, object value) except -1:
    Py_INCREF(value)  # PyTuple_SET_ITEM steals a reference
    PyTuple_SET_ITEM(request, i, value)
    return 0


def partition_requests(type cls, object name, list partitions, object last_fetched_epoch,
                       object log_start_offset):
    """The read requests of one topic's ``partitions`` (as decode_fetch_request
    gives them): ``cls`` (kfast.server.replica_manager.PartitionFetchRequest, a
    named tuple of 6) instances ((name, partition), fetch_offset,
    partition_max_bytes, current_leader_epoch, last_fetched_epoch,
    log_start_offset), the last two given (a consumer's read ignores what
    it sent). Built in C as tuple.__new__ builds a tuple subtype's instance
    (the named tuple's own __new__ is a Python frame per partition)."""
    if not issubclass(cls, tuple) or cls.__basicsize__ != tuple.__basicsize__:
        raise TypeError(f"{cls!r} is not a tuple type without fields of its own")
    cdef list out = []
    cdef tuple item
    cdef PyObject* allocated
    cdef object request
    for item in partitions:
        allocated = (<_TypeWithAlloc*>cls).tp_alloc(<_TypeWithAlloc*>cls, 6)
        if allocated == NULL:
            raise MemoryError()
        request = <object>allocated
        Py_DECREF(request)  # the allocation's reference; ``request`` holds one
        _put(request, 0, (name, item[0]))
        _put(request, 1, item[2])  # fetch_offset
        _put(request, 2, item[5])  # partition_max_bytes
        _put(request, 3, item[1])  # current_leader_epoch
        _put(request, 4, last_fetched_epoch)
        _put(request, 5, log_start_offset)
        out.append(request)
    return out


cdef int _part(Writer* w, list parts, object piece) except -1:
    """``piece`` as a part of its own, after what is written so far."""
    if w.size:
        parts.append(wr_bytes(w))
        w.size = 0
    parts.append(piece)
    return 0


cdef int _records(Writer* w, list parts, object records, bint compact) except -1:
    """The length prefix and the bytes: a record region (FileRegion:
    ``length`` bytes sent by sendfile) as a part of its own, a buffer inline
    unless large. None writes an empty record set, as the generic path
    answers one."""
    cdef Py_buffer pb
    if records is None:
        return wr_count(w, 0, compact)
    if not PyObject_CheckBuffer(records):
        wr_count(w, records.length, compact)
        return _part(w, parts, records)
    PyObject_GetBuffer(records, &pb, PyBUF_SIMPLE)
    try:
        wr_count(w, pb.len, compact)
        if pb.len >= SEPARATE_PART_MIN:
            _part(w, parts, records)
        else:
            wr_raw(w, pb.buf, pb.len)
    finally:
        PyBuffer_Release(&pb)
    return 0


cdef inline object _topic_at(list results, Py_ssize_t i):
    """The topic name of ``results[i]``'s request (its key's first half)."""
    return (<object>PyTuple_GET_ITEM(<object>PyList_GET_ITEM(results, i), 0)).key[0]


def encode_fetch_response(int version, int32_t correlation_id, int16_t error_code,
                          int32_t session_id, list results, dict topic_ids):
    """The response header and body (no size prefix) for ``version`` 4-18,
    throttle time 0, as parts (bytes, and each record region as it goes to
    the socket). ``results``: [(PartitionFetchRequest, FetchPartitionData)]
    in request order, the partitions of one topic consecutive;
    ``topic_ids``: topic name -> id (v13+ answers by id)."""
    if version < MIN_VERSION or version > MAX_VERSION:
        raise ValueError(f"Fetch v{version} is not encoded here")
    cdef bint compact = version >= FLEXIBLE_FROM
    cdef bint by_id = version >= TOPIC_ID_FROM
    cdef Writer w
    cdef list parts = []
    cdef Py_ssize_t n = PyList_GET_SIZE(results), i, k, run, count_at
    cdef object topic = None, name, key, aborted, pair
    cdef FetchPartitionData data
    wr_init(&w, 512)
    try:
        wr_be(&w, <uint32_t>correlation_id, 4)
        if compact:
            wr_be(&w, 0, 1)
        wr_be(&w, 0, 4)  # throttle_time_ms
        if version >= SESSIONS_FROM:
            wr_be(&w, <uint16_t>error_code, 2)
            wr_be(&w, <uint32_t>session_id, 4)
        # Topics: runs of results with the same topic name.
        run = 0
        for i in range(n):
            name = _topic_at(results, i)
            if i == 0 or name != topic:
                run += 1
            topic = name
        wr_count(&w, run, compact)
        i = 0
        while i < n:
            topic = _topic_at(results, i)
            if by_id:
                raw = topic_ids[topic].bytes
                wr_raw(&w, <const char*>raw, 16)
            else:
                wr_string(&w, topic, compact)
            count_at = i + 1
            while count_at < n and _topic_at(results, count_at) == topic:
                count_at += 1
            wr_count(&w, count_at - i, compact)
            for k in range(i, count_at):
                pair = <object>PyList_GET_ITEM(results, k)
                key = (<object>PyTuple_GET_ITEM(pair, 0)).key
                data = <FetchPartitionData?>PyTuple_GET_ITEM(pair, 1)
                wr_be(&w, <uint32_t><int32_t>key[1], 4)
                wr_be(&w, <uint16_t><int16_t>data.error_code, 2)
                wr_be(&w, <uint64_t><int64_t>data.high_watermark, 8)
                wr_be(&w, <uint64_t><int64_t>data.last_stable_offset, 8)
                if version >= LOG_START_FROM:
                    wr_be(&w, <uint64_t><int64_t>data.log_start_offset, 8)
                aborted = data.aborted_transactions
                if aborted is None:
                    wr_count(&w, -1, compact)
                else:
                    wr_count(&w, len(aborted), compact)
                    for producer_id, first_offset in aborted:
                        wr_be(&w, <uint64_t><int64_t>producer_id, 8)
                        wr_be(&w, <uint64_t><int64_t>first_offset, 8)
                        if compact:
                            wr_be(&w, 0, 1)
                if version >= RACK_FROM:
                    wr_be(&w, <uint32_t><int32_t>data.preferred_read_replica, 4)
                _records(&w, parts, data.records, compact)
                if compact:
                    wr_be(&w, 0, 1)
            if compact:
                wr_be(&w, 0, 1)
            i = count_at
        if compact:
            wr_be(&w, 0, 1)
        if w.size or not parts:
            parts.append(wr_bytes(&w))
        return parts
    finally:
        wr_free(&w)
