"""kafka-python as an independent oracle for the record codecs.

kafka-python builds and reads legacy message sets (magic 0/1) and v2 batches
in pure Python, but needs python-snappy, lz4, xxhash and zstandard for the
compressed ones; kfast does not depend on those. ``kafka_python_codecs``
installs stand-ins for exactly the primitives kafka-python calls (raw snappy
blocks, an LZ4 frame, xxh32, a zstd frame) built on cramjam, while
kafka-python's own framing code (xerial snappy blocks, the broken LZ4 header
checksum of magic 0, message-set wrapping) stays what is under test.

Other test modules import ``kafka_python_codecs`` and the helpers below; the
tests here check the stand-ins themselves.
"""

import types

import cramjam
import kafka.codec
import kafka.record.default_records as kp_default
import kafka.record.legacy_records as kp_legacy
import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder

from kfast.compression import xxh32


class _XXH32:
    # xxhash.xxh32(data).digest(): the hash as 4 big-endian bytes.
    def __init__(self, data):
        self._value = xxh32(bytes(data))

    def digest(self):
        return self._value.to_bytes(4, "big")


class _ZstdCompressor:
    def compress(self, data):
        return bytes(cramjam.zstd.compress(bytes(data)))


class _ZstdReader:
    def __init__(self, stream):
        self._data = bytes(cramjam.zstd.decompress(stream.read()))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def read(self):
        return self._data


class _ZstdDecompressor:
    def stream_reader(self, stream, read_across_frames=True):
        return _ZstdReader(stream)


def _lz4_frame_encode(payload):
    return bytes(cramjam.lz4.compress(bytes(payload)))


def _lz4_frame_decode(payload):
    return bytes(cramjam.lz4.decompress(bytes(payload)))


_SNAPPY = types.SimpleNamespace(
    compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
    decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))),
)
_ZSTD = types.SimpleNamespace(ZstdCompressor=_ZstdCompressor, ZstdDecompressor=_ZstdDecompressor)
_XXHASH = types.SimpleNamespace(xxh32=_XXH32)
_LZ4 = types.SimpleNamespace(compress=_lz4_frame_encode, decompress=_lz4_frame_decode)


def install_kafka_python_codecs(patch):
    """Give kafka-python its codec libraries; ``patch(obj, name, value)``
    (pytest's monkeypatch.setattr) undoes it after the test."""
    patch(kafka.codec, "snappy", _SNAPPY)
    patch(kafka.codec, "zstd", _ZSTD)
    patch(kafka.codec, "xxhash", _XXHASH)
    patch(kafka.codec, "lz4", _LZ4)
    for module in (kafka.codec, kp_legacy, kp_default):
        if hasattr(module, "lz4_encode"):
            patch(module, "lz4_encode", _lz4_frame_encode)
        if hasattr(module, "lz4_decode"):
            patch(module, "lz4_decode", _lz4_frame_decode)


@pytest.fixture
def kafka_python_codecs(monkeypatch):
    install_kafka_python_codecs(monkeypatch.setattr)


class _Patcher:
    """monkeypatch for hypothesis tests, where function-scoped fixtures are
    not reset between examples: a context manager doing the same."""

    def __init__(self):
        self._undo = []

    def __call__(self, obj, name, value):
        self._undo.append((obj, name, getattr(obj, name)))
        setattr(obj, name, value)

    def __enter__(self):
        install_kafka_python_codecs(self)
        return self

    def __exit__(self, *exc):
        for obj, name, value in reversed(self._undo):
            setattr(obj, name, value)
        return False


def kafka_python_codecs_installed():
    return _Patcher()


