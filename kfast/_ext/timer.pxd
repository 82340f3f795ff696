# Hierarchical timing wheel (Kafka's TimingWheel, TimerTaskList,
# TimerTaskEntry and the DelayQueue of buckets SystemTimer polls).
# timer.pyx works the hierarchy through with numbers; this file declares the
# types so another kernel can cimport them and call add/cancel as C.

from libc.stdint cimport int64_t

# Most levels a wheel can need: each level's tick is the previous level's
# interval, so with wheel_size >= 2 the ticks double at least per level and
# 63 levels cover every int64 expiration.
cdef enum:
    MAX_LEVELS = 64

cdef enum EntryState:
    ENTRY_PENDING = 0     # linked into a bucket or into the due list
    ENTRY_EXPIRED = 1     # handed out by advance_clock
    ENTRY_CANCELLED = 2   # cancel() or TimingWheel.close() unlinked it


ctypedef struct BucketSlot:
    # One slot of the expiry queue: a bucket and the expiration it was queued
    # with, kept side by side so sifting never dereferences the bucket.
    int64_t expiration_ms
    void* bucket          # borrowed TimerTaskList; the wheel's _buckets owns it


cdef class TimerTaskList
cdef class TimingWheel


cdef class TimerTaskEntry:
    # Intrusive list node and the caller's handle in one object: add() hands
    # it out, cancel() unlinks it in O(1).
    cdef TimerTaskEntry next
    cdef TimerTaskEntry prev
    cdef TimerTaskList bucket     # None unless the entry is pending
    cdef readonly int64_t expiration_ms
    cdef readonly object task
    cdef EntryState state

    cpdef bint cancel(self)


cdef class TimerTaskList:
    # A bucket: every task whose expiration falls within one tick of this
    # level, as a circular doubly linked list around a sentinel root.
    cdef TimerTaskEntry root
    cdef TimingWheel wheel
    # Expiration this bucket is queued with, -1 when it is not queued.
    cdef int64_t expiration_ms
    cdef Py_ssize_t count
    cdef int level                # 1-based, 0 for the due list
    cdef int index

    cdef void append(self, TimerTaskEntry entry) noexcept
    cdef void unlink(self, TimerTaskEntry entry) noexcept
    cdef TimerTaskEntry detach_all(self)


cdef class TimingWheel:
    cdef readonly int64_t tick_ms
    cdef readonly int wheel_size
    cdef int _levels
    cdef int64_t _tick[MAX_LEVELS]
    cdef int64_t _interval[MAX_LEVELS]
    cdef int64_t _current[MAX_LEVELS]
    cdef list _buckets            # level-major: _buckets[level * wheel_size + index]
    cdef TimerTaskList _due       # tasks already expired when added
    cdef BucketSlot* _queue       # binary min-heap of queued buckets
    cdef Py_ssize_t _queued
    cdef Py_ssize_t _queue_capacity
    cdef Py_ssize_t _size
    cdef bint _advancing
    cdef bint _closed
    cdef object _clock
    cdef bint _clock_is_monotonic
    cdef public object on_earlier_expiration

    # The C API another kernel may call: add_entry is add(); clock_ms reads
    # the clock as schedule() does.
    cdef TimerTaskEntry add_entry(self, int64_t expiration_ms, object task)
    cdef int64_t clock_ms(self) except? -1

    cdef int _add_buckets(self, int level) except -1
    cdef int _add_level(self) except -1
    cdef void _advance_current(self, int64_t time_ms) noexcept
    cdef int _enqueue(self, TimerTaskList bucket, int64_t expiration_ms) except -1
    cdef TimerTaskList _dequeue(self)
    cdef int _place(self, TimerTaskEntry entry) except -1
    cdef int _notify(self, int64_t expiration_ms) except -1
    cdef int _flush(self, TimerTaskList bucket, list expired) except -1
