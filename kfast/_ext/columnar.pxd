# Columnar decoding of v2 record batches (grammar in columnar.pyx).
#
# Column: a read-only, malloc-backed 1-D array exporting the buffer protocol
# (format 'q' int64, 'i' int32 or 'B' bytes), so Python, memoryview, array
# consumers and pyarrow.py_buffer see the memory without a copy and without a
# Python object per element.
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t


cdef class Column:
    cdef char* ptr
    cdef Py_ssize_t length          # elements
    cdef Py_ssize_t itemsize
    cdef char* format                # static C string: b"q", b"i", b"B"
    cdef Py_ssize_t shape[1]
    cdef Py_ssize_t strides[1]


# Column of `length` elements, uninitialised. Raises MemoryError.
cdef Column new_column(Py_ssize_t length, Py_ssize_t itemsize, char* format)


# One v2 batch as the first pass saw it. Positions are byte offsets into the
# result's `data` buffer (records_start/end) or into the input (position).
ctypedef struct BatchEntry:
    int64_t base_offset
    int64_t base_timestamp
    int64_t max_timestamp
    int64_t producer_id
    int64_t position             # where the batch starts in the input
    int64_t records_start        # records section in `data`
    int64_t records_end
    int64_t first_record         # index of its first record in the columns, -1 if skipped
    int32_t size_in_bytes
    int32_t partition_leader_epoch
    int32_t last_offset_delta
    int32_t base_sequence
    int32_t records_count
    int16_t attributes
    int16_t producer_epoch


cdef class ColumnarRecords:
    cdef readonly Column offsets
    cdef readonly Column timestamps
    cdef readonly Column timestamp_types
    cdef readonly Column key_offsets
    cdef readonly Column key_lengths
    cdef readonly Column value_offsets
    cdef readonly Column value_lengths
    cdef readonly Column header_offsets
    cdef readonly Column header_key_offsets
    cdef readonly Column header_key_lengths
    cdef readonly Column header_value_offsets
    cdef readonly Column header_value_lengths
    cdef readonly object data
    cdef readonly Py_ssize_t num_records
    cdef readonly Py_ssize_t num_headers
    cdef readonly Py_ssize_t bytes_consumed
    cdef readonly Py_ssize_t truncated_bytes
    cdef readonly bint has_headers
    cdef BatchEntry* batch_entries
    cdef Py_ssize_t num_batches
    cdef Py_ssize_t batch_capacity
    cdef int64_t key_bytes           # sum of non-null key lengths
    cdef int64_t value_bytes
    cdef int64_t header_key_bytes
    cdef int64_t header_value_bytes
    cdef Py_ssize_t key_nulls
    cdef Py_ssize_t value_nulls
    cdef Py_ssize_t header_value_nulls
    cdef object __weakref__
