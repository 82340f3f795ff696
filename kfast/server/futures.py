"""``then``: a future of a function of another future's result, chained by a
done callback.

A request that waits (a fetch in the purgatory, an acks=all produce) hands
the network layer a future of its response. Awaiting the operation's future
in an ``async def`` costs a Task and a coroutine per waiting request (and
one more per layer that wraps the response); with 100 consumers long-polling
that is the broker's largest per-request cost after the reads (issue 21
item 5). A done callback does the same work: the result, an exception, or
cancellation travel to the returned future exactly as ``await`` would carry
them.

Each hop of such a chain through asyncio's own callbacks waits for the
loop's next pass: a done callback is run by ``call_soon``, and the loop
polls its sockets, then runs each readable one's callback, before it gets
to callbacks scheduled meanwhile. With 1,000 producer connections a pass
is hundreds of Produce requests, so a woken fetch whose response went
purgatory -> Fetch encoder -> request timing -> connection in three
scheduled hops waited three passes (bench/README.md, "1,000 connections").
``then`` returns a ``ChainedFuture``, which runs the callbacks added with
``add_done_now`` (the next ``then`` of a chain, the network layer's) as
soon as it completes, in the completing call: a chain costs one pass
whatever its length. The first hop stays asyncio's: a purgatory future is a
plain one, completed inside another request's handler (the append that
woke it), and the response must not be written from there.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class ChainedFuture(asyncio.Future[T]):
    """An asyncio future that also runs callbacks synchronously when it
    completes (``add_done_now``); ``add_done_callback`` and ``await`` work
    as on any future (scheduled by the loop)."""

    def __init__(self, *, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop=loop)
        self._now: list[Callable[[asyncio.Future[T]], object]] = []

    def add_done_now(self, fn: Callable[[asyncio.Future[T]], object]) -> None:
        """Call ``fn(self)`` when this future completes, in the call that
        completes it (now if it is done). An exception from ``fn`` goes to
        the loop's exception handler, as a done callback's would."""
        if self.done():
            self._call(fn)
        else:
            self._now.append(fn)

    def remove_done_callback(self, fn: Callable[[ChainedFuture[T]], object]) -> int:
        removed = super().remove_done_callback(fn)
        kept = [callback for callback in self._now if callback != fn]
        removed += len(self._now) - len(kept)
        self._now = kept
        return removed

    def set_result(self, result: T) -> None:
        super().set_result(result)
        self._run_now()

    def set_exception(self, exception: type | BaseException) -> None:
        super().set_exception(exception)
        self._run_now()

    def cancel(self, msg: Any | None = None) -> bool:
        if not super().cancel(msg):
            return False
        self._run_now()
        return True

    def _run_now(self) -> None:
        callbacks, self._now = self._now, []
        for fn in callbacks:
            self._call(fn)

    def _call(self, fn: Callable[[asyncio.Future[T]], object]) -> None:
        try:
            fn(self)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            self.get_loop().call_exception_handler(
                {"message": f"Exception in callback {fn!r}", "exception": exc, "future": self}
            )


class _Completions(threading.local):
    """Results waiting for the network callback that produced them to end
    (complete_soon), per thread: each thread runs at most one loop."""

    def __init__(self) -> None:
        self.queue: list[tuple[asyncio.Future[Any], Any]] = []


completions = _Completions()


def complete_soon(future: asyncio.Future[T], result: T) -> None:
    """Set ``future``'s result once the current callback is over: at the
    end of the connection's readable callback this runs in (the network
    layer calls ``run_completions`` there), or else on the loop's next
    pass. For an operation completed inside another request's handler (a
    fetch woken by an append): its chain then runs with nothing of that
    handler on the stack, but in the same pass -- the woken consumer's
    answer goes out between two producers' requests, and its next fetch can
    arrive before the pass ends, instead of a pass later."""
    queue = completions.queue
    if not queue:
        future.get_loop().call_soon(run_completions)
    queue.append((future, result))


def run_completions() -> None:
    """Set the results complete_soon holds (in order; a future cancelled
    meanwhile, its connection closed, is skipped)."""
    queue = completions.queue
    while queue:
        batch = queue[:]
        queue.clear()
        for future, result in batch:
            if not future.done():
                future.set_result(result)


def when_done(future: asyncio.Future[T], fn: Callable[[asyncio.Future[T]], object]) -> None:
    """``fn(future)`` once ``future`` is done: at once, in the completing
    call, for a ChainedFuture; scheduled by the loop for any other."""
    if type(future) is ChainedFuture:
        future.add_done_now(fn)
    else:
        future.add_done_callback(fn)


def then(
    future: asyncio.Future[T],
    on_result: Callable[[T], R],
    on_error: Callable[[Exception], R] | None = None,
) -> asyncio.Future[R]:
    """A future of ``on_result(future.result())``. If ``future`` fails, the
    returned one fails with its exception, or gets ``on_error(exception)``
    when given; an exception raised by either function fails it too. If
    ``future`` is cancelled, so is the returned one. If the returned future
    is cancelled first (its connection closed), ``future`` still runs and its
    outcome is dropped."""
    out: ChainedFuture[R] = ChainedFuture(loop=future.get_loop())

    def done(source: asyncio.Future[T]) -> None:
        if out.done():
            return
        if source.cancelled():
            out.cancel()
            return
        exc = source.exception()
        try:
            if exc is None:
                out.set_result(on_result(source.result()))
            elif on_error is not None and isinstance(exc, Exception):
                out.set_result(on_error(exc))
            else:
                out.set_exception(exc)
        except Exception as failure:
            out.set_exception(failure)

    when_done(future, done)
    return out
