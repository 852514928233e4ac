"""A Kafka protocol listener: the socket, framing, security and dispatch that every seglog
server speaking Kafka's protocol shares; what a request does is the subclass's (the one-node
broker on a store, :class:`seglog.kafka.server.KafkaServer`).

Framing: every request and response is a 4-byte big-endian size and that many bytes. A request
starts with Kafka's request header (v1: api key, api version, correlation id, client id; v2 adds
tagged fields, for flexible versions); a response with the response header (v0: correlation id;
v1 adds tagged fields; ApiVersions responses always use v0). Requests of a connection are
answered in order, one at a time, as a Kafka broker does (a long-polling Fetch holds the
connection's later requests back until it is answered).

Bad input: a frame over ``socket.request.max.bytes``, a header or body that does not parse, an
unknown API key or a version outside the served range (other than ApiVersions, which answers
UNSUPPORTED_VERSION in a v0 response, KIP-511) closes that connection only, logged once;
nothing is written for a request that was refused. A connection idle for
``connections.max.idle.ms`` is closed. Writes wait for the client to read (``drain``), so a
slow reader holds back only its own connection.

Responses may carry record data as :class:`seglog.kafka.codec.FileRegions`: it is sent from the
files (``os.sendfile``, or blocks read into buffers where the transport cannot, as under TLS).

Security (``seglog.kafka.security``): the listener may be TLS and/or require SASL, which runs on
a new connection before the request loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from seglog.errors import IllegalSaslStateError, InvalidRequestError, UnknownTopicIdError
from seglog.kafka import codec
from seglog.kafka.apis import API_NAMES, API_VERSIONS, api_versions_response
from seglog.kafka.codec import FileRegions, Message
from seglog.kafka.connection import INT32, REQUEST_HEADER, CloseConnection, ConnState, fmt_peer, read_frame, skip_tagged
from seglog.kafka.framestream import FrameConnection, FrameStream
from seglog.kafka.gather import raw_socket_fd, write_parts
from seglog.kafka.security import AuthenticationClosed, ListenerSecurity
from seglog.storage.log import LogReadResult
from seglog.util.loop import cancel_and_wait

__all__ = [
    "DEFAULT_IDLE_MS",
    "DEFAULT_MAX_REQUEST_BYTES",
    "SENDFILE_MIN",
    "UNKNOWN_ID",
    "Handler",
    "KafkaListener",
    "close_if_acks0_failed",
    "create_topics_result",
    "hold_records",
    "unknown_id_name",
    "unknown_topic_id_metadata",
]

log = logging.getLogger("seglog.kafka")

#: Kafka's ``socket.request.max.bytes`` default.
DEFAULT_MAX_REQUEST_BYTES = 104857600
#: Kafka's ``connections.max.idle.ms`` default.
DEFAULT_IDLE_MS = 600000
#: Whether TLS starts in each connection's task (``StreamWriter.start_tls``, Python 3.11+).
_TLS_IN_TASK = sys.version_info >= (3, 11)

#: A request handler: (api version, decoded request, the connection's state) -> the response
#: body, or None for no response (Produce with acks=0).
Handler = Callable[[int, Message, ConnState], Awaitable[Message | None]]


#: Starts the stand-in name of a topic id the server does not know (no topic name has it).
UNKNOWN_ID = "\x00"


def unknown_id_name(topic_id: bytes) -> str:
    """The stand-in name of an unknown topic id: the request is answered UNKNOWN_TOPIC_ID."""
    return UNKNOWN_ID + topic_id.hex()


def unknown_topic_id_metadata(name: str) -> Message:
    """Metadata's entry for a topic asked for by an id the server does not know."""
    return {
        "error_code": UnknownTopicIdError.code,
        "name": None,
        "topic_id": bytes.fromhex(name[len(UNKNOWN_ID) :]),
        "is_internal": False,
        "partitions": [],
    }


def create_topics_result(name: str) -> Message:
    """A CreateTopics result for topic ``name``, not filled in yet: no error, no topic id, no
    numbers or configs (what a failed topic is answered with, its error set)."""
    return {
        "name": name,
        "topic_id": bytes(16),
        "error_code": 0,
        "error_message": None,
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": None,
    }


