/* CRC-32C (Castagnoli), as Kafka's org.apache.kafka.common.utils.Crc32C: the RecordBatch v2
 * checksum (magic 2, over attributes .. end of batch).
 *
 *   polynomial        0x1EDC6F41, reflected 0x82F63B78
 *   initial / final   0xFFFFFFFF (the register is inverted on entry and on exit)
 *   check value       seglog_crc32c(0, "123456789", 9) == 0xE3069283
 *   chaining          seglog_crc32c(seglog_crc32c(0, a, na), b, nb) == CRC of a followed by b
 *
 * Header-only, so every native module inlines it (declared once, in crc.pxd).
 * seglog_crc32c() is the one entry point; it dispatches to
 *
 *   vpclmulqdq  x86-64 with AVX-512 and VPCLMULQDQ: buffers of 1 KiB and more are folded 256
 *            bytes at a time by carry-less multiplication, the rest as sse4.2 does; chosen when
 *            __builtin_cpu_supports reports avx512f, avx512vl and vpclmulqdq
 *   sse4.2   x86-64 `crc32` instruction, compiled through a target attribute (no global -msse4.2)
 *            and chosen when __builtin_cpu_supports("sse4.2")
 *   armv8    AArch64 CRC32C instructions (target "+crc"), chosen when getauxval(AT_HWCAP) has
 *            HWCAP_CRC32 (or when the whole build already targets +crc)
 *   table    portable slicing-by-8
 *
 * The choice is made once, at the first call (or the first seglog_crc32c_implementation()).
 * SEGLOG_CRC32C=table (or =sse4.2, on x86-64 with SSE 4.2) in the environment at that moment
 * forces that path, so tests can cover each; any other value means "detect". Each extension module that includes this header
 * has its own copy of the tables and of the choice (they are `static`); all copies decide alike.
 *
 * Thread safety: set-up is guarded by an atomic state word (0 = untouched, 1 = being built,
 * 2 + implementation = ready), so concurrent first calls from threads without the GIL are safe;
 * afterwards the tables are read-only.
 *
 * Why three streams. The crc32 instruction has a latency of 3 cycles and a throughput of one
 * per cycle on current x86 cores (AArch64 cores are similar), so a single dependency chain
 * uses a third of the unit. A block of 3*L bytes is split into three L-byte streams A, B, C
 * computed in one loop. With raw() the register update without the inversions (linear over
 * GF(2)) and M_L(v) = v * x^(8L) mod P (the effect of L zero bytes on the register):
 *
 *     raw(s, A|B|C) = M_L( M_L(raw(s, A)) ^ raw(0, B) ) ^ raw(0, C)
 *
 * M_L is linear in v, so it is evaluated as four 256-entry tables, one per byte of v, built at
 * set-up from x^(8L) mod P by carry-less multiplication. Two block sizes: LONG for big
 * buffers and SHORT so that a few KiB also run three-wide; the remainder runs one-wide.
 *
 * Folding (vpclmulqdq). With the bytes read as a reflected polynomial, a 16-byte chunk whose
 * first eight bytes are a (a 64-bit little-endian load) and last eight are b has, moved D bytes
 * further on, the same remainder mod P as clmul(a, K1) ^ clmul(b, K2), where K1 and K2 are
 * x^(8D+32) and x^(8D-32) mod P, bit-reflected over 33 bits. Four 64-byte registers hold the
 * first 256 bytes (the inverted running CRC XORed into the first four) and are folded D = 256
 * bytes onto each following block; then folded onto each other (D = 64) and onto whole
 * 64-byte blocks left; then the four 16-byte lanes onto the last (D = 48, 32, 16). The crc32
 * instruction over that last chunk, from a zero register, gives the register for everything so
 * far, and the remaining < 64 bytes run as sse4.2. The constants are checked against the table
 * path for every length and alignment by tests/unit/test_crc32c.py.
 */
