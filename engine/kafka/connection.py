"""One client connection of the Kafka listener: the frame and request header layouts, the
connection's state, and the close that ends it.

Every request and response is a 4-byte big-endian size and that many bytes. A request starts
with Kafka's request header: api key, api version, correlation id, client id (v1), then tagged
fields (v2, for flexible versions). Both the request loop (``seglog.kafka.listener``) and the
authentication phase before it (``seglog.kafka.security``) read frames with :func:`read_frame`.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import Any, Protocol

from seglog.errors import SeglogError, code_for_exception
from seglog.kafka import codec
from seglog.kafka.codec import Message

__all__ = [
    "INT32",
    "REQUEST_HEADER",
    "CloseConnection",
    "ConnState",
    "FrameReader",
    "fmt_peer",
    "read_frame",
    "skip_tagged",
]

log = logging.getLogger("seglog.kafka")

#: The fixed part of a request header: api key, api version, correlation id, client id length.
REQUEST_HEADER = struct.Struct(">hhih")
#: A frame's size, and a response header's correlation id.
INT32 = struct.Struct(">i")


class FrameReader(Protocol):
    """What :func:`read_frame` reads from: an ``asyncio.StreamReader`` or a listener's
    :class:`seglog.kafka.framestream.FrameStream`."""

    async def readexactly(self, n: int) -> bytes | bytearray: ...


class CloseConnection(Exception):
    """The connection must close (a frame or request that cannot be answered)."""


async def read_frame(
    reader: FrameReader,
    idle_ms: int,
    max_bytes: int,
    limit_name: str,
    closed: type[Exception] = CloseConnection,
    phase: str = "",
    body_idle: bool = True,
) -> bytes | bytearray | None:
    """The next frame's bytes, or None when the client closed the connection between frames.
    Raises ``closed`` (the connection must close) when nothing arrives for ``idle_ms``
    (``connections.max.idle.ms``), the connection ends inside a frame, or the size is negative
    or over ``max_bytes`` (the key ``limit_name`` sets it). ``phase`` ends each message
    (" before authenticating"). ``body_idle`` False: a frame whose size arrived may take any time
    to arrive in full (a large produce over a slow link is not an idle connection)."""
    idle = idle_ms / 1000.0
    try:
        head = await asyncio.wait_for(reader.readexactly(4), idle)
    except asyncio.TimeoutError:
        raise closed(f"idle for connections.max.idle.ms={idle_ms}{phase}") from None
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise closed(
                f"the connection closed inside a frame's size ({len(exc.partial)} of 4 bytes){phase}"
            ) from None
        return None
    (size,) = INT32.unpack(head)
    if size < 0 or size > max_bytes:
        raise closed(
            (
                f"a frame of {size} bytes is over {limit_name}={max_bytes}"
                if size > 0
                else f"a negative frame size {size}"
            )
            + phase
        )
    try:
        return await asyncio.wait_for(reader.readexactly(size), idle if body_idle else None)
    except asyncio.TimeoutError:
        raise closed(f"idle for connections.max.idle.ms={idle_ms} inside a frame{phase}") from None
    except asyncio.IncompleteReadError as exc:
        raise closed(
            f"the connection closed inside a frame: {len(exc.partial)} of {size} bytes arrived{phase}"
        ) from None


class ConnState:
    """Per-connection state: client id, and whether an error was logged already."""

    __slots__ = ("client_id", "logged", "peer", "sockname")

    def __init__(self, peer: Any, sockname: Any) -> None:
        self.peer = peer
        self.sockname = sockname
        self.client_id = ""
        self.logged = False

    def warn(self, message: str) -> None:
        """Log ``message`` at WARNING the first time for this connection, at DEBUG after."""
        level = logging.DEBUG if self.logged else logging.WARNING
        self.logged = True
        log.log(level, "Kafka client %s (client id %r): %s", fmt_peer(self.peer), self.client_id, message)

    def note(self, what: str, exc: BaseException) -> None:
        self.warn(f"{what} failed: {type(exc).__name__}: {exc}")

    def fail(self, out: Message, what: str, exc: SeglogError) -> None:
        """Mark the response entry ``out`` failed with ``exc`` (its Kafka error code and message)
        and :meth:`note` the failure of ``what``."""
        out["error_code"] = code_for_exception(exc)
        out["error_message"] = str(exc)
        self.note(what, exc)

    def advertised(self, host: str, port: int) -> tuple[str, int]:
        """The address to give clients: the one this connection reached."""
        if host in ("", "0.0.0.0", "::") and self.sockname:
            return str(self.sockname[0]), port
        return host, port


def fmt_peer(peer: Any) -> str:
    """A peer address as ``host:port`` (anything else as its text)."""
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)


def skip_tagged(frame: memoryview, pos: int) -> int:
    """Skip the request header's tagged fields (header v2)."""
    try:
        count, pos = codec._uvarint(frame, pos)
        for _ in range(count):
            _, pos = codec._uvarint(frame, pos)
            size, pos = codec._uvarint(frame, pos)
            pos += size
    except (IndexError, codec._Truncated):
        raise CloseConnection("request header's tagged fields are malformed") from None
    if pos > len(frame):
        raise CloseConnection("request header's tagged fields run past the frame")
    return pos
