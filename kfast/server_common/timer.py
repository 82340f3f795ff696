"""SystemTimer: the hierarchical timing wheel driven by the event loop.

Kafka's SystemTimer wraps its TimingWheel with a clock, a DelayQueue of
buckets and a reaper thread that polls that queue. In kfast the event loop
is the reaper: the timer keeps exactly one ``loop.call_at`` handle, armed for
the earliest non-empty bucket of the wheel (kfast._ext.timer), so the loop
sleeps until something can expire. On wake it advances the wheel to the
loop's clock, re-arms for the next bucket and runs the expired tasks.

The handle is re-armed only when the earliest expiration moves earlier: a
million timeouts added with the same delay cost one ``call_at``, and
cancelling them costs none (an emptied bucket just wakes the loop once,
and the wheel skips it).

Every call happens on the loop's thread; nothing here locks.

    timer = SystemTimer()                      # inside a running loop
    handle = timer.schedule(30_000, on_timeout)
    ...
    handle.cancel()                            # O(1); True if it was pending
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from kfast._ext.timer import TimerTaskEntry, TimingWheel

__all__ = ["SystemTimer", "TimerTaskEntry"]


def _clock_for(loop: asyncio.AbstractEventLoop) -> Callable[[], float]:
    """The clock the wheel reads on every schedule(): time.monotonic when
    the loop's own clock is that clock, else loop.time.

    asyncio's loop.time() is time.monotonic() behind a Python method;
    uvloop's is libuv's CLOCK_MONOTONIC truncated to whole ms. Either way
    time.monotonic (which the kernel reads with one clock_gettime on Linux)
    is the same clock, never behind loop.time(), so a call_at armed for an
    expiration cannot wake the loop before the wheel sees it due. The probe
    checks exactly that -- same epoch, loop.time() not ahead, lagging by
    less than 2 ms -- instead of trusting the loop's type.
    """
    before = time.monotonic()
    loop_now = loop.time()
    after = time.monotonic()
    if before - 0.002 <= loop_now <= after:
        return time.monotonic
    return loop.time


class SystemTimer:
    """Millisecond timeouts on one event loop, O(1) to schedule and cancel.

    ``schedule(delay_ms, callback)`` returns a TimerTaskEntry whose
    ``cancel()`` stops the callback from running. Callbacks run on the loop
    no earlier than ``delay_ms`` after scheduling (at ``tick_ms``
    granularity), in expiration order; a callback due at once (delay 0)
    runs on a later loop iteration, never inside schedule(). A callback that
    raises is reported to the loop's exception handler, like any asyncio
    callback, and the others still run.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None = None,
        *,
        tick_ms: int = 1,
        wheel_size: int = 20,
    ) -> None:
        if loop is None:
            loop = asyncio.get_running_loop()
        self._loop = loop
        self._wheel = wheel = TimingWheel(tick_ms, wheel_size, clock=_clock_for(loop))
        wheel.advance_clock(wheel.now_ms())
        wheel.on_earlier_expiration = self._arm
        self._handle: asyncio.TimerHandle | None = None
        self._armed_ms = 0
        #: How many times the loop timer has been armed (a cost metric).
        self.arm_count = 0
        # The kernel's bound method itself, not a method delegating to it,
        # so a schedule() from Python is a single C call.
        self.schedule = wheel.schedule
        self.add = wheel.add

    #: ``schedule(delay_ms, callback)``: run ``callback()`` ``delay_ms`` from
    #: now; return its handle.
    schedule: Callable[[int, Callable[[], object]], TimerTaskEntry]
    #: ``add(expiration_ms, callback)``: run ``callback()`` when the clock
    #: (``now_ms``) reaches ``expiration_ms``; return its handle.
    add: Callable[[int, Callable[[], object]], TimerTaskEntry]

    @property
    def size(self) -> int:
        """Callbacks scheduled and neither run nor cancelled."""
        return self._wheel.size

    def now_ms(self) -> int:
        """The timer's clock (the loop's) in whole milliseconds."""
        return self._wheel.now_ms()

    @property
    def is_shutdown(self) -> bool:
        return self._wheel.closed

    def shutdown(self) -> int:
        """Cancel every pending callback and refuse new ones (schedule then
        raises RuntimeError); return how many were cancelled."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        return self._wheel.close()

    def _arm(self, expiration_ms: int) -> None:
        # Called by the wheel whenever its earliest expiration moves earlier,
        # and by _on_wake for the next bucket. An armed handle that is
        # already as early is kept.
        if self._handle is not None:
            if self._armed_ms <= expiration_ms:
                return
            self._handle.cancel()
        self._armed_ms = expiration_ms
        self._handle = self._loop.call_at(expiration_ms / 1000.0, self._on_wake)
        self.arm_count += 1

    def _on_wake(self) -> None:
        self._handle = None
        wheel = self._wheel
        expired = wheel.advance_clock(wheel.now_ms())
        following = wheel.next_expiration()
        if following is not None:
            self._arm(following)
        if expired:
            self._run(expired)

    def _run(self, tasks: list[Callable[[], object]]) -> None:
        for index, task in enumerate(tasks):
            try:
                task()
            except (SystemExit, KeyboardInterrupt):
                # The wheel has already handed these out: keep the rest.
                if index + 1 < len(tasks):
                    self._loop.call_soon(self._run, tasks[index + 1 :])
                raise
            except BaseException as exc:
                self._loop.call_exception_handler(
                    {
                        "message": "Exception in SystemTimer callback",
                        "exception": exc,
                        "callback": task,
                    }
                )
