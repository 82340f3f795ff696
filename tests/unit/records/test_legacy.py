"""Legacy message sets (magic 0/1) against kafka-python, both directions,
every legacy codec; up- and down-conversion; strictness on corrupt input."""

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from kfast._ext.batch import RecordBatchBuilder, build_control_batch
from kfast._ext.legacy import (
    LegacyRecord,
    build_message_set,
    convert_message_set_to_v2,
    convert_v2_to_message_set,
    decode_message_set,
)
from kfast.compression import compress, xxh32
from kfast.protocol.errors import (
    CorruptRecordException,
    KafkaError,
    UnsupportedCompressionTypeException,
)

from ..hypothesis_budget import examples
from .test_legacy_oracle import (
    kafka_python_codecs_installed,
    kafka_python_legacy_records,
    kafka_python_message_set,
    kafka_python_v2_batch,
    kafka_python_v2_records,
)

MAGICS = [0, 1]
# Property tests below run once per (magic, codec): fewer examples each keeps
# the total near a single test's default.
per_combination = settings(max_examples=examples(25))
LEGACY_CODECS = [0, 1, 2, 3]
blobs = st.one_of(st.none(), st.binary(max_size=30))


@st.composite
def message_specs(draw, min_size=1):
    count = draw(st.integers(min_size, 10))
    base_timestamp = draw(st.integers(0, 2**41))
    return [
        (i, base_timestamp + draw(st.integers(0, 10**5)), draw(blobs), draw(blobs))
        for i in range(count)
    ]


def _as_kfast(kafka_python_rows):
    # kafka-python says None where Kafka (and kfast) say NO_TIMESTAMP(_TYPE) = -1.
    return [
        (o, -1 if t is None else t, -1 if tt is None else tt, k, v)
        for o, t, tt, k, v in kafka_python_rows
    ]


def _fields(records):
    return [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value) for r in records]


def _seal(message_set: bytearray, entry_at=0):
    """Recompute the CRC-32 of the entry at entry_at after a test edited it."""
    size = struct.unpack_from(">i", message_set, entry_at + 8)[0]
    end = entry_at + 12 + size
    struct.pack_into(">I", message_set, entry_at + 12, zlib.crc32(message_set[entry_at + 16 : end]))
    return message_set


# ---------------------------------------------------------------- kafka-python -> kfast
@pytest.mark.parametrize("magic", MAGICS)
@pytest.mark.parametrize("codec", LEGACY_CODECS)
@per_combination
@given(records=message_specs())
def test_decodes_what_kafka_python_builds(magic, codec, records):
    with kafka_python_codecs_installed():
        message_set = kafka_python_message_set(magic, records, codec)
        expected = _as_kfast(kafka_python_legacy_records(message_set, magic))
    decoded = decode_message_set(message_set)
    assert _fields(decoded) == expected
    assert all(isinstance(r, LegacyRecord) and r.magic == magic for r in decoded)
    if magic == 1:
        assert [r.timestamp for r in decoded] == [t for _, t, _, _ in records]


# ---------------------------------------------------------------- kfast -> kafka-python
@pytest.mark.parametrize("magic", MAGICS)
@pytest.mark.parametrize("codec", LEGACY_CODECS)
@per_combination
@given(records=message_specs(), base_offset=st.integers(0, 2**40))
def test_kafka_python_reads_what_kfast_builds(magic, codec, records, base_offset):
    records = [(base_offset + i, t, k, v) for i, t, k, v in records]
    message_set = build_message_set(magic, records, codec)
    with kafka_python_codecs_installed():
        read = kafka_python_legacy_records(message_set, magic)
    assert [(o, k, v) for o, _, _, k, v in read] == [(o, k, v) for o, _, k, v in records]
    if magic == 1:
        assert [t for _, t, _, _, _ in read] == [t for _, t, _, _ in records]
    assert _fields(decode_message_set(message_set)) == _as_kfast(read)


def test_compressed_wrapper_layout_follows_the_java_builder():
    message_set = build_message_set(1, [(100, 5, b"a", b"1"), (101, 9, b"b", b"2")], 1)
    offset, size, _, magic, attributes, timestamp = struct.unpack_from(">qiIbbq", message_set)
    assert (offset, magic, attributes, timestamp) == (101, 1, 1, 9)  # last offset, max timestamp
    assert 12 + size == len(message_set)
    assert [r.offset for r in decode_message_set(message_set)] == [100, 101]
    magic0 = build_message_set(0, [(100, 5, b"a", b"1"), (101, 9, b"b", b"2")], 1)
    assert struct.unpack_from(">q", magic0)[0] == 101
    assert [r.offset for r in decode_message_set(magic0)] == [100, 101]


