"""A whole replicated cluster in one process, over loopback TCP — for integration tests and
demos.

>>> from seglog.cluster import LocalCluster
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

Each node is a :class:`~seglog.replication.node.ReplicaNode` with its own log directory under
``dir`` and its own TCP port; they share an in-memory coordinator (``coordinator="memory"``)
and one asyncio event loop on a background thread. :meth:`LocalCluster.kill` drops a node
as a killed process (sockets closed, logs abandoned unflushed); :meth:`LocalCluster.restart`
brings it back from its directory; :meth:`LocalCluster.pause` freezes it for a while (its
timers and requests wait, its coordinator session may expire) as SIGSTOP would.

With ``coordinator="zookeeper"`` the nodes (still in this process) coordinate through a real
ZooKeeper server: ``zookeeper="host:port[/chroot]"``, or one the cluster starts and stops
(:mod:`seglog.testing.zookeeper`). There :meth:`kill` also ends the node's session at once (a
dead process's session would expire after the timeout), and :meth:`pause` cannot stop kazoo's
pings, so a paused node keeps its session.

``processes=True`` (with ``coordinator="zookeeper"``) runs every node as its own
``seglog node`` process instead: :class:`seglog.process_cluster.ProcessCluster`, with
kill/terminate/restart/pause by PID and :meth:`~seglog.process_cluster.ProcessCluster.info`
(each node's PID, port, log directory).

Producers and consumers made here are thread-safe; their requests run on the cluster's loop.
"""

from __future__ import annotations

import asyncio
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

