"""The one home of kfast's on-disk and wire byte layouts, for Python readers.

The grammars (record batch v2, legacy message, offset and time index entries)
are in ``kfast/_ext/layout.pxd``, whose ``cdef enum`` the Cython kernels
cimport; every constant below has the same name and value there.
``tests/unit/ext/test_layout.py`` fails when the two differ, when a
``struct`` format here disagrees with the offsets, or when a reader
(kfast.storage, kfast.tools.dump_log, kfast_spark.segments, the kernels)
spells one of these facts as a bare number. The pure-Python module (not a
compiled one) keeps the layout importable without building the kernels and
visible to type checkers.
"""

from __future__ import annotations

import struct
from typing import Final

# Record batch v2 header.
BASE_OFFSET_OFFSET: Final = 0
LENGTH_OFFSET: Final = 8
PARTITION_LEADER_EPOCH_OFFSET: Final = 12
MAGIC_OFFSET: Final = 16
CRC_OFFSET: Final = 17
ATTRIBUTES_OFFSET: Final = 21  # the CRC covers bytes 21 .. end
LAST_OFFSET_DELTA_OFFSET: Final = 23
BASE_TIMESTAMP_OFFSET: Final = 27
MAX_TIMESTAMP_OFFSET: Final = 35
PRODUCER_ID_OFFSET: Final = 43
PRODUCER_EPOCH_OFFSET: Final = 51
BASE_SEQUENCE_OFFSET: Final = 53
RECORDS_COUNT_OFFSET: Final = 57
RECORDS_OFFSET: Final = 61
# = RECORDS_OFFSET: the header of a batch; also the smallest valid batch.
RECORD_BATCH_OVERHEAD: Final = 61
# baseOffset + batchLength (or offset + messageSize): the part of a log entry
# outside its length, for v2 batches and legacy messages alike.
LOG_OVERHEAD: Final = 12
# batchLength of a batch with no records.
MIN_BATCH_LENGTH: Final = 49
CURRENT_MAGIC: Final = 2

# Record batch v2 attributes.
COMPRESSION_CODEC_MASK: Final = 0x07
TIMESTAMP_TYPE_MASK: Final = 0x08
TRANSACTIONAL_FLAG_MASK: Final = 0x10
CONTROL_FLAG_MASK: Final = 0x20
DELETE_HORIZON_FLAG_MASK: Final = 0x40

# Legacy message (magic 0 and 1).
LEGACY_OFFSET_AT: Final = 0
LEGACY_SIZE_AT: Final = 8
LEGACY_CRC_AT: Final = 12
LEGACY_MAGIC_AT: Final = 16
LEGACY_ATTRIBUTES_AT: Final = 17
LEGACY_TIMESTAMP_AT: Final = 18
# messageSize minimum: crc + magic + attributes + key length + value length
RECORD_OVERHEAD_V0: Final = 14
# ... + timestamp
RECORD_OVERHEAD_V1: Final = 22
# Legacy attributes.
LEGACY_CODEC_MASK: Final = 0x07
LEGACY_TIMESTAMP_TYPE_MASK: Final = 0x08

# Offset index entry.
OFFSET_INDEX_ENTRY_SIZE: Final = 8
OFFSET_INDEX_RELATIVE_OFFSET_AT: Final = 0
OFFSET_INDEX_POSITION_AT: Final = 4
INDEX_RELATIVE_OFFSET_WIDTH: Final = 4  # the key searched: relativeOffset int32
# Time index entry.
TIME_INDEX_ENTRY_SIZE: Final = 12
TIME_INDEX_TIMESTAMP_AT: Final = 0
TIME_INDEX_RELATIVE_OFFSET_AT: Final = 8
INDEX_TIMESTAMP_WIDTH: Final = 8  # the key searched: timestamp int64
# Largest relativeOffset an index entry holds (int32).
INDEX_RELATIVE_OFFSET_MAX: Final = 0x7FFFFFFF

# Control record key, and the value of a transaction marker (COMMIT/ABORT).
CONTROL_KEY_VERSION_AT: Final = 0
CONTROL_KEY_TYPE_AT: Final = 2
CONTROL_KEY_SIZE: Final = 4
END_TXN_MARKER_VERSION_AT: Final = 0
END_TXN_MARKER_COORDINATOR_EPOCH_AT: Final = 2
END_TXN_MARKER_SIZE: Final = 6

# The same layouts as struct formats, for readers that unpack whole headers
# (the test checks each field lands at its offset above).
#   batch header: baseOffset .. recordsCount
BATCH_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
#   legacy message header: offset, messageSize, crc, magic, attributes [, timestamp]
LEGACY_HEADER_V0: Final = struct.Struct(">qiIbb")
LEGACY_HEADER_V1: Final = struct.Struct(">qiIbbq")
#   index entries
OFFSET_INDEX_ENTRY: Final = struct.Struct(">ii")
TIME_INDEX_ENTRY: Final = struct.Struct(">qi")
#   control record key: version, type; transaction marker value: version, coordinatorEpoch
CONTROL_RECORD_KEY: Final = struct.Struct(">hh")
END_TXN_MARKER_VALUE: Final = struct.Struct(">hi")
