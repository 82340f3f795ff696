"""Recovery after crashes and disk faults."""

import errno
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kfast.config import LogConfig
from kfast.protocol.errors import KafkaStorageException
from kfast.storage.file_records import FileRecords
from kfast.storage.log import Log

from .batches import batch_offsets, make_batch, record_values

MiB = 1024 * 1024
CONFIG = LogConfig({"segment.bytes": MiB, "index.interval.bytes": 500})


def build_log(path, batches=400, per_batch=3):
    log = Log(path, CONFIG)
    for i in range(batches):
        log.append_as_leader(make_batch(per_batch, 100 + (i % 7) * 30))
    log.flush()
    return log


def all_records(log):
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        got = record_values(log.read(offset, 1 << 20).records.read())
        out.extend(got)
        offset = got[-1][0] + 1
    return out


def last_segment_batches(log):
    seg = log.active_segment
    return [(pos, h.size_in_bytes) for pos, h, _ in seg.log.batches_from(0)]


def crash(log):
    """Leave the files as a kill -9 would: nothing trimmed, no snapshot, no marker."""
    log.close_handlers()


@pytest.mark.parametrize(
    "damage", ["truncated_tail", "torn_mid_batch", "bit_flip", "garbage_length"]
)
def test_recovery_truncates_to_last_valid_batch(tmp_path, damage):
    path = str(tmp_path / "t-0")
    log = build_log(path)
    expected = all_records(log)
    seg_path = log.active_segment.log.path
    batches = last_segment_batches(log)
    last_pos, last_size = batches[-1]
    last_count = 3
    crash(log)
    with open(seg_path, "r+b") as f:
        if damage == "truncated_tail":
            f.truncate(last_pos + 7)  # even the batch header is incomplete
        elif damage == "torn_mid_batch":
            f.truncate(last_pos + last_size // 2)
        elif damage == "bit_flip":
            f.seek(last_pos + last_size - 5)
            byte = f.read(1)
            f.seek(last_pos + last_size - 5)
            f.write(bytes([byte[0] ^ 0x10]))
        else:
            f.seek(last_pos + 8)
            f.write(b"\x00\x00\x00\x05")  # a length no batch can have
    recovered = Log(path, CONFIG, recovery_point=0, had_clean_shutdown=False)
    assert os.path.getsize(seg_path) == last_pos
    assert recovered.log_end_offset == expected[-1][0] + 1 - last_count
    assert all_records(recovered) == expected[:-last_count]
    # The log keeps working after recovery.
    info = recovered.append_as_leader(make_batch(2))
    assert info.first_offset == recovered.log_end_offset - 2
    recovered.close()


def test_recovery_deletes_segments_after_corruption(tmp_path):
    path = str(tmp_path / "t-0")
    log = Log(path, LogConfig({"segment.bytes": MiB}))
    while log.num_segments < 3:
        log.append_as_leader(make_batch(5, 2000))
    first_segment_end = log.segments[1].base_offset
    first_log = log.segments[0].log.path
    later = [s.log.path for s in log.segments[1:]]
    crash(log)
    with open(first_log, "r+b") as f:
        f.seek(os.path.getsize(first_log) - 3)
        f.write(b"\xff\xff\xff")
    recovered = Log(path, CONFIG, recovery_point=0, had_clean_shutdown=False)
    assert recovered.num_segments == 1
    assert recovered.log_end_offset == first_segment_end - 5
    assert not any(os.path.exists(p) for p in later)
    recovered.close()


@pytest.mark.parametrize("fault", ["missing", "zero_filled", "torn"])
def test_index_rebuilt(tmp_path, fault):
    path = str(tmp_path / "t-0")
    log = build_log(path, batches=300)
    log.roll()
    segment = log.segments[0]
    entries_before = [segment.offset_index.entry(i) for i in range(segment.offset_index.entries)]
    time_before = [segment.time_index.entry(i) for i in range(segment.time_index.entries)]
    assert len(entries_before) > 5
    probes = list(range(0, log.log_end_offset, 13))
    reads_before = [batch_offsets(log.read(p, 1).records.read()) for p in probes]
    ts_before = log.fetch_offset_by_timestamp(0)
    index_path, time_path = segment.offset_index.path, segment.time_index.path
    log.close()
    if fault == "missing":
        os.unlink(index_path)
        os.unlink(time_path)
    elif fault == "zero_filled":
        for p in (index_path, time_path):
            size = os.path.getsize(p)
            with open(p, "wb") as f:
                f.write(bytes(size))
    else:
        with open(index_path, "ab") as f:
            f.write(b"\x01\x02\x03")
    reopened = Log(path, CONFIG, recovery_point=reopened_point(log), had_clean_shutdown=True)
    rebuilt = reopened.segments[0]
    assert [
        rebuilt.offset_index.entry(i) for i in range(rebuilt.offset_index.entries)
    ] == entries_before
    assert [rebuilt.time_index.entry(i) for i in range(rebuilt.time_index.entries)] == time_before
    assert [batch_offsets(reopened.read(p, 1).records.read()) for p in probes] == reads_before
    assert reopened.fetch_offset_by_timestamp(0) == ts_before
    reopened.close()


def reopened_point(log):
    return log.log_end_offset


def test_clean_open_does_not_scan(tmp_path, monkeypatch):
    path = str(tmp_path / "t-0")
    log = build_log(path, batches=200)
    end = log.log_end_offset
    log.close()
    scanned = []
    original = FileRecords.batches_from

    def counting(self, start=0, end=None, *, full=False):
        for item in original(self, start, end, full=full):
            scanned.append(item[0])
            yield item

    monkeypatch.setattr(FileRecords, "batches_from", counting)
    reopened = Log(path, CONFIG, recovery_point=end, had_clean_shutdown=True)
    assert reopened.log_end_offset == end
    # Only the tail after the last index entry of the active segment is read.
    assert len(scanned) < 10
    reopened.close()


class FailingFileRecords(FileRecords):
    """Writes fail with ``errno_code`` after ``budget`` bytes (a full or broken disk)."""

    budget = 0
    errno_code = errno.ENOSPC

    def _pwrite(self, data, position):
        if self.budget <= 0:
            raise OSError(self.errno_code, os.strerror(self.errno_code))
        n = min(len(data), self.budget)
        self.budget -= n
        return super()._pwrite(memoryview(data)[:n], position)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
def test_disk_error_on_append(tmp_path, code):
    sick = Log(str(tmp_path / "sick-0"), CONFIG)
    healthy = Log(str(tmp_path / "healthy-0"), CONFIG)
    for _ in range(10):
        sick.append_as_leader(make_batch(2))
    before = all_records(sick)
    size_before = sick.active_segment.size
    segment = sick.active_segment
    segment.log.close()
    segment.log = FailingFileRecords(segment.log.path)
    segment.log.budget = 50  # a partial write, then the error
    segment.log.errno_code = code
    with pytest.raises(KafkaStorageException):
        sick.append_as_leader(make_batch(3, 200))
    assert os.path.getsize(segment.log.path) == size_before
    assert sick.log_end_offset == 20
    assert all_records(sick) == before
    assert healthy.append_as_leader(make_batch(1)).first_offset == 0
    # Once the disk has room again the partition continues where it was.
    segment.log.budget = 1 << 30
    assert sick.append_as_leader(make_batch(1)).first_offset == 20
    sick.close()
    healthy.close()


@settings(max_examples=30)
@given(
    st.lists(st.integers(1, 4), min_size=1, max_size=25),
    st.floats(0, 1),
    st.sampled_from(["cut", "flip"]),
)
def test_recovery_keeps_exactly_the_intact_prefix(tmp_path_factory, counts, where, damage):
    """Cut the active segment anywhere (or flip any byte): recovery keeps
    every batch before the damaged one and nothing after it."""
    path = str(tmp_path_factory.mktemp("rec") / "r-0")
    log = Log(path, LogConfig({"segment.bytes": MiB, "index.interval.bytes": 64}))
    bounds = []  # (start position, end position, last offset + 1) per batch
    for count in counts:
        start = log.active_segment.size
        info = log.append_as_leader(make_batch(count, 40))
        bounds.append((start, log.active_segment.size, info.last_offset + 1))
    seg_path = log.active_segment.log.path
    size = log.active_segment.size
    log.close_handlers()
    point = min(int(where * size), size - 1)
    if damage == "flip":
        # baseOffset and partitionLeaderEpoch are outside the CRC (as in Kafka):
        # flip the magic byte of that batch instead.
        start = max(b[0] for b in bounds if b[0] <= point)
        if point - start < 8 or 12 <= point - start < 16:
            point = start + 16
    with open(seg_path, "r+b") as f:
        if damage == "cut":
            f.truncate(point)
        else:
            f.seek(point)
            byte = f.read(1)
            f.seek(point)
            f.write(bytes([byte[0] ^ 0x01]))
    # The first damaged batch is the one holding the byte at `point`.
    intact = [b for b in bounds if b[1] <= point]
    expected_end = intact[-1][2] if intact else 0
    expected_size = intact[-1][1] if intact else 0
    recovered = Log(
        path, LogConfig({"segment.bytes": MiB}), recovery_point=0, had_clean_shutdown=False
    )
    assert recovered.log_end_offset == expected_end
    assert os.path.getsize(seg_path) == expected_size
    assert [o for o, _ in all_records(recovered)] == list(range(expected_end))
    recovered.close()


def test_recovery_stops_at_offsets_going_backwards(tmp_path):
    import struct

    path = str(tmp_path / "t-0")
    log = Log(path, CONFIG)
    for _ in range(5):
        log.append_as_leader(make_batch(2))
    seg_path = log.active_segment.log.path
    positions = [pos for pos, _ in last_segment_batches(log)]
    log.close_handlers()
    with open(seg_path, "r+b") as f:
        f.seek(positions[3])
        f.write(struct.pack(">q", 1))  # baseOffset is not covered by the CRC
    recovered = Log(path, CONFIG, recovery_point=0, had_clean_shutdown=False)
    assert recovered.log_end_offset == 6
    assert os.path.getsize(seg_path) == positions[3]
    recovered.close()


def test_a_swap_file_not_named_for_an_offset_is_left_alone(tmp_path):
    # Only the cleaner writes .log.swap files, named for a base offset; a
    # stray one must not stop the partition from loading (it used to raise
    # TypeError comparing None with an offset).
    path = str(tmp_path / "t-0")
    log = build_log(path, batches=20)
    end = log.log_end_offset
    log.close()
    stray = os.path.join(path, "notes.log.swap")
    with open(stray, "wb") as f:
        f.write(b"not a segment")
    reopened = Log(path, CONFIG, had_clean_shutdown=False)
    assert reopened.log_end_offset == end
    assert os.path.exists(stray)
    reopened.close()
