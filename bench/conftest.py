"""Shared workloads for the kernel benchmarks.

make_workload() is the record-codec workload every batch benchmark uses (and
other suites may import): 1000 records with 10-byte keys and 100-byte values,
deterministic so runs compare.
"""

import os
import random

import pytest

# Set by `make bench-check` (bench/ratio_check.py): benchmarks whose rounds are
# fixed (pedantic) shrink their workloads so the whole check stays near two
# minutes; ratios recorded in quick mode are compared only with quick runs.
QUICK = os.environ.get("KFAST_BENCH_QUICK") == "1"

WORKLOAD_RECORDS = 1000
WORKLOAD_KEY_BYTES = 10
WORKLOAD_VALUE_BYTES = 100
WORKLOAD_BASE_TIMESTAMP = 1_700_000_000_000


def make_workload(
    n=WORKLOAD_RECORDS, key_bytes=WORKLOAD_KEY_BYTES, value_bytes=WORKLOAD_VALUE_BYTES, seed=2
):
    """[(key, value)] * n: random bytes (so compression benchmarks are not trivial)."""
    rng = random.Random(seed)
    return [(rng.randbytes(key_bytes), rng.randbytes(value_bytes)) for _ in range(n)]


@pytest.fixture(scope="session")
def workload():
    return make_workload()


def record_rate(benchmark, records):
    """Record records/s (from the fastest round) in the benchmark's extra_info."""
    best = benchmark.stats.stats.min
    benchmark.extra_info["records_per_s"] = round(records / best)
    return records / best


def byte_rate(benchmark, nbytes):
    best = benchmark.stats.stats.min
    benchmark.extra_info["GB_per_s"] = round(nbytes / best / 1e9, 2)
    return nbytes / best
