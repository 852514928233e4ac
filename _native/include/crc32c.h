/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as Kafka's Crc32C.
 * Header-only so every native module can inline it without cross-module cimports.
 * seglog_crc32c(crc, p, n) continues a running CRC: seglog_crc32c(0, "123456789", 9) == 0xE3069283.
 * This is the portable slicing-by-8 table implementation; hardware paths are dispatched
 * from here once detected. */
#ifndef SEGLOG_CRC32C_H
#define SEGLOG_CRC32C_H
#include <stdint.h>
#include <stddef.h>

static uint32_t seglog_crc32c_table[8][256];
static int seglog_crc32c_table_ready = 0;

static void seglog_crc32c_init_table(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
        seglog_crc32c_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = seglog_crc32c_table[0][i];
        for (int t = 1; t < 8; t++) {
            c = seglog_crc32c_table[0][c & 0xff] ^ (c >> 8);
            seglog_crc32c_table[t][i] = c;
        }
    }
    seglog_crc32c_table_ready = 1;
}

static uint32_t seglog_crc32c_sw(uint32_t crc, const uint8_t *p, size_t n) {
    if (!seglog_crc32c_table_ready) seglog_crc32c_init_table();
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

static inline uint32_t seglog_crc32c(uint32_t crc, const uint8_t *p, size_t n) {
    return seglog_crc32c_sw(crc, p, n);
}
#endif
