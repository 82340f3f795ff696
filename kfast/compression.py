"""Compression codecs of Kafka record batches, with bounded decompression.

    compress(codec, data) -> bytes
    decompress(codec, data, *, max_output=DEFAULT_MAX_OUTPUT) -> bytes

Codec ids are the three low bits of a batch's attributes (and of a legacy
message's attributes): 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd. What is
written matches what the Java producer writes, so batches built by kfast are
byte-compatible with what Kafka itself stores:

  gzip    one RFC 1952 member (zlib, default level like java.util.zip).
          Reading accepts several concatenated members.
  snappy  xerial framing, as org.xerial.snappy.SnappyOutputStream writes it:
              header := 82 'S' 'N' 'A' 'P' 'P' 'Y' 00   (8-byte magic)
                        int32 version = 1, int32 compatible = 1  (big-endian)
              block  := int32 length (big-endian), raw snappy of <= 32 KiB input
          Reading also accepts a raw (unframed) snappy stream: librdkafka and
          other clients write one.
  lz4     LZ4 frame as KafkaLZ4BlockOutputStream writes it:
              frame  := magic 04 22 4D 18 (0x184D2204 LE), FLG 0x60 (version 1,
                        independent blocks, no checksums), BD 0x40 (64 KiB
                        blocks), HC = (xxh32(FLG BD) >> 8) & 0xFF,
                        block*, end mark int32 0
              block  := uint32 LE size (high bit set = stored uncompressed),
                        data
          Reading accepts any valid frame (checksums, content size, linked
          blocks) and concatenated/skippable frames.
  zstd    standard zstd frames.

Decompression bomb guard: a few kilobytes of compressed input can claim
gigabytes of output. Before anything is decompressed, the frame structure is
walked to bound the output (zstd and lz4 block headers, snappy's length
preamble); gzip streams with a hard output limit. Output beyond ``max_output``
(default 64 MiB: above Kafka's default message.max.bytes of ~1 MiB and
fetch.max.bytes of 50 MiB, so no valid batch a broker accepts can hit it) fails
with CorruptRecordException without allocating it.

Errors: an unknown codec id -> UnsupportedCompressionTypeException; corrupt or
oversized compressed data -> CorruptRecordException.
"""

from __future__ import annotations

import struct
import zlib

import cramjam

from kfast.protocol.errors import (
    CorruptRecordException,
    UnsupportedCompressionTypeException,
)

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4

#: Kafka's ``compression.type`` names, by codec id.
CODEC_NAMES = {
    COMPRESSION_NONE: "none",
    COMPRESSION_GZIP: "gzip",
    COMPRESSION_SNAPPY: "snappy",
    COMPRESSION_LZ4: "lz4",
    COMPRESSION_ZSTD: "zstd",
}

#: Default bound on the size of one decompressed payload (see module docstring).
DEFAULT_MAX_OUTPUT = 64 * 1024 * 1024

# The Java producer's default levels: gzip uses Deflater's default (6), zstd
# zstd-jni's default (3); lz4 block compression has no level in the Java client.
GZIP_LEVEL = 6
ZSTD_LEVEL = 3

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024

LZ4_FRAME_MAGIC = 0x184D2204
LZ4_SKIPPABLE_MASK = 0xFFFFFFF0
LZ4_SKIPPABLE_MAGIC = 0x184D2A50
LZ4_BLOCK_SIZE = 64 * 1024
LZ4_FLG = 0x60  # version 01, block independence, no checksums
LZ4_BD = 0x40  # block max size 64 KiB
LZ4_BLOCK_MAX = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
LZ4_STORED = 0x80000000

ZSTD_FRAME_MAGIC = 0xFD2FB528
ZSTD_SKIPPABLE_MASK = 0xFFFFFFF0
ZSTD_SKIPPABLE_MAGIC = 0x184D2A50
ZSTD_BLOCK_MAX = 128 * 1024

