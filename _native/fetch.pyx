"""The fetch batching loop (Kafka's ``LocalLog.read`` + ``ReplicaManager.readFromLog`` limits).

From a start offset, collect whole batches up to ``max_bytes`` — always at least one batch when
``min_one_batch`` (a batch larger than the limit still goes out whole, so a consumer never
stalls) — across segment boundaries, never past an upper bound offset: the high watermark for
consumers, the log end offset for followers. For several partitions at once, one total byte
limit is shared and only the first partition that returns data may exceed it (as Kafka does).

Results are zero copy: ``FetchSlice`` objects naming the segment, file position and length,
whose ``view()`` is a memoryview of the mapped log and whose ``fd``/``position``/``length``
suit ``os.sendfile``. The step in each segment (offset index, header walks, byte limit) is one
C call into ``segment.pyx`` (``segment.pxd``). ``LogCore`` is ``Log``'s native base: its
``read`` is the lock, the loop and its ``LogReadResult`` in one call.
"""

cimport cython
from libc.stdint cimport int64_t

from seglog._native.segment cimport (
    segment_base_offset,
    segment_fetch_span,
    segment_next_offset,
    segments_first_at_or_after,
)


# FetchSlice and LogReadResult stay out of the garbage collector (``no_gc``): they refer only to
# a segment and to each other, and nothing they refer to can refer back, so they are never in a
# cycle. Tracked, a loop of random reads that keeps its results (1,024 ``Log.read(offset, 1)``
# in a list) made the collector run over the whole heap again and again: 1.7 µs a read in a
# process holding a 10 M-record benchmark log, 0.55 µs with the collector off.
@cython.no_gc
@cython.freelist(16)
cdef class FetchSlice:
    """Whole batches ``[position, position + length)`` of one segment's ``.log``."""
    cdef readonly object segment
    cdef readonly Py_ssize_t position
    cdef readonly Py_ssize_t length

    def view(self):
        return self.segment.view(self.position, self.length)

    @property
    def path(self):
        return self.segment.log_path

    @property
    def fd(self):
        """The segment's ``.log`` descriptor, valid until the segment closes it (an inactive one
        may be closed by the open-segment cache): to keep one, use :meth:`dup_fd`."""
        return self.segment.fileno()

    def dup_fd(self):
        """A new descriptor of the segment's ``.log`` (the caller closes it), for ``sendfile``
        later whatever happens to the segment meanwhile."""
        return self.segment.dup_fileno()

    def __repr__(self):
        return f"FetchSlice({self.segment.log_path!r}, position={self.position}, length={self.length})"


cdef Py_ssize_t _floor_segment(list segments, int64_t offset):
    """Index of the last segment whose base offset is <= offset (-1 if none)."""
    cdef Py_ssize_t lo = 0, hi = len(segments), mid
    while lo < hi:
        mid = (lo + hi) // 2
        if segment_base_offset(segments[mid]) <= offset:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


cdef list _fetch(list segments, int64_t start_offset, Py_ssize_t max_bytes, int64_t upper_bound,
                 bint min_one_batch):
    if max_bytes < 0:
        raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
    cdef list out = []
    if start_offset >= upper_bound or not segments:
        return out
    cdef Py_ssize_t i = _floor_segment(segments, start_offset)
    if i < 0:
        i = 0
    cdef Py_ssize_t remaining = max_bytes, start, end
    cdef int64_t offset = start_offset
    cdef bint stop
    cdef FetchSlice sl
    while i < len(segments) and remaining >= 0:
        seg = segments[i]
        if segment_base_offset(seg) >= upper_bound:
            break
        # One C call per segment: the index lookup, the header walks and the byte limit.
        start = segment_fetch_span(seg, offset, remaining, upper_bound, min_one_batch and not out, &end, &stop)
        if start >= 0:
            if end > start:
                sl = FetchSlice.__new__(FetchSlice)
                sl.segment = seg
                sl.position = start
                sl.length = end - start
                out.append(sl)
                remaining -= sl.length
            if stop:
                break  # stopped by the byte limit or the upper bound
        i += 1
        if i < len(segments):
            offset = max(offset, segment_base_offset(segments[i]))
    return out


def fetch_partition(list segments, int64_t start_offset, Py_ssize_t max_bytes, int64_t upper_bound,
                    bint min_one_batch=True):
    """Slices of whole batches holding offsets from ``start_offset`` up to (not including)
    ``upper_bound``, at most ``max_bytes`` in total (see module docs). ``segments`` is the
    log's segment list in base-offset order. Returns a list of FetchSlice (empty when there is
    nothing to read); the caller checks the start offset against the log's range."""
    return _fetch(segments, start_offset, max_bytes, upper_bound, min_one_batch)


@cython.no_gc
@cython.freelist(16)
cdef class LogReadResult:
    """Whole batches from a log read, as zero-copy slices of the segment files, with the log's
    offsets at the time of the read. Made by ``Log.read`` (:class:`LogCore`); read-only."""
    cdef readonly tuple slices
    cdef readonly int64_t start_offset
    cdef readonly int64_t high_watermark
    cdef readonly int64_t log_start_offset
    cdef readonly int64_t log_end_offset

    def __init__(self, tuple slices, int64_t start_offset, int64_t high_watermark, int64_t log_start_offset,
                 int64_t log_end_offset):
        self.slices = slices
        self.start_offset = start_offset
        self.high_watermark = high_watermark
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset

    @property
    def size(self):
        cdef Py_ssize_t n = 0
        for s in self.slices:
            n += (<FetchSlice>s).length
        return n

    def views(self):
        return [s.view() for s in self.slices]

    def to_bytes(self):
        return b"".join([s.view() for s in self.slices])

    def __bool__(self):
        return len(self.slices) > 0

    cdef tuple _key(self):
        return (self.slices, self.start_offset, self.high_watermark, self.log_start_offset, self.log_end_offset)

    def __eq__(self, other):
        if type(other) is not LogReadResult:
            return NotImplemented
        return self._key() == (<LogReadResult>other)._key()

    __hash__ = None

    def __repr__(self):
        return (f"LogReadResult(slices={self.slices!r}, start_offset={self.start_offset}, "
                f"high_watermark={self.high_watermark}, log_start_offset={self.log_start_offset}, "
                f"log_end_offset={self.log_end_offset})")


