"""Kafka record batches: RecordBatch v2 encode and decode, legacy (v0/v1) message-set decode.

Mirrors kafka-clients' ``DefaultRecordBatch`` / ``DefaultRecord`` (v2) and ``LegacyRecord`` /
``AbstractLegacyRecordBatch`` (v0/v1). Spec: ``docs/kafka-format.md`` §2-§5.

RecordBatch v2 header (61 bytes, big-endian)::

    off size field                   notes
      0   8  baseOffset              assigned by the leader; outside the CRC
      8   4  batchLength             bytes after this field (total size - 12)
     12   4  partitionLeaderEpoch    outside the CRC
     16   1  magic = 2               byte 16 is the magic in every format: dispatch on it
     17   4  crc                     CRC-32C of bytes [21, 12 + batchLength)
     21   2  attributes              0-2 codec, 3 LogAppendTime, 4 transactional, 5 control,
                                     6 delete horizon
     23   4  lastOffsetDelta
     27   8  baseTimestamp
     35   8  maxTimestamp
     43   8  producerId
     51   2  producerEpoch
     53   4  baseSequence
     57   4  recordsCount
     61   .  records (one compressed stream of them when the codec is not none)

Record (v2)::

    varint length | int8 attributes | varlong timestampDelta | varint offsetDelta |
    varint keyLength (-1 null) | key | varint valueLength (-1 null) | value |
    varint headerCount | { varint keyLength | key (UTF-8) | varint valueLength (-1 null) | value }*

Legacy entry (v0/v1; CRC-32 IEEE over [16, 12 + size))::

    int64 offset | int32 size | uint32 crc | int8 magic | int8 attributes |
    [int64 timestamp, v1 only] | int32 keyLength | key | int32 valueLength | value

Compressed legacy wrappers hold a complete inner message set in their value: v0 inner offsets
are absolute, v1 inner offsets are relative and the wrapper carries the last absolute offset.

Crash and corruption policy: every length is checked against the bytes that remain before it
is used, so arbitrary input raises ``CorruptRecordError`` (naming the byte position and what was
wrong) and never reads out of bounds. Nothing here trusts a count or a length for allocation
beyond what the input could actually hold.

Thread-safety: functions hold the GIL and keep no shared mutable state; objects returned are
independent of the input buffer (keys and values are copied out), so the caller may unmap it.
"""

cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_CheckExact
from cpython.bytearray cimport (PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_CheckExact,
                                PyByteArray_Resize)
from cpython.buffer cimport PyObject_CheckBuffer
from cpython.list cimport PyList_CheckExact
from cpython.tuple cimport PyTuple_CheckExact
from cpython.long cimport PyLong_AsLongLong, PyLong_CheckExact
from cpython.ref cimport PyObject, Py_DECREF, Py_INCREF
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport (uint8_t, uint16_t, uint32_t, int8_t, int16_t, int32_t, int64_t, uintptr_t,
                          INT32_MAX, INT64_MIN, INT64_MAX)
from libc.stdlib cimport malloc, calloc, free
from libc.string cimport memcpy, memset

import time as _time

from seglog._native import _errors

cdef extern from "Python.h":
    PyObject** PySequence_Fast_ITEMS(object)
    Py_ssize_t PySequence_Fast_GET_SIZE(object)
    object PySequence_Fast(object, const char*)

from kbytes cimport (kb_load_i32, kb_load_i64, kb_store_u16, kb_store_u32, kb_wrap_add, kb_wrap_sub, kb_utf8_valid,
                     kb_varint_size, kb_read_varint, kb_read_varlong, kb_read_plain_record)
from crc cimport seglog_crc32c, crc32c_gil_aware
from arrow_c cimport (ArrowArray, SEGLOG_AC_SIZES, seglog_ac_block, seglog_ac_array, seglog_ac_child,
                      seglog_ac_release)
from growbuf cimport grow_buffer
from record_v2 cimport record_body_size, write_record, write_v2_header
from batch_header cimport (seglog_batch, seglog_batch_frame, seglog_batch_head, batch_check_gil_aware,
                           batch_error, batch_is_torn, BATCH_OK, BATCH_CRC_ALL, BATCH_CRC_LEGACY,
                           LOG_OVERHEAD, HEADER_UP_TO_MAGIC, V2_HEADER, LEGACY_MIN_LENGTH, CRC_START,
                           MIN_RECORD_SIZE, ATTR_CODEC_MASK, ATTR_LOG_APPEND_TIME, ATTR_TRANSACTIONAL,
                           ATTR_CONTROL)

cdef extern from "encode_seq.h":
    int SEGLOG_SEQ_OK
    int seglog_seq_encode(PyObject **vals, PyObject **keys, const int64_t *ts, int64_t ts_scalar,
                          Py_ssize_t n, Py_ssize_t head, int64_t limit, PyObject *into, PyObject **out,
                          int64_t *max_ts) except -1
    uint8_t *seglog_seq_data(object buf)
    long seglog_seq_long(object o) except? -1

# Timestamp types as Kafka's TimestampType ids.
NO_TIMESTAMP_TYPE = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1

CODEC_NAMES = {"none": 0, "uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
                 4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}

# Decompressed size of one batch beyond which decoding refuses (decompression bombs).
DEFAULT_MAX_DECOMPRESSED = 512 * 1024 * 1024

cdef object _compression_mod = None


cdef object _codecs():
    global _compression_mod
    if _compression_mod is None:
        from seglog._native import compression
        _compression_mod = compression
    return _compression_mod


cdef const uint8_t[::1] _bytes_arg(object obj, str name):
    """``obj`` as a byte view; a TypeError naming the argument when it is not bytes-like."""
    if isinstance(obj, str) or not PyObject_CheckBuffer(obj):
        raise TypeError(f"{name} must be a bytes-like object (bytes, bytearray, memoryview, "
                        f"mmap...), not {type(obj).__name__}")
    return obj


cdef int _raise_corrupt(str what, Py_ssize_t position) except -1:
    raise _errors.corrupt(what, position)


cpdef int codec_id(object compression) except -1:
    """Codec id (0-4) from a name ("gzip", ...) or an id."""
    if isinstance(compression, int):
        if 0 <= compression <= 4:
            return compression
        raise ValueError(f"unknown compression codec id {compression}: valid ids are 0 (none), "
                         "1 (gzip), 2 (snappy), 3 (lz4), 4 (zstd)")
    if compression is None:
        return 0
    if not isinstance(compression, str):
        raise TypeError(f"compression must be a codec name (none, gzip, snappy, lz4, zstd), an id "
                        f"0-4 or None, not {type(compression).__name__}")
    if isinstance(compression, str):
        try:
            return CODEC_NAMES[compression.lower()]
        except KeyError:
            pass
    raise ValueError(f"unknown compression {compression!r}: valid are "
                     f"{', '.join(sorted(CODEC_NAMES))}")


# ---------------------------------------------------------------------------------------------
# Input columns for encoding
#
# A binary column is a list/tuple of bytes-like or None, a NumPy array (object, fixed-width "S"
# or "V", or 2-D uint8 rows), or a pyarrow binary/string array (large variants too). Columns are
# resolved once into a BinCol; the encode loop then reads items with no Python calls.
# ---------------------------------------------------------------------------------------------

cdef enum ColKind:
    K_NULL = 0          # no column: every item is null
    K_SEQ = 1           # PySequence_Fast items, each bytes / bytearray / None
    K_ARROW32 = 2
    K_ARROW64 = 3
    K_FIXED = 4         # fixed width rows
    K_FIXED_STRIP = 5   # NumPy "S": trailing NUL bytes are not part of the item

cdef struct BinCol:
    int kind
    Py_ssize_t n
    PyObject **items
    const uint8_t *data
    const int32_t *off32
    const int64_t *off64
    const uint8_t *validity
    Py_ssize_t base
    Py_ssize_t width

cdef uint8_t _EMPTY[1]


cdef inline const uint8_t *_buf_ptr(object buf, list keep) except? NULL:
    if buf is None:
        return _EMPTY
    cdef const uint8_t[::1] mv = memoryview(buf).cast("B")
    keep.append(mv)
    if mv.shape[0] == 0:
        return _EMPTY
    return &mv[0]


cdef int _bincol_init(BinCol *c, object obj, str name, list keep, bint private=True) except -1:
    """Resolve ``obj`` into ``c``. ``keep`` holds references that must outlive the encode.

    Returns 1 if resolving may have run Python code (a conversion, an iterator, NumPy or
    pyarrow calls), else 0. An exact list of exact bytes / bytearray / None runs none: with
    ``private=False`` its items are then read in place (no copy); the caller must make sure no
    Python code runs before the encode loop is done with them, else re-resolve with
    ``private=True``, which reads from a private tuple that no later code can change."""
    memset(c, 0, sizeof(BinCol))
    if obj is None:
        c.kind = K_NULL
        c.n = -1
        return 0
    cdef Py_ssize_t i, n
    cdef PyObject **items
    cdef object item
    cdef list converted = None
    if PyList_CheckExact(obj) or PyTuple_CheckExact(obj):
        if private and PyList_CheckExact(obj):
            obj = tuple(obj)  # copied before it is checked: the copy may run the collector
        n = PySequence_Fast_GET_SIZE(obj)
        items = PySequence_Fast_ITEMS(obj)
        for i in range(n):
            item = <object>items[i]
            if not (item is None or PyBytes_CheckExact(item) or PyByteArray_CheckExact(item)):
                break
        else:
            keep.append(obj)
            c.kind = K_SEQ
            c.n = n
            c.items = PySequence_Fast_ITEMS(obj)
            return 0
    mod = type(obj).__module__ or ""
    if mod.startswith("pyarrow"):
        _bincol_arrow(c, obj, name, keep)
        return 1
    if mod.startswith("numpy"):
        _bincol_numpy(c, obj, name, keep)
        return 1
    if not isinstance(obj, (list, tuple)):
        if isinstance(obj, (bytes, bytearray, memoryview, str)):
            raise TypeError(f"{name} must be a column (a list of bytes), not a single {type(obj).__name__}")
        obj = list(obj)
    n = len(obj)
    fast = PySequence_Fast(obj, "column")
    items = PySequence_Fast_ITEMS(fast)
    for i in range(n):
        item = <object>items[i]
        if item is None or PyBytes_CheckExact(item) or PyByteArray_CheckExact(item):
            continue
        if isinstance(item, str):
            raise TypeError(f"{name}[{i}] is a str; Kafka records hold bytes: encode it first "
                            f"(e.g. value.encode('utf-8'))")
        try:
            memoryview(item)
        except TypeError:
            raise TypeError(f"{name}[{i}] is a {type(item).__name__}, not bytes-like or None") from None
        if converted is None:
            converted = list(obj)
            if len(converted) != n:
                raise ValueError(f"{name} changed length while being resolved ({n} -> {len(converted)})")
        converted[i] = memoryview(item).tobytes()
        # ``items`` may be stale after Python code ran: read on from the private copy.
        fast = converted
        items = PySequence_Fast_ITEMS(fast)
    # A private tuple: no later Python code can resize or reorder what ``items`` points into.
    fast = tuple(converted if converted is not None else fast)
    items = PySequence_Fast_ITEMS(fast)
    keep.append(fast)
    c.kind = K_SEQ
    c.n = n
    c.items = items
    return 1


cdef int _bincol_arrow(BinCol *c, object arr, str name, list keep) except -1:
    import pyarrow as pa
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if pa.types.is_binary(t) or pa.types.is_string(t):
        c.kind = K_ARROW32
    elif pa.types.is_large_binary(t) or pa.types.is_large_string(t):
        c.kind = K_ARROW64
    elif pa.types.is_fixed_size_binary(t):
        c.kind = K_FIXED
        c.width = t.byte_width
    else:
        raise TypeError(f"{name}: pyarrow type {t} is not a binary or string type")
    keep.append(arr)
    bufs = arr.buffers()
    c.n = len(arr)
    c.base = arr.offset
    c.validity = _buf_ptr(bufs[0], keep) if (bufs[0] is not None and arr.null_count) else NULL
    if c.kind == K_FIXED:
        c.data = _buf_ptr(bufs[1], keep)
        return 0
    if c.kind == K_ARROW32:
        c.off32 = <const int32_t *>_buf_ptr(bufs[1], keep)
    else:
        c.off64 = <const int64_t *>_buf_ptr(bufs[1], keep)
    c.data = _buf_ptr(bufs[2], keep)
    return 0


cdef int _bincol_numpy(BinCol *c, object arr, str name, list keep) except -1:
    kind = arr.dtype.kind
    if kind == "O":
        return _bincol_init(c, arr.tolist(), name, keep)
    if kind in ("S", "V") and arr.ndim == 1:
        c.kind = K_FIXED_STRIP if kind == "S" else K_FIXED
        c.width = arr.dtype.itemsize
    elif kind == "u" and arr.dtype.itemsize == 1 and arr.ndim == 2:
        c.kind = K_FIXED
        c.width = arr.shape[1]
    else:
        raise TypeError(f"{name}: a NumPy array must have dtype object, 'S<n>', 'V<n>', or be 2-D "
                        f"uint8 (one row per record); got {arr.dtype} with {arr.ndim} dimension(s)")
    if not arr.flags.c_contiguous:
        arr = arr.copy(order="C")
    keep.append(arr)
    c.n = arr.shape[0]
    c.data = _buf_ptr(arr.reshape(-1).view("u1") if c.n else None, keep)
    return 0


