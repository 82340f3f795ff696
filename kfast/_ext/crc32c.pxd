# CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of
# record batch v2, producer-state snapshots and other Kafka files.
#
# crc32c_update(crc, data, n): continue a CRC over n more bytes. Start with
# crc = 0; the value is finalised (pre/post inversion done inside), so
# crc32c_update(crc32c_update(0, a), b) == crc32c_update(0, a + b) and the
# result equals the `crc32c` package's crc32c(a + b).
# Path chosen at run time (crc32c.implementation() names it): carry-less-
# multiply folding fused with crc32 streams (AVX2 VPCLMULQDQ or PCLMULQDQ on
# x86-64), the crc32 instruction alone (SSE4.2, ARMv8 CRC32), or tables.
# Safe to call without the GIL and from any thread.
from libc.stdint cimport uint32_t

cdef uint32_t crc32c_update(uint32_t crc, const unsigned char* data,
                            size_t length) noexcept nogil

