"""What the clusters started for tests and demos share, however they run their nodes:
:class:`~seglog.cluster.local.LocalCluster` (every node in this process) and
:class:`~seglog.cluster.process.ProcessCluster` (one ``seglog node`` process per node); made
by :func:`seglog.cluster.factory.start_cluster`.

A cluster lives in one directory (``dir``, a temporary one the cluster removes at
:meth:`ClusterBase.close` when none is given): node ``i``'s log dirs are ``node-i`` and, with
``log_dirs=N``, ``node-i.dir1`` .. ``node-i.dirN-1``. Its timers default to
:data:`LOCAL_REPLICA_CONFIG`; the partition state (leader, leader epoch, ISR) is read from the
coordinator, the source of truth.
"""

from __future__ import annotations

import abc
import functools
import os
import tempfile
from collections.abc import Mapping
from typing import Any

from seglog.cluster.consumer import ClusterConsumer
from seglog.cluster.metadata import PartitionState, ReplicaConfig, state_path
from seglog.cluster.producer import ClusterProducer
from seglog.util.closing import Closeable

__all__ = ["LOCAL_REPLICA_CONFIG", "ClusterBase", "node_dirs"]

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


def node_dirs(root: str, i: int, n: int) -> list[str]:
    """Node ``i``'s ``n`` log dirs under a cluster directory ``root``."""
    first = os.path.join(root, f"node-{i}")
    return [first] + [f"{first}.dir{k}" for k in range(1, n)]


class ClusterBase(abc.ABC, Closeable):
    """A cluster of ``ids`` nodes in the directory ``dir`` (see module docs)."""

    coordinator: Any
    dir: str
    ids: list[int]
    host: str
    log_dirs: int
    log_defaults: dict[str, Any]
    replica_config: ReplicaConfig
    _own_dir: bool

    def _lay_out(
        self,
        nodes: int,
        dir: str | os.PathLike[str] | None,
        replica_config: ReplicaConfig | Mapping[str, Any] | None,
        log_defaults: Mapping[str, Any] | None,
        host: str,
        log_dirs: int,
        prefix: str,
    ) -> None:
        """Check and keep the settings every cluster has; make its directory (a temporary one
        named ``prefix...`` when ``dir`` is None)."""
        if nodes < 1:
            raise ValueError(f"a cluster needs at least one node, got {nodes}")
        if log_dirs < 1:
            raise ValueError(f"a node needs at least one log dir, got log_dirs={log_dirs}")
        self.log_dirs = log_dirs
        self._own_dir = dir is None
        self.dir = os.path.abspath(os.fspath(dir)) if dir is not None else tempfile.mkdtemp(prefix=prefix)
        os.makedirs(self.dir, exist_ok=True)
        if replica_config is None:
            self.replica_config = LOCAL_REPLICA_CONFIG
        elif isinstance(replica_config, ReplicaConfig):
            self.replica_config = replica_config
        else:
            self.replica_config = LOCAL_REPLICA_CONFIG.with_overrides(
                **{k.replace(".", "_"): v for k, v in replica_config.items()}
            )
        self.log_defaults = dict(log_defaults or {})
        self.host = host
        self.ids = list(range(nodes))

    # -- where things are ------------------------------------------------------------------------

    def node_dir(self, i: int) -> str:
        """The node's (first) log dir."""
        return os.path.join(self.dir, f"node-{i}")

    def node_dirs(self, i: int) -> list[str]:
        """The node's log dirs: :meth:`node_dir`, then ``node-N.dirK`` for K = 1.. ``log_dirs-1``."""
        return node_dirs(self.dir, i, self.log_dirs)

    # -- state, from the coordinator -------------------------------------------------------------

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
        """The partition's in-sync replicas now (empty when it has no state)."""
        st = self._state(topic, partition)
        return [] if st is None else list(st.isr)

    def state(self, topic: str, partition: int = 0) -> PartitionState | None:
        """The partition's state (leader, leader epoch, ISR, ...) now, or None."""
        return self._state(topic, partition)

    # -- what each kind of cluster does its own way ------------------------------------------------

    @abc.abstractmethod
    def wait_for(self, predicate: Any, timeout_s: float = 30, what: str = "a condition") -> None:
        """Poll ``predicate()`` until it is true; ``TimeoutError`` naming ``what`` after
        ``timeout_s``."""

    @abc.abstractmethod
    def kill(self, node: int) -> None:
        """Stop ``node`` abruptly (nothing flushed)."""

    @abc.abstractmethod
    def restart(self, node: int) -> None:
        """Start ``node`` again from its directory (killing it first if it runs)."""

    @abc.abstractmethod
    def pause(self, node: int, seconds: float) -> None:
        """Freeze ``node`` for ``seconds`` (returns at once)."""

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 3,
        config: Mapping[str, Any] | None = None,
        *,
        timeout_s: float = 30,
    ) -> None:
        """Create a topic (placement by Kafka's rule) and wait until every partition has a leader."""
        self._request_topic(name, partitions, replication_factor, config, timeout_s)
        for p in range(partitions):
            self.wait_for(functools.partial(self._is_led, name, p), timeout_s, f"a leader for {name}-{p}")

    @abc.abstractmethod
    def _request_topic(
        self, name: str, partitions: int, replication_factor: int, config: Mapping[str, Any] | None, timeout_s: float
    ) -> None:
        """Ask the controller to create the topic (what :meth:`create_topic` waits on next)."""

    def _is_led(self, topic: str, partition: int) -> bool:
        """Whether the partition's state names a leader (:meth:`create_topic` waits for it)."""
        st = self._state(topic, partition)
        return st is not None and st.leader >= 0

    @abc.abstractmethod
    def elect_preferred_leader(self, topic: str, partition: int = 0) -> int:
        """Move the partition's leadership to its preferred replica; returns the leader."""

    @abc.abstractmethod
    def delete_records(self, topic: str, partition: int, offset: int, *, timeout_ms: int = 30_000) -> int:
        """DeleteRecords on the partition's leader; the low watermark reached (see
        :meth:`seglog.kafka.client.KafkaClient.delete_records`)."""

    @abc.abstractmethod
    def watermarks(self, topic: str, partition: int = 0) -> tuple[int, int, int] | None:
        """``(log start, high watermark, low watermark)`` from the partition's leader now."""

    @abc.abstractmethod
    def producer(self, **config: Any) -> ClusterProducer:
        """A :class:`~seglog.cluster.producer.ClusterProducer` of this cluster."""

    @abc.abstractmethod
    def consumer(self, **config: Any) -> ClusterConsumer:
        """A :class:`~seglog.cluster.consumer.ClusterConsumer` of this cluster."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop every node and what the cluster started; a directory it made is removed."""
