"""The client side of Kafka's protocol: connections to Kafka brokers (seglog's listener or
Apache Kafka's), and a client that routes partition requests to their leaders.

:class:`BrokerConnection` is one TCP (or TLS) connection. It opens with ApiVersions and picks,
for each API, the highest version both sides know (a broker that does not know the ApiVersions
version asked answers v0 with UNSUPPORTED_VERSION and its versions, KIP-511, and the request is
sent again in the highest version it knows). Requests are pipelined: each gets a correlation
id, is written at once, and its response (the broker answers in order) completes its future.
Responses use header v0, or v1 with tagged fields for a flexible version, except ApiVersions,
whose response header is always v0.

:class:`KafkaClient` keeps a metadata cache and one connection per broker and sends Produce,
Fetch and ListOffsets to each partition's leader, refreshing the metadata and retrying a
retriable error (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, a lost connection before the
request was written) up to its deadline. Record data goes in and comes out as bytes in Kafka's
RecordBatch format: :func:`seglog.storage.records.encode_batch` makes them and
:func:`seglog.storage.records.decode_records` / ``decode_columns`` read them.

Errors: a refused or timed-out connection raises :class:`BrokerNotAvailableError` naming the
address; a broker error is the :class:`~seglog.errors.KafkaError` of its code, naming the topic
and partition; a response larger than ``max_response_bytes`` closes the connection and fails
its requests with :class:`InvalidRequestError` naming the limit.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.metadata
import itertools
import ssl
import struct
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from seglog.errors import (
    BrokerNotAvailableError,
    InvalidRequestError,
    KafkaError,
    LeaderNotAvailableError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    RequestTimedOutError,
    SaslAuthenticationError,
    SslAuthenticationError,
    UnsupportedVersionError,
    error_for_code,
    make_error,
)
from seglog.kafka import codec
from seglog.kafka._schemas import MESSAGES
from seglog.kafka.apis import API_NAMES
from seglog.kafka.codec import Message
from seglog.kafka.connection import INT32, skip_tagged
from seglog.kafka.gather import write_parts
from seglog.kafka.security import ScramClient

__all__ = [
    "EARLIEST",
    "LATEST",
    "BrokerConnection",
    "FetchedPartition",
    "KafkaClient",
    "PartitionLeader",
    "ProduceResult",
]

#: ListOffsets' special timestamps.
LATEST = -1
EARLIEST = -2

_API_KEYS = {name: key for key, name in API_NAMES.items()}
_HEADER = struct.Struct(">hhi")  # api key, api version, correlation id
#: The ApiVersions version asked first (its highest layout known here).
_API_VERSIONS_VERSION = codec.message_versions("ApiVersionsRequest")[1]
#: Kafka's default for a client's largest response (``fetch.max.bytes`` and then some).
DEFAULT_MAX_RESPONSE_BYTES = 100 * 1024 * 1024


@functools.cache
def _software_version() -> str:
    """seglog's installed version, as ApiVersions tells the broker (KIP-511)."""
    try:
        return importlib.metadata.version("seglog")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _broker_error(code: int, what: str, address: str, detail: str | None = None, **fields: Any) -> KafkaError:
    """The error of ``code`` in a response to ``what`` from the broker at ``address``: Kafka's
    name for it, the broker's message (or the code's description) and where it came from
    (``fields``: the error's location fields, such as ``offset``)."""
    cls = error_for_code(code)
    return make_error(
        code, f"{what} failed at the Kafka broker {address}: {cls.name}: {detail or cls.description}", **fields
    )


def _parse_address(address: str) -> tuple[str, int]:
    host, sep, port = address.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"a broker address must be host:port, got {address!r}")
    return host.strip("[]"), int(port)


def _produce_body(topic: str, partition: int, records: Any, acks: int, timeout_ms: int) -> Message:
    if acks not in (-1, 0, 1):
        raise ValueError(f"acks must be -1 (all), 0 or 1, got {acks!r}")
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": timeout_ms,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    }


