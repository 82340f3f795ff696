# Log append kernel: one pass over the record batches of one partition's
# produce (or replication) payload, as Log.append_* needs it.
#
#   payload := RecordBatch+            (grammar and field offsets: batch.pxd)
#
# Per batch, in order, the checks Log.analyze made in Python (first failure
# wins, reported as a BatchScanStatus plus the numbers its message needs):
#   fewer than 61 bytes left                    SCAN_TRUNCATED
#   magic 0/1 | other magic != 2               SCAN_LEGACY_MAGIC | SCAN_UNKNOWN_MAGIC
#   batchLength < 49                            SCAN_BATCH_TOO_SMALL
#   12 + batchLength > bytes left               SCAN_BATCH_TRUNCATED
#   12 + batchLength > max.message.bytes        SCAN_TOO_LARGE
#   CRC-32C of bytes 21..end != crc             SCAN_BAD_CRC
#   from a client: control bit set              SCAN_CONTROL_FROM_CLIENT
#   from a client: recordsCount <= 0 or != lastOffsetDelta + 1   SCAN_BAD_RECORDS_COUNT
#   transactional without a producer id         SCAN_TRANSACTIONAL_WITHOUT_PRODUCER_ID
#   baseTimestamp / maxTimestamp outside [earliest, latest] (when checked)
#                                               SCAN_BAD_TIMESTAMP
# Only once every batch passed, a second pass over the remembered headers
# assigns offsets (leader: baseOffset, partitionLeaderEpoch, and LogAppendTime
# + CRC when configured, through batch.pxd's patch_batch_header) or checks
# that they move forward (follower: SCAN_OUT_OF_ORDER), so a rejected payload
# is never half patched.
#
# BatchScan.append_to_segment (the leader's fast path) goes on, in the same
# call, with what LogSegment.append_scanned does: roll rule, index plan, one
# pwrite, index entries, segment state. It returns SCAN_APPENDED once written,
# SCAN_OK for "scanned and patched, not written: take the general path".
#
# LogState.append_as_leader wraps that call with the rest of a leader append
# (lock, clock, epoch check, end offsets, flush counter, LogAppendInfo), so a
# plain produce never runs Python inside the log. FileState, IndexState and
# SegmentState hold the storage objects' per-append fields as C fields.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t

cdef enum BatchScanStatus:
    SCAN_OK = 0
    SCAN_TRUNCATED = 1
    SCAN_LEGACY_MAGIC = 2
    SCAN_UNKNOWN_MAGIC = 3
    SCAN_BATCH_TOO_SMALL = 4
    SCAN_BATCH_TRUNCATED = 5
    SCAN_TOO_LARGE = 6
    SCAN_BAD_CRC = 7
    SCAN_CONTROL_FROM_CLIENT = 8
    SCAN_BAD_RECORDS_COUNT = 9
    SCAN_TRANSACTIONAL_WITHOUT_PRODUCER_ID = 10
    SCAN_BAD_TIMESTAMP = 11
    SCAN_OUT_OF_ORDER = 12
    SCAN_APPENDED = 13              # not an error: append_to_segment wrote the payload


# What the log needs to remember of one scanned batch (after patching).
cdef struct ScannedBatch:
    Py_ssize_t position          # in the payload
    Py_ssize_t size              # 12 + batchLength
    int64_t base_offset
    int64_t last_offset
    int64_t max_timestamp
    int32_t records_count
    int32_t partition_leader_epoch
    uint16_t attributes
    bint has_producer_id
    # Set by BatchScan.index_batches' planning pass (Kafka's index rule).
    int index_action                 # INDEX_NONE / INDEX_OFFSET / INDEX_OFFSET_AND_TIME
    Py_ssize_t segment_position      # where the batch lands in the segment
    int64_t index_timestamp          # time-index entry: max timestamp so far ...
    int64_t index_timestamp_offset   # ... and its offset


# Kafka's index rule over one payload: the segment's state before (in) and
# after (out) the payload, and how many entries it adds to each index.
cdef struct IndexPlan:
    int64_t since                    # bytes since the last offset-index entry
    int64_t max_timestamp            # max timestamp so far ...
    int64_t offset_of_max_timestamp  # ... and its offset
    Py_ssize_t added_offset
    Py_ssize_t added_time


cdef enum IndexAction:
    INDEX_NONE = 0
    INDEX_OFFSET = 1
    INDEX_OFFSET_AND_TIME = 2


# The fields of the storage objects (kfast/storage: FileRecords, the offset
# and time indexes and LogSegment subclass these) that the append kernel reads
# and writes on every append: C fields, read without a lookup. Python sees
# them as ordinary attributes.
cdef class FileState:
    cdef public int _fd                    # -1 once closed
    cdef public int64_t _size              # bytes written (a preallocated file is longer)
    # Disk blocks reserved ahead of the writes (fallocate with
    # FALLOC_FL_KEEP_SIZE: the file's length stays _size). _allocated: where
    # the reserved blocks end, as far as this process reserved them;
    # _allocate_step: most bytes reserved ahead at once, 0 = none.
    cdef public int64_t _allocated
    cdef public int64_t _allocate_step

    cdef void _reserve(self, int64_t end) noexcept


cdef class IndexState:
    cdef public object _view               # the entries: bytearray (buffered), mmap or None
    cdef public Py_ssize_t _entries
    cdef public Py_ssize_t _max_entries
    cdef public object _last               # the last entry, or INDEX_LAST_STALE

    cdef void _entries_written(self, Py_ssize_t count) noexcept


