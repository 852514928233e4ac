/* Big-endian loads/stores and Kafka's zigzag varints (ByteUtils in kafka-clients).
 * Header-only, shared by every native module. All readers take an explicit end pointer
 * and return NULL on overrun or on an over-long encoding, never reading past `end`. */
#ifndef SEGLOG_KBYTES_H
#define SEGLOG_KBYTES_H
#include <stdint.h>
#include <string.h>

static inline uint16_t kb_load_u16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint32_t kb_load_u32(const uint8_t *p) {
    uint32_t v; memcpy(&v, p, 4); return __builtin_bswap32(v);
}
static inline uint64_t kb_load_u64(const uint8_t *p) {
    uint64_t v; memcpy(&v, p, 8); return __builtin_bswap64(v);
}
static inline int16_t kb_load_i16(const uint8_t *p) { return (int16_t)kb_load_u16(p); }
static inline int32_t kb_load_i32(const uint8_t *p) { return (int32_t)kb_load_u32(p); }
static inline int64_t kb_load_i64(const uint8_t *p) { return (int64_t)kb_load_u64(p); }

static inline void kb_store_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static inline void kb_store_u32(uint8_t *p, uint32_t v) { v = __builtin_bswap32(v); memcpy(p, &v, 4); }
static inline void kb_store_u64(uint8_t *p, uint64_t v) { v = __builtin_bswap64(v); memcpy(p, &v, 8); }

/* Two's-complement wrapping arithmetic, defined for every input (Kafka's Java longs wrap);
 * used where untrusted header fields are combined, so corrupt input cannot overflow. */
static inline int64_t kb_wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t kb_wrap_sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }

/* Size in bytes of the zigzag varint / varlong encoding of v. */
static inline int kb_varint_size(int32_t v) {
    uint32_t u = ((uint32_t)v << 1) ^ (uint32_t)(v >> 31);
    int n = 1;
    while (u >= 0x80) { u >>= 7; n++; }
    return n;
}
static inline int kb_varlong_size(int64_t v) {
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    int n = 1;
    while (u >= 0x80) { u >>= 7; n++; }
    return n;
}
static inline uint8_t *kb_write_varint(uint8_t *p, int32_t v) {
    uint32_t u = ((uint32_t)v << 1) ^ (uint32_t)(v >> 31);
    while (u >= 0x80) { *p++ = (uint8_t)(u | 0x80); u >>= 7; }
    *p++ = (uint8_t)u;
    return p;
}
static inline uint8_t *kb_write_varlong(uint8_t *p, int64_t v) {
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    while (u >= 0x80) { *p++ = (uint8_t)(u | 0x80); u >>= 7; }
    *p++ = (uint8_t)u;
    return p;
}

/* Strict UTF-8 check (no overlongs, no surrogates, nothing above U+10FFFF), as Python's
 * decoder applies it: 1 if p[0..n) is valid UTF-8. */
