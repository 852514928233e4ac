"""The request plumbing a cluster's producers and consumers share: a client endpoint on the
cluster's transport with a metadata cache (:class:`NetworkClient`, as Kafka's ``NetworkClient``
with its ``Metadata``), and what it needs from the object that owns the loop and the transport
(:class:`ClientHost`: a :class:`~seglog.cluster.local.LocalCluster` in this process, or a
:class:`~seglog.cluster.client.ClusterClient` bootstrapped from node addresses).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from typing import Any, Protocol

from seglog.cluster.messages import (
    NONE,
    CreateTopicRequest,
    CreateTopicResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    MetadataRequest,
    MetadataResponse,
)
from seglog.cluster.tcp import TcpTransport
from seglog.errors import (
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    SeglogError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from seglog.util.clock import Clock

__all__ = ["ClientHost", "NetworkClient", "kafka_keys"]


class ClientHost(Protocol):
    """What :class:`NetworkClient`, :class:`~seglog.cluster.producer.ClusterProducer` and
    :class:`~seglog.cluster.consumer.ClusterConsumer` use of the object that made them: its
    event loop (on a thread of its own) and transport, its clock, the nodes to ask for metadata,
    and where the controller is."""

    loop: asyncio.AbstractEventLoop
    clock: Clock
    transport: TcpTransport
    _closed: bool

    @property
    def nodes(self) -> Mapping[int, object]:
        """Node ids to ask for metadata, in order; a value of ``None`` is a node known to be
        down (it is skipped)."""
        ...

    def _call(self, coro: Any, timeout: float | None = 60, loop: asyncio.AbstractEventLoop | None = None) -> Any:
        """Run ``coro`` on the loop and wait for its result."""
        ...

    def _on_loop(self, fn: Any, *args: Any, loop: asyncio.AbstractEventLoop | None = None) -> Any:
        """Call ``fn(*args)`` on the loop and wait for its result."""
        ...

    def _controller(self) -> int | None:
        """The controller's node id, or None when none is known."""
        ...

    def _client(self) -> NetworkClient:
        """A new client endpoint on the transport."""
        ...

    def _learn(self, resp: MetadataResponse) -> None:
        """Take what a metadata response says about the nodes (addresses, live brokers)."""
        ...


def kafka_keys(config: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword settings (``linger_ms=5``) as Kafka's keys (``linger.ms``)."""
    return {k.replace("_", "."): v for k, v in config.items()}


class NetworkClient:
    """A client endpoint on the cluster's transport, with a metadata cache (loop thread only,
    except the blocking helpers)."""

    def __init__(self, cluster: ClientHost, client_id: int) -> None:
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
            if (
                isinstance(resp, MetadataResponse)
                and resp.partitions
                and (want is None or any(p.topic == want for p in resp.partitions))
            ):
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

    def create_topic(
        self, name: str, partitions: int, replication_factor: int, config: Mapping[str, Any] | None, timeout_s: float
    ) -> None:
        """Ask the controller to create a topic (``config``: topic keys to values); raises the
        error it answers with. Returns once the controller has written it, before its partitions
        have leaders."""
        req = CreateTopicRequest(
            name, partitions, replication_factor, tuple((k, json.dumps(v)) for k, v in (config or {}).items())
        )
        resp = self.call_controller(req, timeout_s)
        assert isinstance(resp, CreateTopicResponse)
        if resp.error != NONE:
            raise error_for_code(resp.error)(resp.message)

    def elect_preferred_leader(self, topic: str, partition: int, timeout_s: float = 30) -> int:
        """Ask the controller to move the partition's leadership to its preferred replica;
        returns the leader it answers with, or raises its error."""
        resp = self.call_controller(ElectLeadersRequest(topic, partition), timeout_s)
        assert isinstance(resp, ElectLeadersResponse)
        if resp.error != NONE:
            raise error_for_code(resp.error)(resp.message)
        return resp.leader

    async def _leader_of(self, topic: str, partition: int) -> int:
        """The partition's leader as the metadata names it (refreshed when it names none), or
        -1; raises when no node knows the partition."""
        leader = self.metadata.get((topic, partition), (-1, -1))[0]
        if leader < 0:
            await self.refresh_metadata(topic)
            if (topic, partition) not in self.metadata and self.partitions:
                raise UnknownTopicOrPartitionError(f"the cluster has no partition {topic}-{partition}")
            leader = self.metadata.get((topic, partition), (-1, -1))[0]
        return leader

    def delete_records(self, topic: str, partition: int, offset: int, timeout_ms: int) -> int:
        """DeleteRecords on the partition's leader: records below ``offset`` (-1: the high
        watermark) go. Returns the low watermark once it reaches ``offset``; raises the leader's
        error otherwise — ``OffsetOutOfRangeError`` for an offset above the high watermark,
        ``RequestTimedOutError`` after ``timeout_ms`` with the low watermark reached as its
        ``offset`` (the leader's records are gone already). A change of leader is retried."""
        if offset < -1:
            raise ValueError(f"DeleteRecords needs an offset >= 0 (or -1 for the high watermark), got {offset}")

        async def call() -> int:
            deadline = time.monotonic() + timeout_ms / 1000
            last = ""
            while True:
                left = int((deadline - time.monotonic()) * 1000)
                leader = await self._leader_of(topic, partition)
                if leader >= 0 and left > 0:
                    req = DeleteRecordsRequest(topic, partition, offset, left)
                    try:
                        resp = await self.request(leader, req, left + 5000)
                    except SeglogError as exc:
                        resp, last = None, str(exc)
                    if isinstance(resp, DeleteRecordsResponse):
                        if resp.error == NONE:
                            return resp.low_watermark
                        if resp.error != NotLeaderOrFollowerError.code:
                            lw = resp.low_watermark if resp.low_watermark >= 0 else None
                            raise error_for_code(resp.error)(resp.message, offset=lw)
                        last = resp.message
                if time.monotonic() >= deadline:
                    raise RequestTimedOutError(
                        f"DeleteRecords on {topic}-{partition} before {offset}: no leader completed it "
                        f"within {timeout_ms} ms" + (f" (last: {last})" if last else "")
                    )
                await asyncio.sleep(0.05)
                await self.refresh_metadata(topic)

        return int(self.cluster._call(call(), timeout_ms / 1000 + 10))

    def watermarks(self, topic: str, partition: int) -> tuple[int, int, int] | None:
        """``(log start, high watermark, low watermark)`` from the partition's leader now, or
        None when no leader answers for it."""

        async def call() -> tuple[int, int, int] | None:
            leader = await self._leader_of(topic, partition)
            if leader < 0:
                return None
            try:
                resp = await self.request(leader, MetadataRequest((topic,)), 3000)
            except SeglogError:
                return None
            if not isinstance(resp, MetadataResponse):
                return None
            for t, p, start, hw, lw in resp.watermarks:
                if (t, p) == (topic, partition):
                    return start, hw, lw
            return None

        result: tuple[int, int, int] | None = self.cluster._call(call(), 10)
        return result
