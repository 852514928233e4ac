"""A replica node: the partitions it hosts, the requests it serves, its follower fetchers, its
ISR expiry timer, its coordinator session and, when elected, the controller (Kafka's
``KafkaServer`` + ``ReplicaManager`` + ``ReplicaFetcherManager``, reduced to what replication
needs). Its follower fetchers are :mod:`seglog.cluster.fetcher`; the fetches it serves as a
leader, long polls included, :mod:`seglog.cluster.fetch_handler`; its controller
:mod:`seglog.cluster.controller`.

Everything runs on one thread of control: requests, responses and timers are callbacks from
the transport and the scheduler, so the same code runs inside the deterministic simulation
(in-memory network, manual clock) and on an asyncio loop over TCP.

On disk a node has one or more Kafka log directories (``log.dirs``, Kafka's JBOD), kept by
:mod:`seglog.cluster.log_dirs`: their layout and locks, where each partition lives, the dirs that
are offline and the high-watermark checkpoints. At start every dir is created if missing and
locked (a lock held by another process is an error) and every partition in it found; a dir that
cannot be read at start starts offline; with every dir offline the node does not start.

A log dir fails when writing, flushing or checkpointing in it raises ``OSError`` (ENOSPC, EIO):
its partitions go offline at once (their files closed unflushed, their requests answered with
KAFKA_STORAGE_ERROR, LeaderAndIsr no longer opens them) and the node reports them through the
coordinator — its registration lists the offline dirs and replicas, then a
``/log_dir_event_notification`` znode wakes the controller, which moves their leadership away
and takes them out of their ISRs. The other dirs keep serving. When the last healthy dir fails,
:attr:`ReplicaNode.on_log_dir_failure` runs (a node process halts, as a Kafka broker does). A
failed dir stays offline until the node restarts; its missing clean-shutdown marker then makes
the logs in it recover.

A node registers with the coordinator at start, saying whether it shut down cleanly (every dir
holding its marker): after an unclean shutdown the controller takes it out of every ISR until it
has caught up again.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from seglog.cluster import mutations as mut
from seglog.cluster.controller import Controller
from seglog.cluster.coordinator import (
    BadVersionError,
    ConnectionLossError,
    Coordinator,
    CoordinatorError,
    CoordinatorSession,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)
from seglog.cluster.fetch_handler import FetchHandler
from seglog.cluster.fetcher import ReplicaFetchers
from seglog.cluster.log_dirs import HW_CHECKPOINT_FILE, CheckpointValues, LogDirs, resolve_log_dirs
from seglog.cluster.messages import (
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
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicRequest,
    DeleteTopicResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ErrorResponse,
    FetchRequest,
    InitProducerIdRequest,
    InitProducerIdResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from seglog.cluster.metadata import (
    BROKER_IDS_PATH,
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    LOG_DIR_EVENT_PATH,
    LOG_DIR_EVENT_PREFIX,
    PartitionInfo,
    ReplicaConfig,
    TopicPartition,
    broker_path,
    dumps,
    loads,
)
from seglog.cluster.partition import Partition, Role
from seglog.cluster.transport import Reply, Transport
from seglog.config import LogConfig
from seglog.errors import (
    InvalidRequestError,
    KafkaError,
    KafkaStorageError,
    NotControllerError,
    NotLeaderOrFollowerBeforeAppendError,
    NotLeaderOrFollowerError,
    SeglogError,
    StaleBrokerEpochError,
    StaleControllerEpochError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
    code_for_exception,
)
from seglog.storage.cleaner import Cleaner
from seglog.storage.log import Log, LogAppendInfo
from seglog.util.clock import Clock

log = logging.getLogger("seglog.cluster.node")

__all__ = ["HW_CHECKPOINT_FILE", "ReplicaNode"]


#: The requests only the controller answers: request type -> (the controller's handler, the
#: response type that carries NOT_CONTROLLER from any other node).
_CONTROLLER_REQUESTS: dict[type, tuple[Callable[[Controller, Any], Any], Callable[..., Any]]] = {
    AlterPartitionRequest: (Controller.handle_alter_partition, AlterPartitionResponse),
    CreateTopicRequest: (Controller.handle_create_topic, CreateTopicResponse),
    CreatePartitionsRequest: (Controller.handle_create_partitions, CreatePartitionsResponse),
    DeleteTopicRequest: (Controller.handle_delete_topic, DeleteTopicResponse),
    AlterTopicConfigRequest: (Controller.handle_alter_topic_config, AlterTopicConfigResponse),
    ElectLeadersRequest: (Controller.handle_elect_leaders, ElectLeadersResponse),
    ControlledShutdownRequest: (Controller.handle_controlled_shutdown, ControlledShutdownResponse),
    InitProducerIdRequest: (Controller.handle_init_producer_id, InitProducerIdResponse),
}


class ReplicaNode:
    """One node of a replicated cluster (see module docs)."""

    def __init__(
        self,
        node_id: int,
        data_dir: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        coordinator: Coordinator,
        transport: Transport,
        clock: Clock,
        scheduler: Any,
        config: ReplicaConfig | None = None,
        log_defaults: Mapping[str, Any] | None = None,
        mutants: frozenset[str] = frozenset(),
        coordinator_reachable: Callable[[], bool] | None = None,
        address: str = "",
    ) -> None:
        self.node_id = node_id
        #: The log dirs, in the order given (``log.dirs``); :attr:`data_dir` is the first.
        self.log_dirs = resolve_log_dirs(data_dir)
        self.data_dir = self.log_dirs[0]
        #: Where each partition lives, the offline dirs, the high-watermark checkpoints.
        self.dirs = LogDirs(node_id, self.log_dirs)
        self.coordinator = coordinator
        self.transport = transport
        self.clock = clock
        self.scheduler = scheduler
        self.config = config or ReplicaConfig()
        self.log_defaults = dict(log_defaults or {})
        self.mutants = mut.check(mutants)
        self.address = address
        #: ``host:port`` of this node's Kafka listener ("" for none), registered with the node;
        #: :attr:`kafka_addresses` holds every live node's, as the controller sends them.
        self.kafka_address = ""
        self.kafka_addresses: dict[int, str] = {}
        #: The security protocols of this node's two listeners (between nodes, for clients),
        #: registered with their addresses: the controller's UpdateMetadata sends them on.
        self.security_protocol = "PLAINTEXT"
        self.kafka_security_protocol = "PLAINTEXT"
        self._coordinator_reachable = coordinator_reachable
        self.partitions: dict[TopicPartition, Partition] = {}
        self.metadata: dict[TopicPartition, PartitionInfo] = {}
        self.live_brokers: dict[int, int] = {}
        self.addresses: dict[int, str] = {}
        self.topic_configs: dict[str, dict[str, Any]] = {}
        self.controller_id = -1
        self.controller_epoch_seen = -1
        #: (controller epoch, state version) of the last LeaderAndIsr and the last
        #: UpdateMetadata applied, by message kind; an older version of the same controller
        #: epoch arriving later is ignored.
        self.versions_seen: dict[str, tuple[int, int]] = {}
        self._newest_seen = (-1, -1)  # the newest of both: it sets what both carry
        self.controller: Controller | None = None
        self.session: CoordinatorSession | None = None
        self.broker_epoch = -1
        self.stats: dict[str, int] = {}
        # Called once when the last healthy log dir fails (Kafka's LogDirFailureChannel reaching
        # its last dir): the process running the node should halt (no flush, no marker: recovery
        # runs on restart) and let the session expiry move leadership. None: the node keeps
        # running with every partition offline (the in-process modes).
        self.on_log_dir_failure: Callable[[BaseException], None] | None = None
        #: The partitions in failed log dirs (and those a dir offline since the start may hold).
        self.offline_partitions: set[TopicPartition] = set()
        self.running = False
        self.clean_start = False
        self.started_clean = False
        self._offline_reported = True
        self.fetchers = ReplicaFetchers(self)
        self.fetches = FetchHandler(self)
        self._tasks: list[Any] = []
        self.durable_epoch_files: dict[str, bytes | None] = {}
        #: Runs the periodic checkpoint writes (and their fsyncs) off the caller's thread when set
        #: (a one-worker executor's ``submit``); ``None`` writes them inline, as the simulation does.
        self.offload: Callable[[Callable[[], Any]], concurrent.futures.Future[Any]] | None = None
        self._checkpointing: concurrent.futures.Future[Any] | None = None
        self._cleaner = Cleaner(self.clock)
        #: The log cleaner's own thread, started with the first cleaning when ``offload`` is set
        #: (see :meth:`_clean_logs`), and the cleaning it runs.
        self._cleaner_pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._cleaning: concurrent.futures.Future[list[tuple[Any, OSError]]] | None = None

    # ---------------------------------------------------------------------------------------------
    # Lifecycle
    # ---------------------------------------------------------------------------------------------

    def start(self) -> None:
        self.offline_partitions = set()
        self._offline_reported = True
        self.dirs.open()
        for tp in sorted(self.dirs.unopened):
            self._snapshot_epoch_file(os.path.join(self._home(tp), f"{tp[0]}-{tp[1]}"))
        self.clean_start = self.dirs.all_clean
        self.started_clean = self.clean_start
        self.running = True
        self.transport.register(self.node_id, self.handle)
        cfg = self.config
        self._every("coordinator heartbeat", self._heartbeat, max(1, cfg.session_timeout_ms // 3))
        self._every("isr expiration", self._expire_isr, max(1, cfg.replica_lag_time_max_ms // 2))
        self._every(
            "high watermark checkpoint",
            self.checkpoint_high_watermarks,
            max(1, cfg.replica_high_watermark_checkpoint_interval_ms),
        )
        self._every("fetcher kick", self.fetchers.update, max(1, cfg.replica_fetch_backoff_ms))
        self._every("log flush", self._flush_logs, 100)
        if cfg.log_cleaner_enable:
            self._every("log cleaner", self._clean_logs, max(1, cfg.log_cleaner_backoff_ms))
        self._connect()

    @property
    def offline_dirs(self) -> dict[str, str]:
        """Failed log dirs (offline until the node restarts), with the error."""
        return self.dirs.offline

    @property
    def log_dir_failed(self) -> bool:
        """True once every log dir has failed."""
        return self.dirs.all_failed

    def dir_of(self, topic: str, partition: int) -> str | None:
        """The log dir holding this node's replica of the partition (None: none yet)."""
        return self.dirs.home((topic, partition))

    def _every(self, name: str, fn: Callable[[], object], period_ms: int) -> None:
        self._tasks.append(
            self.scheduler.schedule(f"node {self.node_id} {name}", fn, delay_ms=period_ms, period_ms=period_ms)
        )

    def shutdown(self, *, deregister: bool = False) -> None:
        """Clean shutdown: flush and close every log, snapshot producer state, checkpoint high
        watermarks, leave the clean-shutdown marker. With ``deregister`` the coordinator session
        is closed too (the controller reacts at once instead of after the session timeout)."""
        if not self.running:
            return
        self.running = False
        self._stop_tasks()
        if self.controller is not None:
            self.controller.resign()
            self.controller = None
        self.fetches.fail_all()
        self._stop_cleaning()
        self.wait_for_checkpoint()
        failed: dict[str, BaseException] = {}
        for p in self.partitions.values():
            p.stop()
            try:
                p.producer_state.take_snapshot(p.log.log_end_offset)
            except OSError as exc:
                failed.setdefault(self._home(p.tp), exc)
        failed.update(self.dirs.write_checkpoints(self._checkpoint_values()))
        for p in self.partitions.values():
            try:
                p.log.close()
            except OSError as exc:
                failed.setdefault(self._home(p.tp), exc)
        self._close_cleaner()
        self.dirs.write_clean_shutdown_markers(failed)
        for d, err in failed.items():
            log.error("node %d: log dir %s failed while shutting down: %s", self.node_id, d, err)
        self.dirs.close()
        if deregister and self.session is not None:
            try:
                self.session.close()
            except CoordinatorError:
                pass
        self.transport.unregister(self.node_id)

    def request_controlled_shutdown(self, done: Callable[[tuple[TopicPartition, ...] | None, str], None]) -> None:
        """Ask the controller to move this node's leaderships and ISR memberships away (Kafka's
        controlled shutdown). ``done(remaining, message)``: the partitions this node still leads,
        or None when no controller answered."""
        req = ControlledShutdownRequest(self.node_id, self.broker_epoch)

        def finish(resp: Any, err: BaseException | None) -> None:
            if err is not None:
                done(None, str(err))
            elif isinstance(resp, ControlledShutdownResponse) and resp.error == NONE:
                done(tuple((t, p) for t, p in resp.remaining), "")
            else:
                done(None, getattr(resp, "message", "") or type(resp).__name__)

        if self.controller is not None and self.controller.active:
            finish(self.controller.handle_controlled_shutdown(req), None)
        elif self.controller_id < 0 or self.broker_epoch < 0:
            done(None, "no controller is known")
        else:
            self.send(self.controller_id, req, finish, self.config.controller_socket_timeout_ms)

    def crash(self) -> None:
        """Stop as a killed process does: nothing flushed, nothing checkpointed, no marker."""
        if not self.running:
            return
        self.running = False
        self._stop_tasks()
        if self.controller is not None:
            self.controller.active = False
            self.controller = None
        self.transport.unregister(self.node_id)
        # A write already under way finishes, as it would in a dying process's kernel call.
        self.wait_for_checkpoint()
        for p in self.partitions.values():
            p.log.abandon()  # aborts a cleaning of it
        self._close_cleaner()
        self.dirs.close()

    def _stop_tasks(self) -> None:
        for t in self._tasks:
            self.scheduler.cancel(t)
        self._tasks.clear()
        self.fetchers.cancel_timers()

    # ---------------------------------------------------------------------------------------------
    # Coordinator: session, registration, controller election
    # ---------------------------------------------------------------------------------------------

    def _connect(self) -> None:
        try:
            self.session = self.coordinator.connect(
                reachable=self._coordinator_reachable, session_timeout_ms=self.config.session_timeout_ms
            )
            self._register()
            self._elect_controller()
        except (ConnectionLossError, SessionExpiredError) as exc:
            log.info("node %d cannot reach the coordinator yet: %s", self.node_id, exc)
            self.session = None if self.session is None or self.session.expired else self.session

    def _register(self) -> None:
        assert self.session is not None
        s = self.session
        for path in ("/brokers", BROKER_IDS_PATH):
            if s.exists(path) is None:
                try:
                    s.create(path, b"")
                except NodeExistsError:
                    pass
        stat = s.create(broker_path(self.node_id), self._registration(), ephemeral=True, replace=True)
        self.broker_epoch = stat.czxid
        self._offline_reported = True
        self.stats["registrations"] = self.stats.get("registrations", 0) + 1
        # Later registrations of this process (after a lost session) follow no crash.
        self.clean_start = True
        log.info("node %d registered with broker epoch %d", self.node_id, self.broker_epoch)

    def _registration(self) -> bytes:
        return dumps(
            {
                "clean_shutdown": self.clean_start,
                "address": self.address,
                "kafka_address": self.kafka_address,
                "security_protocol": self.security_protocol,
                "kafka_security_protocol": self.kafka_security_protocol,
                "pid": os.getpid(),
                "offline_log_dirs": sorted(self.offline_dirs),
                "offline_replicas": [list(tp) for tp in sorted(self.offline_partitions)],
            }
        )

    def _report_offline(self) -> None:
        """Tell the controller about failed log dirs: the registration lists the offline dirs
        and replicas, then a notification znode wakes the controller (Kafka's
        ``/log_dir_event_notification``). Retried by the heartbeat until it gets through."""
        self._offline_reported = False
        s = self.session
        if s is None or self.broker_epoch < 0:
            return  # the next registration carries it
        event = dumps({"version": 1, "broker": self.node_id, "event": 1})
        try:
            s.set(broker_path(self.node_id), self._registration())
            try:
                s.create_sequential(LOG_DIR_EVENT_PREFIX, event)
            except NoNodeError:
                s.create(LOG_DIR_EVENT_PATH, b"", make_parents=True)
                s.create_sequential(LOG_DIR_EVENT_PREFIX, event)
        except NoNodeError:
            return  # not registered right now: the next registration carries it
        except CoordinatorError as exc:
            log.warning("node %d cannot report its failed log dirs yet: %s", self.node_id, exc)
            return
        self._offline_reported = True

    def _heartbeat(self) -> None:
        if self.session is None or self.broker_epoch < 0:
            self._connect()
            return
        try:
            self.session.heartbeat()
            if self.session.exists(broker_path(self.node_id)) is None:
                self._register()
            elif not self._offline_reported:
                self._report_offline()
        except ConnectionLossError:
            return
        except SessionExpiredError:
            log.info("node %d lost its coordinator session; registering again", self.node_id)
            if self.controller is not None:
                self.controller.resign()
                self.controller = None
            self.session = None
            self.broker_epoch = -1
            self._connect()
            return
        if self.controller is None and self.controller_id < 0:
            self._elect_controller()

    def _elect_controller(self) -> None:
        if self.session is None or not self.running:
            return
        s = self.session
        try:
            try:
                s.create(CONTROLLER_PATH, dumps({"broker_id": self.node_id}), ephemeral=True)
            except NodeExistsError:
                data, cstat = s.get(CONTROLLER_PATH, watch=self._on_controller_event)
                self.controller_id = int((loads(data) or {}).get("broker_id", -1))
                if cstat.ephemeral_owner == s.session_id and self.controller is None:
                    # Our own znode, left behind when we resigned without reaching the
                    # coordinator: drop it so that an election happens (its watch fires).
                    self._drop_controller_znode()
                return
            try:
                data, stat = s.get(CONTROLLER_EPOCH_PATH)
                epoch = int((loads(data) or {}).get("epoch", 0)) + 1
                new = s.set(CONTROLLER_EPOCH_PATH, dumps({"epoch": epoch}), stat.version)
            except NoNodeError:
                epoch = 1
                s.create(CONTROLLER_EPOCH_PATH, dumps({"epoch": epoch}))
                _, new = s.get(CONTROLLER_EPOCH_PATH)
            s.exists(CONTROLLER_PATH, watch=self._on_controller_event)
        except BadVersionError:
            self._drop_controller_znode()
            return
        except (ConnectionLossError, SessionExpiredError, NoNodeError):
            return
        self.controller_id = self.node_id
        self.controller = Controller(self, s, epoch, new.version)
        self.stats["controller_elections"] = self.stats.get("controller_elections", 0) + 1
        self.controller.start()

    def _drop_controller_znode(self) -> None:
        if self.session is None:
            return
        try:
            data, stat = self.session.get(CONTROLLER_PATH)
            if int((loads(data) or {}).get("broker_id", -1)) == self.node_id:
                self.session.delete(CONTROLLER_PATH, stat.version)
        except CoordinatorError:
            pass

    def _on_controller_event(self, _ev: Any) -> None:
        if not self.running:
            return
        if self.controller is not None:
            # Our /controller znode changed or vanished: we are no longer controller.
            if self.session is not None:
                try:
                    st = self.session.exists(CONTROLLER_PATH)
                except ConnectionLossError:
                    # Cannot tell whether we still own /controller: ask again shortly rather
                    # than resign while the znode may still be ours.
                    self.scheduler.schedule(
                        f"node {self.node_id} controller check", lambda: self._on_controller_event(_ev), delay_ms=100
                    )
                    return
                except CoordinatorError:
                    st = None
                if st is not None and st.ephemeral_owner == self.session.session_id:
                    self.session.exists(CONTROLLER_PATH, watch=self._on_controller_event)
                    return
            self.controller.resign()
            self.controller = None
        self.controller_id = -1
        self._elect_controller()

    def on_controller_resigned(self) -> None:
        self.controller = None
        self.controller_id = -1
        self._drop_controller_znode()

    # ---------------------------------------------------------------------------------------------
    # Requests
    # ---------------------------------------------------------------------------------------------

    def send(
        self, dst: int, message: Any, callback: Callable[[Any, BaseException | None], None], timeout_ms: int
    ) -> None:
        self.transport.request(self.node_id, dst, message, callback, timeout_ms)

    def handle(self, src: int, msg: Any, reply: Reply) -> None:
        if not self.running:
            return
        try:
            if isinstance(msg, FetchRequest):
                self.fetches.handle(src, msg, reply)
            elif isinstance(msg, ProduceRequest):
                self._handle_produce(msg, reply)
            elif isinstance(msg, DeleteRecordsRequest):
                self._handle_delete_records(msg, reply)
            elif isinstance(msg, LeaderAndIsrRequest):
                reply(self._handle_leader_and_isr(msg))
            elif isinstance(msg, UpdateMetadataRequest):
                reply(self._handle_update_metadata(msg))
            elif isinstance(msg, StopReplicaRequest):
                reply(self._handle_stop_replica(msg))
            elif isinstance(msg, MetadataRequest):
                reply(self.metadata_response(msg))
            elif type(msg) in _CONTROLLER_REQUESTS:
                handler, response = _CONTROLLER_REQUESTS[type(msg)]
                c = self.controller
                if c is None:
                    e = NotControllerError(f"node {self.node_id} is not the controller")
                    reply(response(error=code_for_exception(e), message=str(e)))
                else:
                    reply(handler(c, msg))
            else:
                e2 = InvalidRequestError(f"unknown request {type(msg).__name__}")
                reply(ErrorResponse(code_for_exception(e2), str(e2)))
        except KafkaError as exc:
            log.warning("node %d: %s while handling %s", self.node_id, exc, type(msg).__name__)
            reply(ErrorResponse(code_for_exception(exc), str(exc)))

    # -- LeaderAndIsr and UpdateMetadata ---------------------------------------------------------

    def _refused(self, req: LeaderAndIsrRequest | UpdateMetadataRequest) -> KafkaError | None:
        """Why a controller's request is refused (an older controller epoch, another broker
        epoch), or None."""
        if req.controller_epoch < self.controller_epoch_seen:
            return StaleControllerEpochError(
                f"{type(req).__name__}: controller epoch {req.controller_epoch} is older than "
                f"{self.controller_epoch_seen}"
            )
        if req.broker_epoch != self.broker_epoch or self.broker_epoch < 0:
            return StaleBrokerEpochError(
                f"{type(req).__name__} for broker epoch {req.broker_epoch}; node "
                f"{self.node_id} is registered with {self.broker_epoch}"
            )
        return None

    def _accept(self, req: LeaderAndIsrRequest | UpdateMetadataRequest) -> bool | None:
        """None when ``req`` is superseded (an older state version of the same controller epoch
        than the last of its kind applied: two sends crossed), else record its version and say
        whether it is also the newest of both kinds (then it may set what both carry)."""
        kind = type(req).__name__
        version = (req.controller_epoch, req.state_version)
        seen = self.versions_seen.get(kind)
        if seen is not None and seen[0] == req.controller_epoch and 0 <= req.state_version < seen[1]:
            return None
        self.versions_seen[kind] = version
        self.controller_epoch_seen = req.controller_epoch
        self.controller_id = req.controller_id
        newest = req.state_version < 0 or version >= self._newest_seen
        self._newest_seen = max(self._newest_seen, version)
        return newest

    def metadata_caught_up(self) -> bool:
        """Whether the metadata (UpdateMetadata) is at least as new as the partition states the
        node acts on (LeaderAndIsr): then a partition missing from it is deleted, not unknown yet."""
        um = self.versions_seen.get(UpdateMetadataRequest.__name__)
        lai = self.versions_seen.get(LeaderAndIsrRequest.__name__)
        return um is not None and (lai is None or um >= lai)

    def _learn_addresses(self, addresses: tuple[tuple[int, str], ...]) -> None:
        learn = getattr(self.transport, "set_address", None)
        if learn is not None:
            for nid, addr in addresses:
                if nid != self.node_id:
                    learn(nid, addr)

    def _apply_topic_configs(self, configs: tuple[tuple[str, str], ...]) -> None:
        for topic, cfg in configs:
            overrides = json.loads(cfg)
            if self.topic_configs.get(topic, overrides) != overrides:
                # Altered: the open replicas take the new config (new segments, the next
                # background runs, min.insync.replicas from now on).
                new = self.topic_config(overrides)
                for part in self.partitions.values():
                    if part.topic == topic:
                        part.log_config = new
                        part.log.config = new
            self.topic_configs[topic] = overrides

    def _handle_leader_and_isr(self, req: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        """The states of this node's replicas: open them, take their roles. The leaders'
        addresses come with them, so a follower can fetch before UpdateMetadata arrives."""
        e = self._refused(req)
        if e is not None:
            return LeaderAndIsrResponse(code_for_exception(e), str(e))
        newest = self._accept(req)
        if newest is None:
            return LeaderAndIsrResponse()
        own = {t: json.loads(c) for t, c in req.topic_configs}
        if newest:
            self._learn_addresses(req.live_leaders)
            self._apply_topic_configs(req.topic_configs)
        else:
            # A newer UpdateMetadata set the addresses and configs; a leader it does not know
            # (it named no address for it) is still learnt.
            self._learn_addresses(tuple((n, a) for n, a in req.live_leaders if n not in self.addresses))
        for info in req.partitions:
            if self.node_id not in info.replicas or info.tp in self.offline_partitions:
                continue
            p = self.partitions.get(info.tp)
            if p is None:
                try:
                    p = self._open_partition(info, self.topic_configs.get(info.topic, own.get(info.topic)))
                except (OSError, KafkaError) as exc:
                    log.error("node %d cannot open %s-%d: %s", self.node_id, info.topic, info.partition, exc)
                    home = self.dirs.home(info.tp)
                    if home is not None and (
                        isinstance(exc, KafkaStorageError)
                        or (isinstance(exc, OSError) and not isinstance(exc, SeglogError))
                    ):
                        self._log_dir_failed(home, exc)
                    continue
                if p is None:
                    continue  # offline: its dir failed, or a dir that may hold it is
            was_leader = p.is_leader
            if p.apply_state(info) and was_leader and not p.is_leader:
                self.fetches.complete(p.tp, error=True)
        self.fetchers.update()
        if not self._offline_reported:
            self._report_offline()
        return LeaderAndIsrResponse()

    def _handle_update_metadata(self, req: UpdateMetadataRequest) -> UpdateMetadataResponse:
        """The metadata: every partition's state (what Metadata answers), the live nodes with
        their broker epochs and addresses, the topic configs."""
        e = self._refused(req)
        if e is not None:
            return UpdateMetadataResponse(code_for_exception(e), str(e))
        newest = self._accept(req)
        if newest is None:
            return UpdateMetadataResponse()
        old_live = self.live_brokers
        self.live_brokers = dict(req.live_brokers)
        if req.addresses:
            self.addresses = dict(req.addresses)
            self._learn_addresses(req.addresses)
        self.kafka_addresses = dict(req.kafka_addresses)
        if newest:
            self._apply_topic_configs(req.topic_configs)
        self.metadata = {info.tp: info for info in req.partitions}
        if old_live != self.live_brokers:
            for p in self.partitions.values():
                p.maybe_increment_high_watermark()
                p.complete_delayed_deletes()  # a node gone no longer holds the low watermark
        return UpdateMetadataResponse()

    # -- StopReplica ----------------------------------------------------------------------------

    def _handle_stop_replica(self, req: StopReplicaRequest) -> StopReplicaResponse:
        """Stop serving the partitions; with ``delete`` remove their directories too (renamed
        ``<topic>-<n>.<uuid>-delete`` first, so a crash part-way leaves a dir the next start
        removes, never a half partition). A partition on an offline log dir cannot be deleted:
        KAFKA_STORAGE_ERROR, and the controller asks again after a restart."""
        if req.controller_epoch < self.controller_epoch_seen or req.broker_epoch != self.broker_epoch:
            e: KafkaError = (
                StaleControllerEpochError(
                    f"controller epoch {req.controller_epoch} is older than {self.controller_epoch_seen}"
                )
                if req.controller_epoch < self.controller_epoch_seen
                else StaleBrokerEpochError(
                    f"request for broker epoch {req.broker_epoch}; node {self.node_id} is at {self.broker_epoch}"
                )
            )
            return StopReplicaResponse(code_for_exception(e), str(e))
        offline = [tp for tp in req.partitions if tp in self.offline_partitions]
        for d, exc in self.wait_for_checkpoint().items():  # no write of these logs under way
            self._log_dir_failed(d, exc)
        for tp in req.partitions:
            self.metadata.pop(tp, None)
            p = self.partitions.pop(tp, None)
            if p is not None:
                p.stop()
                self.fetches.complete(tp, error=True)
            home = self.dirs.home(tp)
            try:
                if p is not None:
                    p.log.close()
                if req.delete and home is not None and tp not in offline:
                    path = os.path.join(home, f"{tp[0]}-{tp[1]}")
                    if os.path.isdir(path):
                        suffix = f"-{tp[1]}.{uuid.uuid4().hex}-delete"  # a file name of at most 255 bytes
                        doomed = os.path.join(home, tp[0][: 255 - len(suffix)] + suffix)
                        os.rename(path, doomed)
                        shutil.rmtree(doomed, ignore_errors=True)
                    self.dirs.forget(tp)
            except OSError as exc:
                if home is not None:
                    self._log_dir_failed(home, exc)
                offline.append(tp)
        for topic in {t for t, _ in req.partitions} - {t for t, _ in self.metadata}:
            self.topic_configs.pop(topic, None)
        self.fetchers.update()
        if offline:
            e = KafkaStorageError(f"node {self.node_id}: {offline} are on failed log dirs")
            return StopReplicaResponse(code_for_exception(e), str(e))
        return StopReplicaResponse()

    def topic_config(self, overrides: Mapping[str, Any] | None = None) -> LogConfig:
        merged = dict(self.log_defaults)
        merged.update(overrides or {})
        return LogConfig.from_dict(merged)

    def _open_partition(self, info: PartitionInfo, overrides: Mapping[str, Any] | None) -> Partition | None:
        """Open (creating it if new) this node's replica with its topic's config ``overrides``;
        None when it is offline."""
        tp = info.tp
        cfg = self.topic_config(overrides)
        if self.dirs.home(tp) is None and self.dirs.unscanned:
            # A dir offline since the start may hold this partition: creating it elsewhere
            # would fork its history (Kafka refuses to create a log while a dir is offline).
            self.offline_partitions.add(tp)
            self._offline_reported = False  # reported once the whole LeaderAndIsr is applied
            return None
        home = self.dirs.place(tp)
        if home is None:
            return None
        d = os.path.join(home, f"{info.topic}-{info.partition}")
        lg = Log.open(
            d,
            cfg,
            clock=self.clock,
            replicated=True,
            owner=self.dirs.owner(home),
            producer_snapshots=True,
            high_watermark=self.dirs.checkpointed_high_watermark(tp),
            clean_shutdown=home in self.dirs.clean if os.path.isdir(d) else True,
        )
        self.dirs.opened(tp)
        lg.cleaner_offset = self.dirs.checkpointed_cleaner_offset(tp)
        p = Partition(self, info.topic, info.partition, lg, cfg, info.replicas)
        self.partitions[info.tp] = p
        self.stats["producer_snapshots_loaded"] = (
            self.stats.get("producer_snapshots_loaded", 0) + p.producer_state.snapshots_loaded
        )
        if p.producer_state.snapshots_loaded:
            log.info(
                "%s-%d: node %d loaded producer state from a snapshot (%d producers, log end %d)",
                info.topic,
                info.partition,
                self.node_id,
                len(p.producer_state.producers),
                lg.log_end_offset,
            )
        return p

    # -- produce --------------------------------------------------------------------------------

    def _handle_produce(self, req: ProduceRequest, reply: Reply) -> None:
        tp = (req.topic, req.partition)
        p = self.partitions.get(tp)

        def respond(first: int, last: int, append_time: int, err: KafkaError | None, dup: bool) -> None:
            if req.acks == 0:
                return
            if err is None:
                reply(ProduceResponse(req.topic, req.partition, NONE, first, last, append_time, duplicate=dup))
            else:
                reply(
                    ProduceResponse(
                        req.topic, req.partition, code_for_exception(err), first, last, message=str(err), duplicate=dup
                    )
                )

        if p is None:
            if tp in self.offline_partitions:
                respond(-1, -1, -1, self.offline_error(tp), False)
            elif tp in self.metadata:
                respond(
                    -1,
                    -1,
                    -1,
                    NotLeaderOrFollowerBeforeAppendError(
                        f"node {self.node_id} does not host {req.topic}-{req.partition}"
                    ),
                    False,
                )
            else:
                respond(
                    -1,
                    -1,
                    -1,
                    UnknownTopicOrPartitionError(f"node {self.node_id} knows no partition {req.topic}-{req.partition}"),
                    False,
                )
            return
        try:
            res: LogAppendInfo = p.append_as_leader(req.records, req.acks)
        except KafkaError as exc:
            respond(-1, -1, -1, exc, False)
            if isinstance(exc, KafkaStorageError):
                self.maybe_log_dir_failure(p, exc)
            return
        except OSError as exc:
            respond(-1, -1, -1, KafkaStorageError(f"node {self.node_id}: {exc}"), False)
            self.maybe_log_dir_failure(p, exc)
            return
        except Exception as exc:  # reported as an indeterminate failure
            log.exception("node %d: produce to %s-%d failed", self.node_id, req.topic, req.partition)
            respond(-1, -1, -1, UnknownServerError(f"node {self.node_id}: {exc!r}"), False)
            return
        if req.acks == -1:
            p.park_produce(res, respond, req.timeout_ms)
        else:
            respond(res.first_offset, res.last_offset, res.log_append_time, None, res.duplicate)

    def _handle_delete_records(self, req: DeleteRecordsRequest, reply: Reply) -> None:
        tp = (req.topic, req.partition)
        p = self.partitions.get(tp)

        def respond(lw: int, err: KafkaError | None) -> None:
            if err is None:
                reply(DeleteRecordsResponse(req.topic, req.partition, NONE, lw))
            else:
                reply(DeleteRecordsResponse(req.topic, req.partition, code_for_exception(err), lw, str(err)))

        if p is None:
            if tp in self.offline_partitions:
                respond(-1, self.offline_error(tp))
            elif tp in self.metadata:
                respond(-1, NotLeaderOrFollowerError(f"node {self.node_id} does not host {req.topic}-{req.partition}"))
            else:
                respond(
                    -1,
                    UnknownTopicOrPartitionError(f"node {self.node_id} knows no partition {req.topic}-{req.partition}"),
                )
            return
        try:
            p.delete_records(req.offset, req.timeout_ms, respond)
        except KafkaError as exc:
            respond(-1, exc)
            if isinstance(exc, KafkaStorageError):
                self.maybe_log_dir_failure(p, exc)
        except OSError as exc:
            respond(-1, KafkaStorageError(f"node {self.node_id}: {exc}"))
            self.maybe_log_dir_failure(p, exc)

    def on_log_appended(self, partition: Partition) -> None:
        # New data wakes parked follower fetches (and consumers reading to the log end).
        self.fetches.complete(partition.tp, followers=True, consumers=False)

    def on_high_watermark(self, partition: Partition) -> None:
        # A HW-only change wakes consumers, never a parked follower fetch (``docs/replication.md`` §3, long polls).
        self.fetches.complete(partition.tp, followers=False, consumers=True)

    # -- PartitionHost ----------------------------------------------------------------------------

    def broker_epoch_of(self, node_id: int) -> int:
        return self.live_brokers.get(node_id, -1)

    def schedule(self, name: str, fn: Callable[[], object], delay_ms: int) -> Any:
        return self.scheduler.schedule(name, fn, delay_ms=delay_ms)

    def cancel(self, task: Any) -> None:
        self.scheduler.cancel(task)

    def submit_alter_partition(self, partition: Partition, new_isr: tuple[int, ...]) -> None:
        epochs = tuple(
            self.broker_epoch
            if r == self.node_id
            else (partition.remotes[r].broker_epoch if r in partition.remotes else -1)
            for r in new_isr
        )
        req = AlterPartitionRequest(
            self.node_id,
            self.broker_epoch,
            partition.topic,
            partition.partition,
            partition.leader_epoch,
            partition.partition_epoch,
            new_isr,
            epochs,
        )
        sent_epoch = partition.partition_epoch
        ctrl = self.controller_id

        def done(resp: Any, err: BaseException | None) -> None:
            if not self.running or self.partitions.get(partition.tp) is not partition:
                return
            if err is not None or not isinstance(resp, AlterPartitionResponse):
                partition.on_alter_partition_response(new_isr, sent_epoch, None, -1)
                return
            partition.on_alter_partition_response(new_isr, sent_epoch, resp.state, resp.error)

        if ctrl < 0:
            partition.on_alter_partition_response(new_isr, sent_epoch, None, NotControllerError.code)
            return
        self.send(ctrl, req, done, self.config.controller_socket_timeout_ms)

    # ---------------------------------------------------------------------------------------------
    # Timers
    # ---------------------------------------------------------------------------------------------

    def _expire_isr(self) -> None:
        for p in list(self.partitions.values()):
            p.maybe_shrink_isr()

    def _home(self, tp: TopicPartition) -> str:
        home = self.dirs.home(tp)
        assert home is not None, f"{tp} has a replica here, so it has a log dir"
        return home

    def _checkpoint_values(self) -> CheckpointValues:
        return self.dirs.checkpoint_values((tp, p.log) for tp, p in self.partitions.items())

    def checkpoint_high_watermarks(self) -> None:
        if self._checkpointing is not None:
            if not self._checkpointing.done() and self.running:
                return  # the previous tick's writes are still being fsynced: skip this one
            for d, exc in self.wait_for_checkpoint().items():
                self._log_dir_failed(d, exc)
        values = self._checkpoint_values()
        if not values:
            return
        if self.offload is None or not self.running:
            for d, exc in self.dirs.write_checkpoints(values).items():
                self._log_dir_failed(d, exc)
        else:
            self._checkpointing = self.offload(lambda: self.dirs.write_checkpoints(values))

    def wait_for_checkpoint(self) -> dict[str, BaseException]:
        """Block until an offloaded checkpoint write has finished; the dirs it failed in."""
        fut, self._checkpointing = self._checkpointing, None
        if fut is None:
            return {}
        try:
            failed: dict[str, BaseException] = fut.result()
            return failed
        except Exception as exc:  # noqa: BLE001 - the next checkpoint retries
            log.warning("node %d: checkpoint write failed: %s", self.node_id, exc)
            return {}

    def _flush_logs(self) -> None:
        for p in list(self.partitions.values()):
            if not p.log.closed:
                try:
                    p.log.maybe_flush_by_time()
                except OSError as exc:
                    self.maybe_log_dir_failure(p, exc)

    def _clean_logs(self) -> None:
        """Compact this node's replicas of compacted topics (``__consumer_offsets`` among them)
        that need it, each below its own high watermark, as Kafka's cleaner runs on every
        replica: a follower's cleaning leaves the gaps a leader's does, and a fetch from a
        removed offset gets the next batch.

        With ``offload`` set (the TCP modes) the cleaning runs on a thread of its own, as
        Kafka's cleaner threads do, while the node goes on appending and serving: it reads only
        inactive segments and swaps each cleaned group in under the log's lock, and a
        truncation, deletion or close of the log aborts it (``Log.begin_cleaning``). One
        cleaning at a time; a tick that finds the last one still running skips. Without
        ``offload`` (the simulation) it runs inline. Each replica's first dirty offset
        (``Log.cleaner_offset``) goes to its dir's ``cleaner-offset-checkpoint`` with the next
        high-watermark checkpoint, so a restarted node does not clean its logs from the start."""
        if self._cleaning is not None:
            if not self._cleaning.done():
                return
            self._finish_cleaning()
        logs = [
            p
            for tp, p in self.partitions.items()
            if not p.log.closed and p.log.config.compact and tp not in self.offline_partitions
        ]
        if not logs:
            return
        if self.offload is None:
            self._report_cleaning_failures(self._clean(logs))
            return
        if self._cleaner_pool is None:
            self._cleaner_pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=f"seglog-node-{self.node_id}-cleaner"
            )
        self._cleaning = self._cleaner_pool.submit(self._clean, logs)

    def _clean(self, partitions: Sequence[Any]) -> list[tuple[Any, OSError]]:
        """Clean each partition's log if it needs it; the storage errors met (any thread)."""
        failed = []
        for p in partitions:
            if not self.running:
                break
            lg = p.log
            try:
                self._cleaner.clean(lg, lg.cleaner_offset, upper=lg.high_watermark)
            except OSError as exc:
                failed.append((p, exc))
        return failed

    def _finish_cleaning(self) -> None:
        """Wait for the cleaning on the cleaner's thread, if any, and report its storage errors
        (on the node's thread)."""
        fut, self._cleaning = self._cleaning, None
        if fut is None:
            return
        try:
            failed = fut.result()
        except Exception:  # noqa: BLE001 - a cleaner bug must not stop the node
            log.exception("node %d: the log cleaner failed", self.node_id)
            return
        self._report_cleaning_failures(failed)

    def _stop_cleaning(self) -> None:
        """Abort the cleaning under way, if any, and wait for its thread to leave (shutdown):
        every log is paused for good, as it is about to close."""
        if self._cleaning is None:
            return
        if not self._cleaning.done():
            for p in self.partitions.values():
                p.log.pause_cleaning()
        self._finish_cleaning()

    def _close_cleaner(self) -> None:
        """Stop the cleaner's thread (its cleaning was stopped or its logs closed)."""
        self._cleaning = None
        pool, self._cleaner_pool = self._cleaner_pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def _report_cleaning_failures(self, failed: list[tuple[Any, OSError]]) -> None:
        for p, exc in failed:
            self.maybe_log_dir_failure(p, exc)

    def maybe_log_dir_failure(self, p: Any, exc: BaseException) -> None:
        """A storage error from a write to ``p``'s log: its log dir has failed, unless the log
        was closed by this node itself (a shutdown racing a request)."""
        home = None if p is None or p.log.closed else self.dirs.home(p.tp)
        if home is not None:
            self._log_dir_failed(home, exc)

    def _log_dir_failed(self, d: str, exc: BaseException) -> None:
        """Take log dir ``d`` offline (Kafka's ``ReplicaManager.handleLogDirFailure``): its
        partitions stop being served and their files are closed unflushed; the controller is
        told. The last healthy dir failing calls :attr:`on_log_dir_failure`."""
        if not self.running:
            return
        tps = self.dirs.fail(d, str(exc))
        if tps is None:
            return  # offline already
        self.stats["log_dir_failures"] = self.stats.get("log_dir_failures", 0) + 1
        log.error(
            "node %d: log dir %s failed (%s); its partitions are offline: %s",
            self.node_id,
            d,
            exc,
            ", ".join(f"{t}-{p}" for t, p in tps) or "none",
        )
        if self.log_dir_failed and self.on_log_dir_failure is not None:
            self.on_log_dir_failure(exc)
            return
        for tp in tps:
            self.offline_partitions.add(tp)
            self.dirs.unopened.discard(tp)
            p = self.partitions.pop(tp, None)
            if p is None:
                continue
            p.fail_delayed(KafkaStorageError(f"node {self.node_id}: the log dir of {tp[0]}-{tp[1]} failed: {exc}"))
            p.role = Role.NONE
            p.log.abandon()
            self.fetches.complete(tp, error=True)
        self.fetchers.update()
        self._report_offline()

    def offline_error(self, tp: TopicPartition) -> KafkaStorageError:
        """The error a request for ``tp`` gets while its replica here is offline."""
        d = self.dirs.home(tp)
        where = f"log dir {d} failed" if d is not None else "a log dir that may hold it is offline"
        return KafkaStorageError(f"node {self.node_id}'s replica of {tp[0]}-{tp[1]} is offline: {where}")

    def _snapshot_epoch_file(self, partition_dir: str) -> None:
        """The epoch checkpoint as this node found it at start: all a power loss would leave
        of it if its writes were never fsynced (read only by the simulation's power-loss fault
        under the ``epoch_cache_no_fsync`` mutation)."""
        if mut.EPOCH_CACHE_NO_FSYNC not in self.mutants:
            return
        path = os.path.join(partition_dir, "leader-epoch-checkpoint")
        try:
            with open(path, "rb") as f:
                self.durable_epoch_files[path] = f.read()
        except FileNotFoundError:
            self.durable_epoch_files[path] = None

    # ---------------------------------------------------------------------------------------------
    # Metadata
    # ---------------------------------------------------------------------------------------------

    def known_topics(self) -> set[str]:
        """The names of the topics this node knows: of its metadata, and the controller's when
        it is the controller."""
        names = {t for t, _ in self.metadata}
        if self.controller is not None:
            names.update(self.controller.topics)
        return names

    def metadata_response(self, req: MetadataRequest | None = None) -> MetadataResponse:
        parts = tuple(
            info
            for tp, info in sorted(self.metadata.items())
            if req is None or not req.topics or info.topic in req.topics
        )
        marks = tuple(
            (p.topic, p.partition, p.log.log_start_offset, p.high_watermark, p.low_watermark)
            for tp, p in sorted(self.partitions.items())
            if p.is_leader and not p.log.closed and (req is None or not req.topics or p.topic in req.topics)
        )
        return MetadataResponse(
            self.controller_id,
            parts,
            tuple(sorted(self.live_brokers.items())),
            tuple(sorted(self.addresses.items())),
            watermarks=marks,
        )

    def partition(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))
