"""A one-node Kafka broker on a :class:`seglog.Store`: Kafka's wire protocol over asyncio.

The listener itself (framing, bad frames, idle connections, TLS and SASL, sending record data
from the files) is :class:`seglog.kafka.listener.KafkaListener`; this module answers the
requests. Its limits (``socket.request.max.bytes``, ``connections.max.idle.ms``) and the
consumer groups' ``group.*`` keys come from the store's broker config unless given as options.

Fetch sessions (KIP-227, ``seglog.kafka.fetch_sessions``): a full fetch at epoch 0 opens one;
incremental fetches read the session's partitions and answer only those that changed.

Data paths: produced records reach ``Store.append`` as views of the request frame; fetched
record data of ``SENDFILE_MIN`` bytes or more is sent from the segment files (``os.sendfile``,
or blocks read into buffers where the transport cannot); appends that wait for the disk and
OffsetCommit's fsync run on a worker thread (``_may_block``).

See ``docs/kafka-protocol.md`` for the APIs and versions served (``seglog.kafka.apis``).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from seglog.errors import (
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidRequiredAcksError,
    InvalidTopicError,
    NotEnoughReplicasError,
    OffsetOutOfRangeError,
    SeglogError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    code_for_exception,
)
from seglog.kafka import admin
from seglog.kafka.apis import API_VERSIONS
from seglog.kafka.codec import Message
from seglog.kafka.connection import INT32, ConnState, fmt_peer
from seglog.kafka.fetch_sessions import FetchSessionCache
from seglog.kafka.groups import GroupCoordinator, group_api_handlers
from seglog.kafka.listener import (
    DEFAULT_IDLE_MS,
    DEFAULT_MAX_REQUEST_BYTES,
    SENDFILE_MIN,
    UNKNOWN_ID,
    KafkaListener,
    close_if_acks0_failed,
    create_topics_result,
    hold_records,
    unknown_id_name,
    unknown_topic_id_metadata,
)
from seglog.storage.topic import INTERNAL_TOPICS, validate_topic_name
from seglog.util.closing import Closeable

if TYPE_CHECKING:
    from seglog.storage.log_manager import LogManager

__all__ = [
    "API_VERSIONS",
    "DEFAULT_IDLE_MS",
    "DEFAULT_MAX_REQUEST_BYTES",
    "SENDFILE_MIN",
    "KafkaServer",
    "hold_records",
]

log = logging.getLogger("seglog.kafka")

_NONE = 0
_LONG_MAX = 2**63 - 1
_TXN_ERROR = UnsupportedVersionError.code
_TXN_MESSAGE = "transactions are not supported by this seglog broker"


class KafkaServer(KafkaListener):
    """Serve ``store`` on ``host:port`` (port 0: any free port). ``await start()``, then
    ``bootstrap_servers``; ``await close()`` stops listening and closes every connection.
    ``security_protocol``, ``ssl_context``, ``sasl_mechanisms`` and ``users``: see
    :class:`seglog.kafka.security.ListenerSecurity`."""

    def __init__(
        self,
        store: LogManager,
        host: str = "127.0.0.1",
        port: int = 9092,
        *,
        node_id: int | None = None,
        max_request_bytes: int | None = None,
        idle_ms: int | None = None,
        cluster_id: str | None = None,
        group_initial_rebalance_delay_ms: int | None = None,
        group_min_session_timeout_ms: int | None = None,
        group_max_session_timeout_ms: int | None = None,
        security_protocol: str = "PLAINTEXT",
        ssl_context: Any = None,
        sasl_mechanisms: Any = None,
        users: Any = None,
    ) -> None:
        cfg = store.config
        super().__init__(
            host,
            port,
            max_request_bytes=cfg.socket_request_max_bytes if max_request_bytes is None else max_request_bytes,
            idle_ms=cfg.connections_max_idle_ms if idle_ms is None else idle_ms,
            security_protocol=security_protocol,
            ssl_context=ssl_context,
            sasl_mechanisms=sasl_mechanisms,
            users=users,
        )
        self.store = store
        if node_id is None:
            node_id = cfg.node_id if cfg.node_id >= 0 else (cfg.broker_id if cfg.broker_id >= 0 else 1)
        self.node_id = node_id
        self.cluster_id = cluster_id or "seglog-" + base64.urlsafe_b64encode(store.dir.encode()[-12:]).decode().rstrip(
            "="
        )
        # The group.* keys of the store's config unless given.
        self.groups = GroupCoordinator(
            store,
            cfg.group_initial_rebalance_delay_ms
            if group_initial_rebalance_delay_ms is None
            else group_initial_rebalance_delay_ms,
            cfg.group_min_session_timeout_ms if group_min_session_timeout_ms is None else group_min_session_timeout_ms,
            cfg.group_max_session_timeout_ms if group_max_session_timeout_ms is None else group_max_session_timeout_ms,
        )
        #: Topic names by topic id (16 bytes), for requests that name topics by id.
        self._topic_names: dict[bytes, str] = {}
        #: Incremental fetch sessions (``max.incremental.fetch.session.cache.slots``).
        self.fetch_sessions = FetchSessionCache(cfg.max_incremental_fetch_session_cache_slots)
        self._appended: asyncio.Event | None = None
        self._handlers.update(
            {
                0: self._produce,
                1: self._fetch,
                2: self._list_offsets,
                3: self._metadata,
                10: self._find_coordinator,
                21: self._delete_records,
                32: self._describe_configs,
                37: self._create_partitions,
                44: self._incremental_alter_configs,
                19: self._create_topics,
                20: self._delete_topics,
                22: self._init_producer_id,
                24: self._add_partitions_to_txn,
                25: self._add_offsets_to_txn,
                26: self._end_txn,
                28: self._txn_offset_commit,
                **group_api_handlers(self.groups),
            }
        )

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        self._appended = asyncio.Event()
        self.groups.start()
        await super().start()

    async def close(self) -> None:
        await super().close()
        await self.groups.close()

    # -- Metadata -------------------------------------------------------------------------------

    async def _metadata(self, version: int, req: Message, state: ConnState) -> Message:
        store = self.store
        wanted = req.get("topics")
        names: Sequence[str]
        if wanted is None or (version == 0 and not wanted):
            names = store.topics()
        else:
            # A topic asked for by id (v10+, no name): named from the id, or UNKNOWN_TOPIC_ID.
            names = [
                t["name"] if t["name"] is not None else self._topic_name(t.get("topic_id") or bytes(16)) for t in wanted
            ]
        auto = req.get("allow_auto_topic_creation", True)
        host, port = state.advertised(self.host, self.port)
        topics: list[Message] = []
        for name in names:
            if name.startswith(UNKNOWN_ID):
                topics.append(unknown_topic_id_metadata(name))
                continue
            try:
                if auto:
                    store.ensure_topic(name)
                desc = store.describe(name)[0]
            except SeglogError as exc:
                topics.append(
                    {"error_code": code_for_exception(exc), "name": name, "is_internal": False, "partitions": []}
                )
                continue
            parts = []
            for p in desc.partitions:
                lg = store.log(name, p.partition)
                parts.append(
                    {
                        "error_code": _NONE,
                        "partition_index": p.partition,
                        "leader_id": self.node_id,
                        "leader_epoch": max(lg.epoch_cache.latest_epoch, 0),
                        "replica_nodes": [self.node_id],
                        "isr_nodes": [self.node_id],
                        "offline_replicas": [],
                    }
                )
            topics.append(
                {
                    "error_code": _NONE,
                    "name": name,
                    "topic_id": _topic_id(desc.topic_id),
                    "is_internal": desc.internal,
                    "partitions": parts,
                    "topic_authorized_operations": -2147483648,
                }
            )
        return {
            "throttle_time_ms": 0,
            "brokers": [{"node_id": self.node_id, "host": host, "port": port, "rack": None}],
            "cluster_id": self.cluster_id,
            "controller_id": self.node_id,
            "topics": topics,
            "cluster_authorized_operations": -2147483648,
        }

    # -- Produce --------------------------------------------------------------------------------

    async def _produce(self, version: int, req: Message, state: ConnState) -> Message | None:
        acks = req["acks"]
        responses = []
        for topic in req["topic_data"]:
            name = topic["name"]
            parts = []
            for pd in topic["partition_data"]:
                p, records = pd["index"], pd["records"]
                if self._may_block(name, p, records):
                    # This append waits for the disk (an fsync, new files, block reservation):
                    # a worker thread waits, the loop serves other connections meanwhile.
                    parts.append(await asyncio.to_thread(self._produce_partition, name, p, records, acks, state))
                else:
                    parts.append(self._produce_partition(name, p, records, acks, state))
            responses.append({"name": name, "partition_responses": parts})
        if self._appended is not None:
            self._appended.set()
            self._appended = asyncio.Event()
        if acks == 0:
            close_if_acks0_failed(responses)
            return None
        return {"responses": responses, "throttle_time_ms": 0}

    def _may_block(self, topic: str, partition: int, records: Any) -> bool:
        """Whether appending ``records`` waits for the disk: it reaches the partition's
        ``flush.messages`` (an fsync), is the log's first (the leader epoch checkpoint is
        written), rolls a new segment (files created, index space reserved) or passes the disk
        blocks reserved ahead of the segment's end (``posix_fallocate`` of the next 4 MiB).
        Measured here: an fsync 5-12 ms, a first append about 1 ms, a block reservation about
        5 ms on a busy disk; any other append tens of microseconds, less than handing it to a
        worker thread (about 80 us). Those run on a thread so other connections go on."""
        log_ = self.store._existing_log(topic, partition)
        if log_ is None or records is None:
            return False
        n = memoryview(records).nbytes
        seg = log_.active
        if seg.allocate_step and seg.size + n > seg.allocated_to:
            return True
        if seg.size > log_.config.segment_bytes - n or log_.epoch_cache.latest_epoch < 0:
            return True
        flush_messages = log_.config.flush_messages
        if flush_messages >= _LONG_MAX:
            return False
        return log_.unflushed_messages + record_count(records) >= flush_messages

    def _produce_partition(self, topic: str, partition: int, records: Any, acks: int, state: ConnState) -> Message:
        out = {
            "index": partition,
            "error_code": _NONE,
            "base_offset": -1,
            "log_append_time_ms": -1,
            "log_start_offset": -1,
            "record_errors": [],
            "error_message": None,
        }
        try:
            if acks not in (0, 1, -1):
                raise InvalidRequiredAcksError(f"acks must be 0, 1 or -1 (all), not {acks}")
            if records is None or len(records) == 0:
                raise InvalidRequestError(f"produce to {topic}-{partition} without records")
            if topic in INTERNAL_TOPICS:
                raise InvalidTopicError(f"{topic} is an internal topic: clients cannot produce to it")
            if acks == -1:
                need = self.store.topic_config(topic).min_insync_replicas
                if need > 1:
                    raise NotEnoughReplicasError(
                        f"{topic} needs min.insync.replicas={need} in sync; this broker is the only replica"
                    )
            result = self.store.append(topic, partition, records)
        except SeglogError as exc:
            state.fail(out, f"Produce to {topic}-{partition}", exc)
            return out
        out["base_offset"] = result.first_offset
        out["log_append_time_ms"] = result.log_append_time
        out["log_start_offset"] = result.log_start_offset
        return out

    # -- Fetch ----------------------------------------------------------------------------------

    async def _fetch(self, version: int, req: Message, state: ConnState) -> Message:
        ids = version >= 13  # topics named by id
        if ids:
            self._name_topics(req)
        # The partitions to read: the request's, or its incremental fetch session's (KIP-227).
        context = self.fetch_sessions.new_context(req, ids)
        if context.error:
            log.debug("Kafka client %s: Fetch: %s", fmt_peer(state.peer), context.message)
            return {"throttle_time_ms": 0, "error_code": context.error, "session_id": 0, "responses": []}
        topics = context.topics
        deadline = time.monotonic() + max(req["max_wait_ms"], 0) / 1000.0
        min_bytes = req["min_bytes"]
        while True:
            event = self._appended
            responses, total, error = self._read_fetch(req, topics)
            remaining = deadline - time.monotonic()
            if total >= min_bytes or error or remaining <= 0:
                code, session_id, responses = context.respond(responses)
                if ids:
                    self._id_topics(responses)
                hold_records(responses)
                return {"throttle_time_ms": 0, "error_code": code, "session_id": session_id, "responses": responses}
            # Long poll: woken by a produce through this server, and re-checked every 50 ms
            # for appends made to the store by other means.
            assert event is not None
            try:
                await asyncio.wait_for(event.wait(), min(remaining, 0.05))
            except asyncio.TimeoutError:
                pass

    def _topic_name(self, topic_id: bytes) -> str:
        """The name of the topic whose id is ``topic_id``, or (no such topic) a name no topic
        can have that keeps the id, for :meth:`_id_topics` to answer UNKNOWN_TOPIC_ID."""
        name = self._topic_names.get(topic_id)
        if name is not None:
            try:
                if _topic_id(self.store.topic_id(name)) == topic_id:
                    return name
            except UnknownTopicOrPartitionError:
                pass
        # A topic made or deleted since: the map again.
        self._topic_names = {_topic_id(t): n for n, t in self.store.topic_ids().items() if t}
        return self._topic_names.get(topic_id) or unknown_id_name(topic_id)

    def _name_topics(self, req: Message) -> None:
        """Fetch v13+: each topic's (and forgotten topic's) name from its id."""
        for topic in req["topics"]:
            topic["topic"] = self._topic_name(topic["topic_id"])
        for topic in req.get("forgotten_topics_data") or ():
            topic["topic"] = self._topic_name(topic["topic_id"])

    def _id_topics(self, responses: list[Message]) -> None:
        """Fetch v13+: each response topic's id; UNKNOWN_TOPIC_ID where the store has no topic
        of that id (any more)."""
        for topic in responses:
            name = topic["topic"]
            tid = None
            if not name.startswith(UNKNOWN_ID):
                try:
                    tid = _topic_id(self.store.topic_id(name))
                except UnknownTopicOrPartitionError:
                    pass
            if tid is None:
                tid = (
                    bytes.fromhex(name[1:])
                    if name.startswith(UNKNOWN_ID)
                    else next((i for i, n in self._topic_names.items() if n == name), bytes(16))
                )
                for out in topic["partitions"]:
                    if out["error_code"] in (_NONE, UnknownTopicOrPartitionError.code):
                        out["error_code"] = UnknownTopicIdError.code
            topic["topic_id"] = tid

    def _read_fetch(self, req: Message, topics: list[Message]) -> tuple[list[Any], int, bool]:
        store = self.store
        budget = req.get("max_bytes", 0x7FFFFFFF)
        committed = req.get("isolation_level", 0) == 1
        responses = []
        total = 0
        error = False
        for topic in topics:
            name = topic["topic"]
            parts = []
            for fp in topic["partitions"]:
                p = fp["partition"]
                out = {
                    "partition_index": p,
                    "error_code": _NONE,
                    "high_watermark": -1,
                    "last_stable_offset": -1,
                    "log_start_offset": -1,
                    "aborted_transactions": None,
                    "preferred_read_replica": -1,
                    "records": b"",
                }
                try:
                    lg = store.log(name, p)
                    lso = lg.last_stable_offset
                    bound = lso if committed else lg.high_watermark
                    offset = fp["fetch_offset"]
                    limit = min(fp["partition_max_bytes"], budget)
                    result = lg.read(offset, max(limit, 0), upper_bound=bound, min_one_batch=(total == 0))
                    size = result.size
                    out["high_watermark"] = result.high_watermark
                    out["last_stable_offset"] = lso
                    out["log_start_offset"] = result.log_start_offset
                    if committed and size:
                        aborted = lg.collect_aborted_transactions(offset, _fetched_end(result))
                        out["aborted_transactions"] = [
                            {"producer_id": a.producer_id, "first_offset": a.first_offset} for a in aborted
                        ]
                    elif committed:
                        out["aborted_transactions"] = []
                    # Slices of the segment files; hold_records turns the answer's into bytes
                    # or file regions once the long poll ends.
                    out["records"] = result if size else b""
                    total += size
                    budget -= size
                except (OffsetOutOfRangeError, UnknownTopicOrPartitionError) as exc:
                    out["error_code"] = exc.code
                    error = True
                    if isinstance(exc, OffsetOutOfRangeError):
                        lg = store.log(name, p)
                        out["high_watermark"] = lg.high_watermark
                        out["log_start_offset"] = lg.log_start_offset
                        out["last_stable_offset"] = lg.last_stable_offset
                except SeglogError as exc:
                    out["error_code"] = code_for_exception(exc)
                    error = True
                parts.append(out)
            responses.append({"topic": name, "partitions": parts})
        return responses, total, error

    # -- ListOffsets ----------------------------------------------------------------------------

    async def _list_offsets(self, version: int, req: Message, state: ConnState) -> Message:
        committed = req.get("isolation_level", 0) == 1
        topics = []
        for topic in req["topics"]:
            name = topic["name"]
            parts = []
            for lp in topic["partitions"]:
                p = lp["partition_index"]
                ts = lp["timestamp"]
                out = {"partition_index": p, "error_code": _NONE, "timestamp": -1, "offset": -1, "leader_epoch": -1}
                try:
                    lg = self.store.log(name, p)
                    bound = lg.last_stable_offset if committed else None
                    if ts == -4:  # earliest local: no tiered storage, so the log start
                        ts = -2
                    if ts == -5:  # latest tiered: nothing is tiered
                        found = None
                    else:
                        found = lg.offset_for_timestamp(ts, upper_bound=bound)
                    if found is not None:
                        out["offset"], out["timestamp"] = found
                        out["leader_epoch"] = max(lg.epoch_cache.latest_epoch, 0)
                except ValueError as exc:
                    out["error_code"] = InvalidRequestError.code
                    state.note(f"ListOffsets {name}-{p}", exc)
                except SeglogError as exc:
                    out["error_code"] = code_for_exception(exc)
                parts.append(out)
            topics.append({"name": name, "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

    # -- CreateTopics / DeleteTopics --------------------------------------------------------------

    async def _create_topics(self, version: int, req: Message, state: ConnState) -> Message:

        store = self.store
        results = []
        for t in req["topics"]:
            name = t["name"]
            out = create_topics_result(name)
            try:
                if t.get("assignments"):
                    raise InvalidRequestError("replica assignments are not supported: this broker is the only replica")
                rf = t["replication_factor"]
                if rf not in (-1, 1):
                    raise InvalidReplicationFactorError(
                        f"replication factor {rf} is larger than the 1 available broker"
                    )
                n = t["num_partitions"]
                if n == -1:
                    n = store.config.num_partitions
                config = {c["name"]: c["value"] for c in t.get("configs") or []}
                if req.get("validate_only"):
                    validate_topic_name(name)
                    if name in store.topics(internal=True):
                        from seglog.errors import TopicAlreadyExistsError

                        raise TopicAlreadyExistsError(f"topic {name!r} already exists")
                    store.config.topic_config(config)
                    if n < 1:
                        from seglog.errors import InvalidPartitionsError

                        raise InvalidPartitionsError(f"number of partitions must be at least 1, got {n}")
                    out["num_partitions"], out["replication_factor"] = n, 1
                    out["configs"] = admin.created_topic_configs(store, None, config)
                else:
                    desc = store.create_topic(name, n, config)
                    out["topic_id"] = _topic_id(desc.topic_id)
                    out["num_partitions"], out["replication_factor"] = len(desc.partitions), 1
                    out["configs"] = admin.created_topic_configs(store, name, desc.config_overrides)
            except SeglogError as exc:
                state.fail(out, f"CreateTopics {name}", exc)
            results.append(out)
        return {"throttle_time_ms": 0, "topics": results}

    async def _delete_topics(self, version: int, req: Message, state: ConnState) -> Message:
        store = self.store
        if version >= 6:
            names = []
            for t in req["topics"]:
                name = t.get("name")
                if name is None:
                    tid = t.get("topic_id") or bytes(16)
                    name = next((d.name for d in store.describe(internal=True) if _topic_id(d.topic_id) == tid), None)
                names.append((name, t.get("topic_id") or bytes(16)))
        else:
            names = [(n, bytes(16)) for n in req["topic_names"]]
        results = []
        for name, tid in names:
            out = {"name": name, "topic_id": tid, "error_code": _NONE, "error_message": None}
            try:
                if name is None:
                    raise UnknownTopicOrPartitionError("no topic has that topic id")
                desc = store.describe(name)[0]
                out["topic_id"] = _topic_id(desc.topic_id)
                store.delete_topic(name)
            except SeglogError as exc:
                state.fail(out, f"DeleteTopics {name}", exc)
            results.append(out)
        return {"throttle_time_ms": 0, "responses": results}

    # -- Consumer groups ------------------------------------------------------------------------

    async def _find_coordinator(self, version: int, req: Message, state: ConnState) -> Message:
        host, port = state.advertised(self.host, self.port)
        key_type = req.get("key_type", 0)
        code, message = _NONE, None
        if key_type != 0:
            code, message = _TXN_ERROR, _TXN_MESSAGE
        node = (self.node_id, host, port) if code == _NONE else (-1, "", -1)
        if version >= 4:
            return {
                "throttle_time_ms": 0,
                "coordinators": [
                    {
                        "key": key,
                        "node_id": node[0],
                        "host": node[1],
                        "port": node[2],
                        "error_code": code,
                        "error_message": message,
                    }
                    for key in req["coordinator_keys"]
                ],
            }
        return {
            "throttle_time_ms": 0,
            "error_code": code,
            "error_message": message,
            "node_id": node[0],
            "host": node[1],
            "port": node[2],
        }

    # -- CreatePartitions, DeleteRecords, configs (seglog.kafka.admin) ---------------------------

    async def _create_partitions(self, version: int, req: Message, state: ConnState) -> Message:
        return admin.create_partitions(self.store, version, req)

    async def _delete_records(self, version: int, req: Message, state: ConnState) -> Message:
        return admin.delete_records(self.store, version, req)

    async def _describe_configs(self, version: int, req: Message, state: ConnState) -> Message:
        return admin.describe_configs(self.store, self.node_id, version, req)

    async def _incremental_alter_configs(self, version: int, req: Message, state: ConnState) -> Message:
        return admin.incremental_alter_configs(self.store, version, req)

    # -- Producer ids and transactions ---------------------------------------------------------

    async def _init_producer_id(self, version: int, req: Message, state: ConnState) -> Message:
        if req.get("transactional_id") is not None:
            return {"throttle_time_ms": 0, "error_code": _TXN_ERROR, "producer_id": -1, "producer_epoch": -1}
        try:
            pid = self.store._allocate_producer_id()
        except SeglogError as exc:
            return {
                "throttle_time_ms": 0,
                "error_code": code_for_exception(exc),
                "producer_id": -1,
                "producer_epoch": -1,
            }
        return {"throttle_time_ms": 0, "error_code": _NONE, "producer_id": pid, "producer_epoch": 0}

    async def _add_partitions_to_txn(self, version: int, req: Message, state: ConnState) -> Message:
        return {
            "throttle_time_ms": 0,
            "error_code": _TXN_ERROR,
            "results_by_topic_v3_and_below": [
                {
                    "name": t["name"],
                    "results_by_partition": [
                        {"partition_index": p, "partition_error_code": _TXN_ERROR} for p in t["partitions"]
                    ],
                }
                for t in req.get("v3_and_below_topics") or []
            ],
        }

    async def _add_offsets_to_txn(self, version: int, req: Message, state: ConnState) -> Message:
        return {"throttle_time_ms": 0, "error_code": _TXN_ERROR}

    async def _end_txn(self, version: int, req: Message, state: ConnState) -> Message:
        return {"throttle_time_ms": 0, "error_code": _TXN_ERROR}

    async def _txn_offset_commit(self, version: int, req: Message, state: ConnState) -> Message:
        return {
            "throttle_time_ms": 0,
            "topics": [
                {
                    "name": t["name"],
                    "partitions": [
                        {"partition_index": p["partition_index"], "error_code": _TXN_ERROR} for p in t["partitions"]
                    ],
                }
                for t in req["topics"]
            ],
        }


def record_count(records: Any) -> int:
    """Records in the (unvalidated) batches of a produce request, from their headers' counts;
    stops at the first header that does not fit."""
    view = memoryview(records)
    pos, end, n = 0, view.nbytes, 0
    while pos + 61 <= end:
        (length,) = INT32.unpack_from(view, pos + 8)
        (count,) = INT32.unpack_from(view, pos + 57)
        n += max(count, 0)
        if length <= 0:
            break
        pos += 12 + length
    return n


def _topic_id(text: str | None) -> bytes:
    """A store topic id (URL-safe base64, Kafka's text form) as the 16 bytes of a UUID."""
    if not text:
        return bytes(16)
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        return bytes(16)
    return raw if len(raw) == 16 else bytes(16)


def _fetched_end(result: Any) -> int:
    """The offset after the last batch of a read (whole v2 batches): the upper bound of the
    aborted-transaction lookup for a read_committed fetch."""
    from seglog.storage.records import batch_headers

    view = result.slices[-1].view()
    try:
        heads = batch_headers(view, verify_crc=False)
        return heads[-1].last_offset + 1 if heads else 0
    finally:
        view.release()


class ServerHandle(Closeable):
    """A :class:`KafkaServer` running on an event loop of its own thread (what
    :meth:`seglog.Store.serve` returns). ``bootstrap_servers`` is ``"host:port"``; ``close()``
    (or leaving a ``with`` block, or closing the store) stops it."""

    def __init__(self, store: LogManager, host: str = "127.0.0.1", port: int = 0, **options: Any) -> None:
        import threading

        from seglog.util.loop import run_loop

        self.store = store
        self._closed = False
        # The server first: bad options raise before a loop exists to be closed.
        self.server = KafkaServer(store, host, port, **options)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=run_loop, args=(self._loop,), name=f"seglog-kafka-{host}:{port}", daemon=True
        )
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(30)
        except BaseException:
            self._stop_loop()
            raise
        self.bootstrap_servers = self.server.bootstrap_servers
        self.host, self.port = self.bootstrap_servers.rsplit(":", 1)[0], self.server.port
        store._clients.append(self)

    def close(self) -> None:
        """Stop listening, close every connection and stop the thread. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            asyncio.run_coroutine_threadsafe(self.server.close(), self._loop).result(30)
        finally:
            self._stop_loop()
            self.store._forget_client(self)

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        if not self._thread.is_alive():
            self._loop.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "serving"
        return f"<seglog Kafka listener {self.bootstrap_servers} on {self.store.dir} ({state})>"
