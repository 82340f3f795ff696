"""Timer benchmarks: kfast's timing wheel against the event loops' own timers.

timer_add_cancel: schedule a 30 s timeout and cancel it, 1M times -- what a
    purgatory does for every request that completes before its timeout
    (produce with acks=all, fetch with min bytes, heartbeats).
    kfast   SystemTimer.schedule + handle.cancel on a uvloop loop
    kfast_asyncio  the same on an asyncio loop
    uvloop  loop.call_later + handle.cancel
    asyncio loop.call_later + handle.cancel
timer_expire: 1M timers with random delays over 10 s, expired by advancing
    a simulated clock in 1 ms steps (the wheel's tick).
    kfast   TimingWheel.add + advance_clock
    heapq   a binary heap of (expiration, seq, task) popped while due

Run: python3 -m pytest bench/test_timer.py --benchmark-only
Each round builds a fresh loop/timer (setup is not timed); rates are in
extra_info and in bench/README.md.
"""

import asyncio
import heapq
import random

import pytest
import uvloop
from conftest import QUICK

from kfast._ext.timer import TimingWheel
from kfast.server_common.timer import SystemTimer

PAIRS = 100_000 if QUICK else 1_000_000
TIMERS = 100_000 if QUICK else 1_000_000
SPAN_MS = 10_000
# Quick mode (make bench-check): a tenth of the work per round, so a kfast
# round lasts tens of ms, a scheduler slice on a loaded machine; more rounds
# keep the minimum an unpreempted one.
ROUNDS = 10 if QUICK else 3
EXPIRE_ROUNDS = 15 if QUICK else 2  # the heapq peer takes seconds per full round


def _noop():
    pass


def _add_cancel(schedule, delay):
    for _ in range(PAIRS):
        schedule(delay, _noop).cancel()


def _bench_add_cancel(benchmark, make):
    loops = []

    def setup():
        loop, schedule, delay = make()
        loops.append(loop)
        return (schedule, delay), {}

    benchmark.pedantic(_add_cancel, setup=setup, rounds=ROUNDS, iterations=1)
    for loop in loops:
        loop.close()
    benchmark.extra_info["pairs_per_s"] = PAIRS / benchmark.stats.stats.min


def _kfast_on(new_loop):
    def make():
        loop = new_loop()
        return loop, SystemTimer(loop).schedule, 30_000

    return make


def _call_later_on(new_loop):
    def make():
        loop = new_loop()
        return loop, loop.call_later, 30.0

    return make


def test_timer_add_cancel_kfast(benchmark):
    _bench_add_cancel(benchmark, _kfast_on(uvloop.new_event_loop))


def test_timer_add_cancel_kfast_asyncio(benchmark):
    _bench_add_cancel(benchmark, _kfast_on(asyncio.new_event_loop))


def test_timer_add_cancel_uvloop(benchmark):
    _bench_add_cancel(benchmark, _call_later_on(uvloop.new_event_loop))


def test_timer_add_cancel_asyncio(benchmark):
    _bench_add_cancel(benchmark, _call_later_on(asyncio.new_event_loop))


@pytest.fixture(scope="module")
def expirations():
    rng = random.Random(20261121)
    return [rng.randrange(1, SPAN_MS + 1) for _ in range(TIMERS)]


def _expire_kfast(expirations):
    wheel = TimingWheel()
    add = wheel.add
    for expiration in expirations:
        add(expiration, _noop)
    advance = wheel.advance_clock
    expired = 0
    for now in range(1, SPAN_MS + 1):
        expired += len(advance(now))
    return expired


def _expire_heapq(expirations):
    heap = []
    push = heapq.heappush
    pop = heapq.heappop
    for seq, expiration in enumerate(expirations):
        push(heap, (expiration, seq, _noop))
    expired = 0
    for now in range(1, SPAN_MS + 1):
        due = []
        while heap and heap[0][0] <= now:
            due.append(pop(heap)[2])
        expired += len(due)
    return expired


def _bench_expire(benchmark, run, expirations):
    expired = benchmark.pedantic(run, args=(expirations,), rounds=EXPIRE_ROUNDS, iterations=1)
    assert expired == TIMERS
    benchmark.extra_info["timers_per_s"] = TIMERS / benchmark.stats.stats.min


def test_timer_expire_kfast(benchmark, expirations):
    _bench_expire(benchmark, _expire_kfast, expirations)


def test_timer_expire_heapq(benchmark, expirations):
    _bench_expire(benchmark, _expire_heapq, expirations)
