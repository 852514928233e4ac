# The one reader of a record batch header (batch_header.h: what a header must satisfy and the
# statuses), and the one place where a status becomes a message (batch_error). Callers add
# where the batch lies (a file, a byte position) and decide which statuses to forgive.
# ``from batch_header cimport ...``; no run-time import.

from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t

from crc cimport CRC32C_GIL_MIN


cdef extern from "batch_header.h" nogil:
    enum:
        LOG_OVERHEAD "SEGLOG_LOG_OVERHEAD"
        HEADER_UP_TO_MAGIC "SEGLOG_HEADER_UP_TO_MAGIC"
        V2_HEADER "SEGLOG_V2_HEADER"
        V2_MIN_LENGTH "SEGLOG_V2_MIN_LENGTH"
        LEGACY_MIN_LENGTH "SEGLOG_LEGACY_MIN_LENGTH"
        CRC_START "SEGLOG_CRC_START"
        MIN_RECORD_SIZE "SEGLOG_MIN_RECORD_SIZE"
        ATTR_CODEC_MASK "SEGLOG_ATTR_CODEC_MASK"
        ATTR_LOG_APPEND_TIME "SEGLOG_ATTR_LOG_APPEND_TIME"
        ATTR_TRANSACTIONAL "SEGLOG_ATTR_TRANSACTIONAL"
        ATTR_CONTROL "SEGLOG_ATTR_CONTROL"
        ATTR_DELETE_HORIZON "SEGLOG_ATTR_DELETE_HORIZON"

    enum:
        BATCH_OK "SEGLOG_BATCH_OK"
        BATCH_END "SEGLOG_BATCH_END"
        BATCH_TORN_HEADER "SEGLOG_BATCH_TORN_HEADER"
        BATCH_TORN_BODY "SEGLOG_BATCH_TORN_BODY"
        BATCH_BAD_LENGTH "SEGLOG_BATCH_BAD_LENGTH"
        BATCH_BAD_MAGIC "SEGLOG_BATCH_BAD_MAGIC"
        BATCH_BAD_V2_LENGTH "SEGLOG_BATCH_BAD_V2_LENGTH"
        BATCH_BAD_LEGACY_LENGTH "SEGLOG_BATCH_BAD_LEGACY_LENGTH"
        BATCH_BAD_CRC "SEGLOG_BATCH_BAD_CRC"
        BATCH_BAD_COUNT "SEGLOG_BATCH_BAD_COUNT"
        BATCH_BAD_DELTA "SEGLOG_BATCH_BAD_DELTA"
        BATCH_BAD_CODEC "SEGLOG_BATCH_BAD_CODEC"
        BATCH_COUNT_TOO_BIG "SEGLOG_BATCH_COUNT_TOO_BIG"
        BATCH_BAD_LEGACY_CRC "SEGLOG_BATCH_BAD_LEGACY_CRC"

    enum:
        BATCH_CRC_V2 "SEGLOG_BATCH_CRC_V2"
        BATCH_CRC_LEGACY "SEGLOG_BATCH_CRC_LEGACY"
        BATCH_CRC_ALL "SEGLOG_BATCH_CRC_ALL"

    ctypedef struct seglog_batch:
        int64_t remaining
        int64_t size
        int32_t length
        int magic
        int64_t base_offset
        int64_t last_offset
        int32_t last_delta
        int32_t ple
        uint32_t crc
        uint32_t computed_crc
        uint16_t attrs
        int64_t base_ts
        int64_t max_ts
        int64_t pid
        int16_t epoch
        int32_t base_seq
        int32_t count

    bint batch_is_torn "SEGLOG_BATCH_IS_TORN"(int status)
    int seglog_batch_frame(const uint8_t *b, int64_t remaining, seglog_batch *h)
    int seglog_batch_check(const uint8_t *b, seglog_batch *h, int flags)
    int seglog_batch_head(const uint8_t *b, int64_t remaining, seglog_batch *h, int flags)


cdef inline int batch_check_gil_aware(const uint8_t *b, seglog_batch *h, int flags) noexcept:
    """seglog_batch_check for a caller holding the GIL: a v2 checksum over CRC32C_GIL_MIN bytes
    or more runs without it (other threads go on meanwhile; the caller holds the buffer)."""
    cdef int status
    if (flags & BATCH_CRC_V2) and h.magic == 2 and h.size >= CRC32C_GIL_MIN:
        with nogil:
            status = seglog_batch_check(b, h, flags)
        return status
    return seglog_batch_check(b, h, flags)


cdef inline str batch_error(int status, const seglog_batch *h):
    """What is wrong with a header that got ``status`` (not BATCH_OK or BATCH_END)."""
    if status == BATCH_TORN_HEADER:
        return (f"torn batch: {h.remaining} bytes remain, a batch header needs at least "
                f"{HEADER_UP_TO_MAGIC}")
    if status == BATCH_TORN_BODY:
        return f"torn batch: length field says {h.size} bytes, only {h.remaining} remain"
    if status == BATCH_BAD_LENGTH:
        return f"batch length {h.length} is below the minimum {LEGACY_MIN_LENGTH}"
    if status == BATCH_BAD_MAGIC:
        return f"unknown magic byte {h.magic} (known: 0, 1, 2)"
    if status == BATCH_BAD_V2_LENGTH:
        return f"v2 batch length {h.length} is below the minimum {V2_MIN_LENGTH}"
    if status == BATCH_BAD_LEGACY_LENGTH:
        return f"legacy message of {h.size} bytes is too short for magic {h.magic}"
    if status == BATCH_BAD_CRC:
        return (f"CRC mismatch in the batch at offset {h.base_offset}: stored {h.crc:08x}, "
                f"computed {h.computed_crc:08x}")
    if status == BATCH_BAD_COUNT:
        return f"negative record count {h.count} in the batch at offset {h.base_offset}"
    if status == BATCH_BAD_DELTA:
        return f"negative lastOffsetDelta {h.last_delta} in the batch at offset {h.base_offset}"
    if status == BATCH_BAD_CODEC:
        return (f"invalid compression codec {h.attrs & ATTR_CODEC_MASK} in the batch at offset "
                f"{h.base_offset}")
    if status == BATCH_COUNT_TOO_BIG:
        return (f"record count {h.count} cannot fit in {h.length - V2_MIN_LENGTH} bytes of records "
                f"(batch at offset {h.base_offset})")
    if status == BATCH_BAD_LEGACY_CRC:
        return (f"CRC-32 mismatch in the legacy message at offset {h.base_offset}: stored "
                f"{h.crc:08x}, computed {h.computed_crc:08x}")
    return f"invalid batch header (status {status})"
