"""Replication throttles (Kafka's ReplicationQuotaManager, KIP-73).

Two managers per broker, one for each side of replication:

- leader: bytes this broker sends to followers for throttled partitions
  (the topic config ``leader.replication.throttled.replicas`` names them)
  against ``leader.replication.throttled.rate``;
- follower: bytes this broker's replica fetchers append for throttled
  partitions (``follower.replication.throttled.replicas``) against
  ``follower.replication.throttled.rate``.

Both rates are dynamic broker configs, bytes per second, Long.MAX_VALUE
(unthrottled) by default. A throttle never stops an in-sync replica: the
leader holds back records only from followers outside the ISR, a follower
leaves out only partitions it has not caught up on -- otherwise a throttle
would shrink ISRs under load (KIP-73's "ISR thrashing"). Traffic of in-sync
replicas is still recorded, so the total stays near the rate.

The rate is Kafka's SimpleRate over a WindowedSum: bytes are added to
samples of ``replication.quota.window.size.seconds`` each, at most
``replication.quota.window.num`` of them (plus the one being filled) are
kept, and the rate is their sum over the time since the oldest one began --
but at least one window, so the first bytes do not read as an enormous
rate. A sample whose last bytes are older than the whole window span is
emptied before each measurement. The quota is exceeded while that rate is
above the bound; a caller then sends or fetches nothing for throttled
partitions until enough time has passed for the rate to fall under it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Final

from kfast.config import LONG_MAX

# Every partition of a topic is throttled (the config's ``*``).
ALL_REPLICAS: Final = None

# A topic's throttled partitions: their ids, or ALL_REPLICAS.
ThrottledPartitions = frozenset[int] | None


class _Sample:
    __slots__ = ("start_ms", "last_event_ms", "value")

    def __init__(self, now_ms: int):
        self.reset(now_ms)

    def reset(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.last_event_ms = now_ms
        self.value = 0.0


class SampledRate:
    """Bytes per second over a sliding set of fixed-length samples (Kafka's
    SimpleRate on a WindowedSum, with its MetricConfig's samples and time
    window)."""

    def __init__(self, num_samples: int, window_ms: int):
        if num_samples < 1 or window_ms < 1:
            raise ValueError("a rate needs at least one sample of at least 1 ms")
        self.num_samples = num_samples
        self.window_ms = window_ms
        # A ring of num_samples + 1: the extra one overlaps the start of the
        # monitored span (Kafka keeps the same placeholder).
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.last_event_ms = now_ms

    def measure(self, now_ms: int) -> float:
        """Bytes per second now."""
        elapsed_ms = self.window_size_ms(now_ms)
        return sum(sample.value for sample in self._samples) * 1000.0 / elapsed_ms

    def window_size_ms(self, now_ms: int) -> int:
        """The time the rate divides by (SimpleRate: since the oldest sample
        began, at least one window); obsolete samples are purged first."""
        self._purge_obsolete(now_ms)
        return max(now_ms - self._oldest(now_ms).start_ms, self.window_ms)

    def _oldest(self, now_ms: int) -> _Sample:
        """The sample that began first; a first measurement starts one, so
        the span of the rate begins when it was first asked for."""
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return min(self._samples, key=lambda sample: sample.start_ms)

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % (self.num_samples + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _purge_obsolete(self, now_ms: int) -> None:
        """Empty the samples with no bytes in the whole monitored span; a
        sample that began before it but had bytes within it stays."""
        expire_age = self.num_samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)


def parse_throttled_replicas(
    value: Iterable[str] | str | None, broker_id: int
) -> ThrottledPartitions:
    """The partitions a ``*.replication.throttled.replicas`` topic config
    throttles on ``broker_id``: ALL_REPLICAS for ``*``, else the partitions
    of its ``partition:broker`` entries naming this broker (Kafka's
    TopicConfigHandler.parseThrottledPartitions). The value was validated
    when it was set."""
    if value is None:
        return frozenset()
    items = [v.strip() for v in (value.split(",") if isinstance(value, str) else value)]
    items = [v for v in items if v]
    if items == ["*"]:
        return ALL_REPLICAS
    partitions: set[int] = set()
    for item in items:
        partition, _, broker = item.partition(":")
        if int(broker) == broker_id:
            partitions.add(int(partition))
    return frozenset(partitions)


class ReplicationQuotaManager:
    """One side's throttle: which partitions it applies to, and whether the
    bytes recorded for them are over the configured rate right now."""

    def __init__(
        self,
        num_samples: int,
        window_seconds: int,
        bound: int = LONG_MAX,
        clock_ms: Callable[[], int] | None = None,
    ):
        self._rate = SampledRate(num_samples, window_seconds * 1000)
        self._clock_ms = clock_ms or (lambda: int(time.monotonic() * 1000))
        self.upper_bound = bound
        # topic -> throttled partitions (ALL_REPLICAS: every one).
        self._throttled: dict[str, ThrottledPartitions] = {}

    def update_quota(self, bound: int) -> None:
        """A new rate in bytes/s; the bytes already recorded still count."""
        self.upper_bound = bound

    def is_quota_exceeded(self) -> bool:
        if self.upper_bound >= LONG_MAX:
            return False  # unthrottled: no need to measure
        return self._rate.measure(self._clock_ms()) > self.upper_bound

    def is_throttled(self, topic: str, partition: int) -> bool:
        if topic not in self._throttled:
            return False
        partitions = self._throttled[topic]
        return partitions is ALL_REPLICAS or partition in partitions

    def record(self, size: int) -> None:
        """Count bytes sent or fetched for throttled partitions, whether or
        not the quota is exceeded."""
        self._rate.record(size, self._clock_ms())

    def mark_throttled(self, topic: str, partitions: ThrottledPartitions) -> None:
        """Throttle ``partitions`` of ``topic`` (ALL_REPLICAS: all of them),
        replacing what was throttled of it before; none removes the topic."""
        if partitions is ALL_REPLICAS or partitions:
            self._throttled[topic] = partitions
        else:
            self._throttled.pop(topic, None)

    def remove_throttle(self, topic: str) -> None:
        self._throttled.pop(topic, None)

    @property
    def throttled_topics(self) -> dict[str, ThrottledPartitions]:
        return dict(self._throttled)