cdef class SegmentState:
    cdef public object log                 # FileRecords
    cdef public object offset_index        # OffsetIndex
    cdef public object time_index          # TimeIndex
    cdef public int64_t base_offset
    cdef public int64_t index_interval_bytes
    cdef public int64_t roll_jitter_ms
    cdef public int64_t created_ms
    cdef public object _max_timestamp_so_far        # None until loaded from the time index
    cdef public int64_t _offset_of_max_timestamp_so_far
    cdef public int64_t _bytes_since_last_index_entry
    cdef public object _rolling_based_timestamp     # None until the first batch's is known


cdef class BatchScan:
    # Reused across appends (one per Log): the per-batch array grows to the
    # largest request seen and is never shrunk.
    cdef ScannedBatch* _batches
    cdef Py_ssize_t _capacity
    cdef readonly Py_ssize_t batch_count
    cdef readonly int64_t first_offset
    cdef readonly int64_t next_offset
    cdef readonly int64_t max_timestamp            # -1 if no batch has one
    cdef readonly int64_t offset_of_max_timestamp
    cdef readonly int64_t first_max_timestamp      # the first batch's (segment roll rule)
    cdef readonly int64_t records_count
    cdef readonly Py_ssize_t valid_bytes
    cdef readonly bint has_producer_id              # some batch carries one
    # After append_to_segment wrote a payload: (first_offset, last_offset,
    # max_timestamp, offset_of_max_timestamp, log_append_time, log_start_offset,
    # records_count, valid_bytes, False) - kfast.storage.log.LogAppendInfo's fields.
    cdef readonly object append_info
    # How many payloads append_to_segment wrote (tests check the path ran).
    cdef readonly Py_ssize_t appends_written
    # Set when scan() returns a status other than SCAN_OK.
    cdef readonly Py_ssize_t error_position
    cdef readonly int64_t error_value               # magic, size, timestamp, ...
    cdef readonly int64_t error_other               # computed crc, limit, ...
    cdef readonly int64_t error_base_offset

    cdef object _plain_file_type                    # see BatchScan.__init__
    cdef object _info_type                          # see BatchScan.__init__
    # Topic configs append_to_segment applies (BatchScan.configure).
    cdef int64_t _max_message_bytes
    cdef bint _log_append_time
    cdef int64_t _timestamp_before_max_ms
    cdef int64_t _timestamp_after_max_ms
    cdef int64_t _segment_bytes
    cdef int64_t _segment_ms

    cdef int _reserve(self, Py_ssize_t count) except -1
    cdef int _validate(self, const uint8_t* data, Py_ssize_t total, bint from_client,
                       int64_t max_message_bytes, bint check_time, int64_t earliest,
                       int64_t latest) except -1
    cdef int _scan(self, uint8_t* data, Py_ssize_t length, bint assign_offsets,
                   int64_t next_offset, int32_t leader_epoch, int64_t log_append_time,
                   bint from_client, int64_t max_message_bytes, bint check_time,
                   int64_t earliest, int64_t latest) except -1
    cdef int _plan_held(self, Py_buffer* oview, Py_ssize_t offset_entries,
                        Py_ssize_t offset_max_entries, Py_buffer* tview,
                        Py_ssize_t time_entries, Py_ssize_t time_max_entries,
                        Py_ssize_t position, int64_t base_offset, int64_t index_interval_bytes,
                        IndexPlan* plan) noexcept
    cdef int _plan_index(self, const uint8_t* offset_index, Py_ssize_t offset_entries,
                         Py_ssize_t offset_max_entries, const uint8_t* time_index,
                         Py_ssize_t time_entries, Py_ssize_t time_max_entries,
                         Py_ssize_t position, int64_t base_offset, int64_t index_interval_bytes,
                         IndexPlan* plan) noexcept
    cdef void _write_index(self, uint8_t* offset_index, Py_ssize_t offset_entries,
                           uint8_t* time_index, Py_ssize_t time_entries,
                           int64_t base_offset) noexcept
    cdef int _append_scanned(self, const uint8_t* data, segment, int64_t segment_bytes,
                             int64_t segment_ms, int64_t now) except -1
    cdef int _append_leader(self, Py_buffer* view, segment, int64_t next_offset,
                            int32_t leader_epoch, int64_t now, bint from_client,
                            log_start_offset) except -1


# The part of a Log (kfast/storage/log.py subclasses this) that its leader
# append reads and writes on every produce: C fields, so the fast path in
# LogState.append_as_leader looks nothing up in a dictionary. Python sees
# them as ordinary attributes.
cdef class LogState:
    cdef public int64_t log_end_offset
    cdef public int64_t log_start_offset
    cdef public int64_t high_watermark         # set by update_high_watermark
    # The producer state's first unstable offset, -1 for none: kept by its
    # ProducerStateManager (log_state) at every change, for last_stable.
    cdef public int64_t _first_unstable_offset
    cdef public int64_t _unflushed_messages
    cdef public int64_t _flush_messages       # log.flush.interval.messages
    cdef public bint offline                  # after a disk error
    cdef public bint _fast_append             # False forces the general path (tests)
    cdef public BatchScan _scan               # reused by every append (under the lock)
    cdef public object _active_segment
    cdef public object _lock
    cdef public object leader_epoch_cache
    cdef public object producer_state
    cdef public object time_ms

    cdef object _appended(self, BatchScan scan, int32_t leader_epoch)
    # Log.last_stable_offset, as C (the Fetch fast path's caught-up check).
    cdef int64_t last_stable(self) noexcept
