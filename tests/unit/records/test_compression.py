"""kfast.compression: round trips, Java-compatible framing, bounded output."""

import gzip
import struct
import zlib

import cramjam
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfast import compression
from kfast.compression import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    compress,
    decompress,
    xxh32,
)
from kfast.protocol.errors import CorruptRecordException, UnsupportedCompressionTypeException

CODECS = [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD]
COMPRESSED = CODECS[1:]


@pytest.mark.parametrize("codec", CODECS)
@given(
    data=st.binary(max_size=5000)
    | st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=50), st.integers(1, 4000))
)
def test_round_trip(codec, data):
    packed = compress(codec, data)
    assert isinstance(packed, bytes)
    assert decompress(codec, packed) == data
    # bytearray and memoryview inputs are accepted too
    assert decompress(codec, memoryview(bytearray(packed))) == data


@pytest.mark.parametrize("codec", CODECS)
def test_multi_block_payload(codec):
    data = bytes(range(256)) * 1200 + bytes(200_000)  # > 64 KiB lz4 and 32 KiB snappy blocks
    assert decompress(codec, compress(codec, data)) == data


def test_snappy_writes_xerial_framing_like_java():
    data = b"kafka" * 20000
    packed = compress(COMPRESSION_SNAPPY, data)
    assert packed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, out = 16, b""
    while pos < len(packed):
        (n,) = struct.unpack_from(">i", packed, pos)
        block = bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + n]))
        assert len(block) <= 32 * 1024
        out += block
        pos += 4 + n
    assert out == data


def test_snappy_reads_raw_unframed():
    data = b"librdkafka writes raw snappy" * 100
    assert decompress(COMPRESSION_SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data


def test_lz4_writes_kafka_frame_header():
    packed = compress(COMPRESSION_LZ4, b"x" * 1000)
    assert packed[:4] == b"\x04\x22\x4d\x18"
    assert packed[4] == 0x60 and packed[5] == 0x40
    assert packed[6] == (xxh32(b"\x60\x40") >> 8) & 0xFF
    assert packed[-4:] == b"\x00\x00\x00\x00"
    assert bytes(cramjam.lz4.decompress(packed)) == b"x" * 1000


def test_lz4_reads_other_writers_frames():
    data = b"abc" * 30000
    assert decompress(COMPRESSION_LZ4, bytes(cramjam.lz4.compress(data))) == data


def test_lz4_legacy_broken_header_checksum():
    data = b"legacy" * 500
    packed = bytearray(compress(COMPRESSION_LZ4, data))
    # Kafka < 0.10 computed HC over magic + descriptor.
    packed[6] = (xxh32(bytes(packed[0:6])) >> 8) & 0xFF
    with pytest.raises(CorruptRecordException):
        decompress(COMPRESSION_LZ4, bytes(packed))
    assert decompress(COMPRESSION_LZ4, bytes(packed), lz4_broken_header_checksum=True) == data


def test_xxh32_known_vectors():
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


def test_gzip_is_standard_and_concatenated_members_are_read():
    data = b"gzip" * 1000
    assert gzip.decompress(compress(COMPRESSION_GZIP, data)) == data
    two = gzip.compress(b"first") + gzip.compress(b"second")
    assert decompress(COMPRESSION_GZIP, two) == b"firstsecond"


def test_zstd_is_standard():
    data = b"zstd" * 1000
    assert bytes(cramjam.zstd.decompress(compress(COMPRESSION_ZSTD, data))) == data


@pytest.mark.parametrize("codec", CODECS + [5, 7, -1])
def test_unknown_codec(codec):
    if codec in CODECS:
        return
    with pytest.raises(UnsupportedCompressionTypeException):
        compress(codec, b"x")
    with pytest.raises(UnsupportedCompressionTypeException):
        decompress(codec, b"x")


@pytest.mark.parametrize("codec", CODECS)
def test_output_bound(codec):
    data = bytes(300_000)
    packed = compress(codec, data)
    assert decompress(codec, packed, max_output=300_000) == data
    with pytest.raises(CorruptRecordException, match="max_output"):
        decompress(codec, packed, max_output=299_999)


def test_zstd_bomb_without_content_size_is_refused_before_decompression():
    # A streamed frame has no content size: the bound comes from block headers.
    comp = cramjam.zstd.Compressor()
    for _ in range(64):
        comp.compress(bytes(1 << 20))
    packed = bytes(comp.finish())
    with pytest.raises(CorruptRecordException, match="max_output"):
        decompress(COMPRESSION_ZSTD, packed, max_output=8 << 20)


@pytest.mark.parametrize("codec", COMPRESSED)
@given(
    data=st.binary(min_size=1, max_size=3000),
    cut=st.integers(0, 10_000),
    flip=st.integers(0, 80_000),
)
def test_corrupt_input_raises_corrupt_record(codec, data, cut, flip):
    packed = bytearray(compress(codec, data * 3))
    if flip // 8 < len(packed):
        packed[flip // 8] ^= 1 << (flip % 8)
    del packed[cut % (len(packed) + 1) :]
    try:
        decompress(codec, bytes(packed))
    except CorruptRecordException:
        pass  # anything else (IndexError, cramjam errors, ...) fails the test


@pytest.mark.parametrize("codec", COMPRESSED)
def test_garbage_raises_corrupt_record(codec):
    junks = [
        b"",
        b"not compressed at all",
        b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\xff\xff\xff\xff",
    ]
    if codec != COMPRESSION_SNAPPY:
        junks.append(b"\x00")  # (a lone 0 is a valid, empty raw snappy stream)
    for junk in junks:
        with pytest.raises(CorruptRecordException):
            decompress(codec, junk)


def test_gzip_level_matches_java_default():
    assert compression.GZIP_LEVEL == zlib.Z_DEFAULT_COMPRESSION or compression.GZIP_LEVEL == 6
