"""FetchSessionCache: session life cycle, epochs and eviction (KIP-227)."""

from __future__ import annotations

from kfast.protocol import errors
from kfast.server.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    CachedPartition,
    FetchSessionCache,
    FullFetchContext,
    IncrementalFetchContext,
    SessionErrorContext,
    next_epoch,
)
from kfast.server.replica_manager import FetchPartitionData


class Clock:
    def __init__(self):
        self.now = 0

    def __call__(self):
        return self.now


def part(topic="t", index=0, offset=0):
    return CachedPartition(topic, None, index, offset, 1 << 20)


def data(hw=10, size=0, error=0):
    d = FetchPartitionData(error, hw, hw, 0)
    d.size = size
    return d


def test_sessionless_and_final_epoch_create_nothing():
    cache = FetchSessionCache(10)
    context = cache.new_context(0, FINAL_EPOCH, [part()], [])
    assert isinstance(context, FullFetchContext) and context.session_id == 0
    assert cache.new_context(0, INITIAL_EPOCH, [part()], [], sessionless=True).session_id == 0
    assert len(cache) == 0


def test_full_then_incremental_tracks_positions_and_changes():
    cache = FetchSessionCache(10)
    full = cache.new_context(0, INITIAL_EPOCH, [part(index=0), part(index=1)], [])
    assert full.session_id != 0 and len(cache) == 1
    full.select([(c, data()) for c in full.partitions])
    # Nothing new: the incremental response is empty.
    incremental = cache.new_context(full.session_id, 1, [], [])
    assert isinstance(incremental, IncrementalFetchContext)
    assert incremental.select([(c, data()) for c in incremental.partitions]) == []
    # A moved high watermark or records are reported, once.
    incremental = cache.new_context(full.session_id, 2, [part(index=1, offset=5)], [])
    cached = {c.partition: c for c in incremental.partitions}
    assert cached[1].fetch_offset == 5
    chosen = incremental.select([(cached[0], data(hw=11)), (cached[1], data(size=3))])
    assert [c.partition for c, _ in chosen] == [0, 1]
    # Partitions that returned records move to the back of the session order.
    incremental = cache.new_context(full.session_id, 3, [], [("t", 0)])
    assert [c.partition for c in incremental.partitions] == [1]


def test_session_errors():
    cache = FetchSessionCache(10)
    full = cache.new_context(0, INITIAL_EPOCH, [part()], [])
    wrong_epoch = cache.new_context(full.session_id, 5, [], [])
    assert isinstance(wrong_epoch, SessionErrorContext)
    assert wrong_epoch.error_code == errors.InvalidFetchSessionEpochException.code
    assert (
        cache.new_context(full.session_id + 1, 1, [], []).error_code
        == errors.FetchSessionIdNotFoundException.code
    )
    # FINAL closes the session; it is gone afterwards.
    closing = cache.new_context(full.session_id, FINAL_EPOCH, [part()], [])
    assert closing.session_id == 0 and cache.get(full.session_id) is None


def test_epochs_wrap_to_one():
    assert next_epoch(0x7FFFFFFF) == 1
    assert next_epoch(1) == 2


def test_eviction_prefers_stale_then_smaller_sessions():
    clock = Clock()
    cache = FetchSessionCache(2, eviction_ms=1000, time_ms=clock)
    small = cache.new_context(0, INITIAL_EPOCH, [part(index=0)], []).session_id
    clock.now = 10
    big = cache.new_context(0, INITIAL_EPOCH, [part(index=i) for i in range(3)], []).session_id
    # Full, nothing stale, newcomer not bigger than the smallest: declined.
    clock.now = 20
    declined = cache.new_context(0, INITIAL_EPOCH, [part(index=9)], [])
    assert declined.session_id == 0 and len(cache) == 2
    # A bigger newcomer takes the smallest session's slot.
    bigger = cache.new_context(0, INITIAL_EPOCH, [part(index=i) for i in range(2)], []).session_id
    assert cache.get(small) is None and cache.get(bigger) is not None
    # Once idle long enough, the least recently used goes first.
    clock.now = 5000
    newest = cache.new_context(0, INITIAL_EPOCH, [part()], []).session_id
    assert cache.get(big) is None and cache.get(newest) is not None
    assert cache.evictions == 2


