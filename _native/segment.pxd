# The fetch loop's per-segment step (segment.pyx) for fetch.pyx: plain C calls per segment of a
# read instead of Python-level method calls, attribute reads and a tuple (about half the time of
# a one-batch random read).
#
# Cimported as ``seglog._native.segment`` (setup.py lays out the include path for that name).

from libc.stdint cimport int64_t


# ``seg.base_offset`` (a TypeError unless ``seg`` is a Segment).
cdef int64_t segment_base_offset(object seg) except? -1

# ``seg.next_offset``.
cdef int64_t segment_next_offset(object seg) except? -1

# ``seg.fetch_span(offset, max_bytes, upper_bound, min_one_batch)``: the start position, or -1
# when no batch of the segment holds ``offset`` or a later one; ``end[0]`` and ``stop[0]`` get
# the rest of the span.
cdef Py_ssize_t segment_fetch_span(object seg, int64_t offset, Py_ssize_t max_bytes, int64_t upper_bound,
                                   bint min_one_batch, Py_ssize_t *end, bint *stop) except -2

# ``segments_first_at_or_after(segments, timestamp, start, bound)``: the log-level ListOffsets
# search (``Log.offset_for_timestamp``'s native part).
cpdef object segments_first_at_or_after(list segments, int64_t timestamp, int64_t start, int64_t bound)