def close_if_acks0_failed(responses: list[Message]) -> None:
    """A Produce with acks=0 gets no answer: as Kafka, a partition that failed closes the
    connection (the producer then refreshes its metadata and retries, or reports)."""
    failed = [
        f"{r['name']}-{p['index']}: error {p['error_code']}"
        for r in responses
        for p in r["partition_responses"]
        if p["error_code"]
    ]
    if failed:
        raise CloseConnection(f"acks=0 produce failed ({', '.join(failed)})")


#: Fetched record data below this size is copied into the response; from it on, the data is
#: sent from the segment files (``os.sendfile``). The replication transport's limit: a small
#: copy costs less than a sendfile's extra loop round and system calls. (``seglog bench``'s
#: kafka-consume shows no difference end to end either way: the clients are the bound.)
SENDFILE_MIN = 64 * 1024


def hold_records(responses: list[Any]) -> None:
    """Replace each partition's read (a ``LogReadResult``) by what the response sends: its
    bytes when small, else :class:`codec.FileRegions` over duplicated descriptors of the segment
    files, which stay valid (and keep no view of the mapped data) even if retention deletes or
    compaction replaces the segment before the data is sent."""
    for topic in responses:
        for out in topic["partitions"]:
            result = out["records"]
            if type(result) is not LogReadResult:
                continue
            if result.size < SENDFILE_MIN:
                out["records"] = result.to_bytes()
                continue
            regions: list[tuple[int, int, int]] = []
            try:
                for s in result.slices:
                    regions.append((os.dup(s.fd), s.position, s.length))
            except (OSError, ValueError):
                # A segment closed since the read (deleted by retention): send nothing for this
                # partition; the client fetches the same offset again.
                for fd, _, _ in regions:
                    os.close(fd)
                out["records"] = b""
                continue
            out["records"] = FileRegions(regions)


