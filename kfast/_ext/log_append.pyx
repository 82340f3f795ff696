"""Log append kernel: validate, assign offsets to and summarise a payload of
record batches in one call (grammar and the order of checks: log_append.pxd).

Log.append_* calls ``BatchScan.scan`` once per request instead of making a
RecordBatch view and a dozen attribute reads per batch; Python keeps policy
(roll decisions, producer state, configs, error messages with topic names)
and reads the summary from the scan's attributes. A failed scan returns a
status and leaves the numbers its message needs in ``error_*``: the log turns
them into the Kafka exception, because only it knows the partition's name.
"""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_WRITABLE
from cpython.bytearray cimport PyByteArray_CheckExact
from cpython.list cimport PyList_CheckExact, PyList_GET_ITEM, PyList_GET_SIZE
from cpython.memoryview cimport PyMemoryView_Check, PyMemoryView_GET_BUFFER
from cpython.mem cimport PyMem_Realloc, PyMem_Free
from libc.stdint cimport (
    int8_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, INT32_MAX, INT64_MIN,
    INT64_MAX,
)

from kfast._ext.batch cimport (
    load_be16, load_be32, load_be64, store_be32, store_be64, patch_batch_header,
)
from kfast._ext.layout cimport (
    LENGTH_OFFSET, PARTITION_LEADER_EPOCH_OFFSET, MAGIC_OFFSET, CRC_OFFSET,
    ATTRIBUTES_OFFSET, LAST_OFFSET_DELTA_OFFSET, BASE_TIMESTAMP_OFFSET,
    MAX_TIMESTAMP_OFFSET, PRODUCER_ID_OFFSET, RECORDS_COUNT_OFFSET,
    RECORD_BATCH_OVERHEAD, LOG_OVERHEAD, MIN_BATCH_LENGTH, CURRENT_MAGIC,
    TRANSACTIONAL_FLAG_MASK, CONTROL_FLAG_MASK,
    OFFSET_INDEX_ENTRY_SIZE, OFFSET_INDEX_RELATIVE_OFFSET_AT, OFFSET_INDEX_POSITION_AT,
    TIME_INDEX_ENTRY_SIZE, TIME_INDEX_TIMESTAMP_AT, TIME_INDEX_RELATIVE_OFFSET_AT,
    INDEX_RELATIVE_OFFSET_MAX,
)
from kfast._ext.crc32c cimport crc32c_update
from cpython.exc cimport PyErr_CheckSignals
from libc.errno cimport errno, EINTR, EIO
from libc.string cimport strerror
from posix.types cimport off_t
from posix.unistd cimport pwrite, ftruncate

# Python-visible copies of the statuses (log.py maps them to exceptions).
OK = SCAN_OK
TRUNCATED = SCAN_TRUNCATED
LEGACY_MAGIC = SCAN_LEGACY_MAGIC
UNKNOWN_MAGIC = SCAN_UNKNOWN_MAGIC
BATCH_TOO_SMALL = SCAN_BATCH_TOO_SMALL
BATCH_TRUNCATED = SCAN_BATCH_TRUNCATED
TOO_LARGE = SCAN_TOO_LARGE
BAD_CRC = SCAN_BAD_CRC
CONTROL_FROM_CLIENT = SCAN_CONTROL_FROM_CLIENT
BAD_RECORDS_COUNT = SCAN_BAD_RECORDS_COUNT
TRANSACTIONAL_WITHOUT_PRODUCER_ID = SCAN_TRANSACTIONAL_WITHOUT_PRODUCER_ID
BAD_TIMESTAMP = SCAN_BAD_TIMESTAMP
OUT_OF_ORDER = SCAN_OUT_OF_ORDER
APPENDED = SCAN_APPENDED

cdef extern from "<time.h>" nogil:
    ctypedef long time_t
    cdef struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int clk_id, timespec* tp)
    int CLOCK_REALTIME


cdef inline int64_t _clock_ms() noexcept:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


def now_ms():
    """Wall-clock time in milliseconds (time.time_ns() // 1_000_000): the
    log's default clock, read in C by its append."""
    return _clock_ms()


# Who appends (Kafka's AppendOrigin): a producer's batches are validated as a
# client's, the coordinators' own records and replicated batches are not.
ORIGIN_CLIENT = "client"
ORIGIN_REPLICATION = "replication"
ORIGIN_COORDINATOR = "coordinator"

# Above this a batch's CRC pass runs with the GIL released (the flush and
# retention threads keep going); below it releasing costs more than it lends.
cdef Py_ssize_t _NOGIL_CRC_BYTES = 64 * 1024
# The same for append_to_segment's pwrite (measured: bench/README.md).
cdef Py_ssize_t _NOGIL_WRITE_BYTES = 64 * 1024


