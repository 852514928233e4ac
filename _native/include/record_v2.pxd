# One v2 record and the v2 batch header as they are written (docs/kafka-format.md §2), for every
# native module that encodes batches (records.pyx from columns, builder.pyx a record at a time):
# ``from record_v2 cimport ...``. No run-time import.
#
#   record:  varint length | int8 attributes (0) | varlong timestampDelta | varint offsetDelta |
#            varint keyLength (-1 null) | key | varint valueLength (-1 null) | value |
#            varint headerCount | { varint keyLength | key | varint valueLength | value }*

from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy

from kbytes cimport (kb_store_u16, kb_store_u32, kb_store_u64, kb_varint_size, kb_varlong_size,
                     kb_write_varint, kb_write_varlong)
from batch_header cimport LOG_OVERHEAD


cdef inline Py_ssize_t record_body_size(int64_t ts_delta, int32_t offset_delta, Py_ssize_t klen,
                                        Py_ssize_t vlen, Py_ssize_t hlen) noexcept nogil:
    """Bytes of a record after its length varint; ``klen``/``vlen`` -1 for null, ``hlen`` the
    header section's size (1 for no headers). The caller checks that they fit an int32."""
    return (1 + kb_varlong_size(ts_delta) + kb_varint_size(offset_delta)
            + kb_varint_size(<int32_t>klen) + (klen if klen > 0 else 0)
            + kb_varint_size(<int32_t>vlen) + (vlen if vlen > 0 else 0) + hlen)


cdef inline uint8_t *write_record(uint8_t *p, int32_t body, int64_t ts_delta, int32_t offset_delta,
                                  const uint8_t *kp, Py_ssize_t klen, const uint8_t *vp,
                                  Py_ssize_t vlen, const uint8_t *hp, Py_ssize_t hlen) noexcept nogil:
    """Write one record of ``body`` bytes (record_body_size) at ``p``; returns the end. ``hp``
    is the encoded header section, or NULL for none (a zero header count)."""
    p = kb_write_varint(p, body)
    p[0] = 0
    p = kb_write_varlong(p + 1, ts_delta)
    p = kb_write_varint(p, offset_delta)
    p = kb_write_varint(p, <int32_t>klen)
    if klen > 0:
        memcpy(p, kp, klen)
        p += klen
    p = kb_write_varint(p, <int32_t>vlen)
    if vlen > 0:
        memcpy(p, vp, vlen)
        p += vlen
    if hp == NULL:
        p[0] = 0
        return p + 1
    memcpy(p, hp, hlen)
    return p + hlen


cdef inline void write_v2_header(uint8_t *b, Py_ssize_t total, int64_t base_offset,
                                 int32_t partition_leader_epoch, uint16_t attrs,
                                 int32_t last_offset_delta, int64_t base_timestamp,
                                 int64_t max_timestamp, int64_t producer_id, int16_t producer_epoch,
                                 int32_t base_sequence, int32_t count) noexcept nogil:
    """Every field of the 61-byte header of a ``total``-byte batch at ``b`` but the CRC (bytes
    17..20), which covers them: the caller stores it last."""
    kb_store_u64(b + 0, <uint64_t>base_offset)
    kb_store_u32(b + 8, <uint32_t>(total - LOG_OVERHEAD))
    kb_store_u32(b + 12, <uint32_t>partition_leader_epoch)
    b[16] = 2
    kb_store_u16(b + 21, attrs)
    kb_store_u32(b + 23, <uint32_t>last_offset_delta)
    kb_store_u64(b + 27, <uint64_t>base_timestamp)
    kb_store_u64(b + 35, <uint64_t>max_timestamp)
    kb_store_u64(b + 43, <uint64_t>producer_id)
    kb_store_u16(b + 51, <uint16_t>producer_epoch)
    kb_store_u32(b + 53, <uint32_t>base_sequence)
    kb_store_u32(b + 57, <uint32_t>count)
