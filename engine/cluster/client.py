"""Clients of a running cluster over TCP: bootstrap from any node, then follow metadata.

>>> from seglog.cluster.client import ClusterClient
>>> with ClusterClient("127.0.0.1:9092") as client:             # doctest: +SKIP
...     client.create_topic("orders", partitions=3, replication_factor=3,
...                         config={"min.insync.replicas": 2})
...     producer = client.producer(acks="all", enable_idempotence=True)
...     producer.send("orders", b"order-1", key=b"customer-7").result()
...     producer.close()
...     consumer = client.consumer()
...     consumer.subscribe(["orders"])
...     records = consumer.poll(timeout_ms=2000)
...     for p in client.describe_topics():                    # Leader, Replicas, Isr
...         print(p.topic, p.partition, p.state.leader, p.replicas, p.state.isr)

The producer and consumer are those of :class:`seglog.cluster.local.LocalCluster`
(:class:`~seglog.cluster.producer.ClusterProducer`, :class:`~seglog.cluster.consumer.ClusterConsumer`): each request
goes to the partition's leader as the latest metadata names it; on ``NotLeaderOrFollowerError``,
a lost connection or a timeout the client refreshes metadata from any live node (the bootstrap
addresses when none answers) and retries with exponential backoff (``retry.backoff.ms`` up to
``retry.backoff.max.ms``) until ``delivery.timeout.ms``. An idempotent producer keeps its
producer id and sequence numbers across leader changes, so a retried batch the old leader had
already replicated is acknowledged once, at its original offsets.

Every request runs on one asyncio loop on a background thread; the objects are thread-safe.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from seglog.cluster.consumer import ClusterConsumer
from seglog.cluster.messages import MetadataResponse
from seglog.cluster.metadata import PartitionInfo
from seglog.cluster.network import NetworkClient
from seglog.cluster.producer import ClusterProducer
from seglog.cluster.tcp import TcpTransport
from seglog.errors import KafkaError
from seglog.util.clock import Clock
from seglog.util.closing import Closeable
from seglog.util.loop import LoopOwner

_BOOTSTRAP_BASE = -100  # bootstrap addresses get ids -100, -101, ... until metadata names the nodes


def parse_bootstrap(bootstrap: str | Sequence[str]) -> list[str]:
    items = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    out = []
    for item in items:
        item = item.strip()
        host, colon, port = item.rpartition(":")
        if not colon or not host or not port.isdigit():
            raise ValueError(f"bootstrap address {item!r} is not host:port")
        out.append(item)
    if not out:
        raise ValueError("no bootstrap address given (host:port[,host:port...])")
    return out


class ClusterClient(LoopOwner, Closeable):
    """A connection to a cluster of node processes (see module docs)."""

    _what = "client"

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        secret: bytes | str | None = None,
        ssl: Any = None,
        metadata_timeout_s: float = 30,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.clock = Clock()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="seglog-client", daemon=True)
        self._thread.start()
        self._closed = False
        self._client_ids = iter(range(20_000, 2**31))
        self.live: dict[int, int] = {}  # node id -> broker epoch, from the latest metadata
        self.addresses: dict[int, str] = {}
        self.controller_id = -1
        self.partitions: dict[tuple[str, int], PartitionInfo] = {}

        async def setup() -> None:
            self.transport = TcpTransport(self.loop, secret=secret, client_ssl=ssl)
            for k, addr in enumerate(self.bootstrap):
                self.transport.set_address(_BOOTSTRAP_BASE - k, addr)

        self._call(setup())
        self._admin = self._client()
        deadline = time.monotonic() + metadata_timeout_s
        while True:
            self._call(self._admin.refresh_metadata())
            if self.live:
                break
            if time.monotonic() > deadline:
                self.close()
                raise TimeoutError(
                    f"no node answered a metadata request at {', '.join(self.bootstrap)} within {metadata_timeout_s} s"
                )
            time.sleep(0.1)

    # -- the loop (what ClusterProducer / ClusterConsumer use) ------------------------------------

    @property
    def nodes(self) -> dict[int, object]:
        """Nodes to ask for metadata, in order: the live ones, then the bootstrap addresses."""
        out: dict[int, object] = dict.fromkeys(sorted(self.live), True)
        for k in range(len(self.bootstrap)):
            out[_BOOTSTRAP_BASE - k] = True
        return out

    def _controller(self) -> int | None:
        return self.controller_id if self.controller_id >= 0 else None

    def _client(self) -> NetworkClient:
        return NetworkClient(self, next(self._client_ids))

    def _learn(self, resp: MetadataResponse) -> None:
        for nid, addr in resp.addresses:
            if self.addresses.get(nid) != addr:
                self.addresses[nid] = addr
                self.transport.set_address(nid, addr)
        live = {b: e for b, e in resp.live_brokers if b in self.addresses}
        if live:
            self.live = live
        if resp.controller_id >= 0:
            self.controller_id = resp.controller_id
        if resp.partitions:
            self.partitions = {p.tp: p for p in resp.partitions}

    # -- public ---------------------------------------------------------------------------------

    def refresh(self) -> None:
        """Ask the cluster for fresh metadata now."""
        self._call(self._admin.refresh_metadata())

    def describe_topics(self, topics: Iterable[str] | None = None) -> list[PartitionInfo]:
        """Every partition's replicas and state (leader, leader epoch, ISR), fresh from a node."""
        self.refresh()
        wanted = set(topics) if topics is not None else None
        return [p for tp, p in sorted(self.partitions.items()) if wanted is None or tp[0] in wanted]

    def leader(self, topic: str, partition: int = 0) -> int | None:
        self.refresh()
        p = self.partitions.get((topic, partition))
        return None if p is None or p.state.leader < 0 else p.state.leader

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 3,
        config: Mapping[str, Any] | None = None,
        *,
        timeout_s: float = 30,
    ) -> None:
        """Create a topic and wait until every partition has a leader in the metadata."""
        self._admin.create_topic(name, partitions, replication_factor, config, timeout_s)
        deadline = time.monotonic() + timeout_s
        while True:
            # From a node that knows the new topic: the first node to answer may not have heard
            # of it yet, and its answer would hide the leader another node already reports.
            self._call(self._admin.refresh_metadata(name))
            if all(
                (p := self.partitions.get((name, i))) is not None and p.state.leader >= 0 for i in range(partitions)
            ):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name!r} has no leader for every partition after {timeout_s} s")
            time.sleep(0.05)

    def elect_preferred_leader(self, topic: str, partition: int = 0) -> int:
        return self._admin.elect_preferred_leader(topic, partition)

    def delete_records(self, topic: str, partition: int, offset: int, *, timeout_ms: int = 30_000) -> int:
        """DeleteRecords: records of ``topic``-``partition`` below ``offset`` (-1: the high
        watermark) are deleted on the leader at once; returns the low watermark once every live
        replica has moved its log start there. Raises ``OffsetOutOfRangeError`` above the high
        watermark, ``RequestTimedOutError`` after ``timeout_ms`` (its ``offset``: the low
        watermark reached)."""
        return self._admin.delete_records(topic, partition, offset, timeout_ms)

    def watermarks(self, topic: str, partition: int = 0) -> tuple[int, int, int] | None:
        """``(log start, high watermark, low watermark)`` of the partition, from its leader now
        (None when no leader answers); the low watermark is -1 until every live follower has
        fetched from the current leader."""
        return self._admin.watermarks(topic, partition)

    def producer(self, **config: Any) -> ClusterProducer:
        """A :class:`~seglog.cluster.producer.ClusterProducer`; keywords are Kafka producer keys
        with '_' for '.' (``acks="all"``, ``enable_idempotence=True``, ``delivery_timeout_ms=...``)."""
        return ClusterProducer.from_keywords(self, **config)

    def consumer(self, **config: Any) -> ClusterConsumer:
        """A :class:`~seglog.cluster.consumer.ClusterConsumer` reading committed records from the
        leaders."""
        return ClusterConsumer.from_keywords(self, **config)

    def close(self) -> None:
        if self._closed:
            return

        async def down() -> None:
            await self.transport.close()

        try:
            self._call(down(), 10)
        except (KafkaError, RuntimeError, TimeoutError):
            pass
        finally:
            self._closed = True
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=10)
            if not self._thread.is_alive():
                self.loop.close()


