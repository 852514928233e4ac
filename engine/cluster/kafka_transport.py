"""The transport between nodes over Kafka's protocol: every message of
:mod:`seglog.cluster.messages` travels as the Kafka request and response that
:mod:`seglog.cluster.kafka_messages` maps it to, on the receiving node's inter-broker listener.

The interface of :mod:`seglog.cluster.transport` (as the simulation's in-memory network has it): ``request`` calls its
callback exactly once, with the response or with :class:`~seglog.errors.NetworkError` (no
address, connection refused or lost) or :class:`~seglog.errors.RequestTimedOutError`;
handlers run on the loop's thread; ``pause``/``resume`` hold a node's requests and callbacks
as a SIGSTOP would.

Client side: one connection per (sender, destination, API), so that a follower's long-polling
Fetch never holds back the controller's LeaderAndIsr or a leader's AlterPartition (a Kafka
broker answers a connection's requests in order). A connection opens with ApiVersions and
checks that the peer serves each API at the version :data:`~seglog.cluster.kafka_messages.NODE_APIS`
sends; requests are pipelined (written at once, matched by correlation id); a lost connection
fails its requests and the next request opens a new one. A request that times out closes its
connection too, as in Kafka's clients (the rest of its requests fail with NetworkError): a peer
gone without a word, or a link that drops packets, never holds up the requests after it. The request header's client id is
``broker-<sender id>``. Responses are read straight into one buffer per frame, and fetched
record data is a view of it: the follower appends it without another copy.

Server side (:class:`InterBrokerListener`, a :class:`seglog.kafka.listener.KafkaListener`):
decodes the node APIs, hands the message to the node as ``handler(src, message, reply)`` with
``src`` the id the request names (Fetch's replica id, AlterPartition's broker id, the controller
id), else the one in the client id; it takes a connection's requests as they come and answers
them in order, so that pipelined produce requests are replicated together. Fetched record data
from ``SENDFILE_MIN`` bytes on goes from the segment files with ``os.sendfile``.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import ssl as ssl_mod
import struct
from collections.abc import Callable, Iterable
from typing import Any

from seglog._native.netbuf import uninitialized_bytearray
from seglog.cluster import kafka_messages as km
from seglog.cluster.kafka_listener import topic_id
from seglog.cluster.messages import (
    CreateTopicRequest,
    FetchRequest,
    LeaderAndIsrRequest,
    MetadataResponse,
    ProduceRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from seglog.cluster.netloop import connect_within, link_addresses_from_env
from seglog.cluster.transport import Callback, Handler
from seglog.errors import InvalidRequestError, NetworkError, RequestTimedOutError
from seglog.kafka import codec
from seglog.kafka.apis import API_VERSIONS
from seglog.kafka.codec import FileRegions, Message
from seglog.kafka.connection import INT32, CloseConnection, ConnState, read_frame, skip_tagged
from seglog.kafka.framestream import FrameStream
from seglog.kafka.gather import write_parts
from seglog.kafka.listener import KafkaListener, hold_records, unknown_id_name
from seglog.kafka.security import AuthenticationClosed, ScramClient

__all__ = [
    "INTER_BROKER_API_VERSIONS",
    "NODE_SASL_USER",
    "InterBrokerListener",
    "KafkaTransport",
    "node_security",
]

log = logging.getLogger("seglog.cluster.kafka_transport")

#: What the inter-broker listener serves: the node APIs at their one version, and ApiVersions.
INTER_BROKER_API_VERSIONS: dict[int, tuple[int, int]] = {
    18: API_VERSIONS[18],
    17: API_VERSIONS[17],
    36: API_VERSIONS[36],
    **{a.key: (a.version, a.version) for a in km.NODE_APIS},
}
_API_VERSIONS_VERSION = 3
_SASL_HANDSHAKE_VERSION = 1
_SASL_AUTHENTICATE_VERSION = 2


#: The SASL user nodes authenticate as when the cluster has a shared secret (its password).
NODE_SASL_USER = "seglog-node"
#: The SASL mechanism between nodes: SCRAM, so that the secret never crosses the wire.
NODE_SASL_MECHANISM = "SCRAM-SHA-256"


def node_security(secret: bytes | str | None, server_ssl: ssl_mod.SSLContext | None) -> dict[str, Any]:
    """:class:`KafkaTransport` options for a cluster with ``secret`` (SASL/SCRAM-SHA-256 as
    :data:`NODE_SASL_USER` with the secret as password, on SASL_PLAINTEXT or, with
    ``server_ssl``, SASL_SSL listeners) and/or TLS (SSL listeners)."""
    out: dict[str, Any] = {}
    if server_ssl is not None:
        out.update(security_protocol="SSL", ssl_context=server_ssl)
    if secret is not None:
        password = secret.decode() if isinstance(secret, bytes) else secret
        out.update(
            security_protocol="SASL_SSL" if server_ssl is not None else "SASL_PLAINTEXT",
            sasl_mechanisms=[NODE_SASL_MECHANISM],
            users={NODE_SASL_USER: password},
            sasl_user=NODE_SASL_USER,
            sasl_password=password,
        )
    return out


_HEADER = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
#: The largest response frame a connection takes (a fetch answer is bounded by its max_bytes).
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
#: Requests of one connection being handled at once; more wait to be read.
MAX_IN_FLIGHT = 1000
CLIENT_ID_PREFIX = "broker-"


def _client_id(src: int) -> bytes:
    return f"{CLIENT_ID_PREFIX}{src}".encode()


def _source(client_id: str) -> int | None:
    if not client_id.startswith(CLIENT_ID_PREFIX):
        return None
    rest = client_id[len(CLIENT_ID_PREFIX) :]
    return int(rest) if rest.lstrip("-").isdigit() else None


class _TopicNames:
    """Topic id -> name, learned from the names this transport's messages carry, and from
    ``lookup`` (names a node knows) for an id not learned yet."""

    def __init__(self) -> None:
        self.by_id: dict[bytes, str] = {}
        self.lookups: list[Callable[[], Iterable[str]]] = []

    def learn(self, names: Iterable[str]) -> None:
        for n in names:
            tid = topic_id(n)
            if tid not in self.by_id:
                self.by_id[tid] = n

    def learn_from(self, msg: Any) -> None:
        if isinstance(msg, (LeaderAndIsrRequest, UpdateMetadataRequest, MetadataResponse)):
            self.learn({p.topic for p in msg.partitions})
        elif isinstance(msg, StopReplicaRequest):
            self.learn({t for t, _ in msg.partitions})
        elif isinstance(msg, (CreateTopicRequest, ProduceRequest)):
            self.learn([msg.name if isinstance(msg, CreateTopicRequest) else msg.topic])

    def __call__(self, tid: bytes) -> str:
        tid = bytes(tid)
        name = self.by_id.get(tid)
        if name is None:
            for lookup in self.lookups:
                self.learn(lookup())
            name = self.by_id.get(tid)
        return name if name is not None else unknown_id_name(tid)


class _Pending:
    __slots__ = ("callback", "message", "timer")

    def __init__(self, message: Any, callback: Callback, timer: asyncio.TimerHandle) -> None:
        self.message = message
        self.callback = callback
        self.timer = timer


class _ResponseReader(asyncio.BufferedProtocol):
    """Reads size-prefixed response frames, each straight into a buffer of its own."""

    def __init__(self, conn: _Conn) -> None:
        self.conn = conn
        self.transport: asyncio.Transport | None = None
        self.head = bytearray(4)
        self.frame: bytearray | None = None
        self.pos = 0
        self.connected: asyncio.Future[None] = conn.t.loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        buf = self.head if self.frame is None else self.frame
        return memoryview(buf)[self.pos :]

    def buffer_updated(self, nbytes: int) -> None:
        self.pos += nbytes
        if self.frame is None:
            if self.pos < 4:
                return
            size = INT32.unpack(self.head)[0]
            if not 4 <= size <= MAX_RESPONSE_BYTES:
                self.conn.fail(NetworkError(f"node {self.conn.dst} sent a {size}-byte response frame"))
                return
            self.frame, self.pos = uninitialized_bytearray(size), 0
            return
        if self.pos == len(self.frame):
            frame, self.frame, self.pos = self.frame, None, 0
            self.conn.received(memoryview(frame))

    def eof_received(self) -> bool:
        self.conn.fail(NetworkError(f"node {self.conn.dst} closed the connection from {self.conn.src}"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn.fail(NetworkError(f"connection {self.conn.src}->{self.conn.dst} lost: {exc or 'closed'}"))


class _Conn:
    """One connection from endpoint ``src`` to node ``dst`` for one API."""

    def __init__(self, t: KafkaTransport, src: int, dst: int, api: km.NodeApi) -> None:
        self.t = t
        self.src = src
        self.dst = dst
        self.api = api
        self.proto: _ResponseReader | None = None
        self.pending: dict[int, _Pending] = {}
        self.queued: list[tuple[int, list[Any]]] = []  # requests made before the connection is ready
        self.next_corr = 1
        self.ready = False
        self.closed = False
        self.stage = "connecting"
        self.stage_corr = -1
        self.scram: ScramClient | None = None
        self.task = t.loop.create_task(self._open())

    async def _open(self) -> None:
        host, port = self.t.link_addresses.get((self.src, self.dst)) or self.t.addresses[self.dst]
        loop = self.t.loop
        try:
            connecting = loop.create_connection(
                lambda: _ResponseReader(self),
                host,
                port,
                ssl=self.t.client_ssl,
                server_hostname=host if self.t.client_ssl else None,
            )
            transport, proto = await connect_within(loop, connecting, self.t.connect_timeout_s)
        except (OSError, asyncio.TimeoutError, ssl_mod.SSLError) as exc:
            self.fail(NetworkError(f"cannot connect {self.src}->{self.dst} at {host}:{port}: {exc!r}"))
            return
        if self.closed:
            transport.abort()
            return
        self.proto = proto
        if self.t.sasl_user is not None:
            # SASL first (KIP-152): SaslHandshake v1, then SaslAuthenticate v2 (SCRAM's two rounds).
            self.stage = "handshake"
            self.stage_corr = self._write(
                17,
                _SASL_HANDSHAKE_VERSION,
                codec.encode("SaslHandshakeRequest", 1, {"mechanism": NODE_SASL_MECHANISM}),
            )
        else:
            self._ask_versions()

    def _ask_versions(self) -> None:
        """ApiVersions: the peer must serve the API at the version sent."""
        self.stage = "versions"
        self.stage_corr = self._write(
            18,
            _API_VERSIONS_VERSION,
            codec.encode(
                "ApiVersionsRequest",
                _API_VERSIONS_VERSION,
                {"client_software_name": "seglog", "client_software_version": "node"},
            ),
        )

    def _opening(self, frame: memoryview) -> None:
        """A response of the connection's opening: SASL's, then ApiVersions'."""
        if self.stage == "versions":
            self._check_versions(frame)
            return
        if self.stage == "handshake":
            body, _ = codec.decode("SaslHandshakeResponse", _SASL_HANDSHAKE_VERSION, frame, 4)
            if body["error_code"]:
                raise ValueError(
                    f"node {self.dst} does not take SASL/{NODE_SASL_MECHANISM} (error {body['error_code']}; "
                    f"mechanisms {', '.join(body['mechanisms'] or ())})"
                )
            self.scram = ScramClient(self.t.sasl_user or "", self.t.sasl_password or "")
            self._authenticate(self.scram.first())
            return
        body, _ = codec.decode("SaslAuthenticateResponse", _SASL_AUTHENTICATE_VERSION, frame, skip_tagged(frame, 4))
        if body["error_code"]:
            raise ValueError(f"node {self.dst} refused the authentication: {body['error_message']}")
        assert self.scram is not None
        token = bytes(body["auth_bytes"] or b"")
        if self.stage == "authenticate":
            self._authenticate(self.scram.final(token))
            self.stage = "authenticate-final"
            return
        self.scram.verify(token)  # the server knows the password too
        self._ask_versions()

    def _authenticate(self, token: bytes) -> None:
        self.stage = "authenticate"
        self.stage_corr = self._write(
            36,
            _SASL_AUTHENTICATE_VERSION,
            codec.encode("SaslAuthenticateRequest", _SASL_AUTHENTICATE_VERSION, {"auth_bytes": token}),
        )

    def _frame(self, key: int, version: int, body: list[Any]) -> tuple[int, list[Any]]:
        corr = self.next_corr
        self.next_corr += 1
        head = bytearray(4)
        cid = _client_id(self.src)
        head += _HEADER.pack(key, version, corr, len(cid)) + cid
        if key != 17:  # every version sent is flexible but SaslHandshake's
            head.append(0)  # request header v2: no tagged fields
        parts = [head, *body]
        INT32.pack_into(head, 0, sum(memoryview(p).nbytes for p in parts) - 4)
        return corr, parts

    def _write(self, key: int, version: int, body: list[Any]) -> int:
        corr, parts = self._frame(key, version, body)
        assert self.proto is not None and self.proto.transport is not None
        write_parts(self.proto.transport, parts)
        return corr

    def received(self, frame: memoryview) -> None:
        corr = INT32.unpack_from(frame, 0)[0]
        try:
            if corr == self.stage_corr:
                try:
                    self._opening(frame)
                except (InvalidRequestError, ValueError, KeyError, IndexError, struct.error) as exc:
                    self.fail(NetworkError(f"connection {self.src}->{self.dst}: {exc}"))
                return
            p = self.pending.pop(corr, None)
            if p is None:
                return  # timed out already
            p.timer.cancel()
            name = self.api.name + "Response"
            body, end = codec.decode(name, self.api.version, frame, skip_tagged(frame, 4))
            if end != len(frame):
                raise InvalidRequestError(f"{name} v{self.api.version} has {len(frame) - end} bytes past its end")
            resp = km.response_from_kafka(p.message, body)
        except (InvalidRequestError, ValueError, KeyError, TypeError, IndexError, struct.error) as exc:
            self.fail(NetworkError(f"node {self.dst} sent an undecodable {self.api.name} response: {exc}"))
            return
        self.t.names.learn_from(resp)
        self.t._deliver(self.src, p.callback, resp, None)

    def _check_versions(self, frame: memoryview) -> None:
        body, _ = codec.decode("ApiVersionsResponse", _API_VERSIONS_VERSION, frame, 4)
        if body["error_code"]:
            raise ValueError(f"ApiVersions error {body['error_code']}")
        served = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
        lo, hi = served.get(self.api.key, (0, -1))
        if not lo <= self.api.version <= hi:
            raise ValueError(
                f"node {self.dst} serves {self.api.name} "
                + (f"v{lo}-v{hi}" if hi >= 0 else "in no version")
                + f", not v{self.api.version}"
            )
        self.ready = True
        self.stage = "ready"
        self.stage_corr = -1
        queued, self.queued = self.queued, []
        assert self.proto is not None and self.proto.transport is not None
        for _, parts in queued:
            write_parts(self.proto.transport, parts)

    def request(self, msg: Any, callback: Callback, timeout_ms: int) -> None:
        _, body = km.request_to_kafka(msg)
        parts = codec.encode(self.api.name + "Request", self.api.version, body)
        corr, frame = self._frame(self.api.key, self.api.version, parts)

        def expire() -> None:
            p = self.pending.pop(corr, None)
            if p is None:
                return
            what = f"{type(msg).__name__} within {timeout_ms} ms"
            self.t._deliver(
                self.src, p.callback, None, RequestTimedOutError(f"no response from node {self.dst} to {what}")
            )
            # As Kafka's clients do, a connection on which a request timed out is closed:
            # whatever held that answer up (a peer gone without a FIN, a link that drops
            # packets, an opening that never finished) would hold up every later request on
            # it. Its other requests fail at once; the next request opens a new connection.
            if not self.task.done():
                self.task.cancel()
            self.fail(NetworkError(f"connection {self.src}->{self.dst} closed: node {self.dst} did not answer {what}"))

        self.pending[corr] = _Pending(msg, callback, self.t.loop.call_later(timeout_ms / 1000.0, expire))
        if self.ready and self.proto is not None and self.proto.transport is not None:
            write_parts(self.proto.transport, frame)
        else:
            self.queued.append((corr, frame))

    def fail(self, err: BaseException) -> None:
        if self.closed:
            return
        self.closed = True
        self.queued = []
        pending, self.pending = self.pending, {}
        for p in pending.values():
            p.timer.cancel()
            self.t._deliver(self.src, p.callback, None, err)
        if self.proto is not None and self.proto.transport is not None:
            self.proto.transport.abort()
        self.t._forget(self)

    def close(self) -> None:
        if not self.task.done():
            self.task.cancel()
        self.fail(NetworkError(f"connection {self.src}->{self.dst} closed"))


