# A growable malloc'd buffer's one growth rule, for every native module that appends to memory
# it owns (the record batch builder, the decoder's column buffers): ``from growbuf cimport ...``.
# No run-time import.

from libc.stdlib cimport realloc


cdef inline void *grow_buffer(void *data, Py_ssize_t *cap, Py_ssize_t need, str what) except NULL:
    """``data`` reallocated to hold at least ``need`` bytes: ``cap`` doubles (from 256 when
    nothing is allocated yet), or becomes ``need`` if that is more. On failure ``data`` is left
    as it was and MemoryError names ``what`` and the size."""
    cdef Py_ssize_t new_cap = cap[0] * 2 if cap[0] else 256
    cdef void *p
    if new_cap < need:
        new_cap = need
    p = realloc(data, new_cap)
    if p == NULL:
        raise MemoryError(f"cannot grow {what} to {new_cap} bytes")
    cap[0] = new_cap
    return p