cdef inline Py_ssize_t _bincol_get(const BinCol *c, Py_ssize_t i, const uint8_t **ptr) noexcept:
    """Length of item ``i`` (-1 for null) and its bytes in ``ptr``."""
    cdef object item
    cdef Py_ssize_t j, start, w
    cdef const uint8_t *p
    if c.kind == K_SEQ:
        item = <object>c.items[i]
        if item is None:
            return -1
        if PyBytes_CheckExact(item):
            ptr[0] = <const uint8_t *>PyBytes_AS_STRING(item)
            return PyBytes_GET_SIZE(item)
        ptr[0] = <const uint8_t *>PyByteArray_AS_STRING(item)
        return PyByteArray_GET_SIZE(item)
    if c.kind == K_NULL:
        return -1
    j = c.base + i
    if c.validity != NULL and not ((c.validity[j >> 3] >> (j & 7)) & 1):
        return -1
    if c.kind == K_ARROW32:
        start = c.off32[j]
        ptr[0] = c.data + start
        return c.off32[j + 1] - start
    if c.kind == K_ARROW64:
        start = c.off64[j]
        ptr[0] = c.data + start
        return c.off64[j + 1] - start
    w = c.width
    p = c.data + j * w
    ptr[0] = p
    if c.kind == K_FIXED_STRIP:
        while w > 0 and p[w - 1] == 0:
            w -= 1
    return w


cdef enum TsKind:
    T_SCALAR = 0
    T_SEQ = 1
    T_BUF = 2

cdef struct TsCol:
    int kind
    int64_t scalar
    PyObject **items
    const int64_t *data


cdef inline int64_t _as_int64(object x) except? -1:
    # CPython's PyLong_AsLongLong goes through a byte-array conversion for any int of two or
    # more digits (every millisecond timestamp); PyLong_AsLong folds the digits directly, and
    # seglog_seq_long reads a two-digit int of CPython < 3.12 with no call at all.
    if sizeof(long) == 8:
        return seglog_seq_long(x)
    return PyLong_AsLongLong(x)


cdef int _tscol_init(TsCol *c, object obj, Py_ssize_t n, list keep,
                     bint allow_negative=False) except -1:
    """Resolve the timestamps column, then (unless ``allow_negative``) refuse negative
    timestamps other than -1 ("none"), as Kafka's producer and MemoryRecordsBuilder do."""
    _tscol_resolve(c, obj, n, keep)
    if allow_negative:
        return 0
    cdef Py_ssize_t i
    cdef int64_t v
    if c.kind == T_SCALAR:
        if c.scalar < -1:
            raise ValueError(f"timestamps: invalid timestamp {c.scalar}: a timestamp must be >= 0 "
                             "milliseconds (or -1 for none)")
        return 0
    for i in range(n):
        v = c.data[i]
        if v < -1:
            raise ValueError(f"timestamps: invalid timestamp {v} of record {i}: a timestamp must "
                             "be >= 0 milliseconds (or -1 for none)")
    return 0


cdef int _tscol_resolve(TsCol *c, object obj, Py_ssize_t n, list keep) except -1:
    memset(c, 0, sizeof(TsCol))
    if obj is None:
        c.kind = T_SCALAR
        c.scalar = <int64_t>(_time.time_ns() // 1000000)
        return 0
    if isinstance(obj, (str, bytes, bytearray, float, bool)) or not (
            isinstance(obj, int) or hasattr(obj, "__len__") or hasattr(obj, "__iter__")):
        raise TypeError(f"timestamps must be None, an int (milliseconds) or a column of int64 "
                        f"milliseconds, not {type(obj).__name__}")
    if isinstance(obj, int):
        c.kind = T_SCALAR
        c.scalar = obj
        return 0
    mod = type(obj).__module__ or ""
    if mod.startswith("pyarrow"):
        import pyarrow as pa
        if isinstance(obj, pa.ChunkedArray):
            obj = obj.combine_chunks()
        if obj.null_count:
            raise ValueError("timestamps: null timestamps are not allowed")
        if not (pa.types.is_int64(obj.type) or pa.types.is_timestamp(obj.type)):
            raise TypeError(f"timestamps: pyarrow type {obj.type} is not int64 milliseconds")
        if pa.types.is_timestamp(obj.type) and obj.type.unit != "ms":
            obj = obj.cast(pa.timestamp("ms", obj.type.tz))
        if len(obj) != n:
            raise ValueError(f"timestamps has {len(obj)} items, values has {n}")
        keep.append(obj)
        c.kind = T_BUF
        arr_off = obj.offset
        c.data = (<const int64_t *>_buf_ptr(obj.buffers()[1], keep)) + <Py_ssize_t>arr_off
        return 0
    if mod.startswith("numpy"):
        if obj.dtype.kind == "M":
            obj = obj.astype("datetime64[ms]").view("i8")
        obj = obj.astype("<i8", copy=False)
        if not obj.flags.c_contiguous:
            obj = obj.copy(order="C")
    if not isinstance(obj, (list, tuple)):
        try:
            mv = memoryview(obj)
        except TypeError:
            obj = list(obj)
        else:
            if mv.format not in ("q", "l", "<q", "=q", "<i8") or mv.itemsize != 8:
                raise TypeError(f"timestamps buffer has format {mv.format!r}; int64 is required")
            if len(mv) != n:
                raise ValueError(f"timestamps has {len(mv)} items, values has {n}")
            keep.append(obj)
            c.kind = T_BUF
            c.data = <const int64_t *>_buf_ptr(mv, keep)
            return 0
    if len(obj) != n:
        raise ValueError(f"timestamps has {len(obj)} items, values has {n}")
    cdef Py_ssize_t i
    cdef int64_t *d
    cdef object item
    owned = bytearray(8 * n)
    d = <int64_t *>PyByteArray_AS_STRING(owned)
    if PyList_CheckExact(obj) or PyTuple_CheckExact(obj):
        # Exact ints convert without running Python code, so the items are read in place.
        for i in range(n):
            item = <object>PySequence_Fast_ITEMS(obj)[i]
            if not PyLong_CheckExact(item):
                break
            d[i] = _as_int64(item)
        else:
            keep.append(owned)
            c.kind = T_BUF
            c.data = d
            return 0
    # Resolved once into an owned int64 array: converting an item may run Python code
    # (__index__), which must not happen while the encoder holds pointers into the columns.
    fast = tuple(obj)
    if len(fast) != n:
        raise ValueError(f"timestamps has {len(fast)} items, values has {n}")
    for i in range(n):
        d[i] = _as_int64(fast[i])
    keep.append(owned)
    c.kind = T_BUF
    c.data = d
    return 0


cdef inline int64_t _ts_get(const TsCol *c, Py_ssize_t i) except? -1:
    if c.kind == T_SCALAR:
        return c.scalar
    if c.kind == T_BUF:
        return c.data[i]
    return _as_int64(<object>c.items[i])


include "headers.pxi"


cdef extern from "Python.h":
    ctypedef struct PyByteArrayObject:
        Py_ssize_t ob_exports


cdef int _check_into(bytearray into) except -1:
    if (<PyByteArrayObject *>into).ob_exports > 0:
        raise BufferError("into is exported (a memoryview of it is alive): it cannot take a batch "
                          "while something may still read its bytes")
    return 0


cdef int _not_an_item(bytearray into, BinCol *c, str name) except -1:
    """``into`` is read in place if it is one of a column's items: resizing it would move them."""
    cdef Py_ssize_t i
    if c.kind != K_SEQ:
        return 0
    for i in range(c.n):
        if c.items[i] == <PyObject *>into:
            raise ValueError(f"into is {name}[{i}]: a batch cannot be written over its own records")
    return 0


cdef object _batch_buffer(bytearray into, Py_ssize_t n):
    """A buffer of ``n`` bytes for a batch: a new ``bytes``, or ``into`` resized."""
    if into is None:
        return PyBytes_FromStringAndSize(NULL, n)
    PyByteArray_Resize(into, n)
    return into


def encode_batch(values, *, keys=None, timestamps=None, headers=None, int64_t base_offset=0,
                 compression=0, compression_level=None, int32_t partition_leader_epoch=-1,
                 int64_t producer_id=-1, int16_t producer_epoch=-1, int32_t base_sequence=-1,
                 bint is_transactional=False, log_append_time=None,
                 bint allow_negative_timestamps=False, bytearray into=None):
    """Encode one RecordBatch v2 from columns; returns ``bytes``, or ``into`` when given.

    ``values`` and ``keys`` are columns (see module docs); ``timestamps`` is None (now), one
    int for every record, or a column of int64 milliseconds; ``headers`` is None or one entry
    per record: None or a list of ``(str key, bytes-or-None value)``. Records get offset deltas
    0..n-1 and ``baseTimestamp`` = the first record's timestamp, as Kafka's producer writes them.
    ``log_append_time`` sets the LogAppendTime attribute and ``maxTimestamp`` (as a broker does).
    A timestamp below -1 (-1 is "none") raises ValueError naming the record and the value, as
    Kafka's ``MemoryRecordsBuilder`` refuses it; ``allow_negative_timestamps=True`` encodes it
    anyway (the format holds any int64: for test corpora and batches other clients wrote).

    ``into``: a ``bytearray`` to write the batch into instead of a new ``bytes``; it is resized
    to the batch and returned. A producer that keeps its batch buffers (as Kafka's producer
    keeps its buffer pool) saves the allocation of a large batch each time, which the C
    allocator maps and unmaps afresh: a page fault per 4 KiB. It must not be exported (no
    ``memoryview`` of it alive: ``BufferError``) nor be one of the records' values or keys
    (``ValueError``). On an error its contents are undefined.
    """
    if into is not None:
        _check_into(into)
    cdef list keep = []
    cdef BinCol vcol, kcol
    cdef TsCol tcol
    cdef Py_ssize_t n, i, n_generic
    if values is None:
        raise TypeError("values must be a column (a list of bytes or None), not None")
    if isinstance(values, (bytes, bytearray, memoryview, str)):
        raise TypeError(f"values must be a column (a list of bytes), not a single {type(values).__name__}")
    if not (PyList_CheckExact(values) or PyTuple_CheckExact(values) or hasattr(values, "__len__")):
        values = list(values)
    n = len(values)
    if n == 0:
        raise ValueError("a record batch needs at least one record; values is empty")
    if n > INT32_MAX:
        raise ValueError(f"{n} records do not fit one batch (at most {INT32_MAX})")
    cdef int codec = codec_id(compression)
    # Everything that may run Python code (timestamps' __index__, header values' buffers) is
    # resolved before any pointer into the value and key columns is taken.
    _tscol_init(&tcol, timestamps, n, keep, allow_negative_timestamps)
    cdef list hsections = None
    if headers is not None:
        if len(headers) != n:
            raise ValueError(f"headers has {len(headers)} items, values has {n}")
        hsections = [None] * n
        for i, h in enumerate(headers):
            if h:
                hsections[i] = _header_section(h, f"headers[{i}]: ")
    cdef int64_t base_ts, ts, max_ts, delta
    cdef Py_ssize_t klen, vlen, hlen, body
    cdef Py_ssize_t records_size = 0
    cdef object out = None
    # The common case (exact lists or tuples of bytes/None, no headers) is written by
    # encode_seq.h straight from the items in one pass, in place: nothing in it can run Python
    # code. Any other input, or an item it does not take, goes the general way below.
    cdef PyObject *seq_out = NULL
    if (hsections is None and (PyList_CheckExact(values) or PyTuple_CheckExact(values))
            and PySequence_Fast_GET_SIZE(values) == n
            and (keys is None or ((PyList_CheckExact(keys) or PyTuple_CheckExact(keys))
                                  and PySequence_Fast_GET_SIZE(keys) == n))):
        if seglog_seq_encode(PySequence_Fast_ITEMS(values),
                             PySequence_Fast_ITEMS(keys) if keys is not None else NULL,
                             tcol.data if tcol.kind == T_BUF else NULL, tcol.scalar, n, V2_HEADER,
                             INT32_MAX - V2_HEADER, <PyObject *>into if into is not None else NULL,
                             &seq_out, &max_ts) == SEGLOG_SEQ_OK:
            out = <object>seq_out
            Py_DECREF(out)                # the reference seglog_seq_encode made
            records_size = len(out) - V2_HEADER
    cdef int32_t *sizes = NULL
    if out is None:
        sizes = <int32_t *>malloc(n * sizeof(int32_t))
        if sizes == NULL:
            raise MemoryError()
        # Exact lists of bytes are read in place when no Python code (nor an allocation that
        # could start the garbage collector and its finalizers) runs between resolving them and
        # the end of the encode loop. If resolving the keys ran any, both columns are resolved
        # again into private tuples, which no later code can change.
        try:
            _bincol_init(&vcol, values, "values", keep, False)
            if _bincol_init(&kcol, keys, "keys", keep, False):
                _bincol_init(&vcol, values, "values", keep, True)
                _bincol_init(&kcol, keys, "keys", keep, True)
            if vcol.n != n:
                raise ValueError(f"values changed length while being encoded ({n} -> {vcol.n})")
            if kcol.kind != K_NULL and kcol.n != n:
                raise ValueError(f"keys has {kcol.n} items, values has {n}")
            if into is not None:
                _not_an_item(into, &vcol, "values")
                _not_an_item(into, &kcol, "keys")
        except BaseException:
            free(sizes)
            raise
    cdef const uint8_t *kp
    cdef const uint8_t *vp
    cdef const uint8_t *hp
    cdef uint8_t *records_buf = NULL          # the general path's records, when compressing
    cdef const uint8_t *records = NULL        # the records to compress
    cdef uint8_t *p
    cdef object hs
    try:
        base_ts = _ts_get(&tcol, 0)
        if out is not None:
            n_generic = 0
        else:
            max_ts = base_ts
            n_generic = n
        for i in range(n_generic):
            ts = _ts_get(&tcol, i)
            if ts > max_ts:
                max_ts = ts
            delta = kb_wrap_sub(ts, base_ts)
            klen = _bincol_get(&kcol, i, &kp)
            vlen = _bincol_get(&vcol, i, &vp)
            if hsections is None or hsections[i] is None:
                hlen = 1
            else:
                hlen = PyBytes_GET_SIZE(hsections[i])
            if klen > INT32_MAX or vlen > INT32_MAX:
                raise ValueError(f"record {i}: a key or value over {INT32_MAX} bytes cannot be encoded")
            body = record_body_size(delta, <int32_t>i, klen, vlen, hlen)
            if body > INT32_MAX:
                raise ValueError(f"record {i} is {body} bytes; a record holds at most {INT32_MAX}")
            sizes[i] = <int32_t>body
            records_size += kb_varint_size(<int32_t>body) + body
            if records_size > INT32_MAX - V2_HEADER:
                raise ValueError(f"the batch would exceed {INT32_MAX} bytes; split it")

        if out is not None:
            records = <const uint8_t *>seglog_seq_data(out) + V2_HEADER
        elif codec == 0:
            out = _batch_buffer(into, V2_HEADER + records_size)
            p = seglog_seq_data(out) + V2_HEADER
        else:
            records_buf = <uint8_t *>malloc(records_size if records_size else 1)
            if records_buf == NULL:
                raise MemoryError()
            p = records_buf
            records = records_buf

        for i in range(n_generic):
            ts = _ts_get(&tcol, i)
            delta = kb_wrap_sub(ts, base_ts)
            klen = _bincol_get(&kcol, i, &kp)
            vlen = _bincol_get(&vcol, i, &vp)
            if hsections is None or hsections[i] is None:
                hp = NULL
                hlen = 1
            else:
                hs = hsections[i]
                hp = <const uint8_t *>PyBytes_AS_STRING(hs)
                hlen = PyBytes_GET_SIZE(hs)
            p = write_record(p, sizes[i], delta, <int32_t>i, kp, klen, vp, vlen, hp, hlen)

        if codec != 0:
            compressed = _codecs().compress(codec, <const uint8_t[:records_size]>records,
                                            level=compression_level)
            free(records_buf)
            records_buf = NULL
            cmv = memoryview(compressed).cast("B")
            if len(cmv) > INT32_MAX - V2_HEADER:
                raise ValueError("the compressed batch exceeds the largest batch size")
            out = _batch_buffer(into, V2_HEADER + len(cmv))
            memcpy(seglog_seq_data(out) + V2_HEADER, _buf_ptr(cmv, keep), len(cmv))
    finally:
        free(sizes)
        free(records_buf)

    cdef uint8_t *b = seglog_seq_data(out)
    cdef Py_ssize_t total = len(out)
    cdef uint16_t attrs = <uint16_t>codec
    if is_transactional:
        attrs |= ATTR_TRANSACTIONAL
    if log_append_time is not None:
        attrs |= ATTR_LOG_APPEND_TIME
        max_ts = log_append_time
    write_v2_header(b, total, base_offset, partition_leader_epoch, attrs, <int32_t>(n - 1), base_ts, max_ts,
                    producer_id, producer_epoch, base_sequence, <int32_t>n)
    kb_store_u32(b + 17, crc32c_gil_aware(0, b + CRC_START, total - CRC_START))  # ``out`` is ours alone
    return out


def encode_control_batch(int control_type, *, int64_t base_offset=0, int64_t timestamp,
                         int64_t producer_id, int16_t producer_epoch, int32_t coordinator_epoch=0,
                         int32_t partition_leader_epoch=-1):
    """A transaction marker batch (control_type 0 ABORT, 1 COMMIT), as Kafka's
    ``MemoryRecords.withEndTransactionMarker`` writes it."""
    if control_type not in (0, 1):
        raise ValueError(f"control_type must be 0 (ABORT) or 1 (COMMIT), got {control_type}")
    key = bytes([0, 0, 0, control_type])
    value = bytearray(6)
    kb_store_u32(<uint8_t *>PyByteArray_AS_STRING(value) + 2, <uint32_t>coordinator_epoch)
    out = bytearray(encode_batch([bytes(value)], keys=[key], timestamps=timestamp,
                                 base_offset=base_offset, partition_leader_epoch=partition_leader_epoch,
                                 producer_id=producer_id, producer_epoch=producer_epoch,
                                 base_sequence=-1, is_transactional=True,
                                 allow_negative_timestamps=True))
    cdef uint8_t *b = <uint8_t *>PyByteArray_AS_STRING(out)
    kb_store_u16(b + 21, ATTR_TRANSACTIONAL | ATTR_CONTROL)
    kb_store_u32(b + 17, seglog_crc32c(0, b + CRC_START, len(out) - CRC_START))
    return bytes(out)


# ---------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------

@cython.no_gc
cdef class Record:
    """One record, as a consumer sees it (Kafka's ``ConsumerRecord`` fields).

    Not tracked by the cycle collector: a record holds only bytes, ints and its header list,
    and tracking millions of them made decoding GC-bound."""
    cdef readonly int64_t offset
    cdef readonly int64_t timestamp
    cdef readonly int timestamp_type
    cdef readonly object key
    cdef readonly object value
    cdef list _headers               # None when the record has no headers
    cdef readonly int32_t leader_epoch
    cdef readonly int64_t producer_id
    cdef readonly int16_t producer_epoch
    cdef readonly int32_t sequence
    cdef readonly bint is_transactional
    cdef readonly bint is_control
    cdef readonly int magic

    @property
    def headers(self):
        """``[(str key, bytes-or-None value), ...]`` (a new empty list when there are none)."""
        return [] if self._headers is None else self._headers

    @property
    def control_type(self):
        """For control records: the type id from the key (0 ABORT, 1 COMMIT, ...), else None."""
        if not self.is_control or self.key is None or len(self.key) < 4:
            return None
        return int.from_bytes(self.key[2:4], "big", signed=True)

    def __repr__(self):
        return (f"Record(offset={self.offset}, timestamp={self.timestamp}, "
                f"timestamp_type={self.timestamp_type}, key={self.key!r}, value={self.value!r}, "
                f"headers={self.headers!r}, leader_epoch={self.leader_epoch}"
                + (", control" if self.is_control else "") + ")")

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        return self._tuple() == (<Record>other)._tuple()

    def __hash__(self):
        return hash(self._tuple())

    def _tuple(self):
        return (self.offset, self.timestamp, self.timestamp_type, self.key, self.value,
                tuple(self.headers), self.leader_epoch, self.producer_id, self.producer_epoch,
                self.sequence, self.is_transactional, self.is_control, self.magic)


cdef class BatchHeader:
    """The header of one batch (any magic) and where it lies in the buffer."""
    # Fields and the constructor (make_header) in records.pxd.

    @property
    def next_offset(self):
        return self.last_offset + 1

    @property
    def compression(self):
        return self.attributes & ATTR_CODEC_MASK

    @property
    def timestamp_type(self):
        if self.magic == 0:
            return NO_TIMESTAMP_TYPE
        return LOG_APPEND_TIME if self.attributes & ATTR_LOG_APPEND_TIME else CREATE_TIME

    @property
    def is_transactional(self):
        return self.magic == 2 and bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self):
        return self.magic == 2 and bool(self.attributes & ATTR_CONTROL)

    @property
    def last_sequence(self):
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + (self.last_offset - self.base_offset)) % 2147483648

    def __repr__(self):
        return (f"BatchHeader(position={self.position}, size={self.size}, magic={self.magic}, "
                f"base_offset={self.base_offset}, last_offset={self.last_offset}, "
                f"records_count={self.records_count}, compression={self.compression}, "
                f"max_timestamp={self.max_timestamp}, attributes=0x{self.attributes:04x})")


