"""decode_records: offsets below the fetch offset, control batches, aborted transactions."""

from __future__ import annotations

from kfast.client.fetcher import READ_COMMITTED, READ_UNCOMMITTED, FetchedPartition, decode_records
from kfast.records import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    RecordBatchBuilder,
    build_control_batch,
)


def batch(base_offset, values, producer_id=-1, transactional=False) -> bytes:
    builder = RecordBatchBuilder(
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        is_transactional=transactional,
    )
    for value in values:
        builder.append(1000, None, value, [("h", b"x")])
    return builder.build()


def fetched(records: bytes, fetch_offset=0, aborted=()) -> FetchedPartition:
    return FetchedPartition(
        "t", 0, fetch_offset, memoryview(records), 100, 100, 0, 0, list(aborted)
    )


def test_records_before_the_fetch_offset_are_skipped():
    part = fetched(batch(0, [b"a", b"b", b"c"]) + batch(3, [b"d"]), fetch_offset=2)
    records = decode_records(part)
    assert [(r.offset, r.value, r.headers) for r in records] == [
        (2, b"c", [("h", b"x")]),
        (3, b"d", [("h", b"x")]),
    ]


def test_read_committed_drops_aborted_transactions_and_markers():
    log = (
        batch(0, [b"committed-1"], producer_id=7, transactional=True)
        + build_control_batch(CONTROL_TYPE_COMMIT, 7, 0, 0, 1000, base_offset=1)
        + batch(2, [b"aborted-1", b"aborted-2"], producer_id=7, transactional=True)
        + batch(4, [b"plain"])
        + build_control_batch(CONTROL_TYPE_ABORT, 7, 0, 0, 1000, base_offset=5)
        + batch(6, [b"committed-2"], producer_id=7, transactional=True)
        + build_control_batch(CONTROL_TYPE_COMMIT, 7, 0, 0, 1000, base_offset=7)
    )
    committed = decode_records(fetched(log, aborted=[(7, 2)]), READ_COMMITTED)
    assert [r.value for r in committed] == [b"committed-1", b"plain", b"committed-2"]
    everything = decode_records(fetched(log, aborted=[(7, 2)]), READ_UNCOMMITTED)
    assert [r.value for r in everything] == [
        b"committed-1",
        b"aborted-1",
        b"aborted-2",
        b"plain",
        b"committed-2",
    ]
