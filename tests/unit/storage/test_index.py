"""OffsetIndex / TimeIndex and the Cython search kernel."""

import bisect
import os
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfast._ext.index import (
    first_unordered_slot,
    largest_lower_bound_slot,
    smallest_upper_bound_slot,
)
from kfast.storage.index import (
    NO_TIMESTAMP,
    CorruptIndexException,
    InvalidOffsetException,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
)


def _pack_keys(keys, entry_size=8):
    return b"".join(struct.pack(">ii", k, i) for i, k in enumerate(keys))


@given(st.lists(st.integers(0, 2**31 - 1), unique=True).map(sorted), st.integers(-10, 2**31 + 10))
def test_kernel_matches_bisect(keys, target):
    buf = _pack_keys(keys)
    target = max(min(target, 2**63 - 1), -(2**63))
    expected = bisect.bisect_right(keys, target) - 1
    assert largest_lower_bound_slot(buf, len(keys), 8, 0, 4, target) == expected
    upper = bisect.bisect_left(keys, target)
    assert smallest_upper_bound_slot(buf, len(keys), 8, 0, 4, target) == (
        upper if upper < len(keys) else -1
    )


@given(
    st.lists(st.integers(-(2**62), 2**62), unique=True, min_size=1, max_size=3000).map(sorted),
    st.data(),
)
def test_kernel_64bit_keys_and_warm_section(keys, data):
    # More than 8192 / 12 entries exercises the warm-tail branch.
    buf = b"".join(struct.pack(">qi", k, 0) for k in keys)
    target = data.draw(st.one_of(st.sampled_from(keys), st.integers(-(2**63), 2**63 - 1)))
    assert (
        largest_lower_bound_slot(buf, len(keys), 12, 0, 8, target)
        == bisect.bisect_right(keys, target) - 1
    )


def test_kernel_rejects_counts_beyond_buffer():
    with pytest.raises(ValueError):
        largest_lower_bound_slot(b"\0" * 15, 2, 8, 0, 4, 1)
    with pytest.raises(ValueError):
        largest_lower_bound_slot(b"\0" * 16, 2, 8, 6, 4, 1)


def test_first_unordered_slot():
    assert first_unordered_slot(_pack_keys([1, 2, 3]), 3, 8, 0, 4, True) == -1
    assert first_unordered_slot(_pack_keys([1, 2, 2]), 3, 8, 0, 4, True) == 2
    assert first_unordered_slot(_pack_keys([1, 2, 2]), 3, 8, 0, 4, False) == -1
    assert first_unordered_slot(_pack_keys([3, 1]), 2, 8, 0, 4, False) == 1


def test_offset_index_preallocates_and_trims(tmp_path):
    path = str(tmp_path / "00000000000000000100.index")
    index = OffsetIndex(path, 100, max_index_size=1003)
    assert os.path.getsize(path) == 1000  # rounded down to whole entries
    assert index.entries == 0 and index.max_entries == 125
    index.append(105, 4200)
    index.append(110, 9000)
    assert index.lookup(99) == OffsetPosition(100, 0)
    assert index.lookup(104) == OffsetPosition(100, 0)
    assert index.lookup(105) == OffsetPosition(105, 4200)
    assert index.lookup(109) == OffsetPosition(105, 4200)
    assert index.lookup(1 << 40) == OffsetPosition(110, 9000)
    with pytest.raises(InvalidOffsetException):
        index.append(110, 9500)
    index.close()
    # Kafka's byte layout: relative offset, position, big-endian.
    with open(path, "rb") as f:
        assert f.read() == struct.pack(">iiii", 5, 4200, 10, 9000)
    reopened = OffsetIndex(path, 100, max_index_size=1000)
    assert reopened.entries == 2
    assert reopened.last_entry() == OffsetPosition(110, 9000)
    reopened.sanity_check(10000)
    reopened.close()


def test_offset_index_truncate_to(tmp_path):
    index = OffsetIndex(str(tmp_path / "0.index"), 0, max_index_size=800)
    for i in range(1, 11):
        index.append(i * 10, i * 100)
    index.truncate_to(50)
    assert index.entries == 4 and index.last_entry() == OffsetPosition(40, 400)
    index.truncate_to(45)
    assert index.entries == 4
    index.truncate_to(35)
    assert index.entries == 3
    index.append(36, 350)
    assert index.lookup(100) == OffsetPosition(36, 350)
    index.truncate()
    assert index.entries == 0 and index.lookup(5) == OffsetPosition(0, 0)
    index.close()


