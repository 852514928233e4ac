"""A cluster of node processes on loopback with ZooKeeper coordination:
``start_cluster(coordinator="zookeeper", processes=True)`` returns a :class:`ProcessCluster`.

>>> from seglog.cluster import start_cluster
>>> with start_cluster(nodes=3, coordinator="zookeeper", processes=True) as cluster:  # doctest: +SKIP
...     cluster.create_topic("orders", partitions=1, replication_factor=3,
...                          config={"min.insync.replicas": 2})
...     leader = cluster.leader("orders")
...     print(cluster.info()[leader])        # NodeInfo(node_id, pid, host, port, data_dir, ...)
...     cluster.kill(leader)                 # SIGKILL by PID; its ZooKeeper session expires
...     cluster.restart(leader)              # the same id, port and log directory
...     cluster.terminate(0)                 # SIGTERM: controlled shutdown, clean-shutdown marker
...     cluster.pause(1, 5.0)                # SIGSTOP now, SIGCONT in 5 s

Each node is ``python -m seglog.cli node --config <dir>/node-N.properties`` (see
:mod:`seglog.cluster.server`), its own process group, with its log directory
``<dir>/node-N`` (``log_dirs=K``: also ``<dir>/node-N.dir1`` .. ``.dirK-1``, as ``log.dirs``),
its output in ``<dir>/node-N.log`` and a loopback port fixed for the cluster's
life (a restarted node comes back on the same one). Without ``zookeeper=`` (a connect string)
the cluster starts its own ZooKeeper server (:mod:`seglog.cluster.zkserver`) and stops it at
:meth:`close`; with one, a chroot (``host:port/some/path``) keeps clusters sharing a server
apart, and is created when missing. Timers default to :data:`seglog.cluster.base.LOCAL_REPLICA_CONFIG` (3 s sessions);
``node_config`` adds or overrides any broker property of every node, ``node_configs`` (by node id)
or :meth:`~ProcessCluster.set_node_config` of one (e.g. ``advertised.listeners`` through a proxy).
``secret`` puts the listener between nodes on SASL_PLAINTEXT: the nodes authenticate to each
other with SCRAM-SHA-256 as :data:`~seglog.cluster.kafka_transport.NODE_SASL_USER`, the secret
as password (as :class:`~seglog.cluster.local.LocalCluster`'s ``secret``; the properties files,
which then hold it, are readable by their owner only). TLS between nodes is set with broker
properties in ``node_config`` (``listener.security.protocol.map``, ``ssl.*``): ``ssl=`` takes
``SSLContext`` objects, which a process cannot be handed.

Leader, ISR and partition state are read from ZooKeeper (the source of truth); producers,
consumers and topic creation go through a :class:`seglog.cluster.client.ClusterClient` bootstrapped from
every node's Kafka listener (``client_config``: Kafka client settings for listeners that want
SASL, as :class:`~seglog.cluster.local.LocalCluster` takes them). Processes are only ever signalled by the PIDs this object started.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import signal
import ssl as ssl_module
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from seglog.cluster import kafka_messages
from seglog.cluster.base import ClusterBase
from seglog.cluster.client import ClusterClient
from seglog.cluster.consumer import ClusterConsumer
from seglog.cluster.kafka_transport import NODE_SASL_MECHANISM, NODE_SASL_USER
from seglog.cluster.messages import CreateTopicRequest, CreateTopicResponse, MetadataRequest, MetadataResponse
from seglog.cluster.metadata import CONTROLLER_PATH, ReplicaConfig, broker_path, loads
from seglog.cluster.network import client_security
from seglog.cluster.producer import ClusterProducer
from seglog.cluster.server import check_listener_security, node_transport_options, parse_listener, split_listeners
from seglog.cluster.zkserver import ZooKeeperServer
from seglog.cluster.zookeeper import ZooKeeperCoordinator, ensure_chroot
from seglog.config import BrokerConfig
from seglog.config.properties import format_properties
from seglog.errors import KafkaError, NotControllerError, error_for_code
from seglog.kafka.client import BrokerConnection
from seglog.kafka.security import is_security_key
from seglog.util.ports import free_port
from seglog.util.processes import wait_or_kill_group


@dataclasses.dataclass(frozen=True, slots=True)
class NodeInfo:
    """Where one node process lives (what a fault injector needs)."""

    node_id: int
    pid: int | None  # None while the node is not running
    host: str
    port: int
    data_dir: str
    config_path: str
    log_path: str
    running: bool
    paused: bool

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def _node_password(secret: bytes | str | None) -> str | None:
    """``secret`` as the SCRAM password of the nodes' user (text; bytes must be UTF-8)."""
    if secret is None:
        return None
    if not isinstance(secret, str):
        try:
            secret = bytes(secret).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"secret= must be text or UTF-8 bytes (it becomes the nodes' SCRAM password): byte {exc.start} is not"
            ) from None
    if not secret:
        raise ValueError("secret= is empty: give the nodes a password, or None for no SASL between them")
    return secret