class BrokerConnection:
    """One connection to a Kafka broker. Open it with :meth:`open`; ``await request(api,
    message)`` sends a request in the version negotiated for that API and returns the decoded
    response body (a dict of snake_case fields, as :mod:`seglog.kafka.codec` gives them)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        address: str,
        client_id: str,
        max_response_bytes: int,
    ) -> None:
        self.address = address
        self.client_id = client_id
        self.max_response_bytes = max_response_bytes
        #: api key -> the version used for it (the highest both sides know), after :meth:`open`.
        self.versions: dict[int, int] = {}
        #: api key -> (lowest, highest) version the broker serves, after :meth:`open`.
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self._reader = reader
        self._writer = writer
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[asyncio.Future[Message], str, int]] = {}
        self._error: BaseException | None = None
        self._client_id = client_id.encode()
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def open(
        cls,
        address: str,
        *,
        client_id: str = "seglog",
        ssl_context: ssl.SSLContext | None = None,
        timeout: float = 10.0,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        sasl: tuple[str, str, str] | None = None,
    ) -> BrokerConnection:
        """Connect to ``address`` (``host:port``) and agree on API versions; with ``sasl``
        (mechanism — PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 —, user name, password),
        authenticate (SaslHandshake v1, then SaslAuthenticate), raising
        ``SaslAuthenticationError`` when the broker refuses."""
        host, port = _parse_address(address)
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, ssl=ssl_context, limit=1 << 16), timeout
            )
        except ssl.SSLCertVerificationError as exc:
            raise SslAuthenticationError(
                f"cannot connect to the Kafka broker at {address}: its TLS certificate is not trusted "
                f"({exc.verify_message}; is the CA given the one that signed it, and does it name {host}?)"
            ) from None
        except (OSError, asyncio.TimeoutError) as exc:
            why = "timed out" if isinstance(exc, asyncio.TimeoutError) else str(exc) or type(exc).__name__
            raise BrokerNotAvailableError(f"cannot connect to the Kafka broker at {address}: {why}") from None
        conn = cls(reader, writer, address, client_id, max_response_bytes)
        try:
            await asyncio.wait_for(conn._negotiate(), timeout)
            if sasl is not None:
                await asyncio.wait_for(conn._authenticate(*sasl), timeout)
        except BaseException as exc:
            await conn.close()
            if isinstance(exc, asyncio.TimeoutError):
                raise BrokerNotAvailableError(
                    f"the Kafka broker at {address} did not answer ApiVersions"
                    + (" or SASL authentication" if sasl is not None else "")
                    + f" within {timeout} s"
                ) from None
            raise
        return conn

    async def _negotiate(self) -> None:
        version = _API_VERSIONS_VERSION
        body: Message = {"client_software_name": "seglog", "client_software_version": _software_version()}
        for _ in range(2):
            resp = await self._call("ApiVersions", body, version)
            if resp["error_code"] == UnsupportedVersionError.code:
                served = [k["max_version"] for k in resp["api_keys"] if k["api_key"] == 18]
                if not served or min(served[0], _API_VERSIONS_VERSION) == version:
                    break
                version = min(served[0], _API_VERSIONS_VERSION)
                continue
            if resp["error_code"]:
                raise _broker_error(resp["error_code"], "ApiVersions", self.address)
            self.broker_versions = {k["api_key"]: (k["min_version"], k["max_version"]) for k in resp["api_keys"]}
            for key, (lo, hi) in self.broker_versions.items():
                name = API_NAMES.get(key)
                if name is None or name + "Request" not in MESSAGES:
                    continue
                ours = codec.message_versions(name + "Request")
                if max(lo, ours[0]) <= min(hi, ours[1]):
                    self.versions[key] = min(hi, ours[1])
            return
        raise UnsupportedVersionError(f"the Kafka broker at {self.address} answers no ApiVersions version known here")

    async def _authenticate(self, mechanism: str, user: str, password: str) -> None:
        resp = await self._call("SaslHandshake", {"mechanism": mechanism}, 1)
        if resp["error_code"]:
            served = ", ".join(resp.get("mechanisms") or ()) or "none"
            raise _broker_error(
                resp["error_code"], "SaslHandshake", self.address, f"{mechanism} is not enabled (enabled: {served})"
            )
        what = f"SASL/{mechanism} as {user!r}"
        if mechanism == "PLAIN":
            await self._sasl_step(what, b"\0" + user.encode() + b"\0" + password.encode())
            return
        # SCRAM (RFC 5802, 7677): client-first, server-first, client-final, server-final.
        scram = ScramClient(user, password, {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism])
        try:
            final = scram.final(await self._sasl_step(what, scram.first()))
            scram.verify(await self._sasl_step(what, final))
        except ValueError as exc:
            raise SaslAuthenticationError(f"{what}: the Kafka broker at {self.address}: {exc}") from None

    async def _sasl_step(self, what: str, token: bytes) -> bytes:
        resp = await self.request("SaslAuthenticate", {"auth_bytes": token})
        if resp["error_code"]:
            raise _broker_error(resp["error_code"], what, self.address, resp.get("error_message"))
        return bytes(resp.get("auth_bytes") or b"")

    def version(self, api: str) -> int:
        """The version used for ``api`` (a name such as ``"Fetch"``); raises
        :class:`UnsupportedVersionError` if the broker and seglog share none."""
        key = _API_KEYS[api]
        v = self.versions.get(key)
        if v is None:
            served = self.broker_versions.get(key)
            ours = codec.message_versions(api + "Request")
            raise UnsupportedVersionError(
                f"the Kafka broker at {self.address} serves {api} "
                + (f"v{served[0]}-v{served[1]}" if served else "in no version")
                + f"; seglog speaks v{ours[0]}-v{ours[1]}"
            )
        return v

    async def request(
        self, api: str, message: Message, *, version: int | None = None, timeout: float | None = None
    ) -> Message:
        """Send ``message`` as an ``api`` request and return the response body. With
        ``timeout`` (seconds) a response that does not come in time closes the connection, as
        Kafka's clients close it (``request.timeout.ms``): this request raises
        :class:`RequestTimedOutError`, the others waiting on the connection
        :class:`BrokerNotAvailableError`."""
        call = self._call(api, message, self.version(api) if version is None else version)
        if timeout is None:
            return await call
        try:
            return await asyncio.wait_for(call, timeout)
        except asyncio.TimeoutError:
            late = RequestTimedOutError(
                f"the Kafka broker at {self.address} did not answer {api} within {timeout:g} s; "
                "the connection is closed"
            )
            self._fail(BrokerNotAvailableError(f"the connection to the Kafka broker at {self.address} timed out"))
            self._writer.transport.abort()
            raise late from None

    def send(self, api: str, message: Message, *, version: int | None = None) -> None:
        """Send a request that gets no response (Produce with ``acks=0``)."""
        self._write(api, message, self.version(api) if version is None else version, None)

    def _write(self, api: str, message: Message, version: int, fut: asyncio.Future[Message] | None) -> int:
        if self._error is not None:
            raise BrokerNotAvailableError(
                f"the connection to the Kafka broker at {self.address} is closed: {self._error}"
            )
        key = _API_KEYS[api]
        cid = next(self._ids)
        head = bytearray(4)  # the frame's size, set below
        head += _HEADER.pack(key, version, cid)
        head += struct.pack(">h", len(self._client_id)) + self._client_id
        if codec.is_flexible(api + "Request", version):
            head.append(0)  # request header v2: no tagged fields
        parts = codec.encode(api + "Request", version, message, [head])
        INT32.pack_into(parts[0], 0, sum(len(p) for p in parts) - 4)
        if fut is not None:
            self._pending[cid] = (fut, api, version)
        write_parts(self._writer.transport, parts)
        return cid

    async def _call(self, api: str, message: Message, version: int) -> Message:
        fut: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._write(api, message, version, fut)
        try:
            await self._writer.drain()
        except OSError as exc:
            self._fail(BrokerNotAvailableError(f"the connection to the Kafka broker at {self.address} failed: {exc}"))
        return await fut

    async def _read_loop(self) -> None:
        try:
            while True:
                size = INT32.unpack(await self._reader.readexactly(4))[0]
                if not 4 <= size <= self.max_response_bytes:
                    raise InvalidRequestError(
                        f"the Kafka broker at {self.address} sent a {size}-byte response",
                        limit=self.max_response_bytes,
                    )
                frame = memoryview(await self._reader.readexactly(size))
                cid = INT32.unpack_from(frame, 0)[0]
                entry = self._pending.pop(cid, None)
                if entry is None:
                    raise InvalidRequestError(
                        f"the Kafka broker at {self.address} answered correlation id {cid}, which no request has"
                    )
                fut, api, version = entry
                pos = 4
                if api != "ApiVersions" and codec.is_flexible(api + "Response", version):
                    pos = skip_tagged(frame, pos)
                elif (
                    api == "ApiVersions"
                    and len(frame) >= 6
                    and struct.unpack_from(">h", frame, 4)[0] == UnsupportedVersionError.code
                ):
                    version = 0  # KIP-511: a version the broker does not know is answered in v0
                body, end = codec.decode(api + "Response", version, frame, pos)
                if end != len(frame):
                    raise InvalidRequestError(
                        f"the Kafka broker at {self.address} sent {api} v{version} with {len(frame) - end} "
                        "bytes past its end"
                    )
                if not fut.done():
                    fut.set_result(body)
        except asyncio.IncompleteReadError:
            self._fail(BrokerNotAvailableError(f"the Kafka broker at {self.address} closed the connection"))
        except OSError as exc:
            self._fail(BrokerNotAvailableError(f"the connection to the Kafka broker at {self.address} failed: {exc}"))
        except KafkaError as exc:
            self._fail(exc)
        except asyncio.CancelledError:
            self._fail(BrokerNotAvailableError(f"the connection to the Kafka broker at {self.address} was closed"))
            raise
        finally:
            self._writer.transport.abort()

    def _fail(self, exc: BaseException) -> None:
        self._error = exc
        pending, self._pending = self._pending, {}
        for fut, _, _ in pending.values():
            if not fut.done():
                fut.set_exception(exc)

    @property
    def closed(self) -> bool:
        return self._error is not None or self._read_task.done()

    async def close(self) -> None:
        """Close the connection; requests still waiting fail with BrokerNotAvailableError."""
        self._read_task.cancel()
        try:
            await self._read_task
        except asyncio.CancelledError:
            pass
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except (OSError, asyncio.CancelledError):
            pass

    def __repr__(self) -> str:
        return f"<BrokerConnection {self.address} ({'closed' if self.closed else 'open'})>"


@dataclass(frozen=True)
class PartitionLeader:
    """A partition in the metadata: its leader's node id (-1: none), epoch and replicas."""

    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class ProduceResult:
    """The broker's answer to a produced batch."""

    base_offset: int
    log_append_time: int
    log_start_offset: int


