# cython: binding=False
# binding=False makes methods plain C method descriptors, which CPython calls
# without building a bound method: add()+cancel() went from 207 to 133 ns.
"""Hierarchical timing wheel: O(1) add and cancel for millions of timeouts.

Kafka keeps every delayed operation's timeout (DelayedProduce,
DelayedFetch, DelayedJoin, DelayedHeartbeat, ...) in a hierarchy of timing
wheels. This kernel is that mechanism and nothing else: it never reads a
configuration, logs, or knows about an event loop. kfast.server_common.timer drives
it from the loop.

Level 1 has ``wheel_size`` buckets of ``tick_ms`` each, so it spans
``interval = tick_ms * wheel_size``. A task whose expiration is beyond that
goes to an overflow level whose tick is the level below's interval; levels
are created on demand. With tick_ms=1 and wheel_size=20:

    level 1: tick 1 ms,    interval 20 ms
    level 2: tick 20 ms,   interval 400 ms
    level 3: tick 400 ms,  interval 8000 ms     ...

Each level's current time is a multiple of its tick. A task expiring at E
lands in the first level L with E < current_L + interval_L, in the bucket
(E // tick_L) % wheel_size, whose expiration is (E // tick_L) * tick_L.
Worked through from time 0:

  * 2 ms   -> level 1 bucket 2 (expires at 2). Added 8 ms later (E=10)
              it goes to bucket 10.
  * 19 ms added at 8 (E=27) -> level 1 bucket 7: bucket 7 held the tasks
              expiring at 7, which have already expired, so it is reused.
  * 350 ms -> past level 1 (20 ms); level 2 bucket 350 // 20 = 17.
  * 450 ms -> past level 2 (400 ms); level 3 bucket 450 // 400 = 1, which
              expires at 400. At 400 its tasks are re-inserted: 50 ms are
              left, more than level 1 spans, so level 2 bucket
              (450 // 20) % 20 = 2, expiring at 440. At 440, 10 ms are
              left: level 1 bucket 450 % 20 = 10, expiring at 450, when the
              task is handed out.

Only buckets are queued for expiry, never ticks: a binary min-heap of
(bucket expiration, bucket) plays the part of Kafka's DelayQueue, so
advance_clock() jumps straight from one non-empty bucket to the next and the
event loop sleeps until next_expiration(). A bucket is queued when it gets
its first task for a new expiration and leaves the queue when it expires;
cancelling its tasks leaves it queued (cancel stays O(1) and never touches
the heap), and next_expiration() skips such empty buckets.

Buckets can be reused because a level's live buckets always have distinct
expirations within (current, current + interval): two tasks mapping to the
same bucket index at the same time share its expiration.

A task that has already expired when it is added (E < current + tick_ms)
goes on the due list instead of a bucket; the next advance_clock() hands it
out whatever the time, and next_expiration() reports it as due now. (Kafka
hands such tasks straight to its executor; handing them to the driver keeps
add() free of re-entrant calls into the caller.)
"""
cimport cython
from libc.math cimport floor
from libc.stdint cimport INT64_MAX, int64_t, uint64_t
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

import sys
import time as _time

# time.monotonic() is clock_gettime(CLOCK_MONOTONIC) on Linux: when a wheel
# is given that clock, clock_ms() reads it directly, without a Python call
# and a float (about 50 ns of a ~200 ns schedule()+cancel()). Elsewhere Python's
# monotonic clock may be a different source, so it is called as given.
cdef object _MONOTONIC = _time.monotonic if sys.platform.startswith("linux") else None

cdef enum Placement:
    PLACED_EXPIRED = 0    # expiration is within the current tick: due now
    PLACED = 1
    PLACED_EARLIEST = 2   # queued a bucket that is now the earliest queued


cdef inline bint _before(int64_t expiration_ms, int64_t start_ms,
                         int64_t span_ms) noexcept nogil:
    # expiration < start + span, without overflowing near the int64 limits.
    if expiration_ms < start_ms:
        return True
    return <uint64_t>expiration_ms - <uint64_t>start_ms < <uint64_t>span_ms


