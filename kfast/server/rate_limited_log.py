"""Warnings (and INFO lines, as the authorizer's denials) that repeat, logged
at a bounded rate.

A broker on a reachable port meets port scanners, health checks, TLS or HTTP
clients and Kafka clients that speak a protocol it does not serve. Kafka logs
one WARN per such connection; 2,000 of them are 2,000 lines that bury
everything else. ``RateLimitedLogger.warning(kind, message, *args)`` instead
logs the first event of a ``kind`` at once and only counts the ones that
follow within ``interval_s``; when the interval ends it logs one line with
their count and the first of them as the example, and the next event of that
kind starts a new interval. Per kind and interval that is at most two lines,
and every event is either logged or counted.

Pending counts are written by a timer on the running event loop when the
interval ends, by the next event of the kind after it, or by ``flush()``
(the socket server flushes on shutdown, so no count is lost).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

__all__ = ["RateLimitedLogger", "WARNING_INTERVAL_S"]

# How long repeats of one kind of warning are counted instead of logged.
WARNING_INTERVAL_S = 10.0


class _Suppressed:
    __slots__ = ("count", "example", "timer")

    def __init__(self, example: str) -> None:
        self.count = 1
        self.example = example
        self.timer: asyncio.TimerHandle | None = None


class RateLimitedLogger:
    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = WARNING_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self._clock = clock
        # kind -> when its current interval ends
        self._interval_end: dict[str, float] = {}
        self._suppressed: dict[str, _Suppressed] = {}
        self._levels: dict[str, int] = {}  # kind -> the level it is logged at

    def warning(self, kind: str, message: str, *args: object) -> None:
        self.log(logging.WARNING, kind, message, *args)

    def info(self, kind: str, message: str, *args: object) -> None:
        self.log(logging.INFO, kind, message, *args)

    def log(self, level: int, kind: str, message: str, *args: object) -> None:
        """One event of ``kind`` at ``level`` (its count line at the same level)."""
        if not self.logger.isEnabledFor(level):
            return
        self._levels[kind] = level
        now = self._clock()
        end = self._interval_end.get(kind)
        if end is None or now >= end:
            self._flush(kind)
            self._interval_end[kind] = now + self.interval_s
            self.logger.log(level, message, *args)
            return
        suppressed = self._suppressed.get(kind)
        if suppressed is not None:
            suppressed.count += 1
            return
        suppressed = self._suppressed[kind] = _Suppressed(message % args if args else message)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop: the next event of the kind or flush() writes the count
        suppressed.timer = loop.call_later(end - now, self._flush, kind)

    def flush(self) -> None:
        """Log every pending count now."""
        for kind in list(self._suppressed):
            self._flush(kind)

    def _flush(self, kind: str) -> None:
        suppressed = self._suppressed.pop(kind, None)
        if suppressed is None:
            return
        if suppressed.timer is not None:
            suppressed.timer.cancel()
        self.logger.log(
            self._levels.get(kind, logging.WARNING),
            "%d more like this in the last %g s (%s), the first: %s",
            suppressed.count,
            self.interval_s,
            kind,
            suppressed.example,
        )
