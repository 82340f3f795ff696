"""A read notes where it was bounded (the log end or the high watermark and
its position), so a consumer at the tail -- whose next fetch is for exactly
that offset -- finds its batch without scanning batch headers from the index
entry below it (LogSegment.note_offset_position; issue 21 item 3)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kfast.config import LogConfig
from kfast.storage.file_records import FileRecords
from kfast.storage.log import Log

from .batches import make_batch

MiB = 1024 * 1024


def open_log(tmp_path, name="topic-0", **overrides):
    config = LogConfig({"segment.bytes": MiB, **overrides})
    return Log(str(tmp_path / name), config, had_clean_shutdown=True)


def test_a_tail_read_scans_only_the_new_batch(tmp_path, monkeypatch):
    log = open_log(tmp_path)
    for _ in range(100):  # ~17 KiB of one-record batches: index entries every 4 KiB
        log.append_as_leader(make_batch(1, value_size=100), leader_epoch=0)
    log.read(0, MiB)  # read to the end: the next fetch is for the log end offset
    scanned = []
    original = FileRecords.batches_from

    def counting(self, *args, **kwargs):
        for item in original(self, *args, **kwargs):
            scanned.append(item[0])
            yield item

    monkeypatch.setattr(FileRecords, "batches_from", counting)
    for _ in range(30):
        end = log.log_end_offset
        log.append_as_leader(make_batch(1, value_size=100), leader_epoch=0)
        scanned.clear()
        info = log.read(end, MiB)
        assert info.fetch_offset_metadata.message_offset == end
        assert info.records is not None
        # Without the note: the headers from the last index entry (up to
        # ~24 of these 170-byte batches) before reaching the new one; with
        # it and the new batch within max_bytes, not even that one's.
        assert scanned == [], scanned
    log.close()


def _region(log: Log, offset: int, max_bytes: int, upper_bound: int | None):
    info = log.read(offset, max_bytes, upper_bound)
    meta = info.fetch_offset_metadata
    region = None if info.records is None else (info.records.position, info.records.length)
    return (
        meta.message_offset,
        meta.segment_base_offset,
        meta.relative_position_in_segment,
        region,
    )


def _without_hints(log: Log, call):
    """``call()`` with every segment's note forgotten, then put back."""
    saved = [(segment, segment._read_hint) for segment in log.segments]
    for segment, _ in saved:
        segment._read_hint = (-1, 0)
    try:
        return call()
    finally:
        for segment, hint in saved:
            segment._read_hint = hint


def test_a_tail_read_within_max_bytes_is_the_scans_region(tmp_path):
    """Batches appended after the note, read from the noted offset with a
    max_bytes that takes all of them, exactly all, or less: the region the
    header scan gives (the note answers only the first two)."""
    log = open_log(tmp_path)
    for _ in range(5):
        log.append_as_leader(make_batch(1, value_size=100), leader_epoch=0)
    end = log.log_end_offset
    log.read(0, MiB)  # notes (end, its position)
    for count, size in ((1, 50), (3, 200), (2, 10)):
        log.append_as_leader(make_batch(count, value_size=size), leader_epoch=0)
    rest = _without_hints(log, lambda: _region(log, end, MiB, None))[3]
    assert rest is not None
    noted = log.active_segment._read_hint
    assert noted[0] == end
    for max_bytes in (MiB, rest[1], rest[1] - 1, 1, 0):
        expected = _without_hints(log, lambda n=max_bytes: _region(log, end, n, None))
        log.active_segment._read_hint = noted  # each read notes the new end
        assert _region(log, end, max_bytes, None) == expected, max_bytes
    log.close()


def test_a_truncation_forgets_the_note(tmp_path):
    """After a truncation the offsets past it belong to other batches, at
    other positions: a note from before must not place a lookup."""
    log = open_log(tmp_path)
    for _ in range(10):
        log.append_as_leader(make_batch(1, value_size=100), leader_epoch=0)
    log.read(0, MiB)  # notes (10, end of the 10th batch)
    log.truncate_to(5)
    for _ in range(10):  # offsets 5..34 in batches of another size
        log.append_as_leader(make_batch(3, value_size=10), leader_epoch=1)
    for offset in (10, 11, 12):
        expected = _without_hints(log, lambda o=offset: _region(log, o, MiB, None))
        assert _region(log, offset, MiB, None) == expected
        assert expected[0] == offset
    log.close()


operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 5), st.integers(0, 600)),
        st.tuples(st.just("read"), st.floats(0, 1), st.sampled_from([200, 1000, MiB])),
        st.tuples(st.just("read_hw"), st.floats(0, 1), st.floats(0, 1)),
        st.tuples(st.just("truncate"), st.floats(0, 1), st.just(0)),
        st.tuples(st.just("roll"), st.just(0), st.just(0)),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(operations)
def test_reads_with_notes_equal_reads_without(tmp_path_factory, ops):
    """Appends, reads (to the log end, or bounded below it as a high
    watermark bounds them), truncations and segment rolls in any order: a
    read answers the same region whatever the notes say."""
    log = open_log(tmp_path_factory.mktemp("log"))
    try:
        for op, a, b in ops:
            end = log.log_end_offset
            if op == "append":
                log.append_as_leader(make_batch(a, value_size=b), leader_epoch=0)
            elif op == "truncate":
                log.truncate_to(int(a * end))
            elif op == "roll":
                if log.active_segment.size:
                    log.roll()
            elif end > log.log_start_offset:
                offset = int(a * (end - 1))
                bound = None if op == "read" else offset + 1 + int(b * (end - offset - 1))
                max_bytes = b if op == "read" else MiB
                expected = _without_hints(log, lambda: _region(log, offset, max_bytes, bound))
                assert _region(log, offset, max_bytes, bound) == expected
                # The reader at the tail asks next for where this read was bounded.
                tail = end if bound is None else bound
                if tail < end:
                    # All of the rest, just all of it, or less (the header
                    # scan's case).
                    rest = _without_hints(log, lambda: _region(log, tail, MiB, None))[3]
                    for tail_bytes in {MiB, 200, rest[1], rest[1] - 1} if rest else {MiB}:
                        expected = _without_hints(
                            log, lambda n=tail_bytes: _region(log, tail, n, None)
                        )
                        assert _region(log, tail, tail_bytes, None) == expected
    finally:
        log.close()
