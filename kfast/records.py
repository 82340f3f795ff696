"""kfast.records: Kafka record batches, the public Python API.

Everything the log, the broker and clients need to read, check, patch and
write record batches, backed by the Cython kernel ``kfast._ext.batch`` (byte
layout: ``kfast/_ext/layout.pxd``; grammar: ``kfast/_ext/batch.pxd``) and
``kfast.compression``.

Reading::

    batch = RecordBatch(buffer, offset)     # header view; no copy, no CRC check
    batch.base_offset, batch.last_offset, batch.records_count, batch.compression ...
    batch.is_valid()                        # CRC only
    batch.validate()                        # what the broker checks on produce (CRC,
                                            # codec, every record walked, client rules;
                                            # from_client=False for recovery/replication)
    for record in batch:                    # decompresses once if needed
        record.offset, record.timestamp, record.key, record.value, record.headers

``record.key`` / ``record.value`` are ``BufferSlice`` objects (or None for
null): zero-copy views of the batch that compare and hash equal to the bytes
they hold and export the buffer protocol; ``bytes(record.value)`` copies.
They keep the underlying buffer alive (and a bytearray under a live
RecordBatch cannot be resized). The iterator reuses a Record (and its
fields) that nothing but the iterator holds any more, as CPython's zip and
dict-items iterators reuse their tuples: whatever the caller keeps (a
record, ``record.key``, a list of records) keeps its values, but the
``id()`` of records the caller dropped repeats.

Several batches (a log segment slice, a fetch response)::

    for batch in iter_batches(buffer, allow_partial=True): ...
    complete_batches_size(buffer)           # bytes of whole batches at the start

Patching in place (writable buffers), as the log's append path does::

    patch_batch(buffer, offset, base_offset, partition_leader_epoch, log_append_time=None)

Writing::

    builder = RecordBatchBuilder(COMPRESSION_LZ4, producer_id=..., base_sequence=...)
    builder.append(timestamp, key, value, headers=[("h", b"v")])
    data = builder.build()
    build_control_batch(CONTROL_TYPE_COMMIT, producer_id, producer_epoch, coordinator_epoch, ts)

Errors (all from ``kfast.protocol.errors``): CorruptRecordException for
malformed or truncated bytes and CRC mismatches; InvalidRecordException for
batches that break the broker's produce rules; UnsupportedCompressionTypeException
for unknown codecs. Bytes in the magic 0/1 message-set format raise
``LegacyRecordFormatError`` (a CorruptRecordException subclass carrying
``.magic``); ``peek_magic(buffer, offset)`` tells the formats apart up front.
"""

from kfast._ext.batch import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    MAGIC_VALUE_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    BufferSlice,
    LegacyRecordFormatError,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    build_control_batch,
    complete_batches_size,
    iter_batches,
    patch_batch,
    peek_magic,
)
from kfast._ext.layout import LOG_OVERHEAD, RECORD_BATCH_OVERHEAD
from kfast.compression import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    compress,
    decompress,
)

__all__ = [
    "BufferSlice",
    "Record",
    "RecordBatch",
    "RecordBatchBuilder",
    "LegacyRecordFormatError",
    "build_control_batch",
    "complete_batches_size",
    "iter_batches",
    "patch_batch",
    "peek_magic",
    "compress",
    "decompress",
    "COMPRESSION_NONE",
    "COMPRESSION_GZIP",
    "COMPRESSION_SNAPPY",
    "COMPRESSION_LZ4",
    "COMPRESSION_ZSTD",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "CONTROL_TYPE_ABORT",
    "CONTROL_TYPE_COMMIT",
    "RECORD_BATCH_OVERHEAD",
    "LOG_OVERHEAD",
    "MAGIC_VALUE_V2",
    "NO_TIMESTAMP",
    "NO_PRODUCER_ID",
    "NO_PRODUCER_EPOCH",
    "NO_SEQUENCE",
    "NO_PARTITION_LEADER_EPOCH",
]


# ---- legacy message sets and the columnar decoder (kfast._ext.legacy, kfast._ext.columnar) ----
# Columns::
#
#     columns = decode_columnar(buffer, include_headers=True)   # many v2 batches, no object per record
#     columns.offsets, columns.timestamps, columns.key_offsets, columns.key_lengths, columns.data ...
#     decode_columnar(buffer, arrow=True)    # pyarrow.RecordBatch with Spark's Kafka column types
#
# Magic 0/1 message sets (Produce v0-v2, Fetch v0-v3)::
#
#     decode_message_set(buffer) -> [LegacyRecord(offset, timestamp, timestamp_type, key, value, magic)]
#     convert_message_set_to_v2(buffer, compression=None) -> one v2 batch (offsets from 0)
#     convert_v2_to_message_set(buffer, magic, first_offset=-1) -> message set
#     build_message_set(magic, [(offset, timestamp, key, value)], compression)
from kfast._ext.columnar import BatchInfo, Column, ColumnarRecords, decode_columnar
from kfast._ext.legacy import (
    NO_TIMESTAMP_TYPE,
    LegacyRecord,
    build_message_set,
    convert_message_set_to_v2,
    convert_v2_to_message_set,
    decode_message_set,
)

__all__ += [
    "BatchInfo",
    "Column",
    "ColumnarRecords",
    "decode_columnar",
    "NO_TIMESTAMP_TYPE",
    "LegacyRecord",
    "build_message_set",
    "convert_message_set_to_v2",
    "convert_v2_to_message_set",
    "decode_message_set",
]
