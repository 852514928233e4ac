# The header section of one v2 record, shared by the column encoder (records) and the
# record-at-a-time builder. Included textually rather than cimported: a function a .pxd shares
# must be inline, and this slow path that raises stays out of line in each includer.
#
#   varint headerCount | { varint keyLength | key (UTF-8) | varint valueLength (-1 null) | value }*

from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING
from cpython.unicode cimport PyUnicode_AsUTF8String
from libc.stdint cimport int32_t, uint8_t, INT32_MAX
from libc.string cimport memcpy

from kbytes cimport kb_varint_size, kb_write_varint


cdef bytes _header_section(object hdrs, str where):
    """Encode ``hdrs`` (a list of (str key, bytes-or-None value)); ``where`` prefixes errors."""
    if not isinstance(hdrs, (list, tuple)):
        raise TypeError(f"{where}headers must be a list of (str key, bytes value) pairs, not "
                        f"{type(hdrs).__name__}")
    cdef Py_ssize_t count = len(hdrs), total = kb_varint_size(<int32_t>count), vlen
    cdef list parts = []
    cdef bytes kb
    cdef object v
    for h in hdrs:
        try:
            k, v = h
        except (TypeError, ValueError):
            raise TypeError(f"{where}each header must be a (key, value) pair, got {h!r}") from None
        if isinstance(k, str):
            kb = PyUnicode_AsUTF8String(k)
        elif isinstance(k, (bytes, bytearray)):
            kb = bytes(k)
        else:
            raise TypeError(f"{where}a header key must be str, got {type(k).__name__}")
        if v is not None:
            if isinstance(v, str):
                raise TypeError(f"{where}header {k!r} has a str value; header values are bytes")
            v = bytes(v)
            vlen = len(<bytes>v)
        else:
            vlen = -1
        parts.append((kb, v))
        total += kb_varint_size(<int32_t>len(kb)) + len(kb) + kb_varint_size(<int32_t>vlen) + max(vlen, 0)
    if total > INT32_MAX:
        raise ValueError(f"{where}the record headers are larger than a record can hold")
    out = PyBytes_FromStringAndSize(NULL, total)
    cdef uint8_t *p = <uint8_t *>PyBytes_AS_STRING(out)
    p = kb_write_varint(p, <int32_t>count)
    for kb, v in parts:
        p = kb_write_varint(p, <int32_t>len(kb))
        memcpy(p, PyBytes_AS_STRING(kb), len(kb))
        p += len(kb)
        if v is None:
            p = kb_write_varint(p, -1)
        else:
            p = kb_write_varint(p, <int32_t>len(<bytes>v))
            memcpy(p, PyBytes_AS_STRING(v), len(<bytes>v))
            p += len(<bytes>v)
    return out
