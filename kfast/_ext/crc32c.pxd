# CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of
# record batch v2, producer-state snapshots and other Kafka files.
#
# crc32c_update(crc, data, n): continue a CRC over n more bytes. Start with
# crc = 0; the value is finalised (pre/post inversion done inside), so
# crc32c_update(crc32c_update(0, a), b) == crc32c_update(0, a + b) and the
# result equals the `crc32c` package's crc32c(a + b).
# Hardware path (SSE4.2 on x86-64, CRC32 extension on ARMv8) chosen at run
# time; a table-driven software path otherwise.
from libc.stdint cimport uint32_t

cdef uint32_t crc32c_update(uint32_t crc, const unsigned char* data,
                            size_t length) noexcept nogil


# For kernels that interleave CRC work with their own loop (see crc32c_step.h):
# the three-stream block size, whether the hardware path is in use, and the
# "feed CRC32C_LONG_BLOCK zero bytes" operator on a raw register.
cdef enum:
    CRC32C_LONG_BLOCK = 8192

cdef bint crc32c_hardware_in_use() noexcept nogil
cdef uint32_t crc32c_shift_long_block(uint32_t reg) noexcept nogil
