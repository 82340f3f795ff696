/* CRC-32C (Castagnoli), reflected polynomial 0x82F63B78, in C for crc32c.pyx.
 *
 * Three implementations, one chosen at run time by kfast_crc32c_select():
 *   x86-64 SSE4.2   the crc32 instruction, three interleaved streams
 *   ARMv8 CRC32     the crc32c instructions, three interleaved streams
 *   software        slicing-by-8 tables
 *
 * Why three streams: the crc32 instruction has a latency of ~3 cycles but a
 * throughput of one per cycle, so a single dependent chain runs at a third of
 * what the unit can do. Splitting a block into three equal parts A|B|C and
 * running one chain per part keeps it busy; the parts are then joined with
 *     reg(A|B) = shift_|B|(reg(A)) ^ reg0(B)
 * where reg0(B) is the raw CRC register of B started from 0 and shift_n is
 * the (linear, GF(2)) map "feed n zero bytes". shift_n is applied with four
 * 256-entry tables, one per byte of the register; they are computed once at
 * module import for the two block sizes used.
 *
 * Everything here works on the raw (non-inverted) register; the pre/post
 * inversion of CRC-32C is done once in kfast_crc32c().
 *
 * Hardware paths are compiled with target attributes rather than global
 * -msse4.2 / -march flags, so one wheel runs on every x86-64 / aarch64 CPU.
 */
#ifndef KFAST_CRC32C_IMPL_H
#define KFAST_CRC32C_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define KFAST_CRC32C_POLY 0x82F63B78u

/* Block sizes of the interleaved loop: LONG per stream for big buffers
 * (3 x 8 KiB), SHORT for the tail (3 x 256 B). */
#define KFAST_CRC32C_LONG 8192
#define KFAST_CRC32C_SHORT 256

enum { KFAST_CRC32C_SOFTWARE = 0, KFAST_CRC32C_HARDWARE = 1 };

static uint32_t kfast_crc32c_table[8][256];
static uint32_t kfast_crc32c_long_shift[4][256];
static uint32_t kfast_crc32c_short_shift[4][256];
static int kfast_crc32c_hardware_available = 0;
static int kfast_crc32c_use_hardware = 0;

/* ---------------------------------------------------------------- software */

static uint32_t kfast_crc32c_sw(uint32_t reg, const unsigned char *p, size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        reg = kfast_crc32c_table[0][(reg ^ *p++) & 0xFF] ^ (reg >> 8);
        n--;
    }
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
#endif
        lo ^= reg;
        reg = kfast_crc32c_table[7][lo & 0xFF] ^ kfast_crc32c_table[6][(lo >> 8) & 0xFF]
            ^ kfast_crc32c_table[5][(lo >> 16) & 0xFF] ^ kfast_crc32c_table[4][lo >> 24]
            ^ kfast_crc32c_table[3][hi & 0xFF] ^ kfast_crc32c_table[2][(hi >> 8) & 0xFF]
            ^ kfast_crc32c_table[1][(hi >> 16) & 0xFF] ^ kfast_crc32c_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        reg = kfast_crc32c_table[0][(reg ^ *p++) & 0xFF] ^ (reg >> 8);
    return reg;
}

/* ---------------------------------------------------------------- shift ops */

static inline uint32_t kfast_crc32c_shift(uint32_t table[4][256], uint32_t reg)
{
    return table[0][reg & 0xFF] ^ table[1][(reg >> 8) & 0xFF]
         ^ table[2][(reg >> 16) & 0xFF] ^ table[3][reg >> 24];
}

/* Tables for "feed n zero bytes": the map is linear, so its value on the 32
 * basis registers (computed with the software CRC) determines it; each table
 * entry is the XOR of the basis images of its set bits. */
static void kfast_crc32c_build_shift(uint32_t table[4][256], size_t n)
{
    static unsigned char zeros[KFAST_CRC32C_LONG];
    uint32_t basis[32];
    int bit, k, b;
    for (bit = 0; bit < 32; bit++)
        basis[bit] = kfast_crc32c_sw((uint32_t)1 << bit, zeros, n);
    for (k = 0; k < 4; k++) {
        for (b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (bit = 0; bit < 8; bit++)
                if (b & (1 << bit))
                    v ^= basis[8 * k + bit];
            table[k][b] = v;
        }
    }
}

/* ---------------------------------------------------------------- hardware */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KFAST_CRC32C_HAVE_HW 1
#include <nmmintrin.h>
#define KFAST_HW_TARGET __attribute__((target("sse4.2")))
#define KFAST_CRC_U8(r, v) _mm_crc32_u8((r), (v))
#define KFAST_CRC_U64(r, v) ((uint32_t)_mm_crc32_u64((r), (v)))
static int kfast_crc32c_cpu_has_hw(void) { return __builtin_cpu_supports("sse4.2"); }

#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#define KFAST_CRC32C_HAVE_HW 1
#include <arm_acle.h>
#if defined(__ARM_FEATURE_CRC32)
#define KFAST_HW_TARGET
#else
#define KFAST_HW_TARGET __attribute__((target("+crc")))
#endif
#define KFAST_CRC_U8(r, v) __crc32cb((r), (v))
#define KFAST_CRC_U64(r, v) __crc32cd((r), (v))
#if defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
static int kfast_crc32c_cpu_has_hw(void) { return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0; }
#elif defined(__APPLE__)
static int kfast_crc32c_cpu_has_hw(void) { return 1; }   /* every Apple arm64 CPU */
#else
static int kfast_crc32c_cpu_has_hw(void) {
#if defined(__ARM_FEATURE_CRC32)
    return 1;
#else
    return 0;
#endif
}
#endif

