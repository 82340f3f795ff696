"""kfast's batches against kafka-python's and aiokafka's codecs, both directions."""

import types

import aiokafka.record._crecords as aiokafka_records
import cramjam
import crc32c
import kafka.codec
import kafka.record.default_records as kafka_python_records
import pytest
from hypothesis import given, settings
from kafka.record.default_records import (
    DefaultRecordBatch as KafkaPythonBatch,
)
from kafka.record.default_records import (
    DefaultRecordBatchBuilder as KafkaPythonBuilder,
)

from kfast.records import RecordBatch, RecordBatchBuilder, patch_batch

from ..hypothesis_budget import examples
from ._record_strategies import CODECS, record_lists


@pytest.fixture(scope="module", autouse=True)
def kafka_python_codecs():
    """Give kafka-python codec libraries where none is installed, backed by cramjam.

    snappy: only the raw block codec is supplied, so kafka-python's own xerial
    framing is what kfast is checked against. lz4 and zstd: the whole frame
    codec is cramjam's, so those cases check kafka-python's batch layout
    around the payload, not its frame writer.
    """
    with pytest.MonkeyPatch.context() as mp:
        if not kafka.codec.has_snappy():
            mp.setattr(
                kafka.codec,
                "snappy",
                types.SimpleNamespace(
                    compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
                    decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))),
                ),
            )
        if not kafka.codec.has_lz4():
            mp.setattr(kafka.codec, "lz4", types.SimpleNamespace())
            mp.setattr(
                kafka_python_records,
                "lz4_encode",
                lambda data: bytes(cramjam.lz4.compress(bytes(data))),
            )
            mp.setattr(
                kafka_python_records,
                "lz4_decode",
                lambda data: bytes(cramjam.lz4.decompress(bytes(data))),
            )
        if not kafka.codec.has_zstd():
            mp.setattr(kafka.codec, "zstd", types.SimpleNamespace())
            mp.setattr(
                kafka_python_records,
                "zstd_encode",
                lambda data: bytes(cramjam.zstd.compress(bytes(data))),
            )
            mp.setattr(
                kafka_python_records,
                "zstd_decode",
                lambda data: bytes(cramjam.zstd.decompress(bytes(data))),
            )
        yield


def test_aiokafka_is_the_compiled_codec():
    assert aiokafka_records.DefaultRecordBatch.__module__.startswith("aiokafka.record._crecords")
    assert aiokafka_records.default_records.__file__.endswith(".so")


def _norm_headers(headers):
    return [(k, None if v is None else bytes(v)) for k, v in headers]


def _assert_same(ours, theirs_records, records, base_offset=0):
    ours = list(ours)
    assert len(ours) == len(theirs_records) == len(records)
    for i, (a, b) in enumerate(zip(ours, theirs_records)):
        assert a.offset == b.offset == base_offset + i
        assert a.timestamp == b.timestamp
        assert (None if a.key is None else bytes(a.key)) == b.key
        assert (None if a.value is None else bytes(a.value)) == b.value
        assert _norm_headers(a.headers) == _norm_headers(b.headers)


def _build_kfast(codec, records, **kw):
    builder = RecordBatchBuilder(codec, **kw)
    for ts, key, value, headers in records:
        builder.append(ts, key, value, headers=headers)
    return builder.build()


# ---- kafka-python
@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=examples(40))
@given(records=record_lists())
def test_kafka_python_reads_kfast(codec, records):
    data = _build_kfast(codec, records, producer_id=7, producer_epoch=2, base_sequence=11)
    theirs = KafkaPythonBatch(data)
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (7, 2, 11)
    _assert_same(RecordBatch(data), list(theirs), records)


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=examples(40))
@given(records=record_lists())
def test_kfast_reads_kafka_python(codec, records):
    builder = KafkaPythonBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=2**30,
    )
    for i, (ts, key, value, headers) in enumerate(records):
        assert builder.append(i, ts, key, value, headers) is not None
    data = bytes(builder.build())
    batch = RecordBatch(data)
    batch.validate()
    assert batch.crc == crc32c.crc32c(data[21:])
    _assert_same(batch, list(KafkaPythonBatch(data)), records)
    # and kfast re-encodes it to the same bytes when uncompressed
    if codec == 0:
        # (kafka-python writes partitionLeaderEpoch 0 where the Java producer writes -1)
        assert _build_kfast(0, records, partition_leader_epoch=0) == data


# ---- aiokafka (compiled)
def _aiokafka_build(
    codec, records, producer_id=-1, producer_epoch=-1, base_sequence=-1, is_transactional=False
):
    builder = aiokafka_records.DefaultRecordBatchBuilder(
        2, codec, int(is_transactional), producer_id, producer_epoch, base_sequence, 2**30
    )
    for i, (ts, key, value, headers) in enumerate(records):
        assert builder.append(i, ts, key, value, headers) is not None
    return bytes(builder.build())


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=examples(40))
@given(records=record_lists())
def test_aiokafka_reads_kfast(codec, records):
    data = _build_kfast(
        codec, records, producer_id=9, producer_epoch=1, base_sequence=0, is_transactional=True
    )
    theirs = aiokafka_records.DefaultRecordBatch(data)
    assert theirs.validate_crc()
    assert theirs.is_transactional and theirs.producer_id == 9
    _assert_same(RecordBatch(data), list(theirs), records)


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=examples(40))
@given(records=record_lists())
def test_kfast_reads_aiokafka(codec, records):
    data = _aiokafka_build(codec, records, producer_id=3, producer_epoch=0, base_sequence=5)
    batch = RecordBatch(data)
    batch.validate()
    assert batch.crc == crc32c.crc32c(data[21:])
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (3, 0, 5)
    _assert_same(batch, list(aiokafka_records.DefaultRecordBatch(data)), records)


def test_uncompressed_encoding_is_byte_identical_to_aiokafka():
    records = [
        (1_700_000_000_000 + i, b"k%d" % i, b"v" * i, [("h", b"x")] if i % 2 else [])
        for i in range(50)
    ]
    assert _build_kfast(0, records) == _aiokafka_build(0, records)


# ---- patching, as seen by another implementation
@pytest.mark.parametrize("codec", [0, 1])
@pytest.mark.parametrize("log_append_time", [None, 1_800_000_000_123])
def test_kafka_python_sees_patched_batch(codec, log_append_time):
    records = [(1_700_000_000_000 + i, b"k", b"v%d" % i, []) for i in range(5)]
    buf = bytearray(b"\x00" * 7 + _build_kfast(codec, records))
    size = patch_batch(buf, 7, 1000, 42, log_append_time)
    assert size == len(buf) - 7
    theirs = KafkaPythonBatch(bytes(buf[7:]))
    assert theirs.validate_crc()
    assert theirs.base_offset == 1000
    assert theirs.leader_epoch == 42
    assert [r.offset for r in theirs] == [1000 + i for i in range(5)]
    ours = RecordBatch(buf, 7)
    ours.validate()
    if log_append_time is None:
        assert theirs.timestamp_type == 0
        assert [r.timestamp for r in KafkaPythonBatch(bytes(buf[7:]))] == [r[0] for r in records]
    else:
        assert theirs.timestamp_type == 1
        assert theirs.max_timestamp == log_append_time
        assert [r.timestamp for r in KafkaPythonBatch(bytes(buf[7:]))] == [log_append_time] * 5
        assert [r.timestamp for r in ours] == [log_append_time] * 5
