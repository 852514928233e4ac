/* CRC-32 (IEEE 802.3, zlib's crc32), as java.util.zip.CRC32: the checksum of legacy
 * messages, magic 0 and 1 (Kafka's LegacyRecord, over magic .. end of value).
 *
 *   polynomial        0x04C11DB7, reflected 0xEDB88320
 *   initial / final   0xFFFFFFFF (inverted on entry and on exit)
 *   check value       seglog_crc32(0, "123456789", 9) == 0xCBF43926
 *   chaining          seglog_crc32(seglog_crc32(0, a, na), b, nb) == CRC of a followed by b,
 *                     the same running-value convention as zlib.crc32(data, value)
 *
 * Header-only and without a zlib dependency. Portable slicing-by-8: legacy messages are
 * read for compatibility, not on a hot path. Tables are built once behind an atomic state
 * word (0 = untouched, 1 = being built, 2 = ready), so first calls without the GIL are safe.
 */
#ifndef SEGLOG_CRC32_H
#define SEGLOG_CRC32_H
#include <stdint.h>
#include <stddef.h>
#include <sched.h>

#define SEGLOG_CRC32_POLY 0xEDB88320u

static uint32_t seglog_crc32_table[8][256];
static int seglog_crc32_state = 0;

static void seglog_crc32_setup(void) {
    int expected = 0;
    if (__atomic_compare_exchange_n(&seglog_crc32_state, &expected, 1, 0,
                                    __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = (c >> 1) ^ (SEGLOG_CRC32_POLY & (0u - (c & 1u)));
            seglog_crc32_table[0][i] = c;
        }
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = seglog_crc32_table[0][i];
            for (int t = 1; t < 8; t++) {
                c = seglog_crc32_table[0][c & 0xff] ^ (c >> 8);
                seglog_crc32_table[t][i] = c;
            }
        }
        __atomic_store_n(&seglog_crc32_state, 2, __ATOMIC_RELEASE);
        return;
    }
    while (__atomic_load_n(&seglog_crc32_state, __ATOMIC_ACQUIRE) < 2) sched_yield();
}

static inline uint32_t seglog_crc32(uint32_t crc, const uint8_t *p, size_t n) {
    if (__atomic_load_n(&seglog_crc32_state, __ATOMIC_ACQUIRE) < 2) seglog_crc32_setup();
    crc = ~crc;
    while (n && ((uintptr_t)p & 7)) { crc = seglog_crc32_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8); n--; }
    while (n >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        crc = seglog_crc32_table[7][lo & 0xff] ^ seglog_crc32_table[6][(lo >> 8) & 0xff] ^
              seglog_crc32_table[5][(lo >> 16) & 0xff] ^ seglog_crc32_table[4][lo >> 24] ^
              seglog_crc32_table[3][hi & 0xff] ^ seglog_crc32_table[2][(hi >> 8) & 0xff] ^
              seglog_crc32_table[1][(hi >> 16) & 0xff] ^ seglog_crc32_table[0][hi >> 24];
        p += 8; n -= 8;
    }
    while (n--) crc = seglog_crc32_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}
#endif
