"""The fetch batching loop (Kafka's ``LocalLog.read`` + ``ReplicaManager.readFromLog`` limits).

From a start offset, collect whole batches up to ``max_bytes`` — always at least one batch when
``min_one_batch`` (a batch larger than the limit still goes out whole, so a consumer never
stalls) — across segment boundaries, never past an upper bound offset: the high watermark for
consumers, the log end offset for followers. For several partitions at once, one total byte
limit is shared and only the first partition that returns data may exceed it (as Kafka does).

Results are zero copy: ``FetchSlice`` objects naming the segment, file position and length,
whose ``view()`` is a memoryview of the mapped log and whose ``fd``/``position``/``length``
suit ``os.sendfile``. The per-batch header walk runs in C inside ``Segment.batch_end``.
"""

from libc.stdint cimport int64_t


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
        if segments[mid].base_offset <= offset:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


def fetch_partition(list segments, int64_t start_offset, Py_ssize_t max_bytes, int64_t upper_bound,
                    bint min_one_batch=True):
    """Slices of whole batches holding offsets from ``start_offset`` up to (not including)
    ``upper_bound``, at most ``max_bytes`` in total (see module docs). ``segments`` is the
    log's segment list in base-offset order. Returns a list of FetchSlice (empty when there is
    nothing to read); the caller checks the start offset against the log's range."""
    if max_bytes < 0:
        raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
    cdef list out = []
    if start_offset >= upper_bound or not segments:
        return out
    cdef Py_ssize_t i = _floor_segment(segments, start_offset)
    if i < 0:
        i = 0
    cdef Py_ssize_t remaining = max_bytes, start, end, max_position
    cdef int64_t offset = start_offset
    cdef FetchSlice sl
    while i < len(segments) and remaining >= 0:
        seg = segments[i]
        if seg.base_offset >= upper_bound:
            break
        found = seg.translate_offset(offset)
        if found is not None:
            start = found.position
            if upper_bound < seg.next_offset:
                bound = seg.translate_offset(upper_bound)
                max_position = bound.position if bound is not None else seg.size
            else:
                max_position = seg.size
            end = seg.batch_end(start, remaining, max_position, min_one_batch and not out)
            if end > start:
                sl = FetchSlice.__new__(FetchSlice)
                sl.segment = seg
                sl.position = start
                sl.length = end - start
                out.append(sl)
                remaining -= sl.length
            if end < max_position or max_position < seg.size:
                break  # stopped by the byte limit or the upper bound
        i += 1
        if i < len(segments):
            offset = max(offset, segments[i].base_offset)
    return out


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
        slices = fetch_partition(segments, start_offset, limit, upper_bound, min_one)
        got = sum((<FetchSlice>s).length for s in slices)
        if got:
            min_one = False
        left -= got
        results.append(slices)
    return results
