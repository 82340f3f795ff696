"""The replication throttle's rate and quota (kfast.server.replication_quota):
Kafka's ReplicationQuotaManagerTest scenario on a fake clock, the throttled
replica lists, and properties of a sender that obeys the quota."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kfast.config import LONG_MAX
from kfast.server.replication_quota import (
    ALL_REPLICAS,
    ReplicationQuotaManager,
    SampledRate,
    parse_throttled_replicas,
)


class FakeClock:
    def __init__(self):
        self.now_ms = 0

    def __call__(self) -> int:
        return self.now_ms

    def sleep(self, ms: int) -> None:
        self.now_ms += ms


def test_quota_is_exceeded_then_falls_back_under_the_bound_as_time_passes():
    """The numbers of Kafka's ReplicationQuotaManagerTest: 10 samples of
    1 s, a bound of 100 B/s, the rate measured since the first sample."""
    clock = FakeClock()
    quota = ReplicationQuotaManager(10, 1, clock_ms=clock)
    quota.update_quota(100)
    rate = quota._rate
    assert not quota.is_quota_exceeded()  # starts the first sample at 0 s
    clock.sleep(1500)
    quota.record(1)
    assert not quota.is_quota_exceeded()
    quota.record(149)  # 150 B in 1.5 s
    assert not quota.is_quota_exceeded()
    quota.record(1)  # 151 B in 1.5 s
    assert rate.measure(clock()) == pytest.approx(151 / 1.5)
    assert quota.is_quota_exceeded()
    clock.sleep(500)
    assert not quota.is_quota_exceeded()
    assert rate.measure(clock()) == pytest.approx(151 / 2, abs=0.1)
    clock.sleep(500)
    quota.record(99)  # 250 B in 2.5 s
    assert rate.measure(clock()) == pytest.approx(250 / 2.5)
    assert not quota.is_quota_exceeded()
    quota.record(1)
    assert quota.is_quota_exceeded()
    assert rate.measure(clock()) == pytest.approx(251 / 2.5)
    clock.sleep(2000)
    assert not quota.is_quota_exceeded()
    assert rate.measure(clock()) == pytest.approx(251 / 4.5)


def test_the_first_window_counts_whole():
    """Bytes recorded just now are spread over at least one window, not
    over the milliseconds since they came."""
    rate = SampledRate(11, 1000)
    rate.record(1000, 0)
    assert rate.measure(0) == 1000
    assert rate.measure(1) == 1000
    assert rate.measure(4000) == 250


def test_bytes_older_than_the_whole_span_are_forgotten():
    rate = SampledRate(3, 1000)
    rate.record(3000, 0)
    assert rate.measure(2999) == pytest.approx(3000 / 2.999)
    assert rate.measure(3000) == 0


def test_unthrottled_by_default_and_when_the_rate_is_removed():
    clock = FakeClock()
    quota = ReplicationQuotaManager(11, 1, clock_ms=clock)
    assert quota.upper_bound == LONG_MAX
    quota.record(10**12)
    assert not quota.is_quota_exceeded()
    quota.update_quota(1000)
    assert quota.is_quota_exceeded()  # the bytes recorded still count
    quota.update_quota(LONG_MAX)
    assert not quota.is_quota_exceeded()


def test_only_the_listed_partitions_are_throttled():
    quota = ReplicationQuotaManager(11, 1)
    quota.mark_throttled("topic1", frozenset({1, 2, 3}))
    assert [quota.is_throttled("topic1", p) for p in (1, 2, 3, 4)] == [True, True, True, False]
    assert not quota.is_throttled("topic2", 1)
    quota.mark_throttled("all", ALL_REPLICAS)
    assert quota.is_throttled("all", 0) and quota.is_throttled("all", 99)
    quota.mark_throttled("topic1", frozenset())
    assert not quota.is_throttled("topic1", 1)
    quota.remove_throttle("all")
    assert quota.throttled_topics == {}


@pytest.mark.parametrize(
    "value, broker, expected",
    [
        ("0:1,0:2,1:2", 2, frozenset({0, 1})),
        ("0:1,0:2,1:2", 1, frozenset({0})),
        ("0:1", 3, frozenset()),
        (" 0:1 , 5:1 ", 1, frozenset({0, 5})),
        (["3:4", "7:4"], 4, frozenset({3, 7})),
        ("*", 9, ALL_REPLICAS),
        (["*"], 9, ALL_REPLICAS),
        ("", 1, frozenset()),
        (None, 1, frozenset()),
    ],
)
def test_throttled_replica_lists_name_partitions_per_broker(value, broker, expected):
    assert parse_throttled_replicas(value, broker) == expected


def _obeying_sender(num_samples, window_s, bound, chunk, step_ms, duration_ms) -> int:
    """Bytes a sender moves that sends ``chunk`` every ``step_ms`` unless
    the quota is exceeded, recording each."""
    clock = FakeClock()
    quota = ReplicationQuotaManager(num_samples, window_s, bound, clock_ms=clock)
    total = 0
    while clock() < duration_ms:
        if not quota.is_quota_exceeded():
            quota.record(chunk)
            total += chunk
        clock.sleep(step_ms)
    return total


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(
    num_samples=st.integers(2, 12),
    window_s=st.integers(1, 3),
    bound=st.integers(100, 10**6),
    chunk_share=st.floats(0.001, 1.0),
    step_ms=st.integers(5, 500),
    duration_s=st.integers(30, 120),
)
def test_a_sender_that_obeys_the_quota_stays_near_the_rate(
    num_samples, window_s, bound, chunk_share, step_ms, duration_s
):
    """With chunks of at most one window's worth of the rate, the bytes over
    a run stay within half again of the rate (plus one chunk); a sender able
    to go twice as fast gets at least half of it."""
    chunk = max(1, int(bound * window_s * chunk_share))
    duration_ms = duration_s * 1000
    total = _obeying_sender(num_samples, window_s, bound, chunk, step_ms, duration_ms)
    assert total <= 1.5 * bound * (duration_s + window_s) + chunk
    if chunk * 1000 / step_ms >= 2 * bound:
        assert total >= 0.5 * bound * duration_s


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 10**6)), max_size=60),
    st.integers(1, 12),
    st.integers(1, 3000),
)
def test_the_rate_is_never_negative_nor_above_what_was_recorded(events, num_samples, window_ms):
    rate = SampledRate(num_samples, window_ms)
    now = 0
    recorded = 0
    for gap, size in events:
        now += gap
        rate.record(size, now)
        recorded += size
        measured = rate.measure(now)
        assert 0 <= measured <= recorded * 1000 / window_ms + 1e-6
