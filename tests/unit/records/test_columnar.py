"""Columnar decoder: equal to a record-by-record decode, strict on corrupt
input, zero copy where it can be, and Spark's Arrow types."""

import struct

import crc32c
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfast._ext.columnar import ColumnarRecords, decode_columnar
from kfast.protocol.errors import CorruptRecordException, KafkaError

from .test_legacy_oracle import (
    kafka_python_codecs_installed,
    kafka_python_v2_batch,
    kafka_python_v2_records,
)

# ---------------------------------------------------------------- strategies
blobs = st.one_of(st.none(), st.binary(max_size=40))
headers = st.lists(st.tuples(st.text(max_size=8), blobs), max_size=3)


@st.composite
def batch_specs(draw):
    count = draw(st.integers(1, 12))
    base_timestamp = draw(st.integers(0, 2**41))
    records = [
        (
            i,
            base_timestamp + draw(st.integers(-1000, 10**6)),
            draw(blobs),
            draw(blobs),
            draw(headers),
        )
        for i in range(count)
    ]
    return draw(st.integers(0, 4)), draw(st.integers(0, 2**40)), records


def _columns(result, with_headers=True):
    rows = []
    for i in range(len(result)):
        rows.append(
            (
                result.offsets[i],
                result.timestamps[i],
                result.timestamp_types[i],
                result.key(i),
                result.value(i),
                result.headers(i) if with_headers else None,
            )
        )
    return rows


def _build(specs):
    return b"".join(
        kafka_python_v2_batch(records, compression=codec, base_offset=base)
        for codec, base, records in specs
    )


def _split(buffer):
    out, pos = [], 0
    while pos < len(buffer):
        size = 12 + struct.unpack_from(">i", buffer, pos + 8)[0]
        out.append(buffer[pos : pos + size])
        pos += size
    return out


def _patch_attributes(batch: bytes, set_bits: int) -> bytes:
    """Set attribute bits of a v2 batch and re-seal its CRC-32C."""
    out = bytearray(batch)
    attributes = struct.unpack_from(">h", out, 21)[0] | set_bits
    struct.pack_into(">h", out, 21, attributes)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


# ---------------------------------------------------------------- equivalence
@pytest.mark.slow
@given(st.lists(batch_specs(), min_size=1, max_size=4))
def test_columns_equal_kafka_python_record_by_record(specs):
    with kafka_python_codecs_installed():
        buffer = _build(specs)
        expected = kafka_python_v2_records(buffer)
    result = decode_columnar(buffer, include_headers=True)
    assert _columns(result) == expected
    assert result.bytes_consumed == len(buffer) and result.truncated_bytes == 0
    # (kafka-python leaves a batch uncompressed when compressing would grow it)
    assert [b.compression for b in result.batches] == [batch[22] & 7 for batch in _split(buffer)]


@pytest.mark.slow
@given(st.lists(batch_specs(), min_size=1, max_size=3), st.data())
def test_trailing_partial_batch_is_ignored_and_reported(specs, data):
    with kafka_python_codecs_installed():
        whole = _build(specs)
        last = kafka_python_v2_batch(specs[-1][2], compression=specs[-1][0])
    cut = data.draw(st.integers(0, len(last) - 1))
    result = decode_columnar(whole + last[:cut], include_headers=True)
    assert result.truncated_bytes == cut
    assert result.bytes_consumed == len(whole)
    with kafka_python_codecs_installed():
        assert _columns(result) == kafka_python_v2_records(whole)


def test_uncompressed_input_is_not_copied():
    buffer = bytearray(kafka_python_v2_batch([(0, 5, b"key", b"value", [])]))
    result = decode_columnar(buffer)
    assert result.data.obj is buffer
    start = result.value_offsets[0]
    assert bytes(buffer[start : start + 5]) == b"value"


def test_compressed_and_plain_batches_share_one_data_buffer():
    with kafka_python_codecs_installed():
        buffer = kafka_python_v2_batch(
            [(0, 5, b"a", b"plain", [])], base_offset=0
        ) + kafka_python_v2_batch([(0, 6, b"b", b"zipped" * 50, [])], compression=1, base_offset=1)
    result = decode_columnar(buffer)
    assert [b.compression for b in result.batches] == [0, 1]
    assert isinstance(result.data, bytes)
    data = result.data
    assert [
        bytes(data[result.value_offsets[i] : result.value_offsets[i] + result.value_lengths[i]])
        for i in range(2)
    ] == [b"plain", b"zipped" * 50]


