"""RateLimitedLogger: the first warning of a kind at once, then one line with
the count and the first example per interval; every event logged or counted."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kfast.server.rate_limited_log import RateLimitedLogger


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def records():
    captured: list[logging.LogRecord] = []

    class Capture(logging.Handler):
        def emit(self, record):
            captured.append(record)

    logger = logging.getLogger("kfast.test.rate_limited")
    handler = Capture()
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    yield logger, captured
    logger.removeHandler(handler)


def test_first_at_once_then_the_count_with_the_first_example(records):
    logger, captured = records
    clock = Clock()
    log = RateLimitedLogger(logger, interval_s=10.0, clock=clock)
    for i in range(5):
        log.warning("garbage", "connection %d sent garbage", i)
    assert [r.getMessage() for r in captured] == ["connection 0 sent garbage"]
    clock.now += 10.0
    log.warning("garbage", "connection %d sent garbage", 5)  # a new interval
    assert [r.getMessage() for r in captured] == [
        "connection 0 sent garbage",
        "4 more like this in the last 10 s (garbage), the first: connection 1 sent garbage",
        "connection 5 sent garbage",
    ]


def test_kinds_are_counted_separately_and_flush_writes_the_counts(records):
    logger, captured = records
    log = RateLimitedLogger(logger, interval_s=10.0, clock=Clock())
    for _ in range(3):
        log.warning("a", "kind a")
        log.warning("b", "kind b")
    log.flush()
    log.flush()  # nothing pending any more
    assert sorted(r.getMessage() for r in captured) == [
        "2 more like this in the last 10 s (a), the first: kind a",
        "2 more like this in the last 10 s (b), the first: kind b",
        "kind a",
        "kind b",
    ]


def test_a_timer_on_the_loop_writes_the_count_when_the_interval_ends(records):
    logger, captured = records
    log = RateLimitedLogger(logger, interval_s=0.05)

    async def burst():
        written = asyncio.Event()
        handler = logging.Handler()
        handler.emit = lambda record: (
            written.set() if "more like this" in record.getMessage() else None
        )
        logger.addHandler(handler)
        try:
            for i in range(100):
                log.warning("garbage", "event %d", i)
            await asyncio.wait_for(written.wait(), 10)
        finally:
            logger.removeHandler(handler)

    asyncio.run(burst())
    assert [r.getMessage() for r in captured] == [
        "event 0",
        "99 more like this in the last 0.05 s (garbage), the first: event 1",
    ]


def test_nothing_is_counted_when_warnings_are_off(records):
    logger, captured = records
    logger.setLevel(logging.ERROR)
    log = RateLimitedLogger(logger, clock=Clock())
    log.warning("garbage", "ignored")
    log.flush()
    assert captured == []