# ---------------------------------------------------------------- builders
def kafka_python_v2_batch(
    records,
    compression=0,
    base_offset=0,
    producer_id=-1,
    producer_epoch=-1,
    base_sequence=-1,
    transactional=False,
):
    """A v2 batch built by kafka-python; records are (offset_delta, timestamp,
    key, value, headers). baseOffset is patched in (the builder writes 0);
    it is not covered by the CRC."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=2**31 - 1,
    )
    for offset_delta, timestamp, key, value, headers in records:
        assert (
            builder.append(
                offset_delta, timestamp=timestamp, key=key, value=value, headers=list(headers)
            )
            is not None
        )
    out = bytearray(builder.build())
    out[0:8] = base_offset.to_bytes(8, "big", signed=True)
    return bytes(out)


def kafka_python_v2_records(buffer):
    """(offset, timestamp, timestamp_type, key, value, headers) of every record
    of every whole batch in buffer, read by kafka-python, control batches
    skipped (as a consumer does)."""
    out = []
    view = memoryview(buffer)
    pos = 0
    while pos + 12 <= len(view):
        size = 12 + int.from_bytes(view[pos + 8 : pos + 12], "big")
        if pos + size > len(view):
            break
        batch = DefaultRecordBatch(bytes(view[pos : pos + size]))
        assert batch.validate_crc()
        if not batch.is_control_batch:
            for r in batch:
                out.append(
                    (
                        r.offset,
                        r.timestamp,
                        r.timestamp_type,
                        r.key,
                        r.value,
                        [(k, v) for k, v in r.headers],
                    )
                )
        pos += size
    return out


def kafka_python_message_set(magic, records, compression=0):
    """A legacy message set built by kafka-python; records are (offset,
    timestamp, key, value)."""
    builder = LegacyRecordBatchBuilder(magic, compression, 2**31 - 1)
    for offset, timestamp, key, value in records:
        assert builder.append(offset, timestamp, key, value) is not None
    return bytes(builder.build())


def kafka_python_legacy_records(buffer, magic):
    """(offset, timestamp, timestamp_type, key, value) read by kafka-python
    from a message set whose messages all have the given magic."""
    out = []
    view = memoryview(buffer)
    pos = 0
    while pos + 12 <= len(view):
        size = 12 + int.from_bytes(view[pos + 8 : pos + 12], "big")
        if pos + size > len(view):
            break
        batch = LegacyRecordBatch(bytes(view[pos : pos + size]), magic)
        assert batch.validate_crc()
        for r in batch:
            out.append((r.offset, r.timestamp, r.timestamp_type, r.key, r.value))
        pos += size
    return out


# ---------------------------------------------------------------- self-tests
def test_xxh32_stand_in_matches_published_vectors():
    # Reference values of xxHash32 with seed 0 (xxhash's own test vectors).
    assert _XXH32(b"").digest() == bytes.fromhex("02cc5d05")
    assert _XXH32(b"abc").digest() == bytes.fromhex("32d153ff")


def test_lz4_frame_header_checksum_agrees_with_cramjam():
    # cramjam writes a spec-conformant frame: HC = second byte of xxh32(FLG..BD).
    frame = _lz4_frame_encode(b"kafka" * 100)
    assert frame[frame[4] & 0x08 and 14 or 6] == (xxh32(frame[4:6]) >> 8) & 0xFF


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_kafka_python_round_trips_v2_with_stand_ins(kafka_python_codecs, codec):
    records = [(i, 1000 + i, b"k%d" % i, b"v" * i, [("h", b"x")]) for i in range(10)]
    batch = kafka_python_v2_batch(records, compression=codec, base_offset=42)
    decoded = kafka_python_v2_records(batch)
    assert [(o, t, k, v) for o, t, _, k, v, _ in decoded] == [
        (42 + i, 1000 + i, b"k%d" % i, b"v" * i) for i in range(10)
    ]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [1, 2, 3])
def test_kafka_python_round_trips_legacy_with_stand_ins(kafka_python_codecs, magic, codec):
    records = [(i, 1000 + i, b"k%d" % i, b"v" * i) for i in range(10)]
    message_set = kafka_python_message_set(magic, records, codec)
    assert message_set[16 + 1] & 0x07 == codec  # one wrapper message
    decoded = kafka_python_legacy_records(message_set, magic)
    assert [(k, v) for _, _, _, k, v in decoded] == [(b"k%d" % i, b"v" * i) for i in range(10)]