def test_log_append_time_batches_use_max_timestamp():
    batch = kafka_python_v2_batch(
        [(0, 100, b"a", b"1", []), (1, 300, b"b", b"2", []), (2, 200, b"c", b"3", [])]
    )
    result = decode_columnar(_patch_attributes(batch, 0x08))
    assert result.timestamps.tolist() == [300, 300, 300]
    assert result.timestamp_types.tolist() == [1, 1, 1]
    assert decode_columnar(batch).timestamps.tolist() == [100, 300, 200]


def _control_batch(base_offset):
    # COMMIT marker: key = version 0, type 1; value = version 0, coordinator epoch 5.
    batch = kafka_python_v2_batch(
        [(0, 7, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 5), [])],
        base_offset=base_offset,
        producer_id=9,
        producer_epoch=1,
        transactional=True,
    )
    return _patch_attributes(batch, 0x20)


def test_control_batches_are_left_out_unless_requested():
    data = kafka_python_v2_batch(
        [(0, 1, b"k", b"v", [])],
        producer_id=9,
        producer_epoch=1,
        base_sequence=0,
        transactional=True,
    )
    buffer = data + _control_batch(1)
    result = decode_columnar(buffer)
    assert result.offsets.tolist() == [0]
    batches = result.batches
    assert [(b.is_control, b.is_transactional, b.first_record, b.producer_id) for b in batches] == [
        (False, True, 0, 9),
        (True, True, -1, 9),
    ]
    assert decode_columnar(buffer, include_control_batches=True).offsets.tolist() == [0, 1]


def test_empty_input_and_short_tail():
    assert len(decode_columnar(b"")) == 0
    result = decode_columnar(b"\x00" * 11)
    assert len(result) == 0 and result.truncated_bytes == 11


def test_columns_export_typed_read_only_buffers():
    result = decode_columnar(kafka_python_v2_batch([(0, 1, None, b"v", [])]), include_headers=True)
    assert memoryview(result.offsets).format == "q"
    assert memoryview(result.timestamp_types).format == "i"
    assert memoryview(result.key_lengths).tolist() == [-1]
    assert memoryview(result.header_offsets).tolist() == [0, 0]
    assert memoryview(result.value_offsets).readonly
    assert result.header_key_offsets is not None and len(result.header_key_offsets) == 0
    plain = decode_columnar(kafka_python_v2_batch([(0, 1, None, b"v", [])]))
    assert plain.header_offsets is None


# ---------------------------------------------------------------- corruption
def test_bad_crc_raises():
    batch = bytearray(kafka_python_v2_batch([(0, 1, b"k", b"v", [])]))
    batch[-2] ^= 0x01  # the last byte of the value "v"
    with pytest.raises(CorruptRecordException, match="CRC"):
        decode_columnar(bytes(batch))
    # Without the CRC check the same input is structurally valid.
    assert decode_columnar(bytes(batch), check_crc=False).value(0) == b"w"


def test_records_count_beyond_what_the_bytes_can_hold_raises_before_allocating():
    batch = bytearray(kafka_python_v2_batch([(0, 1, b"k", b"v", [])]))
    struct.pack_into(">i", batch, 57, 2**31 - 1)
    batch[17:21] = struct.pack(">I", crc32c.crc32c(bytes(batch[21:])))
    with pytest.raises(CorruptRecordException, match="claims"):
        decode_columnar(bytes(batch))


def test_legacy_magic_and_tiny_batch_length_raise():
    batch = bytearray(kafka_python_v2_batch([(0, 1, b"k", b"v", [])]))
    batch[16] = 1
    with pytest.raises(CorruptRecordException, match="magic 1"):
        decode_columnar(bytes(batch))
    batch = bytearray(kafka_python_v2_batch([(0, 1, b"k", b"v", [])]))
    struct.pack_into(">i", batch, 8, 20)
    with pytest.raises(CorruptRecordException, match="batchLength"):
        decode_columnar(bytes(batch))