cdef extern from *:
    """
    /* A LogAppendInfo: an instance of the tuple subclass ``cls`` (a
       NamedTuple; a plain tuple when ``cls`` is None) built as CPython's
       tuple_subtype_new builds one, without the call machinery or a
       temporary tuple. */
    static PyObject* kfast_append_info(PyObject* cls, int64_t first_offset,
                                       int64_t last_offset, int64_t max_timestamp,
                                       int64_t offset_of_max_timestamp,
                                       int64_t log_append_time, PyObject* log_start_offset,
                                       int64_t records_count, int64_t valid_bytes) {
        PyObject* out;
        PyObject* item;
        int64_t values[8];
        int i;
        values[0] = first_offset; values[1] = last_offset; values[2] = max_timestamp;
        values[3] = offset_of_max_timestamp; values[4] = log_append_time;
        values[6] = records_count; values[7] = valid_bytes;
        out = cls == Py_None ? PyTuple_New(9)
                             : ((PyTypeObject*)cls)->tp_alloc((PyTypeObject*)cls, 9);
        if (out == NULL)
            return NULL;
        for (i = 0; i < 8; i++) {
            if (i == 5) {
                item = log_start_offset;
                Py_INCREF(item);
            } else if ((item = PyLong_FromLongLong(values[i])) == NULL) {
                Py_DECREF(out);
                return NULL;
            }
            PyTuple_SET_ITEM(out, i, item);
        }
        Py_INCREF(Py_False);
        PyTuple_SET_ITEM(out, 8, Py_False);   /* duplicate */
        return out;
    }
    """
    object kfast_append_info(object cls, int64_t first_offset, int64_t last_offset,
                             int64_t max_timestamp, int64_t offset_of_max_timestamp,
                             int64_t log_append_time, object log_start_offset,
                             int64_t records_count, int64_t valid_bytes)


cdef int _hold_index_buffers(offset_index, time_index, Py_buffer* oview,
                             Py_buffer* tview) except -1:
    """Hold both index buffers writable (both or, raising, neither)."""
    PyObject_GetBuffer(offset_index, oview, PyBUF_WRITABLE)
    try:
        PyObject_GetBuffer(time_index, tview, PyBUF_WRITABLE)
    except BaseException:
        PyBuffer_Release(oview)
        raise
    return 0


cdef inline void _release_index_buffers(Py_buffer* oview, Py_buffer* tview) noexcept:
    PyBuffer_Release(tview)
    PyBuffer_Release(oview)


