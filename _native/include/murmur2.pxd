# Declarations of murmur2.h (Kafka's murmur2 and its default partitioner), once for every native
# module: ``from murmur2 cimport ...``. Extern-only: cimporting it adds no run-time import.

from libc.stdint cimport int32_t, uint8_t, uint32_t


cdef extern from "murmur2.h" nogil:
    int32_t seglog_murmur2(const uint8_t *p, size_t n)
    int32_t seglog_partition_for_key(const uint8_t *p, size_t n, uint32_t num_partitions)
