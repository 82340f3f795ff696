"""RecordBatch header view, validation rules, patching, batch walking, BufferSlice."""

import gc
import mmap
import struct

import crc32c
import pytest

from kfast.protocol.errors import (
    CorruptRecordException,
    InvalidRecordException,
    UnsupportedCompressionTypeException,
)
from kfast.records import (
    RECORD_BATCH_OVERHEAD,
    BufferSlice,
    LegacyRecordFormatError,
    RecordBatch,
    RecordBatchBuilder,
    complete_batches_size,
    iter_batches,
    patch_batch,
    peek_magic,
)


def _batch(n=3, codec=0, **kw):
    builder = RecordBatchBuilder(codec, **kw)
    for i in range(n):
        builder.append(1000 + i, b"key%d" % i, b"value%d" % i, headers=[("h", b"%d" % i)])
    return builder.build()


def _recrc(buf, offset=0):
    struct.pack_into(">I", buf, offset + 17, crc32c.crc32c(bytes(buf[offset + 21 :])))


# ---- construction
@pytest.mark.parametrize(
    "wrap", [bytes, bytearray, lambda b: memoryview(b), lambda b: memoryview(bytearray(b))]
)
def test_any_buffer(wrap):
    data = _batch()
    batch = RecordBatch(wrap(data))
    assert batch.records_count == 3 and batch.is_valid()
    assert [bytes(r.value) for r in batch] == [b"value0", b"value1", b"value2"]


def test_mmap_and_offset(tmp_path):
    data = b"\x00" * 10 + _batch()
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    with open(path, "r+b") as f:
        mm = mmap.mmap(f.fileno(), 0)
        batch = RecordBatch(mm, 10)
        batch.validate()
        batch.set_base_offset(55)
        assert batch.base_offset == 55
        assert [r.offset for r in batch] == [55, 56, 57]
        del batch
        gc.collect()
        mm.close()
    assert RecordBatch(path.read_bytes(), 10).base_offset == 55


def test_header_fields():
    data = _batch(
        4,
        codec=2,
        base_offset=10,
        partition_leader_epoch=3,
        producer_id=99,
        producer_epoch=7,
        base_sequence=2**31 - 2,
        is_transactional=True,
    )
    b = RecordBatch(data)
    assert (b.base_offset, b.last_offset, b.next_offset, b.last_offset_delta) == (10, 13, 14, 3)
    assert b.partition_leader_epoch == 3 and b.magic == 2
    assert b.attributes == 2 | 0x10 and b.compression == 2
    assert b.is_transactional and not b.is_control and not b.has_delete_horizon
    assert b.delete_horizon_ms is None
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (99, 7, 2**31 - 2)
    assert b.has_producer_id
    assert b.last_sequence == 1  # wraps like DefaultRecordBatch.incrementSequence
    assert b.base_timestamp == 1000 and b.max_timestamp == 1003
    assert b.size_in_bytes == len(data) == b.batch_length + 12
    assert b.crc == crc32c.crc32c(data[21:]) == b.compute_crc()
    assert b.tobytes() == data and bytes(b.memoryview()) == data
    assert "records_count=4" in repr(b)


def test_truncated_and_undersized():
    data = _batch()
    for cut in (0, 10, 16, 17, 60, len(data) - 1):
        with pytest.raises(CorruptRecordException):
            RecordBatch(data[:cut])
    small = bytearray(data)
    struct.pack_into(">i", small, 8, 48)
    with pytest.raises(CorruptRecordException, match="smaller than the minimum"):
        RecordBatch(small)
    with pytest.raises(CorruptRecordException):
        RecordBatch(data, len(data) + 1)
    with pytest.raises(CorruptRecordException):
        RecordBatch(data, -1)


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_magic_is_routed(magic):
    # A v1 message: offset, size, crc, magic, attributes, timestamp, key, value.
    body = struct.pack(">bbqii", magic, 0, 0, -1, 3) + b"abc"
    legacy = struct.pack(">qiI", 0, 4 + len(body), 0) + body
    assert peek_magic(legacy) == magic
    with pytest.raises(LegacyRecordFormatError) as info:
        RecordBatch(legacy)
    assert info.value.magic == magic
    assert isinstance(info.value, CorruptRecordException)