cdef inline int64_t _saturating_mul(int64_t a, int64_t b) noexcept nogil:
    if a > INT64_MAX // b:
        return INT64_MAX
    return a * b


@cython.final
@cython.freelist(1024)
cdef class TimerTaskEntry:
    """A scheduled task: the handle add() returns. cancel() is O(1)."""

    def __init__(self):
        raise TypeError("TimerTaskEntry is created by TimingWheel.add")

    cpdef bint cancel(self):
        """Unlink the task so it never fires; False if it already fired or
        was cancelled."""
        cdef TimerTaskList bucket = self.bucket
        if bucket is None:
            return False
        bucket.unlink(self)
        bucket.wheel._size -= 1
        self.state = ENTRY_CANCELLED
        return True

    @property
    def is_pending(self):
        return self.state == ENTRY_PENDING

    @property
    def is_expired(self):
        """True once advance_clock has handed the task out."""
        return self.state == ENTRY_EXPIRED

    @property
    def is_cancelled(self):
        return self.state == ENTRY_CANCELLED

    @property
    def level(self):
        """Wheel level holding the task (1-based); 0 on the due list; None
        once it is no longer pending."""
        return None if self.bucket is None else self.bucket.level

    @property
    def bucket_index(self):
        """Index of the bucket within its level; None when not in a bucket."""
        if self.bucket is None or self.bucket.level == 0:
            return None
        return self.bucket.index

    @property
    def bucket_expiration_ms(self):
        """When the holding bucket expires (a multiple of its level's tick)."""
        if self.bucket is None or self.bucket.level == 0:
            return None
        return self.bucket.expiration_ms

    def __repr__(self):
        state = ("pending", "expired", "cancelled")[<int>self.state]
        return (f"<TimerTaskEntry expiration_ms={self.expiration_ms} {state}"
                f" level={self.level} bucket={self.bucket_index}>")


@cython.final
cdef class TimerTaskList:
    """One bucket (internal): tasks sharing an expiration tick of one level."""

    def __cinit__(self, TimingWheel wheel, int level, int index):
        cdef TimerTaskEntry root = TimerTaskEntry.__new__(TimerTaskEntry)
        root.expiration_ms = -1
        root.next = root
        root.prev = root
        self.root = root
        self.wheel = wheel
        self.expiration_ms = -1
        self.count = 0
        self.level = level
        self.index = index

    cdef void append(self, TimerTaskEntry entry) noexcept:
        cdef TimerTaskEntry root = self.root
        cdef TimerTaskEntry tail = root.prev
        entry.next = root
        entry.prev = tail
        entry.bucket = self
        tail.next = entry
        root.prev = entry
        self.count += 1

    cdef void unlink(self, TimerTaskEntry entry) noexcept:
        entry.prev.next = entry.next
        entry.next.prev = entry.prev
        entry.next = None
        entry.prev = None
        entry.bucket = None
        self.count -= 1

    cdef TimerTaskEntry detach_all(self):
        """Empty the bucket in O(1); return the first entry of the old chain,
        which ends at the sentinel root (the caller walks it with next)."""
        cdef TimerTaskEntry first = self.root.next
        cdef TimerTaskEntry last = self.root.prev
        # Terminate the old chain with None so the walk knows where to stop.
        last.next = None
        self.root.next = self.root
        self.root.prev = self.root
        self.count = 0
        return None if first is self.root else first