class KafkaListener:
    """Listen on ``host:port`` (port 0: any free port) and answer each request with the handler
    registered for its API key in ``_handlers`` (SaslHandshake and SaslAuthenticate are the
    listener's own). ``await start()``, then ``bootstrap_servers``; ``await close()`` stops
    listening and closes every connection. ``api_versions``: api key -> (lowest, highest)
    version served, as ApiVersions answers. ``security_protocol``, ``ssl_context``,
    ``sasl_mechanisms`` and ``users``: see :class:`seglog.kafka.security.ListenerSecurity`."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 9092,
        *,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        idle_ms: int = DEFAULT_IDLE_MS,
        security_protocol: str = "PLAINTEXT",
        ssl_context: Any = None,
        sasl_mechanisms: Any = None,
        users: Any = None,
        api_versions: dict[int, tuple[int, int]] = API_VERSIONS,
    ) -> None:
        self.host = host
        self.port = port
        #: ``socket.request.max.bytes``.
        self.max_request_bytes = max_request_bytes
        #: ``connections.max.idle.ms``.
        self.idle_ms = idle_ms
        self.api_versions = api_versions
        #: The listener's security (``seglog.kafka.security``): TLS context, SASL users.
        self.security = ListenerSecurity(
            security_protocol, ssl_context=ssl_context, sasl_mechanisms=sasl_mechanisms, users=users
        )
        self._server: asyncio.Server | None = None
        self._closing = False
        #: Each connection's task and writer.
        self._connections: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        #: Every accepted socket's transport until the connection is lost.
        self._transports: set[asyncio.Transport] = set()
        self._handlers: dict[int, Handler] = {17: self._sasl_handshake, 36: self._sasl_authenticate}

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        # From Python 3.11 TLS is started by each connection's task (below), not by the listener:
        # a listener's handshake runs before any task exists, so a connection the server closed
        # mid-handshake was never ended and its socket was left to the garbage collector
        # (Server.close leaves accepted connections open). So every accepted socket belongs to a
        # task from its first byte. Python 3.10 has no StreamWriter.start_tls: the listener's.
        loop = asyncio.get_running_loop()

        def protocol() -> _Connection:
            return _Connection(loop, self)

        self._server = await loop.create_server(
            protocol, self.host, self.port, ssl=None if _TLS_IN_TASK else self.security.ssl_context
        )
        sock = self._server.sockets[0].getsockname()
        self.port = sock[1]

    @property
    def bootstrap_servers(self) -> str:
        host = self.host if self.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        return f"{host}:{self.port}"

    async def close(self) -> None:
        if self._server is not None:
            self._closing = True
            await self._stop_accepting()
            self._server.close()
            # Connections accepted just before the close start on the next loop rounds (and
            # close themselves, seeing _closing); the others are ended here.
            for _ in range(3):
                await asyncio.sleep(0)
            # Each socket is ended as its task is cancelled: on Python 3.11 a cancellation that
            # meets a read completing at the same moment inside wait_for is lost, and the task
            # would read on.
            for writer in list(self._connections.values()):
                writer.transport.abort()
            if self._connections:
                await cancel_and_wait(list(self._connections), "the listener's connections")
            # Sockets whose task never ran (cancelled before its first step when the loop winds
            # down) or that were accepted as the listener closed: ended here, not left to the
            # garbage collector.
            for transport in list(self._transports):
                transport.abort()
            await asyncio.sleep(0)  # their connection_lost, which closes the sockets
            await self._server.wait_closed()
            self._server = None

    async def _stop_accepting(self) -> None:
        """Stop taking connections, then let those already accepted start (and close, seeing
        ``_closing``). On Python 3.11 a connection accepted just before ``Server.close`` but set
        up after it fails inside asyncio (the server refuses to attach it) and its socket is left
        open for the garbage collector; so no connection is set up after the close."""
        assert self._server is not None
        loop = asyncio.get_running_loop()
        for sock in self._server.sockets:
            try:
                loop.remove_reader(sock.fileno())
            except (NotImplementedError, ValueError, OSError):  # a loop without readers
                return
        for _ in range(3):
            await asyncio.sleep(0)

    async def serve_forever(self) -> None:
        assert self._server is not None
        await self._server.serve_forever()

    # -- connections ----------------------------------------------------------------------------

    async def _connection(self, reader: FrameStream, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if self._closing:
            writer.transport.abort()
            return
        self._connections[task] = writer
        peer = writer.get_extra_info("peername")
        state = ConnState(peer, writer.get_extra_info("sockname"))
        # Whether the stream's protocol hears of the socket's end: not while a TLS handshake is
        # unfinished (the TLS layer keeps it to itself), so then nothing waits for it.
        streams = self.security.ssl_context is None or not _TLS_IN_TASK
        try:
            if not streams:
                await self._start_tls(writer, state)
                streams = True
            await self._serve_connection(reader, writer, state)
        except CloseConnection as exc:
            state.warn(f"closing the connection: {exc}")
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:  # one connection's failure must not stop the server
            log.exception("Kafka connection from %s failed", peer)
        finally:
            self._connections.pop(task, None)
            if not streams:
                writer.transport.abort()
            else:
                writer.close()
                try:
                    await writer.wait_closed()
                except (ConnectionError, asyncio.CancelledError):
                    pass
                except Exception:  # noqa: BLE001
                    pass

    async def _start_tls(self, writer: asyncio.StreamWriter, state: ConnState) -> None:
        """The server side of the TLS handshake, within ``connections.max.idle.ms``. Nothing was
        read from the socket yet: the connection's task runs before its first read."""
        try:
            await writer.start_tls(  # type: ignore[attr-defined,unused-ignore]  # Python 3.11+
                self.security.ssl_context, ssl_handshake_timeout=self.idle_ms / 1000.0
            )
        except ssl.SSLError as exc:
            raise CloseConnection(f"the TLS handshake failed: {exc.reason or exc}") from None
        except (asyncio.TimeoutError, TimeoutError):
            raise CloseConnection(
                f"the TLS handshake did not finish within connections.max.idle.ms={self.idle_ms}"
            ) from None

    async def _serve_connection(self, reader: FrameStream, writer: asyncio.StreamWriter, state: ConnState) -> None:
        if self.security.sasl:
            try:
                user = await self.security.authenticate(reader, writer, state, self.idle_ms)
            except AuthenticationClosed as exc:
                raise CloseConnection(str(exc)) from None
            log.debug("Kafka client %s (client id %r) authenticated as %r", fmt_peer(state.peer), state.client_id, user)
        while True:
            frame = await read_frame(
                reader, self.idle_ms, self.max_request_bytes, "socket.request.max.bytes", body_idle=False
            )
            if frame is None:
                return
            if len(frame) < REQUEST_HEADER.size:
                raise CloseConnection(f"a frame of {len(frame)} bytes is too short for a request header")
            response = await self._request(memoryview(frame), state)
            if response is not None:
                await self._send(writer, response)

    async def _send(self, writer: asyncio.StreamWriter, response: list[Any]) -> None:
        """Write one response frame. Record data held as :class:`codec.FileRegions` goes from
        the segment files: ``os.sendfile`` on a plain socket, read in blocks into fresh buffers
        on a transport that cannot (TLS); its descriptors are closed afterwards."""
        total = 0
        files = False
        for part in response:
            if type(part) is FileRegions:
                total += part.nbytes
                files = True
            else:
                total += memoryview(part).nbytes
        if not files:
            write_parts(writer.transport, [INT32.pack(total), *response])
            await writer.drain()
            return
        try:
            loop = asyncio.get_running_loop()
            pending: list[Any] = [INT32.pack(total)]
            for part in response:
                if type(part) is not FileRegions:
                    pending.append(part)
                    continue
                write_parts(writer.transport, pending)
                pending = []
                for fd, pos, n in part.regions:
                    sent = await _send_region(loop, writer, fd, pos, n)
                    if sent != n:
                        # The segment file was truncated under us: the frame cannot be completed.
                        writer.transport.abort()
                        raise CloseConnection(f"sent {sent} of {n} bytes of a segment file region")
            write_parts(writer.transport, pending)
            await writer.drain()
        finally:
            for part in response:
                if type(part) is FileRegions:
                    part.close()

    async def _request(self, frame: memoryview, state: ConnState) -> list[Any] | None:
        api_key, version, correlation_id, client_len = REQUEST_HEADER.unpack_from(frame, 0)
        pos = REQUEST_HEADER.size
        if client_len > 0:
            if pos + client_len > len(frame):
                raise CloseConnection(
                    f"request header's client id of {client_len} bytes runs past the {len(frame)}-byte frame"
                )
            state.client_id = str(frame[pos : pos + client_len], "utf-8", "replace")
            pos += client_len
        name = API_NAMES.get(api_key)
        served = self.api_versions.get(api_key)
        if name is None or served is None:
            raise CloseConnection(f"unknown API key {api_key} (correlation id {correlation_id})")
        if api_key == 18:
            return api_versions_response(frame, pos, version, correlation_id, state, self.api_versions)
        if not served[0] <= version <= served[1]:
            raise CloseConnection(f"{name} v{version} is not served (versions {served[0]}-{served[1]})")
        flexible = codec.is_flexible(name + "Request", version)
        if flexible:
            pos = skip_tagged(frame, pos)
        try:
            request, end = codec.decode(name + "Request", version, frame, pos)
        except InvalidRequestError as exc:
            raise CloseConnection(str(exc)) from None
        if end != len(frame):
            # As Kafka's broker, bytes after a request's last field are ignored: librdkafka 2.x
            # writes three after its all-topics Metadata v12 (list_topics()).
            log.debug(
                "Kafka client %s (client id %r): %s v%d request has %d bytes past its end (ignored)",
                fmt_peer(state.peer),
                state.client_id,
                name,
                version,
                len(frame) - end,
            )
        handler = self._handlers.get(api_key)
        if handler is None:  # served in ApiVersions' table but not by this listener
            raise CloseConnection(f"{name} is not served by this listener")
        body = await handler(version, request, state)
        if body is None:
            return None
        out: list[Any] = [bytearray(INT32.pack(correlation_id))]
        if flexible:
            out[0].append(0)
        if api_key != 1:
            return codec.encode(name + "Response", version, body, out)
        try:
            return codec.encode(name + "Response", version, body, out)
        except BaseException:
            for topic in body["responses"]:  # the file regions' descriptors
                for part in topic["partitions"]:
                    if type(part["records"]) is FileRegions:
                        part["records"].close()
            raise

    # -- SASL after authentication (seglog.kafka.security runs it before) ---------------------

    async def _sasl_handshake(self, version: int, req: Message, state: ConnState) -> Message:
        return {"error_code": IllegalSaslStateError.code, "mechanisms": self.security.mechanisms}

    async def _sasl_authenticate(self, version: int, req: Message, state: ConnState) -> Message:
        why = (
            "the connection has authenticated already"
            if self.security.sasl
            else f"this is a {self.security.protocol} listener"
        )
        return {
            "error_code": IllegalSaslStateError.code,
            "error_message": f"SaslAuthenticate outside SASL authentication: {why}",
            "auth_bytes": b"",
            "session_lifetime_ms": 0,
        }