def test_unknown_magic():
    data = bytearray(_batch())
    data[16] = 3
    assert peek_magic(data) == 3
    with pytest.raises(CorruptRecordException, match="magic 3"):
        RecordBatch(data)
    with pytest.raises(CorruptRecordException):
        peek_magic(b"\x00" * 16)


# ---- validate
def test_crc_mismatch_message():
    data = bytearray(_batch())
    data[-1] ^= 0xFF
    batch = RecordBatch(data)
    assert not batch.is_valid()
    with pytest.raises(CorruptRecordException, match=r"stored crc = \d+, computed crc = \d+"):
        batch.validate()


def test_unknown_codec():
    data = bytearray(_batch())
    data[22] = (data[22] & ~7) | 5
    _recrc(data)
    with pytest.raises(UnsupportedCompressionTypeException):
        RecordBatch(data).validate()


def test_records_count_must_match_records():
    data = bytearray(_batch(3))
    struct.pack_into(">i", data, 57, 4)
    _recrc(data)
    with pytest.raises(CorruptRecordException, match="holds only 3"):
        RecordBatch(data).validate(from_client=False)
    with pytest.raises(CorruptRecordException):
        list(RecordBatch(data))
    struct.pack_into(">i", data, 57, 2)
    _recrc(data)
    with pytest.raises(CorruptRecordException, match="left after"):
        RecordBatch(data).validate(from_client=False)
    with pytest.raises(CorruptRecordException, match="left after"):
        list(RecordBatch(data))
    struct.pack_into(">i", data, 57, -1)
    _recrc(data)
    with pytest.raises(CorruptRecordException, match="invalid record count"):
        RecordBatch(data).validate(from_client=False)


def test_client_rules():
    data = bytearray(_batch(3))
    struct.pack_into(">i", data, 23, 5)  # lastOffsetDelta 5 with 3 records
    _recrc(data)
    with pytest.raises(InvalidRecordException, match="Inconsistent"):
        RecordBatch(data).validate()
    RecordBatch(data).validate(from_client=False)
    with pytest.raises(InvalidRecordException, match="sequence"):
        RecordBatch(_batch(2, producer_id=5, producer_epoch=0, base_sequence=-1)).validate()
    RecordBatch(_batch(2, producer_id=5, producer_epoch=0, base_sequence=0)).validate()


def test_compressed_payload_bounds_and_corruption():
    data = _batch(50, codec=4)
    with pytest.raises(CorruptRecordException, match="max_output"):
        RecordBatch(data).validate(max_output=100)
    bad = bytearray(data)
    bad[61:65] = b"XXXX"  # wreck the zstd frame magic, keep the CRC right
    _recrc(bad)
    with pytest.raises(CorruptRecordException):
        RecordBatch(bad).validate()
    with pytest.raises(CorruptRecordException):
        list(RecordBatch(bad))


# ---- patching
def test_set_methods_and_read_only_buffers():
    data = _batch()
    with pytest.raises(TypeError, match="read-only"):
        RecordBatch(data).set_base_offset(1)
    with pytest.raises(TypeError):
        patch_batch(data, 0, 1, 1)
    buf = bytearray(data)
    batch = RecordBatch(buf)
    batch.set_base_offset(500)
    batch.set_partition_leader_epoch(9)
    assert batch.is_valid() and batch.crc == RecordBatch(data).crc
    assert (batch.base_offset, batch.partition_leader_epoch) == (500, 9)
    batch.set_last_offset(1002)
    assert batch.base_offset == 1000
    batch.set_log_append_time(123456)
    assert batch.is_valid() and batch.timestamp_type == 1 and batch.max_timestamp == 123456
    assert [r.timestamp for r in batch] == [123456] * 3
    batch.set_max_timestamp(0, 1002)
    assert batch.is_valid() and batch.timestamp_type == 0
    assert buf == bytearray(struct.pack(">q", 1000) + data[8:12] + struct.pack(">i", 9) + data[16:])


def test_patch_batch_in_a_larger_buffer():
    first, second = _batch(2), _batch(3)
    buf = bytearray(first + second)
    assert patch_batch(buf, len(first), 2, 4, log_append_time=777) == len(second)
    batches = list(iter_batches(buf))
    assert [b.base_offset for b in batches] == [0, 2]
    assert batches[0].partition_leader_epoch == -1 and batches[1].partition_leader_epoch == 4
    assert batches[1].max_timestamp == 777 and batches[1].is_valid() and batches[0].is_valid()
    with pytest.raises(CorruptRecordException):
        patch_batch(buf, len(buf) - 5, 0, 0)