_u32le = struct.Struct("<I")
_u32be = struct.Struct(">I")


def _codec_error(codec: int) -> UnsupportedCompressionTypeException:
    return UnsupportedCompressionTypeException(
        f"Unknown compression codec id {codec} (known: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)"
    )


def _too_large(name: str, bound: int, max_output: int) -> CorruptRecordException:
    return CorruptRecordException(
        f"{name} payload would decompress to more than max_output={max_output} bytes "
        f"(frame structure allows {bound})"
    )


# ---------------------------------------------------------------- xxHash32
# Only needed for LZ4 frame header checksums (a few bytes), so pure Python.
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 of ``data`` (the hash the LZ4 frame format uses)."""
    n = len(data)
    i = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while i + 16 <= n:
            for k in range(4):
                lane = _u32le.unpack_from(data, i + 4 * k)[0]
                v[k] = (_rotl((v[k] + lane * _P2) & _M32, 13) * _P1) & _M32
            i += 16
        acc = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        acc = (seed + _P5) & _M32
    acc = (acc + n) & _M32
    while i + 4 <= n:
        acc = (acc + _u32le.unpack_from(data, i)[0] * _P3) & _M32
        acc = (_rotl(acc, 17) * _P4) & _M32
        i += 4
    while i < n:
        acc = (acc + data[i] * _P5) & _M32
        acc = (_rotl(acc, 11) * _P1) & _M32
        i += 1
    acc ^= acc >> 15
    acc = (acc * _P2) & _M32
    acc ^= acc >> 13
    acc = (acc * _P3) & _M32
    acc ^= acc >> 16
    return acc


_LZ4_HEADER = (
    _u32le.pack(LZ4_FRAME_MAGIC)
    + bytes((LZ4_FLG, LZ4_BD))
    + bytes(((xxh32(bytes((LZ4_FLG, LZ4_BD))) >> 8) & 0xFF,))
)
_LZ4_END_MARK = b"\x00\x00\x00\x00"


# ---------------------------------------------------------------- compress
def compress(codec: int, data) -> bytes:
    """Compress ``data`` (any bytes-like object) with Kafka codec ``codec``."""
    if codec == COMPRESSION_NONE:
        return bytes(data)
    if codec == COMPRESSION_GZIP:
        c = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return c.compress(data) + c.flush()
    if codec == COMPRESSION_SNAPPY:
        return _snappy_xerial_compress(data)
    if codec == COMPRESSION_LZ4:
        return _lz4_frame_compress(data)
    if codec == COMPRESSION_ZSTD:
        return bytes(cramjam.zstd.compress(data, level=ZSTD_LEVEL))
    raise _codec_error(codec)


def _snappy_xerial_compress(data) -> bytes:
    view = memoryview(data).cast("B")
    parts = [XERIAL_HEADER]
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_SIZE]))
        parts.append(_u32be.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _lz4_frame_compress(data) -> bytes:
    view = memoryview(data).cast("B")
    parts = [_LZ4_HEADER]
    for start in range(0, len(view), LZ4_BLOCK_SIZE):
        chunk = view[start : start + LZ4_BLOCK_SIZE]
        block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
        if len(block) >= len(chunk):
            # Incompressible: store it, as the LZ4 frame format allows.
            parts.append(_u32le.pack(len(chunk) | LZ4_STORED))
            parts.append(bytes(chunk))
        else:
            parts.append(_u32le.pack(len(block)))
            parts.append(block)
    parts.append(_LZ4_END_MARK)
    return b"".join(parts)


# ---------------------------------------------------------------- decompress
def decompress(
    codec: int,
    data,
    *,
    max_output: int = DEFAULT_MAX_OUTPUT,
    lz4_broken_header_checksum: bool = False,
) -> bytes:
    """Decompress a payload written with Kafka codec ``codec``.

    ``max_output`` bounds the decompressed size (see module docstring).
    ``lz4_broken_header_checksum``: magic v0 message sets were written by
    Kafka < 0.10 with the LZ4 frame header checksum computed over the magic
    number too; set it to accept those (the legacy message-set reader does).
    """
    try:
        if codec == COMPRESSION_NONE:
            if len(data) > max_output:
                raise _too_large("uncompressed", len(data), max_output)
            return bytes(data)
        if codec == COMPRESSION_GZIP:
            return _gzip_decompress(data, max_output)
        if codec == COMPRESSION_SNAPPY:
            return _snappy_decompress(data, max_output)
        if codec == COMPRESSION_LZ4:
            return _lz4_decompress(data, max_output, lz4_broken_header_checksum)
        if codec == COMPRESSION_ZSTD:
            return _zstd_decompress(data, max_output)
    except (CorruptRecordException, UnsupportedCompressionTypeException):
        raise
    except (
        cramjam.DecompressionError,
        zlib.error,
        ValueError,
        OSError,
        struct.error,
        IndexError,
    ) as e:
        raise CorruptRecordException(f"Corrupt {CODEC_NAMES[codec]} payload: {e}") from None
    raise _codec_error(codec)


def _gzip_decompress(data, max_output: int) -> bytes:
    # Members are decompressed one after another (a concatenation of gzip
    # members is a valid gzip stream); max_length stops a bomb mid-stream.
    out = []
    total = 0
    rest = bytes(data)
    if not rest:
        raise CorruptRecordException("Corrupt gzip payload: empty")
    while rest:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        chunk = d.decompress(rest, max_output - total + 1)
        total += len(chunk)
        if total > max_output:
            raise _too_large("gzip", total, max_output)
        if not d.eof:
            raise CorruptRecordException("Corrupt gzip payload: truncated stream")
        out.append(chunk)
        rest = d.unused_data
    return b"".join(out)


def _snappy_decompress(data, max_output: int) -> bytes:
    view = memoryview(data).cast("B")
    if view[:8] != XERIAL_MAGIC:
        # Raw snappy: its preamble is the uncompressed length.
        size = cramjam.snappy.decompress_raw_len(view)
        if size > max_output:
            raise _too_large("snappy", size, max_output)
        return bytes(cramjam.snappy.decompress_raw(view))
    if len(view) < 16:
        raise CorruptRecordException("Corrupt snappy payload: truncated xerial header")
    blocks = []
    total = 0
    pos = 16
    n = len(view)
    while pos < n:
        if pos + 4 > n:
            raise CorruptRecordException("Corrupt snappy payload: truncated xerial block length")
        length = _u32be.unpack_from(view, pos)[0]
        pos += 4
        if length > n - pos:
            raise CorruptRecordException(
                f"Corrupt snappy payload: xerial block of {length} bytes, {n - pos} remain"
            )
        block = view[pos : pos + length]
        pos += length
        size = cramjam.snappy.decompress_raw_len(block)
        total += size
        if total > max_output:
            raise _too_large("snappy", total, max_output)
        blocks.append((block, size))
    out = bytearray(total)
    target = memoryview(out)
    at = 0
    for block, size in blocks:
        written = cramjam.snappy.decompress_raw_into(block, target[at : at + size])
        if written != size:
            raise CorruptRecordException("Corrupt snappy payload: block shorter than its preamble")
        at += size
    return bytes(out)


def _lz4_decompress(data, max_output: int, broken_header_checksum: bool) -> bytes:
    view = memoryview(data).cast("B")
    if broken_header_checksum:
        view = memoryview(_lz4_fix_header_checksums(view))
    bound = _lz4_output_bound(view)
    if bound > max_output:
        return _decompress_capped(cramjam.lz4, "lz4", view, bound, max_output)
    return bytes(cramjam.lz4.decompress(view))


def _lz4_frame_header(view, pos: int) -> tuple[int, int, int]:
    """(FLG, block max size, position of the HC byte) of the frame at ``pos``."""
    n = len(view)
    if pos + 7 > n:
        raise CorruptRecordException("Corrupt lz4 payload: truncated frame header")
    flg = view[pos + 4]
    bd = view[pos + 5]
    if flg >> 6 != 1:
        raise CorruptRecordException(f"Corrupt lz4 payload: frame version {flg >> 6}")
    block_max = LZ4_BLOCK_MAX.get((bd >> 4) & 7)
    if block_max is None:
        raise CorruptRecordException(f"Corrupt lz4 payload: block size code {(bd >> 4) & 7}")
    hc = pos + 6
    if flg & 0x08:  # content size: 8 bytes, not trusted (see _lz4_output_bound)
        hc += 8
    if flg & 0x01:
        hc += 4
    if hc >= n:
        raise CorruptRecordException("Corrupt lz4 payload: truncated frame header")
    return flg, block_max, hc


def _frames_output_bound(
    view, codec: str, frame_magic: int, skippable_mask: int, skippable_magic: int, frame_bound
) -> int:
    """Sum ``frame_bound(view, pos) -> (bound, next_pos)`` over the frames
    of ``view``, skipping skippable frames. LZ4 and zstd share this framing
    (4-byte little-endian magic; skippable frames: magic, 4-byte size,
    payload)."""
    n = len(view)
    pos = 0
    total = 0
    if n == 0:
        raise CorruptRecordException(f"Corrupt {codec} payload: empty")
    while pos < n:
        if pos + 4 > n:
            raise CorruptRecordException(f"Corrupt {codec} payload: trailing bytes after frame")
        magic = _u32le.unpack_from(view, pos)[0]
        if magic & skippable_mask == skippable_magic:
            if pos + 8 > n:
                raise CorruptRecordException(f"Corrupt {codec} payload: truncated skippable frame")
            pos += 8 + _u32le.unpack_from(view, pos + 4)[0]
            continue
        if magic != frame_magic:
            raise CorruptRecordException(f"Corrupt {codec} payload: bad frame magic {magic:#x}")
        bound, pos = frame_bound(view, pos)
        total += bound
    if pos > n:
        raise CorruptRecordException(f"Corrupt {codec} payload: truncated frame")
    return total


def _lz4_output_bound(view) -> int:
    """An upper bound of the output of every frame in ``view``, from block headers."""
    return _frames_output_bound(
        view, "lz4", LZ4_FRAME_MAGIC, LZ4_SKIPPABLE_MASK, LZ4_SKIPPABLE_MAGIC, _lz4_frame_bound
    )


def _lz4_frame_bound(view, pos: int) -> tuple[int, int]:
    n = len(view)
    flg, block_max, hc = _lz4_frame_header(view, pos)
    pos = hc + 1
    frame_bound = 0
    while True:
        if pos + 4 > n:
            raise CorruptRecordException("Corrupt lz4 payload: truncated block header")
        size = _u32le.unpack_from(view, pos)[0]
        pos += 4
        if size == 0:
            break
        stored = size & LZ4_STORED
        size &= ~LZ4_STORED & _M32
        if size > block_max or size > n - pos:
            raise CorruptRecordException(
                f"Corrupt lz4 payload: block of {size} bytes (max {block_max}, {n - pos} remain)"
            )
        frame_bound += size if stored else block_max
        pos += size + (4 if flg & 0x10 else 0)
    if flg & 0x04:
        pos += 4
    # A declared content size is not used to tighten the bound: it is a
    # claim the decoder may only check after producing the output.
    return frame_bound, pos


def _lz4_fix_header_checksums(view) -> bytearray:
    """Rewrite each frame's HC byte as the LZ4 spec defines it (over FLG..HC)."""
    fixed = bytearray(view)
    pos = 0
    n = len(fixed)
    while pos + 4 <= n and _u32le.unpack_from(fixed, pos)[0] == LZ4_FRAME_MAGIC:
        flg, block_max, hc = _lz4_frame_header(fixed, pos)
        fixed[hc] = (xxh32(bytes(fixed[pos + 4 : hc])) >> 8) & 0xFF
        pos = hc + 1
        while pos + 4 <= n:
            size = _u32le.unpack_from(fixed, pos)[0]
            pos += 4
            if size == 0:
                break
            pos += (size & ~LZ4_STORED & _M32) + (4 if flg & 0x10 else 0)
        if flg & 0x04:
            pos += 4
    return fixed


