# Legacy message sets (magic 0 and 1), Kafka's LegacyRecord /
# AbstractLegacyRecordBatch. Grammar (big-endian):
#
#   message_set := entry* [partial entry]      a fetch may end mid-entry
#   entry       := offset int64, message_size int32, message (message_size bytes)
#   message v0  := crc uint32, magic int8 = 0, attributes int8, key, value
#   message v1  := crc uint32, magic int8 = 1, attributes int8,
#                  timestamp int64, key, value
#   key, value  := length int32 (-1 = null), bytes
#   crc         := CRC-32 (zlib's polynomial, not CRC-32C) of magic .. end
#   attributes  := bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4),
#                  bit 3 timestamp type (magic 1 only; 1 = LogAppendTime)
#
# A compressed message is a wrapper: key null, value = the compressed inner
# message set, whose messages are uncompressed and have the wrapper's magic.
# Magic 1: inner offsets are relative (0..n-1) and the wrapper's offset is
# the absolute offset of the last inner message; magic 0: inner offsets are
# absolute. A LogAppendTime wrapper's timestamp is every inner message's.
from libc.stdint cimport int32_t

# Offsets, sizes and attribute bits of a message: kfast/_ext/layout.pxd.
cdef enum:
    LEGACY_MAX_CODEC = 3              # zstd exists only for magic 2