def test_records_count_lower_than_records_present_raises():
    batch = bytearray(kafka_python_v2_batch([(0, 1, b"k", b"v", []), (1, 1, b"k", b"v", [])]))
    struct.pack_into(">i", batch, 57, 1)
    batch[17:21] = struct.pack(">I", crc32c.crc32c(bytes(batch[21:])))
    with pytest.raises(CorruptRecordException, match="remain"):
        decode_columnar(bytes(batch))


@pytest.mark.slow
@given(st.lists(batch_specs(), min_size=1, max_size=2), st.data())
def test_bit_flips_raise_kafka_errors_or_decode_within_bounds(specs, data):
    with kafka_python_codecs_installed():
        buffer = bytearray(_build(specs))
    for _ in range(data.draw(st.integers(1, 3))):
        position = data.draw(st.integers(0, len(buffer) - 1))
        buffer[position] ^= 1 << data.draw(st.integers(0, 7))
    check_crc = data.draw(st.booleans())
    try:
        result = decode_columnar(bytes(buffer), include_headers=True, check_crc=check_crc)
    except KafkaError:
        return
    # Whatever decoded must point inside its data buffer.
    size = len(result.data)
    for i in range(len(result)):
        for offsets, lengths in (
            (result.key_offsets, result.key_lengths),
            (result.value_offsets, result.value_lengths),
        ):
            assert 0 <= offsets[i] and offsets[i] + max(lengths[i], 0) <= size


@pytest.mark.slow
@given(st.lists(batch_specs(), min_size=1, max_size=2), st.data())
def test_truncated_records_sections_raise(specs, data):
    # Shrink batchLength (and the buffer) so the records section ends early;
    # with the CRC re-sealed, only the structural checks can catch it.
    with kafka_python_codecs_installed():
        batch = bytearray(kafka_python_v2_batch(specs[0][2], compression=0))
    cut = data.draw(st.integers(1, len(batch) - 61))
    batch = batch[: len(batch) - cut]
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    batch[17:21] = struct.pack(">I", crc32c.crc32c(bytes(batch[21:])))
    with pytest.raises(CorruptRecordException):
        decode_columnar(bytes(batch))


# ---------------------------------------------------------------- Arrow
SPARK_HEADERS = pa.list_(
    pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
)


def test_arrow_schema_is_exactly_sparks():
    batch = kafka_python_v2_batch([(0, 1, b"k", None, [("h", None)])])
    table = decode_columnar(batch, arrow=True, include_headers=True)
    assert isinstance(table, pa.RecordBatch)
    assert table.schema.names == ["key", "value", "offset", "timestamp", "timestampType", "headers"]
    assert [f.type for f in table.schema] == [
        pa.binary(),
        pa.binary(),
        pa.int64(),
        pa.timestamp("us", tz="UTC"),
        pa.int32(),
        SPARK_HEADERS,
    ]
    assert table.schema.field("headers").type.value_field.name == "element"
    no_headers = decode_columnar(batch, arrow=True)
    assert no_headers.schema.names == ["key", "value", "offset", "timestamp", "timestampType"]


@pytest.mark.slow
@given(st.lists(batch_specs(), min_size=1, max_size=3))
def test_arrow_values_equal_the_columns(specs):
    with kafka_python_codecs_installed():
        buffer = _build(specs)
        expected = kafka_python_v2_records(buffer)
    table = decode_columnar(buffer, arrow=True, include_headers=True)
    table.validate(full=True)
    assert table.column("key").to_pylist() == [r[3] for r in expected]
    assert table.column("value").to_pylist() == [r[4] for r in expected]
    assert table.column("offset").to_pylist() == [r[0] for r in expected]
    assert table.column("timestamp").cast(pa.int64()).to_pylist() == [r[1] * 1000 for r in expected]
    assert table.column("timestampType").to_pylist() == [r[2] for r in expected]
    assert table.column("headers").to_pylist() == [
        [{"key": k, "value": v} for k, v in r[5]] for r in expected
    ]
    assert table.column("key").null_count == sum(r[3] is None for r in expected)


def test_to_arrow_requires_decoded_headers():
    result = decode_columnar(kafka_python_v2_batch([(0, 1, b"k", b"v", [])]))
    assert isinstance(result, ColumnarRecords)
    with pytest.raises(ValueError):
        result.to_arrow(include_headers=True)
    assert result.to_arrow().num_rows == 1


