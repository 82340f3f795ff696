"""Build with RecordBatchBuilder, read with RecordBatch: every field survives."""

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfast.records import (
    COMPRESSION_NONE,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    build_control_batch,
)

from ._record_strategies import CODECS, producer_fields, record_lists


def _expected_last_sequence(base, delta):
    if base == -1:
        return -1
    return (base + delta) % 2**31 if base + delta > 2**31 - 1 else base + delta


@pytest.mark.slow
@given(records=record_lists(), codec=st.sampled_from(CODECS), fields=producer_fields)
def test_round_trip(records, codec, fields):
    builder = RecordBatchBuilder(codec, **fields)
    for ts, key, value, headers in records:
        assert builder.append(ts, key, value, headers=headers)
    data = builder.build()
    batch = RecordBatch(data)
    batch.validate(from_client=False)
    assert batch.is_valid()
    assert batch.crc == crc32c.crc32c(data[21:])
    assert batch.size_in_bytes == len(data) == batch.batch_length + 12
    assert batch.magic == 2
    assert batch.compression == codec
    assert batch.records_count == len(records)
    assert batch.base_offset == fields["base_offset"]
    assert batch.last_offset_delta == len(records) - 1
    assert batch.last_offset == fields["base_offset"] + len(records) - 1
    assert batch.partition_leader_epoch == fields["partition_leader_epoch"]
    assert batch.producer_id == fields["producer_id"]
    assert batch.producer_epoch == fields["producer_epoch"]
    assert batch.base_sequence == fields["base_sequence"]
    assert batch.last_sequence == _expected_last_sequence(fields["base_sequence"], len(records) - 1)
    assert batch.is_transactional == fields["is_transactional"]
    assert batch.is_control == fields["is_control"]
    assert batch.timestamp_type == TIMESTAMP_CREATE_TIME
    assert batch.base_timestamp == records[0][0]
    assert batch.max_timestamp == max(r[0] for r in records)
    decoded = list(batch)
    assert len(decoded) == len(records)
    for i, (record, (ts, key, value, headers)) in enumerate(zip(decoded, records)):
        assert record.offset == fields["base_offset"] + i
        assert record.timestamp == ts
        assert record.attributes == 0
        assert (record.key is None) == (key is None)
        assert (record.value is None) == (value is None)
        if key is not None:
            assert record.key == key and bytes(record.key) == key
        if value is not None:
            assert record.value == value and bytes(record.value) == value
        assert [(k, None if v is None else bytes(v)) for k, v in record.headers] == headers


@given(records=record_lists(max_records=5), codec=st.sampled_from(CODECS))
def test_records_outlive_the_batch_object(records, codec):
    builder = RecordBatchBuilder(codec)
    for ts, key, value, headers in records:
        builder.append(ts, key, value, headers=headers)
    decoded = list(RecordBatch(bytearray(builder.build())))  # nothing else holds the buffer
    for record, (_ts, _key, value, headers) in zip(decoded, records):
        assert record.value == value
        assert [(k, None if v is None else bytes(v)) for k, v in record.headers] == headers


def test_recycled_records_and_slices_hold_their_own_fields():
    """The iterator reuses freed Record/BufferSlice blocks (batch.pyx, kfast_new_record):
    records kept past the free lists' size, records freed between batches, and a
    Record made from Python (tp_alloc's block, freed into the same list) must each
    come back whole."""
    builder = RecordBatchBuilder()
    for i in range(300):  # more than the free lists hold
        builder.append(1_000 + i, i.to_bytes(2, "big"), bytes([i % 256]) * (i % 7), headers=[])
    data = builder.build()
    kept = list(RecordBatch(data))
    for _round in range(3):
        Record.__new__(Record)  # freed at once: its block joins the free list
        fresh = [(r.offset, r.timestamp, bytes(r.key), bytes(r.value)) for r in RecordBatch(data)]
        assert fresh == [
            (i, 1_000 + i, i.to_bytes(2, "big"), bytes([i % 256]) * (i % 7)) for i in range(300)
        ]
    assert [(r.offset, bytes(r.key)) for r in kept] == [
        (i, i.to_bytes(2, "big")) for i in range(300)
    ]
    del kept