cdef inline int _crc_flags(bint verify_crc) noexcept:
    return BATCH_CRC_ALL if verify_crc else 0


cdef Py_ssize_t _frame_at(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, seglog_batch *h,
                          bint allow_truncated) except -2:
    """Size of the batch at ``pos`` after the frame checks (batch_header.h); 0 when a torn tail
    may be ignored (``allow_truncated``)."""
    cdef int status = seglog_batch_frame(buf + pos, end - pos, h)
    if status == BATCH_OK:
        return h.size
    if allow_truncated and batch_is_torn(status):
        return 0
    _raise_corrupt(batch_error(status, h), pos)


cdef int _check_at(const uint8_t *buf, Py_ssize_t pos, seglog_batch *h, int crc_flags) except -1:
    """The rest of the header checks (batch_header.h) of a batch whose frame was checked."""
    cdef int status = batch_check_gil_aware(buf + pos, h, crc_flags)
    if status != BATCH_OK:
        _raise_corrupt(batch_error(status, h), pos)
    return 0


cdef int set_legacy_base(BatchHeader bh, const uint8_t *batch) except -1:
    """Kafka's base offset and record count of the legacy entry ``bh`` describes (at ``batch``):
    "lastOffset" is its offset field (a compressed wrapper carries the last inner one); the base
    offset of a compressed wrapper is its first inner record's (Kafka's
    AbstractLegacyRecordBatch.baseOffset decompresses it too)."""
    cdef int32_t count = 1
    bh.base_offset = _legacy_base(batch, bh.position, bh.size, &count)
    bh.records_count = count
    return 0


def batch_headers(object buf, Py_ssize_t start=0, Py_ssize_t end=-1, *,
                  bint verify_crc=False, bint allow_truncated=False):
    """Headers of the batches in ``buf[start:end]`` without decoding records.

    With ``verify_crc`` every batch's checksum is checked (CRC-32C for v2, CRC-32 for v0/v1).
    With ``allow_truncated`` a torn last batch ends the list instead of raising.
    """
    cdef const uint8_t[::1] mv_ = _bytes_arg(buf, "buf")
    cdef Py_ssize_t n = mv_.shape[0]
    if end < 0 or end > n:
        end = n
    if start < 0 or start > end:
        raise ValueError(f"start {start} is outside the buffer of {n} bytes")
    cdef const uint8_t *p = &mv_[0] if n else _EMPTY
    cdef Py_ssize_t pos = start, size
    cdef list out = []
    cdef seglog_batch h
    while pos < end:
        size = _frame_at(p, pos, end, &h, allow_truncated)
        if size == 0:
            break
        _check_at(p, pos, &h, _crc_flags(verify_crc))
        out.append(make_header(p + pos, pos, &h))
        pos += size
    return out


# One record inside a v2 batch, as pointers into the (possibly decompressed) records area.
cdef struct RecView:
    int64_t ts_delta
    int32_t offset_delta
    const uint8_t *key
    int32_t key_len
    const uint8_t *value
    int32_t value_len
    const uint8_t *headers
    int32_t header_count
    const uint8_t *end


cdef inline const uint8_t *_parse_record(const uint8_t *p, const uint8_t *end, RecView *r,
                                         const char **err) noexcept nogil:
    """Parse and validate one record as DefaultRecord.readFrom does; NULL + ``err`` on error."""
    cdef int32_t length, hk, hv, _i
    cdef const uint8_t *body_end
    p = kb_read_varint(p, end, &length)
    if p == NULL:
        err[0] = "record length varint runs past the end or is over-long"
        return NULL
    if length < 0 or length > end - p:
        err[0] = "record length is negative or runs past the end of the batch"
        return NULL
    body_end = p + length
    if length < 1:
        err[0] = "record body is empty"
        return NULL
    p += 1  # attributes: unused
    p = kb_read_varlong(p, body_end, &r.ts_delta)
    if p == NULL:
        err[0] = "bad timestampDelta varlong"
        return NULL
    p = kb_read_varint(p, body_end, &r.offset_delta)
    if p == NULL:
        err[0] = "bad offsetDelta varint"
        return NULL
    p = kb_read_varint(p, body_end, &r.key_len)
    if p == NULL or r.key_len < -1 or r.key_len > body_end - p:
        err[0] = "bad key length"
        return NULL
    r.key = p
    if r.key_len > 0:
        p += r.key_len
    p = kb_read_varint(p, body_end, &r.value_len)
    if p == NULL or r.value_len < -1 or r.value_len > body_end - p:
        err[0] = "bad value length"
        return NULL
    r.value = p
    if r.value_len > 0:
        p += r.value_len
    p = kb_read_varint(p, body_end, &r.header_count)
    if p == NULL or r.header_count < 0 or r.header_count > body_end - p:
        err[0] = "bad header count"
        return NULL
    r.headers = p
    for _i in range(r.header_count):
        p = kb_read_varint(p, body_end, &hk)
        if p == NULL or hk < 0 or hk > body_end - p:
            err[0] = "bad header key length (null header keys are invalid)"
            return NULL
        p += hk
        p = kb_read_varint(p, body_end, &hv)
        if p == NULL or hv < -1 or hv > body_end - p:
            err[0] = "bad header value length"
            return NULL
        if hv > 0:
            p += hv
    if p != body_end:
        err[0] = "record length does not match its contents"
        return NULL
    r.end = body_end
    return body_end


cdef list _headers_list(const RecView *r):
    cdef list out = []
    cdef const uint8_t *p = r.headers
    cdef int32_t hk, hv, _i
    for _i in range(r.header_count):
        p = kb_read_varint(p, r.end, &hk)
        key = PyUnicode_DecodeUTF8(<const char *>p, hk, "replace")
        p += hk
        p = kb_read_varint(p, r.end, &hv)
        if hv < 0:
            out.append((key, None))
        else:
            out.append((key, PyBytes_FromStringAndSize(<const char *>p, hv)))
            p += hv
    return out


cdef class _Source:
    """The records area of one batch: a view of the input or of a decompressed copy."""
    cdef object owner
    cdef const uint8_t *start
    cdef const uint8_t *end


