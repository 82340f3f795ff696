"""Log: append, read, roll, truncate, delete_records_before, indexes on disk."""

import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kfast.config import LogConfig
from kfast.protocol.errors import (
    CorruptRecordException,
    InvalidRecordException,
    InvalidTimestampException,
    OffsetOutOfRangeException,
    RecordTooLargeException,
)
from kfast.storage.index import OffsetIndex, TimeIndex
from kfast.storage.log import Log

from .batches import batch_offsets, make_batch, make_control_batch, now_ms, record_values

MiB = 1024 * 1024


def open_log(tmp_path, name="topic-0", clean=True, **overrides):
    config = LogConfig({"segment.bytes": MiB, **overrides})
    return Log(str(tmp_path / name), config, had_clean_shutdown=clean)


def read_all(log, start=0):
    values = []
    offset = start
    while offset < log.log_end_offset:
        info = log.read(offset, 1 << 20)
        assert info.records is not None
        got = record_values(info.records.read())
        values.extend(got)
        offset = got[-1][0] + 1
    return values


def test_append_assigns_offsets_and_patches_in_place(tmp_path):
    log = open_log(tmp_path)
    first = log.append_as_leader(make_batch(3), leader_epoch=7)
    assert (first.first_offset, first.last_offset, first.records_count) == (0, 2, 3)
    buffer = bytearray(make_batch(2))
    second = log.append_as_leader(buffer, leader_epoch=7)
    assert (second.first_offset, second.last_offset) == (3, 4)
    # The caller's writable buffer was patched in place (no copy).
    assert struct.unpack_from(">q", buffer, 0)[0] == 3
    assert struct.unpack_from(">i", buffer, 12)[0] == 7
    assert log.log_end_offset == 5
    data = log.read(0, 1 << 20).records.read()
    assert batch_offsets(data) == [(0, 2), (3, 4)]
    assert [o for o, _ in record_values(data)] == [0, 1, 2, 3, 4]
    assert log.leader_epoch_cache.entries == [(7, 0)]
    log.close()


def test_read_rules(tmp_path):
    log = open_log(tmp_path)
    big = make_batch(1, 5000)
    for _ in range(3):
        log.append_as_leader(make_batch(1, 100))
    log.append_as_leader(big)
    # The first batch is returned whole even when larger than max_bytes.
    info = log.read(3, 10)
    assert info.records.length == len(big) and info.first_entry_incomplete is False
    # Without min_one_message Kafka returns a partial batch and says so.
    info = log.read(3, 10, min_one_message=False)
    assert info.records.length == 10 and info.first_entry_incomplete is True
    # A read in the middle of a batch starts at that batch.
    log.append_as_leader(make_batch(5))
    info = log.read(6, 1 << 20)
    assert batch_offsets(info.records.read())[0] == (4, 8)
    # The upper bound (high watermark) stops before the batch holding it.
    info = log.read(0, 1 << 20, upper_bound=3)
    assert batch_offsets(info.records.read()) == [(0, 0), (1, 1), (2, 2)]
    assert log.read(3, 100, upper_bound=3).records is None
    assert log.read(log.log_end_offset, 100).records is None
    with pytest.raises(OffsetOutOfRangeException):
        log.read(log.log_end_offset + 1, 100)
    log.close()


def test_roll_on_segment_bytes_and_index_rule(tmp_path):
    log = open_log(tmp_path, **{"index.interval.bytes": 4096})
    sizes = []
    for _i in range(2000):
        data = make_batch(2, 500)
        sizes.append(len(data))
        log.append_as_leader(data)
    assert log.num_segments >= 2
    bases = [s.base_offset for s in log.segments]
    assert bases == sorted(bases) and bases[0] == 0
    for segment in log.segments[:-1]:
        assert segment.size <= MiB
        # Rolled segments' indexes are trimmed to their entries.
        assert os.path.getsize(segment.offset_index.path) == segment.offset_index.entries * 8
    # Kafka's rule: an entry once more than 4096 bytes have accumulated since
    # the last one; the first batch of a segment is never indexed.
    first = log.segments[0]
    batch_size = sizes[0]
    per_entry = 4096 // batch_size + 1 + 1
    expected_first = (per_entry - 1) * 2 + 1  # last offset of the batch indexed
    assert first.offset_index.entry(0).offset == expected_first
    assert first.offset_index.entry(0).position == (per_entry - 1) * batch_size
    # Every record is still readable across segments.
    assert len(read_all(log)) == 4000
    log.close()


