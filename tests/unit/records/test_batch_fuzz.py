"""Truncated and bit-flipped batches end in a kfast error, never a crash or a wrong read."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kfast.protocol.errors import KafkaError
from kfast.records import RecordBatch, RecordBatchBuilder, iter_batches

from ._record_strategies import CODECS, record_lists

# Bytes of the header outside the CRC: baseOffset (0-7) and partitionLeaderEpoch
# (12-15) can change and the batch stays valid. batchLength (8-11) is outside
# the CRC too, but changing it moves the end of the batch, which the CRC
# (or the size checks) catch.
NOT_COVERED = set(range(0, 8)) | set(range(12, 16))


def _build(codec, records):
    builder = RecordBatchBuilder(codec)
    for ts, key, value, headers in records:
        builder.append(ts, key, value, headers=headers)
    return builder.build()


def _consume(data):
    """Everything a reader may do with the bytes; returns True if it all passed."""
    batch = RecordBatch(data)
    batch.is_valid()
    batch.validate(from_client=False)
    for record in batch:
        record.key, record.value, record.headers
    return True


def _consume_without_validation(data):
    """Iterate without validate(): a damaged batch must still only raise kfast errors."""
    batch = RecordBatch(data)
    for record in batch:
        record.offset, record.timestamp, record.key, record.value, record.headers


@pytest.mark.slow
@settings(max_examples=300)
@given(records=record_lists(max_records=6), codec=st.sampled_from(CODECS), data=st.data())
def test_truncation(records, codec, data):
    full = _build(codec, records)
    cut = data.draw(st.integers(0, len(full) - 1))
    with pytest.raises(KafkaError):
        _consume(full[:cut])
    with pytest.raises(KafkaError):
        _consume_without_validation(full[:cut])


@pytest.mark.slow
@settings(max_examples=500)
@given(records=record_lists(max_records=6), codec=st.sampled_from(CODECS), data=st.data())
def test_bit_flip(records, codec, data):
    full = bytearray(_build(codec, records))
    position = data.draw(st.integers(0, len(full) - 1))
    full[position] ^= 1 << data.draw(st.integers(0, 7))
    if position in NOT_COVERED:
        assert _consume(bytes(full))
    else:
        # CRC-32C detects every single-bit error in the bytes it covers.
        with pytest.raises(KafkaError):
            _consume(bytes(full))
    try:
        _consume_without_validation(bytes(full))
    except KafkaError:
        pass


@pytest.mark.slow
@settings(max_examples=300)
@given(records=record_lists(max_records=4), data=st.data())
def test_garbage_records_section_with_valid_crc(records, data):
    """Records that are malformed but carry a correct CRC (a buggy or hostile client)."""
    import crc32c

    full = bytearray(_build(0, records))
    section = data.draw(st.binary(max_size=200))
    full[61:] = section
    struct.pack_into(">i", full, 8, len(full) - 12)
    struct.pack_into(">I", full, 17, crc32c.crc32c(bytes(full[21:])))
    try:
        _consume(bytes(full))
        validated = True
    except KafkaError:
        validated = False
    try:
        _consume_without_validation(bytes(full))
        iterated = True
    except KafkaError:
        iterated = False
    # validate()'s record walk and the iterator's record parser accept exactly the same bytes.
    assert validated == iterated


@pytest.mark.slow
@settings(max_examples=300)
@given(records=record_lists(max_records=4), data=st.data())
def test_mutated_records_section_walk_agrees_with_iteration(records, data):
    """Flip bytes inside real records (CRC recomputed): validate and iterate agree."""
    import crc32c

    full = bytearray(_build(0, records))
    for _ in range(data.draw(st.integers(1, 3))):
        position = data.draw(st.integers(61, len(full) - 1)) if len(full) > 61 else None
        if position is not None:
            full[position] = data.draw(st.integers(0, 255))
    struct.pack_into(">I", full, 17, crc32c.crc32c(bytes(full[21:])))
    outcomes = []
    for consume in (_consume, _consume_without_validation):
        try:
            consume(bytes(full))
            outcomes.append(True)
        except KafkaError:
            outcomes.append(False)
    assert outcomes[0] == outcomes[1]


@settings(max_examples=200)
@given(blob=st.binary(max_size=300))
def test_random_bytes(blob):
    for allow_partial in (False, True):
        try:
            for batch in iter_batches(blob, allow_partial=allow_partial):
                batch.validate(from_client=False)
                list(batch)
        except KafkaError:
            pass