class InterBrokerListener(KafkaListener):
    """A node's inter-broker Kafka listener: the node APIs of :mod:`seglog.cluster.kafka_messages`,
    handed to ``dispatch(src, message, reply)``. Security options as
    :class:`~seglog.kafka.listener.KafkaListener`'s."""

    def __init__(
        self,
        dispatch: Callable[[int, Any, Callable[[Any], None]], None],
        names: Callable[[bytes], str],
        host: str = "127.0.0.1",
        port: int = 0,
        **options: Any,
    ) -> None:
        super().__init__(host, port, api_versions=INTER_BROKER_API_VERSIONS, **options)
        self.dispatch = dispatch
        self.names = names
        for api in km.NODE_APIS:
            self._handlers[api.key] = self._handler(api)

    def _handler(self, api: km.NodeApi) -> Any:
        async def handle(version: int, body: Message, state: ConnState) -> Message | None:
            return await self._node_request(api, body, state)

        return handle

    async def _node_request(self, api: km.NodeApi, body: Message, state: ConnState) -> Message | None:
        try:
            msg = km.request_from_kafka(api.key, body, self.names)
        except (ValueError, KeyError) as exc:
            raise CloseConnection(f"{api.name} between nodes: {exc}") from None
        src = km.request_source(msg)
        if src is None:
            src = _source(state.client_id)
        if src is None:
            raise CloseConnection(f"{api.name} from client id {state.client_id!r}, which names no node")
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def reply(resp: Any) -> None:
            if not fut.done():
                fut.set_result(resp)

        self.dispatch(src, msg, reply)
        if isinstance(msg, ProduceRequest) and msg.acks == 0:
            return None  # no answer, as Kafka
        resp = await fut
        out = km.response_to_kafka(msg, resp)
        if isinstance(msg, FetchRequest):
            hold_records(out["responses"])  # reads become bytes or file regions (sendfile)
        return out

    async def _serve_connection(self, reader: FrameStream, writer: asyncio.StreamWriter, state: ConnState) -> None:
        """Take requests as they come (each reaches the node at once, in order) and write the
        answers in the order of the requests, as Kafka's protocol wants."""
        if self.security.sasl:
            try:
                await self.security.authenticate(reader, writer, state, self.idle_ms)
            except AuthenticationClosed as exc:
                raise CloseConnection(str(exc)) from None
        answers: collections.deque[asyncio.Task[list[Any] | None]] = collections.deque()
        more = asyncio.Event()
        ended = asyncio.Event()  # no more requests will come
        loop = asyncio.get_running_loop()

        async def write() -> None:
            while answers or not ended.is_set():
                if not answers:
                    more.clear()
                    await more.wait()
                    continue
                response = await answers[0]
                answers.popleft()
                if response is not None:
                    await self._send(writer, response)

        async def read() -> None:
            while True:
                frame = await read_frame(
                    reader, self.idle_ms, self.max_request_bytes, "socket.request.max.bytes", body_idle=False
                )
                if frame is None:
                    return
                task = loop.create_task(self._request(memoryview(frame), state))
                task.add_done_callback(answered)
                answers.append(task)
                more.set()
                while len(answers) >= MAX_IN_FLIGHT:
                    await asyncio.sleep(0.001)

        failed: list[BaseException] = []

        def answered(task: asyncio.Task[list[Any] | None]) -> None:
            # A request that fails (a bad frame) ends the connection at once, even while an
            # earlier one still waits for the node.
            if not task.cancelled() and (exc := task.exception()) is not None and not failed:
                failed.append(exc)
                writing.cancel()

        reading, writing = loop.create_task(read()), loop.create_task(write())
        try:
            await asyncio.wait({reading, writing}, return_when=asyncio.FIRST_COMPLETED)
            if failed:
                raise failed[0]
            if writing.done():
                writing.result()
            reading.result()  # the peer closed: answer what was asked, then end
            ended.set()
            more.set()
            await writing
        finally:
            reading.cancel()
            writing.cancel()
            for side in (reading, writing):
                try:
                    await side
                except BaseException:  # noqa: BLE001 - ended either way; the error was raised above
                    pass
            for answer in answers:
                answer.cancel()
            for answer in answers:
                try:
                    response = await answer
                except BaseException:  # noqa: BLE001 - cancelled or failed: nothing to send
                    continue
                for part in response or ():
                    if type(part) is FileRegions:
                        part.close()