# ``LogCore.read``'s part under the lock: the log end offset (the last segment's next offset), the
# range check, the bound (``upper_bound`` is ``"high_watermark"``, ``"log_end"`` or an offset,
# capped at the log end), the fetch loop and its result; None when ``offset`` is outside
# ``[log_start_offset, log end]`` (the caller raises).
cdef LogReadResult _read_log(list segments, int64_t offset, Py_ssize_t max_bytes, object upper_bound,
                             bint min_one_batch, int64_t high_watermark, int64_t log_start_offset):
    cdef int64_t leo = segment_next_offset(segments[len(segments) - 1]) if segments else 0
    cdef int64_t bound
    if offset < log_start_offset or offset > leo:
        return None
    if upper_bound == "high_watermark":
        bound = high_watermark
    elif upper_bound == "log_end":
        bound = leo
    elif isinstance(upper_bound, int):
        bound = leo if upper_bound >= leo else upper_bound
    else:
        raise ValueError(f"upper_bound must be 'high_watermark', 'log_end' or an offset, got {upper_bound!r}")
    cdef LogReadResult res = LogReadResult.__new__(LogReadResult)
    cdef list found = _fetch(segments, offset, max_bytes, bound, min_one_batch)
    # A one-batch read (the usual random read) makes its tuple without converting the list.
    res.slices = (found[0],) if len(found) == 1 else tuple(found)
    res.start_offset = offset
    res.high_watermark = high_watermark
    res.log_start_offset = log_start_offset
    res.log_end_offset = leo
    return res


cdef class LogCore:
    """The base of ``seglog.storage.log.Log``: the fields its reads use (the segment layer's
    list, the log's lock, its high watermark and start offset) in native slots, and the two
    lookups that are a user's hot path, ``read`` and ``offset_for_timestamp``, as native methods:
    a Python method around the native search cost about as much again as the search (argument
    checks, the lock's calls, attribute reads). Arguments that are not plain ``int`` and
    ``str``, and every failure, go to the subclass's Python (``_read_checked``,
    ``_read_out_of_range``, ``_offset_for_timestamp_special``), which checks them and raises
    the engine's errors."""
    cdef public list _segments
    cdef public object _lock
    cdef public object _high_watermark
    cdef public object log_start_offset

    def read(self, offset, max_bytes=1048576, *, upper_bound="high_watermark", min_one_batch=True):
        """Whole batches holding ``offset`` onwards, at most ``max_bytes`` (but at least one
        batch when ``min_one_batch``), never past the upper bound: ``"high_watermark"``
        (consumers), ``"log_end"`` (followers) or an explicit offset. Raises
        ``OffsetOutOfRangeError`` outside [log start, log end]."""
        if type(offset) is not int or type(max_bytes) is not int or (
                type(upper_bound) is not str and type(upper_bound) is not int):
            return self._read_checked(offset, max_bytes, upper_bound, min_one_batch)
        cdef bint one = min_one_batch
        cdef LogReadResult res
        lock = self._lock
        lock.acquire()
        try:
            res = _read_log(self._segments, offset, max_bytes, upper_bound, one, self._high_watermark,
                            self.log_start_offset)
            if res is None:
                self._read_out_of_range(offset)
            return res
        finally:
            lock.release()

    def offset_for_timestamp(self, timestamp, *, upper_bound=None):
        """Kafka's ListOffsets: the first offset whose timestamp is >= ``timestamp``, with that
        record's timestamp; ``-2`` earliest, ``-1`` latest (the high watermark), ``-3`` the
        record with the largest timestamp. None when no record qualifies."""
        if type(timestamp) is not int or timestamp < 0 or (upper_bound is not None and type(upper_bound) is not int):
            return self._offset_for_timestamp_special(timestamp, upper_bound)
        lock = self._lock
        lock.acquire()
        try:
            return segments_first_at_or_after(
                self._segments, timestamp, self.log_start_offset,
                self._high_watermark if upper_bound is None else upper_bound)
        finally:
            lock.release()


def fetch_many(list requests, Py_ssize_t max_total_bytes):
    """Several partitions under one byte limit. ``requests`` holds tuples
    ``(segments, start_offset, partition_max_bytes, upper_bound)``; returns one list of
    FetchSlice per request, in order. Only the first partition that returns data may exceed the
    limits (``min_one_batch``); later ones get what is left."""
    cdef Py_ssize_t left = max_total_bytes, got
    cdef bint min_one = True
    cdef list results = []
    for segments, start_offset, partition_max, upper_bound in requests:
        limit = min(partition_max, left) if left > 0 else 0
        if limit <= 0 and not min_one:
            results.append([])
            continue
        slices = _fetch(segments, start_offset, limit, upper_bound, min_one)
        got = sum((<FetchSlice>s).length for s in slices)
        if got:
            min_one = False
        left -= got
        results.append(slices)
    return results
