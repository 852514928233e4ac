"""Clients of a running cluster over Kafka's protocol: bootstrap from any node's Kafka
listener, then follow metadata.

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
(:class:`~seglog.cluster.producer.ClusterProducer`, :class:`~seglog.cluster.consumer.ClusterConsumer`),
each with a :class:`seglog.kafka.client.KafkaClient` of its own: each request goes to the
partition's leader as the latest metadata names it; on ``NotLeaderOrFollowerError``, a lost
connection or a timeout the client refreshes metadata from any broker it knows (the bootstrap
addresses when none answers) and retries with exponential backoff (``retry.backoff.ms`` up to
``retry.backoff.max.ms``) until ``delivery.timeout.ms``. An idempotent producer keeps its
producer id and sequence numbers across leader changes, so a retried batch the old leader had
already replicated is acknowledged once, at its original offsets.

The admin calls are Kafka's APIs: CreateTopics, Metadata (:meth:`ClusterClient.describe_topics`),
ElectLeaders, DeleteRecords, ListOffsets (:meth:`ClusterClient.watermarks`). Since everything
is Kafka's protocol, a client bootstrapped from a single store's listener (``seglog serve``)
produces and consumes there too.

Every request runs on one asyncio loop on a background thread; the objects are thread-safe.
"""

from __future__ import annotations

import asyncio
import ssl as ssl_module
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from seglog.cluster.consumer import ClusterConsumer
from seglog.cluster.metadata import PartitionInfo, PartitionState
from seglog.cluster.network import client_security, cluster_kafka_client, topic_config_strings
from seglog.cluster.producer import ClusterProducer
from seglog.errors import KafkaError, SaslAuthenticationError, SeglogError, SslAuthenticationError
from seglog.kafka.client import KafkaClient
from seglog.kafka.codec import Message
from seglog.util.clock import Clock
from seglog.util.closing import Closeable
from seglog.util.loop import LoopOwner


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


def partition_infos(resp: Message) -> dict[tuple[str, int], PartitionInfo]:
    """The partitions of a Metadata response as :class:`PartitionInfo` (leader, leader epoch,
    replicas, ISR; what Kafka's Metadata does not carry is left at its default)."""
    out: dict[tuple[str, int], PartitionInfo] = {}
    for t in resp["topics"]:
        if t["error_code"]:
            continue
        for p in t["partitions"]:
            state = PartitionState(p["leader_id"], p.get("leader_epoch", -1), tuple(p["isr_nodes"]))
            info = PartitionInfo(t["name"], p["partition_index"], tuple(p["replica_nodes"]), state)
            out[info.tp] = info
    return out