cdef class BatchScan:
    """The summary of the last payload scanned (see log_append.pxd)."""

    def __cinit__(self):
        self._batches = NULL
        self._capacity = 0
        self.batch_count = 0

    def __init__(self, plain_file_type=None, info_type=None):
        # append_to_segment writes only to files of exactly this type (the
        # log's FileRecords): a subclass may wrap the writes (fault injection).
        self._plain_file_type = plain_file_type
        # append_info is an instance of this tuple subclass (the log's
        # LogAppendInfo), or a plain tuple.
        self._info_type = info_type
        self.configure(INT32_MAX, False, INT64_MAX, INT64_MAX, INT32_MAX, INT64_MAX)

    def __dealloc__(self):
        PyMem_Free(self._batches)

    cdef int _reserve(self, Py_ssize_t count) except -1:
        cdef Py_ssize_t capacity
        cdef ScannedBatch* grown
        if count <= self._capacity:
            return 0
        capacity = max(count, 2 * self._capacity, 8)
        grown = <ScannedBatch*>PyMem_Realloc(self._batches, capacity * sizeof(ScannedBatch))
        if grown == NULL:
            raise MemoryError()
        self._batches = grown
        self._capacity = capacity
        return 0

    cdef int _validate(self, const uint8_t* data, Py_ssize_t total, bint from_client,
                       int64_t max_message_bytes, bint check_time, int64_t earliest,
                       int64_t latest) except -1:
        """Pass 1: every check, and the headers remembered. Returns a status."""
        cdef Py_ssize_t position = 0, size, count = 0
        cdef const uint8_t* p
        cdef int8_t magic
        cdef int32_t batch_length, records, last_delta
        cdef uint16_t attributes
        cdef uint32_t stored, computed
        cdef int64_t base_timestamp, max_timestamp, producer_id
        cdef ScannedBatch* b
        while position < total:
            p = data + position
            self.error_position = position
            if total - position < RECORD_BATCH_OVERHEAD:
                self.error_value = total - position
                return SCAN_TRUNCATED
            magic = <int8_t>p[MAGIC_OFFSET]
            if magic != CURRENT_MAGIC:
                self.error_value = magic
                return SCAN_LEGACY_MAGIC if magic == 0 or magic == 1 else SCAN_UNKNOWN_MAGIC
            batch_length = <int32_t>load_be32(p + LENGTH_OFFSET)
            if batch_length < MIN_BATCH_LENGTH:
                self.error_value = LOG_OVERHEAD + <int64_t>batch_length
                return SCAN_BATCH_TOO_SMALL
            if batch_length > total - position - LOG_OVERHEAD:
                self.error_value = LOG_OVERHEAD + <int64_t>batch_length
                self.error_other = total - position
                return SCAN_BATCH_TRUNCATED
            size = LOG_OVERHEAD + batch_length
            if size > max_message_bytes:
                self.error_value = size
                return SCAN_TOO_LARGE
            stored = load_be32(p + CRC_OFFSET)
            if size >= _NOGIL_CRC_BYTES:
                with nogil:
                    computed = crc32c_update(0, p + ATTRIBUTES_OFFSET,
                                             <size_t>(size - ATTRIBUTES_OFFSET))
            else:
                computed = crc32c_update(0, p + ATTRIBUTES_OFFSET,
                                         <size_t>(size - ATTRIBUTES_OFFSET))
            if stored != computed:
                self.error_base_offset = <int64_t>load_be64(p)
                self.error_value = stored
                self.error_other = computed
                return SCAN_BAD_CRC
            attributes = load_be16(p + ATTRIBUTES_OFFSET)
            records = <int32_t>load_be32(p + RECORDS_COUNT_OFFSET)
            last_delta = <int32_t>load_be32(p + LAST_OFFSET_DELTA_OFFSET)
            producer_id = <int64_t>load_be64(p + PRODUCER_ID_OFFSET)
            if from_client:
                if attributes & CONTROL_FLAG_MASK:
                    return SCAN_CONTROL_FROM_CLIENT
                if records <= 0 or <int64_t>records != <int64_t>last_delta + 1:
                    self.error_value = records
                    self.error_other = last_delta
                    return SCAN_BAD_RECORDS_COUNT
            if attributes & TRANSACTIONAL_FLAG_MASK and producer_id < 0:
                return SCAN_TRANSACTIONAL_WITHOUT_PRODUCER_ID
            base_timestamp = <int64_t>load_be64(p + BASE_TIMESTAMP_OFFSET)
            max_timestamp = <int64_t>load_be64(p + MAX_TIMESTAMP_OFFSET)
            if check_time:
                # The batch's first and largest timestamps (no per-record pass).
                if base_timestamp < earliest or base_timestamp > latest:
                    self.error_value = base_timestamp
                    return SCAN_BAD_TIMESTAMP
                if max_timestamp < earliest or max_timestamp > latest:
                    self.error_value = max_timestamp
                    return SCAN_BAD_TIMESTAMP
            if count == self._capacity:
                self._reserve(count + 1)
            b = &self._batches[count]
            b.position = position
            b.size = size
            b.base_offset = <int64_t>load_be64(p)
            b.last_offset = b.base_offset + last_delta
            b.max_timestamp = max_timestamp
            b.records_count = records
            b.partition_leader_epoch = <int32_t>load_be32(p + PARTITION_LEADER_EPOCH_OFFSET)
            b.attributes = attributes
            b.has_producer_id = producer_id >= 0
            count += 1
            position += size
        self.batch_count = count
        self.valid_bytes = position
        return SCAN_OK

    def scan(self, buffer, bint assign_offsets, int64_t next_offset, int32_t leader_epoch,
             int64_t log_append_time, bint from_client, int64_t max_message_bytes,
             bint check_time, int64_t earliest, int64_t latest):
        """Validate every batch of ``buffer``, then (``assign_offsets``) patch
        offsets from ``next_offset`` and ``leader_epoch`` in place (and
        LogAppendTime when ``log_append_time`` >= 0), or check that the
        batches' own offsets start at or after ``next_offset``. Returns a
        status (OK = 0); the summary attributes describe the payload on OK.
        ``buffer`` must be writable when assigning offsets."""
        cdef Py_buffer view
        PyObject_GetBuffer(buffer, &view, PyBUF_WRITABLE if assign_offsets else PyBUF_SIMPLE)
        try:
            return self._scan(<uint8_t*>view.buf, view.len, assign_offsets, next_offset,
                              leader_epoch, log_append_time, from_client, max_message_bytes,
                              check_time, earliest, latest)
        finally:
            PyBuffer_Release(&view)

    cdef int _scan(self, uint8_t* data, Py_ssize_t length, bint assign_offsets,
                   int64_t next_offset, int32_t leader_epoch, int64_t log_append_time,
                   bint from_client, int64_t max_message_bytes, bint check_time,
                   int64_t earliest, int64_t latest) except -1:
        cdef Py_ssize_t i
        cdef int status
        cdef ScannedBatch* b
        cdef bint set_log_append_time = log_append_time >= 0
        cdef int64_t max_ts = -1, offset_of_max_ts = -1, records = 0
        self.batch_count = 0
        self.has_producer_id = False
        status = self._validate(data, length, from_client, max_message_bytes,
                                check_time, earliest, latest)
        if status != SCAN_OK:
            self.batch_count = 0
            return status
        # Pass 2: offsets.
        self.first_offset = next_offset if assign_offsets or self.batch_count == 0 \
            else self._batches[0].base_offset
        for i in range(self.batch_count):
            b = &self._batches[i]
            if assign_offsets:
                patch_batch_header(data + b.position, b.size, next_offset, leader_epoch,
                                   set_log_append_time, log_append_time)
                b.last_offset = next_offset + (b.last_offset - b.base_offset)
                b.base_offset = next_offset
                b.partition_leader_epoch = leader_epoch
                if set_log_append_time:
                    b.max_timestamp = log_append_time
            elif b.base_offset < next_offset:
                self.error_position = b.position
                self.error_base_offset = b.base_offset
                self.error_other = next_offset
                self.batch_count = 0
                return SCAN_OUT_OF_ORDER
            next_offset = b.last_offset + 1
            if b.max_timestamp > max_ts:
                max_ts = b.max_timestamp
                offset_of_max_ts = b.last_offset
            records += b.records_count
            if b.has_producer_id:
                self.has_producer_id = True
        self.next_offset = next_offset
        self.max_timestamp = max_ts
        self.offset_of_max_timestamp = offset_of_max_ts
        self.records_count = records
        self.first_max_timestamp = self._batches[0].max_timestamp if self.batch_count else -1
        return SCAN_OK

    def configure(self, int64_t max_message_bytes, bint log_append_time,
                  int64_t timestamp_before_max_ms, int64_t timestamp_after_max_ms,
                  int64_t segment_bytes, int64_t segment_ms):
        """The topic configs append_to_segment applies (the log calls this
        whenever its config changes): max.message.bytes,
        message.timestamp.type = LogAppendTime, message.timestamp.before/
        after.max.ms, segment.bytes, segment.ms."""
        self._max_message_bytes = max_message_bytes
        self._log_append_time = log_append_time
        self._timestamp_before_max_ms = timestamp_before_max_ms
        self._timestamp_after_max_ms = timestamp_after_max_ms
        self._segment_bytes = segment_bytes
        self._segment_ms = segment_ms

    def append_to_segment(self, buffer, segment, int64_t next_offset, int32_t leader_epoch,
                          int64_t now, bint from_client, log_start_offset):
        """The leader's append in one call, under the configs given to
        ``configure``: ``scan`` with offsets assigned from ``next_offset``
        (a client's batches checked against the timestamp window around
        ``now``, or stamped with ``now`` for LogAppendTime) and, when the
        append is plain, what LogSegment.append_scanned does next - Kafka's
        roll rule (LogSegment.should_roll) checked against the segment's
        state, the index entries planned, one pwrite at the end of the
        segment's file, then the entries and the segment's state (file size,
        bytes since the last index entry, max timestamp and its offset,
        rolling timestamp) updated.

        Returns APPENDED when the payload was written (``append_info`` then
        holds the append's LogAppendInfo fields); an error status like
        ``scan``; or OK when it was scanned and patched but not written,
        leaving the rest to the caller's general path: a batch with a
        producer id (producer state first), a roll due, a segment state not
        loaded yet, an index to grow or an entry the index would refuse, or
        a segment whose file is not of the plain type given to BatchScan().
        A failed write truncates the file back and raises OSError, the
        segment unchanged."""
        cdef Py_buffer view
        PyObject_GetBuffer(buffer, &view, PyBUF_WRITABLE)
        try:
            return self._append_leader(&view, segment, next_offset, leader_epoch, now,
                                       from_client, log_start_offset)
        finally:
            PyBuffer_Release(&view)

    cdef int _append_leader(self, Py_buffer* view, segment, int64_t next_offset,
                            int32_t leader_epoch, int64_t now, bint from_client,
                            log_start_offset) except -1:
        """append_to_segment on a buffer already held (writable)."""
        cdef int64_t log_append_time = now if self._log_append_time else -1
        cdef bint check_time = from_client and log_append_time < 0
        cdef int64_t earliest = 0, latest = 0
        cdef int status
        if check_time:
            # The window saturates at the int64 range (both configs are >= 0;
            # before.max.ms defaults to Long.MAX_VALUE).
            earliest = INT64_MIN if now < INT64_MIN + self._timestamp_before_max_ms \
                else now - self._timestamp_before_max_ms
            latest = INT64_MAX if now > INT64_MAX - self._timestamp_after_max_ms \
                else now + self._timestamp_after_max_ms
        status = self._scan(<uint8_t*>view.buf, view.len, True, next_offset, leader_epoch,
                            log_append_time, from_client, self._max_message_bytes,
                            check_time, earliest, latest)
        if status != SCAN_OK or self.batch_count == 0 or self.has_producer_id:
            return status
        status = self._append_scanned(<const uint8_t*>view.buf, segment,
                                      self._segment_bytes, self._segment_ms, now)
        if status == SCAN_APPENDED:
            # Built here, once: the log returns it as its LogAppendInfo.
            self.appends_written += 1
            self.append_info = kfast_append_info(
                self._info_type, self.first_offset, self.next_offset - 1, self.max_timestamp,
                self.offset_of_max_timestamp, log_append_time, log_start_offset,
                self.records_count, self.valid_bytes)
        return status

    cdef int _append_scanned(self, const uint8_t* data, segment, int64_t segment_bytes,
                             int64_t segment_ms, int64_t now) except -1:
        cdef Py_ssize_t total = self.valid_bytes, written = 0, n
        cdef Py_ssize_t offset_entries, offset_max_entries, time_entries, time_max_entries
        cdef int64_t position, base_offset, rolling_timestamp, waited
        cdef int fd, err
        cdef IndexPlan plan
        cdef Py_buffer oview, tview
        cdef SegmentState seg
        cdef FileState file_records
        cdef IndexState offset_index, time_index
        if not isinstance(segment, SegmentState):
            return SCAN_OK
        seg = <SegmentState>segment
        if self._plain_file_type is None or type(seg.log) is not self._plain_file_type \
                or not isinstance(seg.log, FileState):
            return SCAN_OK
        file_records = <FileState>seg.log
        max_timestamp_so_far = seg._max_timestamp_so_far
        if max_timestamp_so_far is None:
            return SCAN_OK
        fd = file_records._fd
        position = file_records._size
        # Kafka's roll rule, as LogSegment.should_roll states it.
        if position > segment_bytes - total:
            return SCAN_OK
        if position > 0:
            rolling = seg._rolling_based_timestamp
            if rolling is None:
                return SCAN_OK  # the first batch's timestamp must be read first
            rolling_timestamp = rolling
            if rolling_timestamp >= 0:
                waited = self.max_timestamp - rolling_timestamp
            else:
                waited = now - seg.created_ms
            if waited > segment_ms - seg.roll_jitter_ms:
                return SCAN_OK
        base_offset = seg.base_offset
        if not 0 <= self.next_offset - 1 - base_offset <= INDEX_RELATIVE_OFFSET_MAX:
            return SCAN_OK
        if not isinstance(seg.offset_index, IndexState) or not isinstance(seg.time_index, IndexState):
            return SCAN_OK
        offset_index = <IndexState>seg.offset_index
        time_index = <IndexState>seg.time_index
        offset_entries = offset_index._entries
        offset_max_entries = offset_index._max_entries
        time_entries = time_index._entries
        time_max_entries = time_index._max_entries
        if offset_entries >= offset_max_entries or time_entries >= time_max_entries - 1:
            return SCAN_OK
        offset_buffer = offset_index._view
        time_buffer = time_index._view
        if offset_buffer is None or time_buffer is None:
            return SCAN_OK
        plan.since = seg._bytes_since_last_index_entry
        plan.max_timestamp = max_timestamp_so_far
        plan.offset_of_max_timestamp = seg._offset_of_max_timestamp_so_far
        _hold_index_buffers(offset_buffer, time_buffer, &oview, &tview)
        try:
            if not self._plan_held(&oview, offset_entries, offset_max_entries, &tview,
                                   time_entries, time_max_entries, position, base_offset,
                                   seg.index_interval_bytes, &plan):
                return SCAN_OK  # a buffered index grows on the general path
            # One pwrite (a short write continues where it stopped); on an
            # error the file is cut back to where it was, as FileRecords.append does.
            file_records._reserve(position + total)
            while written < total:
                if total >= _NOGIL_WRITE_BYTES:
                    with nogil:
                        n = pwrite(fd, data + written, <size_t>(total - written),
                                   <off_t>(position + written))
                else:
                    n = pwrite(fd, data + written, <size_t>(total - written),
                               <off_t>(position + written))
                if n > 0:
                    written += n
                    continue
                err = errno if n < 0 else EIO
                if err == EINTR:
                    if PyErr_CheckSignals() == 0:
                        continue
                    ftruncate(fd, <off_t>position)
                    file_records._allocated = position  # ftruncate frees blocks past it
                    return -1  # the signal handler's exception
                ftruncate(fd, <off_t>position)
                file_records._allocated = position
                raise OSError(err, (<bytes>strerror(err)).decode("utf-8", "replace"))
            if plan.added_offset:
                self._write_index(<uint8_t*>oview.buf, offset_entries, <uint8_t*>tview.buf,
                                  time_entries, base_offset)
        finally:
            _release_index_buffers(&oview, &tview)
        file_records._size = position + total
        if position == 0:
            seg._rolling_based_timestamp = self.first_max_timestamp
        if plan.added_offset:
            offset_index._entries_written(plan.added_offset)
            if plan.added_time:
                time_index._entries_written(plan.added_time)
        seg._bytes_since_last_index_entry = plan.since
        seg._max_timestamp_so_far = plan.max_timestamp
        seg._offset_of_max_timestamp_so_far = plan.offset_of_max_timestamp
        return SCAN_APPENDED

    cdef int _plan_held(self, Py_buffer* oview, Py_ssize_t offset_entries,
                        Py_ssize_t offset_max_entries, Py_buffer* tview,
                        Py_ssize_t time_entries, Py_ssize_t time_max_entries,
                        Py_ssize_t position, int64_t base_offset, int64_t index_interval_bytes,
                        IndexPlan* plan) noexcept:
        """_plan_index over index buffers held by _hold_index_buffers, with the
        bounds both callers need: 1 when the existing entries are inside the
        buffers and every planned entry fits after them, 0 otherwise (the
        caller then writes nothing)."""
        if offset_entries < 0 or time_entries < 0 or offset_entries * OFFSET_INDEX_ENTRY_SIZE > oview.len \
                or time_entries * TIME_INDEX_ENTRY_SIZE > tview.len:
            return 0
        if not self._plan_index(<uint8_t*>oview.buf, offset_entries, offset_max_entries,
                                <uint8_t*>tview.buf, time_entries, time_max_entries,
                                position, base_offset, index_interval_bytes, plan):
            return 0
        return (offset_entries + plan.added_offset) * OFFSET_INDEX_ENTRY_SIZE <= oview.len \
            and (time_entries + plan.added_time) * TIME_INDEX_ENTRY_SIZE <= tview.len

    cdef int _plan_index(self, const uint8_t* offset_index, Py_ssize_t offset_entries,
                         Py_ssize_t offset_max_entries, const uint8_t* time_index,
                         Py_ssize_t time_entries, Py_ssize_t time_max_entries,
                         Py_ssize_t position, int64_t base_offset, int64_t index_interval_bytes,
                         IndexPlan* plan) noexcept:
        """Kafka's index rule over the scanned batches, deciding and checking
        every entry without writing one (see index_batches). ``plan`` holds
        the segment's (since, max timestamp, its offset) on entry and after
        the batches on return, with the entry counts. Returns 0 when an entry
        would break an index's ordering or offset range (the caller takes the
        per-entry path, which raises the index's own exception)."""
        cdef Py_ssize_t i, added_offset = 0, added_time = 0
        cdef ScannedBatch* b
        cdef const uint8_t* q
        cdef int64_t last_offset = -1, last_ts = 0, last_ts_offset = 0
        cdef int64_t since = plan.since, max_timestamp = plan.max_timestamp
        cdef int64_t offset_of_max_timestamp = plan.offset_of_max_timestamp
        cdef bint have_offset_entry = offset_entries > 0
        cdef bint have_time_entry = time_entries > 0
        if have_offset_entry:
            last_offset = base_offset + <int32_t>load_be32(
                offset_index + (offset_entries - 1) * OFFSET_INDEX_ENTRY_SIZE
                + OFFSET_INDEX_RELATIVE_OFFSET_AT)
        if have_time_entry:
            q = time_index + (time_entries - 1) * TIME_INDEX_ENTRY_SIZE
            last_ts = <int64_t>load_be64(q + TIME_INDEX_TIMESTAMP_AT)
            last_ts_offset = base_offset + <int32_t>load_be32(q + TIME_INDEX_RELATIVE_OFFSET_AT)
        for i in range(self.batch_count):
            b = &self._batches[i]
            b.index_action = INDEX_NONE
            if b.max_timestamp > max_timestamp:
                max_timestamp = b.max_timestamp
                offset_of_max_timestamp = b.last_offset
            if since > index_interval_bytes \
                    and offset_entries + added_offset < offset_max_entries \
                    and time_entries + added_time < time_max_entries - 1:
                if not 0 <= b.last_offset - base_offset <= INDEX_RELATIVE_OFFSET_MAX:
                    return 0
                if have_offset_entry and b.last_offset <= last_offset:
                    return 0
                have_offset_entry = True
                last_offset = b.last_offset
                b.index_action = INDEX_OFFSET
                b.segment_position = position
                added_offset += 1
                if not have_time_entry or max_timestamp > last_ts:
                    if have_time_entry and offset_of_max_timestamp < last_ts_offset:
                        return 0
                    if not 0 <= offset_of_max_timestamp - base_offset <= INDEX_RELATIVE_OFFSET_MAX:
                        return 0
                    have_time_entry = True
                    last_ts = max_timestamp
                    last_ts_offset = offset_of_max_timestamp
                    b.index_action = INDEX_OFFSET_AND_TIME
                    b.index_timestamp = max_timestamp
                    b.index_timestamp_offset = offset_of_max_timestamp
                    added_time += 1
                elif max_timestamp < last_ts or offset_of_max_timestamp < last_ts_offset:
                    return 0
                since = 0
            position += b.size
            since += b.size
        plan.since = since
        plan.max_timestamp = max_timestamp
        plan.offset_of_max_timestamp = offset_of_max_timestamp
        plan.added_offset = added_offset
        plan.added_time = added_time
        return 1

    cdef void _write_index(self, uint8_t* offset_index, Py_ssize_t offset_entries,
                           uint8_t* time_index, Py_ssize_t time_entries,
                           int64_t base_offset) noexcept:
        """Write the entries _plan_index decided past the existing ones (the
        caller checked that the buffers hold them)."""
        cdef Py_ssize_t i
        cdef ScannedBatch* b
        cdef uint8_t* q
        for i in range(self.batch_count):
            b = &self._batches[i]
            if b.index_action == INDEX_NONE:
                continue
            q = offset_index + offset_entries * OFFSET_INDEX_ENTRY_SIZE
            store_be32(q + OFFSET_INDEX_RELATIVE_OFFSET_AT,
                       <uint32_t>(b.last_offset - base_offset))
            store_be32(q + OFFSET_INDEX_POSITION_AT, <uint32_t>b.segment_position)
            offset_entries += 1
            if b.index_action == INDEX_OFFSET_AND_TIME:
                q = time_index + time_entries * TIME_INDEX_ENTRY_SIZE
                store_be64(q + TIME_INDEX_TIMESTAMP_AT, <uint64_t>b.index_timestamp)
                store_be32(q + TIME_INDEX_RELATIVE_OFFSET_AT,
                           <uint32_t>(b.index_timestamp_offset - base_offset))
                time_entries += 1

    def index_batches(self, Py_ssize_t position, int64_t since, int64_t index_interval_bytes,
                      int64_t max_timestamp, int64_t offset_of_max_timestamp,
                      int64_t base_offset, offset_index, Py_ssize_t offset_entries,
                      Py_ssize_t offset_max_entries, time_index, Py_ssize_t time_entries,
                      Py_ssize_t time_max_entries):
        """Kafka's index rule (LogSegment.append) over the scanned batches,
        written at ``position`` of a segment whose state is (bytes since its
        last index entry, max timestamp so far and its offset): once more than
        ``index_interval_bytes`` were written since the last entry, and
        neither index is full, a batch gets an offset-index entry (its last
        offset, its position) and a time-index entry (max timestamp so far,
        its offset) if that timestamp is larger than the last one's.

        ``offset_index`` and ``time_index`` are the writable entry buffers
        (index grammar: index.pxd) holding ``*_entries`` entries, full at
        ``offset_max_entries`` / ``time_max_entries - 1`` (the time index
        keeps its last slot for the roll). Entries are written past the
        existing ones. Returns ``(since, max_timestamp,
        offset_of_max_timestamp, offset_entries_added, time_entries_added)``,
        or None, writing nothing, when an entry would break an index's
        ordering or offset range or a buffer is too short (or None): the
        caller then takes the per-entry path, which grows a buffered index or
        raises the index's own exception."""
        cdef Py_buffer oview, tview
        cdef IndexPlan plan
        if self.batch_count == 0:
            return since, max_timestamp, offset_of_max_timestamp, 0, 0
        if offset_index is None or time_index is None:
            return None  # an index without a mapping (zero length)
        plan.since = since
        plan.max_timestamp = max_timestamp
        plan.offset_of_max_timestamp = offset_of_max_timestamp
        _hold_index_buffers(offset_index, time_index, &oview, &tview)
        try:
            if not self._plan_held(&oview, offset_entries, offset_max_entries, &tview,
                                   time_entries, time_max_entries, position, base_offset,
                                   index_interval_bytes, &plan):
                return None
            if plan.added_offset:
                self._write_index(<uint8_t*>oview.buf, offset_entries, <uint8_t*>tview.buf,
                                  time_entries, base_offset)
        finally:
            _release_index_buffers(&oview, &tview)
        return plan.since, plan.max_timestamp, plan.offset_of_max_timestamp, \
            plan.added_offset, plan.added_time

    def batch_infos(self):
        """``(size, last_offset, max_timestamp)`` of each scanned batch."""
        cdef Py_ssize_t i
        return [(self._batches[i].size, self._batches[i].last_offset,
                 self._batches[i].max_timestamp) for i in range(self.batch_count)]

    def positions(self, bint with_producer_id_only=False):
        """Positions of the scanned batches in the payload (all, or those with
        a producer id)."""
        cdef Py_ssize_t i
        return [self._batches[i].position for i in range(self.batch_count)
                if not with_producer_id_only or self._batches[i].has_producer_id]

    def leader_epochs(self):
        """``(partition_leader_epoch, base_offset)`` of each scanned batch."""
        cdef Py_ssize_t i
        return [(self._batches[i].partition_leader_epoch, self._batches[i].base_offset)
                for i in range(self.batch_count)]


