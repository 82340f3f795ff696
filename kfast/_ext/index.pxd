# Search over Kafka's sparse index files (memory-mapped, big-endian).
#
#   offset index entry (8 bytes)  := relativeOffset int32, position int32
#   time index entry  (12 bytes)  := timestamp int64, relativeOffset int32
#
# An index is `entries` fixed-size entries; an entry's key is a big-endian
# signed integer of `key_width` bytes (4 or 8) at byte `key_pos` of the entry.
# Keys are sorted ascending (strictly for the offset index; the time index
# only appends a timestamp larger than the last one).
#
# Like Kafka's AbstractIndex, a search first looks at the warm tail of the
# index (the last WARM_SECTION_BYTES): appends and fetches of recent data
# touch only those pages, so a lookup near the end does not fault in cold
# pages from the middle of a large index.
#
# Contract: the caller guarantees entries * entry_size <= buffer length
# (the Python wrappers check it); these functions never raise.
from libc.stdint cimport int64_t, uint8_t

cdef enum:
    WARM_SECTION_BYTES = 8192

cdef int64_t index_key(const uint8_t* base, Py_ssize_t slot, int entry_size,
                       int key_pos, int key_width) noexcept nogil

# Slot of the largest key <= target, or -1 if every key is larger.
cdef Py_ssize_t largest_lower_bound(const uint8_t* base, Py_ssize_t entries,
                                    int entry_size, int key_pos, int key_width,
                                    int64_t target) noexcept nogil

# Slot of the smallest key >= target, or -1 if every key is smaller.
cdef Py_ssize_t smallest_upper_bound(const uint8_t* base, Py_ssize_t entries,
                                     int entry_size, int key_pos, int key_width,
                                     int64_t target) noexcept nogil
