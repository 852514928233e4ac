# The index searches (index.pyx) for segment.pyx: C calls instead of Python-level ``lookup``
# calls and their tuples, on every random read and timestamp search.
#
# Cimported as ``seglog._native.index`` (setup.py lays out the include path for that name).

from libc.stdint cimport int64_t


# ``OffsetIndex.lookup(target_offset)[1]``: the position of the largest entry at or below the
# offset (0 if none); another object (a stand-in for a missing file) answers through its ``lookup``.
# ``next_position``, when given, gets the position of the entry after that one (-1 if none).
cdef int64_t offset_index_position(object index, int64_t target_offset, int64_t *next_position=*) except -1

# ``TimeIndex.lookup(target_timestamp)[1]``: the offset of the largest entry at or below the
# timestamp (the base offset if none); another object answers through its ``lookup``.
cdef int64_t time_index_offset(object index, int64_t target_timestamp) except -1

# ``index.is_full`` (no Python property call for an OffsetIndex or TimeIndex).
cdef bint index_is_full(object index) except -1
