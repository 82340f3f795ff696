"""The leader's one-call append (BatchScan.append_to_segment) against the
general path it short-cuts: the same appends must leave byte-identical
.log, .index, .timeindex (and every other) files and return the same
LogAppendInfo or raise the same exception. ``Log._fast_append = False``
forces the general path.
"""

import errno
import os
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kfast._ext import log_append as status
from kfast.config import LogConfig
from kfast.protocol.errors import KafkaStorageException
from kfast.storage.log import Log, LogAppendInfo, now_ms

from .batches import make_batch

NOW = 1_700_000_000_000

# One append: (kind, records, value size, timestamp step in ms, clock step in ms).
#   plain      one batch without a producer id (the fast path)
#   multi      2-3 such batches in one payload
#   producer   an idempotent batch (producer state: the general path)
#   corrupt    a plain batch with a flipped value byte (CRC error)
#   old        a plain batch 3 days in the past (timestamp check)
APPEND = st.tuples(
    st.sampled_from(["plain", "plain", "plain", "multi", "producer", "corrupt", "old"]),
    st.integers(1, 5),
    st.one_of(st.integers(1, 300), st.integers(1, 300), st.integers(20_000, 60_000)),
    st.integers(-50, 400),
    st.integers(0, 400),
)
CONFIG = st.fixed_dictionaries(
    {
        "index.interval.bytes": st.sampled_from([0, 1, 100, 700, 4096]),
        "segment.bytes": st.sampled_from([1 << 20, 1 << 30]),  # at least 1 MiB (Kafka's minimum)
        "segment.index.bytes": st.sampled_from([24, 40, 10 * 1024 * 1024]),
        "segment.ms": st.sampled_from([500, 3000, 7 * 24 * 3600 * 1000]),
        "message.timestamp.type": st.sampled_from(["CreateTime", "LogAppendTime"]),
        "message.timestamp.before.max.ms": st.sampled_from([24 * 3600 * 1000, 2**63 - 1]),
    }
)


def _payloads(ops):
    """The bytes of each append, built once so both logs get identical input."""
    out, sequence, ts = [], 0, NOW - 10_000
    for kind, count, size, ts_step, _ in ops:
        ts += ts_step
        if kind == "multi":
            data = b"".join(make_batch(count, size, timestamp=ts + i) for i in range(1 + count % 3))
        elif kind == "producer":
            data = make_batch(
                count, size, timestamp=ts, producer_id=7, producer_epoch=0, base_sequence=sequence
            )
            sequence += count
        elif kind == "old":
            data = make_batch(count, size, timestamp=NOW - 3 * 24 * 3600 * 1000)
        else:
            data = bytearray(make_batch(count, size, timestamp=ts))
            if kind == "corrupt":
                data[-1] ^= 0x01
            data = bytes(data)
        out.append(data)
    return out


def _run(directory, config, ops, payloads, fast, counts=None):
    clock = [NOW]
    log = Log(directory, LogConfig(config), time_ms=lambda: clock[0])
    log._fast_append = fast
    log.leader_epoch_cache.assign(3, 0, flush=False)
    results = []
    for (_, _, _, _, clock_step), data in zip(ops, payloads):
        clock[0] += clock_step
        try:
            results.append(tuple(log.append_as_leader(bytearray(data), leader_epoch=3)))
        except Exception as exc:  # the same exception, message included, on both paths
            results.append((type(exc).__name__, str(exc)))
    state = (
        log.log_end_offset,
        log.num_segments,
        [
            (
                s.base_offset,
                s.size,
                s.offset_index.entries,
                s.time_index.entries,
                s.max_timestamp_so_far,
                s.offset_of_max_timestamp_so_far,
            )
            for s in log.segments
        ],
    )
    log.close()
    if counts is not None:
        counts.append(log._scan.appends_written)
    files = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as f:
            files[name] = f.read()
    return results, state, files


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(CONFIG, st.lists(APPEND, min_size=1, max_size=30))
def test_fast_path_writes_what_the_general_path_writes(tmp_path_factory, config, ops):
    base = tmp_path_factory.mktemp("parity")
    payloads = _payloads(ops)
    # Same partition name in two places: exception messages name it.
    fast = _run(str(base / "fast" / "t-0"), config, ops, payloads, True)
    general = _run(str(base / "general" / "t-0"), config, ops, payloads, False)
    assert fast[0] == general[0]
    assert fast[1] == general[1]
    assert fast[2].keys() == general[2].keys()
    for name in fast[2]:
        assert fast[2][name] == general[2][name], name


