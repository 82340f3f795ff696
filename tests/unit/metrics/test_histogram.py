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


def test_request_metrics_total_is_the_sum_of_the_five_parts():
    from kfast.metrics.broker_stats import REQUEST_TIMES, RequestMetrics

    metrics = RequestMetrics()
    # received, started, handled, finished, dequeued, sent: 1 ms in the
    # request queue, 2 local, 8 remote, 3 in the response queue, 4 sending.
    metrics.record(0, 9, 10.0, 10.001, 10.003, 10.011, 10.014, 10.018)
    metrics.record(0, 40, 20.0, 20.0, 20.001, 20.001, 20.001, 20.001)  # a version past 31
    versions, histograms = metrics.snapshot()[0]
    times = dict(zip(REQUEST_TIMES, histograms, strict=True))
    assert versions == {9: 1, 40: 1}
    assert all(h.count == 2 for h in histograms)
    expected = {"RequestQueue": 1.0, "Local": 3.0, "Remote": 8.0}
    expected |= {"ResponseQueue": 3.0, "ResponseSend": 4.0, "Total": 19.0}
    for name, ms in expected.items():
        assert math.isclose(times[name].sum, ms, abs_tol=1e-6), name
    assert math.isclose(
        times["Total"].sum, sum(h.sum for n, h in times.items() if n != "Total"), abs_tol=1e-9
    )
    remote = times["Remote"]
    assert 8.0 <= remote.quantile(0.99) <= 8.0 * WIDTH and remote.quantile(0.5) == 0.0


# Points in time of one request (s): received, then five non-negative gaps.
_gaps = st.lists(
    st.one_of(
        st.floats(min_value=0.0, max_value=200.0),  # up to past the last bound (overflow)
        st.sampled_from([b / 1000.0 for b in BOUNDS_MS]),  # exactly on a bound
    ),
    min_size=5,
    max_size=5,
)


@given(st.lists(st.tuples(st.integers(0, 80), st.integers(0, 70), _gaps), min_size=1, max_size=40))
def test_request_metrics_buckets_are_the_histograms(requests):
    """The C recorder (kfast._ext.request_metrics) puts every time in the
    bucket, and adds it to the sum, that the Python Histogram does."""
    from kfast.metrics.broker_stats import REQUEST_TIMES, RequestMetrics

    metrics = RequestMetrics()
    expected: dict[int, tuple[dict[int, int], list[Histogram]]] = {}
    for key, version, gaps in requests:
        points = [1000.0]
        for gap in gaps:
            points.append(points[-1] + gap)
        metrics.record(key, version, *points)
        versions, histograms = expected.setdefault(key, ({}, [Histogram() for _ in REQUEST_TIMES]))
        versions[version] = versions.get(version, 0) + 1
        parts = [(b - a) * 1000.0 for a, b in zip(points, points[1:])]
        for histogram, ms in zip(histograms, [sum(parts), *parts], strict=True):
            histogram.record(ms)
    snapshot = metrics.snapshot()
    assert snapshot.keys() == expected.keys()
    for key, (versions, histograms) in expected.items():
        got_versions, got = snapshot[key]
        assert got_versions == versions
        for mine, theirs in zip(got, histograms, strict=True):
            assert mine.counts == theirs.counts
            assert mine.count == theirs.count
            assert math.isclose(mine.sum, theirs.sum, rel_tol=1e-9, abs_tol=1e-9)


def test_request_timing_records_once_its_response_is_sent():
    from kfast._ext.request_metrics import RequestTiming
    from kfast.metrics.broker_stats import REQUEST_TIMES, RequestMetrics

    metrics = RequestMetrics()
    timing = RequestTiming(metrics, 0, 9, 10.0, 10.001, 10.003, 10.011)
    assert metrics.snapshot() == {}  # nothing until the send completes
    timing.sent(10.014, 10.018)
    versions, histograms = metrics.snapshot()[0]
    assert versions == {9: 1}
    sums = {name: h.sum for name, h in zip(REQUEST_TIMES, histograms, strict=True)}
    expected = {"RequestQueue": 1.0, "Local": 2.0, "Remote": 8.0, "ResponseQueue": 3.0}
    expected |= {"ResponseSend": 4.0, "Total": 18.0}
    for name, ms in expected.items():
        assert math.isclose(sums[name], ms, abs_tol=1e-6), name