#ifndef SEGLOG_CRC32C_H
#define SEGLOG_CRC32C_H
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>

#define SEGLOG_CRC32C_POLY 0x82F63B78u
#define SEGLOG_CRC32C_LONG 8192u  /* bytes per stream; a LONG round covers 24 KiB */
#define SEGLOG_CRC32C_SHORT 256u  /* bytes per stream; a SHORT round covers 768 B */

enum {
    SEGLOG_CRC32C_IMPL_TABLE = 0,
    SEGLOG_CRC32C_IMPL_SSE42 = 1,
    SEGLOG_CRC32C_IMPL_ARMV8 = 2,
    SEGLOG_CRC32C_IMPL_VPCLMUL = 3
};

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#  define SEGLOG_CRC32C_HAVE_SSE42 1
#  if (defined(__clang__) && __clang_major__ >= 8) || (!defined(__clang__) && __GNUC__ >= 10)
#    define SEGLOG_CRC32C_HAVE_VPCLMUL 1
#    include <immintrin.h>
#  endif
#  include <nmmintrin.h>
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__)) && \
      defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#  define SEGLOG_CRC32C_HAVE_ARMV8 1
#  include <arm_acle.h>
#  if defined(__linux__)
#    include <sys/auxv.h>
#    ifndef HWCAP_CRC32
#      define HWCAP_CRC32 (1UL << 7)
#    endif
#  endif
#  if defined(__clang__)
#    define SEGLOG_CRC32C_ARM_TARGET __attribute__((target("crc")))
#  else
#    define SEGLOG_CRC32C_ARM_TARGET __attribute__((target("+crc")))
#  endif
#endif

static uint32_t seglog_crc32c_table[8][256];
#if defined(SEGLOG_CRC32C_HAVE_SSE42) || defined(SEGLOG_CRC32C_HAVE_ARMV8)
/* shift_long[k][b] = M_LONG(b << 8k), shift_short likewise for SHORT. */
static uint32_t seglog_crc32c_shift_long[4][256];
static uint32_t seglog_crc32c_shift_short[4][256];
#endif
static int seglog_crc32c_state = 0;

/* a * b mod P, both reflected (bit 31 holds x^0, bit 0 holds x^31). */
static uint32_t seglog_crc32c_mulmod(uint32_t a, uint32_t b) {
    uint32_t prod = 0;
    for (int i = 0; i < 32; i++) {
        if (a & (0x80000000u >> i)) prod ^= b;
        b = (b >> 1) ^ (SEGLOG_CRC32C_POLY & (0u - (b & 1u)));  /* b *= x */
    }
    return prod;
}

/* x^(8n) mod P, reflected: square-and-multiply over the bits of n. */
static uint32_t seglog_crc32c_xpow8n(size_t n) {
    uint32_t result = 0x80000000u;  /* x^0 */
    uint32_t sq = 0x00800000u;      /* x^8 */
    while (n) {
        if (n & 1u) result = seglog_crc32c_mulmod(result, sq);
        sq = seglog_crc32c_mulmod(sq, sq);
        n >>= 1;
    }
    return result;
}

#if defined(SEGLOG_CRC32C_HAVE_SSE42) || defined(SEGLOG_CRC32C_HAVE_ARMV8)
static void seglog_crc32c_build_shift(uint32_t t[4][256], size_t nbytes) {
    uint32_t xp = seglog_crc32c_xpow8n(nbytes);
    for (int k = 0; k < 4; k++) {
        t[k][0] = 0;
        for (int j = 0; j < 8; j++) {
            uint32_t bit = seglog_crc32c_mulmod(xp, 1u << (8 * k + j));
            for (int b = 0; b < (1 << j); b++) t[k][(1 << j) + b] = t[k][b] ^ bit;
        }
    }
}