class ClusterClient(LoopOwner, Closeable):
    """A client of a cluster (or of one Kafka listener) bootstrapped from ``bootstrap``, the
    Kafka listeners' ``host:port`` (see module docs). ``client_config``: Kafka's client keys
    for listeners that want TLS or SASL (``security.protocol``, ``ssl.ca.location``,
    ``sasl.mechanism``...: :func:`seglog.cluster.network.client_security`); or, made by the
    caller, ``ssl``: an :class:`ssl.SSLContext` for listeners that speak TLS and ``sasl``:
    (mechanism, user name, password) for listeners that want SASL (PLAIN, SCRAM-SHA-256,
    SCRAM-SHA-512)."""

    _what = "client"

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        ssl: ssl_module.SSLContext | None = None,
        sasl: tuple[str, str, str] | None = None,
        client_config: Mapping[str, Any] | None = None,
        metadata_timeout_s: float = 30,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        if client_config is not None:
            if ssl is not None or sasl is not None:
                raise ValueError("give client_config or ssl=/sasl=, not both")
            ssl, sasl = client_security(client_config)
        self.ssl = ssl
        self.sasl = sasl
        self.clock = Clock()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="seglog-client", daemon=True)
        self._thread.start()
        self._closed = False
        #: The live brokers' node ids, from the latest metadata.
        self.live: set[int] = set()
        self.controller_id = -1
        self.partitions: dict[tuple[str, int], PartitionInfo] = {}
        self._admin = self._client()
        deadline = time.monotonic() + metadata_timeout_s
        last = ""
        while True:
            try:
                self.refresh()
            except (SaslAuthenticationError, SslAuthenticationError):
                self.close()  # a refused login or an untrusted certificate: asking again cannot help
                raise
            except SeglogError as exc:
                last = str(exc)
            if self.live:
                break
            if time.monotonic() > deadline:
                self.close()
                raise TimeoutError(
                    f"no Kafka listener answered a metadata request at {', '.join(self.bootstrap)} within "
                    f"{metadata_timeout_s} s" + (f" (last: {last})" if last else "")
                )
            time.sleep(0.1)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(self.bootstrap)

    def _client(self) -> KafkaClient:
        return cluster_kafka_client(self.bootstrap, self.ssl, self.sasl)

    # -- public ---------------------------------------------------------------------------------

    def refresh(self, topic: str | None = None) -> None:
        """Ask the cluster for fresh metadata now (of every topic, or of ``topic``)."""
        resp = self._call(self._admin.refresh_metadata(None if topic is None else [topic]))
        self.live = {b["node_id"] for b in resp["brokers"]}
        self.controller_id = resp.get("controller_id", -1)
        infos = partition_infos(resp)
        if topic is None:
            self.partitions = infos
        else:
            self.partitions = {tp: p for tp, p in self.partitions.items() if tp[0] != topic} | infos

    def describe_topics(self, topics: Iterable[str] | None = None) -> list[PartitionInfo]:
        """Every partition's replicas and state (leader, leader epoch, ISR), fresh from a node."""
        self.refresh()
        wanted = set(topics) if topics is not None else None
        return [p for tp, p in sorted(self.partitions.items()) if wanted is None or tp[0] in wanted]

    def leader(self, topic: str, partition: int = 0) -> int | None:
        self.refresh(topic)
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
        """Create a topic (CreateTopics) and wait until every partition has a leader in the
        metadata."""
        create = self._admin.create_topic(
            name, partitions, replication_factor, topic_config_strings(config), timeout_ms=int(timeout_s * 1000)
        )
        self._call(create, timeout_s + 30)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.refresh(name)
            except SeglogError:
                pass
            if all(
                (p := self.partitions.get((name, i))) is not None and p.state.leader >= 0 for i in range(partitions)
            ):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name!r} has no leader for every partition after {timeout_s} s")
            time.sleep(0.05)

    def elect_preferred_leader(self, topic: str, partition: int = 0) -> int:
        """ElectLeaders (preferred) for the partition; returns the leader elected (its preferred
        replica), or raises the error the cluster answers (``ElectionNotNeededError``...)."""
        self._call(self._admin.elect_preferred_leader(topic, partition), 60)
        self.refresh(topic)
        return self.partitions[(topic, partition)].replicas[0]

    def delete_records(self, topic: str, partition: int, offset: int, *, timeout_ms: int = 30_000) -> int:
        """DeleteRecords: records of ``topic``-``partition`` below ``offset`` (-1: the high
        watermark) are deleted on the leader at once; returns the low watermark once every live
        replica has moved its log start there. Raises ``OffsetOutOfRangeError`` above the high
        watermark, ``RequestTimedOutError`` after ``timeout_ms`` (its ``offset``: the low
        watermark reached)."""
        return int(
            self._call(
                self._admin.delete_records(topic, partition, offset, timeout_ms=timeout_ms), timeout_ms / 1000 + 30
            )
        )

    def watermarks(self, topic: str, partition: int = 0) -> tuple[int, int, int] | None:
        """``(log start, high watermark, low watermark)`` of the partition, from its leader now
        (None when no leader answers); the low watermark is -1 until every live follower has
        fetched from the current leader."""
        try:
            result: tuple[int, int, int] = self._call(self._admin.watermarks(topic, partition), 60)
        except KafkaError:
            return None
        return result

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
        try:
            self._call(self._admin.close(), 10)
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
