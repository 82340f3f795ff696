"""Storage kernels: log append vs raw writes, index lookup vs pure-Python bisect.

    pytest bench/test_storage.py --benchmark-only -k log_append
    pytest bench/test_storage.py --benchmark-only -k index_lookup
    python3 bench/log_append_paired.py --size 16384   (kfast and raw interleaved)

log_append_*: each round appends BATCHES record batches (1 MiB or 16 KiB,
valid v2 batches built by kafka-python) to a fresh partition:
  log_append_kfast_<size>   Log.append_as_leader on a writable buffer, as the
                            produce path calls it: one call into C
                            (LogState.append_as_leader: lock, header and
                            CRC-32C check, offset/epoch patch, roll rule, one
                            pwrite, index entries, epoch check, end offsets,
                            flush counter)
  log_append_raw_<size>     os.write of the same bytes to a file on the same
                            filesystem (the ceiling)
index_lookup_*: LOOKUPS random lookups per round in an offset index of
1,000,000 entries (8 MB, memory-mapped as a rolled segment's index is):
  index_lookup_kfast        OffsetIndex.lookup (Cython binary search, warm tail first)
  index_lookup_python       bisect in Python over the same mmap (struct.unpack_from)
"""

from __future__ import annotations

import os
import random
import shutil
import struct
import tempfile

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kfast.config import SERVER_CONFIGS, LogConfig
from kfast.storage.index import OffsetIndex
from kfast.storage.log import Log
from kfast.storage.manager import SEGMENT_FALLOCATE_STEP

BATCH_BYTES = {"1mib": 1024 * 1024, "16kib": 16 * 1024}
BATCHES = {"1mib": 64, "16kib": 2048}  # 64 MiB / 32 MiB per round
ROUNDS = 8
INDEX_ENTRIES = 1_000_000
LOOKUPS = 10_000
# The active segment's block reservation as a broker's LogManager sets it
# (kfast.log.segment.fallocate.step.bytes at its default).
FALLOCATE_STEP = SERVER_CONFIGS[SEGMENT_FALLOCATE_STEP].default