from seglog.clock import Clock
from seglog.config import ConsumerConfig, ProducerConfig
from seglog.errors import (
    KafkaError,
    LeaderNotAvailableError,
    NotLeaderOrFollowerError,
    OutOfOrderSequenceError,
    RequestTimedOutError,
    SeglogError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from seglog.partitioner import partition_for_key
from seglog.records import decode_records, encode_batch
from seglog.replication.coordinator import InMemoryCoordinator
from seglog.replication.messages import (
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
from seglog.replication.metadata import PartitionState, ReplicaConfig, state_path
from seglog.replication.node import ReplicaNode
from seglog.replication.tcp import LoopScheduler, TcpTransport
from seglog.replication.transport import GuardedScheduler

log = logging.getLogger("seglog.cluster")

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
class RecordMetadata:
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


class LocalCluster:
    """``nodes`` replica nodes in this process over loopback TCP (see module docs)."""

    def __new__(cls, *args: Any, processes: bool = False, **kwargs: Any) -> LocalCluster:
        if processes and cls is LocalCluster:
            from seglog.process_cluster import ProcessCluster

            return object.__new__(ProcessCluster)
        return object.__new__(cls)

    def __init__(self, nodes: int = 3, dir: str | os.PathLike[str] | None = None,
                 coordinator: str = "memory", *, replica_config: ReplicaConfig | Mapping[str, Any] | None = None,
                 log_defaults: Mapping[str, Any] | None = None, secret: bytes | str | None = None,
                 ssl: Any = None, host: str = "127.0.0.1", processes: bool = False,
                 zookeeper: str | None = None) -> None:
        if coordinator not in ("memory", "zookeeper"):
            raise ValueError(f"coordinator {coordinator!r} is not available: 'memory' or 'zookeeper'")
        if processes:
            raise ValueError("processes=True is served by seglog.process_cluster.ProcessCluster")
        self.zk_server: Any = None
        if coordinator == "zookeeper" and zookeeper is None:
            from seglog.testing.zookeeper import ZooKeeperServer

            self.zk_server = ZooKeeperServer().start()
            zookeeper = self.zk_server.connect_string
        if nodes < 1:
            raise ValueError(f"a cluster needs at least one node, got {nodes}")
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

        async def setup() -> None:
            self.transport = TcpTransport(self.loop, secret=secret, server_ssl=server_ssl, client_ssl=client_ssl)
            self.scheduler = LoopScheduler(self.loop, self.clock)
            if zookeeper is not None:
                from seglog.replication.zookeeper import ZooKeeperCoordinator, ensure_chroot

                ensure_chroot(zookeeper)

                self.coordinator: Any = ZooKeeperCoordinator(
                    zookeeper, post=self.loop.call_soon_threadsafe,
                    session_timeout_ms=self.replica_config.session_timeout_ms)
            else:
                self.coordinator = InMemoryCoordinator(self.clock, self.scheduler,  # type: ignore[arg-type]
                                                       session_timeout_ms=self.replica_config.session_timeout_ms)
            for i in self.ids:
                await self._start_node(i)

        self._call(setup())
        self.wait_for(lambda: self._controller() is not None, 10, "a controller")

    # -- the loop ------------------------------------------------------------------------------

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def _call(self, coro: Any, timeout: float | None = 60) -> Any:
        if self._closed:
            raise RuntimeError("the cluster is closed")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def _on_loop(self, fn: Any, *args: Any) -> Any:
        async def run() -> Any:
            return fn(*args)
        return self._call(run())

    def wait_for(self, predicate: Any, timeout_s: float = 30, what: str = "a condition") -> None:
        deadline = time.monotonic() + timeout_s
        while not self._on_loop(predicate):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not reached within {timeout_s} s")
            time.sleep(0.02)

    # -- nodes ---------------------------------------------------------------------------------

    def node_dir(self, i: int) -> str:
        return os.path.join(self.dir, f"node-{i}")

    async def _start_node(self, i: int) -> None:
        gs = GuardedScheduler(self.scheduler)  # type: ignore[arg-type]
        self._gs[i] = gs
        port = self._ports.get(i, 0)
        node = ReplicaNode(i, self.node_dir(i), coordinator=self.coordinator, transport=self.transport,
                           clock=self.clock, scheduler=gs, config=self.replica_config,
                           log_defaults=self.log_defaults,
                           coordinator_reachable=functools.partial(self._reachable, i))
        host, port = await self.transport.listen(i, node.handle, self.host, port)
        self._ports[i] = port
        node.address = f"{host}:{port}"
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

        self._on_loop(stop)

    def restart(self, node: int) -> None:
        """Start ``node`` again from its directory (after :meth:`kill`, or kill it first)."""
        if self.nodes.get(node) is not None:
            self.kill(node)
        self._call(self._start_node(node))

    def pause(self, node: int, seconds: float) -> None:
        """Freeze ``node`` for ``seconds`` (returns at once): its timers and incoming requests
        wait, it cannot reach the coordinator, as a SIGSTOPped process."""
        self._node(node)

        def freeze() -> None:
            self._paused.add(node)
            self._gs[node].paused = True
            self.transport.pause(node)
            self.loop.call_later(seconds, thaw)

        def thaw() -> None:
            if node not in self._paused:
                return
            self._paused.discard(node)
            self.transport.resume(node)
            self._gs[node].resume()

        self._on_loop(freeze)

    def close(self) -> None:
        """Shut every node down cleanly and stop the loop (a directory made by the cluster is
        removed)."""
        if self._closed:
            return

        async def down() -> None:
            for i, n in self.nodes.items():
                if n is not None:
                    self._gs[i].kill()
                    n.shutdown(deregister=not isinstance(self.coordinator, InMemoryCoordinator))
            self.coordinator.close()
            await self.transport.close()

        try:
            self._call(down())
        finally:
            self._closed = True
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=10)
            if not self._thread.is_alive():
                self.loop.close()
            if self.zk_server is not None:
                self.zk_server.stop()
            if self._own_dir:
                shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- metadata ------------------------------------------------------------------------------

    def _controller(self) -> int | None:
        for i, n in self.nodes.items():
            if n is not None and n.controller is not None and n.controller.active:
                return i
        return None

    def _state(self, topic: str, partition: int) -> PartitionState | None:
        r = self.coordinator.read(state_path(topic, partition))
        return None if r is None else PartitionState.from_json(r[0], r[1].version)

    def leader(self, topic: str, partition: int = 0) -> int | None:
        """The node leading ``topic``-``partition`` now, or None (offline, or an election is
        under way)."""
        st = self._on_loop(self._state, topic, partition)
        return None if st is None or st.leader < 0 else st.leader

    def isr(self, topic: str, partition: int = 0) -> list[int]:
        st = self._on_loop(self._state, topic, partition)
        return [] if st is None else list(st.isr)

    def state(self, topic: str, partition: int = 0) -> PartitionState | None:
        st: PartitionState | None = self._on_loop(self._state, topic, partition)
        return st

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

    async def refresh_metadata(self) -> None:
        """Fresh metadata from the first node that answers; concurrent callers share one
        round of requests."""
        if self._meta_in_flight:
            fut: asyncio.Future[None] = self.cluster.loop.create_future()
            self._meta_waiters.append(fut)
            await fut
            return
        self._meta_in_flight = True
        try:
            await self._refresh_metadata()
        finally:
            self._meta_in_flight = False
            waiters, self._meta_waiters = self._meta_waiters, []
            for w in waiters:
                if not w.done():
                    w.set_result(None)

    async def _refresh_metadata(self) -> None:
        for dst in self._live():
            try:
                resp = await self.request(dst, MetadataRequest(), 3000)
            except SeglogError:
                continue
            if isinstance(resp, MetadataResponse):
                self.cluster._learn(resp)
            if isinstance(resp, MetadataResponse) and resp.partitions:
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
    future: concurrent.futures.Future[RecordMetadata]


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
        self._queues: dict[tuple[str, int], list[_Pending]] = {}
        self._in_flight: set[tuple[str, int]] = set()
        self._seq: dict[tuple[str, int], int] = {}
        self._pid = -1
        self._epoch = -1
        self._pid_lock: asyncio.Lock | None = None
        self._sticky: dict[str, int] = {}
        self._closed = False
        self._lock = threading.Lock()
        self._outstanding: set[concurrent.futures.Future[RecordMetadata]] = set()

    # -- public (any thread) ---------------------------------------------------------------------

    def send(self, topic: str, value: bytes | None, key: bytes | None = None, partition: int | None = None,
             timestamp: int | None = None) -> concurrent.futures.Future[RecordMetadata]:
        if self._closed:
            raise RuntimeError("the producer is closed")
        fut: concurrent.futures.Future[RecordMetadata] = concurrent.futures.Future()
        with self._lock:
            self._outstanding.add(fut)
        fut.add_done_callback(self._forget)
        ts = timestamp if timestamp is not None else self.cluster.clock.time_ms()
        self.cluster.loop.call_soon_threadsafe(self._enqueue, topic, partition, _Pending(value, key, ts, fut))
        return fut

    def send_batch(self, topic: str, values: Sequence[bytes | None], partition: int | None = None
                   ) -> list[concurrent.futures.Future[RecordMetadata]]:
        return [self.send(topic, v, partition=partition) for v in values]

    def _forget(self, fut: concurrent.futures.Future[RecordMetadata]) -> None:
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

    def _enqueue(self, topic: str, partition: int | None, rec: _Pending) -> None:
        self.cluster.loop.create_task(self._route(topic, partition, rec))

    async def _route(self, topic: str, partition: int | None, rec: _Pending) -> None:
        if topic not in self._c.partitions:
            # As Kafka's producer: wait up to max.block.ms for metadata naming the topic (a node
            # may not have heard of a topic created a moment ago).
            deadline = time.monotonic() + self.config.max_block_ms / 1000
            while True:
                await self._c.refresh_metadata()
                if topic in self._c.partitions:
                    break
                if time.monotonic() >= deadline:
                    rec.future.set_exception(UnknownTopicOrPartitionError(
                        f"no topic {topic!r} in the cluster's metadata after max.block.ms="
                        f"{self.config.max_block_ms}"))
                    return
                await asyncio.sleep(self.config.retry_backoff_ms / 1000)
        n = self._c.partitions[topic]
        if partition is None:
            if rec.key is not None:
                partition = partition_for_key(rec.key, n)
            else:
                partition = self._sticky.setdefault(topic, 0)
        tp = (topic, partition)
        self._queues.setdefault(tp, []).append(rec)
        if tp not in self._in_flight:
            self._in_flight.add(tp)
            if self.config.linger_ms > 0:
                await asyncio.sleep(self.config.linger_ms / 1000)
            self.cluster.loop.create_task(self._drain(tp))

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

    async def _drain(self, tp: tuple[str, int]) -> None:
        try:
            while self._queues.get(tp):
                await self._ensure_pid()
                queue = self._queues[tp]
                batch: list[_Pending] = []
                size = 0
                while queue and (not batch or size + len(queue[0].value or b"") <= self.config.batch_size):
                    rec = queue.pop(0)
                    batch.append(rec)
                    size += len(rec.value or b"") + 16
                await self._send_batch(tp, batch)
        finally:
            self._in_flight.discard(tp)
            if self._queues.get(tp):
                self._in_flight.add(tp)
                self.cluster.loop.create_task(self._drain(tp))

    async def _send_batch(self, tp: tuple[str, int], batch: list[_Pending]) -> None:
        seq = self._seq.get(tp, 0)
        kw: dict[str, Any] = {}
        if self.idempotent:
            kw = {"producer_id": self._pid, "producer_epoch": self._epoch, "base_sequence": seq}
        data = encode_batch([r.value for r in batch], keys=[r.key for r in batch],
                            timestamps=[r.timestamp for r in batch], **kw)
        deadline = time.monotonic() + self.config.delivery_timeout_ms / 1000
        backoff = self.config.retry_backoff_ms / 1000
        last: BaseException | None = None
        attempts = 0
        maybe_written = False  # an earlier attempt ended in a way that may have appended
        while True:
            attempts += 1
            if last is not None and not getattr(last, "definitely_not_written", False) and \
                    not isinstance(last, LeaderNotAvailableError):
                maybe_written = True
            leader = self._c.metadata.get(tp, (-1, -1))[0]
            if leader < 0 or self.cluster.nodes.get(leader) is None and attempts > 1:
                await self._c.refresh_metadata()
                leader = self._c.metadata.get(tp, (-1, -1))[0]
            if leader < 0:
                last = LeaderNotAvailableError(f"{tp[0]}-{tp[1]} has no leader")
            else:
                try:
                    resp = await self._c.request(
                        leader, ProduceRequest(tp[0], tp[1], data, self.acks, self.config.request_timeout_ms),
                        self.config.request_timeout_ms + 1000)
                except SeglogError as exc:
                    resp, last = None, exc
                if isinstance(resp, ProduceResponse):
                    if resp.error == NONE:
                        if self.idempotent:
                            self._seq[tp] = (seq + len(batch)) % 2**31
                        for k, r in enumerate(batch):
                            if not r.future.done():
                                r.future.set_result(RecordMetadata(tp[0], tp[1], resp.base_offset + k))
                        return
                    last = error_for_code(resp.error)(resp.message)
                    if isinstance(last, OutOfOrderSequenceError):
                        break  # the broker's state disagrees with ours: fatal for this batch
            if isinstance(last, NotLeaderOrFollowerError) or last is None or \
                    getattr(last, "retriable", True) or not getattr(last, "definitely_not_written", False):
                await self._c.refresh_metadata()
            if time.monotonic() + backoff > deadline or (
                    isinstance(last, KafkaError) and not last.retriable and last.definitely_not_written):
                break
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.config.retry_backoff_max_ms / 1000)
        err = last or RequestTimedOutError("delivery timed out")
        if maybe_written and getattr(err, "definitely_not_written", False):
            # The last attempt was refused before appending, but an earlier one may have been
            # appended: the outcome of the batch is unknown, not "not written".
            err = RequestTimedOutError(
                f"{tp[0]}-{tp[1]}: gave up after {attempts} attempts; an earlier attempt may have "
                f"been appended (last error: {err})")
            err.__cause__ = last
        if self.idempotent and not getattr(err, "definitely_not_written", False):
            # Kafka bumps the epoch after giving up on a batch that may be in the log.
            self._pid = -1
            self._seq.clear()
        for r in batch:
            if not r.future.done():
                r.future.set_exception(err)


class ClusterConsumer:
    """Reads committed records (below each leader's high watermark) of assigned partitions."""

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
            for leader, tps in by_leader.items():
                req = FetchRequest(CONSUMER_REPLICA_ID, tuple(
                    FetchPartition(t, p, self._positions[(t, p)], max_bytes=self.config.max_partition_fetch_bytes)
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
                    for r in decode_records(pr.records):
                        if r.offset < pos or len(out) >= limit:
                            continue
                        out.append(ConsumerRecord(tp[0], tp[1], r.offset, r.timestamp, r.key, r.value))
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
