"""What ``kfast perf`` measures: record counts, bytes and latencies, the
periodic and final lines of Kafka's perf tools, ``--json`` and ``--plot``.

Latencies go into an HDR histogram (the ``hdrhistogram`` package) in
microseconds from 1 µs to one hour with 3 significant digits, so every
percentile is within 0.1% of the recorded value. Each latency is also kept
with the time it was recorded at (two float arrays, 16 bytes a record) for
the latency-over-time plot.

The lines are Kafka's ProducerPerformance.Stats (a window line every
reporting interval, the final line with 50th/95th/99th/99.9th in whole ms),
ConsumerPerformance's header and row, and EndToEndLatency's final two lines.
The consumer's throughput over time comes from the running totals it notes
after each batch, cut into one-second windows.
"""

from __future__ import annotations

import json
import math
import time
from array import array

MB = 1024 * 1024
PERCENTILES = (50.0, 95.0, 99.0, 99.9)
_HIGHEST_US = 3600 * 1000 * 1000
_SIGNIFICANT_FIGURES = 3


def _histogram():
    try:
        from hdrh.histogram import HdrHistogram
    except ImportError as exc:  # an extra, not a runtime dependency of the broker
        raise SystemExit(
            "kfast perf needs the hdrhistogram package: pip install 'kfast[perf]'"
        ) from exc
    return HdrHistogram(1, _HIGHEST_US, _SIGNIFICANT_FIGURES)


def _percentile_name(p: float) -> str:
    return f"p{p:g}"


class LatencyStats:
    """Counts, bytes and latencies of one run, with a window for the periodic
    line (Kafka's Stats.window/newWindow)."""

    def __init__(self, reporting_interval_ms: int = 5000, out=None):
        self.start = time.monotonic()
        self.histogram = _histogram()
        self.count = 0
        self.bytes = 0
        self.total_latency_ms = 0.0
        self.max_latency_ms = 0.0
        self.at = array("d")  # seconds since start, per record
        self.latency = array("d")  # ms, per record
        self.reporting_interval = reporting_interval_ms / 1000.0
        self.out = out
        self._window_start = self.start
        self._window_count = 0
        self._window_bytes = 0
        self._window_latency = 0.0
        self._window_max = 0.0
        self.windows: list[dict] = []

    def record(self, latency_ms: float, size: int, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self.count += 1
        self.bytes += size
        self.total_latency_ms += latency_ms
        if latency_ms > self.max_latency_ms:
            self.max_latency_ms = latency_ms
        self.histogram.record_value(min(max(1, int(latency_ms * 1000)), _HIGHEST_US))
        self.at.append(now - self.start)
        self.latency.append(latency_ms)
        self._window_count += 1
        self._window_bytes += size
        self._window_latency += latency_ms
        if latency_ms > self._window_max:
            self._window_max = latency_ms
        if now - self._window_start >= self.reporting_interval:
            self.print_window(now)

    def print_window(self, now: float) -> None:
        elapsed = max(now - self._window_start, 1e-9)
        window = {
            "at_s": round(now - self.start, 3),
            "records": self._window_count,
            "records_per_sec": self._window_count / elapsed,
            "mb_per_sec": self._window_bytes / MB / elapsed,
            "avg_latency_ms": self._window_latency / max(self._window_count, 1),
            "max_latency_ms": self._window_max,
        }
        self.windows.append(window)
        if self.out is not None:
            # ProducerPerformance.Stats.printWindow
            print(
                "%d records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, "
                "%.1f ms max latency."
                % (
                    window["records"],
                    window["records_per_sec"],
                    window["mb_per_sec"],
                    window["avg_latency_ms"],
                    window["max_latency_ms"],
                ),
                file=self.out,
                flush=True,
            )
        self._window_start = now
        self._window_count = self._window_bytes = 0
        self._window_latency = self._window_max = 0.0

    def percentile_ms(self, p: float) -> float:
        return self.histogram.get_value_at_percentile(p) / 1000.0 if self.count else 0.0

    def summary(self, elapsed_s: float | None = None) -> dict:
        elapsed = max((time.monotonic() - self.start) if elapsed_s is None else elapsed_s, 1e-9)
        return {
            "records": self.count,
            "bytes": self.bytes,
            "elapsed_s": elapsed,
            "records_per_sec": self.count / elapsed,
            "mb_per_sec": self.bytes / MB / elapsed,
            "avg_latency_ms": self.total_latency_ms / self.count if self.count else 0.0,
            "max_latency_ms": self.max_latency_ms,
            "percentiles_ms": {_percentile_name(p): self.percentile_ms(p) for p in PERCENTILES},
            "histogram": {
                "unit": "us",
                "lowest": 1,
                "highest": _HIGHEST_US,
                "significant_figures": _SIGNIFICANT_FIGURES,
            },
        }


def producer_final_line(summary: dict) -> str:
    """ProducerPerformance.Stats.printTotal (percentiles as whole ms)."""
    p = summary["percentiles_ms"]
    return (
        "%d records sent, %f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, "
        "%d ms 50th, %d ms 95th, %d ms 99th, %d ms 99.9th."
        % (
            summary["records"],
            summary["records_per_sec"],
            summary["mb_per_sec"],
            summary["avg_latency_ms"],
            summary["max_latency_ms"],
            p["p50"],
            p["p95"],
            p["p99"],
            p["p99.9"],
        )
    )


CONSUMER_HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)