def _zstd_decompress(data, max_output: int) -> bytes:
    view = memoryview(data).cast("B")
    bound = _zstd_output_bound(view)
    if bound > max_output:
        return _decompress_capped(cramjam.zstd, "zstd", view, bound, max_output)
    return bytes(cramjam.zstd.decompress(view))


def _decompress_capped(module, name: str, view, bound: int, max_output: int) -> bytes:
    """Decompress into a buffer of exactly max_output bytes.

    Used when the frame-structure bound is above max_output: the bound counts
    every compressed block at its maximum size, so the real output may still
    fit. The decoder stops, with an error, when the buffer is full.
    """
    out = bytearray(max_output)
    try:
        written = module.decompress_into(view, out)
    except cramjam.DecompressionError as e:
        if "failed to write whole buffer" in str(e):
            raise _too_large(name, bound, max_output) from None
        raise
    del out[written:]
    return bytes(out)


# Frame_Content_Size field width by FCS_Flag (single-segment frames use 1 byte for flag 0).
_ZSTD_FCS_WIDTH = (0, 2, 4, 8)
_ZSTD_DICT_WIDTH = (0, 1, 2, 4)


def _zstd_output_bound(view) -> int:
    """An upper bound of the output of every frame in ``view`` (RFC 8878 section 3.1.1).

    The sum over blocks: raw and RLE blocks state their size, a compressed
    block regenerates at most 128 KiB. Frame_Content_Size is skipped, not
    trusted: it is a claim, the block headers are what the decoder follows.
    """
    return _frames_output_bound(
        view, "zstd", ZSTD_FRAME_MAGIC, ZSTD_SKIPPABLE_MASK, ZSTD_SKIPPABLE_MAGIC, _zstd_frame_bound
    )


