"""The asyncio TCP transport: nodes and clients exchanging framed requests on loopback or a
network, with fetch responses sent straight from the segment files (``os.sendfile`` through
``loop.sendfile``), optional TLS, and an optional shared secret so that no one joins
uninvited. Framing and handshake: ``docs/replication-protocol.md``.

Frame (big-endian)::

    uint32  length of everything after this field
    uint8   kind          1 request, 2 response, 3 hello, 4 challenge, 5 proof, 6 welcome
    uint32  correlation id (requests and their responses; 0 otherwise)
    uint32  header length H
    H bytes header: the message as UTF-8 JSON, each bytes-like field replaced by {"$b": i}
    uint32  blob count N
    N x     uint32 length, then that many bytes (record batches, sent from the files)

Handshake, before any request: the client sends ``hello`` ({"node": its id}); the server answers
``challenge`` (a 32-byte random nonce); the client answers ``proof`` = HMAC-SHA256(secret,
nonce || node id as 8 ASCII digits) — empty without a secret; the server checks it (when it has
a secret) and answers ``welcome``, or closes the connection.

Everything runs on one event loop: ``request`` and the handlers are called on the loop's thread,
as the node expects (it has no locks).
"""

from __future__ import annotations

import asyncio
import asyncio.streams
import collections
import dataclasses
import functools
import hashlib
import hmac
import json
import logging
import os
import ssl as ssl_mod
import struct
from collections.abc import Callable
from typing import Any

from seglog._native.netbuf import uninitialized_bytearray
from seglog.cluster.messages import decode, encode
from seglog.cluster.netloop import Listener, connect_within, link_addresses_from_env
from seglog.cluster.transport import Callback, Handler
from seglog.errors import NetworkError, RequestTimedOutError

log = logging.getLogger("seglog.cluster.tcp")

KIND_REQUEST = 1
KIND_RESPONSE = 2
KIND_HELLO = 3
KIND_CHALLENGE = 4
KIND_PROOF = 5
KIND_WELCOME = 6

_HEAD = struct.Struct(">IBII")  # frame length, kind, correlation id, header length
_BODY = struct.Struct(">BII")  # the same without the length
_U32 = struct.Struct(">I")
MAX_FRAME = 256 * 1024 * 1024
#: Record blobs smaller than this are copied into the frame; larger ones go out by sendfile.
SENDFILE_MIN = 64 * 1024


def proof_for(secret: bytes, nonce: bytes, node_id: int) -> bytes:
    return hmac.new(secret, nonce + b"%08d" % node_id, hashlib.sha256).digest()


@dataclasses.dataclass(slots=True)
class _Blob:
    data: Any = None  # bytes-like
    fds: list[tuple[int, int, int]] = dataclasses.field(default_factory=list)  # (dup fd, pos, len)

    @property
    def size(self) -> int:
        if self.data is not None:
            return len(self.data)
        return sum(n for _, _, n in self.fds)


def _blobs_of(raw: list[Any]) -> list[_Blob]:
    """Blobs as they can be written later: bytes as they are, LogReadResults as duplicated
    file descriptors (valid even if the segment is closed or renamed meanwhile)."""
    out = []
    for b in raw:
        if hasattr(b, "slices") and b.size < SENDFILE_MIN:
            # A small read costs less copied now than a sendfile round through the selector.
            out.append(_Blob(data=b.to_bytes()))
        elif hasattr(b, "slices"):
            fds = []
            try:
                for s in b.slices:
                    fds.append((s.dup_fd(), s.position, s.length))
            except (OSError, ValueError):
                for fd, _, _ in fds:
                    os.close(fd)
                out.append(_Blob(data=b.to_bytes()))
                continue
            out.append(_Blob(fds=fds))
        else:
            out.append(_Blob(data=bytes(b) if isinstance(b, memoryview) else b))
    return out


