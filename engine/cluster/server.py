"""One node process: ``seglog node --config node.properties`` (Kafka's ``kafka-server-start``).

The properties file uses Kafka's broker keys (:class:`seglog.config.BrokerConfig`):

=====================================  =====================================================
``node.id`` (or ``broker.id``)         this node's id (required, >= 0)
``log.dirs`` (or ``log.dir``)          its log directories, comma-separated (Kafka's JBOD)
``listeners``                          ``NAME://host:port,...``: the one between nodes (Kafka's
                                       inter-broker requests), and any others serve Kafka
                                       clients
``inter.broker.listener.name``         the name of the listener between nodes (default: the
                                       first listener's)
``advertised.listeners``               the addresses others are told, by listener name
                                       (default: the listeners')
``zookeeper.connect``                  ``host:port[,host:port...][/chroot]`` (required)
``zookeeper.session.timeout.ms``       its session; expiry = this node's death (18000)
``zookeeper.connection.timeout.ms``    how long to wait for ZooKeeper (default: the session)
``controlled.shutdown.enable``         move leadership away before stopping on SIGTERM (true)
``controlled.shutdown.max.retries``    attempts before stopping regardless (3)
``controlled.shutdown.retry.backoff.ms``  pause between attempts (5000)
``replica.*``, ``min.insync.replicas``, ``log.*``  replication settings and topic defaults
=====================================  =====================================================

Every listener, the one between nodes included, takes its security from Kafka's listener keys
(``listener.security.protocol.map``, ``ssl.*``, ``sasl.*``, ``listener.name.<name>.*``; see
:func:`seglog.kafka.security.listener_options`). How this node connects to the others'
listener between nodes (:func:`node_transport_options`): with TLS it checks their certificates
against ``ssl.truststore.*`` (and their host names, ``ssl.endpoint.identification.algorithm``);
with SASL it authenticates with SCRAM-SHA-256 (``sasl.mechanism.inter.broker.protocol``) as the
user and password of ``listener.name.<name>.scram-sha-256.sasl.jaas.config`` (Kafka's
``ScramLoginModule``) — the cluster's shared secret: the listener accepts those credentials
too, so nodes configured alike accept each other, and a node that fails authentication is
refused.

With several log dirs, new partitions go to the dir holding the fewest; a dir whose writes fail
(ENOSPC, EIO) goes offline alone — its partitions answer KAFKA_STORAGE_ERROR and the controller
moves their leadership away — and the node keeps serving the others. When the last healthy dir
fails the process halts at once (exit status 1, no flush, no marker), as a Kafka broker does: its
ZooKeeper session then expires and the controller elects new leaders. A failed dir is used again
after a restart (see :mod:`seglog.cluster.node`).

Everything runs on one asyncio loop on the main thread (the node has no locks); ZooKeeper's
watch callbacks are posted to it. SIGTERM or SIGINT shut the node down cleanly: controlled
shutdown first (when enabled), then every log flushed and closed, producer state snapshotted,
high watermarks checkpointed, the clean-shutdown marker written, the ZooKeeper session closed;
exit status 0. SIGKILL leaves what a crash leaves; the session then expires after
``zookeeper.session.timeout.ms`` and the controller elects new leaders.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import hashlib
import logging
import os
import re
import signal
import socket
import sys
import time
from collections.abc import Mapping
from typing import Any

from seglog.cluster.kafka_listener import NodeKafkaListener
from seglog.cluster.kafka_transport import NODE_SASL_MECHANISM, KafkaTransport
from seglog.cluster.metadata import ReplicaConfig, TopicPartition
from seglog.cluster.netloop import LoopScheduler
from seglog.cluster.node import ReplicaNode
from seglog.config import BrokerConfig
from seglog.config.properties import parse_properties_entries, read_properties_text
from seglog.errors import ConfigError
from seglog.kafka.security import client_ssl_context, is_security_key, listener_options
from seglog.util.clock import clock_from_env

log = logging.getLogger("seglog.node")


def parse_listener(listener: str) -> tuple[str, int]:
    """``NAME://host:port`` -> (host, port); an empty host means every interface."""
    _, sep, rest = listener.partition("://")
    if not sep:
        raise ConfigError(f"listener {listener!r} is not NAME://host:port", key="listeners", value=listener)
    host, colon, port = rest.rpartition(":")
    if not colon or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"listener {listener!r} has no valid port (0-65535)", key="listeners", value=listener)
    return host.strip("[]"), int(port)


