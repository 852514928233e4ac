# Kafka's record-level ListOffsets step (the part of LogSegment.findOffsetByTimestamp after the
# index) over uncompressed v2 batches, shared by records.first_at_or_after and
# Segment.first_at_or_after (included textually, so the search inlines into both loops).

from libc.stdint cimport int32_t, int64_t, uint8_t

from kbytes cimport kb_read_varint, kb_read_varlong, kb_wrap_add
cdef extern from *:
    void __builtin_prefetch(const void *addr) noexcept nogil
cdef extern from *:
    """
    /* A branch the compiler must keep as a branch (not a conditional move), and a value whose
       equality with another it must not assume: the record walk relies on both (see below). */
    #define SEGLOG_KEEP_BRANCH() __asm__ __volatile__("" ::: "memory")
    #define SEGLOG_OPAQUE(x) __asm__("" : "+r"(x))

    /* The common record head, with fewer checks: its length, attributes, timestamp delta and
       offset delta each in one or two bytes (zigzag varints), at least 8 bytes before end.
       Sets *length, *ts_delta, *off_delta; 0 when the head has another form (the general
       readers then look at it), else 1. */
    static inline int seglog_short_head(const uint8_t *p, const uint8_t *end, int32_t *length,
                                        int64_t *ts_delta, int32_t *off_delta, const uint8_t **body) {
        uint32_t u, b0, b1;
        if (end - p < 8) return 0;
        b0 = p[0];
        if (b0 < 0x80) { u = b0; p += 1; }
        else { b1 = p[1]; if (b1 >= 0x80) return 0; u = (b0 & 0x7f) | (b1 << 7); p += 2; }
        *length = (int32_t)((u >> 1) ^ (0u - (u & 1u)));
        *body = p;
        p += 1;  /* attributes */
        b0 = p[0];
        if (b0 < 0x80) { u = b0; p += 1; }
        else { b1 = p[1]; if (b1 >= 0x80) return 0; u = (b0 & 0x7f) | (b1 << 7); p += 2; }
        *ts_delta = (int64_t)(int32_t)((u >> 1) ^ (0u - (u & 1u)));
        b0 = p[0];
        if (b0 < 0x80) { u = b0; }
        else { b1 = p[1]; if (b1 >= 0x80) return 0; u = (b0 & 0x7f) | (b1 << 7); }
        *off_delta = (int32_t)((u >> 1) ^ (0u - (u & 1u)));
        return 1;
    }
    """
    void SEGLOG_KEEP_BRANCH() noexcept nogil
    void SEGLOG_OPAQUE(Py_ssize_t x) noexcept nogil
    int seglog_short_head(const uint8_t *p, const uint8_t *end, int32_t *length, int64_t *ts_delta,
                          int32_t *off_delta, const uint8_t **body) noexcept nogil

from batch_header cimport (seglog_batch, seglog_batch_head, BATCH_OK, V2_HEADER, ATTR_CODEC_MASK, ATTR_CONTROL,
                           ATTR_LOG_APPEND_TIME)


cdef enum:
    PREFETCH_AHEAD = 4096
    CACHE_LINE = 64
    CHAIN_AFTER_CHANGES = 8     # record sizes changing more often in a batch: no size assumed


cdef inline int _record_at_or_after(const uint8_t *p, const uint8_t *body_end, seglog_batch *h,
                                    int64_t target, int64_t lo, int64_t hi, bint bounded,
                                    int64_t *out_off, int64_t *out_ts) noexcept nogil:
    """One record's body (after its length, up to ``body_end``) against the search: 1 it is
    the answer, 0 not, -1 its timestamp or offset delta does not fit."""
    cdef int64_t off, ts, ts_delta
    cdef int32_t off_delta
    p = kb_read_varlong(p + 1, body_end, &ts_delta)  # after the attributes byte
    if p == NULL or kb_read_varint(p, body_end, &off_delta) == NULL:
        return -1
    off = kb_wrap_add(h.base_offset, off_delta)
    if off < lo or (bounded and off >= hi):
        return 0
    ts = h.max_ts if h.attrs & ATTR_LOG_APPEND_TIME else kb_wrap_add(h.base_ts, ts_delta)
    if ts >= target:
        out_off[0] = off
        out_ts[0] = ts
        return 1
    return 0