static inline int kb_utf8_valid(const uint8_t *p, int64_t n) {
    int64_t i = 0;
    while (i < n) {
        uint8_t c = p[i];
        if (c < 0x80) { i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (p[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n || (p[i + 1] & 0xC0) != 0x80 || (p[i + 2] & 0xC0) != 0x80) return 0;
            if (c == 0xE0 && p[i + 1] < 0xA0) return 0;   /* overlong */
            if (c == 0xED && p[i + 1] > 0x9F) return 0;   /* surrogates */
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n || (p[i + 1] & 0xC0) != 0x80 || (p[i + 2] & 0xC0) != 0x80 ||
                (p[i + 3] & 0xC0) != 0x80) return 0;
            if (c == 0xF0 && p[i + 1] < 0x90) return 0;   /* overlong */
            if (c == 0xF4 && p[i + 1] > 0x8F) return 0;   /* above U+10FFFF */
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

/* Readers: at most 5 bytes for a varint and 10 for a varlong, as ByteUtils.readVarint/Varlong;
 * a longer encoding is an error (NULL), as is running into `end`. */
static inline const uint8_t *kb_read_varint(const uint8_t *p, const uint8_t *end, int32_t *out) {
    uint32_t u = 0;
    /* One- and two-byte encodings (lengths and deltas of most records) without the loop; one
     * byte also when it is the last before `end` (a record's header count). */
    if (p < end) {
        uint32_t b0 = p[0];
        if (!(b0 & 0x80)) { *out = (int32_t)((b0 >> 1) ^ (0u - (b0 & 1u))); return p + 1; }
        if (end - p >= 2 && !(p[1] & 0x80)) {
            u = (b0 & 0x7f) | ((uint32_t)p[1] << 7);
            *out = (int32_t)((u >> 1) ^ (0u - (u & 1u)));
            return p + 2;
        }
    }
    for (int shift = 0; shift < 35; shift += 7) {
        if (p >= end) return NULL;
        uint8_t b = *p++;
        u |= (uint32_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) { *out = (int32_t)((u >> 1) ^ (0u - (u & 1u))); return p; }
    }
    return NULL;
}
static inline const uint8_t *kb_read_varlong(const uint8_t *p, const uint8_t *end, int64_t *out) {
    uint64_t u = 0;
    if (p < end) {
        uint64_t b0 = p[0];
        if (!(b0 & 0x80)) { *out = (int64_t)((b0 >> 1) ^ (0ull - (b0 & 1ull))); return p + 1; }
        if (end - p >= 2 && !(p[1] & 0x80)) {
            u = (b0 & 0x7f) | ((uint64_t)p[1] << 7);
            *out = (int64_t)((u >> 1) ^ (0ull - (u & 1ull)));
            return p + 2;
        }
    }
    for (int shift = 0; shift < 70; shift += 7) {
        if (p >= end) return NULL;
        uint8_t b = *p++;
        u |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) { *out = (int64_t)((u >> 1) ^ (0ull - (u & 1ull))); return p; }
    }
    return NULL;
}
/* The common v2 record, read and checked in one pass (validation's fast path): a length, timestamp
 * delta, offset delta and value length of one or two bytes each, a one-byte key length, and no
 * headers. Sets the deltas and the key length (-1 null) and returns the record's end, which is
 * `p + ` its whole size. NULL when the record at `p` has another form, or anything in it is out of
 * bounds or wrong: the full reader (`_parse_record`) then decides, and reports what it finds. So
 * this accepts only records the full reader accepts, with the same values. `end` bounds the
 * record (the end of the batch's records). */
static inline const uint8_t *kb_read_plain_record(const uint8_t *p, const uint8_t *end, int64_t *ts_delta,
                                                  int32_t *off_delta, int32_t *key_len) {
    const uint8_t *body_end;
    uint32_t u, b0;
    int32_t length, n;
    /* The head (length, attributes, both deltas, key length) is at most 8 bytes. */
    if (end - p < 8) return NULL;
#define KB_SHORT_VARINT(dst)                                                   \
    do {                                                                       \
        b0 = p[0];                                                             \
        if (b0 < 0x80) { u = b0; p += 1; }                                     \
        else if (p[1] < 0x80) { u = (b0 & 0x7f) | ((uint32_t)p[1] << 7); p += 2; } \
        else return NULL;                                                      \
        (dst) = (int32_t)((u >> 1) ^ (0u - (u & 1u)));                         \
    } while (0)
    KB_SHORT_VARINT(length);
    if (length < 1 || length > end - p) return NULL;
    body_end = p + length;
    p += 1; /* attributes */
    KB_SHORT_VARINT(n);
    *ts_delta = n;
    KB_SHORT_VARINT(n);
    *off_delta = n;
    b0 = p[0];
    if (b0 >= 0x80) return NULL;
    n = (int32_t)((b0 >> 1) ^ (0u - (b0 & 1u)));
    p += 1;
    /* Everything so far inside the body, with room left for a value length and a header count. */
    if (n < -1 || body_end - p < 2) return NULL;
    if (n > 0) {
        if (n > body_end - p - 2) return NULL;
        p += n;
    }
    *key_len = n;
    /* The value length: two bytes at most, both before body_end (at least two are left). */
    KB_SHORT_VARINT(n);
    if (n < -1) return NULL;
    if (n > 0) {
        if (n > body_end - p) return NULL;
        p += n;
    }
#undef KB_SHORT_VARINT
    /* A zero header count, and the record ends right after it. */
    if (body_end - p != 1 || p[0] != 0) return NULL;
    return body_end;
}
#endif