/* M_L(v) for the table t of L. */
static inline uint32_t seglog_crc32c_shift(const uint32_t t[4][256], uint32_t v) {
    return t[0][v & 0xff] ^ t[1][(v >> 8) & 0xff] ^ t[2][(v >> 16) & 0xff] ^ t[3][v >> 24];
}

static inline uint64_t seglog_crc32c_load64(const uint8_t *p) {
    uint64_t w;
    memcpy(&w, p, 8);  /* little-endian hosts only (guarded above); one unaligned load */
    return w;
}
#endif

static void seglog_crc32c_build_table(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (SEGLOG_CRC32C_POLY & (0u - (c & 1u)));
        seglog_crc32c_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = seglog_crc32c_table[0][i];
        for (int t = 1; t < 8; t++) {
            c = seglog_crc32c_table[0][c & 0xff] ^ (c >> 8);
            seglog_crc32c_table[t][i] = c;
        }
    }
}

static int seglog_crc32c_detect(void) {
    const char *force = getenv("SEGLOG_CRC32C");
    if (force != NULL && strcmp(force, "table") == 0) return SEGLOG_CRC32C_IMPL_TABLE;
#if defined(SEGLOG_CRC32C_HAVE_SSE42)
    __builtin_cpu_init();
#  if defined(SEGLOG_CRC32C_HAVE_VPCLMUL)
    if (!(force != NULL && strcmp(force, "sse4.2") == 0) && __builtin_cpu_supports("sse4.2") &&
        __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("vpclmulqdq"))
        return SEGLOG_CRC32C_IMPL_VPCLMUL;
#  endif
    if (__builtin_cpu_supports("sse4.2")) return SEGLOG_CRC32C_IMPL_SSE42;
#elif defined(SEGLOG_CRC32C_HAVE_ARMV8)
#  if defined(__ARM_FEATURE_CRC32)
    return SEGLOG_CRC32C_IMPL_ARMV8;
#  elif defined(__linux__)
    if (getauxval(AT_HWCAP) & HWCAP_CRC32) return SEGLOG_CRC32C_IMPL_ARMV8;
#  elif defined(__APPLE__)
    return SEGLOG_CRC32C_IMPL_ARMV8;  /* every Apple AArch64 core implements CRC32 */
#  endif
#endif
    return SEGLOG_CRC32C_IMPL_TABLE;
}

/* Out of line: runs once. Returns the implementation. */
static int seglog_crc32c_setup(void) {
    int expected = 0;
    if (__atomic_compare_exchange_n(&seglog_crc32c_state, &expected, 1, 0,
                                    __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)) {
        int impl = seglog_crc32c_detect();
        seglog_crc32c_build_table();
#if defined(SEGLOG_CRC32C_HAVE_SSE42) || defined(SEGLOG_CRC32C_HAVE_ARMV8)
        if (impl != SEGLOG_CRC32C_IMPL_TABLE) {
            seglog_crc32c_build_shift(seglog_crc32c_shift_long, SEGLOG_CRC32C_LONG);
            seglog_crc32c_build_shift(seglog_crc32c_shift_short, SEGLOG_CRC32C_SHORT);
        }
#endif
        __atomic_store_n(&seglog_crc32c_state, 2 + impl, __ATOMIC_RELEASE);
        return impl;
    }
    /* Another thread is building the tables (tens of microseconds). */
    while ((expected = __atomic_load_n(&seglog_crc32c_state, __ATOMIC_ACQUIRE)) < 2) sched_yield();
    return expected - 2;
}

static inline int seglog_crc32c_impl(void) {
    int s = __atomic_load_n(&seglog_crc32c_state, __ATOMIC_ACQUIRE);
    return s >= 2 ? s - 2 : seglog_crc32c_setup();
}

