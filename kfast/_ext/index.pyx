# cython: freethreading_compatible = True
"""Binary search over memory-mapped index files (grammar in index.pxd).

The Python wrappers take any buffer (an ``mmap`` of the index file) and hold
it only for the duration of the call, so the index may be resized or closed
between calls.
"""
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_FillInfo, PyObject_GetBuffer, PyBuffer_Release
from cpython.exc cimport PyErr_SetFromErrno

from kfast._ext.layout cimport (
    INDEX_RELATIVE_OFFSET_MAX, OFFSET_INDEX_ENTRY_SIZE, INDEX_RELATIVE_OFFSET_WIDTH,
    OFFSET_INDEX_POSITION_AT, OFFSET_INDEX_RELATIVE_OFFSET_AT,
)


cdef inline int64_t _be32(const uint8_t* p) noexcept nogil:
    return <int64_t><int>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16)
                          | (<uint32_t>p[2] << 8) | <uint32_t>p[3])


cdef inline int64_t _be64(const uint8_t* p) noexcept nogil:
    return <int64_t>((<uint64_t>p[0] << 56) | (<uint64_t>p[1] << 48)
                     | (<uint64_t>p[2] << 40) | (<uint64_t>p[3] << 32)
                     | (<uint64_t>p[4] << 24) | (<uint64_t>p[5] << 16)
                     | (<uint64_t>p[6] << 8) | <uint64_t>p[7])


cdef int64_t index_key(const uint8_t* base, Py_ssize_t slot, int entry_size,
                       int key_pos, int key_width) noexcept nogil:
    cdef const uint8_t* p = base + slot * entry_size + key_pos
    if key_width == 8:
        return _be64(p)
    return _be32(p)


cdef inline Py_ssize_t _bisect_lower(const uint8_t* base, Py_ssize_t lo, Py_ssize_t hi,
                                     int entry_size, int key_pos, int key_width,
                                     int64_t target) noexcept nogil:
    # Precondition: key(lo) <= target. Returns the last slot in [lo, hi] with
    # key <= target.
    cdef Py_ssize_t mid
    while lo < hi:
        mid = lo + (hi - lo + 1) // 2
        if index_key(base, mid, entry_size, key_pos, key_width) <= target:
            lo = mid
        else:
            hi = mid - 1
    return lo


cdef Py_ssize_t largest_lower_bound(const uint8_t* base, Py_ssize_t entries,
                                    int entry_size, int key_pos, int key_width,
                                    int64_t target) noexcept nogil:
    cdef Py_ssize_t warm_entries, first_hot
    if entries <= 0:
        return -1
    warm_entries = WARM_SECTION_BYTES // entry_size
    first_hot = entries - 1 - warm_entries
    if first_hot < 0:
        first_hot = 0
    if index_key(base, first_hot, entry_size, key_pos, key_width) <= target:
        return _bisect_lower(base, first_hot, entries - 1, entry_size, key_pos,
                             key_width, target)
    if index_key(base, 0, entry_size, key_pos, key_width) > target:
        return -1
    return _bisect_lower(base, 0, first_hot, entry_size, key_pos, key_width, target)


cdef Py_ssize_t smallest_upper_bound(const uint8_t* base, Py_ssize_t entries,
                                     int entry_size, int key_pos, int key_width,
                                     int64_t target) noexcept nogil:
    cdef Py_ssize_t slot
    if entries <= 0:
        return -1
    slot = largest_lower_bound(base, entries, entry_size, key_pos, key_width, target)
    if slot == -1:
        return 0
    if index_key(base, slot, entry_size, key_pos, key_width) == target:
        # With duplicate keys (never in a valid index) take the first one.
        while slot > 0 and index_key(base, slot - 1, entry_size, key_pos, key_width) == target:
            slot -= 1
        return slot
    if slot + 1 < entries:
        return slot + 1
    return -1


cdef const uint8_t* _acquire(object buf, Py_buffer* view, Py_ssize_t entries,
                             int entry_size, int key_pos, int key_width) except NULL:
    if key_width != 4 and key_width != 8:
        raise ValueError("key_width must be 4 or 8")
    if entry_size <= 0 or key_pos < 0 or key_pos + key_width > entry_size:
        raise ValueError("key does not fit in the entry")
    PyObject_GetBuffer(buf, view, PyBUF_SIMPLE)
    if entries < 0 or entries > view.len // entry_size:
        PyBuffer_Release(view)
        raise ValueError(f"{entries} entries of {entry_size} bytes do not fit in "
                         f"a buffer of {view.len} bytes")
    return <const uint8_t*>view.buf


def largest_lower_bound_slot(buf, Py_ssize_t entries, int entry_size, int key_pos,
                             int key_width, int64_t target):
    """Slot of the largest key <= ``target`` among the first ``entries``
    entries of ``buf``, or -1 if there is none."""
    cdef Py_buffer view
    cdef const uint8_t* base = _acquire(buf, &view, entries, entry_size, key_pos, key_width)
    cdef Py_ssize_t slot
    with nogil:
        slot = largest_lower_bound(base, entries, entry_size, key_pos, key_width, target)
    PyBuffer_Release(&view)
    return slot


