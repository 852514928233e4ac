/* The header of one record batch in a log: a RecordBatch v2 or a legacy (magic 0/1) message
 * entry, read and checked in one place for every native module (spec docs/kafka-format.md §2,
 * §4, §6).
 *
 *   seglog_batch_frame(b, remaining, h)   the 17 bytes up to the magic: batchLength, magic, and
 *                                         whether the whole batch lies within `remaining` bytes
 *   seglog_batch_check(b, h, flags)       the rest of the header, after a frame that was OK
 *   seglog_batch_head(b, remaining, h, flags)   both
 *
 * Checks, in this order (the first that fails is the status):
 *   SEGLOG_BATCH_END           no bytes left: a clean end
 *   SEGLOG_BATCH_TORN_HEADER   fewer than 17 bytes left (Kafka stops iterating a file there)
 *   SEGLOG_BATCH_BAD_LENGTH    batchLength below 14 (a v0 message with null key and value)
 *   SEGLOG_BATCH_BAD_MAGIC     magic above 2
 *   SEGLOG_BATCH_BAD_V2_LENGTH a v2 batchLength below 49 (an empty batch)
 *   SEGLOG_BATCH_BAD_LEGACY_LENGTH  a v1 messageSize below 22 (its timestamp and the key and
 *                              value lengths do not fit)
 *   SEGLOG_BATCH_TORN_BODY     the batch ends past the end of the data
 *   v2:     SEGLOG_BATCH_BAD_CRC (only with SEGLOG_BATCH_CRC_V2), _BAD_COUNT (recordsCount < 0),
 *           _BAD_DELTA (lastOffsetDelta < 0), _BAD_CODEC (codec above 4), _COUNT_TOO_BIG (an
 *           uncompressed batch whose recordsCount cannot fit its records area, 7 bytes a record)
 *   legacy: SEGLOG_BATCH_BAD_LEGACY_CRC (only with SEGLOG_BATCH_CRC_LEGACY)
 * Callers choose what to forgive (a torn tail at recovery, the record-level statuses
 * _BAD_CODEC and _COUNT_TOO_BIG in a header-only walk); the messages are made in one place,
 * batch_header.pxd's batch_error().
 *
 * The fields are filled as far as the checks got: after SEGLOG_BATCH_OK all of them. A legacy
 * entry's base and last offset are both its offset field (the base offset of a compressed
 * wrapper is its first inner record's, which needs decompression: the decoder's business).
 */
#ifndef SEGLOG_BATCH_HEADER_H
#define SEGLOG_BATCH_HEADER_H
#include <stdint.h>
#include "kbytes.h"
#include "crc32c.h"
#include "crc32.h"

enum {
    SEGLOG_LOG_OVERHEAD = 12,        /* baseOffset + batchLength */
    SEGLOG_HEADER_UP_TO_MAGIC = 17,
    SEGLOG_V2_HEADER = 61,
    SEGLOG_V2_MIN_LENGTH = 49,       /* batchLength of an empty v2 batch */
    SEGLOG_LEGACY_MIN_LENGTH = 14,   /* v0 messageSize with null key and value */
    SEGLOG_V1_MIN_LENGTH = 22,       /* v1 messageSize with null key and value */
    SEGLOG_CRC_START = 21,           /* the v2 CRC covers attributes .. end of batch */
    SEGLOG_MIN_RECORD_SIZE = 7,      /* length, attributes, tsDelta, offsetDelta, keyLen, valueLen, headers */
    SEGLOG_ATTR_CODEC_MASK = 0x07,
    SEGLOG_ATTR_LOG_APPEND_TIME = 0x08,
    SEGLOG_ATTR_TRANSACTIONAL = 0x10,
    SEGLOG_ATTR_CONTROL = 0x20,
    SEGLOG_ATTR_DELETE_HORIZON = 0x40,
};

enum {
    SEGLOG_BATCH_OK = 0,
    SEGLOG_BATCH_END,
    SEGLOG_BATCH_TORN_HEADER,
    SEGLOG_BATCH_TORN_BODY,
    SEGLOG_BATCH_BAD_LENGTH,
    SEGLOG_BATCH_BAD_MAGIC,
    SEGLOG_BATCH_BAD_V2_LENGTH,
    SEGLOG_BATCH_BAD_LEGACY_LENGTH,
    SEGLOG_BATCH_BAD_CRC,
    SEGLOG_BATCH_BAD_COUNT,
    SEGLOG_BATCH_BAD_DELTA,
    SEGLOG_BATCH_BAD_CODEC,
    SEGLOG_BATCH_COUNT_TOO_BIG,
    SEGLOG_BATCH_BAD_LEGACY_CRC,
};

/* Which checksums seglog_batch_check verifies. */
enum {
    SEGLOG_BATCH_CRC_V2 = 1,         /* CRC-32C of a v2 batch */
    SEGLOG_BATCH_CRC_LEGACY = 2,     /* CRC-32 of a v0/v1 message */
    SEGLOG_BATCH_CRC_ALL = 3,
};