def _date(epoch_s: float) -> str:
    # ConsumerPerformance's default date format, yyyy-MM-dd HH:mm:ss:SSS
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch_s)) + ":%03d" % int(
        epoch_s * 1000 % 1000
    )


def consumer_row(
    start_epoch_s: float, end_epoch_s: float, records: int, size: int, rebalance_ms: int
) -> str:
    """ConsumerPerformance's final row: totals over the whole run, then over
    the fetch time (the run less the time spent joining the group)."""
    elapsed = max(end_epoch_s - start_epoch_s, 1e-9)
    fetch_ms = max(int((end_epoch_s - start_epoch_s) * 1000) - rebalance_ms, 1)
    mb = size / MB
    return "%s, %s, %.4f, %.4f, %d, %.4f, %d, %d, %.4f, %.4f" % (
        _date(start_epoch_s),
        _date(end_epoch_s),
        mb,
        mb / elapsed,
        records,
        records / elapsed,
        rebalance_ms,
        fetch_ms,
        mb / (fetch_ms / 1000.0),
        records / (fetch_ms / 1000.0),
    )


def consumer_summary(
    start_epoch_s: float, end_epoch_s: float, records: int, size: int, rebalance_ms: int
) -> dict:
    elapsed = max(end_epoch_s - start_epoch_s, 1e-9)
    fetch_s = max(elapsed - rebalance_ms / 1000.0, 1e-3)
    return {
        "records": records,
        "bytes": size,
        "elapsed_s": elapsed,
        "rebalance_time_ms": rebalance_ms,
        "fetch_time_ms": int(fetch_s * 1000),
        "records_per_sec": records / elapsed,
        "mb_per_sec": size / MB / elapsed,
        "fetch_records_per_sec": records / fetch_s,
        "fetch_mb_per_sec": size / MB / fetch_s,
    }


def e2e_final_lines(summary: dict) -> list[str]:
    """EndToEndLatency.printResults (percentiles as whole ms)."""
    p = summary["percentiles_ms"]
    return [
        "Avg latency: %.4f ms" % summary["avg_latency_ms"],
        "Percentiles: 50th = %d, 99th = %d, 99.9th = %d" % (p["p50"], p["p99"], p["p99.9"]),
    ]


def write_json(path: str, result: dict) -> None:
    text = json.dumps(result, indent=2, sort_keys=True)
    if path == "-":
        print(text)
    else:
        with open(path, "w") as f:
            f.write(text + "\n")