/* "sse4.2", "armv8" or "table": what seglog_crc32c() runs in this module. */
static inline const char *seglog_crc32c_implementation(void) {
    switch (seglog_crc32c_impl()) {
    case SEGLOG_CRC32C_IMPL_VPCLMUL: return "vpclmulqdq";
    case SEGLOG_CRC32C_IMPL_SSE42: return "sse4.2";
    case SEGLOG_CRC32C_IMPL_ARMV8: return "armv8";
    default: return "table";
    }
}

/* Portable slicing-by-8. Usable directly (tests, benchmarks) whatever the dispatch chose. */
static uint32_t seglog_crc32c_sw(uint32_t crc, const uint8_t *p, size_t n) {
    (void)seglog_crc32c_impl();  /* the tables exist once set-up has run */
    crc = ~crc;
    while (n && ((uintptr_t)p & 7)) { crc = seglog_crc32c_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8); n--; }
    while (n >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        crc = seglog_crc32c_table[7][lo & 0xff] ^ seglog_crc32c_table[6][(lo >> 8) & 0xff] ^
              seglog_crc32c_table[5][(lo >> 16) & 0xff] ^ seglog_crc32c_table[4][lo >> 24] ^
              seglog_crc32c_table[3][hi & 0xff] ^ seglog_crc32c_table[2][(hi >> 8) & 0xff] ^
              seglog_crc32c_table[1][(hi >> 16) & 0xff] ^ seglog_crc32c_table[0][hi >> 24];
        p += 8; n -= 8;
    }
    while (n--) crc = seglog_crc32c_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* The hardware body, shared by x86-64 and AArch64: CRC8(c, byte) and CRC64(c, word) are the
 * raw one-byte and eight-byte instructions. c0..c2 are 64-bit so the x86 instruction needs no
 * zero-extension between steps; only their low 32 bits are ever set. Call only after set-up
 * (the shift tables must exist). */
#define SEGLOG_CRC32C_HW_BODY(CRC8, CRC64)                                                      \
    uint64_t c0 = (uint32_t)~crc;                                                                \
    while (n && ((uintptr_t)p & 7)) { c0 = CRC8(c0, *p); p++; n--; }                             \
    while (n >= 3 * (size_t)SEGLOG_CRC32C_LONG) {                                                \
        uint64_t c1 = 0, c2 = 0;                                                                 \
        const uint8_t *end = p + SEGLOG_CRC32C_LONG;                                             \
        do {                                                                                     \
            c0 = CRC64(c0, seglog_crc32c_load64(p));                                             \
            c1 = CRC64(c1, seglog_crc32c_load64(p + SEGLOG_CRC32C_LONG));                        \
            c2 = CRC64(c2, seglog_crc32c_load64(p + 2 * SEGLOG_CRC32C_LONG));                    \
            c0 = CRC64(c0, seglog_crc32c_load64(p + 8));                                         \
            c1 = CRC64(c1, seglog_crc32c_load64(p + 8 + SEGLOG_CRC32C_LONG));                    \
            c2 = CRC64(c2, seglog_crc32c_load64(p + 8 + 2 * SEGLOG_CRC32C_LONG));                \
            p += 16;                                                                             \
        } while (p < end);                                                                       \
        c0 = seglog_crc32c_shift(seglog_crc32c_shift_long, (uint32_t)c0) ^ c1;                   \
        c0 = seglog_crc32c_shift(seglog_crc32c_shift_long, (uint32_t)c0) ^ c2;                   \
        p += 2 * SEGLOG_CRC32C_LONG;                                                             \
        n -= 3 * SEGLOG_CRC32C_LONG;                                                             \
    }                                                                                            \
    while (n >= 3 * (size_t)SEGLOG_CRC32C_SHORT) {                                               \
        uint64_t c1 = 0, c2 = 0;                                                                 \
        const uint8_t *end = p + SEGLOG_CRC32C_SHORT;                                            \
        do {                                                                                     \
            c0 = CRC64(c0, seglog_crc32c_load64(p));                                             \
            c1 = CRC64(c1, seglog_crc32c_load64(p + SEGLOG_CRC32C_SHORT));                       \
            c2 = CRC64(c2, seglog_crc32c_load64(p + 2 * SEGLOG_CRC32C_SHORT));                   \
            c0 = CRC64(c0, seglog_crc32c_load64(p + 8));                                         \
            c1 = CRC64(c1, seglog_crc32c_load64(p + 8 + SEGLOG_CRC32C_SHORT));                   \
            c2 = CRC64(c2, seglog_crc32c_load64(p + 8 + 2 * SEGLOG_CRC32C_SHORT));               \
            p += 16;                                                                             \
        } while (p < end);                                                                       \
        c0 = seglog_crc32c_shift(seglog_crc32c_shift_short, (uint32_t)c0) ^ c1;                  \
        c0 = seglog_crc32c_shift(seglog_crc32c_shift_short, (uint32_t)c0) ^ c2;                  \
        p += 2 * SEGLOG_CRC32C_SHORT;                                                            \
        n -= 3 * SEGLOG_CRC32C_SHORT;                                                            \
    }                                                                                            \
    while (n >= 8) { c0 = CRC64(c0, seglog_crc32c_load64(p)); p += 8; n -= 8; }                  \
    while (n) { c0 = CRC8(c0, *p); p++; n--; }                                                   \
    return ~(uint32_t)c0;

