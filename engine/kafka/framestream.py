"""A server connection's read side: frames read from the socket straight into buffers of their
own, instead of through ``asyncio.StreamReader``.

A StreamReader copies each byte twice on its way to a request handler: from the bytes the
socket read into its growing buffer, then out of it into the bytes ``readexactly`` returns
(plus the buffer's reallocations as it grows). For a 1 MiB produce that was about a fifth of a
partition leader's Python time. Here a read of a large frame gets a ``bytearray`` of its own
that the socket is read into (``asyncio.BufferedProtocol``); only what arrived before the read
was asked for is copied in, from a small staging buffer. Small reads (a frame's size, a small
request) are served from the staging buffer.

:class:`FrameStream` offers what the listener and the SASL exchange use of a StreamReader
(``readexactly``, with the same ``IncompleteReadError`` at the end of the stream), and
:class:`FrameConnection` is the protocol that fills it and serves an ``asyncio.StreamWriter``
(``drain``, ``wait_closed``, and ``start_tls`` on Python 3.11+).
"""

from __future__ import annotations

import asyncio
from asyncio.streams import FlowControlMixin
from collections.abc import Callable, Coroutine
from typing import Any

from seglog._native.netbuf import uninitialized_bytearray

__all__ = ["DIRECT_MIN", "STAGE_BYTES", "FrameConnection", "FrameStream"]

#: Staging buffer size: bytes that arrive while no read waits (reading pauses when it is full).
STAGE_BYTES = 256 * 1024
#: Reads of more bytes than this get a buffer of their own that the socket is read into.
DIRECT_MIN = 64 * 1024


class FrameStream:
    """The read side of one connection (see module docs). One reader at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._stage = bytearray(STAGE_BYTES)
        self._start = 0  # staged bytes are _stage[_start:_end]
        self._end = 0
        self._target: bytearray | None = None  # a direct read's buffer, filled up to _pos
        self._pos = 0
        self._want = 0  # bytes a staged read waits for
        self._waiter: asyncio.Future[None] | None = None
        self._eof = False
        self._exc: BaseException | None = None
        self._transport: asyncio.Transport | None = None
        self._reading_paused = False

    # -- the protocol's side ---------------------------------------------------------------------

    def _get_buffer(self) -> memoryview:
        if self._target is not None:
            return memoryview(self._target)[self._pos :]
        if self._end == len(self._stage):
            if self._start > 0:
                self._compact()
            else:  # full and still called (a TLS layer flushing what it decrypted): grow
                self._stage.extend(bytes(len(self._stage)))
        return memoryview(self._stage)[self._end :]

    def _buffer_updated(self, n: int) -> None:
        if self._target is not None:
            self._pos += n
            if self._pos == len(self._target):
                self._wake()
            return
        self._end += n
        if self._waiter is not None and self._end - self._start >= self._want:
            self._wake()
        if self._end == len(self._stage) and self._start == 0:
            self._pause()

    def _feed_eof(self) -> None:
        self._eof = True
        self._wake()

    def _set_exception(self, exc: BaseException) -> None:
        self._exc = exc
        self._wake()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _pause(self) -> None:
        if not self._reading_paused and self._transport is not None:
            self._reading_paused = True
            self._transport.pause_reading()

    def _resume(self) -> None:
        if self._reading_paused and self._transport is not None:
            self._reading_paused = False
            self._transport.resume_reading()

    def _compact(self) -> None:
        n = self._end - self._start
        self._stage[:n] = self._stage[self._start : self._end]
        self._start, self._end = 0, n

    # -- the reader's side -----------------------------------------------------------------------

    async def _wait(self) -> None:
        self._waiter = self._loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def _take(self, n: int) -> bytes:
        data = bytes(memoryview(self._stage)[self._start : self._start + n])
        self._start += n
        if self._start == self._end:
            self._start = self._end = 0
        return data

    async def readexactly(self, n: int) -> bytes | bytearray:
        """Exactly ``n`` bytes; ``asyncio.IncompleteReadError`` (with what arrived) when the
        stream ends first, the connection's error when it was lost. Large reads return a
        ``bytearray`` the socket was read into."""
        if n <= 0:
            return b""
        if n > DIRECT_MIN and self._end - self._start < n:
            return await self._read_direct(n)
        while self._end - self._start < n:
            if self._exc is not None:
                raise self._exc
            if self._eof:
                raise asyncio.IncompleteReadError(self._take(self._end - self._start), n)
            if self._start + n > len(self._stage):
                self._compact()
            self._want = n
            self._resume()
            await self._wait()
        data = self._take(n)
        if self._reading_paused and self._end < len(self._stage):
            self._resume()
        return data

    async def _read_direct(self, n: int) -> bytearray:
        target = uninitialized_bytearray(n)
        staged = self._end - self._start
        target[:staged] = memoryview(self._stage)[self._start : self._end]
        self._start = self._end = 0
        self._target, self._pos = target, staged
        self._resume()
        try:
            while self._pos < n:
                if self._exc is not None:
                    raise self._exc
                if self._eof:
                    raise asyncio.IncompleteReadError(bytes(memoryview(target)[: self._pos]), n)
                await self._wait()
        except asyncio.CancelledError:
            # What arrived of the frame is gone with it: no later read may see the rest as
            # the start of a frame. (Only a connection being closed cancels such a read.)
            self._exc = ConnectionAbortedError("a read was cancelled inside a frame")
            raise
        finally:
            self._target = None
        return target


class FrameConnection(FlowControlMixin, asyncio.BufferedProtocol):
    """A server connection's protocol: fills a :class:`FrameStream` and runs
    ``on_connection(stream, writer)`` as a task from the moment the socket is accepted."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        on_connection: Callable[[FrameStream, asyncio.StreamWriter], Coroutine[Any, Any, None]],
    ) -> None:
        super().__init__(loop)
        self._loop = loop
        self.stream = FrameStream(loop)
        self._client_connected_cb = on_connection  # StreamWriter.start_tls: "server side"
        self._closed: asyncio.Future[None] = loop.create_future()
        self._over_ssl = False
        self.transport: asyncio.Transport | None = None
        self.task: asyncio.Task[None] | None = None  # held: the loop keeps only a weak reference

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.stream._transport = transport
        self._over_ssl = transport.get_extra_info("sslcontext") is not None
        writer = asyncio.StreamWriter(transport, self, None, self._loop)
        self.task = self._loop.create_task(self._client_connected_cb(self.stream, writer))

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.stream._get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.stream._buffer_updated(nbytes)

    def eof_received(self) -> bool:
        self.stream._feed_eof()
        # As asyncio's stream protocol: keep a plain socket open for the answers still to
        # write; TLS cannot half-close.
        return not self._over_ssl

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is None:
            self.stream._feed_eof()
        else:
            self.stream._set_exception(exc)
        if not self._closed.done():
            self._closed.set_result(None)
        super().connection_lost(exc)

    def _replace_writer(self, writer: asyncio.StreamWriter) -> None:
        """After ``StreamWriter.start_tls``: the TLS transport carries the connection now."""
        transport = writer.transport
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.stream._transport = transport
        self.stream._reading_paused = False
        self._over_ssl = True

    def _get_close_waiter(self, stream: Any) -> asyncio.Future[None]:
        return self._closed
