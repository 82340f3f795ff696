"""The broker's counters (Kafka's BrokerTopicMetrics, RequestMetrics,
ReplicaManager and LogFlushStats meters), updated in place on the hot paths.

Who writes what:

- ``BrokerTopicStats``: the replica manager's produce path (messages and
  bytes in, produce requests per partition, failures) and the Fetch handler
  (bytes out, fetch requests per partition, failures), on the event loop;
- ``RequestMetrics``: ``KafkaApis`` once per request (count per version,
  total/local/remote time), on the event loop;
- ``ReplicaStats``: ISR shrinks and expands committed by the controller;
- ``QuotaStats``: whoever throttles a client calls ``record_throttle``;
- ``LOG_FLUSH_STATS``: ``Log.flush``, in executor threads, so it alone takes
  a lock (a flush is an fsync: the lock costs nothing next to it).

All-topics totals are not kept: the exporter sums the per-topic counters at
scrape time, plus ``retired``, the counts of topics that no longer exist.
"""

from __future__ import annotations

import threading
from bisect import bisect_left

from kfast.metrics.histogram import BOUNDS_MS, Histogram, HistogramSnapshot


class TopicStats:
    """One topic's BrokerTopicMetrics meters (their Count attributes)."""

    __slots__ = (
        "messages_in",
        "bytes_in",
        "bytes_out",
        "total_produce_requests",
        "failed_produce_requests",
        "total_fetch_requests",
        "failed_fetch_requests",
    )

    def __init__(self):
        self.messages_in = self.bytes_in = self.bytes_out = 0
        self.total_produce_requests = self.failed_produce_requests = 0
        self.total_fetch_requests = self.failed_fetch_requests = 0

    def add(self, other: TopicStats) -> None:
        for name in TopicStats.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def copy(self) -> TopicStats:
        copy = TopicStats()
        copy.add(self)
        return copy


class BrokerTopicStats:
    def __init__(self):
        self.topics: dict[str, TopicStats] = {}
        self.retired = TopicStats()

    def topic(self, name: str) -> TopicStats:
        stats = self.topics.get(name)
        if stats is None:
            stats = self.topics[name] = TopicStats()
        return stats

    def retire_missing(self, live) -> None:
        """Topics not in ``live`` (deleted) leave the per-topic series; their
        counts stay in the all-topics totals, which never go down."""
        for name in [name for name in self.topics if name not in live]:
            self.retired.add(self.topics.pop(name))

    def snapshot(self) -> tuple[dict[str, TopicStats], TopicStats]:
        """(per topic, all topics) copies."""
        per_topic = {name: stats.copy() for name, stats in self.topics.items()}
        total = self.retired.copy()
        for stats in per_topic.values():
            total.add(stats)
        return per_topic, total


class RequestStats:
    """One API's RequestMetrics: requests per version, and where the time
    went: three histograms (total, local, remote) in one list of counts,
    so a request costs three bisects and five additions."""

    __slots__ = ("requests", "counts", "count", "total_sum", "local_sum")

    def __init__(self):
        self.requests = [0] * 32  # per version (grown if needed)
        self.counts = [0] * (3 * _SLOTS)
        self.count = 0
        self.total_sum = self.local_sum = 0.0

    def snapshot(
        self,
    ) -> tuple[dict[int, int], HistogramSnapshot, HistogramSnapshot, HistogramSnapshot]:
        counts, n = self.counts, self.count
        versions = {v: c for v, c in enumerate(self.requests) if c}
        return (
            versions,
            HistogramSnapshot(counts[:_SLOTS], n, self.total_sum),
            HistogramSnapshot(counts[_SLOTS : 2 * _SLOTS], n, self.local_sum),
            HistogramSnapshot(counts[2 * _SLOTS :], n, self.total_sum - self.local_sum),
        )


_SLOTS = len(BOUNDS_MS) + 1