class KafkaTransport:
    """The transport interface over Kafka's protocol (see module docs). Create it on the loop
    that will run the nodes; ``listen`` starts a node's inter-broker listener, ``register`` a
    client endpoint that only sends. ``listener_options``: security options for the listeners
    (:class:`~seglog.kafka.listener.KafkaListener`: ``security_protocol``, ``ssl_context``,
    ``sasl_mechanisms``, ``users``). ``sasl_user`` / ``sasl_password``: SASL/SCRAM-SHA-256 credentials
    the connections to other nodes authenticate with (their listeners must take them)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        client_ssl: ssl_mod.SSLContext | None = None,
        connect_timeout_s: float = 5.0,
        sasl_user: str | None = None,
        sasl_password: str | None = None,
        **listener_options: Any,
    ) -> None:
        self.loop = loop
        self.client_ssl = client_ssl
        #: SASL/SCRAM-SHA-256 credentials this transport's connections authenticate with (None: none).
        self.sasl_user = sasl_user
        self.sasl_password = sasl_password
        self.connect_timeout_s = connect_timeout_s
        self.listener_options = listener_options
        self.addresses: dict[int, tuple[str, int]] = {}
        #: Per directed link (src, dst), an address that wins over ``addresses[dst]`` (fault
        #: injection: a proxy listener per link), from ``SEGLOG_LINK_ADDRESSES``.
        self.link_addresses: dict[tuple[int, int], tuple[str, int]] = link_addresses_from_env()
        self.names = _TopicNames()
        self._handlers: dict[int, Handler] = {}
        self._listeners: dict[int, InterBrokerListener] = {}
        self._conns: dict[tuple[int, int, int], _Conn] = {}
        self._paused: dict[int, list[Callable[[], None]]] = {}
        self._closing: set[asyncio.Task[None]] = set()

    # -- endpoints ---------------------------------------------------------------------------------

    async def listen(
        self,
        node_id: int,
        handler: Handler,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        topics: Callable[[], Iterable[str]] | None = None,
    ) -> tuple[str, int]:
        """Start node ``node_id``'s inter-broker listener on ``host:port`` (0: any free port);
        returns the address. ``topics``: the topic names the node knows (to map topic ids that
        no message seen here named yet)."""
        if topics is not None:
            self.names.lookups.append(topics)

        def dispatch(src: int, msg: Any, reply: Callable[[Any], None]) -> None:
            self.names.learn_from(msg)
            self._dispatch(node_id, src, msg, reply)

        listener = InterBrokerListener(dispatch, self.names, host, port, **self.listener_options)
        await listener.start()
        self._handlers[node_id] = handler
        self._listeners[node_id] = listener
        address = (listener.host if listener.host not in ("", "0.0.0.0", "::") else "127.0.0.1", listener.port)
        self.addresses[node_id] = address
        return address

    @property
    def security_protocol(self) -> str:
        """The security protocol of the listeners this transport starts (PLAINTEXT, SSL,
        SASL_PLAINTEXT or SASL_SSL)."""
        return str(self.listener_options.get("security_protocol", "PLAINTEXT")).upper()

    def set_address(self, node_id: int, address: str) -> None:
        """Learn where a node's inter-broker listener is (``host:port``)."""
        host, _, port = address.rpartition(":")
        if host and port.isdigit():
            self.addresses[node_id] = (host.strip("[]"), int(port))

    def register(self, node_id: int, handler: Handler) -> None:
        self._handlers[node_id] = handler

    def unregister(self, node_id: int) -> None:
        """Drop an endpoint abruptly: its listener and its connections both ways."""
        self._handlers.pop(node_id, None)
        self._paused.pop(node_id, None)
        listener = self._listeners.pop(node_id, None)
        if listener is not None:
            task = self.loop.create_task(listener.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        for key, conn in list(self._conns.items()):
            if node_id in key[:2]:
                conn.close()

    def request(self, src: int, dst: int, message: Any, callback: Callback, timeout_ms: int) -> None:
        if src not in self._handlers:
            return
        if dst not in self.addresses:
            self.loop.call_soon(self._deliver, src, callback, None, NetworkError(f"no address known for node {dst}"))
            return
        api = km.api_for(message)
        self.names.learn_from(message)
        key = (src, dst, api.key)
        conn = self._conns.get(key)
        if conn is None or conn.closed:
            conn = self._conns[key] = _Conn(self, src, dst, api)
        conn.request(message, callback, timeout_ms)

    def _forget(self, conn: _Conn) -> None:
        key = (conn.src, conn.dst, conn.api.key)
        if self._conns.get(key) is conn:
            del self._conns[key]

    def _deliver(self, src: int, callback: Callback, resp: Any, err: BaseException | None) -> None:
        if src not in self._handlers:
            return  # the endpoint is gone: its callbacks die with it
        if src in self._paused:
            self._paused[src].append(lambda: self._deliver(src, callback, resp, err))
            return
        callback(resp, err)

    def _dispatch(self, node_id: int, src: int, msg: Any, reply: Callable[[Any], None]) -> None:
        if node_id in self._paused:
            self._paused[node_id].append(lambda: self._dispatch(node_id, src, msg, reply))
            return
        handler = self._handlers.get(node_id)
        if handler is None:
            return
        handler(src, msg, reply)

    # -- pausing (a SIGSTOPped node) ---------------------------------------------------------------

    def pause(self, node_id: int) -> None:
        self._paused.setdefault(node_id, [])

    def resume(self, node_id: int) -> None:
        for fn in self._paused.pop(node_id, []):
            fn()

    async def close(self) -> None:
        """Close every listener and connection."""
        listeners = list(self._listeners.values())
        self._listeners.clear()
        for node_id in list(self._handlers):
            self.unregister(node_id)
        for conn in list(self._conns.values()):
            conn.close()
        for listener in listeners:
            await listener.close()
        if self._closing:
            await asyncio.wait(set(self._closing), timeout=5)
        await asyncio.sleep(0)