def test_magic0_lz4_is_written_with_kafkas_broken_header_checksum():
    message_set = build_message_set(0, [(0, -1, b"k", b"v" * 100)], 3)
    frame = message_set[
        12 + 6 + 4 + 4 :
    ]  # offset+size, crc+magic+attributes, key and value lengths
    assert frame[:4] == b"\x04\x22\x4d\x18"
    assert frame[6] == (xxh32(frame[0:6]) >> 8) & 0xFF
    assert frame[6] != (xxh32(frame[4:6]) >> 8) & 0xFF
    assert decode_message_set(message_set)[0].value == b"v" * 100
    with kafka_python_codecs_installed():
        assert kafka_python_legacy_records(message_set, 0)[0][4] == b"v" * 100


def test_log_append_time_wrapper_timestamp_overrides_inner_ones():
    message_set = build_message_set(
        1, [(0, 5, b"a", b"1"), (1, 6, b"b", b"2")], 2, timestamp_type=1, log_append_time=7777
    )
    decoded = decode_message_set(message_set)
    assert [(r.timestamp, r.timestamp_type) for r in decoded] == [(7777, 1), (7777, 1)]
    with kafka_python_codecs_installed():
        assert [(t, tt) for _, t, tt, _, _ in kafka_python_legacy_records(message_set, 1)] == [
            (7777, 1),
            (7777, 1),
        ]


# ---------------------------------------------------------------- up-conversion
@pytest.mark.parametrize("magic", MAGICS)
@pytest.mark.parametrize("codec", LEGACY_CODECS)
@per_combination
@given(records=message_specs())
def test_up_converted_batch_is_read_by_kafka_python(magic, codec, records):
    with kafka_python_codecs_installed():
        message_set = kafka_python_message_set(magic, records, codec)
        compressed = message_set[17] & 0x07
        batch = convert_message_set_to_v2(message_set)
        parsed = DefaultRecordBatch(batch)
        assert parsed.validate_crc()
        assert parsed.compression_type == compressed
        assert (parsed.producer_id, parsed.base_offset) == (-1, 0)
        rows = [(r.offset, r.timestamp, r.key, r.value) for r in parsed]
    expected_timestamps = [t if magic == 1 else -1 for _, t, _, _ in records]
    assert rows == [
        (i, t, k, v) for i, ((_, _, k, v), t) in enumerate(zip(records, expected_timestamps))
    ]


def test_up_conversion_can_change_codec():
    message_set = build_message_set(1, [(0, 5, b"a", b"1" * 50)], 1)
    batch = convert_message_set_to_v2(message_set, compression=4)
    assert batch[22] & 0x07 == 4
    with kafka_python_codecs_installed():
        assert [r[4] for r in kafka_python_v2_records(batch)] == [b"1" * 50]
    assert convert_message_set_to_v2(b"") == b""


# ---------------------------------------------------------------- down-conversion
@pytest.mark.parametrize("magic", MAGICS)
@pytest.mark.parametrize("codec", LEGACY_CODECS)
@per_combination
@given(records=message_specs(), base_offset=st.integers(0, 2**40))
def test_down_converted_message_set_is_read_by_kafka_python(magic, codec, records, base_offset):
    with kafka_python_codecs_installed():
        batch = kafka_python_v2_batch(
            [(i, t, k, v, [("h", b"x")]) for i, t, k, v in records],
            compression=codec,
            base_offset=base_offset,
        )
        message_set = convert_v2_to_message_set(batch, magic)
        read = kafka_python_legacy_records(message_set, magic)
    assert message_set[17] & 0x07 == batch[22] & 0x07
    assert [(o, k, v) for o, _, _, k, v in read] == [
        (base_offset + i, k, v) for i, _, k, v in records
    ]
    if magic == 1:
        assert [t for _, t, _, _, _ in read] == [t for _, t, _, _ in records]


def test_down_conversion_drops_control_batches_and_rejects_zstd():
    data = kafka_python_v2_batch(
        [(0, 1, b"k", b"v", [])],
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
    )
    marker = build_control_batch(1, 7, 0, 3, 2, base_offset=1)
    message_set = convert_v2_to_message_set(data + marker, 1)
    assert [(r.offset, r.key) for r in decode_message_set(message_set)] == [(0, b"k")]
    builder = RecordBatchBuilder(4)
    builder.append(1, b"k", b"v")
    with pytest.raises(UnsupportedCompressionTypeException):
        convert_v2_to_message_set(builder.build(), 1)


def test_down_conversion_keeps_log_append_time_and_drops_records_below_first_offset():
    builder = RecordBatchBuilder(0, base_offset=10, timestamp_type=1)
    for i in range(4):
        builder.append(100 + i, b"k%d" % i, b"v")
    message_set = convert_v2_to_message_set(builder.build(), 1, first_offset=12)
    decoded = decode_message_set(message_set)
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in decoded] == [
        (12, 103, 1),
        (13, 103, 1),
    ]
    compressed = RecordBatchBuilder(1, base_offset=10)
    for i in range(4):
        compressed.append(100 + i, b"k%d" % i, b"v")
    # A compressed batch goes whole (Kafka cannot split a wrapper either).
    assert (
        len(decode_message_set(convert_v2_to_message_set(compressed.build(), 1, first_offset=12)))
        == 4
    )


