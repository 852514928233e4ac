"""The cluster's producer: records to partition leaders over Kafka's protocol.

Made by :meth:`seglog.cluster.local.LocalCluster.producer` and
:meth:`seglog.cluster.client.ClusterClient.producer`; thread-safe, its requests run on their loop.
``ClusterProducer.send_batch`` takes columns as :meth:`seglog.client.producer.Producer.send_batch`
does and ships them as ~1 MiB batches, several in flight. Requests go through a
:class:`seglog.kafka.client.KafkaClient` (Produce, InitProducerId, Metadata), so the producer
works against a cluster's nodes, a single store's listener (``seglog serve``) or a Kafka broker.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import dataclasses
import threading
import time
from typing import Any

from seglog._native.partition import group_by_partition
from seglog.client.columns import as_key_list, records_per_batch, slice_column, take
from seglog.client.partitioner import partition_for_key, partitions_for_keys
from seglog.client.producer import BatchResult
from seglog.cluster.network import ClientHost, kafka_keys
from seglog.config import ProducerConfig
from seglog.errors import (
    IndeterminateWriteError,
    KafkaError,
    LeaderNotAvailableError,
    NotLeaderOrFollowerError,
    OutOfOrderSequenceError,
    RequestTimedOutError,
    SeglogError,
    UnknownTopicOrPartitionError,
)
from seglog.kafka.client import ProduceResult
from seglog.storage.records import encode_batch
from seglog.util.closing import Closeable

__all__ = ["ClusterProducer", "ClusterRecordMetadata", "PendingRecord"]


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterRecordMetadata:
    """Where an acknowledged record of a :class:`ClusterProducer` went."""

    topic: str
    partition: int
    offset: int


@dataclasses.dataclass(slots=True)
class PendingRecord:
    """A record :meth:`ClusterProducer.send` took, waiting in its partition's queue for a batch."""

    value: bytes | None
    key: bytes | None
    timestamp: int
    future: concurrent.futures.Future[ClusterRecordMetadata]


