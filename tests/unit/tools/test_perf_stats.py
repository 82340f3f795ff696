"""kfast perf's statistics: HDR-histogram percentiles against exact ones,
the windows of the periodic line, and Kafka's line formats."""

from __future__ import annotations

import io
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("hdrh")

from kfast.tools.perf_stats import (
    CONSUMER_HEADER,
    LatencyStats,
    consumer_row,
    e2e_final_lines,
    producer_final_line,
)

latencies_ms = st.lists(
    st.floats(min_value=0.001, max_value=60_000, allow_nan=False), min_size=1, max_size=300
)


def exact_percentile(values: list[float], p: float) -> float:
    """The value of rank p% of the count rounded to the nearest whole
    (at least 1), as the hdrhistogram package ranks."""
    ordered = sorted(values)
    rank = max(1, int(p / 100 * len(ordered) + 0.5))
    return ordered[rank - 1]


@settings(max_examples=15)  # each example builds a histogram of ~47k counters
@given(latencies_ms)
def test_percentiles_are_within_the_histograms_precision(values):
    stats = LatencyStats(reporting_interval_ms=10**9)
    for v in values:
        stats.record(v, 100, now=stats.start)
    summary = stats.summary(elapsed_s=1.0)
    for p, name in ((50.0, "p50"), (95.0, "p95"), (99.0, "p99"), (99.9, "p99.9")):
        exact_us = max(1, int(exact_percentile(values, p) * 1000))
        # 3 significant digits: each bucket is at most 0.1% wide (plus the 1 µs unit)
        assert abs(summary["percentiles_ms"][name] * 1000 - exact_us) <= exact_us * 0.001 + 1
    assert summary["records"] == len(values) and summary["bytes"] == 100 * len(values)
    assert summary["max_latency_ms"] == max(values)
    assert summary["avg_latency_ms"] == pytest.approx(sum(values) / len(values))


def test_a_window_line_is_printed_every_reporting_interval():
    out = io.StringIO()
    stats = LatencyStats(reporting_interval_ms=1000, out=out)
    t0 = stats.start
    for i in range(10):  # 10 records in the first 0.9 s
        stats.record(2.0 + i, 1024 * 1024, now=t0 + i * 0.1)
    assert out.getvalue() == ""
    stats.record(4.0, 1024 * 1024, now=t0 + 1.0)  # 1 s in: the window closes with 11 records
    assert out.getvalue() == (
        "11 records sent, 11.0 records/sec (11.00 MB/sec), 6.3 ms avg latency, "
        "11.0 ms max latency.\n"
    )
    assert stats.windows[0]["records"] == 11


def test_kafka_line_formats():
    stats = LatencyStats()
    for v in (1.0, 2.0, 3.0, 100.0):
        stats.record(v, 50, now=stats.start)
    summary = stats.summary(elapsed_s=2.0)
    assert producer_final_line(summary) == (
        "4 records sent, 2.000000 records/sec (0.00 MB/sec), 26.50 ms avg latency, 100.00 ms max latency, "
        "2 ms 50th, 100 ms 95th, 100 ms 99th, 100 ms 99.9th."
    )
    assert e2e_final_lines(summary) == [
        "Avg latency: 26.5000 ms",
        "Percentiles: 50th = 2, 99th = 100, 99.9th = 100",
    ]
    assert len(CONSUMER_HEADER.split(", ")) == 10
    row = consumer_row(1_700_000_000.0, 1_700_000_010.0, 1000, 1024 * 1024, rebalance_ms=3000)
    fields = row.split(", ")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:000", fields[0])
    assert fields[2:] == [
        "1.0000",
        "0.1000",
        "1000",
        "100.0000",
        "3000",
        "7000",
        "0.1429",
        "142.8571",
    ]


def test_throughput_windows_cut_the_consumer_timeline_per_second():
    """Running totals per batch become per-second windows; a second without
    a batch is a zero window, and the windows add up to the totals."""
    from kfast.tools.perf_stats import MB, throughput_windows

    start = 100.0
    timeline = [(100.2, 10, 1000), (100.9, 30, 3000), (102.5, 35, 3500 + MB)]
    windows = throughput_windows(timeline, start, 1.0)
    assert [w["at_s"] for w in windows] == [1.0, 2.0, 3.0]
    assert [w["records"] for w in windows] == [30, 0, 5]
    assert [w["records_per_sec"] for w in windows] == [30.0, 0.0, 5.0]
    assert windows[2]["mb_per_sec"] == (500 + MB) / MB
    assert sum(w["bytes"] for w in windows) == 3500 + MB
    assert throughput_windows([], start) == []
    # A run shorter than 20 s gets 20 windows over its length.
    assert [w["at_s"] for w in throughput_windows([(101.0, 1, 1)], start)][-1] == 1.0
    assert len(throughput_windows([(101.0, 1, 1)], start)) == 20
