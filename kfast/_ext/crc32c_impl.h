/* CRC-32C (Castagnoli), reflected polynomial 0x82F63B78, in C for crc32c.pyx.
 *
 * Five implementations, one chosen at run time by kfast_crc32c_select():
 *   x86-64 vpclmul  AVX2 + VPCLMULQDQ: carry-less-multiply folding of four
 *                   256-bit accumulators (128 bytes per step)
 *   x86-64 pclmul   PCLMULQDQ + SSE4.2: folding of four 128-bit accumulators
 *                   (64 bytes per step)
 *   x86-64 SSE4.2   the crc32 instruction, three interleaved streams
 *   ARMv8 CRC32     the crc32c instructions, three interleaved streams
 *   software        slicing-by-8 tables
 * The folding paths hand inputs under KFAST_CRC32C_FOLD_MIN bytes to the
 * crc32-instruction path, whose setup cost is lower.
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
 * Why folding is faster still: even with three streams the crc32 unit takes
 * 8 bytes per cycle, while the carry-less multiplier (two multiplies per 16
 * bytes) keeps up with the caches. The mathematics is in the comment above
 * kfast_crc32c_fold_constants().
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

/* Implementations, slowest first; kfast_crc32c_init() picks the last one
 * this CPU (and OS, for the YMM state) supports. */
enum {
    KFAST_CRC32C_SOFTWARE = 0,
    KFAST_CRC32C_HARDWARE = 1,
    KFAST_CRC32C_PCLMUL = 2,
    KFAST_CRC32C_VPCLMUL = 3,
    KFAST_CRC32C_IMPLEMENTATIONS = 4
};

static uint32_t kfast_crc32c_table[8][256];
static uint32_t kfast_crc32c_long_shift[4][256];
static uint32_t kfast_crc32c_short_shift[4][256];
static int kfast_crc32c_available[KFAST_CRC32C_IMPLEMENTATIONS] = {1, 0, 0, 0};
static int kfast_crc32c_implementation = KFAST_CRC32C_SOFTWARE;

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
/* 64-bit result on x86-64 (the instruction zero-extends): the chains keep it
 * in uint64_t, since truncating to uint32_t costs a mov in every chain. */
#define KFAST_CRC_U64(r, v) _mm_crc32_u64((r), (v))
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
#define KFAST_CRC_U64(r, v) __crc32cd((uint32_t)(r), (v))
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
        uint64_t reg0 = reg, reg1 = 0, reg2 = 0;
        end = p + KFAST_CRC32C_LONG;
        do {
            reg0 = KFAST_CRC_U64(reg0, kfast_load64(p));
            reg1 = KFAST_CRC_U64(reg1, kfast_load64(p + KFAST_CRC32C_LONG));
            reg2 = KFAST_CRC_U64(reg2, kfast_load64(p + 2 * KFAST_CRC32C_LONG));
            p += 8;
        } while (p < end);
        reg = kfast_crc32c_shift(kfast_crc32c_long_shift, (uint32_t)reg0) ^ (uint32_t)reg1;
        reg = kfast_crc32c_shift(kfast_crc32c_long_shift, reg) ^ (uint32_t)reg2;
        p += 2 * KFAST_CRC32C_LONG;
        n -= 3 * KFAST_CRC32C_LONG;
    }
    while (n >= 3 * KFAST_CRC32C_SHORT) {
        uint64_t reg0 = reg, reg1 = 0, reg2 = 0;
        end = p + KFAST_CRC32C_SHORT;
        do {
            reg0 = KFAST_CRC_U64(reg0, kfast_load64(p));
            reg1 = KFAST_CRC_U64(reg1, kfast_load64(p + KFAST_CRC32C_SHORT));
            reg2 = KFAST_CRC_U64(reg2, kfast_load64(p + 2 * KFAST_CRC32C_SHORT));
            p += 8;
        } while (p < end);
        reg = kfast_crc32c_shift(kfast_crc32c_short_shift, (uint32_t)reg0) ^ (uint32_t)reg1;
        reg = kfast_crc32c_shift(kfast_crc32c_short_shift, reg) ^ (uint32_t)reg2;
        p += 2 * KFAST_CRC32C_SHORT;
        n -= 3 * KFAST_CRC32C_SHORT;
    }
    {
        uint64_t reg64 = reg;
        while (n >= 8) {
            reg64 = KFAST_CRC_U64(reg64, kfast_load64(p));
            p += 8;
            n -= 8;
        }
        reg = (uint32_t)reg64;
    }
    while (n--)
        reg = KFAST_CRC_U8(reg, *p++);
    return reg;
}
#endif

