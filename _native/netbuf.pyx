"""Receive buffers for the TCP transport.

A frame's body is received straight into a buffer of its exact size; ``bytearray(n)`` would
zero every byte first (a memset of a whole record batch per frame, about 5 % of a replicating
node's time with 1 MiB batches), only for ``recv_into`` to overwrite them. No byte layout here:
the frame format is in ``seglog.cluster.tcp``.
"""
from cpython.bytearray cimport PyByteArray_FromStringAndSize


def uninitialized_bytearray(Py_ssize_t n):
    """A ``bytearray`` of ``n`` bytes whose contents are undefined: the caller overwrites every
    byte before reading any (the transport receives a whole frame body into it)."""
    if n < 0:
        raise ValueError(f"a buffer cannot have {n} bytes")
    return PyByteArray_FromStringAndSize(NULL, n)
