# Read-only one-dimensional buffer exports, shared by every _native class that hands out views
# of memory it owns or maps. Included textually rather than cimported: a function a .pxd shares
# must be inline, and _export_readonly raises, so it stays out of line in each includer. Each
# export gets its own shape/strides block, kept in ``view.internal``: an
# exporter's length may change after an export (a segment grows), an exported shape must not.
#
# __getbuffer__:      _export_readonly(view, ptr, nbytes, itemsize, fmt, flags); view.obj = self
# __releasebuffer__:  _release_export(view)

from cpython.buffer cimport PyBUF_FORMAT, PyBUF_ND, PyBUF_STRIDES
from libc.stdlib cimport malloc, free


cdef int _export_readonly(Py_buffer *view, const void *buf, Py_ssize_t nbytes, Py_ssize_t itemsize,
                          char *fmt, int flags) except -1:
    cdef Py_ssize_t *dims = <Py_ssize_t *>malloc(2 * sizeof(Py_ssize_t))
    if dims == NULL:
        raise MemoryError()
    dims[0] = nbytes // itemsize
    dims[1] = itemsize
    view.buf = <void *>buf
    view.len = nbytes
    view.readonly = 1
    view.itemsize = itemsize
    view.format = fmt if (flags & PyBUF_FORMAT) else NULL
    view.ndim = 1
    view.shape = dims if (flags & PyBUF_ND) == PyBUF_ND else NULL
    view.strides = dims + 1 if (flags & PyBUF_STRIDES) == PyBUF_STRIDES else NULL
    view.suboffsets = NULL
    view.internal = dims
    return 0


cdef inline void _release_export(Py_buffer *view) noexcept:
    free(view.internal)
    view.internal = NULL