def _jaas_quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class ProcessCluster(ClusterBase):
    """``nodes`` node processes and a ZooKeeper server (see module docs)."""

    def __init__(
        self,
        nodes: int = 3,
        dir: str | os.PathLike[str] | None = None,
        coordinator: str = "zookeeper",
        *,
        replica_config: ReplicaConfig | Mapping[str, Any] | None = None,
        log_defaults: Mapping[str, Any] | None = None,
        secret: bytes | str | None = None,
        ssl: Any = None,
        host: str = "127.0.0.1",
        zookeeper: str | None = None,
        node_config: Mapping[str, Any] | None = None,
        node_configs: Mapping[int, Mapping[str, Any]] | None = None,
        start_timeout_s: float = 60,
        log_dirs: int = 1,
        client_config: Mapping[str, Any] | None = None,
    ) -> None:
        if coordinator != "zookeeper":
            raise ValueError(
                f"node processes coordinate through ZooKeeper; coordinator={coordinator!r} "
                "is only available in-process (processes=False)"
            )
        if ssl is not None:
            raise ValueError(
                "ssl= takes SSLContext objects, which a node process cannot be handed: give the nodes' TLS "
                "as broker properties in node_config (listener.security.protocol.map PLAINTEXT:SSL, "
                "ssl.keystore.location, ssl.truststore.location, ...)"
            )
        self._secret = _node_password(secret)
        self._client_security = client_security(client_config)
        self._closed = False
        self._lay_out(nodes, dir, replica_config, log_defaults, host, log_dirs, "seglog-procs-")
        self.node_config = dict(node_config or {})
        self.node_configs = {i: dict(c) for i, c in (node_configs or {}).items()}
        self.python = sys.executable
        self.start_timeout_s = start_timeout_s
        self._procs: dict[int, subprocess.Popen[bytes] | None] = dict.fromkeys(self.ids)
        self._paused: set[int] = set()
        self._timers: list[threading.Timer] = []
        self._lock = threading.RLock()
        self.zk_server: ZooKeeperServer | None = None
        self._client_obj: ClusterClient | None = None
        #: How this process reaches each node's inter-broker listener (TLS context, SASL), as the
        #: node's properties say the nodes reach each other; made on first use.
        self._node_security: dict[int, tuple[ssl_module.SSLContext | None, tuple[str, str, str] | None]] = {}
        self.coordinator: Any = None
        try:
            if zookeeper is None:
                self.zk_server = ZooKeeperServer(data_dir=os.path.join(self.dir, "zookeeper")).start()
                zookeeper = self.zk_server.connect_string
            self.zookeeper_connect = zookeeper
            ensure_chroot(zookeeper)

            self.coordinator = ZooKeeperCoordinator(zookeeper, session_timeout_ms=10_000)
            self._ports = {i: free_port(host) for i in self.ids}
            self._kafka_ports = {i: free_port(host) for i in self.ids}
            for i in self.ids:
                self._write_config(i)
            for i in self.ids:
                self._spawn(i)
            for i in self.ids:
                self._wait_registered(i)
            self.wait_for(lambda: self.controller() is not None, start_timeout_s, "a controller")
            # The controller learns of nodes through ZooKeeper watches, a moment after they
            # register; a topic asking for every node as a replica is refused until then. The
            # nodes' metadata comes from the controller: once it lists every node, it knows them.
            self.wait_for(
                self._metadata_lists_every_node, start_timeout_s, f"nodes {self.ids} in the controller's metadata"
            )
        except BaseException:
            self.close()
            raise

    # -- where things are ------------------------------------------------------------------------

    def config_path(self, i: int) -> str:
        return os.path.join(self.dir, f"node-{i}.properties")

    def log_path(self, i: int) -> str:
        return os.path.join(self.dir, f"node-{i}.log")

    def port(self, i: int) -> int:
        self._check(i)
        return self._ports[i]

    def address(self, i: int) -> str:
        return f"{self.host}:{self.port(i)}"

    def pid(self, i: int) -> int | None:
        """The node's process id, or None while it is not running."""
        self._check(i)
        p = self._procs[i]
        return p.pid if p is not None and p.poll() is None else None

    def is_running(self, i: int) -> bool:
        return self.pid(i) is not None

    def info(self) -> dict[int, NodeInfo]:
        """Every node's PID, address, log directory, config and output file."""
        return {
            i: NodeInfo(
                i,
                self.pid(i),
                self.host,
                self._ports[i],
                self.node_dir(i),
                self.config_path(i),
                self.log_path(i),
                self.pid(i) is not None,
                i in self._paused,
            )
            for i in self.ids
        }

    def _check(self, i: int) -> None:
        if i not in self._procs:
            raise ValueError(f"no node {i} in this cluster (nodes {self.ids})")

    # -- processes -------------------------------------------------------------------------------

    def _properties(self, i: int) -> dict[str, Any]:
        rc = self.replica_config
        props: dict[str, Any] = {
            "node.id": i,
            "log.dirs": self.node_dirs(i),
            # Between nodes (and for the cluster's own clients), then for Kafka clients.
            "listeners": f"PLAINTEXT://{self.host}:{self._ports[i]},CLIENT://{self.host}:{self._kafka_ports[i]}",
            "inter.broker.listener.name": "PLAINTEXT",
            # With a secret the listener between nodes takes SASL (below).
            "listener.security.protocol.map": (
                f"PLAINTEXT:{'PLAINTEXT' if self._secret is None else 'SASL_PLAINTEXT'},CLIENT:PLAINTEXT"
            ),
            "zookeeper.connect": self.zookeeper_connect,
            "zookeeper.connection.timeout.ms": 10_000,
            "controlled.shutdown.retry.backoff.ms": 200,
        }
        if self._secret is not None:
            # As LocalCluster's secret: the listener between nodes takes SASL/SCRAM-SHA-256 as
            # NODE_SASL_USER with the secret as password, and every node authenticates so.
            props.update(
                {
                    "listener.name.plaintext.sasl.enabled.mechanisms": NODE_SASL_MECHANISM,
                    "sasl.mechanism.inter.broker.protocol": NODE_SASL_MECHANISM,
                    "listener.name.plaintext.scram-sha-256.sasl.jaas.config": (
                        "org.apache.kafka.common.security.scram.ScramLoginModule required "
                        f"username={_jaas_quoted(NODE_SASL_USER)} password={_jaas_quoted(self._secret)};"
                    ),
                }
            )
        props.update(rc.broker_properties(self.log_defaults))
        props.update(self.node_config)
        props.update(self.node_configs.get(i, {}))
        return props

    def set_node_config(self, node: int, properties: Mapping[str, Any]) -> None:
        """Add or override properties of one node (``advertised.listeners`` pointing at a proxy,
        a different timer); they take effect at its next :meth:`restart`."""
        self._check(node)
        merged = dict(self.node_configs.get(node, {}))
        merged.update(properties)
        old = self.node_configs.get(node)
        self.node_configs[node] = merged
        self._node_security.pop(node, None)
        try:
            self._write_config(node)
        except Exception:
            if old is None:
                self.node_configs.pop(node, None)
            else:
                self.node_configs[node] = old
            raise

    def _write_config(self, i: int) -> None:
        props = self._properties(i)
        # A bad setting fails here, not in a child's log (the listener security keys are the
        # Kafka listeners', checked with them).
        cfg = BrokerConfig.from_dict({k: v for k, v in props.items() if not is_security_key(k)})
        security = {k: str(v) for k, v in props.items() if is_security_key(k)}
        check_listener_security(cfg, security)
        for listener in cfg.listeners + (cfg.advertised_listeners or ()):
            parse_listener(listener)
        # Only this user may read it: it can hold the nodes' password.
        fd = os.open(self.config_path(i), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # a file left by an older run keeps its mode otherwise
        with open(fd, "w", encoding="utf-8") as f:
            f.write(f"# node {i} of the cluster in {self.dir}\n")
            f.write(format_properties(props))

    def _spawn(self, i: int) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("the cluster is closed")
            with open(self.log_path(i), "ab") as out:
                env = dict(os.environ, PYTHONUNBUFFERED="1")
                self._procs[i] = subprocess.Popen(
                    [self.python, "-m", "seglog.cli", "node", "--config", self.config_path(i)],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,
                )

    def _registration(self, i: int) -> dict[str, Any] | None:
        r = self.coordinator.read(broker_path(i))
        return None if r is None else (loads(r[0]) or {})

    def _wait_registered(self, i: int) -> None:
        pid = self.pid(i)

        def ok() -> bool:
            if self._procs[i] is None or self._procs[i].poll() is not None:  # type: ignore[union-attr]
                raise RuntimeError(f"node {i} exited during start-up; see {self.log_path(i)}:\n" + self._log_tail(i))
            reg = self._registration(i)
            return reg is not None and reg.get("pid") == pid  # this incarnation, not a stale one

        self.wait_for(ok, self.start_timeout_s, f"node {i} to register")

    def _log_tail(self, i: int, lines: int = 15) -> str:
        try:
            with open(self.log_path(i), "rb") as f:
                return b"".join(f.readlines()[-lines:]).decode(errors="replace")
        except OSError:
            return "(no output)"

    def _signal(self, i: int, sig: int) -> subprocess.Popen[bytes]:
        self._check(i)
        p = self._procs[i]
        if p is None or p.poll() is not None:
            raise RuntimeError(f"node {i} is not running")
        os.kill(p.pid, sig)
        return p

    def kill(self, node: int, sig: int = signal.SIGKILL) -> None:
        """SIGKILL the node (by its PID) and reap it: nothing flushed, no marker; its ZooKeeper
        session expires after ``zookeeper.session.timeout.ms``."""
        p = self._signal(node, sig)
        if node in self._paused:
            self._paused.discard(node)
            try:
                os.kill(p.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        p.wait(30)

    def terminate(self, node: int, timeout_s: float = 60) -> int:
        """SIGTERM: the node shuts down cleanly (controlled shutdown first when enabled); returns
        its exit status once it has exited."""
        p = self._signal(node, signal.SIGTERM)
        if node in self._paused:
            self.resume(node)
        return p.wait(timeout_s)

    def restart(self, node: int) -> None:
        """Start the node again (killing it first if it runs) with the same id, port and log
        directory, and wait until it has registered."""
        if self.is_running(node):
            self.kill(node)
        self._spawn(node)
        self._wait_registered(node)

    def start(self, node: int) -> None:
        """Start a stopped node (an alias of :meth:`restart` that refuses a running one)."""
        if self.is_running(node):
            raise RuntimeError(f"node {node} is already running (pid {self.pid(node)})")
        self.restart(node)

    def pause(self, node: int, seconds: float | None = None) -> None:
        """SIGSTOP the node; SIGCONT after ``seconds`` (None: at :meth:`resume`). Returns at once."""
        self._signal(node, signal.SIGSTOP)
        self._paused.add(node)
        if seconds is not None:
            t = threading.Timer(seconds, self._resume_quietly, (node,))
            t.daemon = True
            self._timers.append(t)
            t.start()

    def _resume_quietly(self, node: int) -> None:
        try:
            self.resume(node)
        except RuntimeError:
            pass

    def resume(self, node: int) -> None:
        if node not in self._paused:
            return
        self._paused.discard(node)
        self._signal(node, signal.SIGCONT)

    # -- state, from ZooKeeper ---------------------------------------------------------------------

    def wait_for(self, predicate: Callable[[], Any], timeout_s: float = 30, what: str = "a condition") -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not reached within {timeout_s} s")
            time.sleep(0.02)

    def controller(self) -> int | None:
        r = self.coordinator.read(CONTROLLER_PATH)
        if r is None:
            return None
        return int((loads(r[0]) or {}).get("broker_id", -1))

    def _controller(self) -> int | None:
        return self.controller()

    def _metadata_lists_every_node(self) -> bool:
        try:
            meta = self._node_request(self.ids, MetadataRequest())
        except KafkaError:
            return False
        return isinstance(meta, MetadataResponse) and set(self.ids) <= {b for b, _ in meta.live_brokers}

    def _inter_broker_security(self, i: int) -> tuple[ssl_module.SSLContext | None, tuple[str, str, str] | None]:
        """The TLS context and SASL credentials node ``i``'s properties give its inter-broker
        listener's clients (the other nodes): how this process reaches that listener too."""
        got = self._node_security.get(i)
        if got is None:
            props = self._properties(i)
            cfg = BrokerConfig.from_dict({k: v for k, v in props.items() if not is_security_key(k)})
            between, _ = split_listeners(cfg)
            opts = node_transport_options(between, {k: str(v) for k, v in props.items() if is_security_key(k)})
            sasl = (NODE_SASL_MECHANISM, opts["sasl_user"], opts["sasl_password"]) if "sasl_user" in opts else None
            got = self._node_security[i] = (opts.get("client_ssl"), sasl)
        return got

    def _node_request(self, nodes: list[int], msg: Any) -> Any:
        """``msg`` (a request of :mod:`seglog.cluster.messages`) as its Kafka request to the
        first of ``nodes`` whose inter-broker listener answers, and the answer."""
        api, body = kafka_messages.request_to_kafka(msg)

        async def ask() -> Any:
            last: KafkaError | None = None
            for i in nodes:
                try:
                    tls, sasl = self._inter_broker_security(i)
                    conn = await BrokerConnection.open(
                        self.address(i), client_id="broker--1", timeout=5.0, ssl_context=tls, sasl=sasl
                    )
                except KafkaError as exc:
                    last = exc
                    continue
                try:
                    resp = await asyncio.wait_for(conn.request(api.name, body, version=api.version), 60)
                finally:
                    await conn.close()
                return kafka_messages.response_from_kafka(msg, resp)
            assert last is not None
            raise last

        return asyncio.run(ask())

    def registered(self) -> list[int]:
        """Nodes registered in ZooKeeper now (live sessions)."""
        return sorted(int(x) for x in self.coordinator.children_of("/brokers/ids"))

    # -- clients -----------------------------------------------------------------------------------

    @property
    def client(self) -> ClusterClient:
        """A :class:`seglog.cluster.client.ClusterClient` bootstrapped from every node (made on first use)."""
        with self._lock:
            if self._client_obj is None:
                self._client_obj = ClusterClient(
                    self.bootstrap_servers, ssl=self._client_security.ssl, sasl=self._client_security.sasl
                )
            return self._client_obj

    @property
    def bootstrap_servers(self) -> str:
        """``host:port,...`` of the nodes' Kafka listeners (for any Kafka client, and the
        cluster's own :attr:`client`)."""
        return ",".join(f"{self.host}:{self._kafka_ports[i]}" for i in self.ids)

    def kafka_address(self, i: int) -> str:
        """Node ``i``'s Kafka listener, ``host:port``."""
        self._check(i)
        return f"{self.host}:{self._kafka_ports[i]}"

    def _request_topic(
        self, name: str, partitions: int, replication_factor: int, config: Mapping[str, Any] | None, timeout_s: float
    ) -> None:
        # CreateTopics to the controller's inter-broker listener, as its nodes forward it (no
        # client-listener credentials needed).
        request = CreateTopicRequest(
            name, partitions, replication_factor, tuple((k, json.dumps(v)) for k, v in (config or {}).items())
        )
        deadline = time.monotonic() + timeout_s
        while True:
            controller = self.controller()
            resp = self._node_request([controller], request) if controller is not None else None
            if isinstance(resp, CreateTopicResponse) and resp.error == 0:
                return
            code = resp.error if resp is not None else NotControllerError.code
            if code != NotControllerError.code or time.monotonic() > deadline:
                raise error_for_code(code)(getattr(resp, "message", "") or f"creating topic {name}")
            time.sleep(0.1)

    def elect_preferred_leader(self, topic: str, partition: int = 0) -> int:
        return int(self.client.elect_preferred_leader(topic, partition))

    def delete_records(self, topic: str, partition: int, offset: int, *, timeout_ms: int = 30_000) -> int:
        """DeleteRecords: records of ``topic``-``partition`` below ``offset`` (-1: the high
        watermark) are deleted on the leader at once; returns the low watermark once every live
        replica has moved its log start there. Raises ``OffsetOutOfRangeError`` above the high
        watermark, ``RequestTimedOutError`` after ``timeout_ms`` (its ``offset``: the low
        watermark reached)."""
        return self.client.delete_records(topic, partition, offset, timeout_ms=timeout_ms)

    def watermarks(self, topic: str, partition: int = 0) -> tuple[int, int, int] | None:
        """``(log start, high watermark, low watermark)`` of the partition, from its leader now
        (None when no leader answers); the low watermark is -1 until every live follower has
        fetched from the current leader."""
        return self.client.watermarks(topic, partition)

    def producer(self, **config: Any) -> ClusterProducer:
        return self.client.producer(**config)

    def consumer(self, **config: Any) -> ClusterConsumer:
        return self.client.consumer(**config)

    # -- end ---------------------------------------------------------------------------------------

    def close(self, timeout_s: float = 30) -> None:
        """Stop every node (SIGTERM, SIGKILL after ``timeout_s``), the client, and the ZooKeeper
        server this cluster started; a directory it made is removed."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for t in self._timers:
            t.cancel()
        if self._client_obj is not None:
            self._client_obj.close()
        procs = [(i, p) for i, p in self._procs.items() if p is not None and p.poll() is None]
        for i, p in procs:
            try:
                if i in self._paused:
                    os.kill(p.pid, signal.SIGCONT)
                os.kill(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout_s
        for _, p in procs:
            wait_or_kill_group(p, max(0.1, deadline - time.monotonic()), 10)
        if self.coordinator is not None:
            self.coordinator.close()
        if self.zk_server is not None:
            self.zk_server.stop()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
