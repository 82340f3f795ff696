# The one home of kfast's on-disk and wire byte layouts, for the kernels.
#
# Every offset, size and bit here has the same name and value in
# kfast/_ext/layout.py, which the Python readers (kfast.storage, kfast.records,
# kfast.tools.dump_log, kfast_spark.segments) import;
# tests/unit/ext/test_layout.py fails when the two differ or when a reader
# spells one of these facts as a bare number. Change a layout here and in
# layout.py, rebuild the kernels (`make build`), and every reader follows.
#
# Record batch v2 (magic 2), Kafka's DefaultRecordBatch (big-endian):
#
#   RecordBatch :=
#     0  baseOffset            int64    not covered by the CRC
#     8  batchLength           int32    bytes after this field (total = 12 + batchLength)
#    12  partitionLeaderEpoch  int32    not covered by the CRC
#    16  magic                 int8     = 2
#    17  crc                   uint32   CRC-32C of bytes 21 .. end
#    21  attributes            int16    bits 0-2 codec, 3 timestampType (1 = LogAppendTime),
#                                       4 isTransactional, 5 isControl, 6 hasDeleteHorizon
#    23  lastOffsetDelta       int32
#    27  baseTimestamp         int64
#    35  maxTimestamp          int64
#    43  producerId            int64
#    51  producerEpoch         int16
#    53  baseSequence          int32
#    57  recordsCount          int32
#    61  records               Record * recordsCount (grammar in batch.pxd)
#
# Legacy message (magic 0 and 1), Kafka's LegacyRecord, one log entry each
# (grammar in legacy.pxd); its magic byte is at offset 16 too, which is how a
# reader tells the formats apart:
#
#     0  offset                int64    a compressed wrapper's: its last inner offset
#     8  messageSize           int32    bytes after this field (total = 12 + messageSize)
#    12  crc                   uint32   CRC-32 (zlib's) of bytes 16 .. end
#    16  magic                 int8     0 or 1
#    17  attributes            int8     bits 0-2 codec, 3 timestampType (magic 1)
#    18  timestamp             int64    magic 1 only
#
# Offset and time index entries (Kafka's OffsetIndex and TimeIndex):
#
#   .index      entry := relativeOffset int32 @0, position int32 @4        (8 bytes)
#   .timeindex  entry := timestamp int64 @0, relativeOffset int32 @8       (12 bytes)
#
# relativeOffset = offset - the segment's base offset, so a segment spans at
# most INDEX_RELATIVE_OFFSET_MAX offsets (Kafka's LogSegment.canConvertToRelativeOffset).
#
# A control batch's record (Kafka's ControlRecordType and EndTransactionMarker):
#
#   key               := version int16 @0 (= 0), type int16 @2                 (4 bytes)
#   value (COMMIT/ABORT) := version int16 @0 (= 0), coordinatorEpoch int32 @2  (6 bytes)

cdef enum:
    # Record batch v2 header.
    BASE_OFFSET_OFFSET = 0
    LENGTH_OFFSET = 8
    PARTITION_LEADER_EPOCH_OFFSET = 12
    MAGIC_OFFSET = 16
    CRC_OFFSET = 17
    ATTRIBUTES_OFFSET = 21
    LAST_OFFSET_DELTA_OFFSET = 23
    BASE_TIMESTAMP_OFFSET = 27
    MAX_TIMESTAMP_OFFSET = 35
    PRODUCER_ID_OFFSET = 43
    PRODUCER_EPOCH_OFFSET = 51
    BASE_SEQUENCE_OFFSET = 53
    RECORDS_COUNT_OFFSET = 57
    RECORDS_OFFSET = 61
    # = RECORDS_OFFSET: the header of a batch; also the smallest valid batch.
    RECORD_BATCH_OVERHEAD = 61
    # baseOffset + batchLength (or offset + messageSize): the part of a log
    # entry outside its length, for v2 batches and legacy messages alike.
    LOG_OVERHEAD = 12
    # batchLength of a batch with no records.
    MIN_BATCH_LENGTH = 49
    CURRENT_MAGIC = 2

    # Record batch v2 attributes.
    COMPRESSION_CODEC_MASK = 0x07
    TIMESTAMP_TYPE_MASK = 0x08
    TRANSACTIONAL_FLAG_MASK = 0x10
    CONTROL_FLAG_MASK = 0x20
    DELETE_HORIZON_FLAG_MASK = 0x40

    # Legacy message (magic 0 and 1).
    LEGACY_OFFSET_AT = 0
    LEGACY_SIZE_AT = 8
    LEGACY_CRC_AT = 12
    LEGACY_MAGIC_AT = 16
    LEGACY_ATTRIBUTES_AT = 17
    LEGACY_TIMESTAMP_AT = 18
    # messageSize minimum: crc + magic + attributes + key length + value length
    RECORD_OVERHEAD_V0 = 14
    # ... + timestamp
    RECORD_OVERHEAD_V1 = 22
    # Legacy attributes.
    LEGACY_CODEC_MASK = 0x07
    LEGACY_TIMESTAMP_TYPE_MASK = 0x08

    # Offset index entry.
    OFFSET_INDEX_ENTRY_SIZE = 8
    OFFSET_INDEX_RELATIVE_OFFSET_AT = 0
    OFFSET_INDEX_POSITION_AT = 4
    INDEX_RELATIVE_OFFSET_WIDTH = 4       # the key searched: relativeOffset int32
    # Time index entry.
    TIME_INDEX_ENTRY_SIZE = 12
    TIME_INDEX_TIMESTAMP_AT = 0
    TIME_INDEX_RELATIVE_OFFSET_AT = 8
    INDEX_TIMESTAMP_WIDTH = 8         # the key searched: timestamp int64
    # Largest relativeOffset an index entry holds (int32).
    INDEX_RELATIVE_OFFSET_MAX = 0x7FFFFFFF

    # Control record key, and the value of a transaction marker.
    CONTROL_KEY_VERSION_AT = 0
    CONTROL_KEY_TYPE_AT = 2
    CONTROL_KEY_SIZE = 4
    END_TXN_MARKER_VERSION_AT = 0
    END_TXN_MARKER_COORDINATOR_EPOCH_AT = 2
    END_TXN_MARKER_SIZE = 6
