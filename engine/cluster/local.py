"""A whole replicated cluster in one process, over loopback TCP — for integration tests and
demos.

>>> from seglog.cluster.local import LocalCluster
>>> with LocalCluster(nodes=3) as cluster:                        # doctest: +SKIP
...     cluster.create_topic("orders", partitions=1, replication_factor=3,
...                          config={"min.insync.replicas": 2})
...     producer = cluster.producer(acks="all")
...     offsets = [producer.send("orders", b"order-%d" % i) for i in range(10)]
...     producer.flush()
...     cluster.kill(cluster.leader("orders", 0))                 # abrupt: nothing flushed
...     consumer = cluster.consumer()
...     consumer.assign([("orders", 0)])
...     records = consumer.poll(timeout_ms=5000)

Each node is a :class:`~seglog.cluster.node.ReplicaNode` with its own log directory under
``dir`` (``log_dirs=N``: N of them, :meth:`LocalCluster.node_dirs`) and its own TCP port; they
share an in-memory coordinator (``coordinator="memory"``) and one asyncio event loop on a
background thread (their periodic checkpoint files are written, and fsynced, on a second one, so
that a slow fsync does not stall the loop). With ``node_threads=True`` every node has an event
loop, thread, TCP transport and scheduler of its own instead (producers and consumers stay on
the cluster's loop); the coordinator is shared under its lock and delivers each node's watch
events on that node's loop, and :meth:`kill`, :meth:`restart` and :meth:`pause` act on the
node's own loop.
:meth:`LocalCluster.kill` drops a node as a killed process (sockets closed, logs abandoned
unflushed); :meth:`LocalCluster.restart` brings it back from its directory;
:meth:`LocalCluster.pause` freezes it for a while (its timers and requests wait, its
coordinator session may expire) as SIGSTOP would.

With ``coordinator="zookeeper"`` the nodes (still in this process) coordinate through a real
ZooKeeper server: ``zookeeper="host:port[/chroot]"``, or one the cluster starts and stops
(:mod:`seglog.cluster.zkserver`). There :meth:`kill` also ends the node's session at once (a
dead process's session would expire after the timeout), and :meth:`pause` cannot stop kazoo's
pings, so a paused node keeps its session.

``processes=True`` (with ``coordinator="zookeeper"``) runs every node as its own
``seglog node`` process instead: :class:`seglog.cluster.process.ProcessCluster`, with
kill/terminate/restart/pause by PID and :meth:`~seglog.cluster.process.ProcessCluster.info`
(each node's PID, port, log directory).

Producers and consumers made here are thread-safe; their requests run on the cluster's loop.
``ClusterProducer.send_batch`` takes columns as :meth:`seglog.client.producer.Producer.send_batch`
does and ships them as ~1 MiB batches, several in flight.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import dataclasses
import functools
import itertools
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from seglog.util.loop import LoopOwner
from seglog.util.clock import Clock
from seglog.config import ConsumerConfig, ProducerConfig
from seglog.errors import (
    KafkaError,
    LeaderNotAvailableError,
    NetworkError,
    NotLeaderOrFollowerError,
    OutOfOrderSequenceError,
    RequestTimedOutError,
    SeglogError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from seglog.client.partitioner import partition_for_key, partitions_for_keys
from seglog.client.producer import BatchResult, _as_key_list, _records_per_batch, _slice, _take
from seglog._native.partition import group_by_partition
from seglog.storage.records import decode_records, encode_batch
from seglog.cluster.coordinator import InMemoryCoordinator
from seglog.cluster.messages import (
    CONSUMER_REPLICA_ID,
    NONE,
    CreateTopicRequest,
    CreateTopicResponse,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
)
from seglog.cluster.metadata import PartitionState, ReplicaConfig, state_path
from seglog.cluster.node import ReplicaNode
from seglog.cluster.tcp import LoopScheduler, TcpTransport
from seglog.cluster.transport import GuardedScheduler

log = logging.getLogger("seglog.cluster.local")

T = TypeVar("T")

#: Timers compressed for a cluster that lives inside one test: failures are noticed in seconds.
LOCAL_REPLICA_CONFIG = ReplicaConfig(
    replica_lag_time_max_ms=3000,
    replica_fetch_wait_max_ms=100,
    replica_fetch_backoff_ms=100,
    replica_socket_timeout_ms=3000,
    session_timeout_ms=3000,
    replica_high_watermark_checkpoint_interval_ms=1000,
    controller_socket_timeout_ms=3000,
)


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterRecordMetadata:
    """Where a record sent with :meth:`ClusterProducer.send` landed (its future's result)."""

    topic: str
    partition: int
    offset: int


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    leader_epoch: int = -1
    high_watermark: int = -1  # the serving leader's HW in the fetch response that carried it
    #: With :attr:`ClusterConsumer.name_leader_epoch`: the node that served the record and the
    #: leader epoch it checked the fetch against (KIP-320), so ``high_watermark`` is that leader's
    #: HW in that epoch; -1 otherwise.
    serving_leader: int = -1
    serving_leader_epoch: int = -1


def node_dirs(root: str, i: int, n: int) -> list[str]:
    """Node ``i``'s ``n`` log dirs under a cluster directory ``root``."""
    first = os.path.join(root, f"node-{i}")
    return [first] + [f"{first}.dir{k}" for k in range(1, n)]


class LocalCluster(LoopOwner):
    """``nodes`` replica nodes in this process over loopback TCP (see module docs)."""

    _what = "cluster"

    def __new__(cls, *args: Any, processes: bool = False, **kwargs: Any) -> LocalCluster:
        if processes and cls is LocalCluster:
            from seglog.cluster.process import ProcessCluster

            return object.__new__(ProcessCluster)
        return object.__new__(cls)

    def __init__(self, nodes: int = 3, dir: str | os.PathLike[str] | None = None,
                 coordinator: str = "memory", *, replica_config: ReplicaConfig | Mapping[str, Any] | None = None,
                 log_defaults: Mapping[str, Any] | None = None, secret: bytes | str | None = None,
                 ssl: Any = None, host: str = "127.0.0.1", processes: bool = False,
                 zookeeper: str | None = None, log_dirs: int = 1, node_threads: bool = False) -> None:
        if coordinator not in ("memory", "zookeeper"):
            raise ValueError(f"coordinator {coordinator!r} is not available: 'memory' or 'zookeeper'")
        if processes:
            raise ValueError("processes=True is served by seglog.cluster.process.ProcessCluster")
        self.zk_server: Any = None
        if coordinator == "zookeeper" and zookeeper is None:
            from seglog.cluster.zkserver import ZooKeeperServer

            self.zk_server = ZooKeeperServer().start()
            zookeeper = self.zk_server.connect_string
        if nodes < 1:
            raise ValueError(f"a cluster needs at least one node, got {nodes}")
        if log_dirs < 1:
            raise ValueError(f"a node needs at least one log dir, got log_dirs={log_dirs}")
        self.log_dirs = log_dirs
        self._own_dir = dir is None
        self.dir = os.path.abspath(os.fspath(dir)) if dir is not None else tempfile.mkdtemp(prefix="seglog-cluster-")
        os.makedirs(self.dir, exist_ok=True)
        if replica_config is None:
            self.replica_config = LOCAL_REPLICA_CONFIG
        elif isinstance(replica_config, ReplicaConfig):
            self.replica_config = replica_config
        else:
            self.replica_config = LOCAL_REPLICA_CONFIG.with_overrides(
                **{k.replace(".", "_"): v for k, v in replica_config.items()})
        self.log_defaults = dict(log_defaults or {})
        self.host = host
        self.ids = list(range(nodes))
        self.clock = Clock()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="seglog-cluster", daemon=True)
        self._thread.start()
        self._closed = False
        server_ssl = client_ssl = None
        if ssl is not None:
            server_ssl, client_ssl = ssl
        self._client_ids = itertools.count(10_000)
        self.nodes: dict[int, ReplicaNode | None] = {i: None for i in self.ids}
        self._gs: dict[int, GuardedScheduler] = {}
        self._paused: set[int] = set()
        self._ports: dict[int, int] = {}
        self._secret = secret
        # Checkpoint files (and their fsyncs) are written here, not on the loop, so a slow fsync
        # does not stall every node's requests.
        self._io = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="seglog-cluster-io")
        # With node_threads every node has a loop (and a thread, a transport, a scheduler) of its
        # own; without, they all use the cluster's loop, transport and scheduler.
        self.node_threads = node_threads
        self._node_loops: dict[int, asyncio.AbstractEventLoop] = {}
        self._node_threads: dict[int, threading.Thread] = {}
        self._transports: dict[int, TcpTransport] = {}
        self._schedulers: dict[int, LoopScheduler] = {}
        self.transport = TcpTransport(self.loop, secret=secret, server_ssl=server_ssl, client_ssl=client_ssl)
        self.scheduler = LoopScheduler(self.loop, self.clock)
        for i in self.ids:
            if node_threads:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=self._run_loop, args=(loop,), name=f"seglog-node-{i}", daemon=True)
                thread.start()
                t = TcpTransport(loop, secret=secret, server_ssl=server_ssl, client_ssl=client_ssl)
                t.addresses = self.transport.addresses  # one address book: nodes and clients
                self._node_loops[i], self._node_threads[i] = loop, thread
                self._transports[i], self._schedulers[i] = t, LoopScheduler(loop, self.clock)
            else:
                self._node_loops[i], self._transports[i], self._schedulers[i] = self.loop, self.transport, self.scheduler

        async def setup() -> None:
            if zookeeper is not None:
                from seglog.cluster.zookeeper import ZooKeeperCoordinator, ensure_chroot

                ensure_chroot(zookeeper)

                self.coordinator: Any = ZooKeeperCoordinator(
                    zookeeper, post=self.loop.call_soon_threadsafe,
                    session_timeout_ms=self.replica_config.session_timeout_ms)
            else:
                self.coordinator = InMemoryCoordinator(self.clock, self.scheduler,  # type: ignore[arg-type]
                                                       session_timeout_ms=self.replica_config.session_timeout_ms)

        try:
            self._call(setup())
            for i in self.ids:
                self._on_node_loop(i, self._start_node(i))
            self.wait_for(lambda: self._controller() is not None, 10, "a controller")
            # The controller learns of nodes through the coordinator's watches, a moment after
            # they register; a topic asking for every node as a replica is refused until then.
            self.wait_for(self._controller_knows_every_node, 10, f"nodes {self.ids} known to the controller")
        except BaseException:
            self.close()
            raise

    # -- the loop ------------------------------------------------------------------------------

    def wait_for(self, predicate: Any, timeout_s: float = 30, what: str = "a condition") -> None:
        """Poll ``predicate()`` on the cluster's loop until it is true; ``TimeoutError`` naming
        ``what`` after ``timeout_s``. With ``node_threads`` the nodes run on loops of their own
        meanwhile: read their state through :meth:`leader`, :meth:`isr`, :meth:`state` and
        :meth:`high_watermarks`, which are safe from any thread."""
        deadline = time.monotonic() + timeout_s
        while not self._holds(predicate):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not reached within {timeout_s} s")
            time.sleep(0.02)

    def _holds(self, predicate: Any) -> bool:
        return bool(self._on_loop(predicate))

    def _on_node_loop(self, i: int, coro: Any, timeout: float | None = 60) -> Any:
        """Run ``coro`` on node ``i``'s loop and wait for its result."""
        return self._call(coro, timeout, loop=self._node_loops[i])

    def _on_node(self, i: int, fn: Any, *args: Any) -> Any:
        """Call ``fn(*args)`` on node ``i``'s loop and wait for its result."""
        return self._on_loop(fn, *args, loop=self._node_loops[i])

    # -- nodes ---------------------------------------------------------------------------------

    def node_dir(self, i: int) -> str:
        """The node's (first) log dir."""
        return os.path.join(self.dir, f"node-{i}")

    def node_dirs(self, i: int) -> list[str]:
        """The node's log dirs: :meth:`node_dir`, then ``node-N.dirK`` for K = 1.. ``log_dirs-1``."""
        return node_dirs(self.dir, i, self.log_dirs)

    async def _start_node(self, i: int) -> None:
        """On node ``i``'s loop: start it (from its directory)."""
        gs = GuardedScheduler(self._schedulers[i])  # type: ignore[arg-type]
        self._gs[i] = gs
        port = self._ports.get(i, 0)
        transport = self._transports[i]
        coordinator = (self.coordinator if not self.node_threads else
                       _NodeCoordinator(self.coordinator, self._node_loops[i].call_soon_threadsafe))
        node = ReplicaNode(i, self.node_dirs(i), coordinator=coordinator, transport=transport,
                           clock=self.clock, scheduler=gs, config=self.replica_config,
                           log_defaults=self.log_defaults,
                           coordinator_reachable=functools.partial(self._reachable, i))
        host, port = await transport.listen(i, node.handle, self.host, port)
        self._ports[i] = port
        node.address = f"{host}:{port}"
        node.offload = self._io.submit
        self.nodes[i] = node
        node.start()

    def _reachable(self, i: int) -> bool:
        return i not in self._paused

    def _node(self, i: int) -> ReplicaNode:
        if i not in self.nodes:
            raise ValueError(f"no node {i} in this cluster (nodes {self.ids})")
        n = self.nodes[i]
        if n is None:
            raise RuntimeError(f"node {i} is not running (killed); restart it first")
        return n

    def kill(self, node: int) -> None:
        """Stop ``node`` abruptly: its sockets close, its logs are left as they are (nothing
        flushed that was not); its coordinator session expires after the session timeout."""
        self._node(node)

        def stop() -> None:
            n = self.nodes[node]
            if n is None:
                return
            self._paused.discard(node)
            self._gs[node].kill()
            n.crash()
            if self.zk_server is not None or not isinstance(self.coordinator, InMemoryCoordinator):
                # In one process a ZooKeeper session outlives the node; end it as a dead
                # process's would end (at once rather than after the timeout).
                if n.session is not None:
                    n.session.close()
            self.nodes[node] = None

        self._on_node(node, stop)

    def restart(self, node: int) -> None:
        """Start ``node`` again from its directory (after :meth:`kill`, or kill it first)."""
        if self.nodes.get(node) is not None:
            self.kill(node)
        self._on_node_loop(node, self._start_node(node))

    def pause(self, node: int, seconds: float) -> None:
        """Freeze ``node`` for ``seconds`` (returns at once): its timers and incoming requests
        wait, it cannot reach the coordinator, as a SIGSTOPped process."""
        self._node(node)

        def freeze() -> None:
            self._paused.add(node)
            self._gs[node].paused = True
            self._transports[node].pause(node)
            self._node_loops[node].call_later(seconds, thaw)

        def thaw() -> None:
            if node not in self._paused:
                return
            self._paused.discard(node)
            self._transports[node].resume(node)
            self._gs[node].resume()

        self._on_node(node, freeze)

    def close(self) -> None:
        """Shut every node down cleanly and stop the loop (a directory made by the cluster is
        removed)."""
        if self._closed:
            return
        coordinator = getattr(self, "coordinator", None)

        async def down_node(i: int) -> None:
            n = self.nodes.get(i)
            if n is not None:
                self._gs[i].kill()
                n.shutdown(deregister=not isinstance(coordinator, InMemoryCoordinator))
            if self.node_threads:
                await self._transports[i].close()

        async def down() -> None:
            if coordinator is not None:
                coordinator.close()
            await self.transport.close()

        try:
            for i in self.ids:
                if i in self._gs or self.node_threads:
                    self._on_node_loop(i, down_node(i))
            self._call(down())
        finally:
            self._closed = True
            loops = [(self.loop, self._thread)]
            if self.node_threads:
                loops += [(self._node_loops[i], self._node_threads[i]) for i in self.ids if i in self._node_threads]
            for loop, thread in loops:
                loop.call_soon_threadsafe(loop.stop)
            for loop, thread in loops:
                thread.join(timeout=10)
                if not thread.is_alive():
                    loop.close()
            self._io.shutdown(wait=True)
            if self.zk_server is not None:
                self.zk_server.stop()
            if self._own_dir:
                shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- metadata ------------------------------------------------------------------------------

    def _controller_knows_every_node(self) -> bool:
        c = self._controller()
        ctl = None if c is None else self.nodes[c].controller  # type: ignore[union-attr]
        return ctl is not None and set(self.ids) <= set(ctl.brokers)

    def _controller(self) -> int | None:
        for i, n in self.nodes.items():
            if n is not None and n.controller is not None and n.controller.active:
                return i
        return None

    def _state(self, topic: str, partition: int) -> PartitionState | None:
        # Any thread: the in-memory coordinator locks, ZooKeeper reads on a session of its own.
        r = self.coordinator.read(state_path(topic, partition))
        return None if r is None else PartitionState.from_json(r[0], r[1].version)

    def leader(self, topic: str, partition: int = 0) -> int | None:
        """The node leading ``topic``-``partition`` now, or None (offline, or an election is
        under way)."""
        st = self._state(topic, partition)
        return None if st is None or st.leader < 0 else st.leader

    def isr(self, topic: str, partition: int = 0) -> list[int]:
        st = self._state(topic, partition)
        return [] if st is None else list(st.isr)

    def state(self, topic: str, partition: int = 0) -> PartitionState | None:
        st: PartitionState | None = self._state(topic, partition)
        return st

    def high_watermarks(self, topic: str, partition: int = 0) -> dict[int, int]:
        """Each running replica's high watermark (a follower's trails the leader's by a fetch,
        and is what its ``replication-offset-checkpoint`` holds after a clean shutdown)."""
        def read(n: ReplicaNode | None) -> int | None:
            p = n.partition(topic, partition) if n is not None else None
            return p.high_watermark if p is not None and not p.log.closed else None

        hws: dict[int, int] = {}
        for i, n in list(self.nodes.items()):
            hw = self._on_node(i, read, n) if n is not None else None
            if hw is not None:
                hws[i] = hw
        return hws

    # -- admin ---------------------------------------------------------------------------------

    def _client(self) -> _Client:
        return _Client(self, next(self._client_ids))

    def _learn(self, resp: MetadataResponse) -> None:
        """Clients of an in-process cluster know where every node is already."""

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 3,
                     config: Mapping[str, Any] | None = None, *, timeout_s: float = 30) -> None:
        """Create a topic (placement by Kafka's rule) and wait until every partition leads."""
        self.wait_for(lambda: self._controller() is not None, timeout_s, "a controller")
        req = CreateTopicRequest(name, partitions, replication_factor,
                                 tuple((k, json.dumps(v)) for k, v in (config or {}).items()))
        client = self._client()
        try:
            resp = client.call_controller(req, timeout_s)
        finally:
            client.close()
        assert isinstance(resp, CreateTopicResponse)
        if resp.error != NONE:
            raise error_for_code(resp.error)(resp.message)
        for p in range(partitions):
            self.wait_for(lambda p=p: (st := self._state(name, p)) is not None and st.leader >= 0
                          and (n := self.nodes.get(st.leader)) is not None
                          and (q := n.partitions.get((name, p))) is not None and q.is_leader,
                          timeout_s, f"a leader for {name}-{p}")

    def elect_preferred_leader(self, topic: str, partition: int = 0) -> int:
        client = self._client()
        try:
            resp = client.call_controller(ElectLeadersRequest(topic, partition), 30)
        finally:
            client.close()
        assert isinstance(resp, ElectLeadersResponse)
        if resp.error != NONE:
            raise error_for_code(resp.error)(resp.message)
        return resp.leader

    def producer(self, **config: Any) -> ClusterProducer:
        """A producer; keywords are Kafka producer keys with '_' for '.' (``acks="all"``,
        ``linger_ms=5``, ``enable_idempotence=True``, ``delivery_timeout_ms=...``)."""
        return ClusterProducer(self, ProducerConfig.from_dict(_dotted(config)))

    def consumer(self, **config: Any) -> ClusterConsumer:
        """A consumer reading committed records from the leaders (``fetch_max_wait_ms=...``,
        ``max_poll_records=...``)."""
        cfg = {"auto.offset.reset": "earliest"}
        cfg.update(_dotted(config))
        return ClusterConsumer(self, ConsumerConfig.from_dict(cfg))