def test_explicit_offsets_and_gaps():
    builder = RecordBatchBuilder(base_offset=100)
    builder.append(1, b"a", b"1", offset=100)
    builder.append(2, b"b", b"2", offset=105)
    builder.append(3, b"c", b"3")
    batch = RecordBatch(builder.build())
    assert [r.offset for r in batch] == [100, 105, 106]
    assert batch.last_offset_delta == 6 and batch.records_count == 3
    batch.validate(from_client=False)
    with pytest.raises(Exception, match="Inconsistent batch offset range"):
        batch.validate()
    with pytest.raises(ValueError):
        builder.append(4, b"d", b"4", offset=106)


def test_timestamps_can_go_backwards():
    builder = RecordBatchBuilder()
    builder.append(1000, None, b"a")
    builder.append(10, None, b"b")
    batch = RecordBatch(builder.build())
    assert [r.timestamp for r in batch] == [1000, 10]
    assert batch.base_timestamp == 1000 and batch.max_timestamp == 1000


def test_log_append_time_builder_flag():
    builder = RecordBatchBuilder(timestamp_type=TIMESTAMP_LOG_APPEND_TIME)
    builder.append(5, None, b"x")
    batch = RecordBatch(builder.build())
    assert batch.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
    assert batch.attributes & 0x08


def test_empty_builder_builds_an_empty_batch():
    data = RecordBatchBuilder().build()
    assert len(data) == RECORD_BATCH_OVERHEAD
    batch = RecordBatch(data)
    assert batch.records_count == 0 and list(batch) == []
    batch.validate(from_client=False)
    with pytest.raises(Exception, match="Invalid reported count"):
        batch.validate()


def test_max_batch_bytes():
    builder = RecordBatchBuilder(max_batch_bytes=200)
    assert builder.append(1, None, b"x" * 500)  # the first record always fits
    assert not builder.append(2, None, b"y")
    assert builder.records_count == 1
    builder = RecordBatchBuilder(max_batch_bytes=200)
    n = 0
    while builder.append(1, b"k", b"v" * 10):
        n += 1
    assert len(builder.build()) <= 200 and n == builder.records_count and n > 3


def test_builder_accepts_any_buffer_and_bytes_header_keys():
    builder = RecordBatchBuilder()
    builder.append(1, bytearray(b"key"), memoryview(b"value"), headers=[(b"raw", bytearray(b"v"))])
    (record,) = RecordBatch(builder.build())
    assert record.key == b"key" and record.value == b"value"
    assert [(k, bytes(v)) for k, v in record.headers] == [("raw", b"v")]


def test_builder_rejects_bad_arguments():
    from kfast.protocol.errors import UnsupportedCompressionTypeException

    with pytest.raises(UnsupportedCompressionTypeException):
        RecordBatchBuilder(5)
    with pytest.raises(ValueError):
        RecordBatchBuilder(timestamp_type=2)
    with pytest.raises(TypeError):
        RecordBatchBuilder().append(1, "str is not bytes", None)
    with pytest.raises(ValueError):
        RecordBatchBuilder().append(1, None, None, headers=[(None, b"x")])


@pytest.mark.parametrize("control_type", [0, 1])
def test_control_batch(control_type):
    data = build_control_batch(
        control_type,
        producer_id=42,
        producer_epoch=3,
        coordinator_epoch=9,
        timestamp=1234,
        base_offset=77,
        partition_leader_epoch=5,
    )
    batch = RecordBatch(data)
    batch.validate(from_client=False)
    assert batch.is_control and batch.is_transactional
    assert batch.compression == COMPRESSION_NONE
    assert batch.base_sequence == -1 and batch.producer_id == 42 and batch.producer_epoch == 3
    assert batch.base_offset == 77 and batch.partition_leader_epoch == 5
    (record,) = batch
    assert bytes(record.key) == b"\x00\x00" + control_type.to_bytes(2, "big")
    assert bytes(record.value) == b"\x00\x00" + (9).to_bytes(4, "big")
    assert record.timestamp == 1234
    with pytest.raises(Exception, match="control records"):
        batch.validate()
    with pytest.raises(ValueError):
        build_control_batch(2, 1, 1, 1, 1)
