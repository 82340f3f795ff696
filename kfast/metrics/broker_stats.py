"""The broker's counters (Kafka's BrokerTopicMetrics, RequestMetrics,
ReplicaManager and LogFlushStats meters), updated in place on the hot paths.

Who writes what:

- ``BrokerTopicStats``: the replica manager's produce path (messages and
  bytes in, produce requests per partition, failures) and the Fetch handler
  (bytes out, fetch requests per partition, failures), on the event loop;
- ``RequestMetrics``: once per request, when its response was sent (the
  network layer, through the ``RequestTiming`` of kfast._ext.request_metrics
  that KafkaApis attached to the response) or when it got none (count per
  version, the six times), on the event loop;
- ``ReplicaStats``: ISR shrinks and expands committed by the controller;
- ``QuotaStats``: whoever throttles a client calls ``record_throttle``;
- ``LOG_FLUSH_STATS``: ``Log.flush``, in executor threads, so it alone takes
  a lock (a flush is an fsync: the lock costs nothing next to it).

All-topics totals are not kept: the exporter sums the per-topic counters at
scrape time, plus ``retired``, the counts of topics that no longer exist.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from kfast._ext.request_metrics import RequestRecorder
from kfast.metrics.controller_stats import ControllerStats
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

    def __init__(self) -> None:
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
    def __init__(self) -> None:
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


# RequestMetrics' time histograms, in the order it keeps them
# (Kafka's RequestMetrics names without the "TimeMs" suffix).
REQUEST_TIMES: tuple[str, ...] = (
    "Total",
    "RequestQueue",
    "Local",
    "Remote",
    "ResponseQueue",
    "ResponseSend",
)


class RequestMetrics(RequestRecorder):
    """Requests per API key and version, and where their time went: six
    histograms (REQUEST_TIMES) per API, counted in C
    (kfast._ext.request_metrics: a request costs six binary searches).

    ``record(api_key, version, received, started, handled, finished,
    dequeued, sent)`` takes one request's points in time, in seconds of
    time.perf_counter (Kafka's RequestChannel.Request timestamps):

    - ``received``: its frame was fully read (startTimeNanos);
    - ``started``: its handler started (requestDequeueTimeNanos), the
      time between is RequestQueueTime;
    - ``handled``: the handler returned (apiLocalCompleteTimeNanos):
      LocalTime, parse, handler, encode of a synchronous answer;
    - ``finished``: the response was ready (responseCompleteTimeNanos):
      RemoteTime, waiting on purgatory, the controller, a coordinator write;
    - ``dequeued``: its send began (responseDequeueTimeNanos):
      ResponseQueueTime, behind earlier responses of the connection;
    - ``sent``: its last byte was handed to the socket (endTimeNanos):
      ResponseSendTime.

    TotalTime is the sum of the five parts, as Kafka's
    (endTimeNanos - startTimeNanos)."""

    def __init__(self) -> None:
        super().__init__(BOUNDS_MS)

    def snapshot(self) -> dict[int, tuple[dict[int, int], list[HistogramSnapshot]]]:
        """{api key: (requests per version, histograms in REQUEST_TIMES order)}."""
        return {
            key: (versions, [HistogramSnapshot(counts, count, total) for counts, total in times])
            for key, (versions, count, times) in self.raw_snapshot().items()
        }


class ReplicaStats:
    """ReplicaManager's IsrShrinksPerSec / IsrExpandsPerSec counts, and the
    replication traffic (BrokerTopicMetrics ReplicationBytesIn/OutPerSec,
    which Kafka keeps for all topics only): bytes this leader sent to
    followers, bytes this follower appended from leaders."""

    __slots__ = ("isr_shrinks", "isr_expands", "replication_bytes_in", "replication_bytes_out")

    def __init__(self) -> None:
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

    def __init__(self) -> None:
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

    def __init__(self) -> None:
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

    def __init__(self) -> None:
        self.topics = BrokerTopicStats()
        self.requests = RequestMetrics()
        self.replicas = ReplicaStats()
        self.quotas = QuotaStats()
        # Whether this node is the active controller (its server sets it).
        self.is_active_controller: Callable[[], bool] = lambda: False
        # The ControllerStats of this node's controller, None on a broker
        # without one (its server sets it).
        self.controller_stats: Callable[[], ControllerStats | None] = lambda: None
