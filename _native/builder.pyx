"""Record-at-a-time RecordBatch v2 building (Kafka's ``MemoryRecordsBuilder`` and the
producer's ``ProducerBatch``). Spec: ``docs/kafka-format.md`` §2.

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

As a producer batch the builder also carries where it goes (topic, partition), the outcome of
its append (base offset, log-append time, error) and the futures that wait for it.

Thread-safety: none; the producer serialises access under its own lock.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_CheckExact
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_CheckExact
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_FORMAT, PyBUF_ND
from cpython.unicode cimport PyUnicode_AsUTF8String
from libc.stdint cimport uint8_t, uint16_t, uint32_t, int16_t, int32_t, int64_t, uint64_t, INT32_MAX
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy
from cpython.pythread cimport (
    PyThread_type_lock, PyThread_allocate_lock, PyThread_free_lock, PyThread_acquire_lock,
    PyThread_release_lock, PyThread_get_thread_ident, WAIT_LOCK, NOWAIT_LOCK,
)

from seglog._native import _errors

cdef extern from "kbytes.h" nogil:
    void kb_store_u16(uint8_t *p, uint16_t v)
    void kb_store_u32(uint8_t *p, uint32_t v)
    void kb_store_u64(uint8_t *p, uint64_t v)
    int kb_varint_size(int32_t v)
    int kb_varlong_size(int64_t v)
    uint8_t *kb_write_varint(uint8_t *p, int32_t v)
    uint8_t *kb_write_varlong(uint8_t *p, int64_t v)

cdef extern from "crc32c.h" nogil:
    uint32_t seglog_crc32c(uint32_t crc, const uint8_t *p, size_t n)

cdef extern from "murmur2.h" nogil:
    int32_t seglog_partition_for_key(const uint8_t *p, size_t n, uint32_t num_partitions)

cdef extern from "time.h" nogil:
    struct timespec:
        long tv_sec
        long tv_nsec
    int clock_gettime(int clk, timespec *ts)
    int CLOCK_REALTIME

cdef enum:
    LOG_OVERHEAD = 12
    V2_HEADER = 61
    CRC_START = 21
    ATTR_CODEC_MASK = 0x07
    ATTR_LOG_APPEND_TIME = 0x08
    ATTR_TRANSACTIONAL = 0x10
    ATTR_CONTROL = 0x20
    ATTR_DELETE_HORIZON = 0x40
    MAX_RECORD_OVERHEAD = 21     # length(5) + attrs(1) + offsetDelta(5) + keyLen(5) + valueLen(5)

cdef char *_FORMAT_B = b"B"

include "export.pxi"
cdef object _compression_mod = None


cdef object _codecs():
    global _compression_mod
    if _compression_mod is None:
        from seglog._native import compression
        _compression_mod = compression
    return _compression_mod


@cython.overflowcheck(False)
cdef inline int64_t _wrapping_sub(int64_t a, int64_t b) noexcept nogil:
    # Java's long subtraction (two's complement wraparound), as Kafka computes timestamp deltas.
    return <int64_t>(<uint64_t>a - <uint64_t>b)


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


@cython.final
cdef class RecordMetadata:
    """Where a produced record landed (Kafka's ``RecordMetadata``). ``offset`` is -1 when the
    producer did not wait for the append (``acks=0``)."""
    cdef readonly str topic
    cdef readonly int32_t partition
    cdef readonly int64_t offset
    cdef readonly int64_t timestamp
    cdef readonly int32_t serialized_key_size
    cdef readonly int32_t serialized_value_size

    def __init__(self, str topic, int32_t partition, int64_t offset, int64_t timestamp,
                 int32_t serialized_key_size=-1, int32_t serialized_value_size=-1):
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.serialized_key_size = serialized_key_size
        self.serialized_value_size = serialized_value_size

    def has_offset(self):
        return self.offset >= 0

    def __repr__(self):
        return (f"RecordMetadata(topic={self.topic!r}, partition={self.partition}, "
                f"offset={self.offset}, timestamp={self.timestamp})")

    def __eq__(self, other):
        if not isinstance(other, RecordMetadata):
            return NotImplemented
        o = <RecordMetadata>other
        return (self.topic, self.partition, self.offset, self.timestamp) == \
            (o.topic, o.partition, o.offset, o.timestamp)

    def __hash__(self):
        return hash((self.topic, self.partition, self.offset, self.timestamp))


@cython.final
@cython.freelist(256)
cdef class RecordFuture:
    """The pending result of one ``send`` (Kafka's ``FutureRecordMetadata``).

    ``get()`` returns the :class:`RecordMetadata`, sending the record's batch first if it is
    still lingering (in-process, waiting would only delay it), or raises the append's error.
    """
    cdef BatchBuilder batch
    cdef int32_t index
    cdef int64_t timestamp
    cdef int32_t key_size
    cdef int32_t value_size

    def done(self):
        return self.batch.done

    def get(self, timeout=None):
        cdef BatchBuilder b = self.batch
        if not b.done:
            if b.sender is None:
                raise RuntimeError("the record's batch has no sender")
            b.sender(b)
        if b.error is not None:
            raise b.error
        return self._metadata()

    result = get

    def exception(self, timeout=None):
        cdef BatchBuilder b = self.batch
        if not b.done and b.sender is not None:
            b.sender(b)
        return b.error

    def succeeded(self):
        return self.batch.done and self.batch.error is None

    def failed(self):
        return self.batch.done and self.batch.error is not None

    def add_callback(self, fn):
        """Call ``fn(metadata)`` once the batch is appended (now, if it already is)."""
        self._add(fn, None)
        return self

    def add_errback(self, fn):
        """Call ``fn(exception)`` if the batch fails (now, if it already has)."""
        self._add(None, fn)
        return self

    cdef _add(self, ok, err):
        cdef BatchBuilder b = self.batch
        if b.done:
            self._fire(ok, err)
        else:
            if b.waiters is None:
                b.waiters = []
            b.waiters.append((self, ok, err))

    cdef _fire(self, ok, err):
        if self.batch.error is None:
            if ok is not None:
                ok(self._metadata())
        elif err is not None:
            err(self.batch.error)

    cdef RecordMetadata _metadata(self):
        cdef BatchBuilder b = self.batch
        cdef RecordMetadata md = RecordMetadata.__new__(RecordMetadata)
        md.topic = b.topic
        md.partition = b.partition
        md.offset = b.base_offset + b.offset_deltas_index(self.index) if b.base_offset >= 0 else -1
        md.timestamp = b.log_append_time if b.log_append_time >= 0 else self.timestamp
        md.serialized_key_size = self.key_size
        md.serialized_value_size = self.value_size
        return md

    @property
    def topic(self):
        return self.batch.topic

    @property
    def partition(self):
        return self.batch.partition

    def __repr__(self):
        state = "done" if self.batch.done else "pending"
        return f"RecordFuture({self.batch.topic!r}, partition={self.batch.partition}, {state})"


@cython.final
cdef class BatchBuilder:
    """One RecordBatch v2 under construction (see module docs).

    ``limit`` is the size (header included) past which ``try_append`` refuses a record unless
    the batch is empty; ``max_record`` the largest single record batch (header included), over
    which ``try_append`` raises ``RecordTooLargeError``.
    """
    cdef uint8_t *buf
    cdef Py_ssize_t length
    cdef Py_ssize_t cap
    cdef readonly Py_ssize_t limit
    cdef readonly Py_ssize_t max_record
    cdef readonly int32_t count
    cdef readonly int64_t base_timestamp
    cdef bint has_base_ts
    cdef readonly int64_t max_timestamp
    cdef int32_t last_delta
    cdef bint explicit_deltas
    cdef readonly bint sealed
    cdef Py_ssize_t exports
    # producer batch state
    cdef public str topic
    cdef public int32_t partition
    cdef public object sender
    cdef public int64_t base_offset
    cdef public int64_t log_append_time
    cdef public object error
    cdef public bint done
    cdef public list waiters
    cdef public int64_t created_ms
    cdef public int32_t base_sequence

    def __cinit__(self):
        self.buf = NULL
        self.base_offset = -1
        self.log_append_time = -1
        self.base_sequence = -1
        self.partition = -1
        self.max_timestamp = -1

    def __init__(self, Py_ssize_t limit=16384, *, Py_ssize_t max_record=-1, base_timestamp=None,
                 Py_ssize_t initial_capacity=-1, str topic=None, int32_t partition=-1):
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
        self.topic = topic
        self.partition = partition

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

    cdef inline int64_t offset_deltas_index(self, int32_t index) noexcept:
        # Producer batches use consecutive deltas, so a record's index is its delta.
        return index

    cdef int _reserve(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t need = self.length + extra, cap
        cdef uint8_t *p
        if need <= self.cap:
            return 0
        if self.buf == NULL:
            raise BufferError("the batch was discarded")
        if self.exports:
            raise BufferError("the batch is exported; it can no longer grow")
        cap = self.cap * 2
        if cap < need:
            cap = need
        p = <uint8_t *>realloc(self.buf, cap)
        if p == NULL:
            raise MemoryError(f"cannot grow a record batch buffer to {cap} bytes")
        self.buf = p
        self.cap = cap
        return 0

    cdef int _append(self, int32_t delta, int64_t timestamp, object key, object value,
                     object headers, bint check_room, int32_t *klen_out,
                     int32_t *vlen_out) except -1:
        """Encode one record; returns 1, or 0 when ``check_room`` and it does not fit."""
        cdef const uint8_t *kp = NULL
        cdef const uint8_t *vp = NULL
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
                ts_delta = _wrapping_sub(timestamp, self.base_timestamp)
                body = (1 + kb_varlong_size(ts_delta) + kb_varint_size(delta)
                        + kb_varint_size(<int32_t>klen) + (klen if klen > 0 else 0)
                        + kb_varint_size(<int32_t>vlen) + (vlen if vlen > 0 else 0) + hlen)
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
                p = self.buf + self.length
                p = kb_write_varint(p, <int32_t>body)
                p[0] = 0
                p = kb_write_varlong(p + 1, ts_delta)
                p = kb_write_varint(p, delta)
                p = kb_write_varint(p, <int32_t>klen)
                if klen > 0:
                    memcpy(p, kp, klen)
                    p += klen
                p = kb_write_varint(p, <int32_t>vlen)
                if vlen > 0:
                    memcpy(p, vp, vlen)
                    p += vlen
                if hsec is None:
                    p[0] = 0
                    p += 1
                else:
                    memcpy(p, PyBytes_AS_STRING(hsec), hlen)
                    p += hlen
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

    def try_append(self, int64_t timestamp, key, value, headers=None):
        """Append a record with the next offset delta and return its :class:`RecordFuture`, or
        None when the batch is not empty and the record would take it past ``limit``."""
        return self._try_append(timestamp, key, value, headers)

    cdef object _try_append(self, int64_t timestamp, object key, object value, object headers):
        cdef int32_t klen, vlen
        cdef int32_t delta = self.count
        if self.explicit_deltas:
            raise ValueError("this batch was built with explicit offset deltas")
        if not self._append(delta, timestamp, key, value, headers, True, &klen, &vlen):
            return None
        cdef RecordFuture f = RecordFuture.__new__(RecordFuture)
        f.batch = self
        f.index = delta
        f.timestamp = timestamp
        f.key_size = klen
        f.value_size = vlen
        return f

    def append(self, int64_t timestamp, key, value, headers=None):
        """Append a record with the next offset delta, whatever the size."""
        cdef int32_t klen, vlen
        if self.explicit_deltas:
            raise ValueError("this batch was built with explicit offset deltas")
        self._append(self.count, timestamp, key, value, headers, False, &klen, &vlen)

    def append_with_delta(self, int32_t offset_delta, int64_t timestamp, key, value, headers=None):
        """Append a record at an explicit offset delta (strictly increasing), as the cleaner
        does to keep the offsets of retained records."""
        cdef int32_t klen, vlen
        if offset_delta < 0 or (self.count > 0 and offset_delta <= self.last_delta):
            raise ValueError(f"offset delta {offset_delta} does not follow {self.last_delta}")
        if self.count > 0 and not self.explicit_deltas:
            raise ValueError("this batch was built with consecutive offset deltas")
        self.explicit_deltas = True
        self._append(offset_delta, timestamp, key, value, headers, False, &klen, &vlen)

    def build(self, *, int64_t base_offset=0, compression=0, compression_level=None,
              int32_t partition_leader_epoch=-1, int64_t producer_id=-1, int16_t producer_epoch=-1,
              int32_t base_sequence=-1, bint is_transactional=False, bint is_control=False,
              log_append_time=None, max_timestamp=None, last_offset_delta=None,
              bint delete_horizon=False):
        """Seal the batch and return it: a memoryview of the builder's memory when uncompressed,
        ``bytes`` when compressed. ``last_offset_delta`` / ``max_timestamp`` override the
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
            from seglog._native.records import codec_id
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
            compressed = _codecs().compress(codec, <const uint8_t[:self.length - V2_HEADER]>(
                self.buf + V2_HEADER), level=compression_level)
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
        kb_store_u64(b + 0, <uint64_t>base_offset)
        kb_store_u32(b + 8, <uint32_t>(total - LOG_OVERHEAD))
        kb_store_u32(b + 12, <uint32_t>partition_leader_epoch)
        b[16] = 2
        kb_store_u16(b + 21, attrs)
        kb_store_u32(b + 23, <uint32_t>last)
        kb_store_u64(b + 27, <uint64_t>self.base_timestamp)
        kb_store_u64(b + 35, <uint64_t>max_ts)
        kb_store_u64(b + 43, <uint64_t>producer_id)
        kb_store_u16(b + 51, <uint16_t>producer_epoch)
        kb_store_u32(b + 53, <uint32_t>base_sequence)
        kb_store_u32(b + 57, <uint32_t>self.count)
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

    # -- producer batch outcome ------------------------------------------------------------

    def complete(self, int64_t base_offset, int64_t log_append_time=-1):
        """Record the append's outcome and run the waiting callbacks."""
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.done = True
        self._run_waiters()

    def fail(self, error):
        self.error = error
        self.done = True
        self._run_waiters()

    cdef _run_waiters(self):
        cdef list waiters = self.waiters
        self.waiters = None
        self.sender = None
        if waiters:
            for fut, ok, err in waiters:
                (<RecordFuture>fut)._fire(ok, err)

    def discard(self):
        """Free the batch's memory once it is written (its futures keep only the outcome)."""
        if self.exports:
            raise BufferError("the batch is still exported; release the view first")
        free(self.buf)
        self.buf = NULL
        self.length = self.cap = 0
        self.sealed = True

    def __repr__(self):
        return (f"BatchBuilder(topic={self.topic!r}, partition={self.partition}, "
                f"records={self.count}, size={self.length}, sealed={bool(self.sealed)})")


def group_by_partition(const int32_t[::1] partitions, int32_t num_partitions, int32_t null_partition):
    """A stable counting sort of record indices by partition: returns ``(order, groups)``
    where ``order`` is an ``array('q')`` of record indices and ``groups`` a list of
    ``(partition, start, end)`` ranges of ``order``, in partition order. Entries of -1 (null
    keys) go to ``null_partition``."""
    cdef Py_ssize_t n = partitions.shape[0], i
    cdef int32_t p
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    if not 0 <= null_partition < num_partitions:
        raise ValueError(f"null_partition {null_partition} is outside [0, {num_partitions})")
    counts = array_new("q", num_partitions + 1)
    cdef int64_t[::1] c = counts
    order = array_new("q", n)
    cdef int64_t[::1] o = order
    for i in range(n):
        p = partitions[i]
        if p == -1:
            p = null_partition
        elif p < 0 or p >= num_partitions:
            raise ValueError(f"partition {p} of record {i} is outside [0, {num_partitions})")
        c[p + 1] += 1
    for i in range(num_partitions):
        c[i + 1] += c[i]
    starts = counts.tolist()
    for i in range(n):
        p = partitions[i]
        if p == -1:
            p = null_partition
        o[c[p]] = i
        c[p] += 1
    groups = [(q, starts[q], starts[q + 1]) for q in range(num_partitions) if starts[q + 1] > starts[q]]
    return order, groups


def array_new(str typecode, Py_ssize_t n):
    import array as _array
    return _array.array(typecode, bytes(n * _array.array(typecode).itemsize))


# -------------------------------------------------------------------------------------------------
# The producer's record accumulator: the per-record send path, all in C but for the callbacks
# -------------------------------------------------------------------------------------------------

cdef inline int64_t _wall_ms() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


@cython.final
cdef class Generation:
    """A counter the store bumps whenever topics change; producers compare it with the value
    their cached topic state was built at."""
    cdef public long long value


@cython.final
cdef class TopicSlots:
    """The producer's state for one topic: the open batch of each partition and the sticky
    partition for keyless records."""
    cdef public str name
    cdef public int32_t num_partitions
    cdef public list batches
    cdef public int32_t sticky
    cdef public bint compact
    cdef public object codec
    cdef public object level
    cdef public Py_ssize_t max_batch
    cdef public list parts
    cdef public long long generation

    def __init__(self, str name, int32_t num_partitions, int32_t sticky, bint compact,
                 Py_ssize_t max_batch, codec=0, level=None):
        if num_partitions < 1:
            raise ValueError(f"topic {name!r} has no partitions")
        self.name = name
        self.num_partitions = num_partitions
        self.batches = [None] * num_partitions
        self.sticky = sticky
        self.compact = compact
        self.max_batch = max_batch
        self.codec = codec
        self.level = level


@cython.final
cdef class ReentrantLock:
    """A re-entrant lock whose acquire/release cost a C call from the send path (the producer's
    Python code uses it as a context manager, like ``threading.RLock``). A contended acquire
    waits with the GIL released."""
    cdef PyThread_type_lock lock
    cdef unsigned long owner
    cdef Py_ssize_t depth

    def __cinit__(self):
        self.lock = PyThread_allocate_lock()
        if self.lock == NULL:
            raise MemoryError("cannot allocate a lock")

    def __dealloc__(self):
        if self.lock != NULL:
            PyThread_free_lock(self.lock)

    cdef inline int enter(self) except -1:
        cdef unsigned long me = PyThread_get_thread_ident()
        cdef int got
        if self.depth and self.owner == me:
            self.depth += 1
            return 0
        if not PyThread_acquire_lock(self.lock, NOWAIT_LOCK):
            with nogil:
                got = PyThread_acquire_lock(self.lock, WAIT_LOCK)
        self.owner = me
        self.depth = 1
        return 0

    cdef inline int exit(self) except -1:
        if self.depth == 0 or self.owner != PyThread_get_thread_ident():
            raise RuntimeError("cannot release a lock this thread does not hold")
        self.depth -= 1
        if self.depth == 0:
            self.owner = 0
            PyThread_release_lock(self.lock)
        return 0

    def acquire(self):
        self.enter()
        return True

    def release(self):
        self.exit()

    def __enter__(self):
        self.enter()
        return self

    def __exit__(self, *exc):
        self.exit()
        return False


@cython.final
cdef class Accumulator:
    """``send`` for the producer: partition choice (murmur2 of the key, or the sticky
    partition), the timestamp (the wall clock read in C unless ``clock_ms`` is given) and the
    append into the partition's open batch happen here; creating and writing batches are
    callbacks into the producer (``new_batch(slots, partition)``, ``write(batch)``,
    ``slots_for(topic)``). Every call holds the producer's ``lock`` (re-entrant, so the callbacks
    take it again)."""
    cdef public dict topics
    cdef object new_batch
    cdef object write
    cdef object slots_for
    cdef object clock_ms
    cdef ReentrantLock lock
    cdef Generation generation
    cdef Py_ssize_t batch_size
    cdef bint linger_zero
    cdef bint ignore_keys

    def __init__(self, ReentrantLock lock, Generation generation, new_batch, write, slots_for,
                 clock_ms, Py_ssize_t batch_size, bint linger_zero, bint ignore_keys):
        self.topics = {}
        self.lock = lock
        self.generation = generation
        self.new_batch = new_batch
        self.write = write
        self.slots_for = slots_for
        self.clock_ms = clock_ms
        self.batch_size = batch_size
        self.linger_zero = linger_zero
        self.ignore_keys = ignore_keys

    def send(self, str topic, value, key=None, headers=None, timestamp=None, partition=None):
        cdef TopicSlots slots
        cdef BatchBuilder b
        cdef int32_t p
        cdef int64_t ts
        cdef object fut
        cdef const uint8_t *kp
        cdef Py_ssize_t kn
        cdef const uint8_t[::1] kview
        self.lock.enter()
        try:
            obj = self.topics.get(topic)
            if obj is None or (<TopicSlots>obj).generation != self.generation.value:
                obj = self.slots_for(topic)
            slots = <TopicSlots>obj
            if partition is None:
                if key is None or self.ignore_keys:
                    p = slots.sticky
                elif PyBytes_CheckExact(key):
                    p = seglog_partition_for_key(<const uint8_t *>PyBytes_AS_STRING(key),
                                                 PyBytes_GET_SIZE(key), <uint32_t>slots.num_partitions)
                else:
                    if isinstance(key, str):
                        raise TypeError("the record key is a str; Kafka records hold bytes: encode "
                                        "it first (e.g. key.encode('utf-8'))")
                    try:
                        kview = memoryview(key).cast("B")
                    except TypeError:
                        raise TypeError(f"the record key must be bytes-like or None, not "
                                        f"{type(key).__name__}") from None
                    kn = kview.shape[0]
                    p = seglog_partition_for_key(&kview[0] if kn else <const uint8_t *>b"", kn,
                                                 <uint32_t>slots.num_partitions)
            else:
                if not isinstance(partition, int) or isinstance(partition, bool):
                    raise TypeError(f"partition must be an int or None, not {type(partition).__name__}")
                p = partition
                if p < 0 or p >= slots.num_partitions:
                    raise _errors.make("unknown_topic_or_partition",
                                       f"partition {p} of topic {topic!r} does not exist (the topic "
                                       f"has {slots.num_partitions} partition(s))")
            if key is None and slots.compact:
                raise _errors.make("invalid_record", f"compacted topic {topic!r} cannot accept a "
                                   "record without a key")
            if timestamp is not None:
                if not isinstance(timestamp, int) or isinstance(timestamp, bool):
                    raise TypeError(f"timestamp must be an int (milliseconds) or None, not "
                                    f"{type(timestamp).__name__}")
                ts = timestamp
                if ts < -1:
                    # Kafka's producer refuses these (ProducerRecord); -1 is the wire's "none".
                    raise ValueError(f"timestamp: invalid timestamp {ts}: a timestamp must be >= 0 "
                                     "milliseconds (or -1 for none, or None for now)")
            elif self.clock_ms is None:
                ts = _wall_ms()
            else:
                ts = self.clock_ms()
            obj = slots.batches[p]
            if obj is None:
                obj = self.new_batch(slots, p)
            b = <BatchBuilder>obj
            fut = b._try_append(ts, key, value, headers)
            if fut is None:
                self.write(b)
                b = <BatchBuilder>self.new_batch(slots, p)
                fut = b._try_append(ts, key, value, headers)
            if self.linger_zero:
                self.write(b)
                return (<RecordFuture>fut).get()
            if b.length >= self.batch_size:
                self.write(b)
            return fut
        finally:
            self.lock.exit()