def format_describe(
    partitions: Sequence[PartitionInfo], watermarks: Mapping[tuple[str, int], tuple[int, int, int] | None] | None = None
) -> str:
    """``kafka-topics.sh --describe``'s layout: a topic line, then one line per partition; with
    ``watermarks`` ((log start, HW, LW) per partition, from its leader) those three after the ISR."""
    by_topic: dict[str, list[PartitionInfo]] = {}
    for p in partitions:
        by_topic.setdefault(p.topic, []).append(p)
    lines = []
    for topic, parts in sorted(by_topic.items()):
        parts.sort(key=lambda p: p.partition)
        rf = max(len(p.replicas) for p in parts)
        lines.append(f"Topic: {topic}\tPartitionCount: {len(parts)}\tReplicationFactor: {rf}")
        for p in parts:
            leader = str(p.state.leader) if p.state.leader >= 0 else "none"
            lines.append(
                f"\tTopic: {topic}\tPartition: {p.partition}\tLeader: {leader}\t"
                f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.state.isr))}"
                + (f"\tElr: {','.join(map(str, p.state.elr))}" if p.state.elr else "")
                + _marks((watermarks or {}).get(p.tp), watermarks is not None)
            )
    return "\n".join(lines) + ("\n" if lines else "")


def _marks(marks: tuple[int, int, int] | None, wanted: bool) -> str:
    if not wanted:
        return ""
    if marks is None:
        return "\tLogStart: ?\tHighWatermark: ?\tLowWatermark: ?"
    start, hw, lw = marks
    return f"\tLogStart: {start}\tHighWatermark: {hw}\tLowWatermark: {lw if lw >= 0 else '?'}"
