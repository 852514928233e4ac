# Kafka's record-level ListOffsets step (the part of LogSegment.findOffsetByTimestamp after the
# index) over uncompressed v2 batches, shared by records.first_at_or_after and
# Segment.first_at_or_after (included textually, so the search inlines into both loops).

from libc.stdint cimport int32_t, int64_t, uint8_t

from kbytes cimport kb_read_varint, kb_read_varlong, kb_wrap_add
cdef extern from *:
    void __builtin_prefetch(const void *addr) noexcept nogil

from batch_header cimport (seglog_batch, seglog_batch_head, BATCH_OK, V2_HEADER, ATTR_CODEC_MASK, ATTR_CONTROL,
                           ATTR_LOG_APPEND_TIME)


cdef enum:
    PREFETCH_AHEAD = 4096


cdef inline const uint8_t *_skip_record(
        const uint8_t *p, const uint8_t *end, int64_t *ts_delta, int32_t *offset_delta) noexcept nogil:
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
    cdef Py_ssize_t pos = 0
    cdef seglog_batch h
    cdef int64_t off, ts
    cdef int32_t _i, off_delta
    cdef int64_t ts_delta
    cdef const uint8_t *p
    cdef const uint8_t *end
    while pos < n:
        # The shared header reader, without the CRC; whatever it refuses is the decoder's to report.
        if seglog_batch_head(b + pos, n - pos, &h, 0) != BATCH_OK:
            return -1
        if h.magic != 2 or h.attrs & ATTR_CODEC_MASK:
            return -1
        if not h.attrs & ATTR_CONTROL:
            p = b + pos + V2_HEADER
            end = b + pos + h.size
            for _i in range(h.count):    # the header's count, as the decoder reads them
                # The walk is a chain of dependent loads through a batch often not in the
                # cache: ask for the bytes a few records ahead (a prefetch never faults).
                __builtin_prefetch(p + PREFETCH_AHEAD)
                p = _skip_record(p, end, &ts_delta, &off_delta)
                if p == NULL:
                    return -1
                off = kb_wrap_add(h.base_offset, off_delta)
                if off < lo or (bounded and off >= hi):
                    continue
                ts = h.max_ts if h.attrs & ATTR_LOG_APPEND_TIME else kb_wrap_add(h.base_ts, ts_delta)
                if ts >= target:
                    out_off[0] = off
                    out_ts[0] = ts
                    return 1
            if p != end:
                return -1
        pos += h.size
    return 0