/* ---------------------------------------------------------------- folding */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KFAST_CRC32C_HAVE_FOLD 1
#include <cpuid.h>
#include <immintrin.h>

/* Below this many bytes the folding paths use kfast_crc32c_hw(): with the
 * fold's set-up and final reduction, folding 128-255 bytes measured only
 * 0-15% faster than crc32 here, and 256 bytes twice as fast. */
#define KFAST_CRC32C_FOLD_MIN 256

#define KFAST_PCLMUL_TARGET __attribute__((target("sse4.2,pclmul")))
#define KFAST_VPCLMUL_TARGET __attribute__((target("sse4.2,pclmul,avx,avx2,vpclmulqdq")))

/* reflect32(x^e mod P): the register bit k holds the coefficient of x^(31-k),
 * so x^0 is bit 31 and multiplying by x is a right shift, reducing by P when
 * the x^32 term falls out; whole bytes (x^8) go through the software table,
 * which kfast_crc32c_init() builds first. */
static uint32_t kfast_crc32c_xpow(uint32_t e)
{
    uint32_t v = 0x80000000u;
    for (; e & 7; e--)
        v = (v >> 1) ^ ((v & 1) ? KFAST_CRC32C_POLY : 0);
    for (e >>= 3; e; e--)
        v = kfast_crc32c_table[0][v & 0xFF] ^ (v >> 8);
    return v;
}

/* Fold constants, as the two 64-bit halves of a 128-bit lane, per distance. */
static uint64_t kfast_crc32c_fold_by128[2];    /* 16 bytes: the remainder loop */
static uint64_t kfast_crc32c_fold_by256[2];    /* 32 bytes: ymm accumulators into one another */
static uint64_t kfast_crc32c_fold_by512[2];    /* 64 bytes: four xmm accumulators */
static uint64_t kfast_crc32c_fold_by1024[2];   /* 128 bytes: four ymm accumulators */

/* The mathematics of folding (reflected CRC, all arithmetic in GF(2)[x]).
 *
 * Message bytes b_0..b_{L-1}: bit j of byte i is the coefficient of
 * x^(8(L-1-i)+7-j), and the raw register after the message (from register 0)
 * is M(x)·x^32 mod P. A little-endian 16-byte load at offset o therefore
 * holds V(x)·x^(8(L-o-16)) with V(x) = sum over bits k of V_k·x^(127-k): the
 * loaded value keeps the message's bit order and only its position differs.
 * An initial register r enters as an XOR into the first four bytes, since
 * r·x^(8L) = (r·x^(8L-32))·x^32.
 *
 * Folding moves a 128-bit value A forward by D bits without changing the CRC:
 * with A = A_lo·x^64 + A_hi (A_lo = bits 0..63, the earlier half),
 *     A·x^D ≡ A_lo·(x^(64+D) mod P) + A_hi·(x^D mod P)        (mod P)
 * and each product has degree < 96, so it fits the 128-bit lane that sits D
 * bits later, where it is XORed with the data there.
 *
 * PCLMULQDQ of two reflected 64-bit operands leaves coefficient of x^(126-n)
 * in product bit n: one x short of a reflected 128-bit value. A constant
 * q(x) of degree < 32 placed in bits 0..31 stands for q·x^32. Together: the
 * half that must be multiplied by x^e takes the constant reflect32(x^(e-33)
 * mod P), e = 64+D for A_lo and e = D for A_hi.
 *
 * When one 128-bit value A and a tail T of fewer than 16 bytes remain, A's 16
 * bytes are ordinary message bytes again: the crc32 instruction over A then T,
 * from register 0, yields the register of the whole message (no Barrett
 * reduction needed).
 */
