/* XXH32 (xxHash, 32-bit variant), the checksum of the LZ4 frame format: the frame
 * descriptor byte HC = (xxh32(descriptor, 0) >> 8) & 0xff, and the optional block and
 * content checksums. Written from the published algorithm (four 32-bit lanes over
 * 16-byte stripes, then a tail and an avalanche); little-endian input words on every host.
 * seglog_xxh32("", 0, 0) == 0x02CC5D05; seglog_xxh32("\x60\x40", 2, 0) >> 8 & 0xff == 0x82.
 * Pure function, no state: safe to call without the GIL. */
#ifndef SEGLOG_XXH32_H
#define SEGLOG_XXH32_H
#include <stdint.h>
#include <stddef.h>

#define SEGLOG_XXH_P1 0x9E3779B1u
#define SEGLOG_XXH_P2 0x85EBCA77u
#define SEGLOG_XXH_P3 0xC2B2AE3Du
#define SEGLOG_XXH_P4 0x27D4EB2Fu
#define SEGLOG_XXH_P5 0x165667B1u

static inline uint32_t seglog_xxh_rotl(uint32_t x, int r) {
    return (x << r) | (x >> (32 - r));
}

static inline uint32_t seglog_xxh_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint32_t seglog_xxh_lane(uint32_t acc, uint32_t word) {
    acc += word * SEGLOG_XXH_P2;
    return seglog_xxh_rotl(acc, 13) * SEGLOG_XXH_P1;
}

static uint32_t seglog_xxh32(const uint8_t *p, size_t n, uint32_t seed) {
    const uint8_t *end = p + n;
    uint32_t h;
    if (n >= 16) {
        const uint8_t *last_stripe = end - 16;
        uint32_t v1 = seed + SEGLOG_XXH_P1 + SEGLOG_XXH_P2;
        uint32_t v2 = seed + SEGLOG_XXH_P2;
        uint32_t v3 = seed;
        uint32_t v4 = seed - SEGLOG_XXH_P1;
        do {
            v1 = seglog_xxh_lane(v1, seglog_xxh_le32(p));
            v2 = seglog_xxh_lane(v2, seglog_xxh_le32(p + 4));
            v3 = seglog_xxh_lane(v3, seglog_xxh_le32(p + 8));
            v4 = seglog_xxh_lane(v4, seglog_xxh_le32(p + 12));
            p += 16;
        } while (p <= last_stripe);
        h = seglog_xxh_rotl(v1, 1) + seglog_xxh_rotl(v2, 7) + seglog_xxh_rotl(v3, 12) +
            seglog_xxh_rotl(v4, 18);
    } else {
        h = seed + SEGLOG_XXH_P5;
    }
    /* The length enters modulo 2^32, as the algorithm defines it. */
    h += (uint32_t)n;
    while ((size_t)(end - p) >= 4) {
        h += seglog_xxh_le32(p) * SEGLOG_XXH_P3;
        h = seglog_xxh_rotl(h, 17) * SEGLOG_XXH_P4;
        p += 4;
    }
    while (p < end) {
        h += (uint32_t)(*p) * SEGLOG_XXH_P5;
        h = seglog_xxh_rotl(h, 11) * SEGLOG_XXH_P1;
        p++;
    }
    h ^= h >> 15;
    h *= SEGLOG_XXH_P2;
    h ^= h >> 13;
    h *= SEGLOG_XXH_P3;
    h ^= h >> 16;
    return h;
}
#endif