cdef _Source _records_area(const uint8_t *b, Py_ssize_t pos, Py_ssize_t size, int codec, int magic,
                           Py_ssize_t header, Py_ssize_t max_decompressed, int64_t offset):
    cdef _Source s = _Source.__new__(_Source)
    cdef const uint8_t[::1] mv
    if codec == 0:
        s.start = b + header
        s.end = b + size
        return s
    if size - header <= 0:
        _raise_corrupt(f"batch at offset {offset}: compressed records area is empty", pos)
    try:
        out = _codecs().decompress(codec, <const uint8_t[:size - header]>(b + header), magic=magic,
                                   max_size=max_decompressed)
    except Exception as exc:
        kind = _errors._classes["corrupt_record"]
        if isinstance(exc, kind):
            raise kind(f"batch at offset {offset} (position {pos}): {exc}", position=pos) from exc
        raise
    mv = memoryview(out).cast("B")
    s.owner = mv
    s.start = &mv[0] if mv.shape[0] else _EMPTY
    s.end = s.start + mv.shape[0]
    return s


@cython.final
@cython.freelist(8)
cdef class _Decoder:
    """Walks batches and emits records into a list of Record objects or into columns."""
    cdef const uint8_t *buf
    cdef Py_ssize_t end
    cdef bint verify_crc
    cdef bint include_control
    cdef bint allow_truncated
    cdef Py_ssize_t max_decompressed
    cdef int64_t min_offset
    cdef int64_t max_incl        # last offset to keep (inclusive)
    cdef list out                # Record sink, or None
    cdef _ColumnBuilder cols     # column sink, or None
    # Aborted transactions (read_committed): a transactional data batch of producer
    # ab_pid[i] whose base offset lies in [ab_first[i], ab_last[i]] is skipped.
    cdef int64_t *ab_pid
    cdef int64_t *ab_first
    cdef int64_t *ab_last
    cdef Py_ssize_t ab_n

    def __dealloc__(self):
        free(self.ab_pid)
        free(self.ab_first)
        free(self.ab_last)

    cdef bint aborted(self, const seglog_batch *h) noexcept:
        cdef Py_ssize_t i
        for i in range(self.ab_n):
            if (self.ab_pid[i] == h.pid and self.ab_first[i] <= h.base_offset
                    and h.base_offset <= self.ab_last[i]):
                return True
        return False

    cdef int emit_v2(self, const uint8_t *b, Py_ssize_t pos, seglog_batch *h) except -1:
        cdef int codec = h.attrs & ATTR_CODEC_MASK
        cdef bint control = (h.attrs & ATTR_CONTROL) != 0
        cdef int64_t last = kb_wrap_add(h.base_offset, h.last_delta)
        if control and not self.include_control:
            return 0
        if last < self.min_offset or h.base_offset > self.max_incl or h.count == 0:
            return 0
        if self.ab_n and not control and (h.attrs & ATTR_TRANSACTIONAL) and self.aborted(h):
            return 0
        cdef _Source src = None
        cdef const uint8_t *p = b + V2_HEADER
        cdef const uint8_t *rend = b + h.length + LOG_OVERHEAD
        if codec != 0:
            src = _records_area(b, pos, h.length + LOG_OVERHEAD, codec, 2, V2_HEADER,
                                self.max_decompressed, h.base_offset)
            p = src.start
            rend = src.end
        cdef RecView r
        cdef const char *err = NULL
        cdef int32_t i
        cdef int64_t offset, ts
        cdef bint log_append = (h.attrs & ATTR_LOG_APPEND_TIME) != 0
        cdef Record rec
        if codec != 0 and h.count > (rend - p) // MIN_RECORD_SIZE:
            _raise_corrupt(f"record count {h.count} cannot fit in {rend - p} decompressed bytes "
                           f"(batch at offset {h.base_offset})", pos)
        cdef bint plain = False
        cdef int8_t tt = 1 if log_append else 0
        if self.cols is not None:
            self.cols.reserve(h.count)
            self.cols.reserve_data(rend - p)
            self.cols.area_end = rend
            self.cols.from_input = codec == 0
            plain = self.cols.plain_ok(rend - p) or self.cols.plain_views_ok()
        for i in range(h.count):
            p = _parse_record(p, rend, &r, &err)
            if p == NULL:
                _raise_corrupt(f"record {i} of the batch at offset {h.base_offset}: "
                               f"{err.decode()}", pos)
            offset = kb_wrap_add(h.base_offset, r.offset_delta)
            if offset < self.min_offset or offset > self.max_incl:
                continue
            ts = h.max_ts if log_append else kb_wrap_add(h.base_ts, r.ts_delta)
            if self.cols is not None:
                if plain and r.value_len >= 0 and not self.cols.val_nulls:
                    if r.key_len >= 0 and not self.cols.key_nulls:
                        if self.cols.views:
                            self.cols.add_plain_views(offset, ts, tt, h.ple, &r)
                        else:
                            self.cols.add_plain(offset, ts, tt, h.ple, &r)
                        continue
                    if r.key_len < 0 and self.cols.key_nulls and self.cols.key_nulls == self.cols.n:
                        self.cols.add_plain_keyless(offset, ts, tt, h.ple, &r)
                        continue
                self.cols.add(offset, ts, tt, h.ple, &r)
                continue
            rec = Record.__new__(Record)
            rec.offset = offset
            rec.timestamp = ts
            rec.timestamp_type = 1 if log_append else 0
            rec.key = None if r.key_len < 0 else PyBytes_FromStringAndSize(<const char *>r.key, r.key_len)
            rec.value = None if r.value_len < 0 else PyBytes_FromStringAndSize(<const char *>r.value, r.value_len)
            rec._headers = _headers_list(&r) if r.header_count else None
            rec.leader_epoch = h.ple
            rec.producer_id = h.pid
            rec.producer_epoch = h.epoch
            rec.sequence = -1 if h.base_seq < 0 else <int32_t>((<int64_t>h.base_seq + r.offset_delta) % 2147483648)
            rec.is_transactional = (h.attrs & ATTR_TRANSACTIONAL) != 0
            rec.is_control = control
            rec.magic = 2
            self.out.append(rec)
        if p != rend:
            _raise_corrupt(f"{rend - p} bytes left after the {h.count} records of the batch at "
                           f"offset {h.base_offset} (incorrect declared batch size)", pos)
        return 0

    cdef int emit_legacy(self, const uint8_t *b, Py_ssize_t pos, Py_ssize_t size, bint inner,
                         int64_t wrapper_offset, int64_t wrapper_ts, bint wrapper_log_append,
                         int64_t rel_base) except -1:
        """One legacy entry at ``b`` (``size`` bytes). Wrappers recurse into their inner set."""
        cdef int magic = b[16]
        cdef int attrs = b[17]
        cdef int codec = attrs & 0x07
        cdef Py_ssize_t hdr = 18 if magic == 0 else 26
        cdef int64_t offset = kb_load_i64(b)
        cdef int64_t ts = kb_load_i64(b + 18) if magic == 1 else -1
        cdef int ts_type = -1 if magic == 0 else (1 if attrs & ATTR_LOG_APPEND_TIME else 0)
        cdef int32_t klen, vlen
        cdef const uint8_t *kp
        cdef const uint8_t *vp
        cdef seglog_batch inner_head
        cdef int status
        if size < hdr + 8:
            _raise_corrupt(f"legacy message of {size} bytes is too short for magic {magic}", pos)
        if inner and self.verify_crc:
            # A top-level entry's checksum was checked with its header (_check_at).
            status = seglog_batch_head(b, size, &inner_head, BATCH_CRC_LEGACY)
            if status != BATCH_OK:
                _raise_corrupt(batch_error(status, &inner_head), pos)
        klen = kb_load_i32(b + hdr)
        if klen < -1 or klen > size - hdr - 8:
            _raise_corrupt(f"bad key length {klen} in the legacy message at offset {offset}", pos)
        kp = b + hdr + 4
        vp = kp + (klen if klen > 0 else 0)
        vlen = kb_load_i32(vp)
        vp += 4
        if vlen < -1 or (vp + (vlen if vlen > 0 else 0)) != b + size:
            _raise_corrupt(f"bad value length {vlen} in the legacy message at offset {offset}", pos)
        if codec != 0:
            if inner:
                _raise_corrupt(f"nested compression in the legacy message at offset {offset}", pos)
            if codec > 3:
                _raise_corrupt(f"codec {codec} is not valid in a magic {magic} message", pos)
            if vlen < 0:
                _raise_corrupt(f"compressed legacy wrapper at offset {offset} has a null value", pos)
            return self.emit_wrapper(b, pos, vp, vlen, codec, magic, offset, ts,
                                     (attrs & ATTR_LOG_APPEND_TIME) != 0)
        if inner:
            if magic == 1:
                offset = kb_wrap_add(rel_base, offset)
                if wrapper_log_append:
                    ts = wrapper_ts
                    ts_type = 1
        if offset < self.min_offset or offset > self.max_incl:
            return 0
        cdef RecView r
        cdef Record rec
        if self.cols is not None:
            if not inner:
                self.cols.from_input = True
            r.key = kp
            r.key_len = klen
            r.value = vp
            r.value_len = vlen
            r.header_count = 0
            self.cols.reserve(1)
            self.cols.add(offset, ts, ts_type, -1, &r)
            return 0
        rec = Record.__new__(Record)
        rec.offset = offset
        rec.timestamp = ts
        rec.timestamp_type = ts_type
        rec.key = None if klen < 0 else PyBytes_FromStringAndSize(<const char *>kp, klen)
        rec.value = None if vlen < 0 else PyBytes_FromStringAndSize(<const char *>vp, vlen)
        rec._headers = None
        rec.leader_epoch = -1
        rec.producer_id = -1
        rec.producer_epoch = -1
        rec.sequence = -1
        rec.magic = magic
        self.out.append(rec)
        return 0

    cdef int emit_wrapper(self, const uint8_t *b, Py_ssize_t pos, const uint8_t *vp, int32_t vlen,
                          int codec, int magic, int64_t offset, int64_t ts, bint log_append) except -1:
        cdef _Source src = _records_area(vp, pos, vlen, codec, magic, 0, self.max_decompressed, offset)
        cdef const uint8_t *p = src.start
        cdef Py_ssize_t n = src.end - src.start, ipos = 0, isize
        if n == 0:
            _raise_corrupt(f"compressed wrapper at offset {offset} holds no inner records", pos)
        # v1: absolute = wrapperOffset - lastInnerRelative + innerRelative; find the last inner.
        cdef int64_t last_rel = 0
        cdef int64_t rel_base = 0
        if magic == 1:
            while ipos < n:
                isize = _inner_size(p, ipos, n, pos)
                last_rel = kb_load_i64(p + ipos)
                ipos += isize
            rel_base = kb_wrap_sub(offset, last_rel) if offset != 0 else 0
            if rel_base < 0:
                _raise_corrupt(f"compressed wrapper at offset {offset} holds inner relative offsets up "
                               f"to {last_rel}: its base offset would be negative ({rel_base})", pos)
            ipos = 0
        if self.cols is not None:
            self.cols.from_input = False
        while ipos < n:
            isize = _inner_size(p, ipos, n, pos)
            if p[ipos + 16] != magic:
                _raise_corrupt(f"inner message magic {p[ipos + 16]} differs from its wrapper's "
                               f"magic {magic} (wrapper at offset {offset})", pos)
            self.emit_legacy(p + ipos, pos, isize, True, offset, ts, log_append, rel_base)
            ipos += isize
        if self.cols is not None:
            self.cols.from_input = True
        return 0


cdef int64_t _legacy_base(const uint8_t *b, Py_ssize_t pos, Py_ssize_t size,
                          int32_t *count) except? -2:
    """Kafka's ``AbstractLegacyRecordBatch.baseOffset`` of the legacy entry at ``b``: its own
    offset for an uncompressed message; for a compressed wrapper the first inner record's
    offset (v0: inner offsets are absolute; v1: the wrapper's offset is the last inner one and
    inner offsets are relative). ``count`` gets the number of records (1, or the inner count)."""
    cdef int magic = b[16]
    cdef int codec = b[17] & 0x07
    cdef Py_ssize_t hdr = 18 if magic == 0 else 26
    cdef int64_t offset = kb_load_i64(b)
    cdef int32_t klen, vlen
    cdef const uint8_t *vp
    count[0] = 1
    if codec == 0:
        return offset
    if size < hdr + 8:
        _raise_corrupt(f"legacy message of {size} bytes is too short for magic {magic}", pos)
    klen = kb_load_i32(b + hdr)
    if klen < -1 or klen > size - hdr - 8:
        _raise_corrupt(f"bad key length {klen} in the legacy message at offset {offset}", pos)
    vp = b + hdr + 4 + (klen if klen > 0 else 0)
    vlen = kb_load_i32(vp)
    vp += 4
    if vlen < 0 or vp + vlen != b + size:
        _raise_corrupt(f"bad value length {vlen} in the compressed legacy wrapper at offset {offset}", pos)
    if codec > 3:
        _raise_corrupt(f"codec {codec} is not valid in a magic {magic} message", pos)
    cdef _Source src = _records_area(vp, pos, vlen, codec, magic, 0, DEFAULT_MAX_DECOMPRESSED, offset)
    cdef const uint8_t *p = src.start
    cdef Py_ssize_t n = src.end - src.start, ipos = 0
    if n == 0:
        _raise_corrupt(f"compressed wrapper at offset {offset} holds no inner records", pos)
    cdef int64_t first_rel = kb_load_i64(p) if n >= 8 else 0
    cdef int64_t last_rel = 0
    cdef int32_t inner = 0
    while ipos < n:
        last_rel = kb_load_i64(p + ipos)
        ipos += _inner_size(p, ipos, n, pos)
        inner += 1
    count[0] = inner
    if magic == 0:
        return first_rel
    # As the decoder: a wrapper at offset 0 (never assigned by a broker) keeps the inner offsets.
    if offset == 0:
        return first_rel
    return kb_wrap_add(kb_wrap_sub(offset, last_rel), first_rel)


