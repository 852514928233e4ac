"""A node's follower fetchers (Kafka's ``ReplicaFetcherManager``, one fetcher per leader): for
every node leading a partition this node follows, one fetch request in flight at a time, naming
every such partition; its response is applied partition by partition, and the next request goes
out at once, or after ``replica.fetch.backoff.ms`` when a request failed or a partition asked
for a pause (an error, a truncation). A fetcher lives as long as its leader leads a partition
this node follows, or its last request is still in flight.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from seglog.cluster.messages import ISOLATION_LOG_END, FetchRequest, FetchResponse
from seglog.cluster.metadata import NO_LEADER, ReplicaConfig, TopicPartition
from seglog.cluster.partition import Partition, Role
from seglog.errors import KafkaError
from seglog.util.clock import Clock

__all__ = ["FetcherHost", "LeaderFetcher", "ReplicaFetchers"]

log = logging.getLogger("seglog.cluster.node")


class FetcherHost(Protocol):
    """What the fetchers use of their node (a :class:`~seglog.cluster.node.ReplicaNode`)."""

    node_id: int
    running: bool
    broker_epoch: int
    clock: Clock
    config: ReplicaConfig
    scheduler: Any
    stats: dict[str, int]

    @property
    def partitions(self) -> Mapping[TopicPartition, Partition]:
        """The partitions the node hosts now."""
        ...

    def send(
        self, dst: int, message: Any, callback: Callable[[Any, BaseException | None], None], timeout_ms: int
    ) -> None:
        """Send ``message`` to node ``dst``; ``callback(response, error)`` when it is answered."""
        ...

    def maybe_log_dir_failure(self, p: Any, exc: BaseException) -> None:
        """A storage error from a write to ``p``'s log (its log dir may have failed)."""
        ...


@dataclasses.dataclass(slots=True)
class LeaderFetcher:
    """The fetcher of one leader: whether a request is in flight, and the backoff after a
    failed one (until ``backoff_until``, the node's monotonic ms; ``kick`` its timer)."""

    leader: int
    in_flight: bool = False
    backoff_until: int = 0
    kick: Any = None


class ReplicaFetchers:
    """The follower fetchers of one node (see module docs)."""

    def __init__(self, node: FetcherHost) -> None:
        self.node = node
        self.fetchers: dict[int, LeaderFetcher] = {}

    def update(self) -> None:
        """Start a fetcher for each leader the node now follows, drop those of former leaders
        (once idle), and send what each one can send now."""
        node = self.node
        leaders = {
            p.leader
            for p in node.partitions.values()
            if p.role is Role.FOLLOWER and p.leader not in (NO_LEADER, node.node_id)
        }
        for leader in leaders:
            if leader not in self.fetchers:
                self.fetchers[leader] = LeaderFetcher(leader)
        for f in list(self.fetchers.values()):
            if f.leader not in leaders and not f.in_flight:
                del self.fetchers[f.leader]
        for f in list(self.fetchers.values()):
            self.maybe_fetch(f)

    def cancel_timers(self) -> None:
        """Cancel every backoff timer (the node stops)."""
        for f in self.fetchers.values():
            if f.kick is not None:
                self.node.scheduler.cancel(f.kick)

    def maybe_fetch(self, f: LeaderFetcher) -> None:
        """Send ``f``'s next fetch request unless one is in flight or it backs off."""
        node = self.node
        if not node.running or f.in_flight or node.broker_epoch < 0:
            return
        now = node.clock.monotonic_ms()
        if now < f.backoff_until:
            return
        parts = [p for p in node.partitions.values() if p.role is Role.FOLLOWER and p.leader == f.leader]
        if not parts:
            return
        cfg = node.config
        sent = tuple(p.fetch_partition_request(cfg.replica_fetch_max_bytes) for p in parts)
        req = FetchRequest(
            node.node_id,
            sent,
            node.broker_epoch,
            cfg.replica_fetch_wait_max_ms,
            cfg.replica_fetch_min_bytes,
            cfg.replica_fetch_response_max_bytes,
            ISOLATION_LOG_END,
        )
        f.in_flight = True
        by_tp = {(fp.topic, fp.partition): fp for fp in sent}

        def done(resp: Any, err: BaseException | None) -> None:
            f.in_flight = False
            if not node.running:
                return
            backoff = err is not None or not isinstance(resp, FetchResponse)
            if not backoff:
                for pr in resp.partitions:
                    p = node.partitions.get((pr.topic, pr.partition))
                    fp = by_tp.get((pr.topic, pr.partition))
                    if p is None or fp is None:
                        continue
                    try:
                        backoff |= p.on_fetch_response(fp, pr)
                    except (KafkaError, OSError) as exc:
                        log.warning(
                            "node %d: replicating %s-%d from %d failed: %s",
                            node.node_id,
                            pr.topic,
                            pr.partition,
                            f.leader,
                            exc,
                        )
                        node.stats["fetch_apply_errors"] = node.stats.get("fetch_apply_errors", 0) + 1
                        backoff = True
                        if isinstance(exc, OSError):
                            node.maybe_log_dir_failure(p, exc)
            if backoff:
                f.backoff_until = node.clock.monotonic_ms() + node.config.replica_fetch_backoff_ms
                if f.kick is not None:
                    node.scheduler.cancel(f.kick)
                f.kick = node.scheduler.schedule(
                    f"fetch backoff {node.node_id}->{f.leader}",
                    lambda: self.maybe_fetch(f),
                    delay_ms=node.config.replica_fetch_backoff_ms,
                )
            else:
                self.maybe_fetch(f)

        node.send(f.leader, req, done, cfg.replica_socket_timeout_ms)
