"""A cluster node's Kafka listener: Kafka clients talk to a :class:`~seglog.cluster.node.ReplicaNode`
over Kafka's protocol.

The listener (socket, framing, TLS/SASL, sendfile of record data, ApiVersions) is
:class:`seglog.kafka.listener.KafkaListener`; this subclass runs on the node's asyncio loop (the
node is single-threaded: it is touched only from that loop) and answers each request by handing
it to the node's own handling, :meth:`ReplicaNode.handle <seglog.cluster.node.ReplicaNode.handle>`
with the messages of :mod:`seglog.cluster.messages`, whose reply resolves a future. So what the
node checks for its own clients holds for Kafka clients too: leadership, ``acks=all`` with
``min.insync.replicas``, fetches bounded by the high watermark, long polls, the idempotent
producers' sequence checks.

Served (versions of :data:`seglog.kafka.apis.API_VERSIONS`):

- ApiVersions (the listener's), listing only the APIs below;
- Metadata: the live nodes that have a Kafka listener, each partition's leader, leader epoch,
  replicas, ISR and offline replicas (replicas on nodes not alive), the controller. A topic
  the node does not know is UNKNOWN_TOPIC_OR_PARTITION, an illegal name INVALID_TOPIC_EXCEPTION
  (no topic is created by a Metadata request, whatever ``allow_auto_topic_creation`` says: a
  node has no ``auto.create.topics.enable``). Topic ids are derived from the topic's name, so a name deleted
  and created again gets the same id;
- Produce, each partition a :class:`~seglog.cluster.messages.ProduceRequest` carrying a view of
  the request frame; acks 0, 1 and -1; the node's error codes (NOT_LEADER_OR_FOLLOWER on a node
  that does not lead the partition, NOT_ENOUGH_REPLICAS, ...);
- InitProducerId for idempotent producers, forwarded to the controller (as the cluster's own
  producer gets its producer ids); no transactions;
- Fetch for consumers (``replica_id`` -1): a :class:`~seglog.cluster.messages.FetchRequest` to
  the node's fetch handling, with incremental fetch sessions (KIP-227); record data of
  ``SENDFILE_MIN`` bytes or more is sent from the segment files;
- ListOffsets (earliest, latest, by timestamp, max timestamp) on the partition's leader;
- CreateTopics, each topic a :class:`~seglog.cluster.messages.CreateTopicRequest` forwarded to
  the controller, answered once this node knows a leader of every new partition (as Kafka
  answers once the topic is in its metadata); -1 partitions or replication factor are the
  node's ``num.partitions`` / ``default.replication.factor``; a name given twice in one request
  is INVALID_REQUEST; ``validate_only`` is checked on the node's own view;
- ElectLeaders (preferred elections), each partition an
  :class:`~seglog.cluster.messages.ElectLeadersRequest` forwarded to the controller, answered
  once the controller wrote the new leader;
- DeleteRecords, each partition a :class:`~seglog.cluster.messages.DeleteRecordsRequest` to the
  node (its leader answers the low watermark);
- CreatePartitions, each topic a :class:`~seglog.cluster.messages.CreatePartitionsRequest`
  forwarded to the controller (placement over the live nodes as for a new topic, or the given
  assignments), answered once this node knows the new partitions' leaders;
- DeleteTopics (by name, or by id at v6), each a
  :class:`~seglog.cluster.messages.DeleteTopicRequest` forwarded to the controller (Kafka's
  ZooKeeper-mode deletion: marked, StopReplica with delete to the replicas' nodes, then the
  znodes go), answered once the topic left this node's metadata;
- DescribeConfigs from the node's own view: a topic's every key with its value and source (its
  overrides DYNAMIC_TOPIC_CONFIG, else the node's topic defaults), the node's broker resource;
- IncrementalAlterConfigs on topics: checked by the node, then an
  :class:`~seglog.cluster.messages.AlterTopicConfigRequest` to the controller, which writes the
  topic record and tells every node (each applies it to its open replicas); answered once this
  node has the new overrides;
- FindCoordinator and the group APIs (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
  OffsetFetch, DescribeGroups, ListGroups): :class:`~seglog.cluster.group_coordinator.NodeGroups`.
  A group's coordinator is the leader of its ``__consumer_offsets`` partition (the topic is made
  through the controller at the first FindCoordinator); other nodes answer NOT_COORDINATOR;
  commits are appended to that partition with ``acks=-1``. Metadata marks the topic internal.

Not served here: follower fetches and the controller's requests. Nodes send those over their
inter-broker listener (:mod:`seglog.cluster.kafka_transport`), in the same protocol.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from seglog.cluster.group_coordinator import NodeGroups
from seglog.cluster.messages import (
    CONSUMER_REPLICA_ID,
    ISOLATION_HIGH_WATERMARK,
    NONE,
    AlterTopicConfigRequest,
    AlterTopicConfigResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicRequest,
    CreateTopicResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicRequest,
    DeleteTopicResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from seglog.config import BrokerConfig, LogConfig
from seglog.errors import (
    FencedLeaderEpochError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidRequiredAcksError,
    InvalidTopicError,
    KafkaError,
    LeaderNotAvailableError,
    NotControllerError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    RequestTimedOutError,
    SeglogError,
    TopicAlreadyExistsError,
    UnknownLeaderEpochError,
    UnknownServerError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from seglog.kafka.admin import describe_config_resources, topic_config_changes, topic_configs_created
from seglog.kafka.apis import API_VERSIONS
from seglog.kafka.codec import Message
from seglog.kafka.connection import CloseConnection, ConnState, fmt_peer
from seglog.kafka.fetch_sessions import FetchSessionCache
from seglog.kafka.listener import (
    UNKNOWN_ID,
    KafkaListener,
    close_if_acks0_failed,
    create_topics_result,
    hold_records,
    unknown_id_name,
    unknown_topic_id_metadata,
)
from seglog.storage.group_offsets import OFFSETS_TOPIC
from seglog.storage.topic import validate_topic_name

if TYPE_CHECKING:
    from seglog.cluster.node import ReplicaNode

__all__ = ["NODE_API_VERSIONS", "NodeKafkaListener", "topic_id"]

log = logging.getLogger("seglog.cluster.kafka")

#: The APIs a node's Kafka listener serves, at the versions the store's listener serves them.
NODE_API_VERSIONS: dict[int, tuple[int, int]] = {
    **{
        k: API_VERSIONS[k]
        for k in (0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 32, 36, 37, 44)
    },
    43: (0, 2),  # ElectLeaders (preferred elections), served by nodes only
}

#: DescribeConfigs / IncrementalAlterConfigs resource type of a topic.
_TOPIC = 2
#: Kafka's COORDINATOR_NOT_AVAILABLE: what an idempotent producer retries InitProducerId on.
COORDINATOR_NOT_AVAILABLE = 15
_NO_OPERATIONS = -2147483648
#: Added to a request's own wait before the listener gives up on the node's answer (a node
#: that stopped answers nothing; its connections close with it).
_GRACE_S = 30.0


@functools.lru_cache(maxsize=4096)
def topic_id(name: str) -> bytes:
    """The topic id (a version-4-shaped UUID's 16 bytes) a node gives topic ``name``: derived
    from the name, so every node gives the same one (cached: every fetch and produce between
    nodes names its topics by id)."""
    raw = bytearray(hashlib.sha256(b"seglog topic id\x00" + name.encode()).digest()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return bytes(raw)


class NodeKafkaListener(KafkaListener):
    """Answer Kafka clients from ``node`` on ``host:port`` (port 0: any free port); start and
    close it on the node's loop. ``cluster_id`` is what Metadata reports (the same on every
    node); ``broker_config`` the node's properties DescribeConfigs answers (None: those of its
    replication settings and topic defaults, the rest Kafka's defaults). Security options as
    :class:`~seglog.kafka.listener.KafkaListener`'s."""

    def __init__(
        self,
        node: ReplicaNode,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        cluster_id: str = "seglog-cluster",
        broker_config: BrokerConfig | None = None,
        **options: Any,
    ) -> None:
        super().__init__(host, port, api_versions=NODE_API_VERSIONS, **options)
        self.node = node
        self.cluster_id = cluster_id
        #: What DescribeConfigs answers for the node (None: made from the node's own settings).
        self.broker_config = broker_config
        self.fetch_sessions = FetchSessionCache(1000)
        #: Clear while the node is paused (a frozen process): requests wait before reaching it.
        self._running = asyncio.Event()
        self._running.set()
        self._handlers.update(
            {
                0: self._produce,
                1: self._fetch,
                2: self._list_offsets,
                3: self._metadata,
                19: self._create_topics,
                20: self._delete_topics,
                21: self._delete_records,
                22: self._init_producer_id,
                32: self._describe_configs,
                37: self._create_partitions,
                43: self._elect_leaders,
                44: self._incremental_alter_configs,
            }
        )
        #: FindCoordinator and the group APIs (seglog.cluster.group_coordinator).
        self.groups = NodeGroups(node, self._ask, self._ask_controller, self._kafka_address)
        self._handlers.update(self.groups.handlers())

    async def start(self) -> None:
        self.groups.start()
        await super().start()

    async def close(self) -> None:
        await super().close()
        await self.groups.close()

    # -- pausing (a frozen node answers nothing) -------------------------------------------------

    def pause(self) -> None:
        """Hold every request from now on before it reaches the node (the node is frozen, as a
        SIGSTOPped process; its connections stay open) until :meth:`resume`. On the node's loop."""
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    async def _request(self, frame: memoryview, state: ConnState) -> list[Any] | None:
        if not self._running.is_set():
            await self._running.wait()
        return await super()._request(frame, state)

    # -- asking the node ------------------------------------------------------------------------

    def _ask(self, msg: Any) -> asyncio.Future[Any]:
        """Hand ``msg`` to the node; the future resolves with its reply (a node that is not
        running answers nothing)."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def reply(resp: Any) -> None:
            if not fut.done():
                fut.set_result(resp)

        self.node.handle(CONSUMER_REPLICA_ID, msg, reply)
        return fut

    async def _answer(self, fut: asyncio.Future[Any], wait_s: float, what: str) -> Any:
        try:
            return await asyncio.wait_for(fut, wait_s + _GRACE_S)
        except asyncio.TimeoutError:
            raise CloseConnection(f"node {self.node.node_id} did not answer {what}") from None

    def _ask_controller(self, msg: Any, timeout_ms: int) -> asyncio.Future[Any] | None:
        """Hand ``msg`` to the controller: this node's own when it is the active one, else sent
        to the controller node; the future resolves with its reply (None when the controller
        node did not answer). None when the node knows no controller."""
        node = self.node
        if node.controller is not None and node.controller.active:
            return self._ask(msg)
        if node.controller_id < 0:
            return None
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def done(resp: Any, err: BaseException | None) -> None:
            if not fut.done():
                fut.set_result(resp if err is None else None)

        node.send(node.controller_id, msg, done, timeout_ms)
        return fut

    def _kafka_address(self, node_id: int, state: ConnState) -> tuple[str, int] | None:
        """``(host, port)`` of node ``node_id``'s Kafka listener for the client on ``state``
        (this node: as it registered itself, else the address the client reached)."""
        node = self.node
        if node_id == node.node_id and not node.kafka_address:
            return state.advertised(self.host, self.port)
        addr = node.kafka_address if node_id == node.node_id else node.kafka_addresses.get(node_id)
        if not addr:
            return None
        host, _, port = addr.rpartition(":")
        return host.strip("[]"), int(port)

    async def _forwarded(
        self,
        out: dict[str, Any],
        fut: asyncio.Future[Any] | None,
        response: type[Any],
        what: str,
        done: Callable[[Any], bool],
        deadline: float,
        timeout_ms: int,
    ) -> Any:
        """The controller's answer ``fut`` to an admin request forwarded to ``what``, once
        ``done(answer)`` holds on this node (Kafka answers once its metadata shows the change;
        ``timeout_ms`` 0: no wait); None with the failure put in result ``out``: NOT_CONTROLLER
        when no controller answered (clients ask again, as while a controller is being
        elected), the controller's error, REQUEST_TIMED_OUT past ``deadline``."""
        controller_ms = self.node.config.controller_socket_timeout_ms
        resp = None if fut is None else await self._answer(fut, controller_ms / 1000.0, what)
        if not isinstance(resp, response):
            out["error_code"] = NotControllerError.code
            out["error_message"] = f"node {self.node.node_id} reached no controller to {what}"
            return None
        if resp.error != NONE:
            out["error_code"], out["error_message"] = resp.error, resp.message or None
            return None
        loop = asyncio.get_running_loop()
        while timeout_ms > 0 and not done(resp):
            left = deadline - loop.time()
            if left <= 0:
                late = RequestTimedOutError(
                    f"the controller did {what}, but node {self.node.node_id}'s metadata did not show it "
                    f"within timeout_ms {timeout_ms}"
                )
                out["error_code"], out["error_message"] = late.code, str(late)
                return None
            await asyncio.sleep(min(0.02, left))
        return resp

    def _gone(self, name: str, _resp: Any = None) -> bool:
        return not any(t == name for t, _ in self.node.metadata)

    def _has_leaders(self, name: str, count: int, resp: Any) -> bool:
        """This node knows a leader of each of topic ``name``'s partitions: ``count`` of them,
        -1 for as many as ``resp`` (a :class:`CreateTopicResponse`) assigned."""
        return self._leaders_known(name, len(resp.assignment) if count < 0 else count)

    def _names(self) -> list[str]:
        return sorted({t for t, _ in self.node.metadata})

    def _topic_name(self, tid: bytes) -> str:
        for name in self._names():
            if topic_id(name) == tid:
                return name
        return unknown_id_name(tid)

    def _not_served(self, topic: str, partition: int) -> KafkaError:
        """Why this node does not serve ``topic``-``partition`` as a leader."""
        node = self.node
        if (topic, partition) in node.offline_partitions:
            return node.offline_error((topic, partition))
        if (topic, partition) in node.metadata:
            return NotLeaderOrFollowerError(f"node {node.node_id} does not lead {topic}-{partition}")
        return UnknownTopicOrPartitionError(f"the cluster has no partition {topic}-{partition}")

    # -- Metadata -------------------------------------------------------------------------------

    async def _metadata(self, version: int, req: Message, state: ConnState) -> Message:
        node = self.node
        wanted = req.get("topics")
        names: Sequence[str]
        if wanted is None or (version == 0 and not wanted):
            names = self._names()
        else:
            names = [
                t["name"] if t["name"] is not None else self._topic_name(t.get("topic_id") or bytes(16)) for t in wanted
            ]
        live = set(node.live_brokers) | {node.node_id}
        addresses = dict(node.kafka_addresses)
        # This node as it registered itself (what the other nodes say of it), else the address
        # the client reached.
        if node.kafka_address:
            addresses[node.node_id] = node.kafka_address
        else:
            host, port = state.advertised(self.host, self.port)
            addresses[node.node_id] = f"{host}:{port}"
        brokers = []
        for b in sorted(live):
            addr = addresses.get(b)
            if not addr:
                continue
            bhost, _, bport = addr.rpartition(":")
            brokers.append({"node_id": b, "host": bhost.strip("[]"), "port": int(bport), "rack": None})
        served = {b["node_id"] for b in brokers}
        by_topic: dict[str, list[Any]] = {}
        for (t, _), info in sorted(node.metadata.items()):
            by_topic.setdefault(t, []).append(info)
        topics: list[Message] = []
        for name in names:
            if name.startswith(UNKNOWN_ID):
                topics.append(unknown_topic_id_metadata(name))
                continue
            infos = by_topic.get(name)
            if not infos:
                try:  # an illegal name is INVALID_TOPIC_EXCEPTION, as Kafka answers it
                    validate_topic_name(name)
                    code = UnknownTopicOrPartitionError.code
                except InvalidTopicError as exc:
                    code = exc.code
                topics.append(
                    {
                        "error_code": code,
                        "name": name,
                        "topic_id": bytes(16),
                        "is_internal": False,
                        "partitions": [],
                    }
                )
                continue
            parts = []
            for info in infos:
                st = info.state
                leader = st.leader if st.leader in served else -1
                offline = [
                    r
                    for r in info.replicas
                    if r not in live or (r == node.node_id and info.tp in node.offline_partitions)
                ]
                parts.append(
                    {
                        "error_code": NONE if leader >= 0 else LeaderNotAvailableError.code,
                        "partition_index": info.partition,
                        "leader_id": leader,
                        "leader_epoch": st.leader_epoch,
                        "replica_nodes": list(info.replicas),
                        "isr_nodes": list(st.isr),
                        "offline_replicas": offline,
                    }
                )
            topics.append(
                {
                    "error_code": NONE,
                    "name": name,
                    "topic_id": topic_id(name),
                    "is_internal": name == OFFSETS_TOPIC,
                    "partitions": parts,
                    "topic_authorized_operations": _NO_OPERATIONS,
                }
            )
        return {
            "throttle_time_ms": 0,
            "brokers": brokers,
            "cluster_id": self.cluster_id,
            "controller_id": node.controller_id if node.controller_id in served else -1,
            "topics": topics,
            "cluster_authorized_operations": _NO_OPERATIONS,
        }

    # -- Produce --------------------------------------------------------------------------------

    async def _produce(self, version: int, req: Message, state: ConnState) -> Message | None:
        acks = req["acks"]
        timeout_ms = max(int(req.get("timeout_ms", 30_000)), 0)
        pending: list[tuple[str, dict[str, Any], asyncio.Future[Any]]] = []
        responses = []
        for topic in req["topic_data"]:
            name = topic["name"]
            parts = []
            for pd in topic["partition_data"]:
                p, records = pd["index"], pd["records"]
                out: dict[str, Any] = {
                    "index": p,
                    "error_code": NONE,
                    "base_offset": -1,
                    "log_append_time_ms": -1,
                    "log_start_offset": -1,
                    "record_errors": [],
                    "error_message": None,
                }
                parts.append(out)
                if acks not in (0, 1, -1):
                    state.fail(
                        out,
                        f"Produce to {name}-{p}",
                        InvalidRequiredAcksError(f"acks must be 0, 1 or -1 (all), not {acks}"),
                    )
                    continue
                if records is None or len(records) == 0:
                    state.fail(
                        out, f"Produce to {name}-{p}", InvalidRequestError(f"produce to {name}-{p} without records")
                    )
                    continue
                fut = self._ask(ProduceRequest(name, p, records, acks, timeout_ms))
                pending.append((name, out, fut))
            responses.append({"name": name, "partition_responses": parts})
        if acks == 0:
            close_if_acks0_failed(responses)
            return None
        for topic, out, fut in pending:
            resp = await self._answer(fut, timeout_ms / 1000.0, "a produce")
            self._produce_result(topic, out, resp, state)
        return {"responses": responses, "throttle_time_ms": 0}

    def _produce_result(self, topic: str, out: dict[str, Any], resp: Any, state: ConnState) -> None:
        if not isinstance(resp, ProduceResponse):
            out["error_code"] = getattr(resp, "error", -1) or -1
            out["error_message"] = getattr(resp, "message", "") or type(resp).__name__
            return
        out["error_code"] = resp.error
        if resp.error != NONE:
            out["error_message"] = resp.message or None
            if resp.error != NotLeaderOrFollowerError.code:
                log.debug(
                    "Kafka client %s: produce to %s-%d: %s", fmt_peer(state.peer), topic, out["index"], resp.message
                )
            return
        out["base_offset"] = resp.base_offset
        out["log_append_time_ms"] = resp.log_append_time
        p = self.node.partitions.get((topic, out["index"]))
        if p is not None and not p.log.closed:
            out["log_start_offset"] = p.log.log_start_offset

    # -- InitProducerId -------------------------------------------------------------------------

    async def _init_producer_id(self, version: int, req: Message, state: ConnState) -> Message:
        def answer(code: int, pid: int = -1, epoch: int = -1) -> Message:
            return {"throttle_time_ms": 0, "error_code": code, "producer_id": pid, "producer_epoch": epoch}

        if req.get("transactional_id") is not None:
            return answer(UnsupportedVersionError.code)
        msg = InitProducerIdRequest(req.get("producer_id", -1), req.get("producer_epoch", -1))
        timeout_ms = self.node.config.controller_socket_timeout_ms
        fut = self._ask_controller(msg, timeout_ms)
        if fut is None:
            return answer(COORDINATOR_NOT_AVAILABLE)
        resp = await self._answer(fut, timeout_ms / 1000.0, "InitProducerId")
        if not isinstance(resp, InitProducerIdResponse):
            return answer(COORDINATOR_NOT_AVAILABLE)
        if resp.error != NONE:
            # No controller, or not one any more: the producer asks again.
            code = COORDINATOR_NOT_AVAILABLE if resp.error == NotControllerError.code else resp.error
            return answer(code)
        return answer(NONE, resp.producer_id, resp.producer_epoch)

    # -- CreateTopics ---------------------------------------------------------------------------

    async def _create_topics(self, version: int, req: Message, state: ConnState) -> Message:
        timeout_ms = max(int(req.get("timeout_ms", 30_000)), 0)
        deadline = asyncio.get_running_loop().time() + timeout_ms / 1000.0
        validate_only = bool(req.get("validate_only"))
        controller_ms = self.node.config.controller_socket_timeout_ms
        pending: list[tuple[dict[str, Any], CreateTopicRequest, asyncio.Future[Any] | None]] = []
        results = []
        seen: dict[str, int] = {}
        for t in req["topics"]:
            seen[t["name"]] = seen.get(t["name"], 0) + 1
        for t in req["topics"]:
            name = t["name"]
            out = create_topics_result(name)
            results.append(out)
            try:
                if seen[name] > 1:
                    # Kafka's rule: a name given twice is refused, the other topics are created.
                    raise InvalidRequestError(f"topic {name!r} appears {seen[name]} times in one CreateTopics request")
                msg = self._create_topic_request(t)
                if validate_only:
                    self._validate_topic(msg)
                    self._created(out, msg)
                    continue
            except SeglogError as exc:
                state.fail(out, f"CreateTopics {name}", exc)
                continue
            pending.append((out, msg, self._ask_controller(msg, controller_ms)))
        for out, msg, fut in pending:
            resp = await self._forwarded(
                out,
                fut,
                CreateTopicResponse,
                f"create {msg.name!r}",
                # Kafka answers once the topic is in its metadata: this node knows a leader of
                # every partition, so the client's next Metadata finds them.
                functools.partial(self._has_leaders, msg.name, -1),
                deadline,
                timeout_ms,
            )
            if resp is not None:
                self._created(
                    out, dataclasses.replace(msg, partitions=len(resp.assignment), assignment=resp.assignment)
                )
                out["topic_id"] = topic_id(msg.name)
        return {"throttle_time_ms": 0, "topics": results}

    def _create_topic_request(self, t: Message) -> CreateTopicRequest:
        """The controller's request for CreateTopics entry ``t``, its numbers checked."""
        name, n, rf = t["name"], t["num_partitions"], t["replication_factor"]
        assignment: tuple[tuple[int, ...], ...] = ()
        if t.get("assignments"):
            if n != -1 or rf != -1:
                raise InvalidRequestError(
                    f"topic {name!r}: with explicit assignments num_partitions and replication_factor must be -1, "
                    f"not {n} and {rf}"
                )
            by_index = {a["partition_index"]: tuple(a["broker_ids"]) for a in t["assignments"]}
            if sorted(by_index) != list(range(len(by_index))) or len(by_index) != len(t["assignments"]):
                raise InvalidReplicaAssignmentError(
                    f"topic {name!r}: the assignments must name partitions 0..{len(t['assignments']) - 1} once each, "
                    f"not {sorted(a['partition_index'] for a in t['assignments'])}"
                )
            assignment = tuple(by_index[p] for p in range(len(by_index)))
            self._check_assignment(name, assignment)
            n, rf = len(assignment), len(assignment[0])
        else:
            # -1: this node's num.partitions / default.replication.factor (Kafka's broker keys).
            if n == -1:
                n = self.node.config.num_partitions
            if rf == -1:
                rf = self.node.config.default_replication_factor
            if n < 1:
                raise InvalidPartitionsError(f"topic {name!r}: number of partitions must be at least 1, got {n}")
            if rf < 1:
                raise InvalidReplicationFactorError(f"topic {name!r}: replication factor must be at least 1, got {rf}")
        config = {c["name"]: c["value"] for c in t.get("configs") or ()}
        for key, value in config.items():
            if value is None:
                raise InvalidRequestError(f"topic {name!r}: config {key} has no value")
        self.node.topic_config(config)  # a key or value the cluster would refuse: refused now
        return CreateTopicRequest(name, n, rf, tuple((k, json.dumps(v)) for k, v in config.items()), assignment)

    def _validate_topic(self, msg: CreateTopicRequest) -> None:
        """What the controller would check, from this node's view (validate_only)."""
        validate_topic_name(msg.name)
        if any(t == msg.name for t, _ in self.node.metadata):
            raise TopicAlreadyExistsError(f"topic {msg.name!r} already exists")
        live = self._live_ids()
        if not msg.assignment and msg.replication_factor > len(live):
            raise InvalidReplicationFactorError(
                f"replication factor {msg.replication_factor} is larger than the {len(live)} live nodes {live}"
            )

    def _live_ids(self) -> list[int]:
        return sorted(set(self.node.live_brokers) | {self.node.node_id})

    def _check_assignment(self, name: str, assignment: tuple[tuple[int, ...], ...]) -> None:
        """Explicit replicas: distinct, as many for every partition, on nodes alive (as Kafka)."""
        live = self._live_ids()
        for p, replicas in enumerate(assignment):
            if not replicas or len(set(replicas)) != len(replicas):
                raise InvalidReplicaAssignmentError(
                    f"topic {name!r} partition {p}: replicas {list(replicas)} must be distinct and non-empty"
                )
            if len(replicas) != len(assignment[0]):
                raise InvalidReplicaAssignmentError(
                    f"topic {name!r}: partition {p} has {len(replicas)} replicas, partition 0 has "
                    f"{len(assignment[0])}; every partition needs as many"
                )
            unknown = sorted(set(replicas) - set(live))
            if unknown:
                raise InvalidReplicaAssignmentError(
                    f"topic {name!r} partition {p}: nodes {unknown} are not live nodes of the cluster {live}"
                )

    def _created(self, out: dict[str, Any], msg: CreateTopicRequest) -> None:
        """Fill CreateTopics result ``out`` for the topic ``msg`` creates: its numbers and every
        topic config key with its value and source (as Kafka answers from v5)."""
        overrides = {k: json.loads(v) for k, v in msg.config}
        out["num_partitions"] = msg.partitions
        out["replication_factor"] = len(msg.assignment[0]) if msg.assignment else msg.replication_factor
        node = self.node
        out["configs"] = topic_configs_created(node.topic_config(overrides), overrides, node.topic_config())

    def _leaders_known(self, name: str, partitions: int) -> bool:
        meta = self.node.metadata
        return all((name, p) in meta and meta[(name, p)].state.leader >= 0 for p in range(partitions))

    # -- DeleteTopics ---------------------------------------------------------------------------

    async def _delete_topics(self, version: int, req: Message, state: ConnState) -> Message:
        timeout_ms = max(int(req.get("timeout_ms", 30_000)), 0)
        deadline = asyncio.get_running_loop().time() + timeout_ms / 1000.0
        controller_ms = self.node.config.controller_socket_timeout_ms
        if version >= 6:
            asked = [(t.get("name"), t.get("topic_id") or bytes(16)) for t in req["topics"]]
        else:
            asked = [(n, bytes(16)) for n in req["topic_names"]]
        names = [n if n is not None else self._topic_name(tid) for n, tid in asked]
        pending: list[tuple[dict[str, Any], str, asyncio.Future[Any] | None]] = []
        results = []
        for (_, tid), name in zip(asked, names):
            unknown_id = name.startswith(UNKNOWN_ID)
            out: dict[str, Any] = {
                "name": None if unknown_id else name,
                "topic_id": tid if unknown_id else topic_id(name),
                "error_code": NONE,
                "error_message": None,
            }
            results.append(out)
            if unknown_id:
                state.fail(out, "DeleteTopics", UnknownTopicIdError(f"no topic has the topic id {tid.hex()}"))
            elif names.count(name) > 1:
                err = InvalidRequestError(
                    f"topic {name!r} appears {names.count(name)} times in one DeleteTopics request"
                )
                state.fail(out, f"DeleteTopics {name}", err)
            else:
                pending.append((out, name, self._ask_controller(DeleteTopicRequest(name), controller_ms)))
        for out, name, fut in pending:
            # Kafka answers once the topic is gone from its metadata.
            gone = functools.partial(self._gone, name)
            await self._forwarded(out, fut, DeleteTopicResponse, f"delete {name!r}", gone, deadline, timeout_ms)
        return {"throttle_time_ms": 0, "responses": results}

    # -- DescribeConfigs ------------------------------------------------------------------------

    async def _describe_configs(self, version: int, req: Message, state: ConnState) -> Message:
        node = self.node

        def topic(name: str) -> tuple[LogConfig, Mapping[str, Any]]:
            if not any(t == name for t, _ in node.metadata):
                raise UnknownTopicOrPartitionError(f"the cluster has no topic {name!r}")
            overrides = node.topic_configs.get(name) or {}
            return node.topic_config(overrides), overrides

        return describe_config_resources(version, req, node.node_id, self._broker(), node.topic_config(), topic)

    def _broker(self) -> BrokerConfig:
        """The node's broker properties: as given, else from its replication settings and topic
        defaults (the rest Kafka's defaults)."""
        if self.broker_config is None:
            node = self.node
            props = {"node.id": node.node_id, "log.dirs": list(node.log_dirs)}
            props.update(node.config.broker_properties(node.log_defaults))
            self.broker_config = BrokerConfig.from_dict(props)
        return self.broker_config

    # -- CreatePartitions -----------------------------------------------------------------------

    async def _create_partitions(self, version: int, req: Message, state: ConnState) -> Message:
        timeout_ms = max(int(req.get("timeout_ms", 30_000)), 0)
        deadline = asyncio.get_running_loop().time() + timeout_ms / 1000.0
        controller_ms = self.node.config.controller_socket_timeout_ms
        validate_only = bool(req.get("validate_only"))
        seen: dict[str, int] = {}
        for t in req["topics"]:
            seen[t["name"]] = seen.get(t["name"], 0) + 1
        pending: list[tuple[dict[str, Any], CreatePartitionsRequest, asyncio.Future[Any] | None]] = []
        results = []
        for t in req["topics"]:
            name = t["name"]
            out: dict[str, Any] = {"name": name, "error_code": NONE, "error_message": None}
            results.append(out)
            assignments = t.get("assignments")
            if seen[name] > 1:
                err = InvalidRequestError(f"topic {name!r} appears {seen[name]} times in one CreatePartitions request")
                state.fail(out, f"CreatePartitions {name}", err)
                continue
            msg = CreatePartitionsRequest(
                name, t["count"], tuple(tuple(a["broker_ids"]) for a in assignments or ()), validate_only
            )
            pending.append((out, msg, self._ask_controller(msg, controller_ms)))
        for out, msg, fut in pending:
            # Answered once this node knows the new partitions' leaders (as CreateTopics).
            # validate_only: nothing to wait for (0 partitions asked after).
            done = functools.partial(self._has_leaders, msg.name, 0 if validate_only else msg.count)
            await self._forwarded(out, fut, CreatePartitionsResponse, f"grow {msg.name!r}", done, deadline, timeout_ms)
        return {"throttle_time_ms": 0, "results": results}

    # -- IncrementalAlterConfigs ---------------------------------------------------------------

    async def _incremental_alter_configs(self, version: int, req: Message, state: ConnState) -> Message:
        controller_ms = self.node.config.controller_socket_timeout_ms
        deadline = asyncio.get_running_loop().time() + controller_ms / 1000.0
        validate_only = bool(req.get("validate_only"))
        node = self.node
        resources = [(r["resource_type"], r["resource_name"]) for r in req["resources"]]
        pending: list[tuple[dict[str, Any], AlterTopicConfigRequest, asyncio.Future[Any] | None]] = []
        responses = []
        for r, key in zip(req["resources"], resources):
            rtype, name = key
            out: dict[str, Any] = {
                "error_code": NONE,
                "error_message": None,
                "resource_type": rtype,
                "resource_name": name,
            }
            responses.append(out)
            try:
                if rtype != _TOPIC:
                    raise InvalidRequestError(
                        f"resource type {rtype} cannot be altered: only topic configs (2) can; a node's broker "
                        "configs come from its properties at start"
                    )
                if resources.count(key) > 1:
                    raise InvalidRequestError(f"topic {name!r} appears {resources.count(key)} times in one request")
                keys = [c["name"] for c in r["configs"]]
                if len(set(keys)) != len(keys):
                    raise InvalidRequestError(f"topic {name!r}: a config key is given more than once: {keys}")
                if not any(t == name for t, _ in node.metadata):
                    raise UnknownTopicOrPartitionError(f"the cluster has no topic {name!r}")
                overrides = node.topic_configs.get(name) or {}
                to_set, to_delete = topic_config_changes(r["configs"], node.topic_config(overrides))
                trial = {k: v for k, v in overrides.items() if k not in to_delete}
                trial.update(to_set)
                node.topic_config(trial)  # INVALID_CONFIG naming the key, before anything is sent
            except SeglogError as exc:
                state.fail(out, f"IncrementalAlterConfigs {name}", exc)
                continue
            msg = AlterTopicConfigRequest(
                name, tuple((k, json.dumps(v)) for k, v in to_set.items()), tuple(to_delete), validate_only
            )
            pending.append((out, msg, self._ask_controller(msg, controller_ms)))
        for out, msg, fut in pending:
            # Answered once this node has the new overrides (a DescribeConfigs here shows them).
            seen = functools.partial(self._configured, msg.name, validate_only)
            await self._forwarded(
                out, fut, AlterTopicConfigResponse, f"alter {msg.name!r}", seen, deadline, controller_ms
            )
        return {"throttle_time_ms": 0, "responses": responses}

    def _configured(self, name: str, validate_only: bool, resp: AlterTopicConfigResponse) -> bool:
        return validate_only or self.node.topic_configs.get(name) == {k: json.loads(v) for k, v in resp.config}

    # -- ElectLeaders ---------------------------------------------------------------------------

    async def _elect_leaders(self, version: int, req: Message, state: ConnState) -> Message:
        """Each partition an :class:`~seglog.cluster.messages.ElectLeadersRequest` forwarded to
        the controller, which moves leadership to the preferred replica (the first of the
        assignment) when it is alive and in the ISR; answered once the controller has written
        the new state, as Kafka answers. Only preferred elections (``election_type`` 0);
        ``topic_partitions`` null means every partition this node knows."""
        controller_ms = self.node.config.controller_socket_timeout_ms
        election_type = int(req.get("election_type", 0))
        wanted = req.get("topic_partitions")
        asked: dict[str, list[int]] = {}
        if wanted is None:
            for t, p in sorted(self.node.metadata):
                asked.setdefault(t, []).append(p)
        else:
            for tp in wanted:
                asked.setdefault(tp["topic"], []).extend(tp["partitions"])
        results = []
        for name, parts in asked.items():
            outs = []
            for p in parts:
                out: dict[str, Any] = {"partition_id": p, "error_code": NONE, "error_message": None}
                outs.append(out)
                if election_type != 0:
                    out["error_code"] = InvalidRequestError.code
                    out["error_message"] = f"election_type {election_type} is not served: only 0 (preferred)"
                    continue
                fut = self._ask_controller(ElectLeadersRequest(name, p), controller_ms)
                resp = None if fut is None else await self._answer(fut, controller_ms / 1000.0, "ElectLeaders")
                if not isinstance(resp, ElectLeadersResponse):
                    out["error_code"] = NotControllerError.code
                    out["error_message"] = f"node {self.node.node_id} reached no controller to elect a leader"
                elif resp.error != NONE:
                    out["error_code"], out["error_message"] = resp.error, resp.message or None
            results.append({"topic": name, "partition_result": outs})
        return {"throttle_time_ms": 0, "error_code": NONE, "replica_election_results": results}

    # -- DeleteRecords --------------------------------------------------------------------------

    async def _delete_records(self, version: int, req: Message, state: ConnState) -> Message:
        timeout_ms = max(int(req.get("timeout_ms", 30_000)), 0)
        pending: list[tuple[str, dict[str, Any], asyncio.Future[Any]]] = []
        topics = []
        for t in req["topics"]:
            name = t["name"]
            parts = []
            for dp in t["partitions"]:
                p, offset = dp["partition_index"], dp["offset"]
                out: dict[str, Any] = {"partition_index": p, "low_watermark": -1, "error_code": NONE}
                parts.append(out)
                if offset < -1:
                    out["error_code"] = OffsetOutOfRangeError.code
                    state.note(
                        f"DeleteRecords {name}-{p}",
                        OffsetOutOfRangeError(f"offset {offset}: -1 (the high watermark) or an offset >= 0"),
                    )
                    continue
                pending.append((name, out, self._ask(DeleteRecordsRequest(name, p, offset, timeout_ms))))
            topics.append({"name": name, "partitions": parts})
        for name, out, fut in pending:
            resp = await self._answer(fut, timeout_ms / 1000.0, "DeleteRecords")
            if not isinstance(resp, DeleteRecordsResponse):
                out["error_code"] = getattr(resp, "error", 0) or UnknownServerError.code
                continue
            out["error_code"], out["low_watermark"] = resp.error, resp.low_watermark
            if resp.error == UnknownTopicOrPartitionError.code:
                out["error_code"] = self._not_served(name, out["partition_index"]).code
        return {"throttle_time_ms": 0, "topics": topics}

    # -- Fetch ----------------------------------------------------------------------------------

    async def _fetch(self, version: int, req: Message, state: ConnState) -> Message:
        state_ = req.get("replica_state")
        replica = int(state_.get("replica_id", -1)) if state_ else int(req.get("replica_id", -1))
        if replica >= 0:
            return {
                "throttle_time_ms": 0,
                "error_code": InvalidRequestError.code,
                "session_id": 0,
                "responses": [],
            }
        ids = version >= 13
        if ids:
            for topic in req["topics"]:
                topic["topic"] = self._topic_name(topic["topic_id"])
            for topic in req.get("forgotten_topics_data") or ():
                topic["topic"] = self._topic_name(topic["topic_id"])
        context = self.fetch_sessions.new_context(req, ids)
        if context.error:
            log.debug("Kafka client %s: Fetch: %s", fmt_peer(state.peer), context.message)
            return {"throttle_time_ms": 0, "error_code": context.error, "session_id": 0, "responses": []}
        topics = context.topics
        committed = req.get("isolation_level", 0) == 1
        parts = tuple(
            FetchPartition(
                t["topic"],
                fp["partition"],
                fp["fetch_offset"],
                fp.get("current_leader_epoch", -1),
                -1,
                -1,
                max(fp["partition_max_bytes"], 0),
            )
            for t in topics
            for fp in t["partitions"]
        )
        max_wait = max(req["max_wait_ms"], 0)
        msg = FetchRequest(
            CONSUMER_REPLICA_ID,
            parts,
            max_wait_ms=max_wait,
            min_bytes=req["min_bytes"],
            max_bytes=max(req.get("max_bytes", 0x7FFFFFFF), 0),
            isolation=ISOLATION_HIGH_WATERMARK,
        )
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def reply(resp: Any) -> None:
            # On the loop, as the node answers: the read's segment slices become bytes or file
            # regions now, before anything else can truncate or delete the segments.
            if fut.done():
                return
            try:
                fut.set_result(self._fetch_responses(topics, resp, committed, ids))
            except Exception as exc:  # noqa: BLE001 - the request's own failure
                fut.set_exception(exc)

        self.node.handle(CONSUMER_REPLICA_ID, msg, reply)
        responses = await self._answer(fut, max_wait / 1000.0, "a fetch")
        code, session_id, responses = context.respond(responses)
        return {"throttle_time_ms": 0, "error_code": code, "session_id": session_id, "responses": responses}

    def _fetch_responses(self, topics: list[Message], resp: Any, committed: bool, ids: bool) -> list[Any]:
        """The Fetch response's ``responses`` from the node's :class:`FetchResponse` (whose
        partitions come in the order they were asked for), records held for sending."""
        got: Sequence[FetchPartitionResponse] = resp.partitions if isinstance(resp, FetchResponse) else ()
        # A request the node could not handle at all (an ErrorResponse): its code everywhere.
        err = NONE if isinstance(resp, FetchResponse) else (getattr(resp, "error", 0) or UnknownServerError.code)
        responses: list[Any] = []
        i = 0
        for t in topics:
            name = t["topic"]
            parts = []
            for fp in t["partitions"]:
                r = got[i] if i < len(got) else None
                i += 1
                out: dict[str, Any] = {
                    "partition_index": fp["partition"],
                    "error_code": err if r is None else r.error,
                    "high_watermark": -1 if r is None else r.high_watermark,
                    "last_stable_offset": -1 if r is None else r.high_watermark,
                    "log_start_offset": -1 if r is None else r.log_start_offset,
                    "aborted_transactions": [] if committed else None,
                    "preferred_read_replica": -1,
                    "records": b"" if r is None or r.error != NONE else r.records,
                }
                if out["error_code"] == UnknownTopicOrPartitionError.code:
                    if name.startswith(UNKNOWN_ID):
                        out["error_code"] = UnknownTopicIdError.code
                    else:
                        out["error_code"] = self._not_served(name, fp["partition"]).code
                parts.append(out)
            entry: dict[str, Any] = {"topic": name, "partitions": parts}
            if ids:
                entry["topic_id"] = (
                    bytes.fromhex(name[len(UNKNOWN_ID) :]) if name.startswith(UNKNOWN_ID) else topic_id(name)
                )
            responses.append(entry)
        hold_records(responses)
        return responses

    # -- ListOffsets ----------------------------------------------------------------------------

    async def _list_offsets(self, version: int, req: Message, state: ConnState) -> Message:
        topics = []
        for topic in req["topics"]:
            name = topic["name"]
            parts = []
            for lp in topic["partitions"]:
                out = {
                    "partition_index": lp["partition_index"],
                    "error_code": NONE,
                    "timestamp": -1,
                    "offset": -1,
                    "leader_epoch": -1,
                }
                try:
                    self._list_offset(name, lp, out)
                except KafkaError as exc:
                    out["error_code"] = exc.code
                except ValueError as exc:
                    out["error_code"] = InvalidRequestError.code
                    state.note(f"ListOffsets {name}-{lp['partition_index']}", exc)
                parts.append(out)
            topics.append({"name": name, "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

    def _list_offset(self, name: str, lp: Message, out: dict[str, Any]) -> None:
        p_ = lp["partition_index"]
        p = self.node.partitions.get((name, p_))
        if p is None or p.log.closed or not p.is_leader:
            raise self._not_served(name, p_)
        current = lp.get("current_leader_epoch", -1)
        if current >= 0 and current < p.leader_epoch:
            raise FencedLeaderEpochError(
                f"{name}-{p_} is at leader epoch {p.leader_epoch}, the request names {current}"
            )
        if current > p.leader_epoch:
            raise UnknownLeaderEpochError(
                f"node {self.node.node_id} knows leader epoch {p.leader_epoch} of {name}-{p_}, not {current}"
            )
        ts = lp["timestamp"]
        if ts == -4:  # earliest local: nothing is tiered, so the log start
            ts = -2
        if ts == -5:  # latest tiered: nothing is tiered
            return
        found = p.log.offset_for_timestamp(ts, upper_bound=p.log.high_watermark)
        if found is not None:
            out["offset"], out["timestamp"] = found
            out["leader_epoch"] = max(p.log.epoch_cache.latest_epoch, 0)
