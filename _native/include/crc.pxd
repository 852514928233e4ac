# Declarations of the checksums (crc32c.h: CRC-32C, RecordBatch v2; crc32.h: CRC-32, legacy
# messages) and CRC-32C's GIL policy, once for every native module: ``from crc cimport ...``.
# No run-time import: the functions are inlined from the headers.

from libc.stdint cimport uint8_t, uint32_t


cdef extern from "crc32c.h" nogil:
    uint32_t seglog_crc32c(uint32_t crc, const uint8_t *p, size_t n)
    uint32_t seglog_crc32c_sw(uint32_t crc, const uint8_t *p, size_t n)    # the portable table path
    const char *seglog_crc32c_implementation()

cdef extern from "crc32.h" nogil:
    uint32_t seglog_crc32(uint32_t crc, const uint8_t *p, size_t n)

# The GIL is released from CRC32C_GIL_MIN bytes on (32 KiB, measured: crc32c.pyx's module
# docs, "GIL policy").
cdef enum:
    CRC32C_GIL_MIN = 32768


cdef inline uint32_t crc32c_gil_aware(uint32_t crc, const uint8_t *p, size_t n) noexcept:
    if n >= CRC32C_GIL_MIN:
        with nogil:
            crc = seglog_crc32c(crc, p, n)
        return crc
    return seglog_crc32c(crc, p, n)
