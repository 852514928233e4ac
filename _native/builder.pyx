"""Record-at-a-time RecordBatch v2 building (Kafka's ``MemoryRecordsBuilder``). Spec:
``docs/kafka-format.md`` §2.

The builder owns one growing buffer laid out as the finished batch::

    [0, 61)       header, written by build()  (layout in records.pyx / docs/kafka-format.md §2.1)
    [61, size)    records, encoded as they are appended (uncompressed)

    record:  varint length | int8 attributes (0) | varlong timestampDelta | varint offsetDelta |
             varint keyLength (-1 null) | key | varint valueLength (-1 null) | value |
             varint headerCount | { varint keyLength | key | varint valueLength | value }*

Timestamp deltas are relative to the base timestamp: the first record's timestamp, or the
one given at construction (the cleaner passes a delete horizon there, KIP-534). Offset deltas
count up from 0 unless given (the cleaner keeps the original offsets of retained records).

``build()`` seals the builder: it writes the header (CRC-32C over [21, end)), compresses the
records area when asked, and returns a buffer; an uncompressed batch is a zero-copy memoryview
of the builder's own memory, so nothing may be appended afterwards (``BufferError``).

The C-level API (``builder.pxd``: ``init_buffer``, ``append_record`` and the fields) is what
the producer's batch (``accumulator.pyx``, Kafka's ``ProducerBatch``) builds on; where a batch
goes and what became of it are the producer's, not the builder's.

Thread-safety: none; the producer serialises access under its own lock.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_CheckExact
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_CheckExact
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from libc.stdint cimport uint8_t, uint16_t, int16_t, int32_t, int64_t, INT32_MAX
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy

from seglog._native import _errors
from seglog._native.records import codec_id

from kbytes cimport kb_store_u32, kb_varint_size, kb_wrap_sub
from crc cimport seglog_crc32c
from batch_header cimport (V2_HEADER, CRC_START, ATTR_CODEC_MASK, ATTR_LOG_APPEND_TIME, ATTR_TRANSACTIONAL,
                           ATTR_CONTROL, ATTR_DELETE_HORIZON)
from growbuf cimport grow_buffer
from record_v2 cimport record_body_size, write_record, write_v2_header

cdef char *_FORMAT_B = b"B"

include "export.pxi"


cdef object _compress(int codec, object records, object level):
    # Imported on first use for start-up time: the codec module loads zstandard, lz4 and
    # cramjam, which a producer that does not compress never needs.
    from seglog._native.compression import compress
    return compress(codec, records, level=level)


cdef inline Py_ssize_t _bytes_of(object obj, const uint8_t **ptr, Py_buffer *view,
                                 bint *release, str what) except -2:
    """Length of a key/value (-1 for None) and a pointer to its bytes; ``release`` says whether
    ``view`` must be released by the caller."""
    release[0] = False
    if obj is None:
        return -1
    if PyBytes_CheckExact(obj):
        ptr[0] = <const uint8_t *>PyBytes_AS_STRING(obj)
        return PyBytes_GET_SIZE(obj)
    if PyByteArray_CheckExact(obj):
        ptr[0] = <const uint8_t *>PyByteArray_AS_STRING(obj)
        return PyByteArray_GET_SIZE(obj)
    if isinstance(obj, str):
        raise TypeError(f"the record {what} is a str; Kafka records hold bytes: encode it first "
                        f"(e.g. {what}.encode('utf-8'))")
    try:
        PyObject_GetBuffer(obj, view, PyBUF_SIMPLE)
    except TypeError:
        raise TypeError(f"the record {what} must be bytes-like or None, not "
                        f"{type(obj).__name__}") from None
    release[0] = True
    ptr[0] = <const uint8_t *>view.buf
    return view.len


include "headers.pxi"


cdef class BatchBuilder:
    """One RecordBatch v2 under construction (see module docs); fields in ``builder.pxd``.

    ``limit`` is the size (header included) past which an append that checks for room (the
    producer batch's ``try_append``) refuses a record unless the batch is empty;
    ``max_record`` the largest single record batch (header included), over which an append
    raises ``RecordTooLargeError``.
    """

    def __cinit__(self):
        self.buf = NULL
        self.max_timestamp = -1

    def __init__(self, Py_ssize_t limit=16384, *, Py_ssize_t max_record=-1, base_timestamp=None,
                 Py_ssize_t initial_capacity=-1):
        self.init_buffer(limit, max_record, base_timestamp, initial_capacity)

    cdef int init_buffer(self, Py_ssize_t limit, Py_ssize_t max_record, object base_timestamp,
                         Py_ssize_t initial_capacity) except -1:
        """What ``__init__`` does, as a C call for subclasses' constructors."""
        if limit < V2_HEADER:
            limit = V2_HEADER
        self.limit = limit
        self.max_record = max_record
        if initial_capacity < 0:
            initial_capacity = min(limit, 1 << 20)
        self.cap = max(initial_capacity, V2_HEADER + 64)
        self.buf = <uint8_t *>malloc(self.cap)
        if self.buf == NULL:
            raise MemoryError()
        self.length = V2_HEADER
        if base_timestamp is not None:
            self.base_timestamp = base_timestamp
            self.has_base_ts = True
        return 0

    def __dealloc__(self):
        free(self.buf)

    def __len__(self):
        return self.count

    @property
    def size(self):
        """Bytes of the batch so far, header included (uncompressed)."""
        return self.length

    @property
    def last_offset_delta(self):
        return self.last_delta

    cdef int _reserve(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t need = self.length + extra
        if need <= self.cap:
            return 0
        if self.buf == NULL:
            raise BufferError("the batch was discarded")
        if self.exports:
            raise BufferError("the batch is exported; it can no longer grow")
        self.buf = <uint8_t *>grow_buffer(self.buf, &self.cap, need, "a record batch buffer")
        return 0

    cdef int append_record(self, int32_t delta, int64_t timestamp, object key, object value,
                           object headers, bint check_room, int32_t *klen_out,
                           int32_t *vlen_out) except -1:
        """Encode one record; returns 1, or 0 when ``check_room`` and it does not fit."""
        cdef const uint8_t *kp = NULL
        cdef const uint8_t *vp = NULL
        cdef const uint8_t *hp = NULL     # the header section; NULL for none
        cdef Py_buffer kview, vview
        cdef bint krel = False, vrel = False
        cdef Py_ssize_t klen, vlen, hlen, body, rec
        cdef int64_t ts_delta
        cdef bytes hsec = None
        cdef uint8_t *p
        if self.sealed:
            raise BufferError("the batch is sealed (built); start a new one")
        klen = _bytes_of(key, &kp, &kview, &krel, "key")
        try:
            vlen = _bytes_of(value, &vp, &vview, &vrel, "value")
            try:
                if headers is None or (isinstance(headers, (list, tuple)) and len(headers) == 0):
                    hlen = 1
                else:
                    hsec = _header_section(headers, "")
                    hlen = PyBytes_GET_SIZE(hsec)
                if klen > INT32_MAX or vlen > INT32_MAX:
                    raise _errors.make("record_too_large",
                                       "a key or value over 2 GiB cannot be encoded")
                if not self.has_base_ts:
                    self.base_timestamp = timestamp
                    self.has_base_ts = True
                ts_delta = kb_wrap_sub(timestamp, self.base_timestamp)
                body = record_body_size(ts_delta, delta, klen, vlen, hlen)
                if body > INT32_MAX - V2_HEADER:
                    raise _errors.make("record_too_large", f"a record of {body} bytes cannot be encoded")
                rec = kb_varint_size(<int32_t>body) + body
                if self.max_record >= 0 and V2_HEADER + rec > self.max_record:
                    raise _errors.make(
                        "record_too_large",
                        f"the record is {V2_HEADER + rec} bytes when serialized (in a batch of its "
                        f"own), larger than the limit of {self.max_record} bytes "
                        f"(max.request.size / max.message.bytes)", limit=self.max_record)
                if check_room and self.count > 0 and self.length + rec > self.limit:
                    return 0
                if self.length + rec > INT32_MAX:
                    if self.count == 0:
                        raise _errors.make("record_too_large", "the record does not fit a batch")
                    return 0
                self._reserve(rec)
                if hsec is not None:
                    hp = <const uint8_t *>PyBytes_AS_STRING(hsec)
                p = write_record(self.buf + self.length, <int32_t>body, ts_delta, delta, kp, klen, vp,
                                 vlen, hp, hlen)
                self.length = p - self.buf
            finally:
                if vrel:
                    PyBuffer_Release(&vview)
        finally:
            if krel:
                PyBuffer_Release(&kview)
        if timestamp > self.max_timestamp or self.count == 0:
            self.max_timestamp = timestamp
        self.last_delta = delta
        self.count += 1
        klen_out[0] = <int32_t>klen
        vlen_out[0] = <int32_t>vlen
        return 1

    def append(self, int64_t timestamp, key, value, headers=None):
        """Append a record with the next offset delta, whatever the size."""
        cdef int32_t klen, vlen
        if self.explicit_deltas:
            raise ValueError("this batch was built with explicit offset deltas")
        self.append_record(self.count, timestamp, key, value, headers, False, &klen, &vlen)

    def append_with_delta(self, int32_t offset_delta, int64_t timestamp, key, value, headers=None):
        """Append a record at an explicit offset delta (strictly increasing), as the cleaner
        does to keep the offsets of retained records."""
        cdef int32_t klen, vlen
        if offset_delta < 0 or (self.count > 0 and offset_delta <= self.last_delta):
            raise ValueError(f"offset delta {offset_delta} does not follow {self.last_delta}")
        if self.count > 0 and not self.explicit_deltas:
            raise ValueError("this batch was built with consecutive offset deltas")
        self.explicit_deltas = True
        self.append_record(offset_delta, timestamp, key, value, headers, False, &klen, &vlen)

    def build(self, *, int64_t base_offset=0, compression=0, compression_level=None,
              int32_t partition_leader_epoch=-1, int64_t producer_id=-1, int16_t producer_epoch=-1,
              int32_t base_sequence=-1, bint is_transactional=False, bint is_control=False,
              log_append_time=None, max_timestamp=None, last_offset_delta=None,
              bint delete_horizon=False):
        """Seal the batch and return it: a memoryview of the builder's memory when uncompressed,
        a ``bytearray`` when compressed. ``last_offset_delta`` / ``max_timestamp`` override the
        values derived from the records (the cleaner keeps the original batch's);
        ``delete_horizon`` marks ``base_timestamp`` as the KIP-534 delete horizon."""
        cdef int codec
        cdef uint8_t *b
        cdef Py_ssize_t total
        cdef uint16_t attrs
        cdef int64_t max_ts = self.max_timestamp
        cdef int32_t last = self.last_delta
        if isinstance(compression, int):
            codec = compression
        else:
            codec = codec_id(compression)
        if codec < 0 or codec > 4:
            raise ValueError(f"unknown compression codec id {codec}")
        if self.count == 0 and last_offset_delta is None:
            raise ValueError("a record batch needs at least one record (or an explicit "
                             "last_offset_delta for an empty compacted batch)")
        if last_offset_delta is not None:
            last = last_offset_delta
            if self.count and last < self.last_delta:
                raise ValueError(f"last_offset_delta {last} is below the last record's delta "
                                 f"{self.last_delta}")
        if max_timestamp is not None:
            max_ts = max_timestamp
        if not self.has_base_ts:
            self.base_timestamp = -1
        attrs = <uint16_t>codec
        if is_transactional:
            attrs |= ATTR_TRANSACTIONAL
        if is_control:
            attrs |= ATTR_CONTROL
        if delete_horizon:
            attrs |= ATTR_DELETE_HORIZON
        if log_append_time is not None:
            attrs |= ATTR_LOG_APPEND_TIME
            max_ts = log_append_time
        self.sealed = True
        cdef object out
        if codec != 0 and self.count:
            compressed = _compress(codec, <const uint8_t[:self.length - V2_HEADER]>(
                self.buf + V2_HEADER), compression_level)
            if not PyBytes_CheckExact(compressed):
                compressed = bytes(memoryview(compressed).cast("B"))
            total = V2_HEADER + PyBytes_GET_SIZE(compressed)
            if total > INT32_MAX:
                raise ValueError("the compressed batch exceeds the largest batch size")
            out = bytearray(total)
            b = <uint8_t *>PyByteArray_AS_STRING(out)
            memcpy(b, self.buf, V2_HEADER)
            memcpy(b + V2_HEADER, PyBytes_AS_STRING(compressed), PyBytes_GET_SIZE(compressed))
        else:
            if codec != 0:
                attrs = <uint16_t>(attrs & ~ATTR_CODEC_MASK)
            total = self.length
            b = self.buf
            out = None
        write_v2_header(b, total, base_offset, partition_leader_epoch, attrs, last, self.base_timestamp,
                        max_ts, producer_id, producer_epoch, base_sequence, self.count)
        kb_store_u32(b + 17, seglog_crc32c(0, b + CRC_START, total - CRC_START))
        if out is None:
            return memoryview(self)
        return out

    def __getbuffer__(self, Py_buffer *view, int flags):
        if not self.sealed:
            raise BufferError("build() the batch before exporting it")
        _export_readonly(view, self.buf, self.length, 1, _FORMAT_B, flags)
        view.obj = self
        self.exports += 1

    def __releasebuffer__(self, Py_buffer *view):
        _release_export(view)
        self.exports -= 1

    def discard(self):
        """Free the batch's memory once it is written (its futures keep only the outcome)."""
        if self.exports:
            raise BufferError("the batch is still exported; release the view first")
        free(self.buf)
        self.buf = NULL
        self.length = self.cap = 0
        self.sealed = True

    def __repr__(self):
        return (f"BatchBuilder(records={self.count}, size={self.length}, "
                f"sealed={bool(self.sealed)})")
