/* murmur2 as Kafka's Java client computes it (org.apache.kafka.common.utils.Utils.murmur2),
 * the hash behind the default keyed partitioner:
 *
 *     partition = (murmur2(serialized key) & 0x7fffffff) % numPartitions
 *
 *   m = 0x5bd1e995, r = 24, seed = 0x9747b28c, h = seed ^ length
 *   body   4-byte little-endian words k:  k *= m; k ^= k >>> r; k *= m; h *= m; h ^= k
 *   tail   length % 4 = 3, 2, 1 (falling through): h ^= b[2] << 16; h ^= b[1] << 8; h ^= b[0]; h *= m
 *   final  h ^= h >>> 13; h *= m; h ^= h >>> 15
 *
 * Java does this in signed 32-bit ints; wrapping unsigned arithmetic gives the same bits, and
 * the result is returned as the signed value Java returns. Java lengths are ints, so only
 * the low 32 bits of the length enter the seed (keys are far smaller).
 */
#ifndef SEGLOG_MURMUR2_H
#define SEGLOG_MURMUR2_H
#include <stdint.h>
#include <stddef.h>

static inline int32_t seglog_murmur2(const uint8_t *p, size_t n) {
    const uint32_t m = 0x5bd1e995u;
    uint32_t h = 0x9747b28cu ^ (uint32_t)n;
    size_t words = n / 4;
    for (size_t i = 0; i < words; i++, p += 4) {
        uint32_t k = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    switch (n & 3u) {
    case 3: h ^= (uint32_t)p[2] << 16; /* fall through */
    case 2: h ^= (uint32_t)p[1] << 8;  /* fall through */
    case 1: h ^= (uint32_t)p[0]; h *= m;
    default: break;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}

/* toPositive(murmur2(key)) % num_partitions, for 1 <= num_partitions <= 2^31 - 1 (a Java
 * int; the caller checks), so the result is in [0, num_partitions) and fits an int32. */
static inline int32_t seglog_partition_for_key(const uint8_t *p, size_t n, uint32_t num_partitions) {
    return (int32_t)(((uint32_t)seglog_murmur2(p, n) & 0x7fffffffu) % num_partitions);
}
#endif
