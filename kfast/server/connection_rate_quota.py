"""max.connection.creation.rate (KIP-612), broker-wide and per listener:
Kafka's ConnectionQuotas.waitForConnectionSlot and
recordConnectionAndGetThrottleTimeMs.

Every connection a listener accepts is recorded in the listener's Rate
and, unless the listener is the protected inter-broker one (the
inter-broker listener of a broker with more than one listener), in the
broker's. When a rate then exceeds its limit the acceptor waits the
throttle time before serving that connection and accepting more: the
larger of the two throttles, each round((rate - limit) / limit x window),
at most one window (quota.window.size.seconds). Clients meanwhile wait in
the listen backlog, so connections are accepted at about the limit.

A connection the per-IP connection_creation_rate then refuses is taken
back out of both rates (Kafka's updateListenerMetrics).

Limits (MAX_RATE: no limit):

    max.connection.creation.rate                          the broker's
    listener.name.<listener>.max.connection.creation.rate  the listener's

both dynamic (IncrementalAlterConfigs on the broker or the cluster
default): ``configure`` is called with the broker's current configuration.
Rates already recorded keep counting against new limits, as Kafka's
sensors do. With no limit anywhere nothing is recorded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from kfast.config import SERVER_CONFIGS, KafkaConfig
from kfast.server.quota import QuotaRate, java_round

MAX_CONNECTION_CREATION_RATE = "max.connection.creation.rate"
# No limit (Kafka's default, Int.MaxValue).
MAX_RATE = SERVER_CONFIGS[MAX_CONNECTION_CREATION_RATE].default


class ConnectionRateQuotas:
    def __init__(
        self,
        num_samples: int,
        window_seconds: int,
        inter_broker_listener: str,
        listeners: Iterable[str],
        clock_ms: Callable[[], int] | None = None,
    ):
        self.num_samples = num_samples
        self.window_ms = window_seconds * 1000
        self.clock_ms = clock_ms or (lambda: int(time.monotonic() * 1000))
        self.listeners = [name.upper() for name in listeners]
        inter_broker = inter_broker_listener.upper()
        # Kafka's protectedListener: never held back by the broker-wide rate.
        self.protected = inter_broker if len(self.listeners) > 1 else None
        self.broker_limit = MAX_RATE
        self.listener_limits: dict[str, int] = {}
        self.enabled = False
        self._broker_rate = self._new_rate()
        self._listener_rates = {name: self._new_rate() for name in self.listeners}

    def _new_rate(self) -> QuotaRate:
        return QuotaRate(self.num_samples, self.window_ms)

    def configure(self, config: KafkaConfig) -> None:
        """The limits in ``config`` (the broker's current configuration)."""
        self.broker_limit = config[MAX_CONNECTION_CREATION_RATE]
        self.listener_limits = {}
        for name in self.listeners:
            limit = config.listener_override(name, MAX_CONNECTION_CREATION_RATE)
            if limit is not None and limit != MAX_RATE:
                self.listener_limits[name] = limit
        self.enabled = self.broker_limit != MAX_RATE or bool(self.listener_limits)

    def _throttle_ms(self, rate: QuotaRate, limit: int, now_ms: int) -> int:
        rate.record(1.0, now_ms)
        measured = rate.measure(now_ms)
        if limit == MAX_RATE or measured <= limit:
            return 0
        # A limit of 0 refuses every connection: held back one whole window.
        if limit <= 0:
            return self.window_ms
        throttle = java_round((measured - limit) / limit * rate.window_size_ms(now_ms))
        return max(min(throttle, self.window_ms), 0)

    def record_and_get_throttle_time_ms(self, listener: str, now_ms: int | None = None) -> int:
        """Count a connection ``listener`` accepted; how long in ms to wait
        before serving it (0: at once)."""
        if not self.enabled:
            return 0
        now_ms = self.clock_ms() if now_ms is None else now_ms
        listener = listener.upper()
        throttle = 0
        if listener != self.protected:
            throttle = self._throttle_ms(self._broker_rate, self.broker_limit, now_ms)
        listener_rate = self._listener_rates.get(listener)
        if listener_rate is not None:
            limit = self.listener_limits.get(listener, MAX_RATE)
            throttle = max(throttle, self._throttle_ms(listener_rate, limit, now_ms))
        return throttle

    def unrecord(self, listener: str, now_ms: int | None = None) -> None:
        """Take back a connection the per-IP rate then refused."""
        if not self.enabled:
            return
        now_ms = self.clock_ms() if now_ms is None else now_ms
        listener = listener.upper()
        if listener != self.protected:
            self._broker_rate.record(-1.0, now_ms)
        listener_rate = self._listener_rates.get(listener)
        if listener_rate is not None:
            listener_rate.record(-1.0, now_ms)
