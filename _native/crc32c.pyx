"""CRC-32C (Castagnoli) as used by Kafka RecordBatch v2 (``Crc32C`` in kafka-clients)."""
from libc.stdint cimport uint8_t, uint32_t

cdef extern from "crc32c.h" nogil:
    uint32_t seglog_crc32c(uint32_t crc, const uint8_t *p, size_t n)


def crc32c(const uint8_t[::1] data, uint32_t crc=0):
    """Return the CRC-32C of ``data``, continuing from ``crc``."""
    cdef size_t n = data.shape[0]
    if n == 0:
        return crc
    return seglog_crc32c(crc, &data[0], n)
