"""RequestManager: at most one Raft request in flight per destination.

A request that gets no answer within controller.quorum.request.timeout.ms
counts as failed, and a failed destination is retried after
controller.quorum.retry.backoff.ms, doubled after each further failure up
to ``max_backoff_ms`` (as Kafka's clients back off reconnecting to a node
that is down), so a dead voter costs a few requests a second, not fifty. Responses are matched to requests by
correlation id; an answer to a request that is no longer in flight (it
timed out, or the role that sent it is gone) is still read for the epoch
and leader it reports, but changes no role's bookkeeping.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class _InFlight:
    correlation_id: int
    sent_ms: int


class RequestManager:
    def __init__(self, request_timeout_ms: int, retry_backoff_ms: int, max_backoff_ms: int):
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.max_backoff_ms = max(max_backoff_ms, retry_backoff_ms)
        self._in_flight: dict[int, _InFlight] = {}
        self._failed_ms: dict[int, int] = {}  # destination -> time it is ready again
        self._failures: dict[int, int] = {}  # consecutive failures
        self._next_correlation_id = 1

    def is_ready(self, destination: int, now_ms: int) -> bool:
        """True if a new request may go to ``destination`` now."""
        if destination in self._in_flight:
            return False
        ready_ms = self._failed_ms.get(destination)
        return ready_ms is None or now_ms >= ready_ms

    def ready_ms(self, destination: int) -> int | None:
        """When a request may next go to ``destination`` (0: now; None:
        one is in flight)."""
        if destination in self._in_flight:
            return None
        return self._failed_ms.get(destination, 0)

    def is_in_flight(self, destination: int) -> bool:
        return destination in self._in_flight

    def on_send(self, destination: int, now_ms: int) -> int:
        correlation_id = self._next_correlation_id
        self._next_correlation_id += 1
        self._in_flight[destination] = _InFlight(correlation_id, now_ms)
        self._failed_ms.pop(destination, None)
        return correlation_id

    def on_response(self, source: int, correlation_id: int) -> bool:
        """True if the response answers the request in flight to ``source``."""
        entry = self._in_flight.get(source)
        if entry is None or entry.correlation_id != correlation_id:
            return False
        del self._in_flight[source]
        self._failed_ms.pop(source, None)
        self._failures.pop(source, None)
        return True

    def on_failure(self, destination: int, now_ms: int, correlation_id: int | None = None) -> None:
        entry = self._in_flight.get(destination)
        if entry is not None and correlation_id in (None, entry.correlation_id):
            del self._in_flight[destination]
            self.back_off(destination, now_ms)

    def back_off(self, destination: int, now_ms: int) -> None:
        """Wait before the next request to ``destination`` (it failed, or
        answered with an error worth waiting out)."""
        failures = self._failures.get(destination, 0)
        self._failures[destination] = failures + 1
        backoff = min(self.max_backoff_ms, self.retry_backoff_ms << min(failures, 20))
        self._failed_ms[destination] = now_ms + backoff

    def expire(self, now_ms: int) -> None:
        """Fail the requests that timed out; end the backoffs that are over."""
        for destination, entry in list(self._in_flight.items()):
            if now_ms >= entry.sent_ms + self.request_timeout_ms:
                self.on_failure(destination, now_ms)
        for destination, ready_ms in list(self._failed_ms.items()):
            if now_ms >= ready_ms:
                del self._failed_ms[destination]

    def reset(self) -> None:
        """Forget every request in flight (a role change: their answers no
        longer count)."""
        self._in_flight.clear()
        self._failed_ms.clear()
        self._failures.clear()

    def next_deadline(self) -> int | None:
        deadlines = [e.sent_ms + self.request_timeout_ms for e in self._in_flight.values()]
        deadlines += list(self._failed_ms.values())
        return min(deadlines) if deadlines else None