def listener_name(listener: str) -> str:
    """``NAME://host:port`` -> ``NAME``."""
    return listener.partition("://")[0]


def split_listeners(cfg: BrokerConfig) -> tuple[str, list[str]]:
    """(the listener between nodes, the Kafka client listeners) of a node's ``listeners``,
    by ``inter.broker.listener.name`` (default: the first listener's name)."""
    names = [listener_name(x) for x in cfg.listeners]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise ConfigError(
                f"listeners names {n} twice: every listener needs a name of its own",
                key="listeners",
                value=cfg.listeners,
            )
    inter = cfg.inter_broker_listener_name or names[0]
    if inter not in names:
        raise ConfigError(
            f"inter.broker.listener.name {inter} is not a listener ({', '.join(names)})",
            key="inter.broker.listener.name",
            value=inter,
        )
    between = cfg.listeners[names.index(inter)]
    return between, [x for x in cfg.listeners if x is not between]


def _advertised(cfg: BrokerConfig, listener: str, port: int) -> str:
    """The ``host:port`` others are told for ``listener`` (bound on ``port``): its entry of
    ``advertised.listeners`` by name (the first entry when names do not match and there is one
    listener), else the listener's own."""
    host, _ = parse_listener(listener)
    name = listener_name(listener)
    adv = list(cfg.advertised_listeners or ())
    match = next((a for a in adv if listener_name(a) == name), None)
    if match is None and len(cfg.listeners) == 1 and adv:
        match = adv[0]
    if match is not None:
        ahost, aport = parse_listener(match)
        return f"{ahost or socket.getfqdn()}:{aport or port}"
    return f"{host or socket.getfqdn()}:{port}"


def load_security(path: str) -> dict[str, str]:
    """The listener security keys of the properties file (``listener.security.protocol.map``,
    ``ssl.*``, ``sasl.*``, ``listener.name.<name>.*``): what the Kafka listeners are built with
    (:func:`seglog.kafka.security.listener_options`)."""
    entries = parse_properties_entries(read_properties_text(path), path)
    return {k: v for k, (v, _line) in entries.items() if is_security_key(k)}


def load_config(path: str, overrides: Mapping[str, str] | None = None) -> BrokerConfig:
    """The node's configuration: the properties file (less its listener security keys, see
    :func:`load_security`), then ``overrides`` (key=value). Checks that every listener parses,
    with its security settings (:func:`check_listener_security`)."""
    cfg = BrokerConfig.from_properties_file(path, exclude=is_security_key)
    if overrides:
        cfg = cfg.with_overrides(dict(overrides))
    if cfg.effective_node_id < 0:
        raise ConfigError(f"{path}: node.id (or broker.id) is required", key="node.id", value=cfg.node_id)
    if not cfg.zookeeper_connect:
        raise ConfigError(
            f"{path}: zookeeper.connect is required (host:port[,host:port...][/chroot])",
            key="zookeeper.connect",
            value=None,
        )
    dirs = [os.path.realpath(os.path.abspath(d)) for d in cfg.effective_log_dirs]
    for i, d in enumerate(dirs):
        if d in dirs[:i]:
            raise ConfigError(
                f"{path}: log dir {cfg.effective_log_dirs[i]} is listed twice in {list(cfg.effective_log_dirs)}",
                key="log.dirs",
                value=cfg.log_dirs,
            )
    if not cfg.listeners:
        raise ConfigError(f"{path}: listeners is empty", key="listeners", value=cfg.listeners)
    for listener in cfg.listeners:
        parse_listener(listener)
    security = load_security(path)
    try:
        check_listener_security(cfg, security)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc.args[0]}", key=exc.key, value=exc.value) from None
    return cfg


