"""The controller: one node of the cluster, elected through the coordinator, that owns every
partition state change (Kafka's ``KafkaController`` in ZooKeeper mode, with KRaft's
AlterPartition and KIP-903/KIP-966 rules).

Election: every node tries to create the ephemeral ``/controller`` znode; the winner bumps
``/controller_epoch`` by compare-and-set and every later write of its is a ``multi`` that first
checks that znode's version, so a controller that lost its session (or was replaced) cannot
change anything. Nodes refuse controller requests with an older controller epoch.

Partition state changes, each a compare-and-set on the state znode's version (the partition
epoch):

* a node's registration disappears (session expired or closed): it leaves every ISR it is in
  (never the last member), and every partition it led gets a new leader — the first live ISR
  replica in assignment order, else the first live eligible leader replica, else (only with
  ``unclean.leader.election.enable``) the first live replica, else none; the leader epoch is
  bumped whenever the leader changes;
* a node registers with a new broker epoch (a restart): partitions it led get a new epoch;
  after an unclean shutdown it also leaves every ISR and ELR, since its unflushed tail may be
  gone (KIP-966) — if it was the last ISR member and an eligible leader replica exists, the
  ISR is emptied and that replica is elected instead;
* a node reports replicas on a failed log dir (its registration lists them as
  ``offline_replicas``; it then writes a ``/log_dir_event_notification`` znode, whose watch makes
  the controller re-read the registrations and delete the notification): for those partitions
  the node counts as not alive — it leaves their ISRs as a dead node does, and a leader among
  them is replaced. The node's later registrations (a restart) start with no offline replicas;
* a leader's AlterPartition (ISR shrink or expand) is applied if its leader epoch and partition
  epoch are current, and added members are registered with the broker epoch they fetch with;
* members removed while the ISR drops below ``min.insync.replicas`` become eligible leader
  replicas (they hold everything committed); the ELR is cleared once the ISR is back at the
  minimum.

After each change the controller sends every live node the state of the partitions it
replicates (LeaderAndIsr) and the metadata of the whole cluster (UpdateMetadata), and resends
either to a node that has not acknowledged its latest version.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

from seglog.cluster import election as el
from seglog.cluster import mutations as mut
from seglog.cluster.coordinator import (
    BadVersionError,
    Check,
    ConnectionLossError,
    CoordinatorError,
    CoordinatorSession,
    Create,
    Delete,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
    SetData,
)
from seglog.cluster.messages import (
    INVALID_UPDATE_VERSION,
    NONE,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterTopicConfigRequest,
    AlterTopicConfigResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicRequest,
    CreateTopicResponse,
    DeleteTopicRequest,
    DeleteTopicResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from seglog.cluster.metadata import (
    BROKER_IDS_PATH,
    CONTROLLER_EPOCH_PATH,
    DELETE_TOPICS_PATH,
    LOG_DIR_EVENT_PATH,
    NO_LEADER,
    PRODUCER_ID_BLOCK_PATH,
    PRODUCER_ID_BLOCK_SIZE,
    TOPICS_PATH,
    PartitionInfo,
    PartitionState,
    ReplicaConfig,
    TopicPartition,
    broker_path,
    dumps,
    loads,
    parse_topic_record,
    state_path,
    topic_path,
    topic_record,
)
from seglog.config import LogConfig
from seglog.errors import (
    ConfigError,
    ElectionNotNeededError,
    FencedLeaderEpochError,
    IneligibleReplicaError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    KafkaError,
    NotControllerError,
    PreferredLeaderNotAvailableError,
    StaleBrokerEpochError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    code_for_exception,
)

log = logging.getLogger("seglog.cluster.controller")

_R = TypeVar("_R")

#: What the controller tells every live node after each change, each acknowledged apart.
_STATE_KINDS: tuple[type, ...] = (LeaderAndIsrRequest, UpdateMetadataRequest)

_LEGAL_TOPIC = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerInfo:
    broker_epoch: int
    clean_shutdown: bool
    address: str = ""
    #: ``host:port`` of the node's Kafka listener ("" when it has none).
    kafka_address: str = ""
    #: Replicas on the node's failed log dirs (they serve nothing; never leaders, not in ISRs).
    offline_replicas: frozenset[TopicPartition] = frozenset()
    offline_dirs: tuple[str, ...] = ()
    #: The security protocols of the listeners at ``address`` and ``kafka_address``.
    security_protocol: str = "PLAINTEXT"
    kafka_security_protocol: str = "PLAINTEXT"


@dataclasses.dataclass(slots=True)
class TopicInfo:
    assignment: dict[int, tuple[int, ...]]
    config: dict[str, Any]
    log_config: LogConfig


class ControllerHost(Protocol):
    """What the controller uses of the node it runs on (a
    :class:`~seglog.cluster.node.ReplicaNode`)."""

    node_id: int
    config: ReplicaConfig
    scheduler: Any
    mutants: frozenset[str]

    def send(
        self, dst: int, message: Any, callback: Callable[[Any, BaseException | None], None], timeout_ms: int
    ) -> None:
        """Send ``message`` to node ``dst``; ``callback(response, error)`` when it is answered."""
        ...

    def topic_config(self, overrides: Mapping[str, Any] | None = None) -> LogConfig:
        """A topic's log config: the node's defaults under ``overrides``."""
        ...

    def on_controller_resigned(self) -> None:
        """This controller stopped (replaced, or cut off from the coordinator)."""
        ...


class ControllerFenced(Exception):
    """This controller was replaced; it must stop."""


class Controller:
    def __init__(self, node: ControllerHost, session: CoordinatorSession, epoch: int, epoch_version: int) -> None:
        self.node = node
        self.session = session
        self.epoch = epoch
        self.epoch_version = epoch_version
        self.active = True
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.states: dict[TopicPartition, PartitionState] = {}
        self.version = 0
        #: (node, LeaderAndIsrRequest or UpdateMetadataRequest) -> the newest state version the
        #: node acknowledged of that kind, and the one in flight.
        self._acked: dict[tuple[int, type], int] = {}
        self._inflight: dict[tuple[int, type], int] = {}
        self._pid_next = 0
        self._pid_end = 0
        self._rng = random.Random(node.node_id * 7919 + epoch)
        self.elections = 0
        self.unclean_elections = 0
        self._resync_task: Any = None
        self._armed: set[str] = set()
        #: Coordinator reads that failed with ConnectionLossError (a watch's re-read, the first
        #: load), by key: the periodic task retries each until it goes through. Nothing else
        #: re-reads the coordinator: watches say when something changed.
        self._retry: dict[str, Callable[[], None]] = {}
        self.shutting_down: set[int] = set()
        #: Topics marked for deletion -> the nodes whose replicas are not deleted yet.
        self.deleting: dict[str, set[int]] = {}
        #: The state version that first left each topic being deleted out: a node gets
        #: StopReplica once it has acknowledged that one (it no longer opens the replicas).
        self._deleted_in: dict[str, int] = {}
        self._stopping: set[tuple[str, int]] = set()  # (topic, node) StopReplica in flight

    @property
    def mutants(self) -> frozenset[str]:
        return self.node.mutants

    # ---------------------------------------------------------------------------------------------
    # Lifecycle
    # ---------------------------------------------------------------------------------------------

    def start(self) -> None:
        log.info("node %d is controller (epoch %d)", self.node.node_id, self.epoch)
        self._attempt("load", self._load)
        if not self.active:
            return
        self._guard(self._reconcile)
        self._publish()
        period = max(50, self.node.config.replica_fetch_backoff_ms // 2)
        self._resync_task = self.node.scheduler.schedule(
            "controller resync", self._periodic, delay_ms=period, period_ms=period
        )

    def resign(self) -> None:
        if not self.active:
            return
        self.active = False
        if self._resync_task is not None:
            self.node.scheduler.cancel(self._resync_task)
        log.info("node %d is no longer controller (epoch %d)", self.node.node_id, self.epoch)

    def _lost_control(self, exc: BaseException) -> NotControllerError:
        """The error a request gets when a coordinator write of this controller failed: it was
        replaced (it resigns), or it cannot reach the coordinator now (``ConnectionLossError``)."""
        if isinstance(exc, ConnectionLossError):
            return NotControllerError(f"controller {self.node.node_id} cannot reach the coordinator: {exc}")
        self.resign()
        self.node.on_controller_resigned()
        return NotControllerError(f"controller {self.node.node_id} was replaced: {exc}")

    def _guard(self, fn: Callable[[], None]) -> bool:
        """Run ``fn``; False if the coordinator could not be reached (the caller retries) or
        this controller was replaced (it resigns)."""
        try:
            fn()
            return True
        except ControllerFenced:
            self.resign()
            self.node.on_controller_resigned()
        except (SessionExpiredError, BadVersionError):
            self.resign()
            self.node.on_controller_resigned()
        except ConnectionLossError:
            pass  # retried by the periodic task
        return False

    def _attempt(self, key: str, fn: Callable[[], None]) -> None:
        """Run the coordinator read ``fn`` now, and from the periodic task until it succeeds."""
        if not self.active:
            return
        self._retry[key] = fn
        if self._guard(fn):
            self._retry.pop(key, None)

    def _periodic(self) -> None:
        if not self.active:
            return
        # Only reads that failed are repeated: re-reading every registration each period held
        # the node's loop ~60 ms a time on a busy machine (blocking ZooKeeper round trips).
        for key, fn in list(self._retry.items()):
            self._attempt(key, fn)
        if not self.active:  # a retried read may have resigned (mypy keeps the narrowing above)
            return  # type: ignore[unreachable]
        self._guard(self._reconcile)
        self._resend()
        for name in sorted(self.deleting):
            self._advance_deletion(name)

    # ---------------------------------------------------------------------------------------------
    # Loading state from the coordinator
    # ---------------------------------------------------------------------------------------------

    def _load(self) -> None:
        s = self.session
        for path in ("/brokers", BROKER_IDS_PATH, TOPICS_PATH, LOG_DIR_EVENT_PATH, "/admin", DELETE_TOPICS_PATH):
            if s.exists(path) is None:
                try:
                    s.create(path, b"")
                except CoordinatorError:
                    pass
        self._refresh_brokers()
        self._refresh_topics()
        self._log_dir_events()
        self._load_deletions()

    def _refresh_brokers(self) -> None:
        if not self.active:
            return
        s = self.session
        ids = self._watched(s.children, BROKER_IDS_PATH)
        current: dict[int, BrokerInfo] = {}
        for name in ids:
            try:
                data, stat = self._watched(s.get, broker_path(int(name)))
            except NoNodeError:
                continue
            d = loads(data) or {}
            current[int(name)] = BrokerInfo(
                stat.czxid,
                bool(d.get("clean_shutdown", True)),
                d.get("address", ""),
                d.get("kafka_address", ""),
                frozenset((str(t), int(p)) for t, p in d.get("offline_replicas", ())),
                tuple(d.get("offline_log_dirs", ())),
                str(d.get("security_protocol", "PLAINTEXT")),
                str(d.get("kafka_security_protocol", "PLAINTEXT")),
            )
        if current == self.brokers:
            return
        for b in sorted(set(self.brokers) - set(current)):
            log.info("controller %d: node %d is gone", self.node.node_id, b)
        for b, info in sorted(current.items()):
            old = self.brokers.get(b)
            if old is not None and old.broker_epoch == info.broker_epoch and old != info:
                log.warning(
                    "controller %d: node %d has failed log dirs %s; offline replicas %s",
                    self.node.node_id,
                    b,
                    list(info.offline_dirs),
                    sorted(info.offline_replicas),
                )
            elif old != info:
                log.info(
                    "controller %d: node %d registered (broker epoch %d, %s shutdown)",
                    self.node.node_id,
                    b,
                    info.broker_epoch,
                    "clean" if info.clean_shutdown else "unclean",
                )
                self._forget(b)
                self.shutting_down.discard(b)
        self.brokers = current
        self._reconcile()
        self.version += 1
        self._publish()

    def _watched(self, read: Callable[..., _R], path: str, then: Callable[[], None] | None = None) -> _R:
        """``read(path, watch=...)`` with a watch that runs ``then`` (see :meth:`_arm`). A read
        that fails sets no watch (ZooKeeper sets none on a missing znode's data, nor on a call
        it did not answer), so the path is armed again by the next read."""
        watch = self._arm(path, then)
        try:
            return read(path, watch=watch)
        except BaseException:
            if watch is not None:
                self._armed.discard(path)
            raise

    def _arm(self, path: str, then: Callable[[], None] | None = None) -> Callable[[Any], None] | None:
        """A watch callback for ``path`` that runs ``then`` (default: re-read the brokers), unless
        one is already set (watches are one-shot)."""
        if path in self._armed:
            return None
        self._armed.add(path)
        action = then if then is not None else self._refresh_brokers

        def fire(_ev: Any) -> None:
            self._armed.discard(path)
            if self.active:
                self._attempt(path, action)

        return fire

    def _log_dir_events(self) -> None:
        """Consume the log dir failure notifications (Kafka's ``LogDirEventNotification``
        handling) and re-read the registrations, which say which replicas are offline."""
        if not self.active:
            return
        s = self.session
        try:
            names = self._watched(s.children, LOG_DIR_EVENT_PATH, self._log_dir_events)
        except NoNodeError:
            try:
                s.create(LOG_DIR_EVENT_PATH, b"")
            except NodeExistsError:
                pass
            names = self._watched(s.children, LOG_DIR_EVENT_PATH, self._log_dir_events)
        if not names:
            return
        for name in names:
            path = f"{LOG_DIR_EVENT_PATH}/{name}"
            try:
                data, _ = s.get(path)
                s.delete(path)
            except NoNodeError:
                continue
            log.info(
                "controller %d: log dir failure notification %s from node %s",
                self.node.node_id,
                name,
                (loads(data) or {}).get("broker"),
            )
        self._refresh_brokers()

    def _refresh_topics(self) -> None:
        s = self.session
        for name in s.children(TOPICS_PATH):
            self._load_topic(name)

    def _load_topic(self, name: str) -> None:
        s = self.session
        data, _ = s.get(topic_path(name))
        assignment, config = parse_topic_record(data)
        self.topics[name] = TopicInfo(assignment, config, self._log_config(config))
        for p in assignment:
            try:
                sdata, stat = s.get(state_path(name, p))
            except NoNodeError:
                continue
            self.states[(name, p)] = PartitionState.from_json(sdata, stat.version)

    def _log_config(self, overrides: dict[str, Any]) -> LogConfig:
        return self.node.topic_config(overrides)

    # ---------------------------------------------------------------------------------------------
    # State changes
    # ---------------------------------------------------------------------------------------------

    def _live(self) -> set[int]:
        return set(self.brokers)

    def _live_for(self, tp: TopicPartition) -> set[int]:
        """The registered nodes whose replica of ``tp`` is not on a failed log dir."""
        return {b for b, info in self.brokers.items() if tp not in info.offline_replicas}

    def _write(self, tp: TopicPartition, new: PartitionState) -> PartitionState:
        """Compare-and-set the partition state; the returned state carries the new version."""
        old = self.states[tp]
        new = dataclasses.replace(new, controller_epoch=self.epoch)
        res = self.session.multi(
            [
                Check(CONTROLLER_EPOCH_PATH, self.epoch_version),
                SetData(state_path(*tp), new.to_json(), old.partition_epoch),
            ]
        )
        stat = res[1]
        assert stat is not None
        written = dataclasses.replace(new, partition_epoch=stat.version)
        self.states[tp] = written
        self.version += 1
        return written

    def _change(self, tp: TopicPartition, *, force_new_epoch: bool = False) -> bool:
        """Bring one partition's state in line with the live registrations; True if written.

        Idempotent, so a new controller (or the periodic check) can run it on everything:
        1. members whose registration is a later, unclean incarnation than the one admitted
           leave the ISR and the ELR (their unflushed tail may be gone) — but the ISR is only
           emptied when an eligible leader replica exists to take over;
        2. members that are not registered leave the ISR (never its last member; below
           min.insync.replicas they become eligible leader replicas);
        3. a leader that is gone, out of the ISR or restarted (another broker epoch) is
           replaced by election, with a new leader epoch.
        """
        st = self.states[tp]
        topic = self.topics[tp[0]]
        assignment = topic.assignment[tp[1]]
        min_isr = min(topic.log_config.min_insync_replicas, len(assignment))
        brokers = self.brokers
        live = self._live_for(tp)
        recorded = dict(st.broker_epochs)
        isr, elr = tuple(st.isr), tuple(st.elr)

        def later_incarnation(r: int) -> bool:
            return r in brokers and recorded.get(r, -1) != brokers[r].broker_epoch

        last_known = tuple(st.last_known)
        unclean = {r for r in set(isr) | set(elr) if later_incarnation(r) and not brokers[r].clean_shutdown}
        if unclean:
            rest = tuple(r for r in isr if r not in unclean)
            elr = tuple(r for r in elr if r not in unclean)
            if rest or elr:
                isr = rest
            if not rest:
                last_known = tuple(dict.fromkeys(last_known + tuple(sorted(unclean))))
        dead = {r for r in isr if r not in live}
        if dead:
            isr, elr = el.shrink_with_elr(isr, elr, dead, min_isr, keep_last=True)
        leader, epoch = st.leader, st.leader_epoch
        if leader not in live or leader not in isr or later_incarnation(leader) or force_new_epoch:
            # Nobody in the ISR or the ELR: the replicas that left them after unclean restarts
            # are the last resort (they may miss committed records, as classic Kafka's last
            # ISR member does after losing its page cache).
            last_resort = not isr and not elr
            candidates = tuple(r for r in assignment if r in last_known) if last_resort else isr
            e = el.offline_election(
                assignment,
                candidates,
                elr,
                live,
                unclean_enabled=topic.log_config.unclean_leader_election_enable,
                allow_out_of_isr=mut.ALLOW_OUT_OF_ISR_ELECTION in self.mutants,
            )
            if e.leader != NO_LEADER:
                isr, elr = ((e.leader,), ()) if last_resort and not e.unclean else (e.isr, e.elr)
                gone = {r for r in isr if r not in live}
                isr, elr = el.shrink_with_elr(isr, elr, gone, min_isr, keep_last=True)
                if e.unclean:
                    self.unclean_elections += 1
                    log.warning("%s-%d: unclean election of node %d", tp[0], tp[1], e.leader)
                self.elections += 1
                recorded[e.leader] = brokers[e.leader].broker_epoch
                last_known = ()
            if e.leader != leader or e.leader != NO_LEADER:
                epoch += 1
            leader = e.leader
        keep = set(isr) | set(elr) | set(last_known) | ({leader} if leader != NO_LEADER else set())
        epochs = tuple(sorted((r, ep) for r, ep in recorded.items() if r in keep))
        new = PartitionState(leader, epoch, isr, elr, st.partition_epoch, self.epoch, epochs, last_known)
        if (new.leader, new.leader_epoch, new.isr, new.elr, new.broker_epochs, new.last_known) == (
            st.leader,
            st.leader_epoch,
            st.isr,
            st.elr,
            st.broker_epochs,
            st.last_known,
        ):
            return False
        self._write(tp, new)
        log.info("%s-%d: leader %d epoch %d ISR %s ELR %s", tp[0], tp[1], leader, epoch, isr, elr)
        return True

    def _reconcile(self) -> None:
        for tp in sorted(self.states):
            if tp[0] not in self.deleting:  # a topic being deleted elects nobody
                self._change(tp)

    # ---------------------------------------------------------------------------------------------
    # Telling the nodes
    # ---------------------------------------------------------------------------------------------

    def _partition_infos(self) -> list[PartitionInfo]:
        """Every partition's state, but those of topics being deleted."""
        return [
            PartitionInfo(t, p, self.topics[t].assignment[p], st)
            for (t, p), st in sorted(self.states.items())
            if t not in self.deleting
        ]

    def _topic_configs(self, topics: Iterable[str]) -> tuple[tuple[str, str], ...]:
        return tuple(sorted((t, json.dumps(self.topics[t].config, sort_keys=True)) for t in topics))

    def leader_and_isr(self, target: int) -> LeaderAndIsrRequest:
        """What node ``target`` is told of its replicas: their states, their leaders' addresses
        and their topics' configs."""
        parts = tuple(info for info in self._partition_infos() if target in info.replicas)
        leaders = sorted({info.state.leader for info in parts})
        info = self.brokers.get(target)
        return LeaderAndIsrRequest(
            self.node.node_id,
            self.epoch,
            info.broker_epoch if info else -1,
            parts,
            tuple((b, self.brokers[b].address) for b in leaders if b in self.brokers and self.brokers[b].address),
            self._topic_configs({p.topic for p in parts}),
            self.version,
        )

    def update_metadata(self, target: int) -> UpdateMetadataRequest:
        """What node ``target`` is told of the cluster: every partition, every live node, every
        topic's config."""
        info = self.brokers.get(target)
        return UpdateMetadataRequest(
            self.node.node_id,
            self.epoch,
            info.broker_epoch if info else -1,
            tuple(self._partition_infos()),
            tuple(sorted((b, i.broker_epoch) for b, i in self.brokers.items())),
            self._topic_configs(t for t in self.topics if t not in self.deleting),
            tuple(sorted((b, i.address) for b, i in self.brokers.items() if i.address)),
            tuple(sorted((b, i.kafka_address) for b, i in self.brokers.items() if i.kafka_address)),
            self.version,
            tuple(sorted((b, i.security_protocol) for b, i in self.brokers.items() if i.address)),
            tuple(sorted((b, i.kafka_security_protocol) for b, i in self.brokers.items() if i.kafka_address)),
        )

    def acked_version(self, b: int) -> int:
        """The newest state version node ``b`` acknowledged both LeaderAndIsr and
        UpdateMetadata of (-1: none)."""
        return min(self._acked.get((b, kind), -1) for kind in _STATE_KINDS)

    def _forget(self, b: int) -> None:
        for kind in _STATE_KINDS:
            self._acked.pop((b, kind), None)
            self._inflight.pop((b, kind), None)

    def _publish(self) -> None:
        if not self.active:
            return
        for b in sorted(self.brokers):
            for kind in _STATE_KINDS:
                self._send_state(b, kind)

    def _resend(self) -> None:
        for b in sorted(self.brokers):
            for kind in _STATE_KINDS:
                key = (b, kind)
                if self._acked.get(key, -1) < self.version and self._inflight.get(key, -1) < self.version:
                    self._send_state(b, kind)

    def _send_state(self, b: int, kind: type) -> None:
        version = self.version
        key = (b, kind)
        self._inflight[key] = version
        req: LeaderAndIsrRequest | UpdateMetadataRequest
        answer: type[LeaderAndIsrResponse | UpdateMetadataResponse]
        if kind is LeaderAndIsrRequest:
            req, answer = self.leader_and_isr(b), LeaderAndIsrResponse
        else:
            req, answer = self.update_metadata(b), UpdateMetadataResponse

        def done(resp: Any, err: BaseException | None) -> None:
            if self._inflight.get(key) == version:
                self._inflight.pop(key, None)
            if err is None and isinstance(resp, answer) and resp.error == NONE:
                self._acked[key] = max(self._acked.get(key, -1), version)
                for name in sorted(self.deleting):  # the node may get its StopReplica now
                    self._advance_deletion(name)

        self.node.send(b, req, done, self.node.config.controller_socket_timeout_ms)

    # ---------------------------------------------------------------------------------------------
    # Requests
    # ---------------------------------------------------------------------------------------------

    def _not_active(self) -> KafkaError | None:
        if not self.active:
            return NotControllerError(f"node {self.node.node_id} is not the controller")
        return None

    def handle_alter_partition(self, req: AlterPartitionRequest) -> AlterPartitionResponse:
        err = self._not_active()
        if err is not None:
            return AlterPartitionResponse(code_for_exception(err), message=str(err))
        try:
            return self._alter_partition(req)
        except (SessionExpiredError, BadVersionError, ControllerFenced, ConnectionLossError) as exc:
            e = self._lost_control(exc)
            return AlterPartitionResponse(code_for_exception(e), message=str(e))

    def _alter_partition(self, req: AlterPartitionRequest) -> AlterPartitionResponse:
        tp = (req.topic, req.partition)
        st = self.states.get(tp)
        if st is None or req.topic in self.deleting:
            e: KafkaError = UnknownTopicOrPartitionError(f"no partition {req.topic}-{req.partition}")
            return AlterPartitionResponse(code_for_exception(e), message=str(e))
        if req.broker_id != st.leader or req.leader_epoch != st.leader_epoch:
            e = FencedLeaderEpochError(
                f"node {req.broker_id} at leader epoch {req.leader_epoch} may not change the ISR of "
                f"{req.topic}-{req.partition}: its leader is {st.leader} at epoch {st.leader_epoch}"
            )
            return AlterPartitionResponse(code_for_exception(e), message=str(e))
        if req.partition_epoch != st.partition_epoch:
            return AlterPartitionResponse(
                INVALID_UPDATE_VERSION,
                message=f"partition epoch {req.partition_epoch} is stale; "
                f"{req.topic}-{req.partition} is at {st.partition_epoch}",
            )
        info = self.brokers.get(req.broker_id)
        if info is None or info.broker_epoch != req.broker_epoch:
            e = StaleBrokerEpochError(f"node {req.broker_id} sent broker epoch {req.broker_epoch}")
            return AlterPartitionResponse(code_for_exception(e), message=str(e))
        assignment = self.topics[req.topic].assignment[req.partition]
        new_isr = tuple(req.new_isr)
        if (
            req.broker_id not in new_isr
            or any(r not in assignment for r in new_isr)
            or len(set(new_isr)) != len(new_isr)
        ):
            e = InvalidRequestError(
                f"ISR {list(new_isr)} is not a set of replicas {list(assignment)} holding the leader"
            )
            return AlterPartitionResponse(code_for_exception(e), message=str(e))
        added = [r for r in new_isr if r not in st.isr]
        removed = {r for r in st.isr if r not in new_isr}
        sent_epochs = dict(zip(new_isr, req.new_isr_epochs)) if req.new_isr_epochs else {}
        recorded = dict(st.broker_epochs)
        for r in added:
            info_r = self.brokers.get(r)
            if r in self.shutting_down:
                e = IneligibleReplicaError(
                    f"node {r} is shutting down; it cannot join the ISR of {req.topic}-{req.partition}"
                )
                return AlterPartitionResponse(code_for_exception(e), message=str(e))
            if info_r is not None and tp in info_r.offline_replicas:
                e = IneligibleReplicaError(
                    f"node {r}'s replica of {req.topic}-{req.partition} is on a failed log dir; it cannot join the ISR"
                )
                return AlterPartitionResponse(code_for_exception(e), message=str(e))
            if info_r is None or sent_epochs.get(r, info_r.broker_epoch) != info_r.broker_epoch:
                e = IneligibleReplicaError(
                    f"node {r} is not registered with the broker epoch it fetched with "
                    f"({sent_epochs.get(r)}); it cannot join the ISR of {req.topic}-{req.partition}"
                )
                return AlterPartitionResponse(code_for_exception(e), message=str(e))
            recorded[r] = info_r.broker_epoch
        min_isr = min(self.topics[req.topic].log_config.min_insync_replicas, len(assignment))
        isr, elr = el.shrink_with_elr(st.isr, st.elr, removed, min_isr, keep_last=True)
        isr, elr = el.expand_with_elr(isr, elr, added, min_isr)
        keep = set(isr) | set(elr) | {st.leader}
        epochs = tuple(sorted((r, ep) for r, ep in recorded.items() if r in keep))
        new = self._write(
            tp, PartitionState(st.leader, st.leader_epoch, isr, elr, st.partition_epoch, self.epoch, epochs)
        )
        # The leader learns the result from the answer; the others with the next resync.
        return AlterPartitionResponse(NONE, new)

    def handle_create_topic(self, req: CreateTopicRequest) -> CreateTopicResponse:
        return self._admin(lambda: self._create_topic(req), CreateTopicResponse)

    def handle_create_partitions(self, req: CreatePartitionsRequest) -> CreatePartitionsResponse:
        return self._admin(lambda: self._create_partitions(req), CreatePartitionsResponse)

    def _admin(self, fn: Callable[[], _R], response: Callable[[int, str], _R]) -> _R:
        """``fn``'s answer; a refusal, a bad config or a lost role as ``response(code, message)``."""
        err = self._not_active()
        if err is not None:
            return response(code_for_exception(err), str(err))
        try:
            return fn()
        except (KafkaError, ConfigError) as e:
            return response(code_for_exception(e), str(e))
        except (SessionExpiredError, BadVersionError, ConnectionLossError) as exc:
            e2 = self._lost_control(exc)
            return response(code_for_exception(e2), str(e2))

    def _create_topic(self, req: CreateTopicRequest) -> CreateTopicResponse:
        name = req.name
        if not name or len(name) > 249 or name in (".", "..") or any(c not in _LEGAL_TOPIC for c in name):
            raise InvalidTopicError(f"invalid topic name {name!r}: 1-249 characters of [a-zA-Z0-9._-], not '.' or '..'")
        if name in self.deleting:
            raise TopicAlreadyExistsError(f"topic {name!r} is marked for deletion")
        if name in self.topics:
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        config = {k: json.loads(v) for k, v in req.config}
        log_config = self._log_config(config)
        live = sorted(self.brokers)
        if req.assignment:
            assignment = {p: tuple(r) for p, r in enumerate(req.assignment)}
            for p, r in assignment.items():
                if not r or len(set(r)) != len(r):
                    raise InvalidReplicaAssignmentError(
                        f"partition {p}: replicas {list(r)} must be distinct and non-empty"
                    )
        else:
            if req.replication_factor > len(live):
                raise InvalidReplicationFactorError(
                    f"replication factor {req.replication_factor} is larger than the {len(live)} live nodes {live}"
                )
            placed = el.assign_replicas(req.partitions, req.replication_factor, live, rng=self._rng)
            assignment = dict(enumerate(placed))
        ops: list[Any] = [
            Check(CONTROLLER_EPOCH_PATH, self.epoch_version),
            Create(topic_path(name), topic_record(assignment, config)),
            Create(topic_path(name) + "/partitions", b""),
        ]
        self._add_partitions(name, assignment, ops, TopicInfo(assignment, config, log_config))
        return CreateTopicResponse(NONE, assignment=tuple(assignment[p] for p in sorted(assignment)))

    def _add_partitions(self, name: str, new: Mapping[int, tuple[int, ...]], ops: list[Any], topic: TopicInfo) -> None:
        """Write ``ops`` and the znodes of topic ``name``'s ``new`` partitions (each led by its
        first live replica, at leader epoch 0) in one ``multi``; then ``topic`` is the topic and
        every node hears of it."""
        states = {}
        for p, replicas in new.items():
            alive = tuple(r for r in replicas if r in self.brokers)
            leader = alive[0] if alive else NO_LEADER
            isr0 = alive or replicas[:1]
            epochs = tuple(sorted((r, self.brokers[r].broker_epoch) for r in isr0 if r in self.brokers))
            st = PartitionState(leader, 0, isr0, (), 0, self.epoch, epochs)
            states[p] = st
            ops.append(Create(topic_path(name) + f"/partitions/{p}", b""))
            ops.append(Create(state_path(name, p), st.to_json()))
        self.session.multi(ops)
        self.topics[name] = topic
        for p, st in states.items():
            self.states[(name, p)] = st
        self.version += 1
        self._publish()

    def _create_partitions(self, req: CreatePartitionsRequest) -> CreatePartitionsResponse:
        """Kafka's CreatePartitions: the new partitions placed over the live nodes as a new
        topic's are (or as given), with the topic's replication factor; the topic record and
        the new partitions' znodes written at once."""
        name = req.name
        topic = self.topics.get(name)
        if topic is None or name in self.deleting:
            raise UnknownTopicOrPartitionError(f"the cluster has no topic {name!r}")
        have = len(topic.assignment)
        if req.count <= have:
            raise InvalidPartitionsError(
                f"topic {name!r} has {have} partitions; the new total {req.count} must be larger"
            )
        rf = len(topic.assignment[0])
        live = sorted(self.brokers)
        adding = req.count - have
        if req.assignment:
            if len(req.assignment) != adding:
                raise InvalidReplicaAssignmentError(
                    f"topic {name!r}: {len(req.assignment)} assignments for the {adding} new partitions"
                )
            for i, r in enumerate(req.assignment):
                p = have + i
                if len(r) != rf or len(set(r)) != len(r):
                    raise InvalidReplicaAssignmentError(
                        f"topic {name!r} partition {p}: replicas {list(r)} must be {rf} distinct nodes "
                        "(the topic's replication factor)"
                    )
                unknown = sorted(set(r) - set(live))
                if unknown:
                    raise InvalidReplicaAssignmentError(
                        f"topic {name!r} partition {p}: nodes {unknown} are not live nodes of the cluster {live}"
                    )
            placed = [tuple(r) for r in req.assignment]
        else:
            if rf > len(live):
                raise InvalidReplicationFactorError(
                    f"topic {name!r}: replication factor {rf} is larger than the {len(live)} live nodes {live}"
                )
            placed = el.assign_replicas(adding, rf, live, start_partition=have, rng=self._rng)
        new = {have + i: r for i, r in enumerate(placed)}
        if not req.validate_only:
            assignment = {**topic.assignment, **new}
            ops: list[Any] = [
                Check(CONTROLLER_EPOCH_PATH, self.epoch_version),
                SetData(topic_path(name), topic_record(assignment, topic.config)),
            ]
            self._add_partitions(name, new, ops, dataclasses.replace(topic, assignment=assignment))
        return CreatePartitionsResponse(NONE, assignment=tuple(placed))

    def handle_alter_topic_config(self, req: AlterTopicConfigRequest) -> AlterTopicConfigResponse:
        return self._admin(lambda: self._alter_topic_config(req), AlterTopicConfigResponse)

    def _alter_topic_config(self, req: AlterTopicConfigRequest) -> AlterTopicConfigResponse:
        """New overrides for a topic, checked whole (INVALID_CONFIG naming the key), written in
        its topic record and sent to every node, which applies them to its open replicas."""
        name = req.name
        topic = self.topics.get(name)
        if topic is None or name in self.deleting:
            raise UnknownTopicOrPartitionError(f"the cluster has no topic {name!r}")
        config = {k: v for k, v in topic.config.items() if k not in req.delete}
        config.update((k, json.loads(v)) for k, v in req.set)
        for key in req.delete:
            config.pop(key, None)
        log_config = self._log_config(config)
        if not req.validate_only and config != topic.config:
            self.session.multi(
                [
                    Check(CONTROLLER_EPOCH_PATH, self.epoch_version),
                    SetData(topic_path(name), topic_record(topic.assignment, config)),
                ]
            )
            self.topics[name] = dataclasses.replace(topic, config=config, log_config=log_config)
            self.version += 1
            self._publish()
        return AlterTopicConfigResponse(NONE, config=tuple((k, json.dumps(v)) for k, v in sorted(config.items())))

    # -- topic deletion (Kafka's TopicDeletionManager in ZooKeeper mode) -------------------------

    def handle_delete_topic(self, req: DeleteTopicRequest) -> DeleteTopicResponse:
        return self._admin(lambda: self._delete_topic(req), DeleteTopicResponse)

    def _delete_topic(self, req: DeleteTopicRequest) -> DeleteTopicResponse:
        """Mark the topic (``/admin/delete_topics/T``), drop it from what the nodes are told,
        and have its replicas deleted; the topic's znodes go once every replica is gone. A
        topic already marked is answered as marked now (as Kafka)."""
        name = req.name
        if name not in self.topics:
            raise UnknownTopicOrPartitionError(f"the cluster has no topic {name!r}")
        if name not in self.deleting:
            try:
                self.session.multi([Check(CONTROLLER_EPOCH_PATH, self.epoch_version), Create(_marker(name), b"")])
            except NodeExistsError:
                pass  # an earlier attempt's write went through, its answer was lost
            log.info("controller %d: topic %s marked for deletion", self.node.node_id, name)
            self._mark(name)
        return DeleteTopicResponse(NONE)

    def _mark(self, name: str) -> None:
        self.deleting[name] = {r for replicas in self.topics[name].assignment.values() for r in replicas}
        self.version += 1
        self._deleted_in[name] = self.version
        self._publish()
        self._advance_deletion(name)

    def _load_deletions(self) -> None:
        """Resume the deletions a former controller started (the markers left); a marker whose
        topic is gone already (its znodes went first) is removed."""
        for name in sorted(self.session.children(DELETE_TOPICS_PATH)):
            if name in self.topics:
                self.deleting[name] = {r for replicas in self.topics[name].assignment.values() for r in replicas}
                self._deleted_in[name] = self.version
            else:
                try:
                    self.session.delete(_marker(name))
                except NoNodeError:
                    pass

    def _advance_deletion(self, name: str) -> None:
        """Send StopReplica (delete) to every live node whose replicas of ``name`` are not
        deleted yet; with none left, remove the topic's znodes and its marker at once. A node
        that is down keeps the topic marked until it is back (its dirs must go too)."""
        pending = self.deleting.get(name)
        if pending is None or not self.active:
            return
        if not pending:
            self._guard(lambda: self._finish_deletion(name))
            return
        assignment = self.topics[name].assignment
        for b in sorted(pending):
            info = self.brokers.get(b)
            if info is None or (name, b) in self._stopping or self.acked_version(b) < self._deleted_in[name]:
                continue  # down, asked already, or may still open the replicas from an older state
            tps = tuple((name, p) for p, replicas in sorted(assignment.items()) if b in replicas)
            req = StopReplicaRequest(self.node.node_id, self.epoch, info.broker_epoch, tps, delete=True)
            self._stopping.add((name, b))

            def done(resp: Any, err: BaseException | None, b: int = b) -> None:
                self._stopping.discard((name, b))
                if not self.active or name not in self.deleting:
                    return
                if err is None and isinstance(resp, StopReplicaResponse) and resp.error == NONE:
                    self.deleting[name].discard(b)
                    if not self.deleting[name]:
                        self._advance_deletion(name)
                else:
                    why = err if err is not None else getattr(resp, "message", "") or type(resp).__name__
                    log.warning("controller %d: node %d did not delete %s: %s", self.node.node_id, b, name, why)

            self.node.send(b, req, done, self.node.config.controller_socket_timeout_ms)

    def _finish_deletion(self, name: str) -> None:
        topic = self.topics[name]
        ops: list[Any] = [Check(CONTROLLER_EPOCH_PATH, self.epoch_version)]
        for p in sorted(topic.assignment):
            ops.append(Delete(state_path(name, p)))
            ops.append(Delete(topic_path(name) + f"/partitions/{p}"))
        ops += [Delete(topic_path(name) + "/partitions"), Delete(topic_path(name)), Delete(_marker(name))]
        self.session.multi(ops)
        del self.topics[name]
        del self.deleting[name]
        del self._deleted_in[name]
        for p in topic.assignment:
            self.states.pop((name, p), None)
        self.version += 1
        log.info("controller %d: topic %s deleted", self.node.node_id, name)

    def handle_elect_leaders(self, req: ElectLeadersRequest) -> ElectLeadersResponse:
        err = self._not_active()
        if err is not None:
            return ElectLeadersResponse(code_for_exception(err), message=str(err))
        tp = (req.topic, req.partition)
        st = self.states.get(tp)
        if st is None:
            e: KafkaError = UnknownTopicOrPartitionError(f"no partition {req.topic}-{req.partition}")
            return ElectLeadersResponse(code_for_exception(e), message=str(e))
        assignment = self.topics[req.topic].assignment[req.partition]
        preferred = el.preferred_election(assignment, st.isr, self._live_for(tp))
        if preferred == NO_LEADER:
            e = PreferredLeaderNotAvailableError(
                f"the preferred replica {assignment[0]} of {req.topic}-{req.partition} is not alive "
                f"and in the ISR {list(st.isr)}"
            )
            return ElectLeadersResponse(code_for_exception(e), st.leader, str(e))
        if preferred == st.leader:
            e = ElectionNotNeededError(f"node {preferred} already leads {req.topic}-{req.partition}")
            return ElectLeadersResponse(code_for_exception(e), st.leader, str(e))
        try:
            self._write(tp, dataclasses.replace(st, leader=preferred, leader_epoch=st.leader_epoch + 1))
        except (SessionExpiredError, BadVersionError, ConnectionLossError) as exc:
            e = NotControllerError(f"controller {self.node.node_id} could not write: {exc}")
            return ElectLeadersResponse(code_for_exception(e), st.leader, str(e))
        self.elections += 1
        self._publish()
        return ElectLeadersResponse(NONE, preferred)

    def handle_controlled_shutdown(self, req: ControlledShutdownRequest) -> ControlledShutdownResponse:
        """Move leadership off a node that is about to stop, to the first live ISR member (in
        assignment order) not shutting down, and take the node out of every ISR it is in (never
        emptying one). ``remaining``: the partitions it still leads (no other ISR member)."""
        err = self._not_active()
        if err is not None:
            return ControlledShutdownResponse(code_for_exception(err), str(err))
        b = req.broker_id
        info = self.brokers.get(b)
        if info is None or info.broker_epoch != req.broker_epoch:
            e: KafkaError = StaleBrokerEpochError(
                f"node {b} asked for a controlled shutdown with broker epoch {req.broker_epoch}; "
                f"registered: {info.broker_epoch if info else 'none'}"
            )
            return ControlledShutdownResponse(code_for_exception(e), str(e))
        self.shutting_down.add(b)
        remaining: list[TopicPartition] = []
        try:
            for tp in sorted(self.states):
                st = self.states[tp]
                if b != st.leader and b not in st.isr:
                    continue
                assignment = self.topics[tp[0]].assignment[tp[1]]
                min_isr = min(self.topics[tp[0]].log_config.min_insync_replicas, len(assignment))
                leader, epoch = st.leader, st.leader_epoch
                if b == st.leader:
                    live_tp = self._live_for(tp)
                    candidates = [
                        r for r in assignment if r in st.isr and r != b and r in live_tp and r not in self.shutting_down
                    ]
                    if not candidates:
                        remaining.append(tp)
                        continue
                    leader, epoch = candidates[0], epoch + 1
                if len(st.isr) > 1:
                    isr, elr = el.shrink_with_elr(st.isr, st.elr, {b}, min_isr, keep_last=True)
                else:
                    isr, elr = st.isr, st.elr
                keep = set(isr) | set(elr) | {leader}
                epochs = tuple((r, ep) for r, ep in st.broker_epochs if r in keep)
                self._write(
                    tp,
                    dataclasses.replace(st, leader=leader, leader_epoch=epoch, isr=isr, elr=elr, broker_epochs=epochs),
                )
                if leader != st.leader:
                    self.elections += 1
                log.info(
                    "%s-%d: controlled shutdown of node %d: leader %d epoch %d ISR %s",
                    tp[0],
                    tp[1],
                    b,
                    leader,
                    epoch,
                    isr,
                )
        except (SessionExpiredError, BadVersionError, ControllerFenced, ConnectionLossError) as exc:
            e2 = self._lost_control(exc)
            return ControlledShutdownResponse(code_for_exception(e2), str(e2))
        self.version += 1
        self._publish()
        return ControlledShutdownResponse(NONE, remaining=tuple(remaining))

    def handle_init_producer_id(self, req: InitProducerIdRequest) -> InitProducerIdResponse:
        err = self._not_active()
        if err is not None:
            return InitProducerIdResponse(code_for_exception(err), message=str(err))
        if req.producer_id >= 0:
            if req.producer_epoch >= 32766:
                pass  # falls through to a new producer id, as Kafka does on epoch exhaustion
            else:
                return InitProducerIdResponse(NONE, req.producer_id, req.producer_epoch + 1)
        try:
            if self._pid_next >= self._pid_end:
                self._claim_pid_block()
        except (SessionExpiredError, BadVersionError, ConnectionLossError) as exc:
            e = NotControllerError(f"controller {self.node.node_id} could not allocate producer ids: {exc}")
            return InitProducerIdResponse(code_for_exception(e), message=str(e))
        pid = self._pid_next
        self._pid_next += 1
        return InitProducerIdResponse(NONE, pid, 0)

    def _claim_pid_block(self) -> None:
        s = self.session
        for _ in range(10):
            stat = s.exists(PRODUCER_ID_BLOCK_PATH)
            if stat is None:
                try:
                    s.multi(
                        [
                            Check(CONTROLLER_EPOCH_PATH, self.epoch_version),
                            Create(PRODUCER_ID_BLOCK_PATH, dumps({"next": PRODUCER_ID_BLOCK_SIZE})),
                        ]
                    )
                except CoordinatorError:
                    continue
                self._pid_next, self._pid_end = 0, PRODUCER_ID_BLOCK_SIZE
                return
            data, stat2 = s.get(PRODUCER_ID_BLOCK_PATH)
            start = int((loads(data) or {}).get("next", 0))
            try:
                s.multi(
                    [
                        Check(CONTROLLER_EPOCH_PATH, self.epoch_version),
                        SetData(PRODUCER_ID_BLOCK_PATH, dumps({"next": start + PRODUCER_ID_BLOCK_SIZE}), stat2.version),
                    ]
                )
            except BadVersionError:
                continue
            self._pid_next, self._pid_end = start, start + PRODUCER_ID_BLOCK_SIZE
            return
        raise ConnectionLossError("could not claim a producer id block")

    def describe(self) -> dict[str, Any]:
        return {
            "controller": self.node.node_id,
            "epoch": self.epoch,
            "brokers": {b: i.broker_epoch for b, i in self.brokers.items()},
            "partitions": {f"{t}-{p}": dataclasses.asdict(st) for (t, p), st in self.states.items()},
        }


def _marker(name: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{name}"


def error_response_for(exc: KafkaError) -> LeaderAndIsrResponse:
    return LeaderAndIsrResponse(code_for_exception(exc), str(exc))
