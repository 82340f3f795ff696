"""DelayedFetch: a fetch that waits for fetch.min.bytes of new data or for
max_wait_ms (Kafka's kafka.server.DelayedFetch).

It is watched under every partition it reads. The replica manager calls
``check_and_complete(partition key)`` whenever something a fetch of that
partition reads changes: an append, a high watermark or last stable offset
move, a log start offset move (DeleteRecords, retention), a truncation, a
leadership or leader epoch change, the partition's deletion or its log going
offline. ``try_complete`` re-runs the fetch's reads -- index lookups that
produce FileRegions, no record bytes are read -- and completes once they add
up to min_bytes or a partition has an error to report; on expiry the
response carries whatever is there.

Since every such change re-reads through ``try_complete``, the last read of
a fetch that found nothing is still what a read at expiry would find: the
expiry answers with it instead of reading every partition again (the idle
long poll's cost, issue 21 item 5). Only a fetch whose answer can change
without an event re-reads at expiry (``reread_on_expiry``): one whose last
read had record bytes (below min_bytes; the segments under them may since
have been cleaned), a follower's (the leader quota's throttle lifts with
time), a rack-aware consumer's (its preferred read replica follows the
followers' lag).

A waiting fetch's expiry is put on a grid (``expiry_step_ms``): with 100
consumers long-polling, each expiry at its own millisecond is a wake-up of
the event loop of its own, and on a virtual machine a wake-up from sleep runs
its first ~0.5 ms of Python several times slower (caches and TLB cold); the
expiries that fall in one grid step share one wake-up instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kfast.server.futures import complete_soon
from kfast.server_common.purgatory import DelayedOperation

if TYPE_CHECKING:
    from kfast.server.replica_manager import (
        FetchParams,
        FetchPartitionData,
        PartitionFetchRequest,
        ReplicaManager,
    )

    # What a fetch reads: each partition's request and its data, in request order.
    FetchResults = list[tuple[PartitionFetchRequest, FetchPartitionData]]


# The expiry grid's step is the largest of these that is at most 1/25 of
# max_wait_ms (a fetch is answered at most 4 % later than max_wait_ms; Kafka's
# own expiration reaper runs late by its tick and scheduling too). Each
# divides the fetch purgatory timer's level-1 interval (20 ms: tick 1 ms x 20
# buckets), so a grid point is also the expiration of the overflow bucket that
# held the fetch: its last cascade and its expiry are the same wake-up.
_EXPIRY_GRID_STEPS_MS = (20, 10, 5, 4, 2)
_EXPIRY_GRID_SLACK_DIVISOR = 25


def expiry_step_ms(max_wait_ms: int) -> int:
    """The grid step a fetch waiting ``max_wait_ms`` expires on (0: none,
    it expires at its own millisecond)."""
    for step in _EXPIRY_GRID_STEPS_MS:
        if step * _EXPIRY_GRID_SLACK_DIVISOR <= max_wait_ms:
            return step
    return 0


class DelayedFetch(DelayedOperation):
    """One waiting fetch: its reads go through ``replica_manager`` with
    ``params``, of ``requests`` -- or of ``source()`` at each read (a
    session's ready partitions, which change while it waits). Its answer is
    ``future``'s result: the results, or ``respond(results)`` when given (a
    fast path's encoded response, made when the fetch completes instead of
    one loop pass later in a callback of a second future)."""

    # Slots: one of these per long poll; no instance dict.
    __slots__ = (
        "expiry_step_ms",
        "replica_manager",
        "params",
        "requests",
        "source",
        "future",
        "respond",
        "_results",
        "_reread",
        "_last",
    )

    def __init__(
        self,
        replica_manager: ReplicaManager,
        params: FetchParams,
        requests: list[PartitionFetchRequest] | Callable[[], list[PartitionFetchRequest]],
        future: asyncio.Future[Any],
        last_read: FetchResults | None = None,
        reread_on_expiry: bool = True,
        respond: Callable[[FetchResults], Any] | None = None,
    ) -> None:
        """``last_read``: the results of the read that found too little,
        made just before."""
        super().__init__(params.max_wait_ms)
        self.expiry_step_ms = expiry_step_ms(params.max_wait_ms)
        self.replica_manager = replica_manager
        self.params = params
        if callable(requests):
            self.requests: list[PartitionFetchRequest] | None = None
            self.source: Callable[[], list[PartitionFetchRequest]] | None = requests
        else:
            self.requests = requests
            self.source = None
        self.future = future
        self.respond = respond
        self._results: FetchResults | None = None
        # The latest read that found nothing (None: the expiry reads again).
        self._reread = reread_on_expiry
        self._last = None if reread_on_expiry else last_read

    def read(self) -> tuple[FetchResults, int, bool]:
        """(results, total bytes, has_error) of a read now."""
        source = self.source
        requests = self.requests if source is None else source()
        assert requests is not None
        return self.replica_manager.read_from_local_log(self.params, requests)

    def try_complete(self) -> bool:
        results, total_bytes, has_error = self.read()
        if total_bytes >= self.params.min_bytes or has_error:
            self._results = results
            return self.force_complete()
        self._last = None if self._reread or total_bytes else results
        return False

    def on_complete(self) -> None:
        future = self.future
        results = self._results if self._results is not None else self._last
        try:
            if results is None:
                results = self.read()[0]
            answer = results if self.respond is None else self.respond(results)
        except Exception as exc:  # delivered to the waiting handler
            if not future.done():
                future.set_exception(exc)
            return
        if future.done():
            return
        # Once the request that woke it (an append) is answered, in the same
        # loop pass (kfast.server.futures): a consumer's next fetch, or a
        # follower's -- which moves the high watermark acks=all waits for --
        # can arrive before the pass ends.
        complete_soon(future, answer)

    def on_expiration(self) -> None:
        pass