# ---- several batches
def test_iter_batches_and_partial_tail():
    batches = [_batch(i + 1, codec=i % 5) for i in range(5)]
    blob = b"".join(batches)
    assert [b.records_count for b in iter_batches(blob)] == [1, 2, 3, 4, 5]
    assert complete_batches_size(blob) == len(blob)
    cut = blob[:-7]
    with pytest.raises(CorruptRecordException):
        list(iter_batches(cut))
    assert [b.records_count for b in iter_batches(cut, allow_partial=True)] == [1, 2, 3, 4]
    assert complete_batches_size(cut) == len(blob) - len(batches[-1])
    assert complete_batches_size(cut[:5]) == 0
    assert complete_batches_size(blob, len(batches[0])) == len(blob) - len(batches[0])
    starts = [b.offset for b in iter_batches(blob, len(batches[0]))]
    assert starts[0] == len(batches[0]) and len(starts) == 4


# ---- BufferSlice
def test_buffer_slice_behaves_like_bytes():
    (record,) = RecordBatch(_batch(1))
    value = record.value
    assert isinstance(value, BufferSlice)
    assert value == b"value0" and b"value0" == value and value != b"value1"
    assert value == bytearray(b"value0") and value == memoryview(b"value0")
    assert value == RecordBatch(_batch(1)).records()[0].value
    assert hash(value) == hash(b"value0")
    assert {value: 1}[b"value0"] == 1
    assert bytes(value) == b"value0" and value.tobytes() == b"value0"
    assert len(value) == 6 and value[0] == ord("v") and value[1:3] == b"al"
    assert list(value) == list(b"value0")
    assert value.decode() == "value0"
    assert memoryview(value).tobytes() == b"value0" and memoryview(value).readonly
    assert b"-".join([value, record.key]) == b"value0-key0"
    assert value < b"value1" and value >= b"value0"
    assert repr(value) == "BufferSlice(b'value0')"
    assert (value == "value0") is False


def test_buffer_slice_keeps_buffer_alive_and_pins_bytearray():
    buf = bytearray(_batch(1))
    value = RecordBatch(buf).records()[0].value
    gc.collect()
    with pytest.raises(BufferError):
        buf.extend(b"more")  # a live view pins the bytearray
    assert value == b"value0"
    del value
    gc.collect()
    buf.extend(b"more")


def test_record_repr_and_flags():
    builder = RecordBatchBuilder()
    builder.append(1, None, None)
    (record,) = RecordBatch(builder.build())
    assert record.key is None and record.value is None
    assert not record.has_key and not record.has_value
    assert "offset=0" in repr(record)
    assert RECORD_BATCH_OVERHEAD == 61


def test_validation_on_the_software_crc_path():
    from kfast._ext import crc32c as kcrc

    data = bytearray(_batch(40))
    kcrc._force_implementation("software")
    try:
        batch = RecordBatch(data)
        batch.validate()
        data[-1] ^= 1
        with pytest.raises(CorruptRecordException, match="crc"):
            batch.validate()
    finally:
        kcrc._force_implementation("auto")


def test_header_keys_with_invalid_utf8_are_replaced_like_java():
    builder = RecordBatchBuilder()
    builder.append(1, None, b"v", headers=[(b"\xff-key", b"x")])
    (record,) = RecordBatch(builder.build())
    assert record.headers[0][0] == "\ufffd-key"


def test_check_records_false_skips_only_the_uncompressed_walk():
    data = bytearray(_batch(3))
    struct.pack_into(">i", data, 57, 4)  # count no longer matches the records
    _recrc(data)
    RecordBatch(data).validate(from_client=False, check_records=False)
    with pytest.raises(CorruptRecordException):
        RecordBatch(data).validate(from_client=False)
    data[-1] ^= 1  # the CRC is still checked
    with pytest.raises(CorruptRecordException, match="crc"):
        RecordBatch(data).validate(from_client=False, check_records=False)
    compressed = bytearray(_batch(3, codec=1))
    struct.pack_into(">i", compressed, 57, 4)
    _recrc(compressed)
    with pytest.raises(CorruptRecordException):  # compressed batches are always walked
        RecordBatch(compressed).validate(from_client=False, check_records=False)