cdef inline bint _writable(records):
    """A buffer the fast path may patch in place without asking for it: a
    bytearray or a writable memoryview (anything else: the general path)."""
    if PyByteArray_CheckExact(records):
        return True
    return PyMemoryView_Check(records) and not PyMemoryView_GET_BUFFER(records).readonly


cdef class LogState:
    """See log_append.pxd. The methods this calls back (_append_as_leader_general,
    _append_scanned, _append_failed, _scan_error, _request_flush) are the
    Log's."""

    def __cinit__(self):
        self._first_unstable_offset = -1

    def append_as_leader(self, records, leader_epoch=0, origin=ORIGIN_CLIENT, now=None):
        """Validate (headers and CRC, no per-record work), assign offsets
        (patching baseOffset and partitionLeaderEpoch in place, and
        maxTimestamp + CRC for LogAppendTime), check producer state and append
        with one write. ``records`` may be a writable buffer (patched in
        place) or bytes (copied once). Raises CorruptRecordException,
        InvalidRecordException, RecordTooLargeException or
        InvalidTimestampException for a bad payload, KafkaStorageException
        for a disk error.

        A plain append (no producer id, no roll due) is one call into
        BatchScan's kernel and the bookkeeping below, all without leaving C;
        everything else takes the log's general path."""
        cdef BatchScan scan = self._scan
        cdef Py_buffer view
        cdef int status
        cdef int64_t at
        cdef int32_t epoch
        cdef bint from_client
        if not self._fast_append or leader_epoch is None or self.offline \
                or not _writable(records):
            return self._append_as_leader_general(records, leader_epoch, origin, now)
        lock = self._lock
        if not lock.acquire(False):  # a background job holds the log: wait on the general path
            return self._append_as_leader_general(records, leader_epoch, origin, now)
        try:
            if self.offline:
                return self._append_as_leader_general(records, leader_epoch, origin, now)
            if now is not None:
                at = now
            elif self.time_ms is now_ms:  # the default clock, read without a call
                at = _clock_ms()
            else:
                at = self.time_ms()
            epoch = leader_epoch
            from_client = origin is ORIGIN_CLIENT or origin == ORIGIN_CLIENT
            PyObject_GetBuffer(records, &view, PyBUF_WRITABLE)
            try:
                status = scan._append_leader(&view, self._active_segment, self.log_end_offset,
                                             epoch, at, from_client, self.log_start_offset)
            except OSError as exc:
                raise self._append_failed(exc) from exc
            finally:
                PyBuffer_Release(&view)
            if status == SCAN_APPENDED:
                return self._appended(scan, epoch)
            if status == SCAN_OK:
                # Scanned and patched, not written (producer id, roll due, ...).
                return self._append_scanned(memoryview(records), scan, origin, leader_epoch,
                                            at)
            raise self._scan_error(status, scan, at)
        finally:
            lock.release()

    def update_high_watermark(self, int64_t high_watermark):
        """Set the HW, clamped to [log_start_offset, log_end_offset], and
        return it. Under the log's lock, as the background jobs that move the
        offsets it is clamped to hold it; in C because the leader calls it
        once per append that moves the HW (the RLock's ``with`` alone cost
        ~0.4 us of a ~1.2 us Python method)."""
        cdef int64_t hw
        lock = self._lock
        lock.acquire()
        try:
            hw = high_watermark
            if hw < self.log_start_offset:
                hw = self.log_start_offset
            if hw > self.log_end_offset:
                hw = self.log_end_offset
            if hw != self.high_watermark:
                self.high_watermark = hw
                self._hw_metadata = None
                self.producer_state.on_high_watermark_updated(hw)
            return hw
        finally:
            lock.release()

    @property
    def last_stable_offset(self):
        """The last stable offset (LSO): min(first offset of a transaction
        still open or decided but not yet below the high watermark, HW),
        never below the log start offset. Read committed consumers read up
        to it; every fetch answer carries it."""
        return self.last_stable()

    cdef int64_t last_stable(self) noexcept:
        # The first unstable offset as the producer state last published it
        # (a field of this object: a caught-up read of a partition touches
        # no Python object of its producer state).
        cdef int64_t first_unstable = self._first_unstable_offset
        if 0 <= first_unstable < self.high_watermark:
            return max(first_unstable, self.log_start_offset)
        return self.high_watermark

    cdef object _appended(self, BatchScan scan, int32_t leader_epoch):
        """The general path's tail for a leader append without producer
        state: epoch, end offsets, flush policy."""
        if leader_epoch >= 0:
            # LeaderEpochFileCache.latest_epoch(), read from its entries (a
            # list of EpochEntry tuples) without a Python frame.
            cache = self.leader_epoch_cache
            entries = cache._entries
            if not (PyList_CheckExact(entries) and PyList_GET_SIZE(entries)
                    and (<tuple>PyList_GET_ITEM(entries, PyList_GET_SIZE(entries) - 1))[0]
                    == leader_epoch):
                cache.assign(leader_epoch, scan.first_offset)
        self.log_end_offset = scan.next_offset
        self.producer_state.map_end_offset = scan.next_offset
        self._unflushed_messages += scan.records_count
        if self._unflushed_messages >= self._flush_messages:
            self._request_flush()
        return scan.append_info


