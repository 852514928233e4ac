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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from seglog.errors import (
    BrokerNotAvailableError,
    InvalidRequestError,
    KafkaError,
    UnsupportedVersionError,
    error_for_code,
    make_error,
)
from seglog.kafka import codec
from seglog.kafka._schemas import MESSAGES
from seglog.kafka.apis import API_NAMES
from seglog.kafka.codec import Message
from seglog.kafka.connection import INT32, skip_tagged

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


def _broker_error(code: int, what: str, address: str, detail: str | None = None) -> KafkaError:
    """The error of ``code`` in a response to ``what`` from the broker at ``address``: Kafka's
    name for it, the broker's message (or the code's description) and where it came from."""
    cls = error_for_code(code)
    return make_error(code, f"{what} failed at the Kafka broker {address}: {cls.name}: {detail or cls.description}")


def _parse_address(address: str) -> tuple[str, int]:
    host, sep, port = address.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"a broker address must be host:port, got {address!r}")
    return host.strip("[]"), int(port)


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
    ) -> BrokerConnection:
        """Connect to ``address`` (``host:port``) and agree on API versions."""
        host, port = _parse_address(address)
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, ssl=ssl_context, limit=1 << 16), timeout
            )
        except (OSError, asyncio.TimeoutError) as exc:
            why = "timed out" if isinstance(exc, asyncio.TimeoutError) else str(exc) or type(exc).__name__
            raise BrokerNotAvailableError(f"cannot connect to the Kafka broker at {address}: {why}") from None
        conn = cls(reader, writer, address, client_id, max_response_bytes)
        try:
            await asyncio.wait_for(conn._negotiate(), timeout)
        except BaseException as exc:
            await conn.close()
            if isinstance(exc, asyncio.TimeoutError):
                raise BrokerNotAvailableError(
                    f"the Kafka broker at {address} did not answer ApiVersions within {timeout} s"
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

    async def request(self, api: str, message: Message, *, version: int | None = None) -> Message:
        """Send ``message`` as an ``api`` request and return the response body."""
        return await self._call(api, message, self.version(api) if version is None else version)

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
        self._writer.writelines(parts)
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
        except (OSError, KafkaError) as exc:
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
        #: node id -> "host:port", from the last metadata.
        self.brokers: dict[int, str] = {}
        #: (topic, partition) -> its leader, from the last metadata.
        self.partitions: dict[tuple[str, int], PartitionLeader] = {}
        #: Topic ids (16 bytes) from the metadata, for requests that name topics by id (Fetch v13+).
        self.topic_ids: dict[str, bytes] = {}
        self._connections: dict[str, BrokerConnection] = {}
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
        """The open connection to ``address``, opened if there is none."""
        if self._closed:
            raise RuntimeError("the Kafka client is closed")
        conn = self._connections.get(address)
        if conn is None or conn.closed:
            conn = await BrokerConnection.open(
                address, client_id=self.client_id, ssl_context=self.ssl_context, timeout=self.request_timeout
            )
            self._connections[address] = conn
        return conn

    async def _any_connection(self) -> BrokerConnection:
        errors: list[str] = []
        for address in list(self.brokers.values()) + self.bootstrap:
            try:
                return await self.connection(address)
            except BrokerNotAvailableError as exc:
                errors.append(str(exc))
        raise BrokerNotAvailableError("no Kafka broker could be reached: " + "; ".join(errors))

    async def refresh_metadata(self, topics: Iterable[str] | None = None) -> Message:
        """Fetch the metadata (of ``topics``, or of every topic) and update the cache."""
        conn = await self._any_connection()
        body: Message = {
            "topics": None if topics is None else [{"name": t, "topic_id": bytes(16)} for t in topics],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }
        resp = await conn.request("Metadata", body)
        self._last_address = conn.address
        self.brokers = {b["node_id"]: f"{b['host']}:{b['port']}" for b in resp["brokers"]}
        for t in resp["topics"]:
            if t["error_code"]:
                continue
            if t.get("topic_id"):
                self.topic_ids[t["name"]] = t["topic_id"]
            for p in t["partitions"]:
                self.partitions[(t["name"], p["partition_index"])] = PartitionLeader(
                    p["leader_id"],
                    p.get("leader_epoch", -1),
                    tuple(p["replica_nodes"]),
                    tuple(p["isr_nodes"]),
                )
        return resp

    async def _leader(self, topic: str, partition: int) -> BrokerConnection:
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
            raise make_error(5, f"{topic}-{partition} has no leader (leader id {info.leader})")
        return await self.connection(address)

    async def _with_leader(self, topic: str, partition: int, api: str, call: Any, *, resend: bool = True) -> Any:
        """Run ``call(connection)`` against the partition's leader, retrying retriable errors
        until the deadline. With ``resend=False`` (a write that is not idempotent) a request that
        went out is sent again only after an error that says it was not written."""
        deadline = time.monotonic() + self.request_timeout
        while True:
            try:
                conn = await self._leader(topic, partition)
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
        if acks not in (-1, 0, 1):
            raise ValueError(f"acks must be -1 (all), 0 or 1, got {acks!r}")
        body: Message = {
            "transactional_id": None,
            "acks": acks,
            "timeout_ms": timeout_ms,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
        }
        if acks == 0:
            conn = await self._leader(topic, partition)
            conn.send("Produce", body)
            return None

        async def call(conn: BrokerConnection) -> Message:
            resp = await conn.request("Produce", body)
            return resp["responses"][0]["partition_responses"][0]  # type: ignore[no-any-return]

        part = await self._with_leader(topic, partition, "Produce", call, resend=False)
        return ProduceResult(part["base_offset"], part.get("log_append_time_ms", -1), part.get("log_start_offset", -1))

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
            body: Message = {
                "replica_id": -1,
                "max_wait_ms": max_wait_ms,
                "min_bytes": min_bytes,
                "max_bytes": max_bytes,
                "isolation_level": isolation_level,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": topic,
                        "topic_id": self.topic_ids.get(topic, bytes(16)),
                        "partitions": [
                            {
                                "partition": partition,
                                "current_leader_epoch": epoch,
                                "fetch_offset": offset,
                                "last_fetched_epoch": -1,
                                "log_start_offset": -1,
                                "partition_max_bytes": max_bytes,
                            }
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            }
            version = conn.version("Fetch")
            if version >= 13 and not any(self.topic_ids.get(topic, b"")):
                version = 12  # v13+ names topics by id, and the metadata gave none for this one
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
        conns, self._connections = list(self._connections.values()), {}
        for conn in conns:
            await conn.close()

    async def __aenter__(self) -> KafkaClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