def _zstd_frame_bound(view, pos: int) -> tuple[int, int]:
    n = len(view)
    if pos + 5 > n:
        raise CorruptRecordException("Corrupt zstd payload: truncated frame header")
    fhd = view[pos + 4]
    pos += 5
    single_segment = fhd & 0x20
    fcs_flag = fhd >> 6
    fcs_width = _ZSTD_FCS_WIDTH[fcs_flag] or (1 if single_segment else 0)
    header_rest = (0 if single_segment else 1) + _ZSTD_DICT_WIDTH[fhd & 3] + fcs_width
    if pos + header_rest > n:
        raise CorruptRecordException("Corrupt zstd payload: truncated frame header")
    pos += header_rest
    frame_bound = 0
    while True:
        if pos + 3 > n:
            raise CorruptRecordException("Corrupt zstd payload: truncated block header")
        header = view[pos] | (view[pos + 1] << 8) | (view[pos + 2] << 16)
        pos += 3
        last = header & 1
        block_type = (header >> 1) & 3
        size = header >> 3
        if block_type == 0:  # raw
            frame_bound += size
            pos += size
        elif block_type == 1:  # RLE: one byte repeated `size` times
            frame_bound += size
            pos += 1
        elif block_type == 2:  # compressed
            frame_bound += ZSTD_BLOCK_MAX
            pos += size
        else:
            raise CorruptRecordException("Corrupt zstd payload: reserved block type")
        if pos > n:
            raise CorruptRecordException("Corrupt zstd payload: truncated block")
        if last:
            break
    if fhd & 0x04:
        pos += 4  # content checksum
    return frame_bound, pos
