# Declarations of kbytes.h (big-endian loads and stores, Kafka's zigzag varints, wrapping int64
# arithmetic, UTF-8 validation), once for every native module: ``from kbytes cimport ...``.
# Extern-only: cimporting it adds no run-time import.

from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t


cdef extern from "kbytes.h" nogil:
    uint16_t kb_load_u16(const uint8_t *p)
    uint32_t kb_load_u32(const uint8_t *p)
    uint64_t kb_load_u64(const uint8_t *p)
    int16_t kb_load_i16(const uint8_t *p)
    int32_t kb_load_i32(const uint8_t *p)
    int64_t kb_load_i64(const uint8_t *p)
    void kb_store_u16(uint8_t *p, uint16_t v)
    void kb_store_u32(uint8_t *p, uint32_t v)
    void kb_store_u64(uint8_t *p, uint64_t v)
    int64_t kb_wrap_add(int64_t a, int64_t b)
    int64_t kb_wrap_sub(int64_t a, int64_t b)
    int kb_utf8_valid(const uint8_t *p, int64_t n)
    int kb_varint_size(int32_t v)
    int kb_varlong_size(int64_t v)
    uint8_t *kb_write_varint(uint8_t *p, int32_t v)
    uint8_t *kb_write_varlong(uint8_t *p, int64_t v)
    const uint8_t *kb_read_varint(const uint8_t *p, const uint8_t *end, int32_t *out)
    const uint8_t *kb_read_varlong(const uint8_t *p, const uint8_t *end, int64_t *out)
    const uint8_t *kb_read_plain_record(const uint8_t *p, const uint8_t *end, int64_t *ts_delta,
                                        int32_t *off_delta, int32_t *key_len)
