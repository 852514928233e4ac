# CRC-32C's GIL policy, one definition for every module that checksums: the GIL is released
# from CRC32C_GIL_MIN bytes on (32 KiB, measured: crc32c.pyx's module docs, "GIL policy").
# The including module declares ``seglog_crc32c`` from "crc32c.h".

cdef enum:
    CRC32C_GIL_MIN = 32768


cdef inline uint32_t crc32c_gil_aware(uint32_t crc, const uint8_t *p, size_t n) noexcept:
    if n >= CRC32C_GIL_MIN:
        with nogil:
            crc = seglog_crc32c(crc, p, n)
        return crc
    return seglog_crc32c(crc, p, n)