class _NodeCoordinator:
    """The cluster's coordinator as one node (on a loop of its own) sees it: the sessions it
    opens deliver their watch events on that node's loop (``post``)."""

    def __init__(self, inner: Any, post: Any) -> None:
        self.inner = inner
        self.post = post

    def connect(self, *, reachable: Any = None, session_timeout_ms: int | None = None) -> Any:
        return self.inner.connect(reachable=reachable, session_timeout_ms=session_timeout_ms, post=self.post)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _dotted(config: Mapping[str, Any]) -> dict[str, Any]:
    return {k.replace("_", "."): v for k, v in config.items()}


class _Client:
    """A client endpoint on the cluster's transport, with a metadata cache (loop thread only,
    except the blocking helpers)."""

    def __init__(self, cluster: LocalCluster, client_id: int) -> None:
        self.cluster = cluster
        self.id = client_id
        self.metadata: dict[tuple[str, int], tuple[int, int]] = {}
        self.partitions: dict[str, int] = {}
        self.controller_id = -1
        self._meta_waiters: list[asyncio.Future[None]] = []
        self._meta_in_flight = False
        cluster._on_loop(cluster.transport.register, client_id, lambda *a: None)

    def close(self) -> None:
        if not self.cluster._closed:
            self.cluster._on_loop(self.cluster.transport.unregister, self.id)

    def _live(self) -> list[int]:
        return [i for i, n in self.cluster.nodes.items() if n is not None]

    def request(self, dst: int, msg: Any, timeout_ms: int) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = self.cluster.loop.create_future()

        def done(resp: Any, err: BaseException | None) -> None:
            if fut.done():
                return
            if err is not None:
                fut.set_exception(err)
            else:
                fut.set_result(resp)

        self.cluster.transport.request(self.id, dst, msg, done, timeout_ms)
        return fut

    async def refresh_metadata(self, want: str | None = None) -> None:
        """Fresh metadata from the first node that answers (that knows topic ``want``, if one
        does); concurrent callers share one round of requests."""
        if self._meta_in_flight:
            fut: asyncio.Future[None] = self.cluster.loop.create_future()
            self._meta_waiters.append(fut)
            await fut
            return
        self._meta_in_flight = True
        try:
            await self._refresh_metadata(want)
        finally:
            self._meta_in_flight = False
            waiters, self._meta_waiters = self._meta_waiters, []
            for w in waiters:
                if not w.done():
                    w.set_result(None)

    async def _refresh_metadata(self, want: str | None) -> None:
        for dst in self._live():
            try:
                resp = await self.request(dst, MetadataRequest(), 3000)
            except SeglogError:
                continue
            if isinstance(resp, MetadataResponse):
                self.cluster._learn(resp)
            if isinstance(resp, MetadataResponse) and resp.partitions and (
                    want is None or any(p.topic == want for p in resp.partitions)):
                self.metadata = {p.tp: (p.state.leader, p.state.leader_epoch) for p in resp.partitions}
                counts: dict[str, int] = {}
                for p in resp.partitions:
                    counts[p.topic] = max(counts.get(p.topic, 0), p.partition + 1)
                self.partitions = counts
                self.controller_id = resp.controller_id
                return

    def call_controller(self, msg: Any, timeout_s: float) -> Any:
        async def call() -> Any:
            deadline = time.monotonic() + timeout_s
            while True:
                ctrl = self.cluster._controller()
                if ctrl is not None:
                    try:
                        resp = await self.request(ctrl, msg, 5000)
                        if getattr(resp, "error", NONE) != 41:  # NOT_CONTROLLER: ask again
                            return resp
                    except SeglogError:
                        pass
                await self.refresh_metadata()
                if time.monotonic() > deadline:
                    raise RequestTimedOutError(f"no controller answered {type(msg).__name__} in {timeout_s} s")
                await asyncio.sleep(0.05)
        return self.cluster._call(call(), timeout_s + 5)


