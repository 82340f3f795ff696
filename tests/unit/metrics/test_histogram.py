"""kfast.metrics.histogram: quantiles read from logarithmic buckets."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from kfast.metrics.histogram import BOUNDS_MS, QUANTILES, Histogram

WIDTH = 2**0.25  # ratio of consecutive bucket bounds


@given(st.lists(st.floats(min_value=0.002, max_value=100_000.0), min_size=1, max_size=300))
def test_quantiles_are_within_one_bucket_of_the_exact_ones(values):
    histogram = Histogram()
    for v in values:
        histogram.record(v)
    snapshot = histogram.snapshot()
    assert snapshot.count == len(values)
    assert math.isclose(snapshot.sum, sum(values), rel_tol=1e-9)
    ordered = sorted(values)
    for q in QUANTILES:
        exact = ordered[max(1, math.ceil(q * len(ordered))) - 1]
        estimate = snapshot.quantile(q)
        # The bucket's upper bound: never below the value, at most one
        # bucket width above it.
        assert exact <= estimate <= exact * WIDTH * (1 + 1e-12)


def test_empty_zero_and_overflow():
    histogram = Histogram()
    assert histogram.snapshot().quantile(0.99) == 0.0
    histogram.record(0.0)
    assert histogram.snapshot().quantile(0.5) == 0.0  # below the resolution
    histogram.record(10**9)
    assert histogram.snapshot().quantile(0.999) == BOUNDS_MS[-1]
    assert histogram.snapshot().quantiles()[0] == (0.5, 0.0)


def test_request_metrics_split_total_into_local_and_remote():
    from kfast.metrics.broker_stats import RequestMetrics

    metrics = RequestMetrics()
    metrics.record(0, 9, 10.0, 10.002, 10.010)  # 2 ms local, 8 ms waiting
    metrics.record(0, 40, 20.0, 20.001, 20.001)  # synchronous, a version past 31
    versions, total, local, remote = metrics.snapshot()[0]
    assert versions == {9: 1, 40: 1}
    assert total.count == local.count == remote.count == 2
    assert math.isclose(total.sum, 11.0) and math.isclose(local.sum, 3.0)
    assert math.isclose(remote.sum, 8.0)
    assert 8.0 <= remote.quantile(0.99) <= 8.0 * WIDTH and remote.quantile(0.5) == 0.0