static void kfast_crc32c_fold_constants(void)
{
    static const struct { uint64_t *k; uint32_t d; } dist[] = {
        {kfast_crc32c_fold_by128, 128}, {kfast_crc32c_fold_by256, 256},
        {kfast_crc32c_fold_by512, 512}, {kfast_crc32c_fold_by1024, 1024},
    };
    size_t i;
    for (i = 0; i < sizeof(dist) / sizeof(dist[0]); i++) {
        dist[i].k[0] = kfast_crc32c_xpow(dist[i].d + 64 - 33);
        dist[i].k[1] = kfast_crc32c_xpow(dist[i].d - 33);
    }
}

/* x·x^D + next (mod P), for k = the fold_by<D> constants: lane 0 of k
 * multiplies x's earlier half, lane 1 its later half. */
KFAST_PCLMUL_TARGET
static inline __m128i kfast_fold_xmm(__m128i x, __m128i k, __m128i next)
{
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), next),
                         _mm_clmulepi64_si128(x, k, 0x11));
}

KFAST_VPCLMUL_TARGET
static inline __m256i kfast_fold_ymm(__m256i y, __m256i k, __m256i next)
{
    return _mm256_xor_si256(_mm256_xor_si256(_mm256_clmulepi64_epi128(y, k, 0x00), next),
                            _mm256_clmulepi64_epi128(y, k, 0x11));
}

KFAST_PCLMUL_TARGET
static inline __m128i kfast_load128(const unsigned char *p)
{
    return _mm_loadu_si128((const __m128i *)p);
}

KFAST_PCLMUL_TARGET
static inline __m128i kfast_fold_constant(const uint64_t k[2])
{
    return _mm_loadu_si128((const __m128i *)k);
}

/* The register of (the 16 bytes of x) followed by n < 16 more bytes at p,
 * plus whatever 16-byte blocks remain before them. */
KFAST_PCLMUL_TARGET
static uint32_t kfast_crc32c_fold_finish(__m128i x, const unsigned char *p, size_t n)
{
    const __m128i k128 = kfast_fold_constant(kfast_crc32c_fold_by128);
    uint32_t reg;
    while (n >= 16) {
        x = kfast_fold_xmm(x, k128, kfast_load128(p));
        p += 16;
        n -= 16;
    }
    reg = (uint32_t)_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(x));
    reg = (uint32_t)_mm_crc32_u64(reg, (uint64_t)_mm_extract_epi64(x, 1));
    if (n >= 8) {
        reg = (uint32_t)_mm_crc32_u64(reg, kfast_load64(p));
        p += 8;
        n -= 8;
    }
    while (n--)
        reg = _mm_crc32_u8(reg, *p++);
    return reg;
}

/* Four 128-bit accumulators holding consecutive 16-byte lanes, folded into
 * the last one. */
KFAST_PCLMUL_TARGET
static inline __m128i kfast_fold_xmm4(__m128i x0, __m128i x1, __m128i x2, __m128i x3)
{
    const __m128i k128 = kfast_fold_constant(kfast_crc32c_fold_by128);
    x1 = kfast_fold_xmm(x0, k128, x1);
    x2 = kfast_fold_xmm(x1, k128, x2);
    return kfast_fold_xmm(x2, k128, x3);
}