def _batch(total: int) -> bytearray:
    value = os.urandom(1000)
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    count = max(total // 1030, 1)
    for i in range(count):
        builder.append(i, timestamp=1_700_000_000_000, key=None, value=value, headers=[])
    return bytearray(builder.build())


@pytest.fixture(scope="module")
def workdir():
    path = tempfile.mkdtemp(prefix="kfast-bench-storage-", dir=os.environ.get("KFAST_BENCH_DIR"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _fresh(path: str) -> None:
    """Empty ``path``. Each round and each test ends by removing what it
    wrote: a deleted file's dirty pages are dropped, so the 32-64 MiB a test
    leaves behind is never written back (30 s later, by the kernel's flusher)
    while the next test - alternately kfast and raw - is being timed."""
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)


def _run_kfast(benchmark, workdir, size):
    data = _batch(BATCH_BYTES[size])
    config = LogConfig(
        {
            "segment.bytes": 1 << 30,
            "max.message.bytes": 2 * 1024 * 1024,
            "message.timestamp.after.max.ms": str(2**62),
            "message.timestamp.before.max.ms": str(2**62),
        }
    )
    state = {}

    def setup():
        # Closing (producer snapshot fsync, index trim) is not part of appending.
        if "log" in state:
            state["log"].close()
        _fresh(os.path.join(workdir, "kfast"))
        log = Log(
            os.path.join(workdir, "kfast", "bench-0"),
            config,
            segment_fallocate_step=FALLOCATE_STEP,
        )
        # The partition becomes leader before anything is produced to it; the
        # broker records the new epoch then (Partition.make_leader, no fsync).
        # Without this the first timed append would assign the epoch and
        # fsync the leader-epoch checkpoint (1-2 ms of a 25-45 ms round): a
        # once-per-election cost, not an append cost.
        log.leader_epoch_cache.assign(1, log.log_end_offset, flush=False)
        state["log"] = log

    def run():
        log = state["log"]
        for _ in range(BATCHES[size]):
            log.append_as_leader(data, leader_epoch=1)

    benchmark.pedantic(run, setup=setup, rounds=ROUNDS, iterations=1)
    state["log"].close()
    _fresh(os.path.join(workdir, "kfast"))  # see _fresh
    benchmark.extra_info["MiB_per_round"] = len(data) * BATCHES[size] / 2**20


def _run_raw(benchmark, workdir, size):
    data = _batch(BATCH_BYTES[size])
    state = {}

    def setup():
        if "fd" in state:
            os.close(state["fd"])
        _fresh(os.path.join(workdir, "raw"))
        state["fd"] = os.open(
            os.path.join(workdir, "raw", "00000000000000000000.log"), os.O_RDWR | os.O_CREAT, 0o644
        )

    def run():
        fd = state["fd"]
        for _ in range(BATCHES[size]):
            os.write(fd, data)

    benchmark.pedantic(run, setup=setup, rounds=ROUNDS, iterations=1)
    os.close(state["fd"])
    _fresh(os.path.join(workdir, "raw"))  # see _fresh
    benchmark.extra_info["MiB_per_round"] = len(data) * BATCHES[size] / 2**20


@pytest.mark.benchmark(group="log_append_1mib")
def test_log_append_kfast_1mib(benchmark, workdir):
    _run_kfast(benchmark, workdir, "1mib")


@pytest.mark.benchmark(group="log_append_1mib")
def test_log_append_raw_1mib(benchmark, workdir):
    _run_raw(benchmark, workdir, "1mib")


@pytest.mark.benchmark(group="log_append_16kib")
def test_log_append_kfast_16kib(benchmark, workdir):
    _run_kfast(benchmark, workdir, "16kib")


@pytest.mark.benchmark(group="log_append_16kib")
def test_log_append_raw_16kib(benchmark, workdir):
    _run_raw(benchmark, workdir, "16kib")


@pytest.fixture(scope="module")
def big_index(workdir):
    path = os.path.join(workdir, "00000000000000000000.index")
    packed = b"".join(struct.pack(">ii", 1 + i * 3, i * 1024) for i in range(INDEX_ENTRIES))
    with open(path, "wb") as f:
        f.write(packed)
    index = OffsetIndex(path, 0, writable=False)  # a rolled segment's index, memory-mapped
    assert index.entries == INDEX_ENTRIES
    rng = random.Random(7)
    targets = [rng.randrange(0, 3 * INDEX_ENTRIES + 10) for _ in range(LOOKUPS)]
    yield index, targets
    index.close()


def _python_lookup(mm, entries, target):
    """Largest entry with offset <= target: plain bisect over the mmap."""
    unpack = struct.unpack_from
    if entries == 0 or unpack(">i", mm, 0)[0] > target:
        return 0, 0
    lo, hi = 0, entries - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if unpack(">i", mm, mid * 8)[0] <= target:
            lo = mid
        else:
            hi = mid - 1
    return unpack(">ii", mm, lo * 8)


@pytest.mark.benchmark(group="index_lookup")
def test_index_lookup_kfast(benchmark, big_index):
    index, targets = big_index

    def run():
        lookup = index.lookup
        for t in targets:
            lookup(t)

    benchmark(run)
    for t in targets[:200]:
        got = index.lookup(t)
        assert (got.offset, got.position) == tuple(
            _python_lookup(index._view, INDEX_ENTRIES, t)
        ) or t < 1


@pytest.mark.benchmark(group="index_lookup")
def test_index_lookup_python(benchmark, big_index):
    index, targets = big_index
    mm = index._view

    def run():
        for t in targets:
            _python_lookup(mm, INDEX_ENTRIES, t)

    benchmark(run)
