"""CRC-32C and CRC-32 over any contiguous buffer.

Mirrors Kafka's ``org.apache.kafka.common.utils.Crc32C`` (RecordBatch v2) and
``java.util.zip.CRC32`` as used by ``LegacyRecord`` (magic 0 and 1). The C lives in
``include/crc32c.h`` and ``include/crc32.h``, which other native modules include directly.

| checksum | reflected poly | init / xorout | "123456789" | covers (Kafka)                          |
|----------|----------------|---------------|-------------|-----------------------------------------|
| CRC-32C  | 0x82F63B78     | ~0 / ~0       | 0xE3069283  | v2 batch: attributes (byte 21) .. end   |
| CRC-32   | 0xEDB88320     | ~0 / ~0       | 0xCBF43926  | v0/v1 message: magic (byte 16) .. end   |

Both take and return the running value like ``zlib.crc32``: ``crc32c(b, crc32c(a))`` equals
``crc32c(a + b)``.

GIL policy. The GIL is released when the buffer is at least ``CRC32C_NOGIL_MIN`` = 32 KiB
(``CRC32_NOGIL_MIN`` = 4 KiB for CRC-32). Measured with ``bench/bench_crc32c.py -k gil``
(``_crc32c_gil`` forces either policy; 2-core Xeon VM, SSE4.2 path, no other Python thread),
pytest-benchmark min / median per call:

    size      hold GIL          release           release - hold (min)
    256 B     116 / 128 ns      146 / 155 ns      +30 ns
    1 KiB     142 / 158 ns      159 / 170 ns      +17 ns
    4 KiB     263 / 292 ns      278 / 302 ns      +15 ns
    16 KiB    730 / 799 ns      747 / 795 ns      +17 ns
    32 KiB    1.21 / 1.26 us    1.23 / 1.27 us    +14 ns  (1 %)
    256 KiB   8.49 / 9.18 us    8.50 / 9.48 us    +16 ns

A release costs a fixed 15-30 ns, 1 % of a 32 KiB CRC-32C. Contention changes the trade:
with a CPU-bound Python thread waiting, every release hands it the GIL and the caller may wait
up to a switch interval (5 ms) to get it back (a one-off run with a spinning thread: 64 KiB
calls took 5.6 us holding, 716 us releasing, while the other thread ran twice as fast). The
threshold keeps small calls, where the other thread gains least, out of that trade.
CRC-32 (IEEE) runs the table at about 2.6 GB/s, eight times slower, so its 1 % point is 4 KiB.
"""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from libc.stdint cimport uint8_t, uint32_t

from crc cimport (seglog_crc32c, seglog_crc32c_sw, seglog_crc32c_implementation, seglog_crc32, CRC32C_GIL_MIN,
                  crc32c_gil_aware)

cdef enum:
    _CRC32_NOGIL_MIN = 4096

CRC32C_NOGIL_MIN = CRC32C_GIL_MIN
CRC32_NOGIL_MIN = _CRC32_NOGIL_MIN

# Decide the implementation now, with the GIL held and the environment settled.
_IMPLEMENTATION = seglog_crc32c_implementation().decode("ascii")


def implementation():
    """Return the CRC-32C implementation in use: ``"vpclmulqdq"`` (x86-64 with AVX-512
    VPCLMULQDQ: carry-less-multiply folding from 1 KiB, the ``crc32`` instruction below),
    ``"sse4.2"``, ``"armv8"`` or ``"table"``.

    Chosen once per process from the CPU; ``SEGLOG_CRC32C=table`` (or ``=sse4.2`` where SSE 4.2
    exists) in the environment before ``seglog`` is imported forces that implementation.
    """
    return _IMPLEMENTATION


cdef inline uint32_t _run_crc32(const uint8_t *p, size_t n, uint32_t crc) noexcept:
    if n >= _CRC32_NOGIL_MIN:
        with nogil:
            crc = seglog_crc32(crc, p, n)
        return crc
    return seglog_crc32(crc, p, n)


# The typed-memoryview entry (any C-contiguous byte buffer) is the general path. Exact
# ``bytes`` skip it: acquiring a typed memoryview costs ~70 ns, longer than the CRC of a
# small batch. The empty view is special-cased because &data[0] does not exist.

cdef uint32_t _crc32c_view(const uint8_t[::1] data, uint32_t crc) noexcept:
    if data.shape[0] == 0:
        return crc
    return crc32c_gil_aware(crc, &data[0], <size_t>data.shape[0])


cdef uint32_t _crc32_view(const uint8_t[::1] data, uint32_t crc) noexcept:
    if data.shape[0] == 0:
        return crc
    return _run_crc32(&data[0], <size_t>data.shape[0], crc)


cdef object _not_a_buffer(str func, object data):
    return TypeError(f"{func}() needs a bytes-like object (bytes, bytearray, memoryview, mmap, "
                     f"uint8 array), not {type(data).__name__}")


def crc32c(data, uint32_t crc=0):
    """Return the CRC-32C (Castagnoli) of ``data``, continuing from ``crc``.

    ``data`` is any C-contiguous buffer of bytes (bytes, bytearray, memoryview, mmap,
    a NumPy ``uint8`` array). ``crc`` is the value returned for the preceding bytes
    (0 to start): ``crc32c(b, crc32c(a)) == crc32c(a + b)``.
    """
    if PyBytes_CheckExact(data):
        return crc32c_gil_aware(crc, <const uint8_t *>PyBytes_AS_STRING(data),
                                <size_t>PyBytes_GET_SIZE(data))
    if data is None or isinstance(data, str):
        raise _not_a_buffer("crc32c", data)
    return _crc32c_view(data, crc)


def crc32(data, uint32_t crc=0):
    """Return the CRC-32 (IEEE; the same value as ``zlib.crc32``) of ``data``, continuing
    from ``crc``: the checksum of legacy (magic 0 and 1) messages. ``data`` as for
    :func:`crc32c`."""
    if PyBytes_CheckExact(data):
        return _run_crc32(<const uint8_t *>PyBytes_AS_STRING(data),
                          <size_t>PyBytes_GET_SIZE(data), crc)
    if data is None or isinstance(data, str):
        raise _not_a_buffer("crc32", data)
    return _crc32_view(data, crc)


def _crc32c_portable(const uint8_t[::1] data not None, uint32_t crc=0):
    """The slicing-by-8 table path, whatever the CPU offers (tests and benchmarks)."""
    if data.shape[0] == 0:
        return crc
    return seglog_crc32c_sw(crc, &data[0], <size_t>data.shape[0])


def _crc32c_gil(const uint8_t[::1] data not None, uint32_t crc=0, bint release=False):
    """``crc32c`` with the GIL policy forced: released if ``release``, held otherwise
    (the benchmark behind ``CRC32C_NOGIL_MIN``)."""
    cdef const uint8_t *p
    cdef size_t n = <size_t>data.shape[0]
    if n == 0:
        return crc
    p = &data[0]
    if release:
        with nogil:
            crc = seglog_crc32c(crc, p, n)
        return crc
    return seglog_crc32c(crc, p, n)