def legacy_base_offset(const uint8_t[::1] entry):
    """(base offset, record count) of the one legacy (v0/v1) entry in ``entry``, as Kafka's
    ``AbstractLegacyRecordBatch`` reports them: a compressed wrapper is decompressed to find
    its first inner offset."""
    cdef int32_t count = 1
    if entry.shape[0] < LEGACY_MIN_LENGTH + LOG_OVERHEAD or entry[16] > 1:
        raise ValueError(f"not a legacy message: {entry.shape[0]} bytes"
                         + (f", magic {entry[16]}" if entry.shape[0] > 16 else ""))
    cdef int64_t base = _legacy_base(&entry[0], 0, entry.shape[0], &count)
    return base, count


cdef Py_ssize_t _inner_size(const uint8_t *p, Py_ssize_t ipos, Py_ssize_t n, Py_ssize_t pos) except -1:
    if n - ipos < HEADER_UP_TO_MAGIC:
        _raise_corrupt(f"truncated inner message set of a compressed wrapper ({n - ipos} bytes "
                       "left over)", pos)
    cdef int32_t length = kb_load_i32(p + ipos + 8)
    if length < LEGACY_MIN_LENGTH or length > n - ipos - LOG_OVERHEAD:
        _raise_corrupt(f"bad inner message size {length} inside a compressed wrapper", pos)
    if p[ipos + 16] > 1:
        _raise_corrupt(f"inner message has magic {p[ipos + 16]}; wrappers hold magic 0/1 only", pos)
    return length + LOG_OVERHEAD


cdef int _walk(_Decoder d, const uint8_t *buf, Py_ssize_t start, Py_ssize_t end) except -1:
    cdef Py_ssize_t pos = start, size
    cdef seglog_batch h
    while pos < end:
        size = _frame_at(buf, pos, end, &h, d.allow_truncated)
        if size == 0:
            break
        _check_at(buf, pos, &h, _crc_flags(d.verify_crc))
        if h.magic == 2:
            d.emit_v2(buf + pos, pos, &h)
        else:
            d.emit_legacy(buf + pos, pos, size, False, 0, 0, False, 0)
        pos += size
    return 0


cdef _Decoder _decoder(const uint8_t[::1] buf, bint verify_crc, bint include_control,
                       bint allow_truncated, object min_offset, object max_offset,
                       Py_ssize_t max_decompressed, object aborted=None):
    return _decoder_at(&buf[0] if buf.shape[0] else _EMPTY, buf.shape[0], verify_crc,
                       include_control, allow_truncated, min_offset, max_offset, max_decompressed,
                       aborted)


cdef _Decoder _decoder_at(const uint8_t *buf, Py_ssize_t size, bint verify_crc,
                          bint include_control, bint allow_truncated, object min_offset,
                          object max_offset, Py_ssize_t max_decompressed, object aborted):
    cdef _Decoder d = _Decoder.__new__(_Decoder)
    if aborted is not None:
        _set_aborted(d, aborted)
    d.buf = buf
    d.end = size
    d.verify_crc = verify_crc
    d.include_control = include_control
    d.allow_truncated = allow_truncated
    d.max_decompressed = max_decompressed
    d.min_offset = -(2 ** 63) if min_offset is None else min_offset
    if max_offset is not None and max_offset <= -(2 ** 63):
        raise ValueError(f"max_offset {max_offset} leaves nothing to decode")
    d.max_incl = 2 ** 63 - 1 if max_offset is None else max_offset - 1
    return d


cdef int _set_aborted(_Decoder d, object aborted) except -1:
    cdef list ranges = []
    cdef Py_ssize_t i, n
    for item in aborted:
        try:
            pid, first, last = item
            ranges.append((int(pid), int(first), int(last)))
        except (TypeError, ValueError):
            raise TypeError(f"aborted transactions must be (producer_id, first_offset, last_offset) "
                            f"triples of ints, got {item!r}") from None
    n = len(ranges)
    if n == 0:
        return 0
    d.ab_pid = <int64_t *>malloc(n * sizeof(int64_t))
    d.ab_first = <int64_t *>malloc(n * sizeof(int64_t))
    d.ab_last = <int64_t *>malloc(n * sizeof(int64_t))
    if d.ab_pid == NULL or d.ab_first == NULL or d.ab_last == NULL:
        raise MemoryError()
    for i in range(n):
        d.ab_pid[i], d.ab_first[i], d.ab_last[i] = ranges[i]
    d.ab_n = n
    return 0


# ---------------------------------------------------------------------------------------------
# Produce-path validation (Kafka's LogValidator for AppendOrigin.CLIENT)
# ---------------------------------------------------------------------------------------------

cdef int _refuse(str kind, str where, Py_ssize_t pos, int64_t base, str what,
                 int64_t offset=-1) except -1:
    """Raise ``kind`` naming the partition, the batch (byte position, base offset) and ``what``."""
    raise _errors.make(kind, f"{what} (batch at byte {pos}, base offset {base}, in the append to "
                             f"{where})", position=pos, offset=(None if offset < 0 else offset))


cdef int _validate_records(const uint8_t *b, Py_ssize_t pos, seglog_batch *h, str where, int64_t now,
                           bint check_ts, int64_t before_max_ms, int64_t after_max_ms,
                           bint compacted, Py_ssize_t max_decompressed) except -1:
    """One pass over the records of a v2 batch: every record parsed with its lengths and varints
    in bounds, offset deltas 0..count-1, keys on compacted topics, timestamps within bounds, the
    header's maxTimestamp equal to the largest record timestamp. No allocation when the batch is
    uncompressed (a compressed one is decompressed once, within ``max_decompressed``)."""
    cdef int codec = h.attrs & ATTR_CODEC_MASK
    cdef const uint8_t *p
    cdef const uint8_t *q
    cdef const uint8_t *rend
    cdef _Source src = None
    cdef RecView r
    cdef const char *err = NULL
    cdef int32_t i
    cdef int64_t ts, max_seen = -1
    cdef int64_t low = INT64_MIN, high = INT64_MAX
    if codec == 0:
        p = b + V2_HEADER
        rend = b + h.length + LOG_OVERHEAD
    else:
        src = _records_area(b, pos, h.length + LOG_OVERHEAD, codec, 2, V2_HEADER, max_decompressed,
                            h.base_offset)
        p = src.start
        rend = src.end
        if h.count > (rend - p) // MIN_RECORD_SIZE:
            _raise_corrupt(f"record count {h.count} cannot fit in {rend - p} decompressed bytes "
                           f"(batch at offset {h.base_offset}, in the append to {where})", pos)
    # The accepted range [now - before, now + after], without overflowing int64 (now >= 0).
    if check_ts:
        if before_max_ms < INT64_MAX and now >= 0:
            low = now - before_max_ms
        if after_max_ms < INT64_MAX - now:
            high = now + after_max_ms
    for i in range(h.count):
        # Most records take the one-pass reader; whatever it does not take, the full one decides.
        q = kb_read_plain_record(p, rend, &r.ts_delta, &r.offset_delta, &r.key_len)
        if q != NULL:
            p = q
        else:
            p = _parse_record(p, rend, &r, &err)
            if p == NULL:
                _raise_corrupt(f"record {i} of the batch at offset {h.base_offset} in the append to "
                               f"{where}: {err.decode()}", pos)
        if r.offset_delta != i:
            _refuse("invalid_record", where, pos, h.base_offset,
                    f"record {i} has offsetDelta {r.offset_delta}; a producer batch numbers its "
                    f"records 0..{h.count - 1}")
        if compacted and r.key_len < 0:
            _refuse("invalid_record", where, pos, h.base_offset,
                    f"record {i} has no key; a compacted topic cannot accept a record without a key")
        ts = kb_wrap_add(h.base_ts, r.ts_delta)
        if ts > max_seen:
            max_seen = ts
        if check_ts and ts != -1 and (ts < low or ts > high):
            _refuse("invalid_timestamp", where, pos, h.base_offset,
                    f"timestamp {ts} of record {i} is out of range: it must lie within "
                    f"[{low}, {high}] (now {now}, message.timestamp.before.max.ms={before_max_ms}, "
                    f"message.timestamp.after.max.ms={after_max_ms})")
    if p != rend:
        _raise_corrupt(f"{rend - p} bytes left after the {h.count} records of the batch at offset "
                       f"{h.base_offset} in the append to {where} (incorrect declared batch size)", pos)
    if check_ts and max_seen != h.max_ts:
        _refuse("invalid_record", where, pos, h.base_offset,
                f"maxTimestamp {h.max_ts} differs from the largest record timestamp {max_seen}")
    return 0


cdef int _name_partition(object exc, str where, Py_ssize_t pos) except -1:
    """Raise ``exc`` (a CorruptRecordError of the shared header checks) again with the partition
    named in its message; other exceptions are left alone."""
    if not isinstance(exc, _errors._classes["corrupt_record"]) or not exc.args:
        return 0
    msg = str(exc.args[0])
    suffix = f" (at byte {pos})"
    if msg.endswith(suffix):
        msg = msg[:-len(suffix)]
    raise _errors.corrupt(f"{msg}, in the append to {where}", pos) from None


def validate_batches(object buf, str where, *, int64_t now, bint log_append_time=False,
                     int64_t before_max_ms=INT64_MAX, int64_t after_max_ms=INT64_MAX,
                     bint compacted=False, bint verify_crc=True, bint walk_compressed=True,
                     Py_ssize_t max_batch_size=-1, bint produce_request=False,
                     Py_ssize_t max_decompressed=DEFAULT_MAX_DECOMPRESSED):
    """Validate batches a producer sent, as Kafka's broker does before a client append
    (``LogValidator`` with ``AppendOrigin.CLIENT``), and return their :class:`BatchHeader` list.

    ``where`` names the partition in messages ("topic-0"). Checked per batch: its size against
    ``max_batch_size`` when >= 0 (``RecordTooLargeError``, before anything else); structure and
    CRC (``CorruptRecordError``); magic 2, a positive record count equal to lastOffsetDelta + 1,
    no control batch, a base sequence with a producer id, a producer epoch with a producer id, no
    transactional batch without a producer id (``InvalidRecordError``); no LogAppendTime set by
    the producer (``InvalidTimestampError``). Then every record is parsed
    (lengths and varints in bounds, exact record count, no bytes left over), its offsetDelta must
    be its index, keyless records are refused when ``compacted``, and unless
    ``log_append_time`` each timestamp other than -1 must lie within ``[now - before_max_ms,
    now + after_max_ms]`` (``InvalidTimestampError``) and the batch's maxTimestamp must equal the
    largest record timestamp. Compressed batches are decompressed once, within
    ``max_decompressed`` bytes; ``walk_compressed=False`` leaves their records unread (only for
    batches this process encoded itself and nothing has touched since). ``produce_request``
    adds the rules of a Kafka Produce request's records for one partition: exactly one batch,
    whose baseOffset is 0.
    """
    cdef const uint8_t[::1] mv_ = _bytes_arg(buf, "buf")
    cdef Py_ssize_t n = mv_.shape[0], pos = 0, size
    cdef const uint8_t *p = &mv_[0] if n else _EMPTY
    cdef list out = []
    cdef seglog_batch h
    cdef int magic
    if now < 0:
        raise ValueError(f"now must be a wall-clock time in milliseconds, got {now}")
    if before_max_ms < 0 or after_max_ms < 0:
        raise ValueError(f"timestamp bounds must be >= 0, got before_max_ms={before_max_ms}, "
                         f"after_max_ms={after_max_ms}")
    while pos < n:
        try:
            size = _frame_at(p, pos, n, &h, False)
        except Exception as exc:
            _name_partition(exc, where, pos)
            raise
        if max_batch_size >= 0 and size > max_batch_size:
            raise _errors.make("record_too_large",
                               f"the record batch at byte {pos} of the append to {where} is {size} "
                               f"bytes, over the largest allowed ({max_batch_size} bytes: "
                               f"max.message.bytes + 12 bytes of log overhead)",
                               position=pos, limit=max_batch_size)
        if produce_request and pos > 0:
            raise _errors.make("invalid_record", f"a produce request holds one record batch per "
                               f"partition; another starts at byte {pos} of the append to {where}",
                               position=pos)
        magic = p[pos + 16]
        if magic != 2:
            raise _errors.make("invalid_record",
                               f"only RecordBatch v2 can be appended; the batch at byte {pos} of "
                               f"the append to {where} has magic {magic}", position=pos)
        try:
            _check_at(p, pos, &h, _crc_flags(verify_crc))
        except Exception as exc:
            _name_partition(exc, where, pos)
            raise
        if h.count <= 0:
            _refuse("invalid_record", where, pos, h.base_offset,
                    f"invalid recordsCount {h.count}: a producer batch holds at least one record")
        if <int64_t>h.last_delta + 1 != h.count:
            _refuse("invalid_record", where, pos, h.base_offset,
                    f"lastOffsetDelta {h.last_delta} is inconsistent with recordsCount {h.count} "
                    f"(a producer batch spans exactly recordsCount offsets)")
        if h.attrs & ATTR_CONTROL:
            _refuse("invalid_record", where, pos, h.base_offset,
                    "clients are not allowed to write control batches")
        if h.pid >= 0 and h.base_seq < 0:
            _refuse("invalid_record", where, pos, h.base_offset,
                    f"invalid baseSequence {h.base_seq} in a batch with producerId {h.pid}")
        if h.pid >= 0 and h.epoch < 0:
            _refuse("invalid_record", where, pos, h.base_offset,
                    f"invalid producerEpoch {h.epoch} in a batch with producerId {h.pid}")
        if (h.attrs & ATTR_TRANSACTIONAL) and h.pid < 0:
            _refuse("invalid_record", where, pos, h.base_offset,
                    f"a transactional batch needs a producerId, got {h.pid}")
        if h.attrs & ATTR_LOG_APPEND_TIME:
            _refuse("invalid_timestamp", where, pos, h.base_offset,
                    "the producer set timestamp type LogAppendTime; only the broker may")
        if walk_compressed or (h.attrs & ATTR_CODEC_MASK) == 0:
            _validate_records(p + pos, pos, &h, where, now, not log_append_time, before_max_ms,
                              after_max_ms, compacted, max_decompressed)
        if produce_request:
            if h.base_offset != 0:
                _refuse("invalid_record", where, pos, h.base_offset,
                        f"the baseOffset of a produced batch must be 0, not {h.base_offset}")
        out.append(make_header(p + pos, pos, &h))
        pos += size
    if produce_request and not out:
        raise _errors.make("invalid_record", f"the append to {where} holds no record batch at all")
    return out


