"""The record iterator's recycling (kfast/_ext/batch.pyx, RecordIterator).

The iterator refills the Record it returned two calls ago, its key/value
BufferSlices and its offset/timestamp ints in place when nothing but the
iterator (or that Record) holds them. Whatever a caller keeps -- a record, a
field, a memoryview of a field, a headers list -- must keep its values, and
no object may leak.
"""

import gc
import sys
import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st

from kfast.records import RecordBatch, RecordBatchBuilder

from ..hypothesis_budget import examples
from ._record_strategies import CODECS, record_lists

# What a caller keeps of one record while iterating on.
KEEP = ("nothing", "record", "key", "value", "key_view", "headers", "offset", "timestamp", "all")


def _build(records, codec=0, base_offset=0, log_append_time=None):
    builder = RecordBatchBuilder(codec, base_offset=base_offset)
    for ts, key, value, headers in records:
        builder.append(ts, key, value, headers=headers)
    batch = RecordBatch(bytearray(builder.build()))
    if log_append_time is not None:
        batch.set_log_append_time(log_append_time)
    return batch


def _expected(records, base_offset, log_append_time):
    """Reference decode: what the builder was given."""
    return [
        (
            base_offset + i,
            ts if log_append_time is None else log_append_time,
            key,
            value,
            headers,
        )
        for i, (ts, key, value, headers) in enumerate(records)
    ]


def _as_plain(record):
    """A record's fields as plain Python values (copies)."""
    return (
        record.offset,
        record.timestamp,
        None if record.key is None else bytes(record.key),
        None if record.value is None else bytes(record.value),
        [(k, None if v is None else bytes(v)) for k, v in record.headers],
    )


def _keep(record, what):
    if what == "record":
        return record
    if what == "key":
        return record.key
    if what == "value":
        return record.value
    if what == "key_view":
        return None if record.key is None else memoryview(record.key)
    if what == "headers":
        return record.headers
    if what == "offset":
        return record.offset
    if what == "timestamp":
        return record.timestamp
    if what == "all":
        return (record.offset, record.timestamp, record.key, record.value, record.headers)
    return None


def _check_kept(kept, what, expected):
    offset, timestamp, key, value, headers = expected
    if what == "record":
        assert _as_plain(kept) == expected
    elif what == "key":
        assert (kept is None) == (key is None) and (key is None or bytes(kept) == key)
    elif what == "value":
        assert (kept is None) == (value is None) and (value is None or bytes(kept) == value)
    elif what == "key_view":
        assert (kept is None) == (key is None) and (key is None or kept.tobytes() == key)
    elif what == "headers":
        assert [(k, None if v is None else bytes(v)) for k, v in kept] == headers
    elif what == "offset":
        assert kept == offset
    elif what == "timestamp":
        assert kept == timestamp
    elif what == "all":
        k_offset, k_timestamp, k_key, k_value, k_headers = kept
        assert (k_offset, k_timestamp) == (offset, timestamp)
        assert (None if k_key is None else bytes(k_key)) == key
        assert (None if k_value is None else bytes(k_value)) == value
        assert [(k, None if v is None else bytes(v)) for k, v in k_headers] == headers


# Offsets and timestamps around the 2**30 and 2**60 digit boundaries of
# CPython's ints and the small-int range, so recycled ints change size and sign.
base_offsets = st.one_of(
    st.integers(0, 300),
    st.integers(2**30 - 20, 2**30 + 5),
    st.integers(2**60 - 20, 2**60 + 5),
    st.integers(0, 2**62),
)


