"""Start-to-ready of the in-process test broker (kfast.testing.KfastBroker),
the cost every test using the ``kfast_broker`` fixture pays.

  fixture_start_empty     start() on an empty data dir (format meta.properties,
                          bootstrap the metadata log, bind, register)
  fixture_start_restart   start() on a data dir with 20 partitions after a
                          clean shutdown (load logs, replay metadata)
  fixture_first_start_*   the first start() in a fresh Python process, as
                          a pytest session's first kfast_broker sees it:
                          ``_preloaded`` after the plugin's post-collection
                          preload (what the fixture does), ``_cold`` without
                          it (imports paid inside start()); the preload's
                          own time is in extra_info

Time is the wall time of ``KfastBroker.start()`` as the test thread sees it
(thread + loop creation included); extra_info carries the broker's own
start-to-ready figure (``KafkaBroker.startup_ms``). Target: < 100 ms. The
peer is ``fixture_thread_loop_only``: a bare uvloop in a thread, the floor
any in-process fixture pays.

    pytest bench/test_fixture_startup.py --benchmark-only
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading

import pytest

uvloop = pytest.importorskip("uvloop")

from kfast.testing import KfastBroker  # noqa: E402


class _Rounds:
    """Starts a broker per round; the previous one is stopped in the next
    round's setup, so only start() is timed."""

    def __init__(self, make_dir):
        self.make_dir = make_dir
        self.current = None
        self.ready_ms: list = []

    def setup(self):
        self.stop()
        return (KfastBroker(data_dir=self.make_dir()),), {}

    def start(self, broker):
        broker.start()
        self.current = broker
        self.ready_ms.append(broker.broker.startup_ms)

    def stop(self):
        if self.current is not None:
            self.current.stop()
            self.current = None

    def median_ms(self) -> float:
        return sorted(self.ready_ms)[len(self.ready_ms) // 2]


@pytest.mark.benchmark(group="fixture_start")
def test_fixture_start_empty(benchmark):
    dirs: list = []

    def make_dir():
        dirs.append(tempfile.mkdtemp(prefix="kfast-bench-"))
        return dirs[-1]

    rounds = _Rounds(make_dir)
    try:
        benchmark.pedantic(rounds.start, setup=rounds.setup, rounds=20)
    finally:
        rounds.stop()
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
    benchmark.extra_info["broker_startup_ms_median"] = rounds.median_ms()
    assert all(ms > 0 for ms in rounds.ready_ms)


@pytest.mark.benchmark(group="fixture_start")
def test_fixture_start_restart(benchmark, tmp_path):
    from confluent_kafka import Producer

    data_dir = str(tmp_path / "data")
    with KfastBroker({"num.partitions": 20}, data_dir=data_dir) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for i in range(200):
            producer.produce("bench-restart", value=b"x" * 100, partition=i % 20)
        assert producer.flush(15) == 0
    rounds = _Rounds(lambda: data_dir)
    try:
        benchmark.pedantic(rounds.start, setup=rounds.setup, rounds=10)
    finally:
        rounds.stop()
    benchmark.extra_info["broker_startup_ms_median"] = rounds.median_ms()


@pytest.mark.benchmark(group="fixture_start")
def test_fixture_thread_loop_only(benchmark):
    def start_stop():
        loop = uvloop.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()

    benchmark.pedantic(start_stop, rounds=20)


_FIRST_START_SCRIPT = r"""
import json, sys, tempfile, time
from kfast.testing import KfastBroker        # what the plugin imports at load
began = time.perf_counter()
if sys.argv[1] == "preload":
    from kfast.server.broker import preload
    preload()
preloaded = time.perf_counter()
broker = KfastBroker(data_dir=tempfile.mkdtemp(prefix="kfast-bench-"))
broker.start()
ready = time.perf_counter()
broker.close()
print(json.dumps({"preload_ms": (preloaded - began) * 1000, "start_ms": (ready - preloaded) * 1000}))
"""


def _first_starts(mode: str, rounds: int = 7) -> list:
    """Fresh interpreters with bytecode cached, as an installed package has."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPYCACHEPREFIX=tempfile.mkdtemp(prefix="kfast-pyc-"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    command = [sys.executable, "-c", _FIRST_START_SCRIPT, mode]
    subprocess.run(command, env=env, check=True, capture_output=True)  # writes the .pyc files
    return [
        json.loads(
            subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
        )
        for _ in range(rounds)
    ]


def _median(values):
    return sorted(values)[len(values) // 2]


@pytest.mark.parametrize("mode", ["preload", "cold"])
def test_fixture_first_start(benchmark, mode):
    runs = benchmark.pedantic(_first_starts, args=(mode,), rounds=1)
    benchmark.extra_info["first_start_ms_median"] = _median([r["start_ms"] for r in runs])
    benchmark.extra_info["preload_ms_median"] = _median([r["preload_ms"] for r in runs])
    print(
        f"\nfirst start in a fresh process ({mode}): start {[round(r['start_ms'], 1) for r in runs]} ms,"
        f" preload {[round(r['preload_ms'], 1) for r in runs]} ms"
    )
    assert all(r["start_ms"] > 0 for r in runs)