def test_roll_on_segment_ms_uses_record_timestamps(tmp_path):
    log = open_log(tmp_path, **{"segment.ms": 1000})
    t0 = now_ms()
    log.append_as_leader(make_batch(1, timestamp=t0))
    log.append_as_leader(make_batch(1, timestamp=t0 + 500))
    assert log.num_segments == 1
    log.append_as_leader(make_batch(1, timestamp=t0 + 1500))
    assert log.num_segments == 2 and log.active_segment.base_offset == 2
    log.close()


def test_roll_adds_final_time_index_entry(tmp_path):
    log = open_log(tmp_path)
    t0 = now_ms()
    log.append_as_leader(make_batch(1, timestamp=t0))
    log.append_as_leader(make_batch(1, timestamp=t0 + 10))
    segment = log.active_segment
    log.roll()
    assert segment.time_index.entries == 1
    assert segment.time_index.last_entry() == (t0 + 10, 1)
    log.close()


def test_validation_errors(tmp_path):
    log = open_log(tmp_path, **{"max.message.bytes": 1000})
    with pytest.raises(RecordTooLargeException):
        log.append_as_leader(make_batch(1, 2000))
    corrupt = bytearray(make_batch(2))
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptRecordException):
        log.append_as_leader(corrupt)
    with pytest.raises(CorruptRecordException):
        log.append_as_leader(make_batch(2)[:-3])
    with pytest.raises(InvalidRecordException):
        log.append_as_leader(make_control_batch(1, 0, commit=True))
    with pytest.raises(InvalidTimestampException):
        log.append_as_leader(make_batch(1, timestamp=now_ms() + 2 * 3600 * 1000))
    assert log.log_end_offset == 0 and log.size == 0
    log.close()


def test_log_append_time(tmp_path):
    log = open_log(tmp_path, **{"message.timestamp.type": "LogAppendTime"})
    info = log.append_as_leader(make_batch(2, timestamp=1), now=123456)
    assert info.log_append_time == 123456
    data = log.read(0, 1 << 20).records.read()
    attributes = struct.unpack_from(">h", data, 21)[0]
    assert attributes & 0x08
    assert struct.unpack_from(">q", data, 35)[0] == 123456
    from crc32c import crc32c

    assert struct.unpack_from(">I", data, 17)[0] == crc32c(data[21:])
    log.close()


def test_truncate_to(tmp_path):
    log = open_log(tmp_path, **{"index.interval.bytes": 100})
    for _ in range(3000):
        log.append_as_leader(make_batch(2, 200))
    segments_before = log.num_segments
    assert segments_before >= 2
    target = log.segments[1].base_offset + 11  # mid-batch in the second segment
    assert log.truncate_to(target)
    # The batch holding the target goes whole.
    assert log.log_end_offset == target - 1
    assert log.num_segments == 2
    assert [o for o, _ in read_all(log)] == list(range(target - 1))
    info = log.append_as_leader(make_batch(1))
    assert info.first_offset == target - 1
    assert not log.truncate_to(log.log_end_offset + 5)
    log.truncate_to(0)
    assert log.log_end_offset == 0 and log.num_segments == 1
    log.close()


def test_truncate_below_log_start_brings_the_start_down(tmp_path):
    """A follower whose DeleteRecords put its log start beyond the leader's
    log end truncates to that end: the start comes down to it, or the end
    would stay at the old start and every fetch would be out of range."""
    log = open_log(tmp_path)
    for _ in range(4):
        log.append_as_leader(make_batch(2))
    log.update_high_watermark(log.log_end_offset)
    log.delete_records_before(8)
    assert (log.log_start_offset, log.log_end_offset, log.segments[0].base_offset) == (8, 8, 0)
    assert log.truncate_to(5)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (5, 5, 5)
    with pytest.raises(OffsetOutOfRangeException):
        log.read(4, 100)  # what lies below the new start stays unreadable
    batch = bytearray(make_batch(3))
    struct.pack_into(">q", batch, 0, 5)  # the leader's base offset
    info = log.append_as_follower(batch)
    assert (info.first_offset, log.log_end_offset) == (5, 8)
    assert [o for o, _ in read_all(log, 5)] == [5, 6, 7]
    log.close()


