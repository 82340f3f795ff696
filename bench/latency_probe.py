#!/usr/bin/env python3
"""Run ``kfast serve`` with probes that say where the broker's latency
outliers come from; a report is written to OUT when the broker exits.

    python bench/latency_probe.py OUT serve --override ...
    python bench/latency_probe.py --no-gc-freeze OUT serve ...   # the collector as before

(bench/latency.py --probe DIR starts its kfast brokers this way.) Probes:

- GC: every collection's generation and pause (gc.callbacks), after start-up;
- event loop lag: a task sleeping 1 ms notes how late it wakes (> 2 ms is
  a stall: the loop ran something else, or the process had no CPU);
- what stalls: while the loop's heartbeat is older than 2 ms, a watchdog
  thread samples the main thread's stack every ~0.5 ms
  (sys._current_frames), so long stalls weigh by their length.
  A stall whose stack is the loop itself (uvloop's run, no kfast frame) was
  time without CPU or in C: the machine's load, not broker code;
- CPU: the time the broker's threads were runnable but waited for a CPU
  (/proc/self/task/*/schedstat), and involuntary context switches
  (/proc/self/status nonvoluntary_ctxt_switches: times the kernel took the
  CPU away) over the measured window.
"""

from __future__ import annotations

import collections
import gc
import sys
import threading
import time
import traceback

LAG_MS = 2.0
_TICK_S = 0.001


class Probe:
    def __init__(self) -> None:
        self.gcs: list[tuple[float, int, float]] = []
        self.lags: list[float] = []
        self.long: list[tuple[float, float]] = []  # (wall clock at its start, ms)
        self.stacks: collections.Counter[str] = collections.Counter()
        self.heartbeat = time.perf_counter()
        self._gc_started = 0.0
        self.started = 0.0
        self.ctx0 = 0
        # Connection._on_readable calls (one per readable socket event)
        # between two heartbeats: how many frames a loop pass handles
        # before the loop's timers run again.
        self.readable_calls = 0
        self.per_tick: list[int] = []

    def on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        elif self.started:
            pause = (time.perf_counter() - self._gc_started) * 1000.0
            self.gcs.append((time.time(), info["generation"], pause))

    async def monitor(self) -> None:
        import asyncio

        self.started = time.perf_counter()
        self.ctx0 = _nonvoluntary_switches()
        self.runqueue0 = _runqueue_wait_s()
        threading.Thread(target=self.watch, daemon=True).start()
        while True:
            before = time.perf_counter()
            self.heartbeat = before
            await asyncio.sleep(_TICK_S)
            now = time.perf_counter()
            self.heartbeat = now
            self.per_tick.append(self.readable_calls)
            self.readable_calls = 0
            lag = (now - before - _TICK_S) * 1000.0
            if lag > LAG_MS:
                self.lags.append(lag)
                if lag > 100:
                    self.long.append((time.time() - lag / 1000.0, lag))

    def watch(self) -> None:
        """While the loop is stalled, sample its stack every ~0.5 ms: a
        stack's count is then the time (in samples) stalls spent in it."""
        main = threading.main_thread().ident
        while True:
            time.sleep(_TICK_S / 2)
            if time.perf_counter() - self.heartbeat > LAG_MS / 1000.0:
                frame = sys._current_frames().get(main)
                if frame is not None:
                    self.stacks[_short(frame)] += 1

    def report(self) -> str:
        elapsed = time.perf_counter() - self.started
        lines = [f"window {elapsed:.1f} s"]
        lines.append(f"involuntary context switches: {_nonvoluntary_switches() - self.ctx0}")
        lines.append(
            f"time runnable but waiting for a CPU (all threads): "
            f"{_runqueue_wait_s() - self.runqueue0:.2f} s"
        )
        by_gen: dict[int, list[float]] = collections.defaultdict(list)
        for _, gen, pause in self.gcs:
            by_gen[gen].append(pause)
        for gen, pauses in sorted(by_gen.items()):
            pauses.sort()
            lines.append(
                f"gc gen{gen}: {len(pauses)} collections, pause p50 {pauses[len(pauses) // 2]:.2f}"
                f" ms, max {pauses[-1]:.2f} ms, total {sum(pauses):.0f} ms"
            )
        ticks = sorted(n for n in self.per_tick if n)
        if ticks:
            lines.append(
                f"readable events per heartbeat (non-empty: {len(ticks)} of {len(self.per_tick)}):"
                f" p50 {ticks[len(ticks) // 2]}, p99 {ticks[int(len(ticks) * 0.99)]},"
                f" max {ticks[-1]}, total {sum(ticks)}"
            )
        lags = sorted(self.lags)
        lines.append(
            f"loop stalls > {LAG_MS:g} ms: {len(lags)}"
            + (f", p50 {lags[len(lags) // 2]:.1f} ms, max {lags[-1]:.1f} ms" if lags else "")
        )
        for at, lag in self.long:
            lines.append(f"stall of {lag:.0f} ms at {at:.3f} (wall clock)")
        total = sum(self.stacks.values())
        for stack, n in self.stacks.most_common(12):
            lines.append(f"--- {n} of {total} samples taken in stalls:\n{stack}")
        return "\n".join(lines) + "\n"


def _nonvoluntary_switches() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("nonvoluntary_ctxt_switches"):
                return int(line.split()[1])
    return 0


def _runqueue_wait_s() -> float:
    """Seconds this process's threads spent runnable on a run queue
    (/proc/<pid>/task/<tid>/schedstat: run time, wait time, timeslices)."""
    import os

    total = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total / 1e9


def _short(frame) -> str:
    """The innermost kfast frames (or the loop's, when no kfast code ran)."""
    frames = traceback.extract_stack(frame)
    kfast = [f for f in frames if "/kfast/" in f.filename]
    chosen = kfast[-8:] if kfast else frames[-2:]
    return "".join(f"  {f.filename.rsplit('/kfast/', 1)[-1]}:{f.lineno} {f.name}\n" for f in chosen)


def main() -> int:
    args = sys.argv[1:]
    freeze = args[0] != "--no-gc-freeze"
    if not freeze:
        args = args[1:]
    out, argv = args[0], args[1:]
    probe = Probe()
    gc.callbacks.append(probe.on_gc)
    import kfast.tools.serve
    from kfast.cli import main as kfast_main
    from kfast.server.broker import KafkaBroker

    if not freeze:  # the A/B of kfast.server.gc_tuning
        kfast.tools.serve.freeze_startup_heap = lambda: 0

    start = KafkaBroker.start

    async def start_probed(self, *args, **kwargs):
        import asyncio

        result = await start(self, *args, **kwargs)
        probe.task = asyncio.get_running_loop().create_task(probe.monitor())
        return result

    KafkaBroker.start = start_probed

    from kfast.server.network import Connection

    on_readable = Connection._on_readable

    def counted(self):
        probe.readable_calls += 1
        return on_readable(self)

    Connection._on_readable = counted
    try:
        return kfast_main(argv)
    finally:
        with open(out, "w") as f:
            f.write(probe.report())


if __name__ == "__main__":
    sys.exit(main())
