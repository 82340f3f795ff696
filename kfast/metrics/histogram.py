"""A fixed-bucket latency histogram: O(log buckets) record, quantiles at read.

Kafka's Yammer histograms keep an exponentially decaying sample of recent
values; kfast keeps counts per logarithmic bucket since start, which costs
one bisect and three additions per value and nothing else. Quantiles are
read from the buckets: the upper bound of the bucket that holds the rank,
so within one bucket width (a factor of 2**(1/4), about 19%) of the value.
"""

from __future__ import annotations

from bisect import bisect_left

# Upper bounds in ms: 2**(k/4) for k in -40..68, i.e. ~0.001 ms .. ~131 s.
# Values above the last bound fall in an overflow bucket.
BOUNDS_MS: tuple[float, ...] = tuple(2.0 ** (k / 4) for k in range(-40, 69))
# The quantiles Kafka's JMX histograms publish: 50th..999thPercentile.
QUANTILES: tuple[float, ...] = (0.5, 0.75, 0.95, 0.98, 0.99, 0.999)


class Histogram:
    """``record(ms)``; ``snapshot()`` copies it for a reader on another thread."""

    __slots__ = ("counts", "count", "sum")

    def __init__(self):
        self.counts = [0] * (len(BOUNDS_MS) + 1)
        self.count = 0
        self.sum = 0.0

    def record(self, value_ms: float) -> None:
        self.counts[bisect_left(BOUNDS_MS, value_ms)] += 1
        self.count += 1
        self.sum += value_ms

    def snapshot(self) -> HistogramSnapshot:
        return HistogramSnapshot(list(self.counts), self.count, self.sum)


class HistogramSnapshot:
    __slots__ = ("counts", "count", "sum")

    def __init__(self, counts: list[int], count: int, total: float):
        self.counts = counts
        self.count = count
        self.sum = total

    def quantile(self, q: float) -> float:
        """The upper bound of the bucket holding rank ceil(q * count); 0.0
        when empty or when the rank is in the first bucket (below the
        resolution: a request that never waited has 0 remote time). The
        overflow bucket answers the largest bound."""
        if self.count == 0:
            return 0.0
        rank = max(1, -(-q * self.count // 1))
        seen = 0
        for index, n in enumerate(self.counts):
            seen += n
            if seen >= rank:
                return 0.0 if index == 0 else BOUNDS_MS[min(index, len(BOUNDS_MS) - 1)]
        return BOUNDS_MS[-1]

    def quantiles(self) -> list[tuple[float, float]]:
        return [(q, self.quantile(q)) for q in QUANTILES]
