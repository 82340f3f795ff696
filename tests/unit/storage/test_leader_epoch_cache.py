"""LeaderEpochFileCache.assign against Kafka's rule (LeaderEpochFileCache
.isUpdateNeeded + maybeTruncateNonMonotonicEntries), written here as a
sorted-dict oracle, and the file it checkpoints."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kfast.storage.checkpoint import LeaderEpochFileCache


def kafka_assign(epochs: dict[int, int], epoch: int, start: int) -> bool:
    """Kafka's rule on {epoch: start offset}."""
    if epoch < 0:
        return False
    if epochs:
        latest = max(epochs)
        if epoch == latest and start >= epochs[latest]:
            return False
    for e in sorted(epochs, reverse=True):
        if e >= epoch or epochs[e] >= start:
            del epochs[e]
        else:
            break
    epochs[epoch] = start
    return True


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-1, 8), st.integers(0, 50)), max_size=30))
def test_assign_matches_kafka(tmp_path_factory, assignments):
    path = str(tmp_path_factory.mktemp("epochs") / "leader-epoch-checkpoint")
    cache, oracle = LeaderEpochFileCache(path), {}
    for epoch, start in assignments:
        assert cache.assign(epoch, start, flush=False) == kafka_assign(oracle, epoch, start)
        assert cache.entries == sorted(oracle.items())
        starts = [entry.start_offset for entry in cache.entries]
        assert starts == sorted(set(starts))  # epochs and starts increase
    cache.flush()
    assert LeaderEpochFileCache(path).entries == cache.entries


def test_the_latest_epoch_at_an_earlier_start_moves_it_back(tmp_path):
    """Recovery after kill -9 with a stale log-start checkpoint: the entry
    truncate_from_start moved to 2 comes back to the batch at 0."""
    cache = LeaderEpochFileCache(str(tmp_path / "leader-epoch-checkpoint"))
    cache.assign(4, 2)
    assert cache.assign(4, 0)
    assert cache.entries == [(4, 0)]
    assert not cache.assign(4, 5)  # a later start changes nothing


def test_an_older_epoch_drops_the_entries_it_contradicts(tmp_path):
    cache = LeaderEpochFileCache(str(tmp_path / "leader-epoch-checkpoint"))
    for epoch, start in [(1, 0), (3, 10), (5, 20)]:
        cache.assign(epoch, start)
    assert cache.assign(2, 15)
    assert cache.entries == [(1, 0), (2, 15)]


def test_recovery_assigns_only_where_the_log_disagrees(tmp_path):
    """assign_recovered: a recovered batch whose epoch the cache already gives
    its offset changes nothing (re-assigning would drop the entries below
    it); one the cache contradicts is assigned (both found by the
    replication simulation)."""
    cache = LeaderEpochFileCache(str(tmp_path / "leader-epoch-checkpoint"))
    for epoch, start in [(1, 0), (3, 5), (5, 6)]:
        cache.assign(epoch, start)
    assert not cache.assign_recovered(1, 4)
    assert cache.entries == [(1, 0), (3, 5), (5, 6)]
    cache = LeaderEpochFileCache(str(tmp_path / "other-checkpoint"))
    for epoch, start in [(1, 0), (2, 4), (4, 12)]:
        cache.assign(epoch, start)
    assert cache.assign_recovered(2, 3)
    assert cache.entries == [(1, 0), (2, 3)]  # the batches after 3 re-add epoch 4
    assert cache.assign_recovered(4, 12)
    assert cache.entries == [(1, 0), (2, 3), (4, 12)]


def test_concurrent_flushes_of_one_cache_do_not_race(tmp_path):
    """A leader epoch assigned on the event loop and a log flush on an
    executor thread write the same checkpoint: one writer at a time (they
    share the temp file; an unserialised second rename raised ENOENT)."""
    import threading

    cache = LeaderEpochFileCache(str(tmp_path / "leader-epoch-checkpoint"))
    start = threading.Barrier(2)
    failures = []

    def flushes():
        start.wait()
        try:
            for _ in range(300):
                cache.flush()
        except OSError as exc:
            failures.append(exc)

    threads = [threading.Thread(target=flushes) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not failures