/* n >= KFAST_CRC32C_FOLD_MIN. Four 128-bit accumulators, 64 bytes per step. */
KFAST_PCLMUL_TARGET
static uint32_t kfast_crc32c_pclmul_fold(uint32_t reg, const unsigned char *p, size_t n)
{
    const __m128i k512 = kfast_fold_constant(kfast_crc32c_fold_by512);
    __m128i x0 = _mm_xor_si128(kfast_load128(p), _mm_cvtsi32_si128((int)reg));
    __m128i x1 = kfast_load128(p + 16);
    __m128i x2 = kfast_load128(p + 32);
    __m128i x3 = kfast_load128(p + 48);
    p += 64;
    n -= 64;
    while (n >= 64) {
        x0 = kfast_fold_xmm(x0, k512, kfast_load128(p));
        x1 = kfast_fold_xmm(x1, k512, kfast_load128(p + 16));
        x2 = kfast_fold_xmm(x2, k512, kfast_load128(p + 32));
        x3 = kfast_fold_xmm(x3, k512, kfast_load128(p + 48));
        p += 64;
        n -= 64;
    }
    return kfast_crc32c_fold_finish(kfast_fold_xmm4(x0, x1, x2, x3), p, n);
}

KFAST_VPCLMUL_TARGET
static inline __m256i kfast_load256(const unsigned char *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

KFAST_VPCLMUL_TARGET
static inline __m256i kfast_fold_constant256(const uint64_t k[2])
{
    return _mm256_broadcastsi128_si256(kfast_fold_constant(k));
}

/* Four 256-bit accumulators holding consecutive 32-byte lanes, folded into
 * one 128-bit value. */
KFAST_VPCLMUL_TARGET
static inline __m128i kfast_fold_ymm4(__m256i y0, __m256i y1, __m256i y2, __m256i y3)
{
    const __m256i k256 = kfast_fold_constant256(kfast_crc32c_fold_by256);
    y1 = kfast_fold_ymm(y0, k256, y1);
    y2 = kfast_fold_ymm(y1, k256, y2);
    y3 = kfast_fold_ymm(y2, k256, y3);
    return kfast_fold_xmm(_mm256_castsi256_si128(y3), kfast_fold_constant(kfast_crc32c_fold_by128),
                          _mm256_extracti128_si256(y3, 1));
}

/* n >= KFAST_CRC32C_FOLD_MIN. Four 256-bit accumulators, 128 bytes per step;
 * VPCLMULQDQ folds each 128-bit lane independently, with the same constant. */
KFAST_VPCLMUL_TARGET
static uint32_t kfast_crc32c_vpclmul_fold(uint32_t reg, const unsigned char *p, size_t n)
{
    const __m256i k1024 = kfast_fold_constant256(kfast_crc32c_fold_by1024);
    __m256i y0 = _mm256_xor_si256(kfast_load256(p), _mm256_setr_epi32((int)reg, 0, 0, 0, 0, 0, 0, 0));
    __m256i y1 = kfast_load256(p + 32);
    __m256i y2 = kfast_load256(p + 64);
    __m256i y3 = kfast_load256(p + 96);
    __m128i x;
    p += 128;
    n -= 128;
    while (n >= 128) {
        y0 = kfast_fold_ymm(y0, k1024, kfast_load256(p));
        y1 = kfast_fold_ymm(y1, k1024, kfast_load256(p + 32));
        y2 = kfast_fold_ymm(y2, k1024, kfast_load256(p + 64));
        y3 = kfast_fold_ymm(y3, k1024, kfast_load256(p + 96));
        p += 128;
        n -= 128;
    }
    x = kfast_fold_ymm4(y0, y1, y2, y3);
    return kfast_crc32c_fold_finish(x, p, n);
}

/* ------------------------------------------------- crc32 + clmul fusion
 *
 * The crc32 unit and the carry-less multiplier are separate execution units
 * and here each manages about 8 bytes per cycle; running both at once, on
 * different parts of a block, nearly doubles the rate. A fused block of
 * ITERATIONS steps is laid out as
 *
 *     [stream 0: S][stream 1: S][stream 2: S][folded: F]
 *     S = ITERATIONS x STREAM_STEP,  F = ITERATIONS x (64 or 128)
 *
 * and each step feeds STREAM_STEP bytes to each of the three crc32 chains
 * and 64 (xmm) or 128 (ymm) bytes to the fold accumulators. The incoming
 * register starts stream 0, the others and the folded part start from 0, and
 * the parts are joined as
 *
 *     reg = shift_{2S+F}(reg0) ^ shift_{S+F}(reg1) ^ shift_F(reg2) ^ reg(folded)
 *
 * where shift_N (N zero bytes, i.e. a multiplication by x^(8N) mod P) is one
 * PCLMULQDQ and one crc32: carry-less multiplying reg by reflect32(x^(8N-33)
 * mod P) gives a 64-bit value v standing for reg·x^(8N-32)·x, and crc32 of v
 * from register 0 multiplies by x^32 and reduces mod P. Block sizes are
 * fixed, so the three constants per block are computed once at init.
 * Inputs shorter than a block (and the tail after the last one) use the
 * plain fold or, under KFAST_CRC32C_FOLD_MIN, the crc32 path. */
#define KFAST_CRC32C_FUSED_ITERATIONS 64
#define KFAST_CRC32C_FUSED_STREAM_STEP 40
#define KFAST_CRC32C_FUSED_STREAM (KFAST_CRC32C_FUSED_ITERATIONS * KFAST_CRC32C_FUSED_STREAM_STEP)
#define KFAST_CRC32C_FUSED_XMM_FOLDED (KFAST_CRC32C_FUSED_ITERATIONS * 64)
#define KFAST_CRC32C_FUSED_YMM_FOLDED (KFAST_CRC32C_FUSED_ITERATIONS * 128)

/* shift_N constants for streams 0, 1, 2 of an xmm and of a ymm fused block. */
static uint32_t kfast_crc32c_fused_xmm_shift[3];
static uint32_t kfast_crc32c_fused_ymm_shift[3];

static void kfast_crc32c_fused_constants(void)
{
    int i;
    for (i = 0; i < 3; i++) {
        size_t after = (size_t)(2 - i) * KFAST_CRC32C_FUSED_STREAM;
        kfast_crc32c_fused_xmm_shift[i] =
            kfast_crc32c_xpow((uint32_t)(8 * (after + KFAST_CRC32C_FUSED_XMM_FOLDED) - 33));
        kfast_crc32c_fused_ymm_shift[i] =
            kfast_crc32c_xpow((uint32_t)(8 * (after + KFAST_CRC32C_FUSED_YMM_FOLDED) - 33));
    }
}

/* shift_N(reg) given k = reflect32(x^(8N-33) mod P). */
KFAST_PCLMUL_TARGET
static inline uint32_t kfast_crc32c_shift_clmul(uint32_t reg, uint32_t k)
{
    __m128i v = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)reg), _mm_cvtsi32_si128((int)k), 0x00);
    return (uint32_t)_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(v));
}