@dataclass(frozen=True)
class FetchedPartition:
    """A partition's part of a Fetch response: the record batches (bytes, possibly ending in a
    partial batch that a larger ``max_bytes`` completes) and the offsets the leader reported."""

    records: bytes
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: tuple[tuple[int, int], ...] = ()


class KafkaClient:
    """A client of a Kafka cluster (or one seglog listener): ``await KafkaClient.open("host:port")``.

    Methods send each partition's request to its leader and raise the
    :class:`~seglog.errors.KafkaError` of a non-retriable error code; retriable ones (and a
    connection lost before a request went out) refresh the metadata and retry until
    ``request_timeout`` seconds have passed."""

    def __init__(
        self,
        bootstrap: Sequence[str],
        *,
        client_id: str = "seglog",
        ssl_context: ssl.SSLContext | None = None,
        request_timeout: float = 30.0,
        retry_backoff: float = 0.1,
        sasl: tuple[str, str, str] | None = None,
    ) -> None:
        if not bootstrap:
            raise ValueError("no bootstrap servers given")
        for address in bootstrap:
            _parse_address(address)
        self.bootstrap = list(bootstrap)
        self.client_id = client_id
        self.ssl_context = ssl_context
        self.request_timeout = request_timeout
        self.retry_backoff = retry_backoff
        #: (mechanism, user name, password) every connection authenticates with, or None.
        self.sasl = sasl
        #: node id -> "host:port", from the last metadata.
        self.brokers: dict[int, str] = {}
        #: (topic, partition) -> its leader, from the last metadata.
        self.partitions: dict[tuple[str, int], PartitionLeader] = {}
        #: Topic ids (16 bytes) from the metadata, for requests that name topics by id (Fetch v13+).
        self.topic_ids: dict[str, bytes] = {}
        #: Topic -> its partition count, from the last metadata that had the topic.
        self.topic_partitions: dict[str, int] = {}
        #: The controller's node id in the last metadata (-1: none named).
        self.controller_id = -1
        self._connections: dict[str, BrokerConnection] = {}
        self._opening: dict[str, asyncio.Future[BrokerConnection]] = {}
        self._last_address = self.bootstrap[0]  # the broker that gave the last metadata
        self._closed = False

    @classmethod
    async def open(cls, bootstrap: str | Sequence[str], **options: Any) -> KafkaClient:
        """A client of the brokers ``bootstrap`` (``"host:port,host:port"`` or a list), with
        its first metadata fetched."""
        servers = [s for s in bootstrap.split(",") if s.strip()] if isinstance(bootstrap, str) else list(bootstrap)
        client = cls(servers, **options)
        try:
            await client.refresh_metadata()
        except BaseException:
            await client.close()
            raise
        return client

    async def connection(self, address: str) -> BrokerConnection:
        """The open connection to ``address``, opened if there is none (callers that ask at
        the same time share one opening)."""
        if self._closed:
            raise RuntimeError("the Kafka client is closed")
        conn = self._connections.get(address)
        if conn is not None and not conn.closed:
            return conn
        opening = self._opening.get(address)
        if opening is None:
            opening = asyncio.ensure_future(self._open(address))
            self._opening[address] = opening
            opening.add_done_callback(functools.partial(self._opened, address))
        return await asyncio.shield(opening)

    def _opened(self, address: str, fut: asyncio.Future[BrokerConnection]) -> None:
        self._opening.pop(address, None)
        if not fut.cancelled():
            fut.exception()  # retrieved: a caller that gave up waiting has not seen it

    async def _open(self, address: str) -> BrokerConnection:
        old = self._connections.pop(address, None)
        if old is not None:
            await old.close()  # the failed one's socket, before its replacement
        conn = await BrokerConnection.open(
            address,
            client_id=self.client_id,
            ssl_context=self.ssl_context,
            timeout=self.request_timeout,
            sasl=self.sasl,
        )
        if self._closed:
            await conn.close()
            raise RuntimeError("the Kafka client is closed")
        self._connections[address] = conn
        return conn

    def _candidates(self) -> list[str]:
        """Brokers to ask for metadata, in order: the one that answered last, the others the
        metadata names, the bootstrap addresses."""
        return list(dict.fromkeys([self._last_address, *self.brokers.values(), *self.bootstrap]))

    async def _any_connection(self) -> BrokerConnection:
        errors: list[str] = []
        for address in self._candidates():
            try:
                return await self.connection(address)
            except BrokerNotAvailableError as exc:
                errors.append(str(exc))
        raise BrokerNotAvailableError("no Kafka broker could be reached: " + "; ".join(errors))

    async def refresh_metadata(self, topics: Iterable[str] | None = None) -> Message:
        """Fetch the metadata (of ``topics``, or of every topic) and update the cache. Asks the
        brokers in turn (the one that answered last first) until one answers within the
        client's ``request_timeout``; raises :class:`BrokerNotAvailableError` naming why each
        did not."""
        body: Message = {
            "topics": None if topics is None else [{"name": t, "topic_id": bytes(16)} for t in topics],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }
        errors: list[str] = []
        untrusted = False
        for address in self._candidates():
            try:
                conn = await self.connection(address)
                resp = await conn.request("Metadata", body, timeout=self.request_timeout)
                break
            except (BrokerNotAvailableError, RequestTimedOutError) as exc:
                errors.append(str(exc))
                untrusted |= isinstance(exc, SslAuthenticationError)
        else:
            # A certificate this client does not trust stays untrusted: fatal, as in Kafka's
            # clients, rather than retried until a deadline.
            raise (SslAuthenticationError if untrusted else BrokerNotAvailableError)(
                "no Kafka broker answered Metadata: " + "; ".join(errors)
            )
        self._last_address = conn.address
        self.brokers = {b["node_id"]: f"{b['host']}:{b['port']}" for b in resp["brokers"]}
        self.controller_id = resp.get("controller_id", -1)
        if topics is None:  # every topic: those not named are gone
            named = {t["name"] for t in resp["topics"]}
            for gone in [t for t in self.topic_partitions if t not in named]:
                self._forget_topic(gone)
        for t in resp["topics"]:
            if t["error_code"]:
                if t["error_code"] == 3:  # UNKNOWN_TOPIC_OR_PARTITION
                    self._forget_topic(t["name"])
                continue
            if t.get("topic_id"):
                self.topic_ids[t["name"]] = t["topic_id"]
            self._forget_topic(t["name"])
            self.topic_partitions[t["name"]] = len(t["partitions"])
            for p in t["partitions"]:
                self.partitions[(t["name"], p["partition_index"])] = PartitionLeader(
                    p["leader_id"],
                    p.get("leader_epoch", -1),
                    tuple(p["replica_nodes"]),
                    tuple(p["isr_nodes"]),
                )
        return resp

    def _forget_topic(self, name: str) -> None:
        self.topic_partitions.pop(name, None)
        for key in [k for k in self.partitions if k[0] == name]:
            del self.partitions[key]

    async def leader(self, topic: str, partition: int) -> BrokerConnection:
        """The connection to the partition's leader as the metadata names it (the topic's
        metadata fetched first when it is not cached); raises the topic's error,
        UNKNOWN_TOPIC_OR_PARTITION for a partition it does not have, LEADER_NOT_AVAILABLE when
        it has no leader (the cached entry is forgotten, so the next call asks again)."""
        info = self.partitions.get((topic, partition))
        if info is None:
            resp = await self.refresh_metadata([topic])
            for t in resp["topics"]:
                if t["name"] == topic and t["error_code"]:
                    raise _broker_error(t["error_code"], f"Metadata of topic {topic!r}", self._last_address)
            info = self.partitions.get((topic, partition))
            if info is None:
                count = sum(1 for (t, _) in self.partitions if t == topic)
                raise make_error(3, f"topic {topic!r} has no partition {partition} (it has {count})")
        address = self.brokers.get(info.leader)
        if address is None:
            self.partitions.pop((topic, partition), None)
            raise make_error(5, f"{topic}-{partition} has no leader (leader id {info.leader})")
        return await self.connection(address)

    async def _with_leader(self, topic: str, partition: int, api: str, call: Any, *, resend: bool = True) -> Any:
        """Run ``call(connection)`` against the partition's leader, retrying retriable errors
        until the deadline. With ``resend=False`` (a write that is not idempotent) a request that
        went out is sent again only after an error that says it was not written."""
        deadline = time.monotonic() + self.request_timeout
        while True:
            try:
                conn = await self.leader(topic, partition)
            except BrokerNotAvailableError as err:  # nothing was sent
                exc: KafkaError = err
            else:
                try:
                    resp = await call(conn)
                except BrokerNotAvailableError as err:
                    exc = err
                    if not resend:
                        raise
                else:
                    code = resp["error_code"]
                    if code == 0:
                        return resp
                    exc = _broker_error(code, f"{api} of {topic}-{partition}", conn.address, resp.get("error_message"))
                    if not exc.retriable or not (resend or exc.definitely_not_written):
                        raise exc
            if time.monotonic() >= deadline:
                raise exc
            self.partitions.pop((topic, partition), None)
            await asyncio.sleep(self.retry_backoff)

    async def produce(
        self, topic: str, partition: int, records: Any, *, acks: int = -1, timeout_ms: int = 30000
    ) -> ProduceResult | None:
        """Append ``records`` (RecordBatch bytes) to the partition. ``acks``: 0 (no answer:
        returns None), 1 or -1 (all in-sync replicas). Once the request went out it is sent
        again only after an error that says nothing was written (NOT_LEADER_OR_FOLLOWER,
        NOT_ENOUGH_REPLICAS...); any other failure may leave the batch written, and raises."""
        body = _produce_body(topic, partition, records, acks, timeout_ms)
        if acks == 0:
            conn = await self.leader(topic, partition)
            conn.send("Produce", body)
            return None

        async def call(conn: BrokerConnection) -> Message:
            resp = await conn.request("Produce", body)
            return resp["responses"][0]["partition_responses"][0]  # type: ignore[no-any-return]

        part = await self._with_leader(topic, partition, "Produce", call, resend=False)
        return ProduceResult(part["base_offset"], part.get("log_append_time_ms", -1), part.get("log_start_offset", -1))

    async def produce_once(
        self,
        topic: str,
        partition: int,
        records: Any,
        *,
        acks: int = -1,
        timeout_ms: int = 30000,
        request_timeout: float | None = None,
    ) -> ProduceResult | None:
        """One Produce request to the partition's leader, no retry (for a producer with a retry
        policy of its own): returns its result (None with ``acks`` 0), or raises the broker's
        error for the partition (a retriable one forgets the cached leader), the leader lookup's
        error, :class:`BrokerNotAvailableError` when the connection fails and
        :class:`RequestTimedOutError` when no answer comes within ``request_timeout`` seconds
        (``timeout_ms`` plus the client's ``request_timeout`` when None)."""
        body = _produce_body(topic, partition, records, acks, timeout_ms)
        conn = await self.leader(topic, partition)
        if acks == 0:
            conn.send("Produce", body)
            return None
        wait = request_timeout if request_timeout is not None else timeout_ms / 1000 + self.request_timeout
        resp = await conn.request("Produce", body, timeout=wait)
        part = resp["responses"][0]["partition_responses"][0]
        code = part["error_code"]
        if code:
            err = _broker_error(code, f"Produce to {topic}-{partition}", conn.address, part.get("error_message"))
            if err.retriable:
                self.partitions.pop((topic, partition), None)
            raise err
        return ProduceResult(part["base_offset"], part.get("log_append_time_ms", -1), part.get("log_start_offset", -1))

    def _fetch_request(
        self,
        conn: BrokerConnection,
        partitions: Sequence[tuple[str, int, int, int, int]],
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        isolation_level: int,
    ) -> tuple[int, Message]:
        """A consumer's sessionless Fetch of ``partitions`` (topic, partition, fetch offset,
        current leader epoch or -1, max bytes), and the version to send it in on ``conn``."""
        topics: list[Message] = []
        for topic, partition, offset, epoch, part_max in partitions:
            if not topics or topics[-1]["topic"] != topic:
                topics.append({"topic": topic, "topic_id": self.topic_ids.get(topic, bytes(16)), "partitions": []})
            topics[-1]["partitions"].append(
                {
                    "partition": partition,
                    "current_leader_epoch": epoch,
                    "fetch_offset": offset,
                    "last_fetched_epoch": -1,
                    "log_start_offset": -1,
                    "partition_max_bytes": part_max,
                }
            )
        body: Message = {
            "replica_id": -1,
            "max_wait_ms": max_wait_ms,
            "min_bytes": min_bytes,
            "max_bytes": max_bytes,
            "isolation_level": isolation_level,
            "session_id": 0,
            "session_epoch": -1,
            "topics": topics,
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        version = conn.version("Fetch")
        if version >= 13 and not all(any(self.topic_ids.get(t["topic"], b"")) for t in topics):
            version = 12  # v13+ names topics by id, and the metadata gave none for one of these
        return version, body

    async def fetch_from(
        self,
        node_id: int,
        partitions: Sequence[tuple[str, int, int, int, int]],
        *,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        max_bytes: int = 50 * 1024 * 1024,
        isolation_level: int = 0,
    ) -> list[tuple[str, Message]]:
        """One Fetch request to broker ``node_id`` for ``partitions`` (topic, partition, fetch
        offset, current leader epoch or -1, max bytes): each partition's part of the response
        (``error_code``, ``high_watermark``, ``log_start_offset``, ``records``...) with its
        topic, in the order asked. Raises :class:`BrokerNotAvailableError` for a broker the
        metadata does not name or a failed connection, the Fetch's top-level error."""
        address = self.brokers.get(node_id)
        if address is None:
            raise BrokerNotAvailableError(f"the metadata names no Kafka broker {node_id}")
        conn = await self.connection(address)
        version, body = self._fetch_request(conn, partitions, max_wait_ms, min_bytes, max_bytes, isolation_level)
        topics = body["topics"]
        resp = await conn.request("Fetch", body, version=version, timeout=max_wait_ms / 1000 + self.request_timeout)
        if resp.get("error_code"):
            raise _broker_error(resp["error_code"], "Fetch", conn.address)
        names = {t["topic_id"]: t["topic"] for t in topics}
        out: list[tuple[str, Message]] = []
        for t in resp["responses"]:
            name = t.get("topic") or names.get(t.get("topic_id", b""), "")
            for part in t["partitions"]:
                out.append((name, part))
        return out

    async def init_producer_id(self, timeout: float | None = None) -> tuple[int, int]:
        """A producer id and epoch for an idempotent producer (InitProducerId, no transactional
        id). Asked of the controller the metadata names first (seglog's nodes forward it there;
        a Kafka broker answers it itself), then of each broker in turn while they answer
        COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR / NOT_CONTROLLER, cannot be reached or do not
        answer, until ``timeout`` seconds (the client's ``request_timeout``)."""
        deadline = time.monotonic() + (self.request_timeout if timeout is None else timeout)
        body: Message = {
            "transactional_id": None,
            "transaction_timeout_ms": 60000,
            "producer_id": -1,
            "producer_epoch": -1,
        }
        turn = 0
        address = ""
        while True:
            controller = self.brokers.get(self.controller_id)
            if controller is not None and address != controller:
                address = controller  # the controller, every other attempt
            else:
                others = [a for a in self._candidates() if a != controller] or self._candidates()
                address = others[turn % len(others)]
                turn += 1
            try:
                conn = await self.connection(address)
                resp = await conn.request("InitProducerId", body, timeout=self.request_timeout)
            except (BrokerNotAvailableError, RequestTimedOutError) as err:
                exc: KafkaError = err
            else:
                if not resp["error_code"]:
                    return int(resp["producer_id"]), int(resp["producer_epoch"])
                exc = _broker_error(resp["error_code"], "InitProducerId", conn.address)
                if resp["error_code"] not in (15, 16, 41) and not exc.retriable:
                    raise exc
            if time.monotonic() >= deadline:
                raise exc
            await asyncio.sleep(self.retry_backoff)
            try:
                await self.refresh_metadata([])
            except KafkaError:
                pass

    # -- admin ---------------------------------------------------------------------------------

    async def _controller_call(self, api: str, body: Message, result: Any, timeout: float) -> Any:
        """Send an admin request to the controller (any broker when none is known: seglog's
        nodes forward it); ``result(response)`` is the error code and the entry to return. A
        NOT_CONTROLLER answer or a lost connection refreshes the metadata and asks again until
        ``timeout`` seconds have passed; any other error raises."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                address = self.brokers.get(self.controller_id)
                conn = await (self.connection(address) if address is not None else self._any_connection())
                resp = await conn.request(api, body, timeout=timeout + self.request_timeout)
            except (BrokerNotAvailableError, RequestTimedOutError) as err:
                exc: KafkaError = err
            else:
                code, entry = result(resp)
                if not code:
                    return entry
                exc = _broker_error(code, api, conn.address, entry.get("error_message"))
                if code != 41:  # NOT_CONTROLLER: ask the new one
                    raise exc
            if time.monotonic() >= deadline:
                raise exc
            await asyncio.sleep(self.retry_backoff)
            try:
                await self.refresh_metadata([])
            except KafkaError:
                pass

    async def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str] | None = None,
        *,
        timeout_ms: int = 30000,
    ) -> None:
        """CreateTopics for one topic (``configs``: topic keys to values, as strings); raises
        the broker's error (TOPIC_ALREADY_EXISTS, INVALID_REPLICATION_FACTOR...)."""
        body: Message = {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": replication_factor,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                }
            ],
            "timeout_ms": timeout_ms,
            "validate_only": False,
        }

        def result(resp: Message) -> tuple[int, Message]:
            t = resp["topics"][0]
            return t["error_code"], t

        await self._controller_call("CreateTopics", body, result, timeout_ms / 1000)

    async def elect_preferred_leader(self, topic: str, partition: int, *, timeout_ms: int = 30000) -> None:
        """ElectLeaders (preferred) for one partition; raises the broker's error for it
        (ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE...)."""
        body: Message = {
            "election_type": 0,
            "topic_partitions": [{"topic": topic, "partitions": [partition]}],
            "timeout_ms": timeout_ms,
        }

        def result(resp: Message) -> tuple[int, Message]:
            if resp.get("error_code"):
                return resp["error_code"], {}
            for t in resp["replica_election_results"]:
                for p in t["partition_result"]:
                    if t["topic"] == topic and p["partition_id"] == partition:
                        return p["error_code"], p
            return 0, {}

        await self._controller_call("ElectLeaders", body, result, timeout_ms / 1000)

    async def delete_records(self, topic: str, partition: int, offset: int, *, timeout_ms: int = 30000) -> int:
        """DeleteRecords on the partition's leader: records below ``offset`` (-1: the high
        watermark) go. Returns the low watermark once it reaches ``offset``. Raises
        ``OffsetOutOfRangeError`` for an offset above the high watermark,
        ``RequestTimedOutError`` when the low watermark did not reach it within ``timeout_ms``
        (its ``offset``: the low watermark reached; the leader's records are gone already). A
        change of leader is retried until ``timeout_ms``."""
        if offset < -1:
            raise ValueError(f"DeleteRecords needs an offset >= 0 (or -1 for the high watermark), got {offset}")
        deadline = time.monotonic() + timeout_ms / 1000
        what = f"DeleteRecords on {topic}-{partition} before {offset}"
        while True:
            left = max(int((deadline - time.monotonic()) * 1000), 0)
            try:
                conn = await self.leader(topic, partition)
                body: Message = {
                    "topics": [{"name": topic, "partitions": [{"partition_index": partition, "offset": offset}]}],
                    "timeout_ms": left,
                }
                resp = await conn.request("DeleteRecords", body, timeout=left / 1000 + self.request_timeout)
            except (BrokerNotAvailableError, LeaderNotAvailableError) as err:
                exc: KafkaError = err
            else:
                part = resp["topics"][0]["partitions"][0]
                code, lw = part["error_code"], part["low_watermark"]
                if not code:
                    return int(lw)
                reached = lw if lw >= 0 else None
                if code == RequestTimedOutError.code:
                    detail = f"the low watermark reached {lw}, not {offset}, within timeout_ms {timeout_ms}"
                elif code == OffsetOutOfRangeError.code:
                    detail = f"offset {offset} is above the high watermark"
                else:
                    detail = None
                exc = _broker_error(code, what, conn.address, detail, offset=reached)
                if code != NotLeaderOrFollowerError.code and code != LeaderNotAvailableError.code:
                    raise exc
                self.partitions.pop((topic, partition), None)
            if time.monotonic() >= deadline:
                raise RequestTimedOutError(
                    f"{what}: no leader completed it within {timeout_ms} ms (last: {exc})"
                ) from exc
            await asyncio.sleep(self.retry_backoff)

    async def watermarks(self, topic: str, partition: int) -> tuple[int, int, int]:
        """``(log start, high watermark, low watermark)`` of the partition from its leader:
        ListOffsets for the first two; the low watermark (the least log start over the
        replicas) is what Kafka answers to DeleteRecords, so it is a DeleteRecords at the log
        start (which deletes nothing) with timeout 0 — -1 until every live follower has
        fetched from the current leader, on seglog's nodes."""
        start = await self.list_offset(topic, partition, EARLIEST)
        high = await self.list_offset(topic, partition, LATEST)
        conn = await self.leader(topic, partition)
        body: Message = {
            "topics": [{"name": topic, "partitions": [{"partition_index": partition, "offset": start}]}],
            "timeout_ms": 0,
        }
        resp = await conn.request("DeleteRecords", body, timeout=self.request_timeout)
        part = resp["topics"][0]["partitions"][0]
        if part["error_code"] not in (0, RequestTimedOutError.code):
            raise _broker_error(part["error_code"], f"DeleteRecords on {topic}-{partition}", conn.address)
        return start, high, int(part["low_watermark"])

    async def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_bytes: int = 1 << 20,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        isolation_level: int = 0,
    ) -> FetchedPartition:
        """Fetch from ``offset`` of the partition (up to ``max_bytes``, waiting up to
        ``max_wait_ms`` for ``min_bytes``). ``isolation_level`` 1 reads committed only."""
        info = self.partitions.get((topic, partition))
        epoch = info.leader_epoch if info is not None else -1

        async def call(conn: BrokerConnection) -> Message:
            version, body = self._fetch_request(
                conn, [(topic, partition, offset, epoch, max_bytes)], max_wait_ms, min_bytes, max_bytes, isolation_level
            )
            resp = await conn.request("Fetch", body, version=version)
            if resp.get("error_code"):
                return resp
            return resp["responses"][0]["partitions"][0]  # type: ignore[no-any-return]

        part = await self._with_leader(topic, partition, "Fetch", call)
        aborted = part.get("aborted_transactions") or ()
        return FetchedPartition(
            bytes(part["records"] or b""),
            part["high_watermark"],
            part.get("last_stable_offset", -1),
            part.get("log_start_offset", -1),
            tuple((a["producer_id"], a["first_offset"]) for a in aborted),
        )

    async def list_offset(self, topic: str, partition: int, timestamp: int = LATEST) -> int:
        """The offset for ``timestamp`` (ms), or :data:`LATEST` / :data:`EARLIEST`; -1 where no
        record has a timestamp at or after it."""

        async def call(conn: BrokerConnection) -> Message:
            body: Message = {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {
                                "partition_index": partition,
                                "current_leader_epoch": -1,
                                "timestamp": timestamp,
                                "max_num_offsets": 1,
                            }
                        ],
                    }
                ],
            }
            resp = await conn.request("ListOffsets", body)
            return resp["topics"][0]["partitions"][0]  # type: ignore[no-any-return]

        part = await self._with_leader(topic, partition, "ListOffsets", call)
        return int(part["offset"])

    async def close(self) -> None:
        """Close every connection. Idempotent."""
        self._closed = True
        openings = list(self._opening.values())
        for fut in openings:
            fut.cancel()
        await asyncio.gather(*openings, return_exceptions=True)
        conns, self._connections = list(self._connections.values()), {}
        for conn in conns:
            await conn.close()

    async def __aenter__(self) -> KafkaClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
