# Kafka's record-level ListOffsets step (the part of LogSegment.findOffsetByTimestamp after the
# index) over uncompressed v2 batches, shared by records.first_at_or_after and
# Segment.first_at_or_after (included textually: no cross-module cimports). The includer provides
# kb_read_varint / kb_read_varlong / kb_load_* / kb_wrap_add (kbytes.h) and the constants
# LOG_OVERHEAD, V2_HEADER, V2_MIN_LENGTH, ATTR_CODEC_MASK, ATTR_CONTROL, ATTR_LOG_APPEND_TIME.

from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t


cdef inline const uint8_t *_skip_record(const uint8_t *p, const uint8_t *end, int64_t *ts_delta,
                                       int32_t *offset_delta) noexcept nogil:
    """One record's timestamp and offset deltas, and where it ends (its length), without reading
    its key, value or headers; NULL where those fields or the length do not fit."""
    cdef int32_t length
    cdef const uint8_t *body_end
    p = kb_read_varint(p, end, &length)
    if p == NULL or length < 1 or length > end - p:
        return NULL
    body_end = p + length
    p = kb_read_varlong(p + 1, body_end, ts_delta)  # after the attributes byte
    if p == NULL or kb_read_varint(p, body_end, offset_delta) == NULL:
        return NULL
    return body_end


cdef int _first_uncompressed(const uint8_t *b, Py_ssize_t n, int64_t target, int64_t lo,
                             int64_t hi, bint bounded, int64_t *out_off,
                             int64_t *out_ts) noexcept nogil:
    """The record-level timestamp search over uncompressed v2 batches, reading records one by
    one and stopping at the answer, as Kafka's lazy record iterator does: 1 found, 0 none,
    -1 when the full decoder must answer (a legacy or compressed batch, or anything malformed:
    the decoder then reports it with its position). A record is read up to its offset delta
    and skipped by its length: the batch's CRC was checked when it was appended or recovered."""
    cdef Py_ssize_t pos = 0, size
    cdef int32_t length
    cdef uint16_t attrs
    cdef int64_t base_off, base_ts, max_ts, off, ts
    cdef int32_t count, i, off_delta
    cdef int64_t ts_delta
    cdef const uint8_t *p
    cdef const uint8_t *end
    while pos < n:
        if n - pos < V2_HEADER:
            return -1
        length = kb_load_i32(b + pos + 8)
        if length < V2_MIN_LENGTH or <Py_ssize_t>length > n - pos - LOG_OVERHEAD:
            return -1
        size = <Py_ssize_t>length + LOG_OVERHEAD
        if b[pos + 16] != 2:
            return -1
        attrs = kb_load_u16(b + pos + 21)
        if attrs & ATTR_CODEC_MASK:
            return -1
        if not attrs & ATTR_CONTROL:
            base_off = kb_load_i64(b + pos)
            base_ts = kb_load_i64(b + pos + 27)
            max_ts = kb_load_i64(b + pos + 35)
            p = b + pos + V2_HEADER
            end = b + pos + size
            count = kb_load_i32(b + pos + 57)
            if count < 0:
                return -1
            for i in range(count):    # the header's count, as the decoder reads them
                p = _skip_record(p, end, &ts_delta, &off_delta)
                if p == NULL:
                    return -1
                off = kb_wrap_add(base_off, off_delta)
                if off < lo or (bounded and off >= hi):
                    continue
                ts = max_ts if attrs & ATTR_LOG_APPEND_TIME else kb_wrap_add(base_ts, ts_delta)
                if ts >= target:
                    out_off[0] = off
                    out_ts[0] = ts
                    return 1
            if p != end:
                return -1
        pos += size
    return 0
