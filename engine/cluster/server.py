"""One node process: ``seglog node --config node.properties`` (Kafka's ``kafka-server-start``).

The properties file uses Kafka's broker keys (:class:`seglog.config.BrokerConfig`):

=====================================  =====================================================
``node.id`` (or ``broker.id``)         this node's id (required, >= 0)
``log.dirs`` (or ``log.dir``)          its log directories, comma-separated (Kafka's JBOD)
``listeners``                          ``PLAINTEXT://host:port`` it serves clients and peers on
``advertised.listeners``               the address others are told (default: the listener)
``zookeeper.connect``                  ``host:port[,host:port...][/chroot]`` (required)
``zookeeper.session.timeout.ms``       its session; expiry = this node's death (18000)
``zookeeper.connection.timeout.ms``    how long to wait for ZooKeeper (default: the session)
``controlled.shutdown.enable``         move leadership away before stopping on SIGTERM (true)
``controlled.shutdown.max.retries``    attempts before stopping regardless (3)
``controlled.shutdown.retry.backoff.ms``  pause between attempts (5000)
``replica.*``, ``min.insync.replicas``, ``log.*``  replication settings and topic defaults
=====================================  =====================================================

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
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Mapping
from typing import Any

from seglog.cluster.metadata import ReplicaConfig, TopicPartition
from seglog.cluster.node import ReplicaNode
from seglog.cluster.tcp import LoopScheduler, TcpTransport
from seglog.config import BrokerConfig
from seglog.errors import ConfigError
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


def load_config(path: str, overrides: Mapping[str, str] | None = None) -> BrokerConfig:
    """The node's configuration: the properties file, then ``overrides`` (key=value)."""
    cfg = BrokerConfig.from_properties_file(path)
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
    return cfg


class NodeServer:
    """A :class:`ReplicaNode` serving TCP with a ZooKeeper session, on the running loop."""

    def __init__(self, config: BrokerConfig, loop: asyncio.AbstractEventLoop) -> None:
        from seglog.cluster.zookeeper import ZooKeeperCoordinator

        self.config = config
        self.loop = loop
        self.node_id = config.effective_node_id
        self.clock = clock_from_env()  # the system clock unless a test shifts its wall reading
        self.scheduler = LoopScheduler(loop, self.clock)
        self.transport = TcpTransport(loop)
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
        self.stopped = asyncio.Event()
        self._stopping = False

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
        host, port = parse_listener(self.config.listeners[0])
        bound, port = await self.transport.listen(self.node_id, self.node.handle, host or "0.0.0.0", port)
        if self.config.advertised_listeners:
            ahost, aport = parse_listener(self.config.advertised_listeners[0])
            address = f"{ahost or socket.getfqdn()}:{aport or port}"
        else:
            address = f"{host or socket.getfqdn()}:{port}"
        self.node.address = address
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
            self.node.shutdown(deregister=True)
            await self.transport.close()
            self.coordinator.close()
        finally:
            log.info("node %d stopped cleanly in %.2f s", self.node_id, time.monotonic() - t0)
            self.stopped.set()


async def _serve(config: BrokerConfig) -> int:
    loop = asyncio.get_running_loop()
    server = NodeServer(config, loop)
    await server.start()

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
    return asyncio.run(_serve(config))
