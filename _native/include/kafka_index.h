/* Kafka's sparse offset and time index entries (OffsetIndex, TimeIndex): big-endian loads and
 * stores, the binary searches and the open-time validation walk. Header-only, no Python objects;
 * every function here may run without the GIL.
 *
 *   offset index entry (8 bytes)          time index entry (12 bytes)
 *   0  int32 relative offset              0  int64 timestamp (ms)
 *   4  int32 position in the .log         8  int32 relative offset
 *
 * relative offset = offset - segment base offset. Callers pass an entry count that they have
 * checked against the mapped length; the functions never read past entry n-1. */
#ifndef SEGLOG_KAFKA_INDEX_H
#define SEGLOG_KAFKA_INDEX_H
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <assert.h>

#define SEGLOG_OIDX_ENTRY 8
#define SEGLOG_TIDX_ENTRY 12
/* Kafka's AbstractIndex searches the last 8192 bytes of the index ("warm section") first. */
#define SEGLOG_IDX_WARM_BYTES 8192

#if defined(__GNUC__)
#define SEGLOG_IDX_PREFETCH(p) __builtin_prefetch((const void *)(p))
#else
#define SEGLOG_IDX_PREFETCH(p) ((void)0)
#endif

static inline uint32_t seglog_be32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

static inline uint64_t seglog_be64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline void seglog_put_be32(uint8_t *p, uint32_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    memcpy(p, &v, 4);
}

static inline void seglog_put_be64(uint8_t *p, uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(p, &v, 8);
}

static inline int32_t seglog_ld_i32(const uint8_t *p) { return (int32_t)seglog_be32(p); }
static inline int64_t seglog_ld_i64(const uint8_t *p) { return (int64_t)seglog_be64(p); }

/* Number of entries in [lo, hi) whose int32 key (at byte `field` of a `stride`-byte entry) is
 * <= t, plus lo; i.e. one past the largest slot with key <= t, assuming keys are sorted.
 * Branch-free halving: the loop compiles to a conditional move, so the cost is the
 * log2(n) dependent loads and no mispredictions. */
static inline int64_t seglog_idx_upper_i32(const uint8_t *p, int64_t lo, int64_t hi,
                                           size_t stride, size_t field, int32_t t) {
    assert(lo >= 0 && hi >= lo);
    if (hi <= lo) return lo;
    const uint8_t *b = p + (size_t)lo * stride + field;
    int64_t len = hi - lo;
    while (len > 1) {
        int64_t half = len >> 1;
        SEGLOG_IDX_PREFETCH(b + (size_t)(half >> 1) * stride);
        SEGLOG_IDX_PREFETCH(b + (size_t)(half + (half >> 1)) * stride);
        b += (seglog_ld_i32(b + (size_t)half * stride) <= t) ? (size_t)half * stride : 0;
        len -= half;
    }
    b += (seglog_ld_i32(b) <= t) ? stride : 0;
    return (int64_t)((size_t)(b - (p + field)) / stride);
}

static inline int64_t seglog_idx_upper_i64(const uint8_t *p, int64_t lo, int64_t hi,
                                           size_t stride, size_t field, int64_t t) {
    assert(lo >= 0 && hi >= lo);
    if (hi <= lo) return lo;
    const uint8_t *b = p + (size_t)lo * stride + field;
    int64_t len = hi - lo;
    while (len > 1) {
        int64_t half = len >> 1;
        SEGLOG_IDX_PREFETCH(b + (size_t)(half >> 1) * stride);
        SEGLOG_IDX_PREFETCH(b + (size_t)(half + (half >> 1)) * stride);
        b += (seglog_ld_i64(b + (size_t)half * stride) <= t) ? (size_t)half * stride : 0;
        len -= half;
    }
    b += (seglog_ld_i64(b) <= t) ? stride : 0;
    return (int64_t)((size_t)(b - (p + field)) / stride);
}

/* Entries in [0, hi) whose int32 key is < t (lower bound). */
static inline int64_t seglog_idx_lower_i32(const uint8_t *p, int64_t hi, size_t stride,
                                           size_t field, int32_t t) {
    if (t == INT32_MIN) return 0;
    return seglog_idx_upper_i32(p, 0, hi, stride, field, t - 1);
}

/* Largest slot with key <= t, or -1. Kafka's warm-section-first search: a tailing reader asks
 * for offsets near the end, and searching only the last 8 KiB for those keeps every such lookup
 * on the last two or three pages of the mapping, so the cold pages in the middle of a large
 * index are never faulted back in (after eviction they would be major faults). Only targets
 * below the warm section pay for a full search. Same answer either way. */
static inline int64_t seglog_idx_floor_i32(const uint8_t *p, int64_t n, size_t stride,
                                           size_t field, int32_t t) {
    if (n <= 0) return -1;
    int64_t warm = SEGLOG_IDX_WARM_BYTES / (int64_t)stride;
    int64_t hot = n - 1 - warm;
    if (hot > 0) {
        if (seglog_ld_i32(p + (size_t)hot * stride + field) <= t)
            return seglog_idx_upper_i32(p, hot, n, stride, field, t) - 1;
        return seglog_idx_upper_i32(p, 0, hot, stride, field, t) - 1;
    }
    return seglog_idx_upper_i32(p, 0, n, stride, field, t) - 1;
}

