# The record batch header class's C-level layout (records.pyx), for the native modules that
# report batches: a segment's header walks (segment.pyx) return the same BatchHeader that
# ``batch_headers`` does, made by make_header.
#
# Cimported as ``seglog._native.records`` (setup.py lays out the include path for that name).

from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t

from batch_header cimport seglog_batch


cdef class BatchHeader:
    cdef readonly Py_ssize_t position      # where the batch starts in the buffer (or file)
    cdef readonly Py_ssize_t size          # bytes, log overhead included
    cdef readonly int magic
    cdef readonly int64_t base_offset
    cdef readonly int64_t last_offset
    cdef readonly int32_t partition_leader_epoch
    cdef readonly uint32_t crc
    cdef readonly int attributes
    cdef readonly int64_t base_timestamp
    cdef readonly int64_t max_timestamp
    cdef readonly int64_t producer_id
    cdef readonly int16_t producer_epoch
    cdef readonly int32_t base_sequence
    cdef readonly int32_t records_count


# Completes a legacy entry's header (make_header): Kafka's base offset and record count, which
# for a compressed wrapper come from its inner records.
cdef int set_legacy_base(BatchHeader bh, const uint8_t *batch) except -1


cdef inline BatchHeader make_header(const uint8_t *batch, Py_ssize_t position, const seglog_batch *h):
    """The BatchHeader of the batch at ``batch`` (``h`` read and checked by batch_header.h), placed
    at ``position``; a corruption inside a compressed legacy wrapper is reported there."""
    cdef BatchHeader bh = BatchHeader.__new__(BatchHeader)
    bh.position = position
    bh.size = h.size
    bh.magic = h.magic
    bh.base_offset = h.base_offset
    bh.last_offset = h.last_offset
    bh.partition_leader_epoch = h.ple
    bh.crc = h.crc
    bh.attributes = h.attrs
    bh.base_timestamp = h.base_ts
    bh.max_timestamp = h.max_ts
    bh.producer_id = h.pid
    bh.producer_epoch = h.epoch
    bh.base_sequence = h.base_seq
    bh.records_count = h.count
    if h.magic < 2:
        set_legacy_base(bh, batch)
    return bh
