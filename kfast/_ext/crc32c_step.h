/* One CRC-32C hardware step (8 bytes) usable from code compiled for plain
 * x86-64, for kernels that interleave CRC work with their own loop (batch.pyx
 * validates records while the CRC runs). Inline assembly rather than the
 * SSE4.2 intrinsic: the intrinsic needs the whole calling function compiled
 * with target("sse4.2"), which Cython-generated functions cannot be.
 *
 * Only call it when crc32c_hardware_in_use() (crc32c.pxd) says so.
 * Operates on the raw register (no inversion), like crc32c_impl.h's loops.
 */
#ifndef KFAST_CRC32C_STEP_H
#define KFAST_CRC32C_STEP_H

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KFAST_CRC32C_HAVE_STEP 1
static inline uint64_t kfast_crc32c_step_u64(uint64_t reg, const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    __asm__("crc32q %1, %0" : "+r"(reg) : "rm"(v));
    return reg;
}
#else
#define KFAST_CRC32C_HAVE_STEP 0
static inline uint64_t kfast_crc32c_step_u64(uint64_t reg, const unsigned char *p)
{
    (void)p;
    return reg;   /* never called: KFAST_CRC32C_HAVE_STEP is 0 */
}
#endif

#endif