@settings(max_examples=examples(150), deadline=None)
@given(
    records=record_lists(max_records=24),
    codec=st.sampled_from(CODECS),
    base_offset=base_offsets,
    log_append_time=st.one_of(st.none(), st.integers(0, 2**62)),
    data=st.data(),
)
def test_kept_records_and_fields_keep_their_values(
    records, codec, base_offset, log_append_time, data
):
    batch = _build(records, codec, base_offset, log_append_time)
    expected = _expected(records, base_offset, log_append_time)
    plan = data.draw(st.lists(st.sampled_from(KEEP), min_size=len(records), max_size=len(records)))
    kept = []
    for i, record in enumerate(batch):
        # The record in hand is right even when it is a recycled one.
        assert _as_plain(record) == expected[i]
        kept.append(_keep(record, plan[i]))
    # Iterating again (recycling the same blocks) changes nothing kept.
    for record in batch:
        record.offset, record.timestamp, record.key, record.value
    for i in range(len(records)):
        _check_kept(kept[i], plan[i], expected[i])
    # A kept list of every record: distinct objects, all whole.
    assert [_as_plain(r) for r in list(batch)] == expected


def test_holding_one_field_of_every_record():
    """Comprehensions that keep only one field: the record is recycled under
    the kept field, which must not be."""
    records = [(1_700_000_000_000 + i, b"k%d" % i, b"v" * (i % 5), []) for i in range(600)]
    batch = _build(records, base_offset=2**30 - 300)
    expected = _expected(records, 2**30 - 300, None)
    assert [r.offset for r in batch] == [e[0] for e in expected]
    assert [r.timestamp for r in batch] == [e[1] for e in expected]
    assert [bytes(k) for k in [r.key for r in batch]] == [e[2] for e in expected]
    assert [bytes(v) for v in [r.value for r in batch]] == [e[3] for e in expected]
    views = [memoryview(r.value) for r in batch]
    assert [v.tobytes() for v in views] == [e[3] for e in expected]
    pairs = [(r.offset, r) for r in batch]
    assert [(o, _as_plain(r)[:4]) for o, r in pairs] == [(e[0], e[:4]) for e in expected]


def test_null_and_present_fields_alternate():
    """A recycled record whose key/value go from a slice to None and back."""
    records = [
        (1_000 + i, None if i % 3 == 0 else b"key", None if i % 4 == 1 else b"x" * i, [])
        for i in range(50)
    ]
    batch = _build(records)
    assert [_as_plain(r) for r in batch] == _expected(records, 0, None)


def test_the_iterator_releases_what_the_caller_keeps():
    """The iterator holds the last two records it returned (the ones it may
    recycle) and lets go of them after; a record kept by the caller is then
    the caller's alone, with its values."""
    batch = _build([(5_000 + i, b"k", b"v%d" % i, []) for i in range(4)])
    it = iter(batch)
    first = next(it)
    assert sys.getrefcount(first) == 3  # first, the iterator, getrefcount's argument
    next(it)
    next(it)
    assert sys.getrefcount(first) == 2
    assert (first.offset, first.timestamp, bytes(first.value)) == (0, 5_000, b"v0")


def test_no_leak_over_many_iterations():
    """Records, slices and ints recycled or not, kept or dropped: the batch's
    buffer gets all its references back and memory does not grow."""
    records = [(1_700_000_000_000 + i, b"key", b"value %d" % i, [("h", b"x")]) for i in range(200)]
    buffer = bytearray(_build(records).tobytes())
    refs_before = sys.getrefcount(buffer)

    def one_round():
        batch = RecordBatch(buffer)
        kept = []
        for i, record in enumerate(batch):
            record.offset, record.timestamp, record.key, record.value
            if i % 7 == 0:
                kept.append(record.key)
            if i % 11 == 0:
                kept.append(record)
        list(batch)
        return len(kept)

    tracemalloc.start()
    try:
        # Blocks the module's free lists take while traced stay allocated:
        # measure from a warm state.
        for _ in range(200):
            one_round()
        gc.collect()
        start, _peak = tracemalloc.get_traced_memory()
        for _ in range(1_000):
            one_round()
        gc.collect()
        end, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # 1,000 rounds of ~230 objects each: a leak of one object per round shows.
    assert end - start < 8_000
    assert sys.getrefcount(buffer) == refs_before