class ClusterProducer(Closeable):
    """Sends records to partition leaders (see :meth:`seglog.cluster.local.LocalCluster.producer`,
    :meth:`seglog.cluster.client.ClusterClient.producer`).

    One request in flight per partition; records sent meanwhile wait and go out together as
    the next batch (up to ``batch.size``). A batch is retried (same sequence numbers when
    idempotent) until ``delivery.timeout.ms``; its futures then fail with the last error, whose
    ``definitely_not_written`` says whether the records may be in the log.
    """

    def __init__(self, cluster: ClientHost, config: ProducerConfig) -> None:
        self.cluster = cluster
        self.config = config
        self.acks = config.required_acks
        self.idempotent = config.idempotent
        self._c = cluster._client()
        self._queues: dict[tuple[str, int], collections.deque[PendingRecord]] = {}
        self._incoming: collections.deque[tuple[str, int | None, PendingRecord]] = collections.deque()
        self._wake_pending = False
        self._unrouted: dict[str, list[tuple[int | None, PendingRecord]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._in_flight: set[tuple[str, int]] = set()
        self._seq: dict[tuple[str, int], int] = {}
        self._pid = -1
        self._epoch = -1
        self._pid_lock: asyncio.Lock | None = None
        self._sticky: dict[str, int] = {}
        self._closed = False
        self._lock = threading.Lock()
        self._outstanding: set[concurrent.futures.Future[ClusterRecordMetadata]] = set()
        self._locks: dict[tuple[str, int], asyncio.Lock] = {}
        # Batch buffers of send_batch, kept for the next batches once their requests are
        # answered (as Kafka's producer keeps its buffer pool): a fresh 1 MiB buffer a batch is
        # mapped and faulted in page by page by the C allocator each time.
        self._buffers: list[bytearray] = []

    @classmethod
    def from_keywords(cls, cluster: ClientHost, **config: Any) -> ClusterProducer:
        """A producer of ``cluster``; keywords are Kafka producer keys with '_' for '.'
        (``acks="all"``, ``linger_ms=5``, ``enable_idempotence=True``, ``delivery_timeout_ms=...``)."""
        return cls(cluster, ProducerConfig.from_dict(kafka_keys(config)))

    # -- public (any thread) ---------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> concurrent.futures.Future[ClusterRecordMetadata]:
        if self._closed:
            raise RuntimeError("the producer is closed")
        fut: concurrent.futures.Future[ClusterRecordMetadata] = concurrent.futures.Future()
        with self._lock:
            self._outstanding.add(fut)
        fut.add_done_callback(self._forget)
        ts = timestamp if timestamp is not None else self.cluster.clock.time_ms()
        self._incoming.append((topic, partition, PendingRecord(value, key, ts, fut)))
        if not self._wake_pending:
            # One loop wake-up per burst of sends, not one per record.
            self._wake_pending = True
            self.cluster.loop.call_soon_threadsafe(self._take_incoming)
        return fut

    def send_batch(
        self,
        topic: str,
        values: Any,
        keys: Any = None,
        timestamps: Any = None,
        partition: int | None = None,
        timeout: float | None = None,
    ) -> list[BatchResult]:
        """Send a column of records (values, optionally keys and timestamps: lists, NumPy or
        Arrow arrays, as :meth:`seglog.client.producer.Producer.send_batch` takes them) and return once
        every batch is acknowledged (``acks``): one :class:`~seglog.client.producer.BatchResult` per
        batch, in write order. The columns are cut into batches of up to ``max.request.size``
        (1 MiB), each encoded once and shipped whole; up to
        ``max.in.flight.requests.per.connection`` of them are in flight to a leader at once."""
        if self._closed:
            raise RuntimeError("the producer is closed")
        n = len(values)
        if keys is not None and len(keys) != n:
            raise ValueError(f"keys has {len(keys)} items, values has {n}")
        if n == 0:
            return []
        with self._lock:
            earlier = bool(self._outstanding)
        if earlier:
            # Records sent one at a time before this call are written first, as the store's
            # producer writes its lingering batches first.
            self.flush(self.config.delivery_timeout_ms / 1000 + 5)
        if timestamps is None:
            timestamps = self.cluster.clock.time_ms()
        nparts = self.cluster._call(self._partition_count(topic))
        groups: list[tuple[int, Any, Any, Any]] = []
        if partition is not None:
            if not 0 <= partition < nparts:
                raise UnknownTopicOrPartitionError(
                    f"partition {partition} of topic {topic!r} does not exist (the topic has {nparts} partition(s))"
                )
            groups.append((partition, values, keys, timestamps))
        elif keys is None:
            groups.append((self._sticky.setdefault(topic, 0), values, keys, timestamps))
        else:
            parts = partitions_for_keys(as_key_list(keys), nparts)
            order, spans = group_by_partition(parts, nparts, self._sticky.setdefault(topic, 0))
            for p, a, b in spans:
                idx = order[a:b]
                groups.append((p, take(values, idx), take(keys, idx), take(timestamps, idx)))
        chunks: list[tuple[int, Any, Any, Any]] = []
        limit = self.config.max_request_size
        for p, v, k, t in groups:
            per = records_per_batch(limit, v, k)
            for a in range(0, len(v), per):
                b = min(len(v), a + per)
                chunks.append((p, slice_column(v, a, b), slice_column(k, a, b), slice_column(t, a, b)))
        fut = asyncio.run_coroutine_threadsafe(self._ship_columns(topic, chunks), self.cluster.loop)
        try:
            return fut.result(timeout if timeout is not None else self.config.delivery_timeout_ms / 1000 + 30)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TimeoutError(f"send_batch of {n} records to {topic!r} not acknowledged in time") from None

    def _forget(self, fut: concurrent.futures.Future[ClusterRecordMetadata]) -> None:
        with self._lock:
            self._outstanding.discard(fut)

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every record sent so far is acknowledged or has failed."""
        with self._lock:
            waiting = list(self._outstanding)
        _, not_done = concurrent.futures.wait(waiting, timeout)
        if not_done:
            raise TimeoutError(f"{len(not_done)} records still unacknowledged after {timeout} s")

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.flush(self.config.delivery_timeout_ms / 1000 + 5)
        finally:
            self._closed = True
            if not self.cluster._closed:
                self.cluster._call(self._c.close(), 10)

    # -- loop thread -----------------------------------------------------------------------------

    def _take_incoming(self) -> None:
        self._wake_pending = False
        incoming = self._incoming
        while incoming:
            topic, partition, rec = incoming.popleft()
            waiting = self._unrouted.get(topic)
            if waiting is not None:
                waiting.append((partition, rec))
            elif topic in self._c.topic_partitions:
                self._place(topic, partition, rec)
            else:
                # One metadata lookup per unknown topic; its records wait for it, in order.
                self._unrouted[topic] = [(partition, rec)]
                task = self.cluster.loop.create_task(self._route(topic))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _route(self, topic: str) -> None:
        try:
            await self._partition_count(topic)
        except UnknownTopicOrPartitionError as exc:
            for _, rec in self._unrouted.pop(topic, []):
                rec.future.set_exception(exc)
            return
        for partition, rec in self._unrouted.pop(topic, []):
            self._place(topic, partition, rec)

    def _place(self, topic: str, partition: int | None, rec: PendingRecord) -> None:
        n = self._c.topic_partitions[topic]
        if partition is None:
            if rec.key is not None:
                partition = partition_for_key(rec.key, n)
            else:
                partition = self._sticky.setdefault(topic, 0)
        tp = (topic, partition)
        self._queues.setdefault(tp, collections.deque()).append(rec)
        if tp not in self._in_flight:
            self._in_flight.add(tp)
            if self.config.linger_ms > 0:
                self.cluster.loop.call_later(self.config.linger_ms / 1000, self._start_drain, tp)
            else:
                self._start_drain(tp)

    def _start_drain(self, tp: tuple[str, int]) -> None:
        task = self.cluster.loop.create_task(self._drain(tp))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _ensure_pid(self) -> None:
        if not self.idempotent or self._pid >= 0:
            return
        if self._pid_lock is None:
            self._pid_lock = asyncio.Lock()
        async with self._pid_lock:
            while self._pid < 0:
                try:
                    self._pid, self._epoch = await self._c.init_producer_id(self.config.request_timeout_ms / 1000)
                    return
                except SeglogError:
                    pass
                await self._refresh(None)
                await asyncio.sleep(self.config.retry_backoff_ms / 1000)

    async def _refresh(self, topic: str | None) -> None:
        """Fresh metadata (of ``topic``, or of every topic); a failure to get it is left to the
        request that needs it."""
        try:
            await self._c.refresh_metadata(None if topic is None else [topic])
        except SeglogError:
            pass

    def _tp_lock(self, tp: tuple[str, int]) -> asyncio.Lock:
        # One sender per partition at a time (per-record batches or a send_batch shipment), so
        # that sequence numbers and order hold.
        lock = self._locks.get(tp)
        if lock is None:
            lock = self._locks[tp] = asyncio.Lock()
        return lock

    async def _drain(self, tp: tuple[str, int]) -> None:
        try:
            while self._queues.get(tp):
                await self._ensure_pid()
                async with self._tp_lock(tp):
                    queue = self._queues[tp]
                    batch: list[PendingRecord] = []
                    size = 0
                    while queue and (not batch or size + len(queue[0].value or b"") <= self.config.batch_size):
                        rec = queue.popleft()
                        batch.append(rec)
                        size += len(rec.value or b"") + 16
                    await self._send_batch(tp, batch)
        finally:
            self._in_flight.discard(tp)
            if self._queues.get(tp):
                self._in_flight.add(tp)
                self._start_drain(tp)

    def _encode(
        self, tp: tuple[str, int], values: Any, keys: Any, timestamps: Any, into: bytearray | None = None
    ) -> tuple[bytes | bytearray, int]:
        """One batch of these records at the partition's next sequence (advanced here), written
        into ``into`` when given."""
        seq = self._seq.get(tp, 0) if self.idempotent else -1
        fields: dict[str, Any] = {"keys": keys, "timestamps": timestamps}
        if self.idempotent:
            fields.update(producer_id=self._pid, producer_epoch=self._epoch, base_sequence=seq)
        data: bytes | bytearray = (
            encode_batch(values, **fields) if into is None else encode_batch(values, into=into, **fields)
        )
        if self.idempotent:
            self._seq[tp] = (seq + len(values)) % 2**31
        return data, seq

    def _buffer(self) -> bytearray:
        """A kept batch buffer for the next batch (a new one while none is kept)."""
        return self._buffers.pop() if self._buffers else bytearray()

    def _keep(self, data: bytes | bytearray) -> None:
        """Keep ``data``, a batch buffer whose request was answered (so the connection sent all
        of it and holds no part of it), for a later batch. Not with ``acks=0``: nothing
        answers, so nothing says when the connection is done with the bytes."""
        if (
            type(data) is bytearray
            and self.acks
            and len(self._buffers) <= self.config.max_in_flight_requests_per_connection
        ):
            self._buffers.append(data)

    def _give_up(self, err: BaseException) -> None:
        if self.idempotent and not getattr(err, "definitely_not_written", False):
            # Kafka bumps the epoch after giving up on a batch that may be in the log.
            self._pid = -1
            self._seq.clear()

    async def _send_batch(self, tp: tuple[str, int], batch: list[PendingRecord]) -> None:
        data, seq = self._encode(tp, [r.value for r in batch], [r.key for r in batch], [r.timestamp for r in batch])
        try:
            resp = await self._send_encoded(tp, data)
        except Exception as exc:  # noqa: BLE001 - every record's future must end, whatever failed
            err = exc if isinstance(exc, SeglogError) else IndeterminateWriteError(f"{tp[0]}-{tp[1]}: {exc!r}")
            if self.idempotent and getattr(err, "definitely_not_written", False):
                self._seq[tp] = seq  # nothing written: the next batch takes these numbers
            self._give_up(err)
            for r in batch:
                if not r.future.done():
                    r.future.set_exception(err)
            return
        for k, r in enumerate(batch):
            if not r.future.done():
                offset = resp.base_offset + k if self.acks else -1
                r.future.set_result(ClusterRecordMetadata(tp[0], tp[1], offset))

    async def _request_once(self, tp: tuple[str, int], data: bytes | bytearray) -> ProduceResult:
        """One Produce request to the partition's leader as the metadata names it; raises the
        error it gets. With ``acks`` 0 nothing answers: the result has offset -1."""
        result = await self._c.produce_once(
            tp[0],
            tp[1],
            data,
            acks=self.acks,
            timeout_ms=self.config.request_timeout_ms,
            request_timeout=self.config.request_timeout_ms / 1000 + 1,
        )
        return result if result is not None else ProduceResult(-1, -1, -1)

    async def _send_encoded(
        self, tp: tuple[str, int], data: bytes | bytearray, first_error: BaseException | None = None
    ) -> ProduceResult:
        """Send one encoded batch, retrying (same bytes, so the same sequence numbers) until
        ``delivery.timeout.ms``; raises the last error when it gives up."""
        deadline = time.monotonic() + self.config.delivery_timeout_ms / 1000
        backoff = self.config.retry_backoff_ms / 1000
        last: BaseException | None = first_error
        attempts = 0
        maybe_written = False  # an earlier attempt ended in a way that may have appended
        while True:
            if last is not None:
                if not getattr(last, "definitely_not_written", False) and not isinstance(last, LeaderNotAvailableError):
                    maybe_written = True
                if isinstance(last, OutOfOrderSequenceError):
                    break  # the broker's state disagrees with ours: fatal for this batch
                if (
                    isinstance(last, NotLeaderOrFollowerError)
                    or getattr(last, "retriable", True)
                    or not getattr(last, "definitely_not_written", False)
                ):
                    await self._refresh(tp[0])
                if time.monotonic() + backoff > deadline or (
                    isinstance(last, KafkaError) and not last.retriable and last.definitely_not_written
                ):
                    break
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.config.retry_backoff_max_ms / 1000)
            attempts += 1
            try:
                return await self._request_once(tp, data)
            except SeglogError as exc:
                last = exc
        if last is None:
            raise RequestTimedOutError("delivery timed out")
        if maybe_written and getattr(last, "definitely_not_written", False):
            # The last attempt was refused before appending, but an earlier one may have been
            # appended: the batch's outcome is unknown, not "not written".
            raise RequestTimedOutError(
                f"{tp[0]}-{tp[1]}: gave up after {attempts} attempts; an earlier attempt may have "
                f"been appended (last error: {last})"
            ) from last
        raise last

    async def _partition_count(self, topic: str) -> int:
        """The topic's partition count, waiting up to ``max.block.ms`` for metadata that has
        it (a topic just created reaches the nodes one by one)."""
        deadline = time.monotonic() + self.config.max_block_ms / 1000
        while topic not in self._c.topic_partitions:
            await self._refresh(topic)
            if topic in self._c.topic_partitions:
                break
            if time.monotonic() >= deadline:
                raise UnknownTopicOrPartitionError(
                    f"no topic {topic!r} in the cluster's metadata after max.block.ms={self.config.max_block_ms}"
                )
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
        return self._c.topic_partitions[topic]

    async def _ship_columns(self, topic: str, chunks: list[tuple[int, Any, Any, Any]]) -> list[BatchResult]:
        await self._ensure_pid()
        by_tp: dict[int, list[int]] = {}
        for i, (p, _, _, _) in enumerate(chunks):
            by_tp.setdefault(p, []).append(i)
        results: list[BatchResult | None] = [None] * len(chunks)
        await asyncio.gather(
            *(self._ship_partition((topic, p), [chunks[i] for i in idx], idx, results) for p, idx in by_tp.items())
        )
        return [r for r in results if r is not None]

    async def _ship_partition(
        self,
        tp: tuple[str, int],
        chunks: list[tuple[int, Any, Any, Any]],
        slots: list[int],
        results: list[BatchResult | None],
    ) -> None:
        """Encode and send the chunks of one partition in order, a window of them in flight."""
        window = max(1, self.config.max_in_flight_requests_per_connection)
        async with self._tp_lock(tp):
            flying: collections.deque[tuple[int, bytes | bytearray, int, asyncio.Task[ProduceResult]]]
            flying = collections.deque()
            failed: BaseException | None = None
            retry: list[tuple[int, bytes | bytearray, int, BaseException | None]] = []

            def settle(slot: int, n: int, resp: ProduceResult) -> None:
                results[slot] = BatchResult(
                    tp[0],
                    tp[1],
                    resp.base_offset if self.acks else -1,
                    resp.base_offset + n - 1 if self.acks else -1,
                    n,
                    resp.log_append_time,
                )

            async def retire() -> None:
                nonlocal failed
                slot, data, n, task = flying.popleft()
                try:
                    resp = await task
                except SeglogError as exc:
                    failed = failed or exc
                    retry.append((slot, data, n, exc))
                    return
                settle(slot, n, resp)
                self._keep(data)

            for slot, (_, v, k, t) in zip(slots, chunks):
                if self.idempotent and self._pid < 0:
                    await self._ensure_pid()  # another partition's failure began a new epoch
                data, _ = self._encode(tp, v, k, t, self._buffer())
                if failed is not None:
                    retry.append((slot, data, len(v), None))
                    continue
                while len(flying) >= window:
                    await retire()
                if failed is not None:  # retire() may have set it (mypy keeps the narrowing above)
                    retry.append((slot, data, len(v), None))  # type: ignore[unreachable]
                    continue
                flying.append((slot, data, len(v), asyncio.ensure_future(self._request_once(tp, data))))
            while flying:
                await retire()
            retry.sort(key=lambda r: r[0])
            for slot, data, n, err in retry:
                try:
                    resp = await self._send_encoded(tp, data, None if isinstance(err, OutOfOrderSequenceError) else err)
                except SeglogError:
                    if self.idempotent:
                        # Later batches were numbered after this one: start a new epoch.
                        self._pid = -1
                        self._seq.clear()
                    raise
                settle(slot, n, resp)
                self._keep(data)