# ---------------------------------------------------------------- kfast's own builder and reader
@pytest.mark.slow
@given(st.lists(batch_specs(), min_size=1, max_size=3), st.booleans())
def test_columns_equal_kfast_record_batch_iteration(specs, log_append_time):
    from kfast.records import RecordBatchBuilder, iter_batches

    buffer = b""
    for codec, base, records in specs:
        builder = RecordBatchBuilder(codec, base_offset=base, timestamp_type=int(log_append_time))
        for delta, timestamp, key, value, record_headers in records:
            builder.append(timestamp, key, value, headers=record_headers, offset=base + delta)
        buffer += builder.build()
    expected = [
        (
            r.offset,
            r.timestamp,
            batch.timestamp_type,
            _bytes(r.key),
            _bytes(r.value),
            [(k, _bytes(v)) for k, v in r.headers],
        )
        for batch in iter_batches(buffer)
        for r in batch
    ]
    assert _columns(decode_columnar(buffer, include_headers=True)) == expected
    with kafka_python_codecs_installed():
        assert _columns(decode_columnar(buffer, include_headers=True)) == kafka_python_v2_records(
            buffer
        )


def _bytes(value):
    return None if value is None else bytes(value)


def test_invalid_utf8_header_keys_are_replaced_like_java_does():
    batch = kafka_python_v2_batch([(0, 1, b"k", b"v", [("ok", b"1")])])
    # Overwrite the header key "ok" with two bytes that are not UTF-8.
    batch = bytearray(batch)
    at = batch.rindex(b"ok")
    batch[at : at + 2] = b"\xff\xfe"
    batch[17:21] = struct.pack(">I", crc32c.crc32c(bytes(batch[21:])))
    result = decode_columnar(bytes(batch), include_headers=True)
    assert result.headers(0) == [("\ufffd\ufffd", b"1")]
    table = result.to_arrow()
    table.validate(full=True)
    assert table.column("headers").to_pylist() == [[{"key": "\ufffd\ufffd", "value": b"1"}]]


def test_column_indexing_and_slicing():
    result = decode_columnar(
        b"".join(
            kafka_python_v2_batch([(0, 10 + i, b"k", b"v", [])], base_offset=5 + i)
            for i in range(3)
        )
    )
    offsets = result.offsets
    assert (len(offsets), offsets[0], offsets[-1], offsets.tolist()) == (3, 5, 7, [5, 6, 7])
    assert offsets[1:].tolist() == [6, 7]
    assert offsets.format == "q" and offsets.itemsize == 8
    with pytest.raises(IndexError):
        offsets[3]
    assert memoryview(offsets).cast("B").nbytes == 24


def test_any_contiguous_buffer_is_read_as_bytes():
    import array

    batch = kafka_python_v2_batch([(0, 1, b"key", b"value", [])])
    padded = batch + b"\x00" * (-len(batch) % 8)
    result = decode_columnar(array.array("q", padded))
    assert (result.key(0), result.value(0), result.truncated_bytes) == (
        b"key",
        b"value",
        len(padded) - len(batch),
    )


def test_decompression_is_bounded():
    with kafka_python_codecs_installed():
        batch = kafka_python_v2_batch([(0, 1, b"k", b"v" * 10_000, [])], compression=1)
    assert decode_columnar(batch).value(0) == b"v" * 10_000
    with pytest.raises(CorruptRecordException):
        decode_columnar(batch, max_decompressed_bytes=1000)


def test_reads_a_memory_mapped_segment_in_place(tmp_path):
    import mmap

    batches = b"".join(
        kafka_python_v2_batch([(0, 1, b"k%d" % i, b"v" * i, [])], base_offset=i) for i in range(3)
    )
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(batches + batches[:30])  # a segment being written: partial tail
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as segment:
        result = decode_columnar(segment)
        assert (result.offsets.tolist(), result.truncated_bytes) == ([0, 1, 2], 30)
        assert [result.value(i) for i in range(3)] == [b"", b"v", b"vv"]
        table = decode_columnar(segment, arrow=True)
        del result  # releases the export of the mmap
    assert table.column("key").to_pylist() == [b"k0", b"k1", b"k2"]  # Arrow owns its bytes
