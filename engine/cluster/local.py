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
loop, thread, transport and scheduler of its own instead (producers and consumers stay on
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

The nodes talk to each other over Kafka's protocol, each on its inter-broker listener
(:mod:`seglog.cluster.kafka_transport`); ``ssl=(server context, client context)`` puts them on
TLS and ``secret`` makes them authenticate with SASL/SCRAM-SHA-256 (the secret as password).

To run every node as its own ``seglog node`` process instead, start the cluster with
``seglog.cluster.start_cluster(..., coordinator="zookeeper", processes=True)``: a
:class:`seglog.cluster.process.ProcessCluster`, with kill/terminate/restart/pause by PID and
:meth:`~seglog.cluster.process.ProcessCluster.info` (each node's PID, port, log directory).

Every node also has a Kafka listener (:mod:`seglog.cluster.kafka_listener`) for Kafka clients:
:attr:`LocalCluster.bootstrap_servers` lists them (``kafka_listeners[i]`` is node ``i``'s); a
killed node's listener closes with it and a restarted one listens on the same port again.
``kafka_options`` secures them (``security_protocol``, ``ssl_context``, ``sasl_mechanisms``,
``users``, as :meth:`seglog.Store.serve` takes them).

Producers and consumers made here (:mod:`seglog.cluster.producer`,
:mod:`seglog.cluster.consumer`) are thread-safe; they speak Kafka's protocol to the nodes' Kafka
listeners (:attr:`LocalCluster.bootstrap_servers`) from the cluster's loop. The admin methods
(:meth:`~LocalCluster.create_topic`, :meth:`~LocalCluster.elect_preferred_leader`,
:meth:`~LocalCluster.delete_records`, :meth:`~LocalCluster.watermarks`) are Kafka requests
too (CreateTopics, ElectLeaders, DeleteRecords, ListOffsets). ``client_config``: the Kafka
client settings they use when ``kafka_options`` asks for SASL (``security.protocol``
SASL_PLAINTEXT, ``sasl.mechanism`` PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, ``sasl.username``,
``sasl.password``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import hashlib
import logging
import os
import shutil
import threading
import time
from collections.abc import Mapping
from typing import Any

from seglog.cluster.base import ClusterBase
from seglog.cluster.consumer import ClusterConsumer
from seglog.cluster.coordinator import InMemoryCoordinator
from seglog.cluster.kafka_listener import NodeKafkaListener
from seglog.cluster.kafka_transport import KafkaTransport, node_security
from seglog.cluster.metadata import ReplicaConfig
from seglog.cluster.netloop import LoopScheduler
from seglog.cluster.network import client_security, cluster_kafka_client, topic_config_strings
from seglog.cluster.node import ReplicaNode
from seglog.cluster.producer import ClusterProducer
from seglog.cluster.transport import GuardedScheduler
from seglog.cluster.zkserver import ZooKeeperServer
from seglog.cluster.zookeeper import ZooKeeperCoordinator, ensure_chroot
from seglog.errors import KafkaError
from seglog.kafka.client import KafkaClient
from seglog.util.clock import Clock
from seglog.util.loop import LoopOwner

log = logging.getLogger("seglog.cluster.local")


class LocalCluster(LoopOwner, ClusterBase):
    """``nodes`` replica nodes in this process over loopback TCP (see module docs)."""

    _what = "cluster"

    def __init__(
        self,
        nodes: int = 3,
        dir: str | os.PathLike[str] | None = None,
        coordinator: str = "memory",
        *,
        replica_config: ReplicaConfig | Mapping[str, Any] | None = None,
        log_defaults: Mapping[str, Any] | None = None,
        secret: bytes | str | None = None,
        ssl: Any = None,
        host: str = "127.0.0.1",
        processes: bool = False,
        zookeeper: str | None = None,
        log_dirs: int = 1,
        node_threads: bool = False,
        kafka_options: Mapping[str, Any] | None = None,
        client_config: Mapping[str, Any] | None = None,
    ) -> None:
        if coordinator not in ("memory", "zookeeper"):
            raise ValueError(f"coordinator {coordinator!r} is not available: 'memory' or 'zookeeper'")
        if processes:
            raise ValueError(
                "LocalCluster runs every node in this process; for one process per node "
                "use seglog.cluster.start_cluster(..., processes=True) "
                "(a seglog.cluster.process.ProcessCluster)"
            )
        self._client_security = client_security(client_config)  # a bad setting fails before anything starts
        self._lay_out(nodes, dir, replica_config, log_defaults, host, log_dirs, "seglog-cluster-")
        self._cluster_id = "seglog-" + hashlib.sha256(os.path.abspath(self.dir).encode()).hexdigest()[:16]
        self.zk_server: Any = None
        if coordinator == "zookeeper" and zookeeper is None:
            self.zk_server = ZooKeeperServer().start()
            zookeeper = self.zk_server.connect_string
        self.clock = Clock()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="seglog-cluster", daemon=True)
        self._thread.start()
        self._closed = False
        server_ssl = client_ssl = None
        if ssl is not None:
            server_ssl, client_ssl = ssl
        self.nodes: dict[int, ReplicaNode | None] = dict.fromkeys(self.ids)
        self._gs: dict[int, GuardedScheduler] = {}
        self._paused: set[int] = set()
        self._ports: dict[int, int] = {}
        #: Each node's Kafka listener (Kafka clients' way in) and its port, kept across restarts.
        self.kafka_listeners: dict[int, NodeKafkaListener] = {}
        #: The Kafka listeners' security (``security_protocol``, ``ssl_context``,
        #: ``sasl_mechanisms``, ``users``: :class:`seglog.kafka.security.ListenerSecurity`).
        self._kafka_options = dict(kafka_options or {})
        self._kafka_ports: dict[int, int] = {}
        self._secret = secret
        # Checkpoint files (and their fsyncs) are written here, not on the loop, so a slow fsync
        # does not stall every node's requests.
        self._io = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="seglog-cluster-io")
        # With node_threads every node has a loop (and a thread, a transport, a scheduler) of its
        # own; without, they all use the cluster's loop, transport and scheduler.
        self.node_threads = node_threads
        self._node_loops: dict[int, asyncio.AbstractEventLoop] = {}
        self._node_threads: dict[int, threading.Thread] = {}
        self._transports: dict[int, KafkaTransport] = {}
        self._schedulers: dict[int, LoopScheduler] = {}

        def make_transport(loop: asyncio.AbstractEventLoop) -> KafkaTransport:
            return KafkaTransport(loop, client_ssl=client_ssl, **node_security(secret, server_ssl))

        self.transport = make_transport(self.loop)
        self.scheduler = LoopScheduler(self.loop, self.clock)
        for i in self.ids:
            if node_threads:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=self._run_loop, args=(loop,), name=f"seglog-node-{i}", daemon=True)
                thread.start()
                t = make_transport(loop)
                t.addresses = self.transport.addresses  # one address book for every node
                self._node_loops[i], self._node_threads[i] = loop, thread
                self._transports[i], self._schedulers[i] = t, LoopScheduler(loop, self.clock)
            else:
                self._node_loops[i], self._transports[i], self._schedulers[i] = (
                    self.loop,
                    self.transport,
                    self.scheduler,
                )

        async def setup() -> None:
            if zookeeper is not None:
                ensure_chroot(zookeeper)

                self.coordinator: Any = ZooKeeperCoordinator(
                    zookeeper,
                    post=self.loop.call_soon_threadsafe,
                    session_timeout_ms=self.replica_config.session_timeout_ms,
                )
            else:
                self.coordinator = InMemoryCoordinator(
                    self.clock,
                    self.scheduler,  # type: ignore[arg-type]
                    session_timeout_ms=self.replica_config.session_timeout_ms,
                )

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

    async def _start_node(self, i: int) -> None:
        """On node ``i``'s loop: start it (from its directory)."""
        gs = GuardedScheduler(self._schedulers[i])  # type: ignore[arg-type]
        self._gs[i] = gs
        port = self._ports.get(i, 0)
        transport = self._transports[i]
        coordinator = (
            self.coordinator
            if not self.node_threads
            else _NodeCoordinator(self.coordinator, self._node_loops[i].call_soon_threadsafe)
        )
        node = ReplicaNode(
            i,
            self.node_dirs(i),
            coordinator=coordinator,
            transport=transport,
            clock=self.clock,
            scheduler=gs,
            config=self.replica_config,
            log_defaults=self.log_defaults,
            coordinator_reachable=functools.partial(self._reachable, i),
        )
        host, port = await transport.listen(i, node.handle, self.host, port, topics=node.known_topics)
        self._ports[i] = port
        node.address = f"{host}:{port}"
        node.security_protocol = transport.security_protocol
        # The Kafka listener first: the node registers its address.
        kafka = NodeKafkaListener(
            node, self.host, self._kafka_ports.get(i, 0), cluster_id=self._cluster_id, **self._kafka_options
        )
        await kafka.start()
        self._kafka_ports[i] = kafka.port
        self.kafka_listeners[i] = kafka
        node.kafka_address = kafka.bootstrap_servers
        node.kafka_security_protocol = kafka.security.protocol
        node.offload = self._io.submit
        self.nodes[i] = node
        node.start()

    async def _stop_kafka(self, i: int) -> None:
        """On node ``i``'s loop: close its Kafka listener and every client connection of it."""
        kafka = self.kafka_listeners.pop(i, None)
        if kafka is not None:
            await kafka.close()

    @property
    def bootstrap_servers(self) -> str:
        """``host:port,...`` of the nodes' Kafka listeners (for any Kafka client)."""
        return ",".join(f"{self.host}:{self._kafka_ports[i]}" for i in self.ids if i in self._kafka_ports)

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
            # In one process a ZooKeeper session outlives the node; end it as a dead
            # process's would end (at once rather than after the timeout).
            if (
                self.zk_server is not None or not isinstance(self.coordinator, InMemoryCoordinator)
            ) and n.session is not None:
                n.session.close()
            self.nodes[node] = None

        self._on_node(node, stop)
        self._on_node_loop(node, self._stop_kafka(node))

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
            kafka = self.kafka_listeners.get(node)
            if kafka is not None:
                kafka.pause()
            self._node_loops[node].call_later(seconds, thaw)

        def thaw() -> None:
            if node not in self._paused:
                return
            self._paused.discard(node)
            self._transports[node].resume(node)
            self._gs[node].resume()
            kafka = self.kafka_listeners.get(node)
            if kafka is not None:
                kafka.resume()

        self._on_node(node, freeze)

    def close(self) -> None:
        """Shut every node down cleanly and stop the loop (a directory made by the cluster is
        removed)."""
        if self._closed:
            return
        coordinator = getattr(self, "coordinator", None)

        async def down_node(i: int) -> None:
            await self._stop_kafka(i)
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
            for loop, _thread in loops:
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

    def _client(self) -> KafkaClient:
        return cluster_kafka_client(self.bootstrap_servers.split(","), *self._client_security)

    def _admin(self, op: Any, timeout_s: float) -> Any:
        """Run ``op(client)`` with a Kafka client of the cluster made for it, on the loop."""

        async def run() -> Any:
            client = self._client()
            try:
                return await op(client)
            finally:
                await client.close()

        return self._call(run(), timeout_s)

    def _request_topic(
        self, name: str, partitions: int, replication_factor: int, config: Mapping[str, Any] | None, timeout_s: float
    ) -> None:
        self.wait_for(lambda: self._controller() is not None, timeout_s, "a controller")
        configs = topic_config_strings(config)
        timeout_ms = int(timeout_s * 1000)
        self._admin(
            lambda c: c.create_topic(name, partitions, replication_factor, configs, timeout_ms=timeout_ms),
            timeout_s + 30,
        )

    def _is_led(self, topic: str, partition: int) -> bool:
        """The state names a leader and that node's replica leads already."""
        return (
            (st := self._state(topic, partition)) is not None
            and st.leader >= 0
            and (n := self.nodes.get(st.leader)) is not None
            and (q := n.partitions.get((topic, partition))) is not None
            and q.is_leader
        )

    def elect_preferred_leader(self, topic: str, partition: int = 0) -> int:
        """ElectLeaders (preferred) for the partition; returns the leader the controller wrote,
        or raises its error (``ElectionNotNeededError``...)."""
        self._admin(lambda c: c.elect_preferred_leader(topic, partition), 60)
        st = self._state(topic, partition)
        return -1 if st is None else st.leader

    def delete_records(self, topic: str, partition: int, offset: int, *, timeout_ms: int = 30_000) -> int:
        """DeleteRecords: records of ``topic``-``partition`` below ``offset`` (-1: the high
        watermark) are deleted on the leader at once; returns the low watermark once every live
        replica has moved its log start there. Raises ``OffsetOutOfRangeError`` above the high
        watermark, ``RequestTimedOutError`` after ``timeout_ms`` (its ``offset``: the low
        watermark reached)."""
        return int(
            self._admin(
                lambda c: c.delete_records(topic, partition, offset, timeout_ms=timeout_ms), timeout_ms / 1000 + 30
            )
        )

    def watermarks(self, topic: str, partition: int = 0) -> tuple[int, int, int] | None:
        """``(log start, high watermark, low watermark)`` of the partition, from its leader now
        (None when no leader answers); the low watermark is -1 until every live follower has
        fetched from the current leader."""
        try:
            result: tuple[int, int, int] = self._admin(lambda c: c.watermarks(topic, partition), 60)
        except KafkaError:
            return None
        return result

    def producer(self, **config: Any) -> ClusterProducer:
        """A producer; keywords are Kafka producer keys with '_' for '.' (``acks="all"``,
        ``linger_ms=5``, ``enable_idempotence=True``, ``delivery_timeout_ms=...``)."""
        return ClusterProducer.from_keywords(self, **config)

    def consumer(self, **config: Any) -> ClusterConsumer:
        """A consumer reading committed records from the leaders (``fetch_max_wait_ms=...``,
        ``max_poll_records=...``)."""
        return ClusterConsumer.from_keywords(self, **config)


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
