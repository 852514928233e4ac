"""A connection's write side: a frame's parts written in one gathered system call.

A frame is a list of parts (its header, the encoded fields, a produce's record batch as the
encoder received it). ``asyncio``'s ``writelines`` on Python 3.11 joins the parts into one new
``bytes`` before writing it: for a 1 MiB produce, a copy of the batch into a fresh allocation,
only for the kernel to copy it again. :func:`write_parts` hands the parts to ``writev(2)`` when the transport is a
plain socket with nothing queued, which copies each part straight from where it lies into the
socket; what the socket does not take at once is given to the transport (``write``, part by
part), which queues it behind and sends it as the socket drains, as for any other write.

Order is kept: bytes go to the socket directly only while the transport has nothing queued,
so every earlier write is already in the kernel. A TLS transport (or any transport but a plain
socket's) gets ``writelines``: its bytes must pass through the TLS layer.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

__all__ = ["raw_socket_fd", "write_parts"]

#: Parts per ``writev`` call: under every system's ``IOV_MAX`` (1024 on Linux).
_IOV_PARTS = 512


def raw_socket_fd(transport: asyncio.BaseTransport) -> int:
    """The socket's descriptor when ``transport`` is a plain stream socket's transport with
    nothing queued and still open (writing to it directly keeps the order), else -1."""
    # asyncio's own test for a transport it would sendfile to natively (a TLS transport's mode
    # is FALLBACK): only such a transport's socket carries the bytes as they are. The
    # listener's sendfile of record data uses the same test.
    mode = getattr(transport, "_sendfile_compatible", None)
    if (
        getattr(mode, "name", None) != "TRY_NATIVE"
        or not isinstance(transport, asyncio.WriteTransport)
        or transport.is_closing()
        or transport.get_write_buffer_size()
    ):
        return -1
    # Only asyncio's stream-socket transport has that mode (its datagram and pipe transports
    # have none), so the socket is a stream socket: not asked again (``socket.type`` builds an
    # enum member each call, a few percent of a busy leader's Python).
    sock = transport.get_extra_info("socket")
    return -1 if sock is None else int(sock.fileno())


def write_parts(transport: asyncio.BaseTransport, parts: Sequence[Any]) -> None:
    """Write ``parts`` (bytes-like objects, in order) to ``transport``: gathered into the socket
    at once where the transport allows it, the rest queued on the transport. The transport may
    keep a reference to a part it queued until it is sent (as with ``write``)."""
    assert isinstance(transport, asyncio.WriteTransport)
    fd = raw_socket_fd(transport)
    if fd < 0:
        transport.writelines(parts)
        return
    i = 0
    n = len(parts)
    while i < n:
        group = parts[i : i + _IOV_PARTS]
        try:
            sent = os.writev(fd, group)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            # A broken connection: the transport's own write meets the same error and closes
            # the connection as it would for any write.
            break
        for p in group:
            size = memoryview(p).nbytes
            if sent < size:
                break
            sent -= size
            i += 1
        else:
            continue
        if sent:  # a part the socket took only the start of
            transport.write(memoryview(parts[i]).cast("B")[sent:])
            i += 1
        break
    for p in parts[i:]:
        transport.write(p)