#if defined(SEGLOG_CRC32C_HAVE_SSE42)
#define SEGLOG_CRC32C_X86_8(c, b) ((uint64_t)_mm_crc32_u8((uint32_t)(c), (b)))
#define SEGLOG_CRC32C_X86_64(c, w) _mm_crc32_u64((c), (w))
__attribute__((target("sse4.2")))
static uint32_t seglog_crc32c_sse42(uint32_t crc, const uint8_t *p, size_t n) {
    SEGLOG_CRC32C_HW_BODY(SEGLOG_CRC32C_X86_8, SEGLOG_CRC32C_X86_64)
}
#endif

#if defined(SEGLOG_CRC32C_HAVE_VPCLMUL)
/* K1, K2 for a fold over D bytes (see "Folding" above). */
#define SEGLOG_CRC32C_K256 0xdcb17aa4ull, 0xb9e02b86ull
#define SEGLOG_CRC32C_K64 0x740eef02ull, 0x9e4addf8ull
#define SEGLOG_CRC32C_K48 0x1c291d04ull, 0x1d82c63daull
#define SEGLOG_CRC32C_K32 0x1384aa63aull, 0xba4fc28eull
#define SEGLOG_CRC32C_K16 0xf20c0dfeull, 0x14cd00bd6ull
#define SEGLOG_CRC32C_VTARGET __attribute__((target("sse4.2,pclmul,avx512f,avx512vl,vpclmulqdq")))