class _FrameProtocol(asyncio.streams.FlowControlMixin, asyncio.BufferedProtocol):
    """Reads frames straight out of the socket: small frames land in a 64 KiB scratch buffer
    (several per ``recv``), a large frame's body is received into a buffer of its own exact size
    (one copy from the kernel, no reassembly) whose blobs are handed on as memoryviews. Writing
    goes through a ``StreamWriter`` over the same transport (this class is its flow control)."""

    SCRATCH = 64 * 1024

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        on_made: Callable[[_FrameProtocol, asyncio.BaseTransport], None] | None = None,
    ) -> None:
        super().__init__(loop=loop)
        self._frame_loop = loop
        self._scratch = bytearray(self.SCRATCH)
        self._sv = memoryview(self._scratch)
        self._have = 0
        self._big: bytearray | None = None
        self._big_view = memoryview(b"")
        self._big_have = 0
        self._frames: collections.deque[tuple[int, int, bytes, list[Any]]] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._exc: BaseException | None = None
        self._eof = False
        self._on_made = on_made
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self._on_made is not None:
            self._on_made(self, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            return self._big_view[self._big_have :]
        return self._sv[self._have :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._big is not None:
            self._big_have += nbytes
            if self._big_have == len(self._big):
                body, self._big, self._big_view = self._big, None, memoryview(b"")
                self._push(memoryview(body))
            return
        self._have += nbytes
        pos = 0
        have = self._have
        while have - pos >= 4:
            (length,) = _U32.unpack_from(self._scratch, pos)
            if length > MAX_FRAME or length < _HEAD.size - 4:
                self._error(ConnectionError(f"frame of {length} bytes is outside [{_HEAD.size - 4}, {MAX_FRAME}]"))
                return
            end = pos + 4 + length
            if end <= have:
                self._push(bytes(self._sv[pos + 4 : end]))
                pos = end
                if self._exc is not None:
                    return
            elif 4 + length > self.SCRATCH:
                body = uninitialized_bytearray(length)  # every byte is received before use
                got = have - pos - 4
                body[:got] = self._sv[pos + 4 : have]
                self._big, self._big_view, self._big_have = body, memoryview(body), got
                self._have = 0
                return
            else:
                break
        if pos:
            rest = have - pos
            self._scratch[:rest] = self._sv[pos:have]
            self._have = rest

    def _push(self, body: Any) -> None:
        """Split one frame body (everything after the length field) into its parts."""
        try:
            kind, corr, hlen = _BODY.unpack_from(body, 0)
            at = _BODY.size + hlen
            header = bytes(body[_BODY.size : at])
            (count,) = _U32.unpack_from(body, at)
            at += 4
            blobs = []
            for _ in range(count):
                (n,) = _U32.unpack_from(body, at)
                at += 4
                if at + n > len(body):
                    raise ConnectionError(f"blob of {n} bytes runs past the end of its {len(body)}-byte frame")
                blobs.append(body[at : at + n])
                at += n
            if at != len(body) or len(header) != hlen:
                raise ConnectionError(f"frame parts add up to {at} bytes, the frame holds {len(body)}")
        except (struct.error, ConnectionError) as exc:
            self._error(exc if isinstance(exc, ConnectionError) else ConnectionError(f"malformed frame: {exc}"))
            return
        self._frames.append((kind, corr, header, blobs))
        self._wake()

    def _error(self, exc: BaseException) -> None:
        self._exc = exc
        if self.transport is not None:
            self.transport.abort()
        self._wake()

    def _wake(self) -> None:
        w, self._waiter = self._waiter, None
        if w is not None and not w.done():
            w.set_result(None)

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._eof = True
        if exc is not None and self._exc is None:
            self._exc = exc
        self._wake()

    async def read_frame(self) -> tuple[int, int, bytes, list[Any]]:
        """The next frame: (kind, correlation id, header, blobs); raises once the connection
        ends (``IncompleteReadError`` at a clean end, the error otherwise)."""
        while not self._frames:
            if self._exc is not None:
                raise self._exc
            if self._eof:
                raise asyncio.IncompleteReadError(b"", None)
            self._waiter = self._frame_loop.create_future()
            await self._waiter
        return self._frames.popleft()


_WRITE_BACKLOG = 4 * 1024 * 1024  # beyond this much unsent, writers wait for the socket (drain)


class _Writer:
    """Frames written one after another on one connection."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.lock = asyncio.Lock()
        self.queued = 0  # frames handed to tasks and not yet written: later frames queue behind

    def send_now(self, kind: int, corr: int, header: bytes, blobs: list[_Blob]) -> bool:
        """Write the frame at once if nothing else is being written and it needs no sendfile
        (the common case: no task, no lock); False if it must go through :meth:`send`."""
        w = self.writer
        if self.queued or self.lock.locked() or w.is_closing() or any(b.data is None for b in blobs):
            return False
        transport = w.transport
        if transport.get_write_buffer_size() > _WRITE_BACKLOG:
            return False
        rest = 1 + 4 + 4 + len(header) + 4 + sum(4 + len(b.data) for b in blobs)
        parts = [_HEAD.pack(rest, kind, corr, len(header)), header, _U32.pack(len(blobs))]
        for b in blobs:
            parts.append(_U32.pack(len(b.data)))
            parts.append(b.data)
        if rest < SENDFILE_MIN:
            transport.write(b"".join(parts))
        else:
            for part in parts:  # large blobs are not copied into one buffer first
                transport.write(part)
        return True

    def submit(self, kind: int, corr: int, header: bytes, blobs: list[_Blob]) -> asyncio.Task[None] | None:
        """Write the frame now if it can be (None), else in a task that keeps its place in line."""
        if self.send_now(kind, corr, header, blobs):
            return None
        self.queued += 1
        return asyncio.get_running_loop().create_task(self._send_queued(kind, corr, header, blobs))

    async def _send_queued(self, kind: int, corr: int, header: bytes, blobs: list[_Blob]) -> None:
        try:
            await self.send(kind, corr, header, blobs)
        finally:
            self.queued -= 1

    async def send(self, kind: int, corr: int, header: bytes, blobs: list[_Blob]) -> None:
        try:
            async with self.lock:
                await self._send(kind, corr, header, blobs)
        finally:
            for b in blobs:
                for fd, _, _ in b.fds:
                    os.close(fd)

    async def _send(self, kind: int, corr: int, header: bytes, blobs: list[_Blob]) -> None:
        w = self.writer
        if w.is_closing():
            raise ConnectionError("connection closed")
        rest = 1 + 4 + 4 + len(header) + 4 + sum(4 + b.size for b in blobs)
        parts = [_HEAD.pack(rest, kind, corr, len(header)), header, _U32.pack(len(blobs))]
        loop = asyncio.get_running_loop()
        for b in blobs:
            parts.append(_U32.pack(b.size))
            if b.data is not None:
                parts.append(b.data)
                continue
            w.write(b"".join(parts))
            parts = []
            for fd, pos, n in b.fds:
                f = os.fdopen(os.dup(fd), "rb")
                try:
                    sent = await loop.sendfile(w.transport, f, pos, n)
                finally:
                    f.close()
                if sent != n:
                    # The segment was truncated under us: the frame cannot be completed.
                    w.transport.abort()
                    raise ConnectionError(f"sent {sent} of {n} bytes of a segment slice")
        if parts:
            w.write(b"".join(parts))
        await w.drain()


@dataclasses.dataclass(slots=True)
class _PendingRequest:
    """A request written on a connection, waiting for its response (or its timeout)."""

    callback: Callback
    timer: asyncio.TimerHandle | None


class _Conn:
    """A client connection from one endpoint to one node."""

    def __init__(self, t: TcpTransport, src: int, dst: int) -> None:
        self.t = t
        self.src = src
        self.dst = dst
        self.ready: asyncio.Future[None] = t.loop.create_future()
        self.pending: dict[int, _PendingRequest] = {}
        self.next_corr = 1
        self.out: _Writer | None = None
        self.closed = False
        self.waiting = 0  # requests waiting to be written (for the connection or the writer)
        self.task = t.loop.create_task(self._run())
        self.task.add_done_callback(self._ended)

    async def _run(self) -> None:
        host, port = self.t.link_addresses.get((self.src, self.dst)) or self.t.addresses[self.dst]
        try:
            loop = self.t.loop
            transport, reader = await connect_within(
                loop,
                loop.create_connection(
                    lambda: _FrameProtocol(loop),
                    host,
                    port,
                    ssl=self.t.client_ssl,
                    server_hostname=host if self.t.client_ssl else None,
                ),
                self.t.connect_timeout_s,
            )
            self.out = _Writer(asyncio.StreamWriter(transport, reader, None, loop))
            await self.out.send(KIND_HELLO, 0, json.dumps({"node": self.src}).encode(), [])
            kind, _, _, blobs = await reader.read_frame()
            if kind != KIND_CHALLENGE or len(blobs) != 1:
                raise ConnectionError("no challenge from the server")
            proof = proof_for(self.t.secret, blobs[0], self.src) if self.t.secret else b""
            await self.out.send(KIND_PROOF, 0, b"{}", [_Blob(data=proof)])
            kind, _, _, _ = await reader.read_frame()
            if kind != KIND_WELCOME:
                raise ConnectionError("the server refused the handshake")
            self.ready.set_result(None)
            while True:
                kind, corr, header, blobs = await reader.read_frame()
                if kind != KIND_RESPONSE:
                    continue
                p = self.pending.pop(corr, None)
                if p is None:
                    continue
                if p.timer is not None:
                    p.timer.cancel()
                try:
                    resp = decode(header, blobs)
                except Exception as exc:  # a bad frame ends the connection
                    raise ConnectionError(f"undecodable response: {exc!r}") from exc
                self.t._deliver(self.src, p.callback, resp, None)
        except (OSError, ConnectionError, asyncio.IncompleteReadError, asyncio.TimeoutError, ssl_mod.SSLError) as exc:
            self._fail(NetworkError(f"connection {self.src}->{self.dst} lost: {exc!r}"))
        except asyncio.CancelledError:
            self._fail(NetworkError(f"connection {self.src}->{self.dst} closed"))
            raise

    def _ended(self, task: asyncio.Task[None]) -> None:
        # A task cancelled before its first step never ran _run's handlers.
        if not self.closed:
            self._fail(NetworkError(f"connection {self.src}->{self.dst} closed"))

    def _fail(self, err: BaseException) -> None:
        self.closed = True
        if not self.ready.done():
            self.ready.set_exception(err)
            self.ready.exception()  # retrieved: no "never retrieved" warning
        pending, self.pending = self.pending, {}
        for p in pending.values():
            if p.timer is not None:
                p.timer.cancel()
            self.t._deliver(self.src, p.callback, None, err)
        if self.out is not None:
            self.out.writer.transport.abort()
        self.t._forget(self)

    def request(self, msg: Any, callback: Callback, timeout_ms: int) -> None:
        corr = self.next_corr
        self.next_corr += 1

        def expire() -> None:
            p = self.pending.pop(corr, None)
            if p is not None:
                self.t._deliver(
                    self.src,
                    p.callback,
                    None,
                    RequestTimedOutError(
                        f"no response from node {self.dst} to {type(msg).__name__} within {timeout_ms} ms"
                    ),
                )

        timer = self.t.loop.call_later(timeout_ms / 1000.0, expire)
        self.pending[corr] = _PendingRequest(callback, timer)
        header, raw = encode(msg)
        blobs = _blobs_of(raw)
        if (
            not self.waiting
            and self.ready.done()
            and not self.closed
            and self.out is not None
            and self.ready.exception() is None
            and self.out.send_now(KIND_REQUEST, corr, header, blobs)
        ):
            return
        # Requests are written in the order they are made (a produce pipeline relies on it):
        # once one waits, later ones wait behind it.
        self.waiting += 1
        self.t.loop.create_task(self._send_when_ready(corr, header, blobs))

    async def _send_when_ready(self, corr: int, header: bytes, blobs: list[_Blob]) -> None:
        try:
            await self._write_when_ready(corr, header, blobs)
        finally:
            self.waiting -= 1

    async def _write_when_ready(self, corr: int, header: bytes, blobs: list[_Blob]) -> None:
        try:
            await self.ready
            assert self.out is not None
            await self.out.send(KIND_REQUEST, corr, header, blobs)
        except (OSError, ConnectionError, NetworkError, ssl_mod.SSLError) as exc:
            for b in blobs:
                for fd, _, _ in b.fds:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            p = self.pending.pop(corr, None)
            if p is not None:
                if p.timer is not None:
                    p.timer.cancel()
                self.t._deliver(
                    self.src, p.callback, None, exc if isinstance(exc, NetworkError) else NetworkError(repr(exc))
                )

    def close(self) -> None:
        if not self.task.done():
            self.task.cancel()


class TcpTransport:
    """The transport interface over asyncio TCP (see module docs). Create it on the loop that
    will run the nodes; ``listen`` starts a node's server, ``register`` a client endpoint."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        secret: bytes | str | None = None,
        server_ssl: ssl_mod.SSLContext | None = None,
        client_ssl: ssl_mod.SSLContext | None = None,
        connect_timeout_s: float = 5.0,
    ) -> None:
        self.loop = loop
        self.secret = secret.encode() if isinstance(secret, str) else secret
        self.server_ssl = server_ssl
        self.client_ssl = client_ssl
        self.connect_timeout_s = connect_timeout_s
        self.addresses: dict[int, tuple[str, int]] = {}
        #: Per directed link (src, dst), an address that wins over ``addresses[dst]`` (fault
        #: injection: a proxy listener per link), from ``SEGLOG_LINK_ADDRESSES``.
        self.link_addresses: dict[tuple[int, int], tuple[str, int]] = link_addresses_from_env()
        self._handlers: dict[int, Handler] = {}
        self._servers: dict[int, Listener] = {}
        self._server_conns: dict[int, set[asyncio.StreamWriter]] = {}
        self._conns: dict[tuple[int, int], _Conn] = {}
        self._paused: dict[int, list[Callable[[], None]]] = {}
        self.refused_handshakes = 0
        self._serving: set[asyncio.Task[None]] = set()

    # -- endpoints ---------------------------------------------------------------------------------

    async def listen(self, node_id: int, handler: Handler, host: str = "127.0.0.1", port: int = 0) -> tuple[str, int]:
        """Serve node ``node_id`` on ``host:port`` (0: any free port; an empty host: every
        interface); returns the address."""

        def made(proto: _FrameProtocol, transport: asyncio.BaseTransport) -> None:
            writer = asyncio.StreamWriter(transport, proto, None, self.loop)  # type: ignore[arg-type]
            conns = self._server_conns.get(node_id)
            if conns is None:  # the node went away between accept and now
                writer.transport.abort()
                return
            conns.add(writer)
            task = self.loop.create_task(self._serve(node_id, proto, writer))
            self._serving.add(task)
            # Whatever ends the task, even a cancel before its first step, closes its connection.
            task.add_done_callback(functools.partial(self._served, node_id, writer))

        listener = await Listener.open(self.loop, host, port, lambda: _FrameProtocol(self.loop, made), self.server_ssl)
        # Nothing is accepted before this returns (accepting runs in the loop's callbacks).
        self._handlers[node_id] = handler
        self._server_conns[node_id] = set()
        self._servers[node_id] = listener
        self.addresses[node_id] = listener.address
        return listener.address

    def set_address(self, node_id: int, address: str) -> None:
        """Learn where a node listens (``host:port``), e.g. from cluster metadata."""
        host, _, port = address.rpartition(":")
        if host and port.isdigit():
            self.addresses[node_id] = (host.strip("[]"), int(port))

    def register(self, node_id: int, handler: Handler) -> None:
        """The Transport interface: a node's handler (its server must be started with
        :meth:`listen`) or a client endpoint that only sends."""
        self._handlers[node_id] = handler

    def unregister(self, node_id: int) -> None:
        """Drop an endpoint abruptly: its server, its connections both ways."""
        self._handlers.pop(node_id, None)
        self._paused.pop(node_id, None)
        server = self._servers.pop(node_id, None)
        if server is not None:
            server.close()
        for w in self._server_conns.pop(node_id, set()):
            w.transport.abort()
        for key, conn in list(self._conns.items()):
            if node_id in key:
                conn.close()

    def request(self, src: int, dst: int, message: Any, callback: Callback, timeout_ms: int) -> None:
        if src not in self._handlers:
            return
        if dst not in self.addresses:
            self.loop.call_soon(self._deliver, src, callback, None, NetworkError(f"no address known for node {dst}"))
            return
        conn = self._conns.get((src, dst))
        if conn is None or conn.closed:
            conn = self._conns[(src, dst)] = _Conn(self, src, dst)
        conn.request(message, callback, timeout_ms)

    def _forget(self, conn: _Conn) -> None:
        if self._conns.get((conn.src, conn.dst)) is conn:
            del self._conns[(conn.src, conn.dst)]

    def _deliver(self, src: int, callback: Callback, resp: Any, err: BaseException | None) -> None:
        if src not in self._handlers:
            return  # the endpoint is gone: its callbacks die with it
        if src in self._paused:
            self._paused[src].append(lambda: self._deliver(src, callback, resp, err))
            return
        callback(resp, err)

    # -- pausing (a SIGSTOPped node) ---------------------------------------------------------------

    def pause(self, node_id: int) -> None:
        self._paused.setdefault(node_id, [])

    def resume(self, node_id: int) -> None:
        for fn in self._paused.pop(node_id, []):
            fn()

    # -- server side -------------------------------------------------------------------------------

    def _served(self, node_id: int, writer: asyncio.StreamWriter, task: asyncio.Task[None]) -> None:
        self._serving.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("node %d: serving a connection failed", node_id, exc_info=exc)
        conns = self._server_conns.get(node_id)
        if conns is not None:
            conns.discard(writer)
        writer.transport.abort()

    async def _serve(self, node_id: int, reader: _FrameProtocol, writer: asyncio.StreamWriter) -> None:
        out = _Writer(writer)
        try:
            kind, _, header, _ = await reader.read_frame()
            if kind != KIND_HELLO:
                raise ConnectionError("expected hello")
            src = int(json.loads(header)["node"])
            nonce = os.urandom(32)
            await out.send(KIND_CHALLENGE, 0, b"{}", [_Blob(data=nonce)])
            kind, _, _, blobs = await reader.read_frame()
            if kind != KIND_PROOF or len(blobs) != 1:
                raise ConnectionError("expected proof")
            if self.secret is not None and not hmac.compare_digest(blobs[0], proof_for(self.secret, nonce, src)):
                self.refused_handshakes += 1
                log.warning("node %d refused a connection claiming to be %d: wrong shared secret", node_id, src)
                raise ConnectionError("wrong shared secret")
            await out.send(KIND_WELCOME, 0, b"{}", [])
            while True:
                kind, corr, header, blobs = await reader.read_frame()
                if kind != KIND_REQUEST:
                    continue
                msg = decode(header, blobs)
                self._dispatch(node_id, src, msg, corr, out)
        except (OSError, ConnectionError, asyncio.IncompleteReadError, ssl_mod.SSLError, ValueError, KeyError):
            pass

    def _dispatch(self, node_id: int, src: int, msg: Any, corr: int, out: _Writer) -> None:
        if node_id in self._paused:
            self._paused[node_id].append(lambda: self._dispatch(node_id, src, msg, corr, out))
            return
        handler = self._handlers.get(node_id)
        if handler is None:
            return
        replied = [False]

        def reply(resp: Any) -> None:
            if replied[0] or node_id not in self._handlers:
                return
            replied[0] = True
            header, raw = encode(resp)
            blobs = _blobs_of(raw)  # zero copy: file descriptors taken now
            task = out.submit(KIND_RESPONSE, corr, header, blobs)
            if task is not None:
                task.add_done_callback(_ignore_connection_errors)

        handler(src, msg, reply)

    async def close(self) -> None:
        """Close every endpoint and connection, and wait (up to 5 s) until their tasks have ended
        and their sockets are closed."""
        for node_id in list(self._handlers):
            self.unregister(node_id)
        conns = list(self._conns.values())
        for conn in conns:
            conn.close()
        tasks = {c.task for c in conns} | self._serving
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        # The aborted transports close their sockets in callbacks queued by the steps just run.
        await asyncio.sleep(0)


def _ignore_connection_errors(task: asyncio.Task[None]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None and not isinstance(exc, (OSError, ConnectionError, ssl_mod.SSLError)):
        log.error("sending a response failed: %r", exc)