/* One STREAM_STEP (40 bytes) of each crc32 chain at s, s+S, s+2S. The chains
 * are 64-bit variables: _mm_crc32_u64 already zero-extends, and a cast to
 * uint32_t would put a zero-extending mov into each chain (4 cycles per step
 * instead of the instruction's 3). */
#define KFAST_CRC32C_FUSED_STREAMS(s)                                                          \
    do {                                                                                       \
        int off_;                                                                              \
        for (off_ = 0; off_ < KFAST_CRC32C_FUSED_STREAM_STEP; off_ += 8) {                     \
            reg0 = _mm_crc32_u64(reg0, kfast_load64((s) + off_));                              \
            reg1 = _mm_crc32_u64(reg1, kfast_load64((s) + KFAST_CRC32C_FUSED_STREAM + off_));  \
            reg2 = _mm_crc32_u64(reg2, kfast_load64((s) + 2 * KFAST_CRC32C_FUSED_STREAM + off_)); \
        }                                                                                      \
    } while (0)

KFAST_PCLMUL_TARGET
static uint32_t kfast_crc32c_pclmul(uint32_t reg, const unsigned char *p, size_t n)
{
    const size_t block = 3 * KFAST_CRC32C_FUSED_STREAM + KFAST_CRC32C_FUSED_XMM_FOLDED;
    const __m128i k512 = kfast_fold_constant(kfast_crc32c_fold_by512);
    while (n >= block) {
        const unsigned char *s = p, *end = p + KFAST_CRC32C_FUSED_STREAM;
        const unsigned char *f = p + 3 * KFAST_CRC32C_FUSED_STREAM;
        uint64_t reg0 = reg, reg1 = 0, reg2 = 0;
        /* Zero accumulators: the first step's fold of zeros is a no-op. */
        __m128i x0 = _mm_setzero_si128(), x1 = x0, x2 = x0, x3 = x0;
        do {
            x0 = kfast_fold_xmm(x0, k512, kfast_load128(f));
            x1 = kfast_fold_xmm(x1, k512, kfast_load128(f + 16));
            x2 = kfast_fold_xmm(x2, k512, kfast_load128(f + 32));
            x3 = kfast_fold_xmm(x3, k512, kfast_load128(f + 48));
            KFAST_CRC32C_FUSED_STREAMS(s);
            f += 64;
            s += KFAST_CRC32C_FUSED_STREAM_STEP;
        } while (s < end);
        reg = kfast_crc32c_shift_clmul((uint32_t)reg0, kfast_crc32c_fused_xmm_shift[0])
            ^ kfast_crc32c_shift_clmul((uint32_t)reg1, kfast_crc32c_fused_xmm_shift[1])
            ^ kfast_crc32c_shift_clmul((uint32_t)reg2, kfast_crc32c_fused_xmm_shift[2])
            ^ kfast_crc32c_fold_finish(kfast_fold_xmm4(x0, x1, x2, x3), f, 0);
        p += block;
        n -= block;
    }
    if (n >= KFAST_CRC32C_FOLD_MIN)
        return kfast_crc32c_pclmul_fold(reg, p, n);
    return kfast_crc32c_hw(reg, p, n);
}