def smallest_upper_bound_slot(buf, Py_ssize_t entries, int entry_size, int key_pos,
                              int key_width, int64_t target):
    """Slot of the smallest key >= ``target``, or -1 if there is none."""
    cdef Py_buffer view
    cdef const uint8_t* base = _acquire(buf, &view, entries, entry_size, key_pos, key_width)
    cdef Py_ssize_t slot
    with nogil:
        slot = smallest_upper_bound(base, entries, entry_size, key_pos, key_width, target)
    PyBuffer_Release(&view)
    return slot


def first_unordered_slot(buf, Py_ssize_t entries, int entry_size, int key_pos,
                         int key_width, bint strict):
    """First slot whose key is smaller than (or, if ``strict``, equal to) the
    previous slot's key, or -1 if the keys are sorted. Used to detect a
    corrupt or zero-filled index file in one pass."""
    cdef Py_buffer view
    cdef const uint8_t* base = _acquire(buf, &view, entries, entry_size, key_pos, key_width)
    cdef Py_ssize_t slot, bad = -1
    cdef int64_t previous, key
    with nogil:
        if entries > 0:
            previous = index_key(base, 0, entry_size, key_pos, key_width)
            for slot in range(1, entries):
                key = index_key(base, slot, entry_size, key_pos, key_width)
                if key < previous or (strict and key == previous):
                    bad = slot
                    break
                previous = key
    PyBuffer_Release(&view)
    return bad


def offset_index_lookup(buf, Py_ssize_t entries, int64_t base_offset, int64_t target_offset):
    """OffsetIndex.lookup in one call: (offset, position) of the largest entry
    with offset <= ``target_offset``, or (base_offset, 0) if there is none."""
    cdef Py_buffer view
    cdef const uint8_t* base
    cdef Py_ssize_t slot
    cdef int64_t relative = target_offset - base_offset
    cdef int64_t found_relative = 0, position = 0
    if entries <= 0 or relative < 0:
        return base_offset, 0
    if relative > INDEX_RELATIVE_OFFSET_MAX:
        relative = INDEX_RELATIVE_OFFSET_MAX
    base = _acquire(buf, &view, entries, OFFSET_INDEX_ENTRY_SIZE,
                    OFFSET_INDEX_RELATIVE_OFFSET_AT, INDEX_RELATIVE_OFFSET_WIDTH)
    slot = largest_lower_bound(base, entries, OFFSET_INDEX_ENTRY_SIZE,
                               OFFSET_INDEX_RELATIVE_OFFSET_AT, INDEX_RELATIVE_OFFSET_WIDTH, relative)
    if slot >= 0:
        found_relative = _be32(base + slot * OFFSET_INDEX_ENTRY_SIZE
                               + OFFSET_INDEX_RELATIVE_OFFSET_AT)
        position = _be32(base + slot * OFFSET_INDEX_ENTRY_SIZE + OFFSET_INDEX_POSITION_AT)
    PyBuffer_Release(&view)
    return base_offset + found_relative, position


from posix.mman cimport (MAP_FAILED, MAP_SHARED, MS_SYNC, PROT_READ, PROT_WRITE, mmap,
                         msync, munmap)


cdef class FileMapping:
    """A shared mapping of ``length`` bytes of the file ``fd``, which the
    caller may close right away (Python's ``mmap.mmap`` keeps a dup() of the
    descriptor for as long as it lives: one descriptor per mapped index).
    A buffer like mmap's: readable, writable when ``writable``; ``close``
    refuses while a buffer is exported (BufferError), so a search in
    progress never reads unmapped memory."""

    cdef char* _address
    cdef Py_ssize_t _length
    cdef bint _writable
    cdef Py_ssize_t _exports

    def __cinit__(self, int fd, Py_ssize_t length, bint writable):
        if length <= 0:
            raise ValueError("cannot map an empty file")
        cdef void* address = mmap(NULL, length, PROT_READ | (PROT_WRITE if writable else 0),
                                  MAP_SHARED, fd, 0)
        if address == MAP_FAILED:
            PyErr_SetFromErrno(OSError)
        self._address = <char*>address
        self._length = length
        self._writable = writable

    def __len__(self):
        return self._length

    @property
    def closed(self) -> bool:
        return self._address == NULL

    def __getbuffer__(self, Py_buffer* view, int flags):
        if self._address == NULL:
            raise ValueError("mapping closed")
        PyBuffer_FillInfo(view, self, self._address, self._length, not self._writable, flags)
        self._exports += 1

    def __releasebuffer__(self, Py_buffer* view):
        self._exports -= 1

    def __getitem__(self, key):
        return memoryview(self)[key]

    def __setitem__(self, key, value):
        memoryview(self)[key] = value

    def flush(self):
        """msync: the written entries reach the file."""
        if self._address != NULL and self._writable:
            if msync(self._address, self._length, MS_SYNC) != 0:
                PyErr_SetFromErrno(OSError)

    def close(self):
        if self._address == NULL:
            return
        if self._exports:
            raise BufferError("cannot close exported pointers exist")
        munmap(self._address, self._length)
        self._address = NULL

    def __dealloc__(self):
        if self._address != NULL:
            munmap(self._address, self._length)