@pytest.mark.parametrize(
    "config",
    [
        {"index.interval.bytes": 100, "segment.index.bytes": 40},  # rolls on a full index
        {"index.interval.bytes": 0, "segment.ms": 1000},  # rolls on segment.ms
        {"segment.bytes": 1 << 20},  # rolls on segment.bytes
        {"message.timestamp.type": "LogAppendTime", "index.interval.bytes": 1, "segment.ms": 2000},
    ],
)
def test_parity_with_rolls(tmp_path, config):
    ops = [
        ("plain", 1 + i % 4, 300 if i % 5 else 60_000, 100 + (-1) ** i * 120, 150)
        for i in range(60)
    ]
    ops[7] = ("producer",) + ops[7][1:]
    ops[20] = ("multi",) + ops[20][1:]
    payloads = _payloads(ops)
    counts = []
    fast = _run(str(tmp_path / "fast" / "t-0"), config, ops, payloads, True, counts)
    general = _run(str(tmp_path / "general" / "t-0"), config, ops, payloads, False, counts)
    assert fast == general
    assert fast[1][1] > 1  # segments rolled
    assert counts[0] > 20 and counts[1] == 0  # most appends took the kernel's write


def _log(tmp_path, **overrides):
    log = Log(str(tmp_path / "t-0"), LogConfig(overrides), time_ms=lambda: NOW)
    log.leader_epoch_cache.assign(0, 0, flush=False)
    return log


def test_plain_append_is_written_by_the_kernel(tmp_path):
    log = _log(tmp_path, **{"index.interval.bytes": 0})
    # The general path loads the segment's state and grows the (buffered) indexes.
    log.append_as_leader(make_batch(2, timestamp=NOW), now=NOW)
    log.append_as_leader(make_batch(2, timestamp=NOW), now=NOW)
    segment = log.active_segment
    data = bytearray(make_batch(3, 50, timestamp=NOW + 5))
    before = segment.size
    got = log._scan.append_to_segment(data, segment, log.log_end_offset, 0, NOW, True, 0)
    assert got == status.APPENDED
    # LogAppendInfo's fields: offsets 4..6, max timestamp and its offset, no
    # LogAppendTime, log start offset, 3 records.
    assert log._scan.append_info == (4, 6, NOW + 5, 6, -1, 0, 3, len(data), False)
    assert segment.size == before + len(data)
    assert os.path.getsize(segment.log.path) == before + len(data)
    # index.interval.bytes = 0: every batch after the first gets an entry.
    assert segment.offset_index.last_entry() == (6, before)
    assert segment.time_index.last_entry() == (NOW + 5, 6)
    assert segment.max_timestamp_so_far == NOW + 5
    with open(segment.log.path, "rb") as f:
        f.seek(before)
        assert f.read() == bytes(data)  # patched in place: baseOffset 4
    assert int.from_bytes(data[:8], "big") == 4
    log.close()


@pytest.mark.parametrize("case", ["producer_id", "roll_by_size", "plain_file_type"])
def test_unusual_appends_are_left_to_the_general_path(tmp_path, case):
    log = _log(tmp_path, **{"segment.bytes": 1 << 20, "max.message.bytes": 2 << 20})
    log.append_as_leader(make_batch(1, timestamp=NOW), now=NOW)
    segment = log.active_segment
    size = segment.size
    if case == "producer_id":
        data = bytearray(
            make_batch(1, timestamp=NOW, producer_id=1, producer_epoch=0, base_sequence=0)
        )
    elif case == "roll_by_size":
        data = bytearray(make_batch(1, 1 << 20, timestamp=NOW))
    else:
        data = bytearray(make_batch(1, timestamp=NOW))
        log._scan.__init__(None)  # no plain file type: never written by the kernel
    got = log._scan.append_to_segment(data, segment, log.log_end_offset, 0, NOW, True, 0)
    assert got == status.OK  # scanned and patched, not written
    assert int.from_bytes(data[:8], "big") == 1
    assert segment.size == size == os.path.getsize(segment.log.path)
    log.close()


def test_scan_errors_come_back_as_statuses(tmp_path):
    log = _log(tmp_path, **{"max.message.bytes": 200})
    got = log._scan.append_to_segment(
        bytearray(make_batch(1, 300, timestamp=NOW)), log.active_segment, 0, 0, NOW, True, 0
    )
    assert got == status.TOO_LARGE
    got = log._scan.append_to_segment(
        bytearray(make_batch(1, timestamp=NOW + 7200_000)), log.active_segment, 0, 0, NOW, True, 0
    )
    assert got == status.BAD_TIMESTAMP  # message.timestamp.after.max.ms = 1 hour
    assert log.active_segment.size == 0
    log.close()


