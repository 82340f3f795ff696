"""Varint kernel: zigzag round trips, agreement with an independent encoder,
and strict handling of truncated/overlong input."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfast._ext import varint
from kfast.protocol.errors import CorruptRecordException


def _reference_zigzag_uvarint(value: int, bits: int) -> bytes:
    # Independent encoder: protobuf's definition, written with Python ints.
    raw = (value << 1) ^ (value >> (bits - 1))
    raw &= (1 << bits) - 1
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip_matches_reference(value):
    encoded = varint.encode_varint(value)
    assert encoded == _reference_zigzag_uvarint(value, 32)
    assert varint.decode_varint(encoded) == (value, len(encoded))
    assert varint.size_of_varint(value) == len(encoded)


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip_matches_reference(value):
    encoded = varint.encode_varlong(value)
    assert encoded == _reference_zigzag_uvarint(value, 64)
    assert varint.decode_varlong(encoded) == (value, len(encoded))
    assert varint.size_of_varlong(value) == len(encoded)


@given(st.integers(0, 2**64 - 1))
def test_uvarint_round_trip(value):
    encoded = varint.encode_uvarint(value)
    assert varint.decode_uvarint(encoded) == (value, len(encoded))


@given(st.integers(-(2**63), 2**63 - 1), st.data())
def test_every_truncation_raises(value, data):
    encoded = varint.encode_varlong(value)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(CorruptRecordException):
        varint.decode_varlong(encoded[:cut])


@pytest.mark.parametrize(
    "decode, raw",
    [
        (varint.decode_varint, b"\x80\x80\x80\x80\x80\x01"),  # 6 bytes for an int32
        (varint.decode_varint, b"\xff\xff\xff\xff\x1f"),  # 5th byte carries > 32 bits
        (varint.decode_varlong, b"\x80" * 10 + b"\x01"),  # 11 bytes for an int64
        (varint.decode_varlong, b"\xff" * 9 + b"\x02"),  # 10th byte carries > 64 bits
    ],
)
def test_overlong_encodings_are_corrupt(decode, raw):
    with pytest.raises(CorruptRecordException):
        decode(raw)


def test_decode_at_offset_reads_only_the_window():
    buf = b"\x00" + varint.encode_varint(-300) + b"\x7f"
    value, nxt = varint.decode_varint(buf, 1)
    assert value == -300
    assert buf[nxt:] == b"\x7f"
