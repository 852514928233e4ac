"""Consumer groups on a cluster node's Kafka listener: FindCoordinator and the group APIs.

A group is coordinated by the node that leads its partition of the replicated topic
``__consumer_offsets`` (partition ``abs(javaHashCode(group.id)) % partitions``, as Kafka's
``partitionFor``). The topic is created through the controller at the first FindCoordinator,
with ``offsets.topic.num.partitions`` partitions, ``offsets.topic.replication.factor`` replicas
(fewer live nodes: COORDINATOR_NOT_AVAILABLE and no topic, as Kafka) and
``cleanup.policy=compact``; until a leader of the group's partition is known FindCoordinator
answers COORDINATOR_NOT_AVAILABLE. Transaction coordinator keys are not served (no
transactions).

The groups themselves are :class:`seglog.kafka.groups.GroupCoordinator`'s, over
:class:`NodeGroups` as its offsets backend:

- a group request for a group whose partition this node does not lead is answered
  NOT_COORDINATOR (the client finds the coordinator again);
- when the node becomes leader of a ``__consumer_offsets`` partition (or first serves a group
  of it) it replays the partition's log up to its log end, ``offsets.load.buffer.size`` (5 MiB)
  at a time with the node's other work in between; meanwhile the group requests of that
  partition are answered COORDINATOR_LOAD_IN_PROGRESS (clients retry), never from a partial
  replay. The last value of each key wins, a tombstone deletes it. That gives the committed offsets and each group's last generation (the
  group metadata record the coordinator writes when a SyncGroup completes and when a group
  empties, appended and answered as a commit is): the members of a Stable group go on
  heartbeating and committing with their generation, without a rebalance;
- an OffsetCommit is one record batch appended through the node's leader path with
  ``acks=-1`` (Kafka's coordinator writes with acks=all and the topic's
  ``min.insync.replicas``), answered once the ISR holds it; the node's errors are mapped as
  Kafka's coordinator maps them (NOT_ENOUGH_REPLICAS, a timeout: COORDINATOR_NOT_AVAILABLE;
  NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR: NOT_COORDINATOR; a batch too large:
  INVALID_COMMIT_OFFSET_SIZE). The cached offsets change only once the commit is answered;
- when a topic is deleted (its partitions leave the node's metadata), the coordinator appends
  tombstones for the committed offsets of its partitions, as Kafka's does; acknowledged, they
  leave the cache (a failed write is tried again at the next look). A topic deleted and made
  again under the same name within one look (100 ms) keeps them;
- when the node stops leading the partition (another node was elected, or this one stopped),
  its groups are dropped: waiting JoinGroup and SyncGroup requests are answered
  NOT_COORDINATOR, later ones too, so members find the new coordinator and join it, which
  has loaded every acknowledged commit from its replica.

Leadership is looked at on every group request and every 100 ms.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from seglog.cluster.messages import NONE, CreateTopicRequest, CreateTopicResponse, ProduceRequest, ProduceResponse
from seglog.errors import UnsupportedVersionError
from seglog.kafka.groups import GroupCoordinator, group_api_handlers
from seglog.storage.group_offsets import (
    OFFSETS_TOPIC,
    GroupMetadata,
    OffsetAndMetadata,
    PartitionReplay,
    group_batch,
    offsets_batch,
    partition_for_group,
)
from seglog.util.loop import cancel_and_wait

if TYPE_CHECKING:
    from seglog.cluster.node import ReplicaNode
    from seglog.cluster.partition import Partition
    from seglog.kafka.codec import Message
    from seglog.kafka.connection import ConnState
    from seglog.kafka.listener import Handler

__all__ = ["COMMIT_TIMEOUT_MS", "NodeGroups"]

log = logging.getLogger("seglog.cluster.groups")

COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
INVALID_COMMIT_OFFSET_SIZE = 28
UNKNOWN_SERVER_ERROR = -1

#: Kafka's ``offsets.load.buffer.size`` default: how much of the log one replay step reads.
LOAD_BUFFER_BYTES = 5 * 1024 * 1024
#: Kafka's ``offsets.commit.timeout.ms`` default: how long a commit waits for the ISR.
COMMIT_TIMEOUT_MS = 5000
#: How often leadership of the ``__consumer_offsets`` partitions is looked at.
_WATCH_S = 0.1
#: Added to the commit timeout before a node that does not answer counts as a timeout.
_GRACE_S = 5.0

#: What a failed append of a commit is answered with (Kafka's ``GroupMetadataManager``).
_COMMIT_ERRORS = {
    3: COORDINATOR_NOT_AVAILABLE,  # UNKNOWN_TOPIC_OR_PARTITION
    19: COORDINATOR_NOT_AVAILABLE,  # NOT_ENOUGH_REPLICAS
    20: COORDINATOR_NOT_AVAILABLE,  # NOT_ENOUGH_REPLICAS_AFTER_APPEND
    7: COORDINATOR_NOT_AVAILABLE,  # REQUEST_TIMED_OUT
    6: NOT_COORDINATOR,  # NOT_LEADER_OR_FOLLOWER
    56: NOT_COORDINATOR,  # KAFKA_STORAGE_ERROR
    10: INVALID_COMMIT_OFFSET_SIZE,  # MESSAGE_TOO_LARGE
    18: INVALID_COMMIT_OFFSET_SIZE,  # RECORD_LIST_TOO_LARGE
    4: INVALID_COMMIT_OFFSET_SIZE,  # INVALID_FETCH_SIZE
}

Ask = Callable[[Any], "asyncio.Future[Any]"]
AskController = Callable[[Any, int], "asyncio.Future[Any] | None"]


class _Loaded:
    """A ``__consumer_offsets`` partition this node leads: the leader epoch it was loaded at,
    the partition count it was mapped with, the committed offsets and the groups' last stored
    generations."""

    __slots__ = ("deleting", "epoch", "groups", "num_partitions", "offsets", "ready", "task")

    def __init__(
        self,
        epoch: int,
        num_partitions: int,
        offsets: dict[tuple[str, str, int], OffsetAndMetadata],
        groups: dict[str, GroupMetadata],
    ) -> None:
        self.epoch = epoch
        self.num_partitions = num_partitions
        self.offsets = offsets
        self.groups = groups
        #: False while the log is replayed (by ``task``).
        self.ready = False
        self.task: asyncio.Task[None] | None = None
        #: Tombstones being written for the offsets of deleted topics.
        self.deleting: asyncio.Task[None] | None = None


class NodeGroups:
    """The consumer groups of ``node`` (see module docs). ``ask(msg)`` hands a message to the
    node and resolves with its reply; ``ask_controller(msg, timeout_ms)`` to the controller
    (None when none is known); ``address(node_id, state)`` is the ``(host, port)`` of a node's
    Kafka listener as the client on ``state`` should reach it, None for a node without one.
    On the node's loop."""

    def __init__(
        self,
        node: ReplicaNode,
        ask: Ask,
        ask_controller: AskController,
        address: Callable[[int, ConnState], tuple[str, int] | None],
    ) -> None:
        self.node = node
        self._ask = ask
        self._ask_controller = ask_controller
        self._address = address
        cfg = node.config
        self.coordinator = GroupCoordinator(
            None,
            cfg.group_initial_rebalance_delay_ms,
            cfg.group_min_session_timeout_ms,
            cfg.group_max_session_timeout_ms,
            offsets=self,
        )
        self._loaded: dict[int, _Loaded] = {}
        #: How much of a ``__consumer_offsets`` log one step of a replay reads.
        self.load_buffer_bytes = LOAD_BUFFER_BYTES
        self._creating: asyncio.Future[Any] | None = None
        self._watch: asyncio.Task[None] | None = None

    def handlers(self) -> dict[int, Handler]:
        """The listener's handlers of FindCoordinator and the group APIs, by API key."""
        return {10: self.find_coordinator, **group_api_handlers(self.coordinator)}

    def start(self) -> None:
        self.coordinator.start()
        self._watch = asyncio.get_running_loop().create_task(self._watch_loop())

    async def close(self) -> None:
        tasks = [t for t in [self._watch, *(x.task for x in self._loaded.values())] if t is not None]
        tasks += [x.deleting for x in self._loaded.values() if x.deleting is not None]
        await cancel_and_wait(tasks, "the node's group loading tasks")
        await self.coordinator.close()

    # -- leadership of __consumer_offsets ---------------------------------------------------------

    def _num_partitions(self) -> int:
        """The partitions of ``__consumer_offsets`` the node knows of (0: no such topic yet)."""
        return sum(1 for t, _ in self.node.metadata if t == OFFSETS_TOPIC)

    def _led(self, p: int) -> Partition | None:
        """This node's replica of ``__consumer_offsets``-``p`` when it leads it, else None."""
        part = self.node.partitions.get((OFFSETS_TOPIC, p))
        if not self.node.running or part is None or not part.is_leader or part.log.closed:
            return None
        return part

    def _load(self, p: int, part: Partition, num_partitions: int) -> _Loaded:
        """Partition ``p``, which this node leads: as loaded (or being loaded) at its current
        leader epoch, else a replay of its log started now."""
        have = self._loaded.get(p)
        if have is not None and have.epoch == part.leader_epoch and have.num_partitions == num_partitions:
            return have
        if have is not None:
            self._unload(p)
        loaded = _Loaded(part.leader_epoch, num_partitions, {}, {})
        self._loaded[p] = loaded
        loaded.task = asyncio.get_running_loop().create_task(self._replay(p, part, loaded))
        return loaded

    async def _replay(self, p: int, part: Partition, loaded: _Loaded) -> None:
        """Replay the partition's log up to its log end, ``load_buffer_bytes`` at a time with
        the loop's other work in between; then serve its groups (until then they are answered
        COORDINATOR_LOAD_IN_PROGRESS). A failure drops the partition, so the next look or
        request starts again."""
        start = time.monotonic()
        try:
            r = PartitionReplay(part.log, "log_end", self.load_buffer_bytes)
            while not r.step():
                await asyncio.sleep(0)
        except Exception:  # noqa: BLE001 - retried at the next look, and by requests
            log.exception("node %d cannot load %s-%d", self.node.node_id, OFFSETS_TOPIC, p)
            if self._loaded.get(p) is loaded:
                del self._loaded[p]
            return
        loaded.offsets, loaded.groups, loaded.ready = r.offsets, r.groups, True
        log.info(
            "node %d coordinates the groups of %s-%d (leader epoch %d): %d committed offsets, %d groups "
            "loaded in %.0f ms",
            self.node.node_id,
            OFFSETS_TOPIC,
            p,
            part.leader_epoch,
            len(loaded.offsets),
            len(loaded.groups),
            (time.monotonic() - start) * 1000,
        )

    def _unload(self, p: int) -> None:
        gone = self._loaded.pop(p, None)
        if gone is None:
            return
        for task in (gone.task, gone.deleting):
            if task is not None and not task.done():
                task.cancel()
        n = gone.num_partitions
        self.coordinator.unload(lambda gid: partition_for_group(gid, n) == p)
        log.info("node %d no longer coordinates the groups of %s-%d", self.node.node_id, OFFSETS_TOPIC, p)

    def _check_leadership(self) -> None:
        """Drop the partitions this node no longer leads (or leads at a newer epoch, which a
        reload replaces); start loading the ones it has come to lead."""
        n = self._num_partitions()
        for p, loaded in list(self._loaded.items()):
            part = self._led(p)
            if part is None or part.leader_epoch != loaded.epoch or loaded.num_partitions != n:
                self._unload(p)
        for p in range(n):
            part = self._led(p)
            if part is not None and p not in self._loaded:
                self._load(p, part, n)
        self._forget_deleted()

    def _forget_deleted(self) -> None:
        """Start writing tombstones for the committed offsets of partitions that have left the
        node's metadata (their topic was deleted: UpdateMetadata carries every partition, and
        only a deletion's StopReplica takes one out), as Kafka's coordinator does when a topic
        is deleted; one write at a time per ``__consumer_offsets`` partition. Not while the
        metadata is older than the partition states (a LeaderAndIsr that arrived first may have
        made the node leader of offsets whose topic that metadata does not know yet)."""
        if not self.node.metadata_caught_up():
            return
        for p, loaded in self._loaded.items():
            if not loaded.ready or (loaded.deleting is not None and not loaded.deleting.done()):
                continue
            gone: dict[str, dict[tuple[str, int], OffsetAndMetadata | None]] = {}
            for g, t, q in loaded.offsets:
                if (t, q) not in self.node.metadata:
                    gone.setdefault(g, {})[(t, q)] = None
            if gone:
                loaded.deleting = asyncio.get_running_loop().create_task(self._tombstones(p, loaded, gone))

    async def _tombstones(
        self, p: int, loaded: _Loaded, gone: Mapping[str, Mapping[tuple[str, int], OffsetAndMetadata | None]]
    ) -> None:
        """Append one batch of tombstones per group (acks=-1); what is acknowledged leaves the
        cache. A failure is retried at the next look."""
        for group_id, offsets in gone.items():
            err = await self._append(group_id, p, offsets_batch(group_id, offsets, self.time_ms()), "offset removal")
            if err != NONE or self._loaded.get(p) is not loaded:
                return
            for topic, partition in offsets:
                loaded.offsets.pop((group_id, topic, partition), None)
            log.info(
                "node %d: committed offsets of group %s for deleted %s removed",
                self.node.node_id,
                group_id,
                ", ".join(f"{t}-{q}" for t, q in sorted(offsets)),
            )

    async def _watch_loop(self) -> None:
        while True:
            await asyncio.sleep(_WATCH_S)
            self._check_leadership()

    def _serving(self, group_id: str) -> tuple[int, _Loaded | None]:
        """(NONE, the group's loaded partition) when this node serves the group now, else the
        error to answer and None: NOT_COORDINATOR, or COORDINATOR_LOAD_IN_PROGRESS while the
        partition is replayed."""
        n = self._num_partitions()
        if n == 0:
            return NOT_COORDINATOR, None
        p = partition_for_group(group_id, n)
        part = self._led(p)
        if part is None:
            self._unload(p)
            return NOT_COORDINATOR, None
        loaded = self._load(p, part, n)
        if not loaded.ready:
            return COORDINATOR_LOAD_IN_PROGRESS, None
        return NONE, loaded

    # -- the GroupCoordinator's offsets backend ---------------------------------------------------

    def coordinator_error(self, group_id: str) -> int:
        return self._serving(group_id)[0]

    def time_ms(self) -> int:
        return self.node.clock.time_ms()

    def partition_exists(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self.node.metadata

    async def _append(self, group_id: str, p: int, batch: bytes, what: str) -> int:
        """Append ``batch`` to ``__consumer_offsets``-``p`` with acks=-1; the node's error code
        (NONE once the ISR holds it), COORDINATOR_NOT_AVAILABLE when the node does not answer."""
        fut = self._ask(ProduceRequest(OFFSETS_TOPIC, p, batch, acks=-1, timeout_ms=COMMIT_TIMEOUT_MS))
        try:
            resp = await asyncio.wait_for(fut, COMMIT_TIMEOUT_MS / 1000.0 + _GRACE_S)
        except asyncio.TimeoutError:
            return COORDINATOR_NOT_AVAILABLE
        err = resp.error if isinstance(resp, ProduceResponse) else (getattr(resp, "error", 0) or UNKNOWN_SERVER_ERROR)
        if err != NONE:
            log.info(
                "node %d: %s of group %s to %s-%d failed with error %d: %s",
                self.node.node_id,
                what,
                group_id,
                OFFSETS_TOPIC,
                p,
                err,
                getattr(resp, "message", ""),
            )
        return int(err)

    async def commit(self, group_id: str, offsets: Mapping[tuple[str, int], OffsetAndMetadata]) -> int:
        code, loaded = self._serving(group_id)
        if loaded is None:
            return code
        p = partition_for_group(group_id, loaded.num_partitions)
        err = await self._append(group_id, p, offsets_batch(group_id, offsets, self.time_ms()), "commit")
        if err != NONE:
            return _COMMIT_ERRORS.get(err, err)
        if self._loaded.get(p) is loaded:  # still the coordinator, at the same epoch
            for (topic, partition), om in offsets.items():
                loaded.offsets[(group_id, topic, partition)] = om
        return NONE

    def group_metadata(self, group_id: str) -> GroupMetadata | None:
        loaded = self._serving(group_id)[1]
        return None if loaded is None else loaded.groups.get(group_id)

    async def store_group(self, group_id: str, md: GroupMetadata) -> int:
        code, loaded = self._serving(group_id)
        if loaded is None:
            return code
        p = partition_for_group(group_id, loaded.num_partitions)
        err = await self._append(group_id, p, group_batch(group_id, md, self.time_ms()), "group metadata")
        if err != NONE:
            # As Kafka's coordinator maps a failed group write; a record too large: unknown.
            mapped = _COMMIT_ERRORS.get(err, err)
            return UNKNOWN_SERVER_ERROR if mapped == INVALID_COMMIT_OFFSET_SIZE else mapped
        if self._loaded.get(p) is loaded:
            loaded.groups[group_id] = md
        return NONE

    def group_offsets(self, group_id: str) -> dict[tuple[str, int], OffsetAndMetadata]:
        loaded = self._serving(group_id)[1]
        if loaded is None:
            return {}
        return {(t, p): om for (g, t, p), om in loaded.offsets.items() if g == group_id}

    def groups(self) -> list[str]:
        return sorted({g for loaded in self._loaded.values() if loaded.ready for g, _, _ in loaded.offsets})

    # -- FindCoordinator --------------------------------------------------------------------------

    async def find_coordinator(self, version: int, req: Message, state: ConnState) -> Message:
        key_type = req.get("key_type", 0)
        keys = req["coordinator_keys"] if version >= 4 else [req["key"]]
        found = [self._find(key, key_type, state) for key in keys]
        if version >= 4:
            return {
                "throttle_time_ms": 0,
                "coordinators": [
                    {"key": key, "node_id": nid, "host": host, "port": port, "error_code": code, "error_message": msg}
                    for key, (nid, host, port, code, msg) in zip(keys, found)
                ],
            }
        nid, host, port, code, msg = found[0]
        return {
            "throttle_time_ms": 0,
            "error_code": code,
            "error_message": msg,
            "node_id": nid,
            "host": host,
            "port": port,
        }

    def _find(self, key: str, key_type: int, state: ConnState) -> tuple[int, str, int, int, str | None]:
        if key_type != 0:
            return -1, "", -1, UnsupportedVersionError.code, "transactions are not supported by a seglog cluster"
        n = self._num_partitions()
        if n == 0:
            why = self._create_offsets_topic()
            return -1, "", -1, COORDINATOR_NOT_AVAILABLE, why
        p = partition_for_group(key, n)
        leader = self.node.metadata[(OFFSETS_TOPIC, p)].state.leader
        live = set(self.node.live_brokers) | {self.node.node_id}
        where = self._address(leader, state) if leader in live else None
        if where is None:
            return -1, "", -1, COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC}-{p} has no leader now"
        return leader, where[0], where[1], NONE, None

    def _create_offsets_topic(self) -> str:
        """Ask the controller to create ``__consumer_offsets`` (once at a time); why there is no
        coordinator yet."""
        cfg = self.node.config
        rf = cfg.offsets_topic_replication_factor
        live = sorted(set(self.node.live_brokers) | {self.node.node_id})
        if len(live) < rf:
            return (
                f"{OFFSETS_TOPIC} needs offsets.topic.replication.factor={rf} live nodes; {len(live)} are live ({live})"
            )
        if self._creating is None or self._creating.done():
            config = (
                ("cleanup.policy", json.dumps("compact")),
                ("segment.bytes", json.dumps(str(cfg.offsets_topic_segment_bytes))),
            )
            msg = CreateTopicRequest(OFFSETS_TOPIC, cfg.offsets_topic_num_partitions, rf, config)
            fut = self._ask_controller(msg, self.node.config.controller_socket_timeout_ms)
            if fut is None:
                return "no controller is known"
            self._creating = fut
            fut.add_done_callback(self._created)
        return f"{OFFSETS_TOPIC} is being created"

    def _created(self, fut: asyncio.Future[Any]) -> None:
        if fut.cancelled():
            return
        resp = fut.result()
        if isinstance(resp, CreateTopicResponse) and resp.error == NONE:
            log.info("node %d: %s created", self.node.node_id, OFFSETS_TOPIC)
        elif resp is not None and getattr(resp, "error", NONE) != 36:  # TOPIC_ALREADY_EXISTS: another node's
            log.warning(
                "node %d: creating %s failed (error %s): %s",
                self.node.node_id,
                OFFSETS_TOPIC,
                getattr(resp, "error", "?"),
                getattr(resp, "message", ""),
            )