def decode_records(object buf, *, bint verify_crc=True, bint include_control=False,
                   bint allow_truncated=False, min_offset=None, max_offset=None,
                   Py_ssize_t max_decompressed=DEFAULT_MAX_DECOMPRESSED, aborted=None):
    """Every record in ``buf`` (any number of batches, any magic) as a list of :class:`Record`.

    Control records (transaction markers, KRaft control records) are left out unless
    ``include_control``. ``min_offset``/``max_offset`` (exclusive) keep only records in range.
    ``aborted`` (read_committed) is an iterable of ``(producer_id, first_offset, last_offset)``
    aborted transactions: a transactional data batch of that producer whose base offset lies in
    ``[first_offset, last_offset]`` is left out, as Kafka's consumer drops it.
    """
    # bytes (what a stream of batches is) without the memoryview of other buffers.
    cdef const uint8_t[::1] mv_
    cdef _Decoder d
    if PyBytes_CheckExact(buf):
        d = _decoder_at(<const uint8_t *>PyBytes_AS_STRING(buf), PyBytes_GET_SIZE(buf), verify_crc,
                        include_control, allow_truncated, min_offset, max_offset, max_decompressed,
                        aborted)
    else:
        mv_ = _bytes_arg(buf, "buf")
        d = _decoder(mv_, verify_crc, include_control, allow_truncated, min_offset, max_offset,
                     max_decompressed, aborted)
    d.out = []
    _walk(d, d.buf, 0, d.end)
    return d.out


cdef class RecordIterator:
    """Iterates records batch by batch: memory stays bounded by one batch's records."""
    cdef object owner
    cdef _Decoder d
    cdef Py_ssize_t pos
    cdef list pending
    cdef Py_ssize_t index

    def __iter__(self):
        return self

    def __next__(self):
        cdef Py_ssize_t size
        cdef seglog_batch h
        while self.index >= len(self.pending):
            if self.pos >= self.d.end:
                raise StopIteration
            size = _frame_at(self.d.buf, self.pos, self.d.end, &h, self.d.allow_truncated)
            if size == 0:
                self.pos = self.d.end
                raise StopIteration
            self.pending = []
            self.index = 0
            self.d.out = self.pending
            _check_at(self.d.buf, self.pos, &h, _crc_flags(self.d.verify_crc))
            if h.magic == 2:
                self.d.emit_v2(self.d.buf + self.pos, self.pos, &h)
            else:
                self.d.emit_legacy(self.d.buf + self.pos, self.pos, size, False, 0, 0, False, 0)
            self.pos += size
        rec = self.pending[self.index]
        self.index += 1
        return rec


def iter_records(buf, *, bint verify_crc=True, bint include_control=False,
                 bint allow_truncated=False, min_offset=None, max_offset=None,
                 Py_ssize_t max_decompressed=DEFAULT_MAX_DECOMPRESSED, aborted=None):
    """Iterate the records in ``buf`` lazily, one batch decoded at a time (see decode_records)."""
    cdef const uint8_t[::1] mv = _bytes_arg(buf, "buf")
    cdef RecordIterator it = RecordIterator.__new__(RecordIterator)
    it.owner = mv
    it.d = _decoder(mv, verify_crc, include_control, allow_truncated, min_offset, max_offset,
                    max_decompressed, aborted)
    it.pending = []
    it.index = 0
    it.pos = 0
    return it


# ---------------------------------------------------------------------------------------------
# Columnar output: Arrow-layout buffers, no Python object per record
# ---------------------------------------------------------------------------------------------

include "export.pxi"


@cython.freelist(64)
@cython.no_gc    # holds only another NativeBuffer: no cycle
cdef class NativeBuffer:
    """A block of memory exported through the buffer protocol (read-only): owned, or a part of
    the block of another NativeBuffer (``base``, kept alive by this one)."""
    cdef char *data
    cdef Py_ssize_t size
    cdef Py_ssize_t itemsize
    cdef bytes fmt
    cdef NativeBuffer base

    def __dealloc__(self):
        if self.base is None:
            free(self.data)

    def __len__(self):
        return self.size // self.itemsize

    @property
    def nbytes(self):
        return self.size

    def __getbuffer__(self, Py_buffer *view, int flags):
        _export_readonly(view, self.data if self.data != NULL else <char *>_EMPTY, self.size,
                         self.itemsize, PyBytes_AS_STRING(self.fmt), flags)
        view.obj = self

    def __releasebuffer__(self, Py_buffer *view):
        _release_export(view)


cdef enum:
    # Keys and values up to this size are copied into a column as this many bytes (put_copy).
    SMALL_COPY = 16


cdef struct GBuf:
    char *data
    Py_ssize_t len
    Py_ssize_t cap
    bint shared     # ``data`` is a part of the column builder's block, not an allocation


cdef int _gbuf_grow(GBuf *b, Py_ssize_t need) except -1:
    cdef char *old = b.data
    if not b.shared:
        b.data = <char *>grow_buffer(b.data, &b.cap, need, "a column buffer")
        return 0
    # Out of its part of the block: move to an allocation of its own.
    b.data = <char *>grow_buffer(NULL, &b.cap, need, "a column buffer")
    memcpy(b.data, old, b.len)
    b.shared = False
    return 0


cdef inline int _gbuf_reserve(GBuf *b, Py_ssize_t extra) except -1:
    # Inline: called per record; the growth itself is out of line.
    if b.len + extra <= b.cap:
        return 0
    return _gbuf_grow(b, b.len + extra)


cdef inline void _gbuf_free(GBuf *b) noexcept:
    if not b.shared:
        free(b.data)
    b.data = NULL


cdef inline void _gbuf_put(GBuf *b, const void *src, Py_ssize_t n) noexcept:
    memcpy(b.data + b.len, src, n)
    b.len += n


cdef NativeBuffer _take(GBuf *b, bytes fmt, Py_ssize_t itemsize, NativeBuffer block=None):
    """The buffer's bytes as a NativeBuffer; ``block`` owns them if they are a part of it."""
    cdef NativeBuffer nb = NativeBuffer.__new__(NativeBuffer)
    nb.data = b.data
    nb.size = b.len
    nb.fmt = fmt
    nb.itemsize = itemsize
    if b.shared:
        nb.base = block
    b.data = NULL
    b.len = b.cap = 0
    b.shared = False
    return nb


cdef inline void _valid_bit(GBuf *valid, Py_ssize_t i, bint ok) noexcept:
    """Bit ``i`` of an LSB-first validity bitmap (appended in order; room reserved)."""
    if (i & 7) == 0:
        valid.data[valid.len] = 0
        valid.len += 1
    if ok:
        valid.data[i >> 3] |= <char>(1 << (i & 7))


cdef inline void _input_view(char *v, const uint8_t *p, int32_t n, const uint8_t *base) noexcept:
    """The Arrow binary_view entry (see _ColumnBuilder._view) of ``n`` >= 0 bytes at ``p`` in
    the input (data buffer 0, which starts at ``base``)."""
    cdef int32_t zero = 0, off
    memcpy(v, &n, 4)
    if n <= 12:
        memset(v + 4, 0, 12)
        memcpy(v + 4, p, n)
        return
    off = <int32_t>(p - base)
    memcpy(v + 4, p, 4)
    memcpy(v + 8, &zero, 4)
    memcpy(v + 12, &off, 4)