_PLOT_POINTS = 20000  # a scatter of more points only blurs into the same picture


def _pyplot():
    """matplotlib's pyplot on the Agg backend (no display needed)."""
    try:
        import matplotlib
    except ImportError as exc:
        raise SystemExit("--plot needs matplotlib: pip install 'kfast[perf]'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot(path: str, stats: LatencyStats, title: str) -> None:
    """Latency over time (one dot per record, thinned to ~20k) and the
    latency histogram on a log axis, in one PNG; matplotlib's Agg backend
    needs no display."""
    plt = _pyplot()
    step = max(1, len(stats.latency) // _PLOT_POINTS)
    at, latency = stats.at[::step], stats.latency[::step]
    fig, (over_time, histogram) = plt.subplots(1, 2, figsize=(10, 3.6), dpi=80)
    over_time.scatter(at, latency, s=2, alpha=0.5, linewidths=0)
    over_time.set_xlabel("time since start (s)")
    over_time.set_ylabel("latency (ms)")
    over_time.set_yscale("log")
    over_time.set_title("latency over time")
    positive = [v for v in stats.latency if v > 0] or [1e-3]
    low, high = min(positive), max(positive)
    bins = [low * (high / low) ** (i / 60) for i in range(61)] if high > low else 10
    histogram.hist(positive, bins=bins)
    histogram.set_xscale("log")
    histogram.set_xlabel("latency (ms)")
    histogram.set_ylabel("records")
    summary = stats.summary()
    p = summary["percentiles_ms"]
    histogram.set_title("p50 %.2f  p99 %.2f  p99.9 %.2f ms" % (p["p50"], p["p99"], p["p99.9"]))
    for value in (p["p50"], p["p99"], p["p99.9"]):
        histogram.axvline(max(value, low), color="black", linewidth=0.8, linestyle="--")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def throughput_windows(timeline, start: float, width_s: float | None = None) -> list[dict]:
    """The consumer's ``timeline`` ((monotonic time, records, bytes so far)
    per batch) as windows of ``width_s`` from ``start``: records and MB/s
    read in each (empty windows included, so a stall shows as zero).
    Without ``width_s``: one second, or a twentieth of a shorter run (at
    least 10 ms), so a short run still shows a shape."""
    if width_s is None:
        run_s = timeline[-1][0] - start if timeline else 0.0
        width_s = 1.0 if run_s >= 20 else max(run_s / 20, 0.01)
    windows: list[dict] = []
    records_before = bytes_before = 0
    for at, records, size in timeline:
        # Windows end at their at_s: a batch at exactly one's end is in it.
        index = max(0, math.ceil((at - start) / width_s - 1e-9) - 1)
        while len(windows) <= index:
            windows.append(
                {"at_s": round((len(windows) + 1) * width_s, 3), "records": 0, "bytes": 0}
            )
        windows[index]["records"] += records - records_before
        windows[index]["bytes"] += size - bytes_before
        records_before, bytes_before = records, size
    for window in windows:
        window["records_per_sec"] = window["records"] / width_s
        window["mb_per_sec"] = window["bytes"] / MB / width_s
    return windows


def plot_throughput(path: str, windows: list[dict], title: str) -> None:
    """Records/s and MB/s per window over time, in one PNG."""
    plt = _pyplot()
    fig, (records, megabytes) = plt.subplots(1, 2, figsize=(10, 3.6), dpi=80)
    # Each window's rate holds from its start to its end (at_s).
    at = [0.0] + [w["at_s"] for w in windows]
    for axes, key, label in (
        (records, "records_per_sec", "records/s"),
        (megabytes, "mb_per_sec", "MB/s"),
    ):
        rates = [w[key] for w in windows]
        axes.step(at, rates[:1] + rates, where="pre")
        axes.set_xlabel("time since start (s)")
        axes.set_ylabel(label)
        axes.set_ylim(bottom=0)
        axes.set_title(f"{label} over time")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