def test_zero_filled_index_is_corrupt(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(bytes(8 * 64))
    index = OffsetIndex(str(path), 0, max_index_size=1024)
    assert index.entries == 64
    with pytest.raises(CorruptIndexException):
        index.sanity_check(10000)
    index.close()
    tpath = tmp_path / "00000000000000000000.timeindex"
    tpath.write_bytes(bytes(12 * 10))
    tindex = TimeIndex(str(tpath), 0, max_index_size=1200)
    with pytest.raises(CorruptIndexException):
        tindex.sanity_check()
    tindex.close()


def test_torn_index_is_corrupt(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(struct.pack(">ii", 3, 100) + b"\0\0\0")
    index = OffsetIndex(str(path), 0, max_index_size=1024)
    with pytest.raises(CorruptIndexException):
        index.sanity_check(10000)
    index.close()


def test_time_index(tmp_path):
    path = str(tmp_path / "00000000000000000010.timeindex")
    index = TimeIndex(path, 10, max_index_size=12 * 4)
    assert index.lookup(5) == TimestampOffset(NO_TIMESTAMP, 10)
    index.maybe_append(1000, 12)
    index.maybe_append(1000, 13)  # same timestamp: not appended
    index.maybe_append(2000, 20)
    assert index.entries == 2
    assert index.lookup(999) == TimestampOffset(NO_TIMESTAMP, 10)
    assert index.lookup(1500) == TimestampOffset(1000, 12)
    assert index.lookup(2000) == TimestampOffset(2000, 20)
    index.maybe_append(3000, 30)
    assert index.is_full()  # one slot is reserved for the roll entry
    with pytest.raises(IndexError):
        index.maybe_append(4000, 40)
    index.maybe_append(4000, 40, skip_full_check=True)
    assert index.entries == 4
    index.truncate_to(25)
    assert index.entries == 2 and index.last_entry() == TimestampOffset(2000, 20)
    index.close()
    with open(path, "rb") as f:
        assert f.read() == struct.pack(">qiqi", 1000, 2, 2000, 10)


def test_resize_keeps_entries(tmp_path):
    index = OffsetIndex(str(tmp_path / "0.index"), 0, max_index_size=80)
    for i in range(1, 6):
        index.append(i, i * 10)
    index.trim_to_valid_size()
    assert index.length == 40 and index.is_full()
    index.resize(160)
    assert index.max_entries == 20 and index.entries == 5
    index.append(6, 60)
    assert index.lookup(6) == OffsetPosition(6, 60)
    index.close()


@given(
    st.lists(st.integers(1, 2**31 - 1), unique=True, max_size=3000).map(sorted),
    st.integers(0, 2**40),
    st.integers(-10, 2**31 + 10),
)
def test_offset_index_lookup_kernel_matches_bisect(relatives, base_offset, target_delta):
    from kfast._ext.index import offset_index_lookup

    buf = b"".join(struct.pack(">ii", r, i * 7) for i, r in enumerate(relatives))
    target = base_offset + target_delta
    slot = bisect.bisect_right(relatives, target - base_offset) - 1
    expected = (base_offset, 0) if slot < 0 else (base_offset + relatives[slot], slot * 7)
    assert offset_index_lookup(buf, len(relatives), base_offset, target) == expected


def test_active_index_is_buffered_and_written_on_flush(tmp_path):
    path = str(tmp_path / "00000000000000000000.index")
    index = OffsetIndex(path, 0, max_index_size=800)
    index.append(3, 100)
    index.append(7, 200)
    assert index.lookup(8) == OffsetPosition(7, 200)
    with open(path, "rb") as f:
        assert f.read(16) == bytes(16)  # not written yet (a crash loses nothing real)
    index.flush()
    with open(path, "rb") as f:
        data = f.read()
    assert len(data) == 800 and data[:16] == struct.pack(">iiii", 3, 100, 7, 200)
    index.truncate_to(7)
    index.flush()
    with open(path, "rb") as f:
        assert f.read(16) == struct.pack(">ii", 3, 100) + bytes(8)
    index.append(9, 300)
    index.trim_to_valid_size()  # roll: trimmed and memory-mapped from here on
    with open(path, "rb") as f:
        assert f.read() == struct.pack(">iiii", 3, 100, 9, 300)
    assert index.lookup(100) == OffsetPosition(9, 300)
    index.resize(800)  # active again (truncation into this segment)
    index.append(12, 400)
    index.close()
    with open(path, "rb") as f:
        assert f.read() == struct.pack(">iiiiii", 3, 100, 9, 300, 12, 400)