# IndexState._last once entries were written past it: the index reads its last
# entry back when someone asks (kfast/storage/index.py).
INDEX_LAST_STALE = object()


cdef extern from *:
    """
    /* Reserve and give back a file's blocks past its length (Linux
       fallocate). Elsewhere both fail with EOPNOTSUPP and the log writes
       without a reservation. */
    #include <errno.h>
    #ifdef __linux__
    #include <fcntl.h>
    static int kfast_reserve_blocks(int fd, off_t offset, off_t length) {
        return fallocate(fd, FALLOC_FL_KEEP_SIZE, offset, length);
    }
    static int kfast_release_blocks(int fd, off_t offset, off_t length) {
        return fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, length);
    }
    #else
    static int kfast_reserve_blocks(int fd, off_t offset, off_t length) {
        (void)fd; (void)offset; (void)length; errno = EOPNOTSUPP; return -1;
    }
    static int kfast_release_blocks(int fd, off_t offset, off_t length) {
        (void)fd; (void)offset; (void)length; errno = EOPNOTSUPP; return -1;
    }
    #endif
    """
    int kfast_reserve_blocks(int fd, off_t offset, off_t length) nogil
    int kfast_release_blocks(int fd, off_t offset, off_t length) nogil


# The least reserved ahead of a write: a new segment's first appends reserve
# this much, and the reservation then grows with the segment (see _reserve).
cdef int64_t _RESERVE_MIN = 64 * 1024


