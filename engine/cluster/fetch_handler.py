"""Fetch requests served by a node as a partition's leader (Kafka's ``ReplicaManager.fetchMessages``
and its ``DelayedFetch`` purgatory).

A fetch is read at once from every partition it names, within its ``max_bytes`` budget. It is
answered at once when it read ``min_bytes`` or more, when a partition answered with an error or
a divergence, or when it may not wait (``max_wait_ms`` 0); otherwise it is parked for up to
``max_wait_ms``. New data in the log (an append) wakes the parked follower fetches of its
partition, a high watermark change the parked consumer fetches (``docs/replication.md`` §3, long
polls); an error in the partition wakes them all. A woken fetch is read again, a follower's only
while this node still leads the partition in the epoch the fetch named, and the log still has
the offset it asked for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Any, Protocol

from seglog.cluster.messages import (
    CONSUMER_REPLICA_ID,
    ISOLATION_LOG_END,
    NONE,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
)
from seglog.cluster.metadata import TopicPartition
from seglog.cluster.partition import Partition
from seglog.cluster.transport import Reply
from seglog.errors import (
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
    code_for_exception,
)

__all__ = ["FetchHandler", "FetchHost", "ParkedFetch"]


class FetchHost(Protocol):
    """What the fetch handler uses of its node (a :class:`~seglog.cluster.node.ReplicaNode`)."""

    node_id: int
    running: bool
    scheduler: Any

    @property
    def partitions(self) -> Mapping[TopicPartition, Partition]:
        """The partitions the node hosts now."""
        ...

    @property
    def offline_partitions(self) -> Collection[TopicPartition]:
        """The partitions of the node's failed log dirs."""
        ...

    def offline_error(self, tp: TopicPartition) -> KafkaStorageError:
        """The error a request for ``tp`` gets while its replica is offline."""
        ...


@dataclasses.dataclass(slots=True)
class ParkedFetch:
    """A fetch waiting for data (or for its ``max_wait_ms`` timer) before it is answered."""

    src: int
    req: FetchRequest
    reply: Reply
    timer: Any = None
    done: bool = False


class FetchHandler:
    """The fetch requests one node serves as a leader (see module docs)."""

    def __init__(self, node: FetchHost) -> None:
        self.node = node
        self.parked: dict[TopicPartition, list[ParkedFetch]] = {}

    def handle(self, src: int, req: FetchRequest, reply: Reply) -> None:
        """Answer ``req`` from node (or client) ``src`` now, or park it (see module docs)."""
        resp, total, stop = self.read(req, first=True)
        if stop or total >= req.min_bytes or req.max_wait_ms <= 0:
            reply(resp)
            return
        pf = ParkedFetch(src, req, reply)
        pf.timer = self.node.scheduler.schedule(f"fetch wait {src}", lambda: self.finish(pf), delay_ms=req.max_wait_ms)
        for fp in req.partitions:
            self.parked.setdefault((fp.topic, fp.partition), []).append(pf)

    def read(self, req: FetchRequest, *, first: bool) -> tuple[FetchResponse, int, bool]:
        """Read ``req`` from every partition it names: the response, the bytes it holds, and
        whether it must be answered now (an error or a divergence)."""
        node = self.node
        out = []
        total = 0
        stop = False  # an error or a divergence answers at once
        budget = req.max_bytes
        for fp in req.partitions:
            tp = (fp.topic, fp.partition)
            p = node.partitions.get(tp)
            if p is None:
                e: KafkaError = (
                    node.offline_error(tp)
                    if tp in node.offline_partitions
                    else UnknownTopicOrPartitionError(f"node {node.node_id} hosts no {fp.topic}-{fp.partition}")
                )
                out.append(FetchPartitionResponse(fp.topic, fp.partition, code_for_exception(e), message=str(e)))
                stop = True
                continue
            if req.replica_id >= 0:
                if first:
                    r = p.fetch_for_follower(req.replica_id, req.broker_epoch, fp, budget)
                else:
                    r = self._reread_follower(p, fp, budget)
            else:
                r = p.fetch_for_consumer(fp, budget, req.isolation)
            size = len(r.records) if isinstance(r.records, (bytes, bytearray)) else r.records.size
            total += size
            budget = max(0, budget - size)
            if r.error != NONE or r.diverging_epoch >= 0 or r.diverging_end_offset >= 0:
                stop = True
            out.append(r)
        return FetchResponse(tuple(out)), total, stop

    def _reread_follower(self, p: Partition, fp: FetchPartition, budget: int) -> FetchPartitionResponse:
        if not p.is_leader or fp.current_leader_epoch != p.leader_epoch:
            return p.fetch_error(
                NotLeaderOrFollowerError(f"node {self.node.node_id} no longer leads {p.topic}-{p.partition}")
            )
        if fp.fetch_offset > p.log.log_end_offset or fp.fetch_offset < p.log.log_start_offset:
            return p.fetch_error(NotLeaderOrFollowerError(f"{p.topic}-{p.partition} moved under the fetch"))
        return p.read(fp.fetch_offset, min(budget, fp.max_bytes), ISOLATION_LOG_END)

    def finish(self, pf: ParkedFetch) -> None:
        """Answer a parked fetch now (read again), once."""
        if pf.done:
            return
        pf.done = True
        self.node.scheduler.cancel(pf.timer)
        for fp in pf.req.partitions:
            lst = self.parked.get((fp.topic, fp.partition))
            if lst and pf in lst:
                lst.remove(pf)
        if not self.node.running:
            return
        resp, _, _ = self.read(pf.req, first=False)
        pf.reply(resp)

    def complete(
        self, tp: TopicPartition, *, followers: bool = True, consumers: bool = True, error: bool = False
    ) -> None:
        """Answer the fetches parked on ``tp``: the followers', the consumers', or (``error``)
        all of them."""
        lst = self.parked.get(tp)
        if not lst:
            return
        for pf in list(lst):
            is_follower = pf.req.replica_id != CONSUMER_REPLICA_ID
            if error or (is_follower and followers) or (not is_follower and consumers):
                self.finish(pf)

    def fail_all(self) -> None:
        """Drop every parked fetch unanswered (the node stops)."""
        for lst in list(self.parked.values()):
            for pf in list(lst):
                pf.done = True
                self.node.scheduler.cancel(pf.timer)
        self.parked.clear()
