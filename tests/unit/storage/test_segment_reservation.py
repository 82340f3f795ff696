"""The active segment reserves disk blocks ahead of its writes
(kfast._ext.log_append.FileState.reserve; the broker's
kfast.log.segment.fallocate.step.bytes): the file's length stays the bytes
written, the reservation grows with the segment up to the step, is given
back at roll, close and after a kill -9, and never fails a write that fits."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kfast.config import SERVER_CONFIGS, KafkaConfig, LogConfig
from kfast.storage.file_records import FileRecords
from kfast.storage.log import Log
from kfast.storage.manager import SEGMENT_FALLOCATE_STEP, LogManager
from tests.e2e.disk_support import mounted_tmpfs
from tests.unit.hypothesis_budget import examples

from .batches import make_batch, record_values

STEP = 1 << 20
RESERVE_MIN = 64 * 1024  # the first reservation of a new segment (log_append.pyx)
# Blocks a file holds beyond its bytes once nothing is reserved: its last
# partial block, and the extent-tree blocks ext4 adds (st_blocks counts them)
# when writes into reserved space split the file into many extents. Well
# under the least reservation (RESERVE_MIN), so a reservation left behind
# still fails the checks.
SLACK = 3 * 4096


def on_disk(path: str) -> int:
    """Bytes of blocks the file holds, reserved ones included."""
    return os.stat(path).st_blocks * 512


def test_the_broker_reserves_by_default():
    assert SERVER_CONFIGS[SEGMENT_FALLOCATE_STEP].default == 16 << 20
    assert LogManager(KafkaConfig({"log.dirs": "/nonexistent"})).segment_fallocate_step == 16 << 20


def test_a_write_reserves_ahead_and_the_length_stays_the_bytes_written(tmp_path):
    records = FileRecords(str(tmp_path / "0.log"))
    records._allocate_step = STEP
    records.append(b"x" * 1000)
    assert os.path.getsize(records.path) == records.size == 1000
    assert records._allocated == 1000 + RESERVE_MIN
    assert on_disk(records.path) >= 1000 + RESERVE_MIN
    assert records.read(0, 5000) == b"x" * 1000  # nothing past the end to read


def test_step_zero_reserves_nothing(tmp_path):
    records = FileRecords(str(tmp_path / "0.log"))
    for _ in range(50):
        records.append(b"y" * 10_000)
    assert records._allocated == 0
    assert on_disk(records.path) < 500_000 + SLACK


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.integers(1, 300_000), min_size=1, max_size=30), st.integers(0, 3))
def test_the_reservation_grows_with_the_segment_up_to_the_step(tmp_path_factory, sizes, scale):
    step = STEP >> scale
    records = FileRecords(str(tmp_path_factory.mktemp("r") / "0.log"))
    records._allocate_step = step
    calls = 0
    for size in sizes:
        before = records._allocated
        written = records.size
        records.append(b"z" * size)
        if records._allocated != before:
            calls += 1
            # Reserved: up to the write's end plus as much as the file held, clamped.
            ahead = min(max(written, RESERVE_MIN), step)
            assert records._allocated == written + size + ahead
        assert records.size <= records._allocated <= records.size + max(records.size, step)
    assert os.path.getsize(records.path) == records.size == sum(sizes)
    records.trim()
    assert on_disk(records.path) < records.size + SLACK
    records.close()


def test_roll_gives_the_old_segment_back_and_the_new_one_reserves(tmp_path):
    log = Log(
        str(tmp_path / "t-0"),
        LogConfig({"segment.bytes": 1 << 20}),
        segment_fallocate_step=STEP,
    )
    batch = make_batch(10, value_size=10_000)
    for _ in range(30):
        log.append_as_leader(batch, leader_epoch=0)
    segments = log.segments
    assert len(segments) > 1
    for segment in segments[:-1]:
        assert on_disk(segment.log.path) < segment.size + SLACK
    active = segments[-1].log
    assert active._allocated > active.size
    assert on_disk(active.path) >= active._allocated
    log.close()
    assert on_disk(active.path) < active.size + SLACK


KILLED_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from kfast.config import LogConfig
    from kfast.storage.log import Log
    from tests.unit.storage.batches import make_batch
    log = Log(sys.argv[1], LogConfig({}), segment_fallocate_step=1 << 20)
    for i in range(20):
        log.append_as_leader(make_batch(5, value_size=2000), leader_epoch=0)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_after_kill_9_every_record_reads_back_and_the_roll_gives_the_blocks_back(tmp_path):
    path = tmp_path / "t-0"
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_WRITER, str(path)],
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))),
        timeout=60,
    )
    assert killed.returncode == -signal.SIGKILL
    segment_file = path / ("0" * 20 + ".log")
    length = os.path.getsize(segment_file)
    assert on_disk(str(segment_file)) > length + RESERVE_MIN  # reserved, never given back
    log = Log(str(path), LogConfig({}), had_clean_shutdown=False, segment_fallocate_step=STEP)
    assert log.log_end_offset == 100
    with open(segment_file, "rb") as f:
        assert len(record_values(f.read())) == 100
    log.roll()
    assert on_disk(str(segment_file)) < length + SLACK
    log.close()


def test_a_reservation_that_does_not_fit_never_fails_a_write_that_does(tmp_path):
    with mounted_tmpfs(tmp_path / "small", "600k") as disk:
        records = FileRecords(str(disk / "0.log"))
        records._allocate_step = 16 << 20  # more than the whole disk
        chunk = b"w" * 25_000
        # 500 KB fits; the reservation asked at 400 KB (as much again) does not.
        for _ in range(20):
            records.append(chunk)
        assert records._allocate_step == 0  # reserving turned off, writing went on
        assert os.path.getsize(records.path) == 500_000
        with pytest.raises(OSError) as full:
            for _ in range(40):
                records.append(chunk)
        assert full.value.errno == errno.ENOSPC
        assert os.path.getsize(records.path) == records.size  # cut back to the last whole write
        records.close()