#else
#define KFAST_CRC32C_HAVE_HW 0
#endif

#if KFAST_CRC32C_HAVE_HW
static inline uint64_t kfast_load64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

KFAST_HW_TARGET
static uint32_t kfast_crc32c_hw(uint32_t reg, const unsigned char *p, size_t n)
{
    const unsigned char *end;
    while (n && ((uintptr_t)p & 7)) {
        reg = KFAST_CRC_U8(reg, *p++);
        n--;
    }
    /* Three streams of LONG bytes each while there is room for them. */
    while (n >= 3 * KFAST_CRC32C_LONG) {
        uint32_t reg1 = 0, reg2 = 0;
        uint64_t reg0 = reg;
        end = p + KFAST_CRC32C_LONG;
        do {
            reg0 = KFAST_CRC_U64((uint32_t)reg0, kfast_load64(p));
            reg1 = KFAST_CRC_U64(reg1, kfast_load64(p + KFAST_CRC32C_LONG));
            reg2 = KFAST_CRC_U64(reg2, kfast_load64(p + 2 * KFAST_CRC32C_LONG));
            p += 8;
        } while (p < end);
        reg = kfast_crc32c_shift(kfast_crc32c_long_shift, (uint32_t)reg0) ^ reg1;
        reg = kfast_crc32c_shift(kfast_crc32c_long_shift, reg) ^ reg2;
        p += 2 * KFAST_CRC32C_LONG;
        n -= 3 * KFAST_CRC32C_LONG;
    }
    while (n >= 3 * KFAST_CRC32C_SHORT) {
        uint32_t reg1 = 0, reg2 = 0;
        uint64_t reg0 = reg;
        end = p + KFAST_CRC32C_SHORT;
        do {
            reg0 = KFAST_CRC_U64((uint32_t)reg0, kfast_load64(p));
            reg1 = KFAST_CRC_U64(reg1, kfast_load64(p + KFAST_CRC32C_SHORT));
            reg2 = KFAST_CRC_U64(reg2, kfast_load64(p + 2 * KFAST_CRC32C_SHORT));
            p += 8;
        } while (p < end);
        reg = kfast_crc32c_shift(kfast_crc32c_short_shift, (uint32_t)reg0) ^ reg1;
        reg = kfast_crc32c_shift(kfast_crc32c_short_shift, reg) ^ reg2;
        p += 2 * KFAST_CRC32C_SHORT;
        n -= 3 * KFAST_CRC32C_SHORT;
    }
    while (n >= 8) {
        reg = KFAST_CRC_U64(reg, kfast_load64(p));
        p += 8;
        n -= 8;
    }
    while (n--)
        reg = KFAST_CRC_U8(reg, *p++);
    return reg;
}
#endif

/* ---------------------------------------------------------------- API */

/* Build the tables and pick the hardware path if the CPU has it. Idempotent. */
static void kfast_crc32c_init(void)
{
    uint32_t n, reg;
    int k;
    for (n = 0; n < 256; n++) {
        reg = n;
        for (k = 0; k < 8; k++)
            reg = (reg & 1) ? (reg >> 1) ^ KFAST_CRC32C_POLY : reg >> 1;
        kfast_crc32c_table[0][n] = reg;
    }
    for (n = 0; n < 256; n++) {
        reg = kfast_crc32c_table[0][n];
        for (k = 1; k < 8; k++) {
            reg = kfast_crc32c_table[0][reg & 0xFF] ^ (reg >> 8);
            kfast_crc32c_table[k][n] = reg;
        }
    }
    kfast_crc32c_build_shift(kfast_crc32c_long_shift, KFAST_CRC32C_LONG);
    kfast_crc32c_build_shift(kfast_crc32c_short_shift, KFAST_CRC32C_SHORT);
#if KFAST_CRC32C_HAVE_HW
    kfast_crc32c_hardware_available = kfast_crc32c_cpu_has_hw();
#endif
    kfast_crc32c_use_hardware = kfast_crc32c_hardware_available;
}

/* Select an implementation (KFAST_CRC32C_SOFTWARE or _HARDWARE); returns 0,
 * or -1 if the hardware path was asked for and this CPU lacks it. */
static int kfast_crc32c_select(int which)
{
    if (which == KFAST_CRC32C_HARDWARE && !kfast_crc32c_hardware_available)
        return -1;
    kfast_crc32c_use_hardware = (which == KFAST_CRC32C_HARDWARE);
    return 0;
}

/* Finalised CRC-32C continuing `crc` (0 to start) over n bytes. */
static inline uint32_t kfast_crc32c(uint32_t crc, const unsigned char *p, size_t n)
{
#if KFAST_CRC32C_HAVE_HW
    if (kfast_crc32c_use_hardware)
        return ~kfast_crc32c_hw(~crc, p, n);
#endif
    return ~kfast_crc32c_sw(~crc, p, n);
}

#endif /* KFAST_CRC32C_IMPL_H */