class RequestMetrics:
    def __init__(self):
        self.by_key: dict[int, RequestStats] = {}

    def record(
        self, api_key: int, version: int, started: float, handled: float, finished: float
    ) -> None:
        """Times in seconds (time.perf_counter): ``started`` when the frame
        reached the dispatcher, ``handled`` when the handler returned (the
        local part: parse, handler, encode of a synchronous answer),
        ``finished`` when the response was ready; the time between handled
        and finished is spent waiting (purgatory, the controller, a
        coordinator write): Kafka's remote time."""
        stats = self.by_key.get(api_key)
        if stats is None:
            stats = self.by_key[api_key] = RequestStats()
        try:
            stats.requests[version] += 1
        except IndexError:
            stats.requests += [0] * (version + 1 - len(stats.requests))
            stats.requests[version] += 1
        total = (finished - started) * 1000.0
        local = (handled - started) * 1000.0
        counts = stats.counts
        counts[bisect_left(BOUNDS_MS, total)] += 1
        counts[_SLOTS + bisect_left(BOUNDS_MS, local)] += 1
        counts[2 * _SLOTS + bisect_left(BOUNDS_MS, total - local)] += 1
        stats.count += 1
        stats.total_sum += total
        stats.local_sum += local

    def snapshot(self) -> dict[int, tuple]:
        """{api key: (requests per version, total, local, remote)}."""
        return {key: stats.snapshot() for key, stats in self.by_key.items()}


class ReplicaStats:
    """ReplicaManager's IsrShrinksPerSec / IsrExpandsPerSec counts, and the
    replication traffic (BrokerTopicMetrics ReplicationBytesIn/OutPerSec,
    which Kafka keeps for all topics only): bytes this leader sent to
    followers, bytes this follower appended from leaders."""

    __slots__ = ("isr_shrinks", "isr_expands", "replication_bytes_in", "replication_bytes_out")

    def __init__(self):
        self.isr_shrinks = self.isr_expands = 0
        self.replication_bytes_in = self.replication_bytes_out = 0

    def count_isr_change(self, size_before: int, size_after: int) -> None:
        """An ISR change this leader proposed was committed."""
        if size_after < size_before:
            self.isr_shrinks += 1
        elif size_after > size_before:
            self.isr_expands += 1


class QuotaStats:
    """Throttle times per (quota type, user, client id): Kafka's quota
    sensors' ``throttle-time`` (kafka.server:type=Produce|Fetch|Request,
    user=...,client-id=...). The quota manager calls ``record_throttle``
    for each throttled response (0 ms responses need not be recorded)."""

    def __init__(self):
        # (quota type, user, client id) -> [throttled responses, total ms]
        self.throttles: dict[tuple[str, str, str], list] = {}

    def record_throttle(
        self, quota_type: str, user: str, client_id: str, throttle_ms: float
    ) -> None:
        entry = self.throttles.get((quota_type, user, client_id))
        if entry is None:
            entry = self.throttles[quota_type, user, client_id] = [0, 0.0]
        entry[0] += 1
        entry[1] += throttle_ms

    def snapshot(self) -> dict[tuple[str, str, str], tuple[int, float]]:
        return {key: (n, ms) for key, (n, ms) in list(self.throttles.items())}


class LogFlushStats:
    """LogFlushStats.LogFlushRateAndTimeMs: every fsync of a log's segments,
    from the executor threads that run them."""

    def __init__(self):
        self._lock = threading.Lock()
        self._histogram = Histogram()

    def record(self, ms: float) -> None:
        with self._lock:
            self._histogram.record(ms)

    def snapshot(self) -> HistogramSnapshot:
        with self._lock:
            return self._histogram.snapshot()


# Process-wide, as Kafka's Yammer LogFlushStats is JVM-wide.
LOG_FLUSH_STATS = LogFlushStats()


class BrokerMetrics:
    """The counters of one broker (``KafkaBroker.metrics``)."""

    def __init__(self):
        self.topics = BrokerTopicStats()
        self.requests = RequestMetrics()
        self.replicas = ReplicaStats()
        self.quotas = QuotaStats()
        # Whether this node is the active controller (its server sets it).
        self.is_active_controller = lambda: False
        # The ControllerStats of this node's controller, None on a broker
        # without one (its server sets it).
        self.controller_stats = lambda: None
