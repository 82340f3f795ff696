"""`make bench-check`: a regression guard on kernel/peer ratios, not times.

    python3 bench/ratio_check.py            # run, compare with bench/ratios.json
    python3 bench/ratio_check.py --record   # run, rewrite bench/ratios.json

A quick pytest-benchmark pass (KFAST_BENCH_QUICK=1, few rounds) times every
kernel in KERNELS and its peer in the same process; a kernel's ratio is
peer min time / kfast min time (how many times faster kfast is; minima,
because they are the steadiest statistic on a shared machine). Absolute
times move with the machine's load, but a kernel and its peer timed seconds
apart mostly move together, so the ratio is what is compared. The check
makes PASSES such passes and takes each kernel's median ratio: on a loaded
2-core machine a single pass moved single ratios by 20-80% (a burst of load
during one side's rounds); bench/README.md has the spread of the median.

The check fails (exit 1) naming every kernel whose ratio fell by more than
MAX_DROP (20%) from bench/ratios.json even after CONFIRM_PASSES more passes
of just the kernels that fell, and every recorded kernel the run did not
produce (a renamed or broken benchmark). A kernel in KERNELS with no
recorded ratio is reported and does not fail: re-record to add it.

Not part of `make test`: one run on a loaded 2-core machine can still
move a ratio by 10-20%, which is why the threshold is 20% and why a
failure is worth one re-run before it is investigated.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
BASELINE_PATH = os.path.join(BENCH_DIR, "ratios.json")

# A drop of more than this fraction of the recorded ratio fails the check.
MAX_DROP = 0.20
# Quick passes per check (or record); each kernel's ratio is their median.
PASSES = 3
# Passes when recording: the baseline is compared with every later check, so
# it takes more passes than a check (a median of three was itself off by 40%
# once: protocol_fetch_encode at 25x against 14-18x in other checks).
RECORD_PASSES = 5
# Extra passes of only the kernels that fell, before the check fails: their
# ratio is then the median of PASSES + CONFIRM_PASSES passes.
CONFIRM_PASSES = 2

# pytest-benchmark settings of a quick pass: at least 10 rounds, at most
# ~0.3 s per benchmark (the pedantic ones, timer and log append, fix their own
# rounds; KFAST_BENCH_QUICK shrinks the timer's workload, bench/conftest.py).
PYTEST_OPTIONS = (
    "--benchmark-only",
    "--benchmark-min-rounds=10",
    "--benchmark-max-time=0.3",
    "--benchmark-quiet",
    # A collection lands in whichever round crosses the allocation threshold,
    # so with GC on, ratios depended on what earlier tests left alive
    # (timer_expire moved 5x-8x between passes); off, they time the kernels.
    "--benchmark-disable-gc",
    "-q",
    "-p",
    "no:cacheprovider",
)


@dataclass(frozen=True)
class Kernel:
    """One guarded kernel: kfast's benchmark and its peer's (pytest node ids
    relative to the repository root)."""

    name: str
    kfast: str
    peer: str


KERNELS = (
    Kernel(
        "batch_decode",
        "bench/test_codec_batch.py::test_batch_decode_kfast",
        "bench/test_codec_batch.py::test_batch_decode_aiokafka",
    ),
    Kernel(
        "batch_build",
        "bench/test_codec_batch.py::test_batch_build_kfast",
        "bench/test_codec_batch.py::test_batch_build_aiokafka",
    ),
    Kernel(
        "batch_validate",
        "bench/test_codec_batch.py::test_batch_validate_kfast_header_crc",
        "bench/test_codec_batch.py::test_batch_validate_crc32c",
    ),
    Kernel(
        "batch_columnar",
        "bench/test_codec_columnar.py::test_batch_columnar_kfast",
        "bench/test_codec_columnar.py::test_batch_columnar_aiokafka",
    ),
    Kernel(
        "crc32c_1mib",
        "bench/test_crc32c.py::test_crc32c_1mib_kfast_auto",
        "bench/test_crc32c.py::test_crc32c_1mib_crc32c_pkg",
    ),
    Kernel(
        "crc32c_16kib",
        "bench/test_crc32c.py::test_crc32c_16kib_kfast_auto",
        "bench/test_crc32c.py::test_crc32c_16kib_crc32c_pkg",
    ),
    Kernel(
        "index_lookup",
        "bench/test_storage.py::test_index_lookup_kfast",
        "bench/test_storage.py::test_index_lookup_python",
    ),
    Kernel(
        "log_append_16kib",
        "bench/test_storage.py::test_log_append_kfast_16kib",
        "bench/test_storage.py::test_log_append_raw_16kib",
    ),
    Kernel(
        "timer_add_cancel",
        "bench/test_timer.py::test_timer_add_cancel_kfast",
        "bench/test_timer.py::test_timer_add_cancel_uvloop",
    ),
    Kernel(
        "timer_expire",
        "bench/test_timer.py::test_timer_expire_kfast",
        "bench/test_timer.py::test_timer_expire_heapq",
    ),
    Kernel(
        "protocol_produce_parse",
        "bench/test_protocol.py::test_protocol_produce_parse_kfast",
        "bench/test_protocol.py::test_protocol_produce_parse_kafka_python",
    ),
    Kernel(
        "protocol_fetch_encode",
        "bench/test_protocol.py::test_protocol_fetch_encode_kfast",
        "bench/test_protocol.py::test_protocol_fetch_encode_kafka_python",
    ),
    Kernel(
        "protocol_metadata_encode",
        "bench/test_protocol.py::test_protocol_metadata_encode_kfast",
        "bench/test_protocol.py::test_protocol_metadata_encode_kafka_python",
    ),
)


def ratios(report: dict[str, Any], kernels: tuple[Kernel, ...] = KERNELS) -> dict[str, float]:
    """{kernel: peer min / kfast min} from a --benchmark-json report; a kernel
    whose kfast or peer benchmark is absent from the report is left out."""
    minima = {b["fullname"]: b["stats"]["min"] for b in report.get("benchmarks", [])}
    return {
        k.name: minima[k.peer] / minima[k.kfast]
        for k in kernels
        if k.kfast in minima and k.peer in minima
    }


@dataclass(frozen=True)
class Verdict:
    dropped: dict[str, tuple[float, float]]  # kernel: (recorded, measured), fell > MAX_DROP
    missing: list[str]  # recorded, but the run produced no ratio
    unrecorded: list[str]  # measured, but no recorded ratio

    @property
    def ok(self) -> bool:
        return not self.dropped and not self.missing


def median_ratios(passes: list[dict[str, float]]) -> dict[str, float]:
    """Each kernel's median ratio over the passes that measured it."""
    names = {name for measured in passes for name in measured}
    return {name: statistics.median(m[name] for m in passes if name in m) for name in sorted(names)}