@dataclasses.dataclass(slots=True)
class _Pending:
    value: bytes | None
    key: bytes | None
    timestamp: int
    future: concurrent.futures.Future[ClusterRecordMetadata]


class ClusterProducer:
    """Sends records to partition leaders (see :meth:`LocalCluster.producer`).

    One request in flight per partition; records sent meanwhile wait and go out together as
    the next batch (up to ``batch.size``). A batch is retried (same sequence numbers when
    idempotent) until ``delivery.timeout.ms``; its futures then fail with the last error, whose
    ``definitely_not_written`` says whether the records may be in the log.
    """

    def __init__(self, cluster: LocalCluster, config: ProducerConfig) -> None:
        self.cluster = cluster
        self.config = config
        self.acks = config.required_acks
        self.idempotent = config.idempotent
        self._c = cluster._client()
        self._queues: dict[tuple[str, int], collections.deque[_Pending]] = {}
        self._incoming: collections.deque[tuple[str, int | None, _Pending]] = collections.deque()
        self._wake_pending = False
        self._unrouted: dict[str, list[tuple[int | None, _Pending]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._in_flight: set[tuple[str, int]] = set()
        self._seq: dict[tuple[str, int], int] = {}
        self._pid = -1
        self._epoch = -1
        self._pid_lock: asyncio.Lock | None = None
        self._sticky: dict[str, int] = {}
        self._closed = False
        self._lock = threading.Lock()
        self._outstanding: set[concurrent.futures.Future[ClusterRecordMetadata]] = set()
        self._locks: dict[tuple[str, int], asyncio.Lock] = {}

    # -- public (any thread) ---------------------------------------------------------------------

    def send(self, topic: str, value: bytes | None, key: bytes | None = None, partition: int | None = None,
             timestamp: int | None = None) -> concurrent.futures.Future[ClusterRecordMetadata]:
        if self._closed:
            raise RuntimeError("the producer is closed")
        fut: concurrent.futures.Future[ClusterRecordMetadata] = concurrent.futures.Future()
        with self._lock:
            self._outstanding.add(fut)
        fut.add_done_callback(self._forget)
        ts = timestamp if timestamp is not None else self.cluster.clock.time_ms()
        self._incoming.append((topic, partition, _Pending(value, key, ts, fut)))
        if not self._wake_pending:
            # One loop wake-up per burst of sends, not one per record.
            self._wake_pending = True
            self.cluster.loop.call_soon_threadsafe(self._take_incoming)
        return fut

    def send_batch(self, topic: str, values: Any, keys: Any = None, timestamps: Any = None,
                   partition: int | None = None, timeout: float | None = None) -> list[BatchResult]:
        """Send a column of records (values, optionally keys and timestamps: lists, NumPy or
        Arrow arrays, as :meth:`seglog.client.producer.Producer.send_batch` takes them) and return once
        every batch is acknowledged (``acks``): one :class:`~seglog.client.producer.BatchResult` per
        batch, in write order. The columns are cut into batches of up to ``max.request.size``
        (1 MiB), each encoded once and shipped whole; up to
        ``max.in.flight.requests.per.connection`` of them are in flight to a leader at once."""
        if self._closed:
            raise RuntimeError("the producer is closed")
        n = len(values)
        if keys is not None and len(keys) != n:
            raise ValueError(f"keys has {len(keys)} items, values has {n}")
        if n == 0:
            return []
        with self._lock:
            earlier = bool(self._outstanding)
        if earlier:
            # Records sent one at a time before this call are written first, as the store's
            # producer writes its lingering batches first.
            self.flush(self.config.delivery_timeout_ms / 1000 + 5)
        if timestamps is None:
            timestamps = self.cluster.clock.time_ms()
        nparts = self.cluster._call(self._partition_count(topic))
        groups: list[tuple[int, Any, Any, Any]] = []
        if partition is not None:
            if not 0 <= partition < nparts:
                raise UnknownTopicOrPartitionError(
                    f"partition {partition} of topic {topic!r} does not exist (the topic has {nparts} "
                    "partition(s))")
            groups.append((partition, values, keys, timestamps))
        elif keys is None:
            groups.append((self._sticky.setdefault(topic, 0), values, keys, timestamps))
        else:
            parts = partitions_for_keys(_as_key_list(keys), nparts)
            order, spans = group_by_partition(parts, nparts, self._sticky.setdefault(topic, 0))
            for p, a, b in spans:
                idx = order[a:b]
                groups.append((p, _take(values, idx), _take(keys, idx), _take(timestamps, idx)))
        chunks: list[tuple[int, Any, Any, Any]] = []
        limit = self.config.max_request_size
        for p, v, k, t in groups:
            per = _records_per_batch(limit, v, k)
            for a in range(0, len(v), per):
                b = min(len(v), a + per)
                chunks.append((p, _slice(v, a, b), _slice(k, a, b), _slice(t, a, b)))
        fut = asyncio.run_coroutine_threadsafe(self._ship_columns(topic, chunks), self.cluster.loop)
        try:
            return fut.result(timeout if timeout is not None else self.config.delivery_timeout_ms / 1000 + 30)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TimeoutError(f"send_batch of {n} records to {topic!r} not acknowledged in time") from None

    def _forget(self, fut: concurrent.futures.Future[ClusterRecordMetadata]) -> None:
        with self._lock:
            self._outstanding.discard(fut)

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every record sent so far is acknowledged or has failed."""
        with self._lock:
            waiting = list(self._outstanding)
        _, not_done = concurrent.futures.wait(waiting, timeout)
        if not_done:
            raise TimeoutError(f"{len(not_done)} records still unacknowledged after {timeout} s")

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.flush(self.config.delivery_timeout_ms / 1000 + 5)
        finally:
            self._closed = True
            self._c.close()

    def __enter__(self) -> ClusterProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- loop thread -----------------------------------------------------------------------------

    def _take_incoming(self) -> None:
        self._wake_pending = False
        incoming = self._incoming
        while incoming:
            topic, partition, rec = incoming.popleft()
            waiting = self._unrouted.get(topic)
            if waiting is not None:
                waiting.append((partition, rec))
            elif topic in self._c.partitions:
                self._place(topic, partition, rec)
            else:
                # One metadata lookup per unknown topic; its records wait for it, in order.
                self._unrouted[topic] = [(partition, rec)]
                task = self.cluster.loop.create_task(self._route(topic))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _route(self, topic: str) -> None:
        try:
            await self._partition_count(topic)
        except UnknownTopicOrPartitionError as exc:
            for _, rec in self._unrouted.pop(topic, []):
                rec.future.set_exception(exc)
            return
        for partition, rec in self._unrouted.pop(topic, []):
            self._place(topic, partition, rec)

    def _place(self, topic: str, partition: int | None, rec: _Pending) -> None:
        n = self._c.partitions[topic]
        if partition is None:
            if rec.key is not None:
                partition = partition_for_key(rec.key, n)
            else:
                partition = self._sticky.setdefault(topic, 0)
        tp = (topic, partition)
        self._queues.setdefault(tp, collections.deque()).append(rec)
        if tp not in self._in_flight:
            self._in_flight.add(tp)
            if self.config.linger_ms > 0:
                self.cluster.loop.call_later(self.config.linger_ms / 1000, self._start_drain, tp)
            else:
                self._start_drain(tp)

    def _start_drain(self, tp: tuple[str, int]) -> None:
        task = self.cluster.loop.create_task(self._drain(tp))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _ensure_pid(self) -> None:
        if not self.idempotent or self._pid >= 0:
            return
        if self._pid_lock is None:
            self._pid_lock = asyncio.Lock()
        async with self._pid_lock:
            while self._pid < 0:
                try:
                    ctrl = self.cluster._controller()
                    if ctrl is not None:
                        resp = await self._c.request(ctrl, InitProducerIdRequest(), 3000)
                        if isinstance(resp, InitProducerIdResponse) and resp.error == NONE:
                            self._pid, self._epoch = resp.producer_id, resp.producer_epoch
                            return
                except SeglogError:
                    pass
                await self._c.refresh_metadata()
                await asyncio.sleep(0.05)

    def _tp_lock(self, tp: tuple[str, int]) -> asyncio.Lock:
        # One sender per partition at a time (per-record batches or a send_batch shipment), so
        # that sequence numbers and order hold.
        lock = self._locks.get(tp)
        if lock is None:
            lock = self._locks[tp] = asyncio.Lock()
        return lock

    async def _drain(self, tp: tuple[str, int]) -> None:
        try:
            while self._queues.get(tp):
                await self._ensure_pid()
                async with self._tp_lock(tp):
                    queue = self._queues[tp]
                    batch: list[_Pending] = []
                    size = 0
                    while queue and (not batch or size + len(queue[0].value or b"") <= self.config.batch_size):
                        rec = queue.popleft()
                        batch.append(rec)
                        size += len(rec.value or b"") + 16
                    await self._send_batch(tp, batch)
        finally:
            self._in_flight.discard(tp)
            if self._queues.get(tp):
                self._in_flight.add(tp)
                self._start_drain(tp)

    def _encode(self, tp: tuple[str, int], values: Any, keys: Any, timestamps: Any) -> tuple[bytes, int]:
        """One batch of these records at the partition's next sequence (advanced here)."""
        if not self.idempotent:
            return encode_batch(values, keys=keys, timestamps=timestamps), -1
        seq = self._seq.get(tp, 0)
        data = encode_batch(values, keys=keys, timestamps=timestamps, producer_id=self._pid,
                            producer_epoch=self._epoch, base_sequence=seq)
        self._seq[tp] = (seq + len(values)) % 2**31
        return data, seq

    def _give_up(self, err: BaseException) -> None:
        if self.idempotent and not getattr(err, "definitely_not_written", False):
            # Kafka bumps the epoch after giving up on a batch that may be in the log.
            self._pid = -1
            self._seq.clear()

    async def _send_batch(self, tp: tuple[str, int], batch: list[_Pending]) -> None:
        data, seq = self._encode(tp, [r.value for r in batch], [r.key for r in batch],
                                 [r.timestamp for r in batch])
        try:
            resp = await self._send_encoded(tp, data)
        except SeglogError as err:
            if self.idempotent and getattr(err, "definitely_not_written", False):
                self._seq[tp] = seq  # nothing written: the next batch takes these numbers
            self._give_up(err)
            for r in batch:
                if not r.future.done():
                    r.future.set_exception(err)
            return
        for k, r in enumerate(batch):
            if not r.future.done():
                r.future.set_result(ClusterRecordMetadata(tp[0], tp[1], resp.base_offset + k))

    async def _request_once(self, tp: tuple[str, int], data: bytes, refresh: bool) -> ProduceResponse:
        """One produce request to the partition's leader; raises the error it gets."""
        leader = self._c.metadata.get(tp, (-1, -1))[0]
        if leader < 0 or refresh and self.cluster.nodes.get(leader) is None:
            await self._c.refresh_metadata()
            leader = self._c.metadata.get(tp, (-1, -1))[0]
        if leader < 0:
            raise LeaderNotAvailableError(f"{tp[0]}-{tp[1]} has no leader")
        resp = await self._c.request(
            leader, ProduceRequest(tp[0], tp[1], data, self.acks, self.config.request_timeout_ms),
            self.config.request_timeout_ms + 1000)
        if not isinstance(resp, ProduceResponse):
            raise NetworkError(f"unexpected answer {type(resp).__name__} to a produce request")
        if resp.error != NONE:
            raise error_for_code(resp.error)(resp.message)
        return resp

    async def _send_encoded(self, tp: tuple[str, int], data: bytes, first_error: BaseException | None = None
                            ) -> ProduceResponse:
        """Send one encoded batch, retrying (same bytes, so the same sequence numbers) until
        ``delivery.timeout.ms``; raises the last error when it gives up."""
        deadline = time.monotonic() + self.config.delivery_timeout_ms / 1000
        backoff = self.config.retry_backoff_ms / 1000
        last: BaseException | None = first_error
        attempts = 0
        maybe_written = False  # an earlier attempt ended in a way that may have appended
        while True:
            if last is not None:
                if not getattr(last, "definitely_not_written", False) and \
                        not isinstance(last, LeaderNotAvailableError):
                    maybe_written = True
                if isinstance(last, OutOfOrderSequenceError):
                    break  # the broker's state disagrees with ours: fatal for this batch
                if isinstance(last, NotLeaderOrFollowerError) or \
                        getattr(last, "retriable", True) or not getattr(last, "definitely_not_written", False):
                    await self._c.refresh_metadata()
                if time.monotonic() + backoff > deadline or (
                        isinstance(last, KafkaError) and not last.retriable and last.definitely_not_written):
                    break
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.config.retry_backoff_max_ms / 1000)
            attempts += 1
            try:
                return await self._request_once(tp, data, attempts > 1)
            except SeglogError as exc:
                last = exc
        if last is None:
            raise RequestTimedOutError("delivery timed out")
        if maybe_written and getattr(last, "definitely_not_written", False):
            # The last attempt was refused before appending, but an earlier one may have been
            # appended: the batch's outcome is unknown, not "not written".
            raise RequestTimedOutError(
                f"{tp[0]}-{tp[1]}: gave up after {attempts} attempts; an earlier attempt may have "
                f"been appended (last error: {last})") from last
        raise last

    async def _partition_count(self, topic: str) -> int:
        """The topic's partition count, waiting up to ``max.block.ms`` for metadata that has
        it (a topic just created reaches the nodes one by one)."""
        deadline = time.monotonic() + self.config.max_block_ms / 1000
        while topic not in self._c.partitions:
            await self._c.refresh_metadata(topic)
            if topic in self._c.partitions:
                break
            if time.monotonic() >= deadline:
                raise UnknownTopicOrPartitionError(
                    f"no topic {topic!r} in the cluster's metadata after max.block.ms="
                    f"{self.config.max_block_ms}")
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
        return self._c.partitions[topic]

    async def _ship_columns(self, topic: str, chunks: list[tuple[int, Any, Any, Any]]) -> list[BatchResult]:
        await self._ensure_pid()
        by_tp: dict[int, list[int]] = {}
        for i, (p, _, _, _) in enumerate(chunks):
            by_tp.setdefault(p, []).append(i)
        results: list[BatchResult | None] = [None] * len(chunks)
        await asyncio.gather(*(self._ship_partition((topic, p), [chunks[i] for i in idx], idx, results)
                               for p, idx in by_tp.items()))
        return [r for r in results if r is not None]

    async def _ship_partition(self, tp: tuple[str, int], chunks: list[tuple[int, Any, Any, Any]],
                              slots: list[int], results: list[BatchResult | None]) -> None:
        """Encode and send the chunks of one partition in order, a window of them in flight."""
        window = max(1, self.config.max_in_flight_requests_per_connection)
        async with self._tp_lock(tp):
            flying: collections.deque[tuple[int, bytes, int, asyncio.Task[ProduceResponse]]] = collections.deque()
            failed: BaseException | None = None
            retry: list[tuple[int, bytes, int, BaseException | None]] = []

            def settle(slot: int, n: int, resp: ProduceResponse) -> None:
                results[slot] = BatchResult(tp[0], tp[1], resp.base_offset if self.acks else -1,
                                            resp.base_offset + n - 1 if self.acks else -1, n,
                                            resp.log_append_time)

            async def retire() -> None:
                nonlocal failed
                slot, data, n, task = flying.popleft()
                try:
                    resp = await task
                except SeglogError as exc:
                    failed = failed or exc
                    retry.append((slot, data, n, exc))
                    return
                settle(slot, n, resp)

            for slot, (_, v, k, t) in zip(slots, chunks):
                if self.idempotent and self._pid < 0:
                    await self._ensure_pid()  # another partition's failure began a new epoch
                data, _ = self._encode(tp, v, k, t)
                if failed is not None:
                    retry.append((slot, data, len(v), None))
                    continue
                while len(flying) >= window:
                    await retire()
                if failed is not None:
                    retry.append((slot, data, len(v), None))
                    continue
                flying.append((slot, data, len(v),
                               asyncio.ensure_future(self._request_once(tp, data, False))))
            while flying:
                await retire()
            retry.sort(key=lambda r: r[0])
            for i, (slot, data, n, err) in enumerate(retry):
                try:
                    resp = await self._send_encoded(tp, data, None if isinstance(err, OutOfOrderSequenceError) else err)
                except SeglogError:
                    if self.idempotent:
                        # Later batches were numbered after this one: start a new epoch.
                        self._pid = -1
                        self._seq.clear()
                    raise
                settle(slot, n, resp)

class ClusterConsumer:
    """Reads committed records (below each leader's high watermark) of assigned partitions.

    With :attr:`name_leader_epoch` set, every fetch names the leader epoch the consumer's
    metadata gives (KIP-320): a leader in another epoch refuses it (the consumer refreshes its
    metadata), so each record says which leader, in which epoch, reported its HW."""

    name_leader_epoch = False

    def __init__(self, cluster: LocalCluster, config: ConsumerConfig) -> None:
        self.cluster = cluster
        self.config = config
        self._c = cluster._client()
        self._positions: dict[tuple[str, int], int] = {}
        self._closed = False

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        for tp in partitions:
            self._positions.setdefault((tp[0], tp[1]), 0)

    def subscribe(self, topics: Iterable[str]) -> None:
        self.cluster._call(self._c.refresh_metadata())
        for t in topics:
            for p in range(self._c.partitions.get(t, 0)):
                self._positions.setdefault((t, p), 0)

    def seek(self, topic: str, partition: int, offset: int) -> None:
        self._positions[(topic, partition)] = offset

    def position(self, topic: str, partition: int) -> int:
        return self._positions[(topic, partition)]

    def poll(self, timeout_ms: int = 1000, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records from the current positions; waits up to ``timeout_ms`` for any."""
        limit = max_records or self.config.max_poll_records
        return list(self.cluster._call(self._poll(timeout_ms, limit), timeout_ms / 1000 + 30))

    async def _poll(self, timeout_ms: int, limit: int) -> list[ConsumerRecord]:
        deadline = time.monotonic() + timeout_ms / 1000
        out: list[ConsumerRecord] = []
        while True:
            by_leader: dict[int, list[tuple[str, int]]] = {}
            missing = False
            for tp in self._positions:
                leader = self._c.metadata.get(tp, (-1, -1))[0]
                if leader < 0:
                    missing = True
                else:
                    by_leader.setdefault(leader, []).append(tp)
            if missing or not by_leader:
                await self._c.refresh_metadata()
            wait = max(0, min(self.config.fetch_max_wait_ms, int((deadline - time.monotonic()) * 1000)))
            named = self.name_leader_epoch
            for leader, tps in by_leader.items():
                epochs = {tp: self._c.metadata.get(tp, (-1, -1))[1] if named else -1 for tp in tps}
                req = FetchRequest(CONSUMER_REPLICA_ID, tuple(
                    FetchPartition(t, p, self._positions[(t, p)], current_leader_epoch=epochs[(t, p)],
                                   max_bytes=self.config.max_partition_fetch_bytes)
                    for t, p in tps), max_wait_ms=wait, min_bytes=self.config.fetch_min_bytes,
                    max_bytes=self.config.fetch_max_bytes)
                try:
                    resp = await self._c.request(leader, req, self.config.request_timeout_ms)
                except SeglogError:
                    await self._c.refresh_metadata()
                    continue
                if not isinstance(resp, FetchResponse):
                    continue
                for pr in resp.partitions:
                    tp = (pr.topic, pr.partition)
                    if pr.error != NONE:
                        await self._c.refresh_metadata()
                        continue
                    if not pr.records:
                        continue
                    pos = self._positions[tp]
                    served_epoch = epochs.get(tp, -1)
                    served_by = leader if served_epoch >= 0 else -1
                    for r in decode_records(pr.records):
                        if r.offset < pos or len(out) >= limit:
                            continue
                        out.append(ConsumerRecord(tp[0], tp[1], r.offset, r.timestamp, r.key, r.value,
                                                  r.leader_epoch, pr.high_watermark, served_by, served_epoch))
                        self._positions[tp] = r.offset + 1
            if out or time.monotonic() >= deadline:
                return out
            await asyncio.sleep(0.01)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._c.close()

    def __enter__(self) -> ClusterConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