cdef int _first_uncompressed(const uint8_t *b, Py_ssize_t n, int64_t target, int64_t lo,
                             int64_t hi, bint bounded, int64_t *out_off,
                             int64_t *out_ts) noexcept nogil:
    """The record-level timestamp search over uncompressed v2 batches, reading records one by
    one and stopping at the answer, as Kafka's lazy record iterator does: 1 found, 0 none,
    -1 when the full decoder must answer (a legacy or compressed batch, or anything malformed:
    the decoder then reports it with its position). A record is read up to its offset delta
    and skipped by its length: the batch's CRC was checked when it was appended or recovered.

    Each record's place is the previous one's plus its size, read from the previous record's
    length: a chain of dependent loads, which bounds the walk. The size the records have had so
    far is assumed for the next one, checked by a branch (taken again only where the size
    changes), so the next record's loads need not wait for this one's length: records of one
    size (a run of them) overlap in the pipeline instead of following each other."""
    cdef Py_ssize_t pos = 0, stride, size
    cdef seglog_batch h
    cdef int32_t i, length, off_delta
    cdef int64_t ts_delta, off, ts
    cdef int st
    cdef const uint8_t *p
    cdef const uint8_t *q
    cdef const uint8_t *nxt
    cdef const uint8_t *end
    cdef int changes
    cdef bint chain
    while pos < n:
        # The shared header reader, without the CRC; whatever it refuses is the decoder's to report.
        if seglog_batch_head(b + pos, n - pos, &h, 0) != BATCH_OK:
            return -1
        if h.magic != 2 or h.attrs & ATTR_CODEC_MASK:
            return -1
        if not h.attrs & ATTR_CONTROL:
            p = b + pos + V2_HEADER
            end = b + pos + h.size
            stride = 0
            changes = 0
            chain = False
            i = 0
            # The walk's first PREFETCH_AHEAD bytes, asked for at once: the prefetch inside the
            # loop reaches only that far ahead, so without this a cold batch's first records
            # would wait for their cache lines one after the other.
            q = p
            while q < end and q < p + PREFETCH_AHEAD:
                __builtin_prefetch(q)
                q += CACHE_LINE
            while i < h.count:    # the header's count, as the decoder reads them
                # Through a batch often not in the cache: ask for the bytes a few records
                # ahead (a prefetch never faults).
                __builtin_prefetch(p + PREFETCH_AHEAD)
                if seglog_short_head(p, end, &length, &ts_delta, &off_delta, &q) and 8 <= length <= end - q:
                    # Its fields end inside it (a record body has at least 7 bytes besides
                    # them): the answer's test without further checks.
                    if chain:
                        SEGLOG_KEEP_BRANCH()
                        nxt = q + length
                    else:
                        size = (q - p) + length
                        if size != stride:
                            SEGLOG_KEEP_BRANCH()
                            stride = size
                            changes += 1
                            # Sizes that keep changing would cost a mispredicted branch a
                            # record: the rest of the batch follows the lengths instead.
                            chain = changes > CHAIN_AFTER_CHANGES
                        else:
                            SEGLOG_OPAQUE(stride)    # p advances by stride, not by the loaded size
                        nxt = p + stride
                    off = kb_wrap_add(h.base_offset, off_delta)
                    if off >= lo and not (bounded and off >= hi):
                        ts = h.max_ts if h.attrs & ATTR_LOG_APPEND_TIME else kb_wrap_add(h.base_ts, ts_delta)
                        if ts >= target:
                            out_off[0] = off
                            out_ts[0] = ts
                            return 1
                    p = nxt
                    i += 1
                    continue
                q = kb_read_varint(p, end, &length)
                if q == NULL or length < 1 or length > end - q:
                    return -1
                size = (q - p) + length
                if size != stride:
                    SEGLOG_KEEP_BRANCH()
                    stride = size
                else:
                    SEGLOG_OPAQUE(stride)    # p advances by stride, not by the loaded size
                st = _record_at_or_after(q, p + stride, &h, target, lo, hi, bounded, out_off, out_ts)
                if st != 0:
                    return st
                p += stride
                i += 1
            if p != end:
                return -1
        pos += h.size
    return 0