def measure_and_compare(
    baseline: dict[str, float],
    run_pass: Callable[[tuple[Kernel, ...]], dict[str, float]],
    kernels: tuple[Kernel, ...] = KERNELS,
) -> tuple[dict[str, float], Verdict]:
    """PASSES passes of every kernel; if some fell more than MAX_DROP,
    CONFIRM_PASSES more of only those, and the verdict on the median of all."""
    passes = [run_pass(kernels) for _ in range(PASSES)]
    verdict = compare(baseline, median_ratios(passes))
    if verdict.dropped:
        suspects = tuple(k for k in kernels if k.name in verdict.dropped)
        print(f"bench-check: re-measuring {', '.join(verdict.dropped)}", flush=True)
        passes += [run_pass(suspects) for _ in range(CONFIRM_PASSES)]
    measured = median_ratios(passes)
    return measured, compare(baseline, measured)


def compare(
    baseline: dict[str, float], measured: dict[str, float], max_drop: float = MAX_DROP
) -> Verdict:
    """Compare measured ratios with recorded ones (both {kernel: ratio})."""
    dropped = {
        name: (recorded, measured[name])
        for name, recorded in baseline.items()
        if name in measured and measured[name] < recorded * (1 - max_drop)
    }
    return Verdict(
        dropped=dropped,
        missing=sorted(name for name in baseline if name not in measured),
        unrecorded=sorted(name for name in measured if name not in baseline),
    )


