"""DelayedFetch: a fetch that waits for fetch.min.bytes of new data or for
max_wait_ms (Kafka's kafka.server.DelayedFetch).

It is watched under every partition it reads. The replica manager calls
``check_and_complete(partition key)`` when a partition's high watermark (the
bound for read_uncommitted) or last stable offset (read_committed) moves, or
its log start offset / leadership changes. ``try_complete`` re-runs the
fetch's reads — index lookups that produce FileRegions, no record bytes are
read — and completes once they add up to min_bytes or a partition has an
error to report; on expiry the response carries whatever is there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from kfast.server_common.purgatory import DelayedOperation

if TYPE_CHECKING:
    from kfast.server.replica_manager import FetchPartitionData, PartitionFetchRequest

    # What a fetch reads: each partition's request and its data, in request order.
    FetchResults = list[tuple[PartitionFetchRequest, FetchPartitionData]]


class DelayedFetch(DelayedOperation):
    def __init__(
        self,
        delay_ms: int,
        min_bytes: int,
        read: Callable[[], tuple[FetchResults, int, bool]],
        future: asyncio.Future[FetchResults],
    ) -> None:
        """``read()`` returns (results, total bytes, has_error)."""
        super().__init__(delay_ms)
        self.min_bytes = min_bytes
        self.read = read
        self.future = future
        self._results: FetchResults | None = None

    def try_complete(self) -> bool:
        results, total_bytes, has_error = self.read()
        if total_bytes >= self.min_bytes or has_error:
            self._results = results
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        results = self._results
        if results is None:
            try:
                results = self.read()[0]
            except Exception as exc:  # delivered to the waiting handler
                if not self.future.done():
                    self.future.set_exception(exc)
                return
        if not self.future.done():
            self.future.set_result(results)

    def on_expiration(self) -> None:
        pass