cdef class FileState:
    """See log_append.pxd (FileRecords subclasses this).

    Why reserve: a write into blocks the file system has already allocated
    (unwritten extents) costs the kernel less than one that extends the file
    with delayed allocation (no per-page reservation, extent-status insert and
    quota charge): measured on ext4, 13% less time per 16 KiB append and 27%
    per 1 MiB, counting the fallocate calls (bench/README.md). Redpanda does
    the same (segment_fallocation_step). FALLOC_FL_KEEP_SIZE leaves the
    file's length at the bytes written, so readers, recovery after kill -9
    and the on-disk format see no difference; the blocks past the end are
    given back at roll and close (release_reserved).
    """

    cdef void _reserve(self, int64_t end) noexcept:
        """Before a write ending at ``end``: if it passes the reserved blocks,
        reserve up to ``end`` plus as much again as the file holds (at least
        _RESERVE_MIN, at most _allocate_step), so a slow partition reserves
        little and a busy one makes one call per step. A failure (no
        fallocate on this file system, no space) turns reserving off for the
        file: the write itself then reports what is wrong."""
        cdef int64_t ahead, start
        if self._allocate_step <= 0 or end <= self._allocated or self._fd < 0:
            return
        ahead = self._size
        if ahead < _RESERVE_MIN:
            ahead = _RESERVE_MIN
        if ahead > self._allocate_step:
            ahead = self._allocate_step
        start = self._allocated if self._allocated > self._size else self._size
        if kfast_reserve_blocks(self._fd, <off_t>start, <off_t>(end + ahead - start)) == 0:
            self._allocated = end + ahead
        else:
            self._allocate_step = 0

    def reserve(self, int64_t end):
        """Reserve blocks for a write ending at ``end`` (see _reserve)."""
        self._reserve(end)

    def release_reserved(self):
        """Give back the blocks reserved past the bytes written (at roll and
        close). Also covers what a process killed before its roll reserved:
        up to one step past the end is released even when this process
        reserved nothing there."""
        cdef int64_t end = self._allocated
        if self._size + self._allocate_step > end:
            end = self._size + self._allocate_step
        if self._fd >= 0 and end > self._size:
            # ext4 frees blocks past the end on a truncate to the same length
            # (and ignores a hole punched there); other file systems take the
            # punched hole.
            ftruncate(self._fd, <off_t>self._size)
            kfast_release_blocks(self._fd, <off_t>self._size, <off_t>(end - self._size))
        self._allocated = self._size


cdef class IndexState:
    """See log_append.pxd (the offset and time indexes subclass this)."""

    def entries_written(self, Py_ssize_t count):
        """``count`` entries were written into the buffer past the last one
        (the append kernels do that); the last entry is read back only when
        someone asks for it."""
        self._entries_written(count)

    cdef void _entries_written(self, Py_ssize_t count) noexcept:
        self._entries += count
        self._last = INDEX_LAST_STALE


cdef class SegmentState:
    """See log_append.pxd (LogSegment subclasses this)."""