# ---------------------------------------------------------------- partial and corrupt input
@given(records=message_specs(min_size=2), data=st.data())
def test_trailing_partial_entry_is_ignored(records, data):
    message_set = build_message_set(1, records)
    whole = build_message_set(1, records[:-1])
    last = message_set[len(whole) :]
    cut = data.draw(st.integers(0, len(last) - 1))
    assert _fields(decode_message_set(whole + last[:cut])) == _fields(decode_message_set(whole))


def test_bad_crc_raises():
    message_set = bytearray(build_message_set(1, [(0, 1, b"k", b"v")]))
    message_set[-1] ^= 0xFF
    with pytest.raises(CorruptRecordException, match="CRC"):
        decode_message_set(bytes(message_set))


@pytest.mark.parametrize("magic", [2, 3, -1])
def test_magic_other_than_0_or_1_raises(magic):
    message_set = bytearray(build_message_set(1, [(0, 1, b"k", b"v")]))
    message_set[16] = magic & 0xFF
    with pytest.raises(CorruptRecordException, match="magic"):
        decode_message_set(bytes(_seal(message_set)))


def test_sizes_below_the_minimum_or_beyond_the_message_raise():
    message_set = bytearray(build_message_set(0, [(0, 1, b"k", b"v")]))
    struct.pack_into(">i", message_set, 8, 13)
    with pytest.raises(CorruptRecordException, match="minimum"):
        decode_message_set(bytes(message_set))
    message_set = bytearray(build_message_set(1, [(0, 1, b"key", b"v")]))
    struct.pack_into(">i", message_set, 26, 1000)  # key length
    with pytest.raises(CorruptRecordException, match="key length"):
        decode_message_set(bytes(_seal(message_set)))
    message_set = bytearray(build_message_set(1, [(0, 1, b"key", b"v")]))
    struct.pack_into(">i", message_set, 26, 1)  # key shorter: bytes left over
    with pytest.raises(CorruptRecordException):
        decode_message_set(bytes(_seal(message_set)))


def _wrapper(magic, inner, codec=1):
    """A compressed message holding `inner` (None: a null value) as written."""
    out = bytearray(
        build_message_set(magic, [(0, 1, None, None if inner is None else compress(codec, inner))])
    )
    out[17] |= codec
    return bytes(_seal(out))


def test_invalid_wrappers_raise():
    inner = build_message_set(1, [(0, 1, b"k", b"v")])
    assert [r.key for r in decode_message_set(_wrapper(1, inner))] == [b"k"]
    with pytest.raises(CorruptRecordException, match="nests"):
        decode_message_set(_wrapper(1, _wrapper(1, inner)))
    with pytest.raises(CorruptRecordException, match="magic"):
        decode_message_set(_wrapper(0, inner))
    with pytest.raises(CorruptRecordException, match="no inner"):
        decode_message_set(_wrapper(1, b""))
    with pytest.raises(CorruptRecordException, match="truncated"):
        decode_message_set(_wrapper(1, inner[:-1]))
    with pytest.raises(CorruptRecordException, match="null value"):
        decode_message_set(_wrapper(1, None))
    bad_codec = bytearray(build_message_set(1, [(0, 1, None, b"x")]))
    bad_codec[17] |= 4
    with pytest.raises(UnsupportedCompressionTypeException):
        decode_message_set(bytes(_seal(bad_codec)))


@pytest.mark.parametrize("codec", LEGACY_CODECS)
@per_combination
@given(records=message_specs(), data=st.data())
def test_bit_flips_raise_kafka_errors_or_decode(codec, records, data):
    message_set = bytearray(build_message_set(1, records, codec))
    position = data.draw(st.integers(0, len(message_set) - 1))
    message_set[position] ^= 1 << data.draw(st.integers(0, 7))
    if data.draw(st.booleans()):
        _seal(message_set)  # get past the CRC to the structure checks
    try:
        decode_message_set(bytes(message_set))
    except KafkaError:
        pass


@pytest.mark.slow
@given(
    specs=st.lists(
        st.tuples(st.sampled_from(MAGICS), st.sampled_from(LEGACY_CODECS), message_specs()),
        min_size=1,
        max_size=3,
    ),
    data=st.data(),
)
def test_any_truncation_decodes_exactly_the_whole_entries(specs, data):
    # A fetch may end anywhere: what remains decodes to the entries that are
    # whole, compressed wrappers included, and never raises.
    message_set = b"".join(
        build_message_set(magic, records, codec) for magic, codec, records in specs
    )
    cut = data.draw(st.integers(0, len(message_set)))
    whole = 0  # bytes of the entries that end before the cut
    while whole + 12 <= cut:
        size = 12 + struct.unpack_from(">i", message_set, whole + 8)[0]
        if whole + size > cut:
            break
        whole += size
    assert _fields(decode_message_set(message_set[:cut])) == _fields(
        decode_message_set(message_set[:whole])
    )
    assert whole == 0 or decode_message_set(message_set[:whole])