KFAST_VPCLMUL_TARGET
static uint32_t kfast_crc32c_vpclmul(uint32_t reg, const unsigned char *p, size_t n)
{
    const size_t block = 3 * KFAST_CRC32C_FUSED_STREAM + KFAST_CRC32C_FUSED_YMM_FOLDED;
    const __m256i k1024 = kfast_fold_constant256(kfast_crc32c_fold_by1024);
    while (n >= block) {
        const unsigned char *s = p, *end = p + KFAST_CRC32C_FUSED_STREAM;
        const unsigned char *f = p + 3 * KFAST_CRC32C_FUSED_STREAM;
        uint64_t reg0 = reg, reg1 = 0, reg2 = 0;
        __m256i y0 = _mm256_setzero_si256(), y1 = y0, y2 = y0, y3 = y0;
        do {
            y0 = kfast_fold_ymm(y0, k1024, kfast_load256(f));
            y1 = kfast_fold_ymm(y1, k1024, kfast_load256(f + 32));
            y2 = kfast_fold_ymm(y2, k1024, kfast_load256(f + 64));
            y3 = kfast_fold_ymm(y3, k1024, kfast_load256(f + 96));
            KFAST_CRC32C_FUSED_STREAMS(s);
            f += 128;
            s += KFAST_CRC32C_FUSED_STREAM_STEP;
        } while (s < end);
        reg = kfast_crc32c_shift_clmul((uint32_t)reg0, kfast_crc32c_fused_ymm_shift[0])
            ^ kfast_crc32c_shift_clmul((uint32_t)reg1, kfast_crc32c_fused_ymm_shift[1])
            ^ kfast_crc32c_shift_clmul((uint32_t)reg2, kfast_crc32c_fused_ymm_shift[2])
            ^ kfast_crc32c_fold_finish(kfast_fold_ymm4(y0, y1, y2, y3), f, 0);
        p += block;
        n -= block;
    }
    if (n >= KFAST_CRC32C_FOLD_MIN)
        return kfast_crc32c_vpclmul_fold(reg, p, n);
    return kfast_crc32c_hw(reg, p, n);
}