def test_a_failed_kernel_write_leaves_the_log_unchanged(tmp_path):
    log = _log(tmp_path)
    for _ in range(3):
        log.append_as_leader(make_batch(2, timestamp=NOW), now=NOW)
    segment = log.active_segment
    size, end = segment.size, log.log_end_offset
    writable = segment.log._fd
    read_only = os.open(segment.log.path, os.O_RDONLY)
    segment.log._fd = read_only  # pwrite fails with EBADF
    try:
        with pytest.raises(KafkaStorageException) as raised:
            log.append_as_leader(make_batch(2, timestamp=NOW), now=NOW)
        assert isinstance(raised.value.__cause__, OSError)
        assert raised.value.__cause__.errno == errno.EBADF
        assert str(raised.value.__cause__) == str(OSError(errno.EBADF, os.strerror(errno.EBADF)))
    finally:
        segment.log._fd = writable
        os.close(read_only)
    assert segment.size == size == os.path.getsize(segment.log.path)
    assert log.log_end_offset == end and not log.offline
    assert log.append_as_leader(make_batch(1, timestamp=NOW), now=NOW).first_offset == end
    log.close()


def test_the_fast_path_returns_a_log_append_info_and_keeps_the_log_state(tmp_path):
    log = _log(tmp_path)
    log.append_as_leader(make_batch(2, timestamp=NOW), now=NOW)  # loads the segment state
    written = log._scan.appends_written
    info = log.append_as_leader(bytearray(make_batch(3, timestamp=NOW + 1)), leader_epoch=0)
    assert log._scan.appends_written == written + 1
    assert type(info) is LogAppendInfo
    assert info == LogAppendInfo(2, 4, NOW + 1, 4, -1, 0, 3, info.valid_bytes, False)
    assert log.log_end_offset == log.producer_state.map_end_offset == 5
    assert log._unflushed_messages == 5
    log.close()


def test_a_new_leader_epoch_is_recorded_by_the_fast_path(tmp_path):
    log = _log(tmp_path)
    log.append_as_leader(make_batch(2, timestamp=NOW), now=NOW)
    written = log._scan.appends_written
    log.append_as_leader(bytearray(make_batch(1, timestamp=NOW)), leader_epoch=4)
    log.append_as_leader(bytearray(make_batch(1, timestamp=NOW)), leader_epoch=4)
    assert log._scan.appends_written == written + 2
    assert [tuple(e) for e in log.leader_epoch_cache.entries] == [(0, 0), (4, 2)]
    log.close()


def test_read_only_payloads_are_copied_once_then_appended_by_the_kernel(tmp_path):
    log = _log(tmp_path)
    log.append_as_leader(make_batch(2, timestamp=NOW), now=NOW)
    written = log._scan.appends_written
    payload = make_batch(2, timestamp=NOW)
    assert isinstance(payload, bytes)
    assert log.append_as_leader(payload).first_offset == 2
    assert log.append_as_leader(memoryview(payload)).first_offset == 4
    assert log._scan.appends_written == written + 2
    assert int.from_bytes(payload[:8], "big") == 0  # the caller's bytes are untouched
    log.close()


def test_an_append_waits_for_a_background_job_holding_the_log(tmp_path):
    log = _log(tmp_path)
    log.append_as_leader(make_batch(2, timestamp=NOW), now=NOW)
    held, release = threading.Event(), threading.Event()

    def job():
        with log._lock:
            held.set()
            release.wait(10)

    worker = threading.Thread(target=job)
    worker.start()
    assert held.wait(10)
    done = []
    appender = threading.Thread(
        target=lambda: done.append(log.append_as_leader(bytearray(make_batch(1, timestamp=NOW))))
    )
    appender.start()
    appender.join(0.2)
    assert not done  # blocked on the lock, not appended around it
    release.set()
    appender.join(10)
    worker.join(10)
    assert done and done[0].first_offset == 2 and log.log_end_offset == 3
    log.close()


def test_the_default_clock_is_wall_clock_milliseconds():
    before = time.time_ns() // 1_000_000
    got = now_ms()
    after = time.time_ns() // 1_000_000
    assert before <= got <= after