#: Keys about how a node connects to the others (not the listeners' own), by their name without
#: a ``listener.name.<name>.`` prefix.
_NODE_CLIENT_KEYS = ("sasl.mechanism.inter.broker.protocol", "ssl.endpoint.identification.algorithm")
_SCRAM_JAAS = "scram-sha-256.sasl.jaas.config"
_JAAS_OPTION = re.compile(r'([A-Za-z0-9_.-]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def _node_client_keys(between: str, security: Mapping[str, str]) -> dict[str, str]:
    """The keys of ``security`` about connecting to the listener ``between`` of other nodes,
    unprefixed (the ``listener.name.<name>.`` form wins)."""
    prefix = f"listener.name.{listener_name(between).strip().lower()}."
    out = {k: v for k, v in security.items() if k in _NODE_CLIENT_KEYS}
    out.update({k[len(prefix) :]: v for k, v in security.items() if k[len(prefix) :] in _NODE_CLIENT_KEYS})
    jaas = security.get(prefix + _SCRAM_JAAS)
    if jaas is not None:
        out[_SCRAM_JAAS] = jaas
    return out


def client_listener_security(between: str, security: Mapping[str, str]) -> dict[str, str]:
    """``security`` less the keys about connecting to other nodes on ``between`` (what the
    listeners are built with)."""
    prefix = f"listener.name.{listener_name(between).strip().lower()}."
    return {
        k: v
        for k, v in security.items()
        if k not in _NODE_CLIENT_KEYS and k[len(prefix) :] not in _NODE_CLIENT_KEYS and k != prefix + _SCRAM_JAAS
    }


def _scram_login(text: str) -> tuple[str, str]:
    """(username, password) of a ``ScramLoginModule`` JAAS config."""
    head = text.strip().split(None, 2)
    options = {k: re.sub(r"\\(.)", r"\1", v) for k, v in _JAAS_OPTION.findall(text)}
    if len(head) < 2 or not head[0].endswith("ScramLoginModule") or head[1] != "required":
        raise ConfigError(
            f"{_SCRAM_JAAS} must be 'org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="NAME" password="PASSWORD";\', got {text[:60]!r}',
            key=_SCRAM_JAAS,
            value=None,
        )
    if not options.get("username") or "password" not in options:
        raise ConfigError(f'{_SCRAM_JAAS} needs username="..." and password="..."', key=_SCRAM_JAAS, value=None)
    return options["username"], options["password"]


def node_transport_options(between: str, security: Mapping[str, str]) -> dict[str, Any]:
    """:class:`~seglog.cluster.kafka_transport.KafkaTransport` options for the listener between
    nodes ``between`` (``NAME://host:port``) from the properties file's security keys: the
    listener's own (protocol, TLS, SASL mechanisms and users, as a Kafka client listener's), and
    how this node connects to the other nodes' (see the module docs). ConfigError names a key
    that is missing or wrong."""
    name = listener_name(between).strip().upper()
    _, _, _, options = listener_options(between, client_listener_security(between, security))
    keys = _node_client_keys(between, security)
    protocol = options["security_protocol"]
    out: dict[str, Any] = dict(options)
    prefix = f"listener.name.{name.lower()}."
    if protocol in ("SSL", "SASL_SSL"):
        ssl_keys = {k: v for k, v in security.items() if k.startswith("ssl.")}
        ssl_keys.update({k[len(prefix) :]: v for k, v in security.items() if k.startswith(prefix + "ssl.")})
        if "ssl.endpoint.identification.algorithm" in keys:
            ssl_keys["ssl.endpoint.identification.algorithm"] = keys["ssl.endpoint.identification.algorithm"]
        try:
            out["client_ssl"] = client_ssl_context(ssl_keys)
        except ConfigError as exc:
            raise ConfigError(
                f"the listener between nodes ({between}): {exc.args[0]}", key=exc.key, value=exc.value
            ) from None
    if protocol.startswith("SASL_"):
        mechanism = keys.get("sasl.mechanism.inter.broker.protocol", NODE_SASL_MECHANISM).strip().upper()
        if mechanism != NODE_SASL_MECHANISM:
            raise ConfigError(
                f"sasl.mechanism.inter.broker.protocol={mechanism}: nodes authenticate to each other "
                f"with {NODE_SASL_MECHANISM}",
                key="sasl.mechanism.inter.broker.protocol",
                value=mechanism,
            )
        if mechanism not in options["sasl_mechanisms"]:
            raise ConfigError(
                f"the listener between nodes ({between}) does not enable {mechanism} "
                f"(sasl.enabled.mechanisms: {', '.join(options['sasl_mechanisms'])})",
                key="sasl.enabled.mechanisms",
                value=",".join(options["sasl_mechanisms"]),
            )
        jaas = keys.get(_SCRAM_JAAS)
        if jaas is None:
            raise ConfigError(
                f"the listener between nodes ({between}) is {protocol}: {prefix}{_SCRAM_JAAS} must give "
                "the nodes' SCRAM-SHA-256 username and password (ScramLoginModule)",
                key=prefix + _SCRAM_JAAS,
                value=None,
            )
        user, password = _scram_login(jaas)
        users = dict(options.get("users") or {})
        users.setdefault(user, password)  # nodes configured alike accept each other
        out.update(users=users, sasl_user=user, sasl_password=password)
    return out


def check_listener_security(cfg: BrokerConfig, security: Mapping[str, str]) -> None:
    """Build every listener's security from ``security`` (a bad protocol map, TLS file, user or
    inter-broker credential fails here with a ConfigError)."""
    between, clients = split_listeners(cfg)
    node_transport_options(between, security)
    for listener in clients:
        listener_options(listener, client_listener_security(between, security))


class NodeServer:
    """A :class:`ReplicaNode` with its listeners and a ZooKeeper session, on the running loop."""

    def __init__(
        self, config: BrokerConfig, loop: asyncio.AbstractEventLoop, security: Mapping[str, str] | None = None
    ) -> None:
        from seglog.cluster.zookeeper import ZooKeeperCoordinator

        self.config = config
        #: The listener security keys (:func:`load_security`) the Kafka listeners are built with.
        self.security = dict(security or {})
        self.loop = loop
        self.node_id = config.effective_node_id
        self.clock = clock_from_env()  # the system clock unless a test shifts its wall reading
        self.scheduler = LoopScheduler(loop, self.clock)
        between, _ = split_listeners(config)
        #: Between nodes: Kafka's requests on the inter-broker listener, secured as configured.
        self.transport = KafkaTransport(loop, **node_transport_options(between, self.security))
        assert config.zookeeper_connect is not None
        self.coordinator = ZooKeeperCoordinator(
            config.zookeeper_connect,
            post=loop.call_soon_threadsafe,
            session_timeout_ms=config.zookeeper_session_timeout_ms,
            connection_timeout_ms=config.zookeeper_connection_timeout_ms,
        )
        self.replica_config = ReplicaConfig.from_broker_config(config)
        self.node = ReplicaNode(
            self.node_id,
            config.effective_log_dirs,
            coordinator=self.coordinator,
            transport=self.transport,
            clock=self.clock,
            scheduler=self.scheduler,
            config=self.replica_config,
            log_defaults=config.topic_defaults(),
        )
        self.node.on_log_dir_failure = self._halt_on_log_dir_failure
        # The periodic checkpoint writes (high watermarks, recovery points: files written and
        # fsynced) go to a thread of their own, as in LocalCluster: behind hundreds of MB of
        # dirty pages their fsyncs took a node's loop 0.2-0.25 s in 8 s of the replication
        # bench, holding every produce and fetch meanwhile.
        self._io = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"seglog-node-{self.node_id}-io"
        )
        self.node.offload = self._io.submit
        self.stopped = asyncio.Event()
        self._stopping = False
        #: The node's Kafka listeners (every listener but the one between nodes).
        self.kafka_listeners: list[NodeKafkaListener] = []

    def _halt_on_log_dir_failure(self, exc: BaseException) -> None:
        # Kafka halts a broker whose last log dir has failed: nothing more is written (no
        # checkpoint, no clean-shutdown marker), so the restart recovers the logs, and the
        # ZooKeeper session expiry makes the controller move leadership away.
        if len(self.node.log_dirs) == 1:
            log.critical("node %d: halting: the only log dir %s failed (%s)", self.node_id, self.node.data_dir, exc)
        else:
            log.critical(
                "node %d: halting: every log dir failed (%s); the last: %s",
                self.node_id,
                ", ".join(self.node.log_dirs),
                exc,
            )
        logging.shutdown()
        os._exit(1)

    async def start(self) -> str:
        between, clients = split_listeners(self.config)
        host, port = parse_listener(between)
        bound, port = await self.transport.listen(
            self.node_id, self.node.handle, host or "0.0.0.0", port, topics=self.node.known_topics
        )
        address = _advertised(self.config, between, port)
        self.node.address = address
        self.node.security_protocol = self.transport.security_protocol
        for listener in clients:
            khost, kport = parse_listener(listener)
            _name, _host, _port, options = listener_options(listener, client_listener_security(between, self.security))
            kafka = NodeKafkaListener(
                self.node,
                khost or "0.0.0.0",
                kport,
                # The same on every node of the cluster: named after its ZooKeeper.
                cluster_id="seglog-" + hashlib.sha256((self.config.zookeeper_connect or "").encode()).hexdigest()[:16],
                max_request_bytes=self.config.socket_request_max_bytes,
                idle_ms=self.config.connections_max_idle_ms,
                broker_config=self.config,
                **options,
            )
            await kafka.start()
            self.kafka_listeners.append(kafka)
            # The first one's address is what Metadata gives clients for this node.
            if not self.node.kafka_address:
                self.node.kafka_address = _advertised(self.config, listener, kafka.port)
                self.node.kafka_security_protocol = kafka.security.protocol
            log.info("node %d: Kafka clients' listener %s on port %d", self.node_id, listener, kafka.port)
        self.node.start()
        log.info(
            "node %d (pid %d) listening on %s:%d, advertised as %s, log dirs %s",
            self.node_id,
            os.getpid(),
            bound,
            port,
            address,
            ",".join(self.node.log_dirs),
        )
        return address

    async def controlled_shutdown(self) -> bool:
        """Ask the controller to move leadership away, retrying; True when nothing is left."""
        cfg = self.config
        for attempt in range(1, cfg.controlled_shutdown_max_retries + 1):
            fut: asyncio.Future[tuple[tuple[TopicPartition, ...] | None, str]] = self.loop.create_future()

            def done(
                remaining: tuple[TopicPartition, ...] | None, message: str, fut: asyncio.Future[Any] = fut
            ) -> None:
                if not fut.done():
                    fut.set_result((remaining, message))

            self.node.request_controlled_shutdown(done)
            try:
                remaining, message = await asyncio.wait_for(
                    fut, self.replica_config.controller_socket_timeout_ms / 1000 + 1
                )
            except asyncio.TimeoutError:
                remaining, message = None, "the controller did not answer"
            if remaining == ():
                log.info("node %d: controlled shutdown succeeded (attempt %d)", self.node_id, attempt)
                return True
            log.warning(
                "node %d: controlled shutdown attempt %d: %s",
                self.node_id,
                attempt,
                message or f"still leading {sorted(remaining or ())}",
            )
            if attempt < cfg.controlled_shutdown_max_retries:
                await asyncio.sleep(cfg.controlled_shutdown_retry_backoff_ms / 1000)
        return False

    async def stop(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        t0 = time.monotonic()
        try:
            if self.config.controlled_shutdown_enable and self.node.running:
                await self.controlled_shutdown()
            for kafka in self.kafka_listeners:
                await kafka.close()
            self.node.shutdown(deregister=True)
            await self.transport.close()
            self.coordinator.close()
        finally:
            self._io.shutdown(wait=True)  # the node's shutdown waited for its last write already
            log.info("node %d stopped cleanly in %.2f s", self.node_id, time.monotonic() - t0)
            self.stopped.set()


async def _serve(config: BrokerConfig, security: Mapping[str, str] | None = None) -> int:
    loop = asyncio.get_running_loop()
    server = NodeServer(config, loop, security)
    await server.start()
    # What start-up built (modules, configs, logs, indexes: ~30,000 objects) lives as long as
    # the process: out of the collector's full passes, which took 15 ms over it on a loaded
    # machine and showed in the produce p99.
    gc.freeze()

    stopping: list[asyncio.Task[None]] = []  # held, so that the loop's weak reference is not the only one

    def on_signal(name: str) -> None:
        log.info("node %d: %s received, shutting down", server.node_id, name)
        stopping.append(loop.create_task(server.stop()))

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig.name)
    await server.stopped.wait()
    return 0


def run(config_path: str, overrides: Mapping[str, str] | None = None) -> int:
    """Run a node until SIGTERM/SIGINT (the ``seglog node`` command)."""
    config = load_config(config_path, overrides)
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
    return asyncio.run(_serve(config, load_security(config_path)))