#: Block size of the buffered path for transports that cannot sendfile.
_SEND_BLOCK = 256 * 1024


def _sendfile_now(transport: asyncio.BaseTransport, fd: int, pos: int, n: int) -> tuple[int, bool]:
    """What ``os.sendfile`` sends of the region at once, without blocking, on a plain socket
    transport with nothing queued to write (0: not that kind of transport, a full socket
    buffer, or a write queued before it; the caller sends the rest through the loop). The
    loop's own ``sendfile`` first pauses the transport and waits for its queue to drain in
    several tasks' steps, which cost more than the system call for a fetch's megabyte.
    Returns the bytes sent, and whether the file ended before ``n`` bytes (truncated under
    the read)."""
    out = raw_socket_fd(transport)
    if out < 0:
        return 0, False
    sent = 0
    try:
        while sent < n:
            got = os.sendfile(out, fd, pos + sent, n - sent)
            if got == 0:
                return sent, True
            sent += got
    except (BlockingIOError, InterruptedError):
        pass
    return sent, False


async def _send_region(loop: asyncio.AbstractEventLoop, writer: asyncio.StreamWriter, fd: int, pos: int, n: int) -> int:
    """Send ``n`` bytes of the file ``fd`` from ``pos``: ``os.sendfile`` where the transport is
    a plain socket, else (TLS, or any other transport) read in blocks into fresh buffers that
    the transport may keep, each written once the previous one drained. Returns the bytes sent
    (fewer only if the file ends first)."""
    done, ended = _sendfile_now(writer.transport, fd, pos, n)
    if done == n or ended:
        return done
    with os.fdopen(fd, "rb", closefd=False) as f:
        try:
            return done + await loop.sendfile(writer.transport, f, pos + done, n - done, fallback=False)
        except (RuntimeError, asyncio.SendfileNotAvailableError):
            # Raised before anything was sent: this transport cannot sendfile.
            if writer.transport.is_closing():
                raise ConnectionError("the connection is closing") from None
    sent = done
    while sent < n:
        buf = bytearray(min(_SEND_BLOCK, n - sent))
        got = os.preadv(fd, [buf], pos + sent)
        if got <= 0:
            break
        writer.write(buf if got == len(buf) else memoryview(buf)[:got])
        sent += got
        await writer.drain()
    return sent


class _Connection(FrameConnection):
    """A connection's protocol (:class:`FrameConnection`) running
    :meth:`KafkaListener._connection`, with the transport known to the server from the moment the
    socket is accepted until it is lost, and ended at once if the server is closing."""

    def __init__(self, loop: asyncio.AbstractEventLoop, server: KafkaListener) -> None:
        super().__init__(loop, server._connection)
        self._owner = server
        self._tracked: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        assert isinstance(transport, asyncio.Transport)
        self._tracked = transport
        self._owner._transports.add(transport)
        if self._owner._closing:
            transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._tracked is not None:
            self._owner._transports.discard(self._tracked)
        super().connection_lost(exc)