SEGLOG_CRC32C_VTARGET static inline __m128i seglog_crc32c_k128(uint64_t k1, uint64_t k2) {
    return _mm_set_epi64x((long long)k2, (long long)k1);
}
/* x moved D bytes on (k from seglog_crc32c_k...), XORed with y: per 16-byte lane. */
SEGLOG_CRC32C_VTARGET static inline __m512i seglog_crc32c_fold512(__m512i x, __m512i k, __m512i y) {
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00),
                                     _mm512_clmulepi64_epi128(x, k, 0x11), y, 0x96);
}
SEGLOG_CRC32C_VTARGET static inline __m128i seglog_crc32c_fold128(__m128i x, __m128i k) {
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

SEGLOG_CRC32C_VTARGET
static uint32_t seglog_crc32c_vpclmul(uint32_t crc, const uint8_t *p, size_t n) {
    if (n < 1024) return seglog_crc32c_sse42(crc, p, n);
    const __m512i k256 = _mm512_broadcast_i32x4(seglog_crc32c_k128(SEGLOG_CRC32C_K256));
    const __m512i k64 = _mm512_broadcast_i32x4(seglog_crc32c_k128(SEGLOG_CRC32C_K64));
    __m512i x0 = _mm512_loadu_si512((const void *)p);
    __m512i x1 = _mm512_loadu_si512((const void *)(p + 64));
    __m512i x2 = _mm512_loadu_si512((const void *)(p + 128));
    __m512i x3 = _mm512_loadu_si512((const void *)(p + 192));
    x0 = _mm512_xor_si512(x0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)~crc)));
    p += 256;
    n -= 256;
    while (n >= 256) {
        x0 = seglog_crc32c_fold512(x0, k256, _mm512_loadu_si512((const void *)p));
        x1 = seglog_crc32c_fold512(x1, k256, _mm512_loadu_si512((const void *)(p + 64)));
        x2 = seglog_crc32c_fold512(x2, k256, _mm512_loadu_si512((const void *)(p + 128)));
        x3 = seglog_crc32c_fold512(x3, k256, _mm512_loadu_si512((const void *)(p + 192)));
        p += 256;
        n -= 256;
    }
    x1 = seglog_crc32c_fold512(x0, k64, x1);
    x2 = seglog_crc32c_fold512(x1, k64, x2);
    x3 = seglog_crc32c_fold512(x2, k64, x3);
    while (n >= 64) {
        x3 = seglog_crc32c_fold512(x3, k64, _mm512_loadu_si512((const void *)p));
        p += 64;
        n -= 64;
    }
    __m128i r = _mm512_extracti32x4_epi32(x3, 3);
    r = _mm_xor_si128(r, seglog_crc32c_fold128(_mm512_extracti32x4_epi32(x3, 0),
                                                seglog_crc32c_k128(SEGLOG_CRC32C_K48)));
    r = _mm_xor_si128(r, seglog_crc32c_fold128(_mm512_extracti32x4_epi32(x3, 1),
                                                seglog_crc32c_k128(SEGLOG_CRC32C_K32)));
    r = _mm_xor_si128(r, seglog_crc32c_fold128(_mm512_extracti32x4_epi32(x3, 2),
                                                seglog_crc32c_k128(SEGLOG_CRC32C_K16)));
    uint64_t c = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(r));
    c = _mm_crc32_u64(c, (uint64_t)_mm_extract_epi64(r, 1));
    return seglog_crc32c_sse42(~(uint32_t)c, p, n);
}
#endif

#if defined(SEGLOG_CRC32C_HAVE_ARMV8)
#define SEGLOG_CRC32C_ARM_8(c, b) ((uint64_t)__crc32cb((uint32_t)(c), (b)))
#define SEGLOG_CRC32C_ARM_64(c, w) ((uint64_t)__crc32cd((uint32_t)(c), (w)))
SEGLOG_CRC32C_ARM_TARGET
static uint32_t seglog_crc32c_armv8(uint32_t crc, const uint8_t *p, size_t n) {
    SEGLOG_CRC32C_HW_BODY(SEGLOG_CRC32C_ARM_8, SEGLOG_CRC32C_ARM_64)
}
#endif

static inline uint32_t seglog_crc32c(uint32_t crc, const uint8_t *p, size_t n) {
    switch (seglog_crc32c_impl()) {
#if defined(SEGLOG_CRC32C_HAVE_VPCLMUL)
    case SEGLOG_CRC32C_IMPL_VPCLMUL: return seglog_crc32c_vpclmul(crc, p, n);
#endif
#if defined(SEGLOG_CRC32C_HAVE_SSE42)
    case SEGLOG_CRC32C_IMPL_SSE42: return seglog_crc32c_sse42(crc, p, n);
#endif
#if defined(SEGLOG_CRC32C_HAVE_ARMV8)
    case SEGLOG_CRC32C_IMPL_ARMV8: return seglog_crc32c_armv8(crc, p, n);
#endif
    default: return seglog_crc32c_sw(crc, p, n);
    }
}
#endif
