# Declarations of arrow_c.h: a record batch's ArrowArray tree over buffers seglog owns, handed to
# pyarrow through the Arrow C data interface (``from arrow_c cimport ...``).

from cpython.ref cimport PyObject
from libc.stdint cimport int64_t


cdef extern from "arrow_c.h":
    struct ArrowArray:
        int64_t length
        int64_t null_count
        int64_t offset
        int64_t n_buffers
        int64_t n_children
        const void **buffers
        ArrowArray **children
        ArrowArray *dictionary
        void (*release)(ArrowArray *) noexcept
        void *private_data

    ctypedef struct seglog_ac_block:
        ArrowArray arrays[1]
        int64_t sizes[8]
        int n_sizes
        PyObject *owner

    int SEGLOG_AC_SIZES
    void seglog_ac_release(ArrowArray *a) noexcept
    ArrowArray *seglog_ac_array(seglog_ac_block *b, int64_t length, int64_t null_count,
                                int n_buffers, int n_children)
    void seglog_ac_child(ArrowArray *parent, ArrowArray *child)
