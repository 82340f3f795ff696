"""log_append at 16 KiB / 1 MiB, kfast and the raw-write peer interleaved.

    python3 bench/log_append_paired.py [--size 16384] [--pairs 30]

The pytest-benchmark tests in test_storage.py time all of kfast's rounds and
then all of the peer's; on a shared 2-core machine the background changes
between the two. Here each pair runs one kfast round and one raw round back
to back (alternating which goes first), so both see the same conditions, and
the ratio is taken per pair. A round is what test_storage.py times: BATCHES
appends of the same valid v2 batch to a fresh partition (Log.append_as_leader)
or os.write of the same bytes to a fresh file in the same directory tree.
Prints the median per-pair ratio (raw time / kfast time: 1.0 = as fast as a
raw write) with its quartiles.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_storage import BATCHES, FALLOCATE_STEP, _batch, _fresh

from kfast.config import LogConfig
from kfast.storage.log import Log

SIZES = {16 * 1024: "16kib", 1024 * 1024: "1mib"}
CONFIG = LogConfig(
    {
        "segment.bytes": 1 << 30,
        "max.message.bytes": 2 * 1024 * 1024,
        "message.timestamp.after.max.ms": str(2**62),
        "message.timestamp.before.max.ms": str(2**62),
    }
)


def kfast_round(workdir: str, data: bytearray, count: int) -> float:
    path = os.path.join(workdir, "kfast")
    _fresh(path)
    log = Log(os.path.join(path, "bench-0"), CONFIG, segment_fallocate_step=FALLOCATE_STEP)
    log.leader_epoch_cache.assign(1, log.log_end_offset, flush=False)  # as make_leader does
    start = time.perf_counter()
    for _ in range(count):
        log.append_as_leader(data, leader_epoch=1)
    elapsed = time.perf_counter() - start
    log.close()
    _fresh(path)
    return elapsed


def raw_round(workdir: str, data: bytearray, count: int) -> float:
    path = os.path.join(workdir, "raw")
    _fresh(path)
    fd = os.open(os.path.join(path, "00000000000000000000.log"), os.O_RDWR | os.O_CREAT, 0o644)
    start = time.perf_counter()
    for _ in range(count):
        os.write(fd, data)
    elapsed = time.perf_counter() - start
    os.close(fd)
    _fresh(path)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, choices=sorted(SIZES), default=16 * 1024)
    parser.add_argument("--pairs", type=int, default=30)
    args = parser.parse_args()
    data = _batch(args.size)
    count = BATCHES[SIZES[args.size]]
    workdir = tempfile.mkdtemp(prefix="kfast-bench-paired-", dir=os.environ.get("KFAST_BENCH_DIR"))
    try:
        ratios, kfast_times, raw_times = [], [], []
        for i in range(args.pairs):
            if i % 2:
                k = kfast_round(workdir, data, count)
                r = raw_round(workdir, data, count)
            else:
                r = raw_round(workdir, data, count)
                k = kfast_round(workdir, data, count)
            kfast_times.append(k)
            raw_times.append(r)
            ratios.append(r / k)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    print(
        f"log_append_{SIZES[args.size]}: {args.pairs} pairs of {count} appends; "
        f"median ms per round kfast {statistics.median(kfast_times) * 1e3:.1f}, "
        f"raw {statistics.median(raw_times) * 1e3:.1f}; per-pair ratio median "
        f"{statistics.median(ratios):.3f}x (quartiles {q1:.3f}-{q3:.3f})"
    )


if __name__ == "__main__":
    main()
