# The record batch builder's C-level API (builder.pyx), for the native modules that build on it:
# the producer's batch (accumulator.pyx) subclasses BatchBuilder and appends through
# append_record without a Python call per record.
#
# Cimported as ``seglog._native.builder``; setup.py lays out the include path so that Cython
# finds this file under that name.

from libc.stdint cimport int32_t, int64_t, uint8_t


cdef class BatchBuilder:
    cdef uint8_t *buf                   # the batch as it will be written: header, then records
    cdef Py_ssize_t length              # bytes used, header included
    cdef Py_ssize_t cap                 # bytes allocated
    cdef readonly Py_ssize_t limit      # size past which a room-checking append refuses a record
    cdef readonly Py_ssize_t max_record  # largest batch of one record (-1: no limit)
    cdef readonly int32_t count
    cdef readonly int64_t base_timestamp
    cdef bint has_base_ts
    cdef readonly int64_t max_timestamp
    cdef int32_t last_delta
    cdef bint explicit_deltas           # appended with append_with_delta (the cleaner)
    cdef readonly bint sealed           # built or discarded: no more appends
    cdef Py_ssize_t exports             # buffer views handed out and not yet released

    # The constructor's work (limit, max_record, base_timestamp or None, initial_capacity -1
    # for the default).
    cdef int init_buffer(self, Py_ssize_t limit, Py_ssize_t max_record, object base_timestamp,
                         Py_ssize_t initial_capacity) except -1
    cdef int _reserve(self, Py_ssize_t extra) except -1
    # Encode one record at offset delta ``delta``; returns 1, or 0 when ``check_room`` and the
    # (non-empty) batch would grow past ``limit``. Stores the key and value sizes (-1 for None).
    cdef int append_record(self, int32_t delta, int64_t timestamp, object key, object value,
                           object headers, bint check_room, int32_t *klen_out,
                           int32_t *vlen_out) except -1