def test_evict_stale_and_zero_slots():
    clock = Clock()
    cache = FetchSessionCache(5, eviction_ms=100, time_ms=clock)
    cache.new_context(0, INITIAL_EPOCH, [part()], [])
    clock.now = 100
    assert cache.evict_stale() == 1 and len(cache) == 0
    disabled = FetchSessionCache(0)
    assert disabled.new_context(0, INITIAL_EPOCH, [part()], []).session_id == 0


def test_incremental_reads_only_ready_partitions():
    cache = FetchSessionCache(10)
    full = cache.new_context(0, INITIAL_EPOCH, [part(index=i, offset=10) for i in range(5)], [])
    # Caught up (fetch offset at the high watermark): none stays ready...
    full.select([(c, data(hw=10)) for c in full.partitions])
    assert cache.new_context(full.session_id, 1, [], []).partitions == []
    # ...until the replica manager reports a change, to the sessions holding it.
    (session,) = cache.mark_ready(("t", 3))
    assert session is cache.get(full.session_id)
    assert cache.mark_ready(("t", 9)) == ()
    incremental = cache.new_context(full.session_id, 2, [part(index=1, offset=4)], [])
    assert [c.partition for c in incremental.partitions] == [1, 3]  # session order
    # Data below the high watermark keeps a partition ready; caught up clears it.
    incremental.partitions_to_read()  # the read begins
    incremental.select(
        [(incremental.partitions[0], data(hw=10)), (incremental.partitions[1], data(hw=10))]
    )
    assert [c.partition for c in cache.new_context(full.session_id, 3, [], []).partitions] == [1]
    # Forgotten partitions and removed sessions are no longer told of changes.
    cache.new_context(full.session_id, 4, [], [("t", 2)])
    assert cache.mark_ready(("t", 2)) == ()
    cache.remove(full.session_id)
    assert cache.mark_ready(("t", 0)) == ()


def test_a_report_after_the_read_keeps_the_partition_ready():
    """A waiting fetch's results are applied a loop turn after the read that
    completed it; an append reported in between must keep the partition
    ready, or the session never reads those records (kafka-python's
    consumers stalled after a rebalance this way)."""
    cache = FetchSessionCache(10)
    full = cache.new_context(0, INITIAL_EPOCH, [part(index=0, offset=10)], [])
    full.partitions_to_read()
    full.select([(c, data(hw=10)) for c in full.partitions])
    session = cache.get(full.session_id)
    assert not session.ready  # caught up
    cache.mark_ready(("t", 0))  # an append, then the read that sees it
    incremental = cache.new_context(full.session_id, 1, [], [])
    read = incremental.partitions_to_read()
    assert [c.key for c in read] == [("t", 0)]
    cache.mark_ready(("t", 0))  # another append, after that read began
    # The read's results: caught up at the high watermark it saw.
    incremental.select([(read[0], data(hw=10))])
    assert ("t", 0) in session.ready
    # The next read sees the append; caught up again, nothing reported since.
    again = cache.new_context(full.session_id, 2, [], [])
    read = again.partitions_to_read()
    again.select([(read[0], data(hw=15, size=100))])
    assert ("t", 0) in session.ready  # it had records
    last = cache.new_context(full.session_id, 3, [part(index=0, offset=15)], [])
    read = last.partitions_to_read()
    last.select([(read[0], data(hw=15))])
    assert not session.ready


def test_a_full_fetch_that_waited_keeps_a_partition_reported_since_its_read():
    cache = FetchSessionCache(10)
    full = cache.new_context(0, INITIAL_EPOCH, [part(index=0, offset=10)], [])
    read = full.partitions_to_read()
    cache.mark_ready(("t", 0))
    full.select([(read[0], data(hw=10))])
    assert ("t", 0) in cache.get(full.session_id).ready