def test_delete_records_before(tmp_path):
    log = open_log(tmp_path, **{"file.delete.delay.ms": 0})
    for _ in range(3000):
        log.append_as_leader(make_batch(2, 200))
    log.update_high_watermark(log.log_end_offset)
    second_base = log.segments[1].base_offset
    old_path = log.segments[0].log.path
    assert log.delete_records_before(second_base + 3) == second_base + 3
    assert log.segments[0].base_offset == second_base
    assert not os.path.exists(old_path)
    with pytest.raises(OffsetOutOfRangeException):
        log.read(second_base, 100)
    assert record_values(log.read(second_base + 3, 1000).records.read())[0][0] <= second_base + 3
    with pytest.raises(OffsetOutOfRangeException):
        log.delete_records_before(log.log_end_offset + 1)
    log.close()


def test_kafka_layout_files(tmp_path):
    """The files kfast writes are what Kafka writes, byte for byte in layout."""
    log = open_log(tmp_path, **{"index.interval.bytes": 1, "segment.index.bytes": 1200})
    t0 = now_ms()
    batches = [make_batch(1, 50, timestamp=t0 + i) for i in range(5)]
    for b in batches:
        log.append_as_leader(b)
    log.close()
    d = tmp_path / "topic-0"
    names = sorted(os.listdir(d))
    assert "00000000000000000000.log" in names
    assert "00000000000000000000.index" in names
    assert "00000000000000000000.timeindex" in names
    assert "00000000000000000005.snapshot" in names  # producer state at close
    raw_index = (d / "00000000000000000000.index").read_bytes()
    size = len(batches[0])
    # First batch never indexed; then every batch (interval 1 byte).
    assert raw_index == b"".join(struct.pack(">ii", i, i * size) for i in range(1, 5))
    raw_time = (d / "00000000000000000000.timeindex").read_bytes()
    assert raw_time == b"".join(struct.pack(">qi", t0 + i, i) for i in range(1, 5))
    assert (d / "00000000000000000000.log").read_bytes()[:8] == struct.pack(">q", 0)


def test_reads_a_kafka_layout_directory(tmp_path):
    """A directory laid out as Kafka would (two segments, Kafka's index rule)."""
    d = tmp_path / "orders-3"
    d.mkdir()
    batches = []
    offset = 0
    for seg_base in (0, 50):
        log_bytes = bytearray()
        index = OffsetIndex(str(d / f"{seg_base:020d}.index"), seg_base, 800)
        tindex = TimeIndex(str(d / f"{seg_base:020d}.timeindex"), seg_base, 1200)
        since = 0
        for _i in range(10):
            raw = bytearray(make_batch(5, 100, timestamp=1000 + offset))
            struct.pack_into(">q", raw, 0, offset)
            if since > 300:
                index.append(offset + 4, len(log_bytes))
                tindex.maybe_append(1000 + offset, offset + 4)
                since = 0
            since += len(raw)
            log_bytes += raw
            batches.append((offset, offset + 4))
            offset += 5
        (d / f"{seg_base:020d}.log").write_bytes(log_bytes)
        index.close()
        tindex.close()
        offset = 50
    log = Log(str(d), LogConfig({"index.interval.bytes": 300}), had_clean_shutdown=True)
    assert (log.topic, log.partition) == ("orders", 3)
    assert log.log_end_offset == 100 and log.log_start_offset == 0
    assert [s.base_offset for s in log.segments] == [0, 50]
    assert batch_offsets(log.read(27, 1).records.read()) == [(25, 29)]
    assert batch_offsets(log.read(73, 1).records.read()) == [(70, 74)]
    assert log.fetch_offset_by_timestamp(1000 + 33) == (1000 + 35, 35)
    log.close()


