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
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


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
    out: asyncio.Future[R] = future.get_loop().create_future()

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

    future.add_done_callback(done)
    return out