typedef struct {
    int64_t remaining;       /* bytes from the batch's start to the end of the data */
    int64_t size;            /* batchLength + 12: the whole batch */
    int32_t length;          /* batchLength (v2) / messageSize (legacy) */
    int magic;
    int64_t base_offset;
    int64_t last_offset;
    int32_t last_delta;      /* v2 lastOffsetDelta; 0 for a legacy entry */
    int32_t ple;             /* partitionLeaderEpoch; -1 for a legacy entry */
    uint32_t crc;            /* as stored */
    uint32_t computed_crc;   /* set when a checksum was verified */
    uint16_t attrs;
    int64_t base_ts;         /* v2 baseTimestamp; a v1 message's timestamp; -1 for v0 */
    int64_t max_ts;          /* v2 maxTimestamp; a v1 message's timestamp; -1 for v0 */
    int64_t pid;
    int16_t epoch;
    int32_t base_seq;
    int32_t count;           /* v2 recordsCount; 1 for a legacy entry */
} seglog_batch;

#define SEGLOG_BATCH_IS_TORN(status) \
    ((status) == SEGLOG_BATCH_TORN_HEADER || (status) == SEGLOG_BATCH_TORN_BODY)

static inline int seglog_batch_frame(const uint8_t *b, int64_t remaining, seglog_batch *h) {
    h->remaining = remaining;
    if (remaining <= 0)
        return SEGLOG_BATCH_END;
    if (remaining < SEGLOG_HEADER_UP_TO_MAGIC)
        return SEGLOG_BATCH_TORN_HEADER;
    h->length = kb_load_i32(b + 8);
    h->magic = b[16];
    if (h->length < SEGLOG_LEGACY_MIN_LENGTH)
        return SEGLOG_BATCH_BAD_LENGTH;
    if (h->magic > 2)
        return SEGLOG_BATCH_BAD_MAGIC;
    if (h->magic == 2 && h->length < SEGLOG_V2_MIN_LENGTH)
        return SEGLOG_BATCH_BAD_V2_LENGTH;
    h->size = (int64_t)h->length + SEGLOG_LOG_OVERHEAD;
    if (h->magic == 1 && h->length < SEGLOG_V1_MIN_LENGTH)
        return SEGLOG_BATCH_BAD_LEGACY_LENGTH;
    if (h->size > remaining)
        return SEGLOG_BATCH_TORN_BODY;
    return SEGLOG_BATCH_OK;
}

static inline int seglog_batch_check(const uint8_t *b, seglog_batch *h, int flags) {
    h->base_offset = kb_load_i64(b);
    if (h->magic == 2) {
        h->ple = kb_load_i32(b + 12);
        h->crc = kb_load_u32(b + 17);
        h->attrs = kb_load_u16(b + 21);
        h->last_delta = kb_load_i32(b + 23);
        h->last_offset = kb_wrap_add(h->base_offset, h->last_delta);
        h->base_ts = kb_load_i64(b + 27);
        h->max_ts = kb_load_i64(b + 35);
        h->pid = kb_load_i64(b + 43);
        h->epoch = kb_load_i16(b + 51);
        h->base_seq = kb_load_i32(b + 53);
        h->count = kb_load_i32(b + 57);
        if (flags & SEGLOG_BATCH_CRC_V2) {
            h->computed_crc = seglog_crc32c(0, b + SEGLOG_CRC_START, (size_t)(h->size - SEGLOG_CRC_START));
            if (h->computed_crc != h->crc)
                return SEGLOG_BATCH_BAD_CRC;
        }
        if (h->count < 0)
            return SEGLOG_BATCH_BAD_COUNT;
        if (h->last_delta < 0)
            return SEGLOG_BATCH_BAD_DELTA;
        if ((h->attrs & SEGLOG_ATTR_CODEC_MASK) > 4)
            return SEGLOG_BATCH_BAD_CODEC;
        if ((h->attrs & SEGLOG_ATTR_CODEC_MASK) == 0
                && h->count > (h->length - SEGLOG_V2_MIN_LENGTH) / SEGLOG_MIN_RECORD_SIZE)
            return SEGLOG_BATCH_COUNT_TOO_BIG;
        return SEGLOG_BATCH_OK;
    }
    /* A legacy entry: offset, messageSize, crc, magic, attributes[, timestamp], key, value.
     * The frame's minimum sizes put a v1 timestamp always in the entry. */
    h->last_offset = h->base_offset;
    h->last_delta = 0;
    h->ple = -1;
    h->crc = kb_load_u32(b + 12);
    h->attrs = b[17];
    h->base_ts = h->magic == 1 ? kb_load_i64(b + 18) : -1;
    h->max_ts = h->base_ts;
    h->pid = -1;
    h->epoch = -1;
    h->base_seq = -1;
    h->count = 1;
    if (flags & SEGLOG_BATCH_CRC_LEGACY) {
        h->computed_crc = seglog_crc32(0, b + 16, (size_t)(h->size - 16));
        if (h->computed_crc != h->crc)
            return SEGLOG_BATCH_BAD_LEGACY_CRC;
    }
    return SEGLOG_BATCH_OK;
}

static inline int seglog_batch_head(const uint8_t *b, int64_t remaining, seglog_batch *h, int flags) {
    int status = seglog_batch_frame(b, remaining, h);
    return status != SEGLOG_BATCH_OK ? status : seglog_batch_check(b, h, flags);
}

#endif