static inline int64_t seglog_idx_floor_i64(const uint8_t *p, int64_t n, size_t stride,
                                           size_t field, int64_t t) {
    if (n <= 0) return -1;
    int64_t warm = SEGLOG_IDX_WARM_BYTES / (int64_t)stride;
    int64_t hot = n - 1 - warm;
    if (hot > 0) {
        if (seglog_ld_i64(p + (size_t)hot * stride + field) <= t)
            return seglog_idx_upper_i64(p, hot, n, stride, field, t) - 1;
        return seglog_idx_upper_i64(p, 0, hot, stride, field, t) - 1;
    }
    return seglog_idx_upper_i64(p, 0, n, stride, field, t) - 1;
}

/* Outcome of the validation walk. */
enum {
    SEGLOG_IDX_OK = 0,              /* walked every slot */
    SEGLOG_IDX_TAIL = 1,            /* stopped at a zero relative offset past slot 0 */
    SEGLOG_IDX_BEFORE_BASE = 2,     /* relative offset < 0: offset before the base offset */
    SEGLOG_IDX_OFFSET_ORDER = 3,    /* offset index: offset <= previous; time index: offset < previous */
    SEGLOG_IDX_NEG_POSITION = 4,    /* offset index: position < 0 */
    SEGLOG_IDX_POSITION_ORDER = 5,  /* offset index: position < previous */
    SEGLOG_IDX_NEG_TIMESTAMP = 6,   /* time index: timestamp < 0 */
    SEGLOG_IDX_TS_ORDER = 7         /* time index: timestamp <= previous */
};

/* Walk slots 0..n-1 while they form a valid index. Returns the code above and stores in *stop
 * the first slot that is not a valid entry (n when every slot is). Slot 0 is always read as an
 * entry; the caller decides whether an all-zero file is empty. */
static inline int seglog_oidx_walk(const uint8_t *p, int64_t n, int64_t *stop) {
    int32_t prev_rel = 0, prev_pos = 0;
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *e = p + (size_t)i * SEGLOG_OIDX_ENTRY;
        int32_t rel = seglog_ld_i32(e), pos = seglog_ld_i32(e + 4);
        int code = SEGLOG_IDX_OK;
        if (i > 0 && rel == 0) code = SEGLOG_IDX_TAIL;
        else if (rel < 0) code = SEGLOG_IDX_BEFORE_BASE;
        else if (i > 0 && rel <= prev_rel) code = SEGLOG_IDX_OFFSET_ORDER;
        else if (pos < 0) code = SEGLOG_IDX_NEG_POSITION;
        else if (i > 0 && pos < prev_pos) code = SEGLOG_IDX_POSITION_ORDER;
        if (code != SEGLOG_IDX_OK) { *stop = i; return code; }
        prev_rel = rel;
        prev_pos = pos;
    }
    *stop = n;
    return SEGLOG_IDX_OK;
}

static inline int seglog_tidx_walk(const uint8_t *p, int64_t n, int64_t *stop) {
    int64_t prev_ts = 0;
    int32_t prev_rel = 0;
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *e = p + (size_t)i * SEGLOG_TIDX_ENTRY;
        int64_t ts = seglog_ld_i64(e);
        int32_t rel = seglog_ld_i32(e + 8);
        int code = SEGLOG_IDX_OK;
        if (i > 0 && rel == 0) code = SEGLOG_IDX_TAIL;
        else if (rel < 0) code = SEGLOG_IDX_BEFORE_BASE;
        else if (i > 0 && rel < prev_rel) code = SEGLOG_IDX_OFFSET_ORDER;
        else if (ts < 0) code = SEGLOG_IDX_NEG_TIMESTAMP;
        else if (i > 0 && ts <= prev_ts) code = SEGLOG_IDX_TS_ORDER;
        if (code != SEGLOG_IDX_OK) { *stop = i; return code; }
        prev_ts = ts;
        prev_rel = rel;
    }
    *stop = n;
    return SEGLOG_IDX_OK;
}

/* Offset of the first non-zero byte in p[0, n), or -1. Word at a time. */
static inline int64_t seglog_first_nonzero(const uint8_t *p, int64_t n) {
    int64_t i = 0;
    while (i < n && ((uintptr_t)(p + i) & 7)) {
        if (p[i]) return i;
        i++;
    }
    for (; i + 64 <= n; i += 64) {
        uint64_t w[8];
        memcpy(w, p + i, 64);
        if ((w[0] | w[1] | w[2] | w[3] | w[4] | w[5] | w[6] | w[7]) != 0) break;
    }
    for (; i < n; i++)
        if (p[i]) return i;
    return -1;
}

#endif