cdef int _valid_first_null(GBuf *valid, Py_ssize_t *nulls, Py_ssize_t i, Py_ssize_t upto) except -1:
    """Element ``i`` of a column is null. Until a column's first null its bitmap is not written
    (Arrow: no bitmap when nothing is null); at the first one the bits of elements 0..i-1 are
    set, bit ``i`` cleared and room made for bits up to element ``upto`` (the batch's end)."""
    if nulls[0] == 0:
        _gbuf_reserve(valid, upto // 8 + 2 - valid.len)
        memset(valid.data, 0xFF, i >> 3)
        valid.data[i >> 3] = <char>((1 << (i & 7)) - 1)
        valid.len = (i >> 3) + 1
    nulls[0] += 1
    return 0


@cython.final
@cython.freelist(8)
@cython.no_gc    # holds only its block (a NativeBuffer): no cycle
cdef class _ColumnBuilder:
    cdef Py_ssize_t n
    cdef bint keys_on
    cdef bint values_on
    cdef bint headers_on
    cdef GBuf offsets, timestamps, ts_types, epochs
    cdef GBuf key_off, key_data, key_valid
    cdef GBuf val_off, val_data, val_valid
    cdef GBuf hdr_off, hk_off, hk_data, hv_off, hv_data, hv_valid
    cdef Py_ssize_t key_nulls, val_nulls, hv_nulls, nh
    cdef Py_ssize_t batch_end    # self.n after the records of the batch being added
    # views mode: keys and values as Arrow binary_view entries (16 bytes each) pointing into
    # variadic buffer 0 = the input (uncompressed records, no copy) or 1 = ``spill`` (records
    # of compressed batches, copied out of the decompressed area, which does not outlive it).
    cdef bint views
    cdef bint from_input
    cdef const uint8_t *input_base
    cdef const uint8_t *area_end    # the end of the records area of the batch being added
    cdef GBuf key_views, val_views, spill
    # The fixed-width columns of the records the input's headers announce, carved from one
    # allocation (start); a column that outgrows its part moves to an allocation of its own.
    cdef NativeBuffer block

    def __dealloc__(self):
        _gbuf_free(&self.offsets)
        _gbuf_free(&self.timestamps)
        _gbuf_free(&self.ts_types)
        _gbuf_free(&self.epochs)
        _gbuf_free(&self.key_off)
        _gbuf_free(&self.key_data)
        _gbuf_free(&self.key_valid)
        _gbuf_free(&self.val_off)
        _gbuf_free(&self.val_data)
        _gbuf_free(&self.val_valid)
        _gbuf_free(&self.hdr_off)
        _gbuf_free(&self.hk_off)
        _gbuf_free(&self.hk_data)
        _gbuf_free(&self.hv_off)
        _gbuf_free(&self.hv_data)
        _gbuf_free(&self.hv_valid)
        _gbuf_free(&self.key_views)
        _gbuf_free(&self.val_views)
        _gbuf_free(&self.spill)

    cdef int start(self, Py_ssize_t hint) except -1:
        """Room for ``hint`` records in every fixed-width column (parts of one allocation, see
        carve, instead of growing from nothing), and the leading 0 of every offsets column
        (Arrow: count + 1)."""
        cdef int32_t zero = 0
        if hint > 0:
            self.carve(hint)
        self.reserve(hint)
        if self.values_on and not self.views:
            _gbuf_reserve(&self.val_off, 4)
            _gbuf_put(&self.val_off, &zero, 4)
        if self.keys_on and not self.views:
            _gbuf_reserve(&self.key_off, 4)
            _gbuf_put(&self.key_off, &zero, 4)
        if self.headers_on:
            _gbuf_reserve(&self.hdr_off, 4)
            _gbuf_put(&self.hdr_off, &zero, 4)
            _gbuf_reserve(&self.hk_off, 4)
            _gbuf_put(&self.hk_off, &zero, 4)
            _gbuf_reserve(&self.hv_off, 4)
            _gbuf_put(&self.hv_off, &zero, 4)
        return 0

    cdef int carve(self, Py_ssize_t h) except -1:
        """The parts of one allocation for ``h`` records of the fixed-width columns that are
        on (with the leading 0 of the offsets columns): one malloc instead of one a column."""
        cdef GBuf *parts[8]
        cdef Py_ssize_t sizes[8]
        cdef Py_ssize_t total = 0
        cdef int k = 0, i
        cdef GBuf whole
        parts[0] = &self.offsets
        sizes[0] = 8 * h
        parts[1] = &self.timestamps
        sizes[1] = 8 * h
        parts[2] = &self.epochs
        sizes[2] = 4 * h
        parts[3] = &self.ts_types
        sizes[3] = h
        k = 4
        if self.values_on:
            parts[k] = &self.val_views if self.views else &self.val_off
            sizes[k] = 16 * h if self.views else 4 * (h + 1)
            k += 1
        if self.keys_on:
            parts[k] = &self.key_views if self.views else &self.key_off
            sizes[k] = 16 * h if self.views else 4 * (h + 1)
            k += 1
        if self.headers_on:
            parts[k] = &self.hdr_off
            sizes[k] = 4 * (h + 1)
            k += 1
        for i in range(k):
            total += (sizes[i] + 63) & ~(<Py_ssize_t>63)
        whole.data = <char *>malloc(total)
        if whole.data == NULL:
            raise MemoryError(f"cannot allocate {total} bytes of columns for {h} records")
        whole.len = total
        whole.shared = False
        self.block = _take(&whole, b"B", 1)
        total = 0
        for i in range(k):
            parts[i].data = self.block.data + total
            parts[i].cap = sizes[i]
            parts[i].shared = True
            total += (sizes[i] + 63) & ~(<Py_ssize_t>63)
        return 0

    cdef int reserve(self, Py_ssize_t count) except -1:
        """Room for ``count`` more records in every fixed-width column. A validity bitmap is
        only kept once its column has a null (:func:`_valid_first_null`)."""
        self.batch_end = self.n + count
        _gbuf_reserve(&self.offsets, 8 * count)
        _gbuf_reserve(&self.timestamps, 8 * count)
        _gbuf_reserve(&self.ts_types, count)
        _gbuf_reserve(&self.epochs, 4 * count)
        if self.values_on:
            _gbuf_reserve(&self.val_views if self.views else &self.val_off, (16 if self.views else 4) * count)
            if self.val_nulls:
                _gbuf_reserve(&self.val_valid, count // 8 + 2)
        if self.keys_on:
            _gbuf_reserve(&self.key_views if self.views else &self.key_off, (16 if self.views else 4) * count)
            if self.key_nulls:
                _gbuf_reserve(&self.key_valid, count // 8 + 2)
        if self.headers_on:
            _gbuf_reserve(&self.hdr_off, 4 * count)
        return 0

    cdef int reserve_data(self, Py_ssize_t area) except -1:
        """Room for the key and value bytes of a batch whose records take ``area`` bytes (they
        cannot take more), so that the records' copies never grow a buffer; and the
        SMALL_COPY bytes put_copy may write past the last of them."""
        if area > INT32_MAX:
            area = INT32_MAX
        area += SMALL_COPY
        if not self.views:
            if self.keys_on:
                _gbuf_reserve(&self.key_data, area)
            if self.values_on:
                _gbuf_reserve(&self.val_data, area)
        return 0

    cdef inline int _bin(self, GBuf *off, GBuf *data, GBuf *valid, Py_ssize_t *nulls,
                         Py_ssize_t i, Py_ssize_t upto, const uint8_t *p, int32_t n) except -1:
        cdef int32_t end
        if nulls[0]:
            _valid_bit(valid, i, n >= 0)
        if n >= 0:
            if n > 0:
                if data.len + n > INT32_MAX:
                    raise OverflowError("column data exceeds 2 GiB; decode fewer batches at once")
                _gbuf_reserve(data, n)
                _gbuf_put(data, p, n)
        else:
            _valid_first_null(valid, nulls, i, upto)
        end = <int32_t>data.len
        _gbuf_put(off, &end, 4)
        return 0

    cdef inline int _view(self, GBuf *views, GBuf *valid, Py_ssize_t *nulls, Py_ssize_t i,
                          const uint8_t *p, int32_t n) except -1:
        # Arrow binary_view entry: int32 length, then either the bytes inline (length <= 12,
        # zero-padded) or a 4-byte prefix, int32 buffer index and int32 offset in that buffer.
        cdef char *v = views.data + views.len
        cdef Py_ssize_t at
        cdef int32_t index, off
        if nulls[0]:
            _valid_bit(valid, i, n >= 0)
        memset(v, 0, 16)
        views.len += 16
        if n < 0:
            _valid_first_null(valid, nulls, i, self.batch_end)
            return 0
        memcpy(v, &n, 4)
        if n <= 12:
            memcpy(v + 4, p, n)
            return 0
        memcpy(v + 4, p, 4)
        if self.from_input:
            index = 0
            at = p - self.input_base
        else:
            index = 1
            at = self.spill.len
            if at + n > INT32_MAX:
                raise OverflowError("key and value bytes of compressed batches exceed 2 GiB; "
                                    "decode fewer batches at once")
            _gbuf_reserve(&self.spill, n)
            _gbuf_put(&self.spill, p, n)
        off = <int32_t>at
        memcpy(v + 8, &index, 4)
        memcpy(v + 12, &off, 4)
        return 0

    cdef inline bint plain_ok(self, Py_ssize_t area) noexcept:
        """Whether the records of a batch whose records take ``area`` bytes may go through
        add_plain: keys and values copied (not views), no header column, and room reserved
        (reserve, reserve_data) with the data columns staying under 2 GiB."""
        return (self.keys_on and self.values_on and not self.views and not self.headers_on
                and self.key_data.len + area <= INT32_MAX and self.val_data.len + area <= INT32_MAX)

    cdef inline void put_fixed(self, int64_t offset, int64_t ts, int8_t tt, int32_t epoch) noexcept:
        """The fixed-width columns of record ``self.n`` (room reserved)."""
        cdef Py_ssize_t i = self.n
        (<int64_t *>self.offsets.data)[i] = offset
        (<int64_t *>self.timestamps.data)[i] = ts
        (<int8_t *>self.ts_types.data)[i] = tt
        (<int32_t *>self.epochs.data)[i] = epoch
        self.offsets.len += 8
        self.timestamps.len += 8
        self.ts_types.len += 1
        self.epochs.len += 4

    cdef inline bint plain_views_ok(self) noexcept:
        """Whether add_plain_views may take a batch's records: keys and values as views of
        an uncompressed batch in the input (nothing to copy), no header column."""
        return (self.keys_on and self.values_on and self.views and not self.headers_on
                and self.from_input)

    cdef inline void add_plain_views(self, int64_t offset, int64_t ts, int8_t tt, int32_t epoch,
                                     const RecView *r) noexcept:
        """add() of a record with a key and a value, while neither column has had a null, in
        a batch plain_views_ok() accepted: the stores alone."""
        self.put_fixed(offset, ts, tt, epoch)
        self.put_view(&self.key_views, r.key, r.key_len)
        self.put_view(&self.val_views, r.value, r.value_len)
        self.n += 1

    cdef inline void put_view(self, GBuf *views, const uint8_t *p, int32_t n) noexcept:
        """The view entry of a non-null key or value in the input (room reserved)."""
        _input_view(views.data + views.len, p, n, self.input_base)
        views.len += 16

    cdef inline void put_copy(self, GBuf *off, GBuf *data, const uint8_t *p, int32_t n) noexcept:
        """The bytes of a non-null key or value and their end offset (room reserved, with the
        slack of reserve_data). Up to SMALL_COPY bytes (a typical key) are copied as a fixed
        SMALL_COPY, inlined, instead of a call to memcpy: the bytes after them, up to the end of
        the records area, are copied too and overwritten by the next copy or left past the
        column's end."""
        cdef int32_t end
        if n <= SMALL_COPY and self.area_end - p >= SMALL_COPY:
            memcpy(data.data + data.len, p, SMALL_COPY)
        else:
            memcpy(data.data + data.len, p, n)
        data.len += n
        end = <int32_t>data.len
        _gbuf_put(off, &end, 4)

    cdef inline void add_plain(self, int64_t offset, int64_t ts, int8_t tt, int32_t epoch,
                               const RecView *r) noexcept:
        """add() of a record with a key and a value, while neither column has had a null,
        in a batch plain_ok() accepted: the stores alone."""
        self.put_fixed(offset, ts, tt, epoch)
        self.put_copy(&self.key_off, &self.key_data, r.key, r.key_len)
        self.put_copy(&self.val_off, &self.val_data, r.value, r.value_len)
        self.n += 1

    cdef inline void add_plain_keyless(self, int64_t offset, int64_t ts, int8_t tt, int32_t epoch,
                                       const RecView *r) noexcept:
        """add() of a record with no key and a value, in a batch plain_ok() or plain_views_ok()
        accepted, while every key so far was null (so the key bitmap exists and has room) and
        no value was: records produced without keys, the common stream."""
        cdef int32_t end
        self.put_fixed(offset, ts, tt, epoch)
        _valid_bit(&self.key_valid, self.n, False)
        self.key_nulls += 1
        if self.views:
            memset(self.key_views.data + self.key_views.len, 0, 16)
            self.key_views.len += 16
            self.put_view(&self.val_views, r.value, r.value_len)
        else:
            end = <int32_t>self.key_data.len
            _gbuf_put(&self.key_off, &end, 4)
            self.put_copy(&self.val_off, &self.val_data, r.value, r.value_len)
        self.n += 1

    cdef int add(self, int64_t offset, int64_t ts, int ts_type, int32_t epoch,
                 const RecView *r) except -1:
        cdef int8_t tt = <int8_t>ts_type
        cdef Py_ssize_t i = self.n
        _gbuf_put(&self.offsets, &offset, 8)
        _gbuf_put(&self.timestamps, &ts, 8)
        _gbuf_put(&self.ts_types, &tt, 1)
        _gbuf_put(&self.epochs, &epoch, 4)
        if self.views:
            if self.keys_on:
                self._view(&self.key_views, &self.key_valid, &self.key_nulls, i, r.key, r.key_len)
            if self.values_on:
                self._view(&self.val_views, &self.val_valid, &self.val_nulls, i, r.value,
                           r.value_len)
        else:
            if self.keys_on:
                self._bin(&self.key_off, &self.key_data, &self.key_valid, &self.key_nulls, i,
                          self.batch_end, r.key, r.key_len)
            if self.values_on:
                self._bin(&self.val_off, &self.val_data, &self.val_valid, &self.val_nulls, i,
                          self.batch_end, r.value, r.value_len)
        if self.headers_on:
            self._headers(r)
        self.n += 1
        return 0

    cdef int _headers(self, const RecView *r) except -1:
        cdef const uint8_t *p = r.headers
        cdef int32_t hk, hv, _i, end
        for _i in range(r.header_count):
            p = kb_read_varint(p, r.end, &hk)
            _gbuf_reserve(&self.hk_off, 4)
            _gbuf_reserve(&self.hv_off, 4)
            if self.hv_nulls:
                _gbuf_reserve(&self.hv_valid, 2)
            if kb_utf8_valid(p, hk):
                _gbuf_reserve(&self.hk_data, hk)
                _gbuf_put(&self.hk_data, p, hk)
            else:
                # An Arrow string must be UTF-8: replace bad bytes as decode_records (and Kafka's
                # Utils.utf8) does.
                fixed = PyUnicode_DecodeUTF8(<const char *>p, hk, "replace").encode("utf-8")
                _gbuf_reserve(&self.hk_data, len(fixed))
                _gbuf_put(&self.hk_data, PyBytes_AS_STRING(fixed), len(fixed))
            end = <int32_t>self.hk_data.len
            _gbuf_put(&self.hk_off, &end, 4)
            p += hk
            p = kb_read_varint(p, r.end, &hv)
            self._bin(&self.hv_off, &self.hv_data, &self.hv_valid, &self.hv_nulls, self.nh,
                      self.nh + 1, p, hv)
            if hv > 0:
                p += hv
            self.nh += 1
        end = <int32_t>self.nh
        _gbuf_put(&self.hdr_off, &end, 4)
        return 0


@cython.freelist(16)
cdef class Columns:
    """Decoded records as Arrow-layout buffers (no Python object per record).

    ``offsets``/``timestamps`` are int64, ``timestamp_types`` int8 (-1 none, 0 CreateTime,
    1 LogAppendTime), ``leader_epochs`` int32. Keys and values are Arrow binary layouts:
    ``*_offsets`` int32 (count + 1 entries), ``*_data`` bytes, ``*_validity`` an LSB-first
    bitmap (None when nothing is null). Headers are an Arrow list<struct<key string, value
    binary>>: ``header_offsets`` (count + 1) index the header entries. Columns that were not
    asked for (``keys``/``values``/``headers`` False) have None buffers.

    Decoded with ``views=True``, keys and values are Arrow binary_view layouts instead:
    ``key_views``/``value_views`` hold 16-byte view entries (validity as above; ``*_offsets``
    and ``*_data`` are None) and ``view_buffers`` the variadic data buffers they point into:
    the input itself, then the bytes copied out of compressed batches.
    """
    cdef readonly Py_ssize_t count
    cdef readonly object offsets, timestamps, timestamp_types, leader_epochs
    cdef readonly object key_offsets, key_data, key_validity
    cdef readonly object value_offsets, value_data, value_validity
    cdef readonly object header_offsets, header_key_offsets, header_key_data
    cdef readonly object header_value_offsets, header_value_data, header_value_validity
    cdef readonly Py_ssize_t key_null_count, value_null_count, header_value_null_count
    cdef readonly Py_ssize_t header_count
    cdef readonly object key_views, value_views, view_buffers
    cdef const uint8_t *input_data    # views: the input, view_buffers[0]'s bytes (kept alive there)
    cdef Py_ssize_t input_size

    def __len__(self):
        return self.count

    def __repr__(self):
        return f"Columns(count={self.count})"

    def to_arrow(self):
        """A ``pyarrow.RecordBatch`` (columns: offset, timestamp, timestampType, leaderEpoch,
        key, value, headers; key/value/headers only when decoded). No copy of the buffers: the
        batch points into them, and keeps these columns alive until pyarrow lets them go."""
        import pyarrow as pa
        cdef bint key = self.key_views is not None or self.key_offsets is not None
        cdef bint value = self.value_views is not None or self.value_offsets is not None
        cdef bint headers = self.header_offsets is not None
        schema = _arrow_schema(key, self.key_views is not None, value, self.value_views is not None,
                               headers)
        cdef seglog_ac_block *blk = <seglog_ac_block *>calloc(1, sizeof(seglog_ac_block))
        if blk == NULL:
            raise MemoryError()
        cdef ArrowArray *top
        try:
            top = _ac_fill(blk, self, key, value, headers)
        except BaseException:
            free(blk)
            raise
        Py_INCREF(self)
        blk.owner = <PyObject *>self
        top.release = seglog_ac_release
        top.private_data = blk
        # From here pyarrow owns the tree: it releases it once the batch's buffers are gone, and
        # at once if the import fails.
        return pa.RecordBatch._import_from_c(<uintptr_t>top, schema)


#: Arrow schemas of to_arrow's batches, by which columns were decoded and how.
_ARROW_SCHEMAS = {}


cdef object _arrow_schema(bint key, bint key_views, bint value, bint value_views, bint headers):
    spec = (key, key_views, value, value_views, headers)
    schema = _ARROW_SCHEMAS.get(spec)
    if schema is not None:
        return schema
    import pyarrow as pa
    fields = [pa.field("offset", pa.int64()), pa.field("timestamp", pa.int64()),
              pa.field("timestampType", pa.int8()), pa.field("leaderEpoch", pa.int32())]
    if key:
        fields.append(pa.field("key", pa.binary_view() if key_views else pa.binary()))
    if value:
        fields.append(pa.field("value", pa.binary_view() if value_views else pa.binary()))
    if headers:
        fields.append(pa.field("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))))
    schema = _ARROW_SCHEMAS[spec] = pa.schema(fields)
    return schema


#: What an exported empty buffer points at (Arrow wants a pointer, suitably aligned).
cdef int64_t _AC_ZEROS[8]


cdef inline const void *_ac_buf(object buf):
    """The memory of a column's NativeBuffer: NULL for an absent one (a validity bitmap of a
    column without nulls), zeros for an empty one."""
    if buf is None:
        return NULL
    cdef NativeBuffer nb = <NativeBuffer>buf
    return <const void *>nb.data if nb.data != NULL else <const void *>_AC_ZEROS


cdef ArrowArray *_ac_new(seglog_ac_block *b, int64_t length, int64_t nulls, int nbuf,
                         int nchild) except NULL:
    cdef ArrowArray *a = seglog_ac_array(b, length, nulls, nbuf, nchild)
    if a == NULL:
        raise OverflowError("the Arrow export block is too small for these columns")
    return a


cdef ArrowArray *_ac_fixed(seglog_ac_block *b, int64_t n, object data) except NULL:
    cdef ArrowArray *a = _ac_new(b, n, 0, 2, 0)
    a.buffers[0] = NULL
    a.buffers[1] = _ac_buf(data)
    return a


cdef ArrowArray *_ac_binary(seglog_ac_block *b, Columns c, int64_t n, object views, object offsets,
                            object data, object validity, Py_ssize_t nulls) except NULL:
    """A key or value column: binary (validity, offsets, bytes) or binary_view (validity, views,
    the variadic buffers, their sizes)."""
    cdef ArrowArray *a
    cdef NativeBuffer spill
    if views is None:
        a = _ac_new(b, n, nulls, 3, 0)
        a.buffers[0] = _ac_buf(validity)
        a.buffers[1] = _ac_buf(offsets)
        a.buffers[2] = _ac_buf(data)
        return a
    if b.n_sizes + 2 > SEGLOG_AC_SIZES:
        raise OverflowError("the Arrow export block is too small for these columns")
    spill = <NativeBuffer>c.view_buffers[1]
    a = _ac_new(b, n, nulls, 5, 0)
    a.buffers[0] = _ac_buf(validity)
    a.buffers[1] = _ac_buf(views)
    a.buffers[2] = <const void *>c.input_data if c.input_data != NULL else <const void *>_AC_ZEROS
    a.buffers[3] = _ac_buf(spill)
    b.sizes[b.n_sizes] = c.input_size
    b.sizes[b.n_sizes + 1] = spill.size
    a.buffers[4] = &b.sizes[b.n_sizes]
    b.n_sizes += 2
    return a


cdef ArrowArray *_ac_fill(seglog_ac_block *b, Columns c, bint key, bint value,
                          bint headers) except NULL:
    """The ArrowArray tree of ``c`` as one struct array (a record batch), in ``b``."""
    cdef int64_t n = c.count
    cdef ArrowArray *top = _ac_new(b, n, 0, 1, 4 + key + value + headers)
    cdef ArrowArray *entries
    cdef ArrowArray *a
    top.buffers[0] = NULL
    seglog_ac_child(top, _ac_fixed(b, n, c.offsets))
    seglog_ac_child(top, _ac_fixed(b, n, c.timestamps))
    seglog_ac_child(top, _ac_fixed(b, n, c.timestamp_types))
    seglog_ac_child(top, _ac_fixed(b, n, c.leader_epochs))
    if key:
        seglog_ac_child(top, _ac_binary(b, c, n, c.key_views, c.key_offsets, c.key_data,
                                        c.key_validity, c.key_null_count))
    if value:
        seglog_ac_child(top, _ac_binary(b, c, n, c.value_views, c.value_offsets, c.value_data,
                                        c.value_validity, c.value_null_count))
    if headers:
        # list<struct<key: string, value: binary>>: offsets into the header entries.
        a = _ac_new(b, n, 0, 2, 1)
        a.buffers[0] = NULL
        a.buffers[1] = _ac_buf(c.header_offsets)
        seglog_ac_child(top, a)
        entries = _ac_new(b, c.header_count, 0, 1, 2)
        entries.buffers[0] = NULL
        seglog_ac_child(a, entries)
        a = _ac_new(b, c.header_count, 0, 3, 0)
        a.buffers[0] = NULL
        a.buffers[1] = _ac_buf(c.header_key_offsets)
        a.buffers[2] = _ac_buf(c.header_key_data)
        seglog_ac_child(entries, a)
        a = _ac_new(b, c.header_count, c.header_value_null_count, 3, 0)
        a.buffers[0] = _ac_buf(c.header_value_validity)
        a.buffers[1] = _ac_buf(c.header_value_offsets)
        a.buffers[2] = _ac_buf(c.header_value_data)
        seglog_ac_child(entries, a)
    return top


cdef Py_ssize_t _records_hint(const uint8_t *buf, Py_ssize_t end) noexcept:
    """About how many records the v2 batches in ``buf`` hold, from their headers (nothing
    checked: only a size to allocate columns for; each batch's count is capped by what its
    bytes could hold uncompressed, so a corrupt count cannot ask for much)."""
    cdef Py_ssize_t pos = 0, total = 0, room
    cdef int64_t length
    cdef int32_t count
    while end - pos >= V2_HEADER:
        length = kb_load_i32(buf + pos + 8)
        if length < V2_HEADER - LOG_OVERHEAD or length > end - pos - LOG_OVERHEAD:
            break
        if buf[pos + 16] == 2:
            count = kb_load_i32(buf + pos + 57)
            room = (length + LOG_OVERHEAD - V2_HEADER) // MIN_RECORD_SIZE
            if count > 0:
                total += count if count < room else room
        pos += length + LOG_OVERHEAD
    return total


def decode_columns(object buf, *, bint keys=True, bint headers=True,
                   bint verify_crc=True, bint include_control=False, bint allow_truncated=False,
                   min_offset=None, max_offset=None,
                   Py_ssize_t max_decompressed=DEFAULT_MAX_DECOMPRESSED, bint values=True,
                   aborted=None, bint views=False):
    """Decode every record in ``buf`` into :class:`Columns` with no per-record Python objects.

    ``keys=False`` / ``values=False`` / ``headers=False`` skip copying those columns (their
    buffers are None); records are still parsed and checked. ``aborted`` drops the batches of
    aborted transactions (see :func:`decode_records`).

    ``views=True`` emits keys and values as Arrow binary_view columns that point into ``buf``
    instead of copying them (only records of compressed batches are copied): the result keeps
    ``buf`` alive and exported, so it must not be changed while the columns are in use.
    ``buf`` is then limited to 2 GiB (view offsets are int32).
    """
    # bytes (what a stream of batches is) without the memoryview of other buffers; the input
    # (``owner``) is the first data buffer of views.
    cdef const uint8_t[::1] mv_
    cdef object owner
    cdef const uint8_t *data
    cdef Py_ssize_t size
    if PyBytes_CheckExact(buf):
        owner = buf
        data = <const uint8_t *>PyBytes_AS_STRING(buf)
        size = PyBytes_GET_SIZE(buf)
    else:
        mv_ = _bytes_arg(buf, "buf")
        owner = <object>mv_
        size = mv_.shape[0]
        data = &mv_[0] if size else _EMPTY
    if views and size > INT32_MAX:
        raise ValueError(f"decode_columns(views=True) takes at most {INT32_MAX} bytes (Arrow view "
                         f"offsets are int32), got {size}")
    cdef _Decoder d = _decoder_at(data, size, verify_crc, include_control, allow_truncated,
                                  min_offset, max_offset, max_decompressed, aborted)
    cdef _ColumnBuilder b = _ColumnBuilder.__new__(_ColumnBuilder)
    b.keys_on = keys
    b.values_on = values
    b.headers_on = headers
    b.views = views
    b.from_input = True
    b.input_base = d.buf
    b.start(_records_hint(d.buf, d.end))
    if not views:
        # Uncompressed values can never exceed the input: one allocation up front avoids the
        # copies of repeated growth (pages are only touched as they are written).
        _gbuf_reserve(&b.val_data, min(size, 1 << 30) + SMALL_COPY)
    d.cols = b
    _walk(d, d.buf, 0, d.end)
    cdef Columns c = Columns.__new__(Columns)
    c.count = b.n
    c.offsets = _take(&b.offsets, b"q", 8, b.block)
    c.timestamps = _take(&b.timestamps, b"q", 8, b.block)
    c.timestamp_types = _take(&b.ts_types, b"b", 1, b.block)
    c.leader_epochs = _take(&b.epochs, b"i", 4, b.block)
    if views:
        c.view_buffers = (owner, _take(&b.spill, b"B", 1, b.block))
        c.input_data = data
        c.input_size = size
        if values:
            c.value_views = _take(&b.val_views, b"16s", 16, b.block)
            c.value_validity = _take(&b.val_valid, b"B", 1, b.block) if b.val_nulls else None
            c.value_null_count = b.val_nulls
        if keys:
            c.key_views = _take(&b.key_views, b"16s", 16, b.block)
            c.key_validity = _take(&b.key_valid, b"B", 1, b.block) if b.key_nulls else None
            c.key_null_count = b.key_nulls
    else:
        if values:
            c.value_offsets = _take(&b.val_off, b"i", 4, b.block)
            c.value_data = _take(&b.val_data, b"B", 1, b.block)
            c.value_validity = _take(&b.val_valid, b"B", 1, b.block) if b.val_nulls else None
            c.value_null_count = b.val_nulls
        if keys:
            c.key_offsets = _take(&b.key_off, b"i", 4, b.block)
            c.key_data = _take(&b.key_data, b"B", 1, b.block)
            c.key_validity = _take(&b.key_valid, b"B", 1, b.block) if b.key_nulls else None
            c.key_null_count = b.key_nulls
    if headers:
        c.header_offsets = _take(&b.hdr_off, b"i", 4, b.block)
        c.header_key_offsets = _take(&b.hk_off, b"i", 4, b.block)
        c.header_key_data = _take(&b.hk_data, b"B", 1, b.block)
        c.header_value_offsets = _take(&b.hv_off, b"i", 4, b.block)
        c.header_value_data = _take(&b.hv_data, b"B", 1, b.block)
        c.header_value_validity = _take(&b.hv_valid, b"B", 1, b.block) if b.hv_nulls else None
        c.header_value_null_count = b.hv_nulls
        c.header_count = b.nh
    return c


include "tssearch.pxi"


def first_at_or_after(object buf, int64_t timestamp, *, min_offset=None,
                      max_offset=None, bint verify_crc=False,
                      Py_ssize_t max_decompressed=DEFAULT_MAX_DECOMPRESSED):
    """``(offset, timestamp)`` of the first data record in ``buf`` whose timestamp is
    >= ``timestamp`` (offsets in [min_offset, max_offset)), or None: the record-level step of
    Kafka's ``LogSegment.findOffsetByTimestamp``, with no Python object per record. Like Kafka's,
    it does not check CRCs unless ``verify_crc`` (the batches were checked when appended or
    recovered; the reader checks them again).
    """
    cdef const uint8_t[::1] mv_ = _bytes_arg(buf, "buf")
    cdef int64_t lo = INT64_MIN if min_offset is None else <int64_t>min_offset
    cdef int64_t hi = INT64_MAX if max_offset is None else <int64_t>max_offset
    cdef bint bounded = max_offset is not None
    cdef int64_t found_off = 0, found_ts = 0
    cdef int st
    if not verify_crc and mv_.shape[0] > 0:
        with nogil:
            st = _first_uncompressed(&mv_[0], mv_.shape[0], timestamp, lo, hi, bounded,
                                     &found_off, &found_ts)
        if st == 1:
            return found_off, found_ts
        if st == 0:
            return None
    cdef _Decoder d = _decoder(mv_, verify_crc, False, False, min_offset, max_offset,
                               max_decompressed, None)
    cdef _ColumnBuilder b = _ColumnBuilder.__new__(_ColumnBuilder)
    b.start(_records_hint(d.buf, d.end))
    d.cols = b
    _walk(d, d.buf, 0, d.end)
    cdef const int64_t *ts = <const int64_t *>b.timestamps.data
    cdef const int64_t *offs = <const int64_t *>b.offsets.data
    cdef Py_ssize_t i
    for i in range(b.n):
        if ts[i] >= timestamp:
            return offs[i], ts[i]
    return None