@settings(max_examples=40)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("append"), st.integers(1, 5), st.integers(1, 400)),
            st.tuples(st.just("truncate"), st.integers(0, 200)),
            st.tuples(st.just("delete_records"), st.integers(0, 200)),
            st.tuples(st.just("roll")),
            st.tuples(st.just("reopen"), st.sampled_from(["clean", "flushed", "crash"])),
        ),
        max_size=40,
    )
)
def test_append_read_truncate_against_model(tmp_path_factory, ops):
    """Random appends, truncations, DeleteRecords, rolls, clean reopens and
    crashes against a model: a list of batches (first offset, values) and a
    log start offset."""
    base = tmp_path_factory.mktemp("model")
    config = LogConfig(
        {"segment.bytes": MiB, "index.interval.bytes": 200, "file.delete.delay.ms": 0}
    )
    path = str(base / "m-0")
    log = Log(path, config)
    batches: list[tuple[int, list[bytes]]] = []
    start = 0

    def model_end():
        return max(batches[-1][0] + len(batches[-1][1]), start) if batches else start

    for op in ops:
        if op[0] == "append":
            values = [os.urandom(op[2] // 4 + 1) for _ in range(op[1])]
            info = log.append_as_leader(make_batch(op[1], values=values))
            assert info.first_offset == model_end()
            batches.append((info.first_offset, values))
        elif op[0] == "truncate":
            target = op[1]
            changed = log.truncate_to(target)
            assert changed == (target < model_end())
            # The whole batch holding the target goes; a start above the
            # target comes down to it (Kafka's truncateTo).
            batches = [b for b in batches if b[0] + len(b[1]) - 1 < target]
            if changed:
                start = min(start, target)
        elif op[0] == "delete_records":
            log.update_high_watermark(log.log_end_offset)
            target = min(max(op[1], start), model_end())
            log.delete_records_before(target)
            start = target
        elif op[0] == "roll":
            if log.active_segment.size:
                log.roll()
        else:
            if op[1] == "crash":
                log.close_handlers()  # as kill -9 leaves it (the page cache keeps the data)
            else:
                if op[1] == "flushed":
                    log.flush()
                log.close()
            log = Log(
                path,
                config,
                recovery_point=log.recovery_point,
                log_start_offset=start,
                had_clean_shutdown=op[1] == "clean",
            )
        assert (log.log_start_offset, log.log_end_offset) == (start, model_end())
    expected = [
        (first + i, v)
        for first, values in batches
        for i, v in enumerate(values)
        if first + i >= start
    ]
    got = [r for r in read_all(log, start) if r[0] >= start]
    assert got == expected
    for probe in range(start, model_end(), 7):
        first = record_values(log.read(probe, 1).records.read())
        assert first[0][0] <= probe <= first[-1][0]
    if start > 0:
        with pytest.raises(OffsetOutOfRangeException):
            log.read(start - 1, 1)
    log.close()


def test_roll_when_index_full_and_many_batches_in_one_append(tmp_path):
    # 3 offset-index entries (24 bytes); every batch after the first is indexed.
    log = open_log(tmp_path, **{"index.interval.bytes": 1, "segment.index.bytes": 36})
    t0 = now_ms()  # one timestamp: the time index keeps a single entry
    request = b"".join(make_batch(1, timestamp=t0) for _ in range(10))  # one append, ten batches
    info = log.append_as_leader(request)
    assert (info.first_offset, info.last_offset) == (0, 9)
    assert log.num_segments == 1 and log.active_segment.offset_index.is_full()
    log.append_as_leader(make_batch(1, timestamp=t0))
    assert log.num_segments == 2 and log.active_segment.base_offset == 10
    assert batch_offsets(log.read(7, 1).records.read()) == [(7, 7)]
    log.close()


def test_roll_on_relative_offset_overflow(tmp_path):
    log = open_log(tmp_path)
    first = bytearray(make_batch(2))
    log.append_as_follower(first)
    far = bytearray(make_batch(2))
    struct.pack_into(">q", far, 0, 2**31 + 5)  # not covered by the CRC
    log.append_as_follower(far)
    assert [s.base_offset for s in log.segments] == [0, 2**31 + 5]
    assert log.log_end_offset == 2**31 + 7
    assert batch_offsets(log.read(2**31 + 6, 1).records.read()) == [(2**31 + 5, 2**31 + 6)]
    log.close()


def test_preallocate(tmp_path):
    log = open_log(tmp_path, preallocate="true")
    path = log.active_segment.log.path
    assert os.path.getsize(path) == MiB  # preallocated to segment.bytes
    for _ in range(5):
        log.append_as_leader(make_batch(2))
    size = log.active_segment.size
    assert size < MiB and os.path.getsize(path) == MiB
    log.roll()
    assert os.path.getsize(path) == size  # trimmed at roll
    new_path = log.active_segment.log.path
    log.append_as_leader(make_batch(2))
    end = log.log_end_offset
    log.flush()
    log.close_handlers()  # crash: the new segment is still preallocated
    assert os.path.getsize(new_path) == MiB
    recovered = Log(
        str(tmp_path / "topic-0"),
        LogConfig({"segment.bytes": MiB, "preallocate": "true"}),
        recovery_point=0,
        had_clean_shutdown=False,
    )
    assert recovered.log_end_offset == end
    assert os.path.getsize(new_path) == recovered.active_segment.size
    recovered.close()


def test_file_region_outlives_segment_deletion(tmp_path):
    """A fetch response in flight keeps reading the right bytes after its
    segment is deleted (no closed or reused descriptor)."""
    log = open_log(tmp_path, **{"file.delete.delay.ms": 0})
    while log.num_segments < 2:
        log.append_as_leader(make_batch(5, 2000))
    region = log.read(0, 1 << 20).records
    expected = region.read()
    fd = region.file.fileno()
    log.update_high_watermark(log.log_end_offset)
    log.delete_records_before(log.segments[1].base_offset)
    assert not os.path.exists(os.path.join(log.dir, "00000000000000000000.log"))
    other = open(os.path.join(tmp_path, "other"), "wb")  # would reuse a freed descriptor
    assert region.read() == expected
    os.fstat(fd)  # still open
    other.close()
    del region
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        target = ""
    # Closed once the last region was dropped (the number may be reused since).
    assert "00000000000000000000.log" not in target
    log.close()


def test_epoch_assigned_without_fsync_is_written_by_the_next_flush_or_close(tmp_path):
    """A leader epoch assigned on the loop (flush=False, as Partition.make_leader
    does) must reach leader-epoch-checkpoint: appends in that epoch do not
    assign it again, so the log's flush and close write it."""
    from kfast.storage.checkpoint import LeaderEpochFileCache

    log = open_log(tmp_path)
    path = log.leader_epoch_cache.path
    log.leader_epoch_cache.assign(3, 0, flush=False)
    log.append_as_leader(make_batch(2), leader_epoch=3)
    assert LeaderEpochFileCache(path).entries == []
    log.flush()
    assert LeaderEpochFileCache(path).entries == [(3, 0)]
    log.leader_epoch_cache.assign(4, log.log_end_offset, flush=False)
    log.close()
    assert LeaderEpochFileCache(path).entries == [(3, 0), (4, 2)]


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 3000), min_size=1, max_size=40),
    interval=st.sampled_from([1, 512, 4096]),
    data=st.data(),
)
def test_read_ends_at_a_batch_boundary_once_the_first_batch_fits(
    tmp_path_factory, sizes, interval, data
):
    """A read returns the batches that fit whole in max_bytes (no partial
    batch at the tail): exactly the longest prefix of whole batches, and the
    first batch whole whatever max_bytes is (min_one_message)."""
    log = open_log(tmp_path_factory.mktemp("boundary"), **{"index.interval.bytes": interval})
    lengths = []
    for size in sizes:
        batch = make_batch(1, size)
        lengths.append(len(batch))
        log.append_as_leader(batch)
    start = data.draw(st.integers(0, len(sizes) - 1))
    max_bytes = data.draw(st.integers(1, sum(lengths) + 10))
    info = log.read(start, max_bytes)
    expected, total = 0, 0
    for i, length in enumerate(lengths[start:]):
        if i > 0 and total + length > max_bytes:
            break
        total += length
        expected += 1
    assert info.records.length == total
    assert [first for first, _ in batch_offsets(info.records.read())] == list(
        range(start, start + expected)
    )
    log.close()


def test_a_log_start_above_every_record_survives_a_reopen(tmp_path):
    """Kafka's deleteSegmentsIfLogStartGreaterThanLogEnd: DeleteRecords inside
    a batch, then a truncation that takes the whole batch, leaves every record
    below the log start; reopened, the log restarts empty at that start
    instead of moving the start back (found by the model test above)."""
    config = LogConfig({"segment.bytes": MiB, "file.delete.delay.ms": 0})
    path = str(tmp_path / "m-0")
    log = Log(path, config)
    log.append_as_leader(make_batch(2))
    log.update_high_watermark(2)
    log.delete_records_before(1)
    log.truncate_to(1)
    assert (log.log_start_offset, log.log_end_offset) == (1, 1)
    log.close()
    log = Log(
        path, config, recovery_point=log.recovery_point, log_start_offset=1, had_clean_shutdown=True
    )
    try:
        assert (log.log_start_offset, log.log_end_offset) == (1, 1)
        assert log.append_as_leader(make_batch(1)).first_offset == 1
    finally:
        log.close()