/* PCLMULQDQ + SSE4.2 for the pclmul path; AVX2 + VPCLMULQDQ and an OS that
 * saves the YMM state (XCR0 bits 1 and 2, read with XGETBV once CPUID says
 * OSXSAVE) for the vpclmul path. */
static void kfast_crc32c_cpu_has_fold(int *pclmul, int *vpclmul)
{
    unsigned int eax, ebx, ecx, edx;
    *pclmul = *vpclmul = 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
        return;
    *pclmul = ((ecx >> 20) & 1) && ((ecx >> 1) & 1);
    if (!*pclmul || !((ecx >> 27) & 1) || !((ecx >> 28) & 1))
        return;
    {
        unsigned int xcr0_lo, xcr0_hi;
        __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
        (void)xcr0_hi;
        if ((xcr0_lo & 6) != 6)
            return;
    }
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx))
        return;
    *vpclmul = ((ebx >> 5) & 1) && ((ecx >> 10) & 1);
}

#else
#define KFAST_CRC32C_HAVE_FOLD 0
#endif

/* ---------------------------------------------------------------- API */

/* The fastest implementation this CPU supports: the last one available. */
static int kfast_crc32c_best(void)
{
    int k;
    for (k = KFAST_CRC32C_IMPLEMENTATIONS - 1; k > 0; k--)
        if (kfast_crc32c_available[k])
            return k;
    return KFAST_CRC32C_SOFTWARE;
}

/* Build the tables and pick the fastest path the CPU has. Idempotent. */
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
    kfast_crc32c_available[KFAST_CRC32C_HARDWARE] = kfast_crc32c_cpu_has_hw();
#endif
#if KFAST_CRC32C_HAVE_FOLD
    kfast_crc32c_fold_constants();
    kfast_crc32c_fused_constants();
    kfast_crc32c_cpu_has_fold(&kfast_crc32c_available[KFAST_CRC32C_PCLMUL],
                              &kfast_crc32c_available[KFAST_CRC32C_VPCLMUL]);
    /* Both folding paths finish (and handle short inputs) with crc32. */
    if (!kfast_crc32c_available[KFAST_CRC32C_HARDWARE])
        kfast_crc32c_available[KFAST_CRC32C_PCLMUL] = kfast_crc32c_available[KFAST_CRC32C_VPCLMUL] = 0;
#endif
    kfast_crc32c_implementation = kfast_crc32c_best();
}

/* Select an implementation (KFAST_CRC32C_SOFTWARE, ...); returns 0, or -1 if
 * it is unknown or this CPU lacks it. */
static int kfast_crc32c_select(int which)
{
    if (which < 0 || which >= KFAST_CRC32C_IMPLEMENTATIONS || !kfast_crc32c_available[which])
        return -1;
    kfast_crc32c_implementation = which;
    return 0;
}

/* Finalised CRC-32C continuing `crc` (0 to start) over n bytes. */
static inline uint32_t kfast_crc32c(uint32_t crc, const unsigned char *p, size_t n)
{
    switch (kfast_crc32c_implementation) {
#if KFAST_CRC32C_HAVE_FOLD
    case KFAST_CRC32C_VPCLMUL:
        return ~kfast_crc32c_vpclmul(~crc, p, n);
    case KFAST_CRC32C_PCLMUL:
        return ~kfast_crc32c_pclmul(~crc, p, n);
#endif
#if KFAST_CRC32C_HAVE_HW
    case KFAST_CRC32C_HARDWARE:
        return ~kfast_crc32c_hw(~crc, p, n);
#endif
    default:
        return ~kfast_crc32c_sw(~crc, p, n);
    }
}

#endif /* KFAST_CRC32C_IMPL_H */