def report_lines(
    baseline: dict[str, float], measured: dict[str, float], verdict: Verdict
) -> list[str]:
    lines = [f"{'kernel':<26} {'recorded':>9} {'measured':>9} {'change':>8}"]
    for name in sorted(set(baseline) | set(measured)):
        recorded, now = baseline.get(name), measured.get(name)
        change = f"{now / recorded - 1:+.0%}" if recorded and now else ""
        flag = ""
        if name in verdict.dropped:
            flag = f"  FAIL: fell more than {MAX_DROP:.0%}"
        elif name in verdict.missing:
            flag = "  FAIL: no result in this run"
        elif name in verdict.unrecorded:
            flag = "  not recorded (make bench-check-record)"
        recorded_s = f"{recorded:.2f}x" if recorded else "-"
        now_s = f"{now:.2f}x" if now else "-"
        lines.append(f"{name:<26} {recorded_s:>9} {now_s:>9} {change:>8}{flag}")
    return lines


def load_baseline(path: str = BASELINE_PATH) -> dict[str, float]:
    with open(path) as f:
        data = json.load(f)
    return {entry["kernel"]: entry["ratio"] for entry in data["kernels"]}


def write_baseline(measured: dict[str, float], command: str, path: str = BASELINE_PATH) -> None:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    data = {
        "command": command,
        "recorded": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_average_1min": round(load, 1) if load is not None else None,
        "ratio": "peer min time / kfast min time (higher = kfast faster)",
        "kernels": [
            {
                "kernel": k.name,
                "kfast": k.kfast,
                "peer": k.peer,
                "ratio": round(measured[k.name], 3),
            }
            for k in KERNELS
            if k.name in measured
        ],
    }
    with open(path, "w") as f:
        json.dump(data, f, indent=2)
        f.write("\n")


def run_benchmarks(kernels: tuple[Kernel, ...] = KERNELS) -> dict[str, Any]:
    """One quick pytest-benchmark run of every kernel and peer; its JSON report."""
    root = os.path.dirname(BENCH_DIR)
    node_ids = list(dict.fromkeys(n for k in kernels for n in (k.kfast, k.peer)))
    with tempfile.TemporaryDirectory(prefix="kfast-bench-check-") as tmp:
        json_path = os.path.join(tmp, "run.json")
        cmd = [sys.executable, "-m", "pytest", *PYTEST_OPTIONS, f"--benchmark-json={json_path}"]
        env = dict(os.environ, KFAST_BENCH_QUICK="1")
        # A failing benchmark still writes the others' results: its kernel is
        # reported missing by compare(); pytest's own report says why.
        run = subprocess.run(
            [*cmd, *node_ids], cwd=root, env=env, check=False, capture_output=True, text=True
        )
        lines = (run.stdout + run.stderr).rstrip().splitlines()
        print("\n".join(lines if run.returncode else lines[-1:]), flush=True)
        if not os.path.exists(json_path):
            return {"benchmarks": []}
        with open(json_path) as f:
            report: dict[str, Any] = json.load(f)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--record", action="store_true", help="rewrite bench/ratios.json")
    args = parser.parse_args(argv)
    if args.record:
        measured = median_ratios([ratios(run_benchmarks()) for _ in range(RECORD_PASSES)])
        missing = [k.name for k in KERNELS if k.name not in measured]
        if missing:
            print(f"bench-check: not recorded, no result for {', '.join(missing)}", file=sys.stderr)
            return 1
        write_baseline(measured, "make bench-check-record")
        print(f"bench-check: recorded {len(measured)} ratios in {BASELINE_PATH}")
        return 0
    baseline = load_baseline()
    measured, verdict = measure_and_compare(baseline, lambda ks: ratios(run_benchmarks(ks), ks))
    print("\n".join(report_lines(baseline, measured, verdict)))
    if verdict.ok:
        print(f"bench-check: ok (no ratio fell more than {MAX_DROP:.0%})")
        return 0
    failed = [*verdict.dropped, *verdict.missing]
    print(f"bench-check: FAILED: {', '.join(failed)}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