@cython.final
cdef class TimingWheel:
    """The whole hierarchy plus its expiry queue of buckets.

    ``clock`` (optional) is a zero-argument callable returning seconds, such
    as ``loop.time``; only schedule() and clock_ms() read it.

    ``on_earlier_expiration`` (optional attribute) is called with an
    expiration in ms when add() or schedule() makes next_expiration()
    earlier, so a driver sleeping until next_expiration() can wake sooner.
    It is never called from inside advance_clock(): the driver asks
    next_expiration() after advancing anyway.
    """

    def __cinit__(self):
        self._queue = NULL
        self._queued = 0
        self._queue_capacity = 0

    def __init__(self, int64_t tick_ms=1, int wheel_size=20,
                 int64_t start_ms=0, clock=None):
        if tick_ms < 1:
            raise ValueError("tick_ms must be at least 1")
        if wheel_size < 2:
            raise ValueError("wheel_size must be at least 2")
        if start_ms < 0:
            raise ValueError("start_ms must not be negative")
        if self._levels:
            raise RuntimeError("TimingWheel is already initialised")
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self._buckets = []
        self._due = TimerTaskList(self, 0, -1)
        self._size = 0
        self._clock = clock
        self._clock_is_monotonic = clock is not None and clock is _MONOTONIC
        self.on_earlier_expiration = None
        self._tick[0] = tick_ms
        self._interval[0] = _saturating_mul(tick_ms, wheel_size)
        self._current[0] = start_ms - start_ms % tick_ms
        self._add_buckets(1)
        self._levels = 1

    def __dealloc__(self):
        PyMem_Free(self._queue)

    # -- level management -------------------------------------------------

    cdef int _add_buckets(self, int level) except -1:
        cdef int i
        cdef Py_ssize_t capacity = <Py_ssize_t>level * self.wheel_size
        cdef BucketSlot* grown
        for i in range(self.wheel_size):
            self._buckets.append(TimerTaskList(self, level, i))
        # Each bucket is queued at most once, so the heap never outgrows the
        # number of buckets and _enqueue needs no growth path.
        grown = <BucketSlot*>PyMem_Realloc(self._queue, capacity * sizeof(BucketSlot))
        if grown == NULL:
            raise MemoryError()
        self._queue = grown
        self._queue_capacity = capacity
        return 0

    cdef int _add_level(self) except -1:
        """Create the overflow level above the current top level."""
        cdef int top = self._levels - 1
        cdef int64_t tick = self._interval[top]
        if self._levels == MAX_LEVELS:
            raise OverflowError("timing wheel has no room for another level")
        self._add_buckets(self._levels + 1)
        self._tick[self._levels] = tick
        self._interval[self._levels] = _saturating_mul(tick, self.wheel_size)
        self._current[self._levels] = self._current[top] - self._current[top] % tick
        self._levels += 1
        return 0

    cdef void _advance_current(self, int64_t time_ms) noexcept:
        # A coarser level can only move when the finer one below it does.
        cdef int level
        for level in range(self._levels):
            if not _before(time_ms, self._current[level], self._tick[level]):
                self._current[level] = time_ms - time_ms % self._tick[level]
            else:
                break

    # -- expiry queue (binary min-heap of buckets by expiration) ---------

    cdef int _enqueue(self, TimerTaskList bucket, int64_t expiration_ms) except -1:
        cdef Py_ssize_t i = self._queued
        cdef Py_ssize_t parent
        if i == self._queue_capacity:
            raise AssertionError("timing wheel queued a bucket twice")
        self._queued += 1
        while i > 0:
            parent = (i - 1) >> 1
            if self._queue[parent].expiration_ms <= expiration_ms:
                break
            self._queue[i] = self._queue[parent]
            i = parent
        self._queue[i].expiration_ms = expiration_ms
        self._queue[i].bucket = <void*>bucket
        return 0

    cdef TimerTaskList _dequeue(self):
        cdef TimerTaskList top = <TimerTaskList>self._queue[0].bucket
        cdef Py_ssize_t n = self._queued - 1
        cdef BucketSlot last = self._queue[n]
        cdef Py_ssize_t i = 0
        cdef Py_ssize_t child
        self._queued = n
        while True:
            child = 2 * i + 1
            if child >= n:
                break
            if child + 1 < n and self._queue[child + 1].expiration_ms < self._queue[child].expiration_ms:
                child += 1
            if self._queue[child].expiration_ms >= last.expiration_ms:
                break
            self._queue[i] = self._queue[child]
            i = child
        if n > 0:
            self._queue[i] = last
        return top

    # -- placement ----------------------------------------------------------

    cdef int _place(self, TimerTaskEntry entry) except -1:
        cdef int64_t expiration_ms = entry.expiration_ms
        cdef int level = 0
        cdef int64_t virtual_id
        cdef int64_t bucket_expiration_ms
        cdef TimerTaskList bucket
        if _before(expiration_ms, self._current[0], self._tick[0]):
            return PLACED_EXPIRED
        while True:
            if (self._interval[level] == INT64_MAX
                    or _before(expiration_ms, self._current[level], self._interval[level])):
                # expiration_ms > current >= 0 here, so C division is floor.
                virtual_id = expiration_ms // self._tick[level]
                bucket = <TimerTaskList>self._buckets[
                    level * self.wheel_size + <Py_ssize_t>(virtual_id % self.wheel_size)]
                bucket.append(entry)
                bucket_expiration_ms = virtual_id * self._tick[level]
                if bucket.expiration_ms != bucket_expiration_ms:
                    bucket.expiration_ms = bucket_expiration_ms
                    self._enqueue(bucket, bucket_expiration_ms)
                    if self._queue[0].bucket == <void*>bucket:
                        return PLACED_EARLIEST
                return PLACED
            level += 1
            if level == self._levels:
                self._add_level()

    cdef int _notify(self, int64_t expiration_ms) except -1:
        if not self._advancing and self.on_earlier_expiration is not None:
            self.on_earlier_expiration(expiration_ms)
        return 0

    cdef TimerTaskEntry add_entry(self, int64_t expiration_ms, object task):
        cdef TimerTaskEntry entry
        cdef int placement
        if self._closed:
            raise RuntimeError("timing wheel is closed")
        entry = TimerTaskEntry.__new__(TimerTaskEntry)
        entry.expiration_ms = expiration_ms
        entry.task = task
        self._size += 1
        placement = self._place(entry)
        if placement == PLACED_EXPIRED:
            self._due.append(entry)
            if self._due.count == 1:
                self._notify(self._current[0])
        elif placement == PLACED_EARLIEST and self._due.count == 0:
            self._notify(self._queue[0].expiration_ms)
        return entry

    cdef int64_t clock_ms(self) except? -1:
        cdef timespec now
        if self._clock_is_monotonic:
            clock_gettime(CLOCK_MONOTONIC, &now)
            return <int64_t>now.tv_sec * 1000 + now.tv_nsec // 1000000
        if self._clock is None:
            raise TypeError("this TimingWheel has no clock")
        # The epsilon absorbs float error in ms -> s -> ms round trips (a
        # loop woken at exactly expiration/1000 must read expiration, not
        # expiration - 1); it is a nanosecond, far below a tick.
        return <int64_t>floor(<double>self._clock() * 1000.0 + 1e-6)

    # -- Python API ---------------------------------------------------------

    def add(self, int64_t expiration_ms, task):
        """Schedule ``task`` for ``expiration_ms`` (same clock as
        advance_clock); return its TimerTaskEntry."""
        return self.add_entry(expiration_ms, task)

    def schedule(self, int64_t delay_ms, task):
        """Schedule ``task`` ``delay_ms`` after the clock's current time."""
        cdef int64_t now_ms = self.clock_ms()
        if delay_ms > 0 and now_ms > INT64_MAX - delay_ms:
            return self.add_entry(INT64_MAX, task)
        return self.add_entry(now_ms + delay_ms, task)

    def now_ms(self):
        """The clock's current time in whole ms (what schedule() adds to)."""
        return self.clock_ms()

    def advance_clock(self, int64_t now_ms):
        """Move time to ``now_ms``; return the tasks that expired, in
        expiration order (due-list tasks first).

        Every queued bucket expiring at or before ``now_ms`` is flushed in
        turn; its tasks either expire or cascade into finer levels. Moving
        backwards is a no-op apart from handing out the due list.
        """
        cdef list expired = []
        cdef TimerTaskList bucket
        self._advancing = True
        try:
            if self._due.count:
                self._flush(self._due, expired)
            while self._queued and self._queue[0].expiration_ms <= now_ms:
                bucket = self._dequeue()
                self._advance_current(bucket.expiration_ms)
                bucket.expiration_ms = -1
                self._flush(bucket, expired)
            if now_ms > self._current[0]:
                self._advance_current(now_ms)
        finally:
            self._advancing = False
        return expired

    cdef int _flush(self, TimerTaskList bucket, list expired) except -1:
        cdef TimerTaskEntry entry = bucket.detach_all()
        cdef TimerTaskEntry following
        cdef bint due = bucket.level == 0
        while entry is not None:
            following = entry.next
            entry.next = None
            entry.prev = None
            entry.bucket = None
            if due or self._place(entry) == PLACED_EXPIRED:
                entry.state = ENTRY_EXPIRED
                self._size -= 1
                expired.append(entry.task)
            entry = following
        return 0

    def next_expiration(self):
        """Expiration (ms) of the earliest non-empty bucket, the current
        time if tasks are due now, or None if nothing is scheduled."""
        cdef TimerTaskList bucket
        if self._due.count:
            return self._current[0]
        while self._queued:
            bucket = <TimerTaskList>self._queue[0].bucket
            if bucket.count:
                return self._queue[0].expiration_ms
            # Emptied by cancellation: drop it so the driver does not wake
            # for nothing. It is queued again when it gets a task.
            self._dequeue()
            bucket.expiration_ms = -1
        return None

    def close(self):
        """Cancel every pending task and refuse new ones; return how many
        were cancelled."""
        cdef TimerTaskList bucket
        cdef TimerTaskEntry entry
        cdef TimerTaskEntry following
        cdef Py_ssize_t cancelled = 0
        self._closed = True
        for bucket in self._buckets + [self._due]:
            entry = bucket.detach_all()
            while entry is not None:
                following = entry.next
                entry.next = None
                entry.prev = None
                entry.bucket = None
                entry.state = ENTRY_CANCELLED
                cancelled += 1
                entry = following
            bucket.expiration_ms = -1
        self._queued = 0
        self._size = 0
        return cancelled

    @property
    def size(self):
        """Number of pending tasks (not yet expired or cancelled)."""
        return self._size

    def __len__(self):
        return self._size

    @property
    def current_time(self):
        """Level 1's current time in ms: a multiple of tick_ms."""
        return self._current[0]

    @property
    def levels(self):
        """Number of levels created so far."""
        return self._levels

    @property
    def closed(self):
        return self._closed

    def level_current_time(self, int level):
        """Current time of ``level`` (1-based), a multiple of its tick."""
        if level < 1 or level > self._levels:
            raise IndexError("no such level")
        return self._current[level - 1]

    def level_tick_ms(self, int level):
        if level < 1 or level > self._levels:
            raise IndexError("no such level")
        return self._tick[level - 1]

    def _check_invariants(self):
        """Walk every structure and raise AssertionError on any
        inconsistency. O(size); for tests."""
        cdef TimerTaskList bucket
        cdef TimerTaskEntry entry
        cdef Py_ssize_t i, walked, total = 0
        cdef int level
        cdef int64_t tick
        queued = {}
        for i in range(self._queued):
            bucket = <TimerTaskList>self._queue[i].bucket
            assert id(bucket) not in queued, "bucket queued twice"
            queued[id(bucket)] = self._queue[i].expiration_ms
            assert bucket.expiration_ms == self._queue[i].expiration_ms
            if i:
                assert self._queue[(i - 1) >> 1].expiration_ms <= self._queue[i].expiration_ms
        for bucket in self._buckets + [self._due]:
            walked = 0
            entry = bucket.root.next
            while entry is not bucket.root:
                assert entry.bucket is bucket and entry.state == ENTRY_PENDING
                assert entry.next.prev is entry
                if bucket.level:
                    level = bucket.level - 1
                    tick = self._tick[level]
                    assert entry.expiration_ms // tick * tick == bucket.expiration_ms
                    assert bucket.expiration_ms > self._current[level]
                else:
                    assert _before(entry.expiration_ms, self._current[0], self._tick[0])
                walked += 1
                entry = entry.next
            assert walked == bucket.count
            total += walked
            if bucket.level and bucket.count:
                assert queued.get(id(bucket)) == bucket.expiration_ms, "non-empty bucket not queued"
            if bucket.level and id(bucket) not in queued:
                assert bucket.expiration_ms == -1
        assert total == self._size
