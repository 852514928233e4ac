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
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from seglog._native.accumulator import (
    Accumulator,
    Generation,
    ProducerBatch,
    RecordFuture,
    RecordMetadata,
    ReentrantLock,
    TopicSlots,
)
from seglog._native.partition import group_by_partition
from seglog.client.columns import as_key_list, records_per_batch, slice_column, take
from seglog.client.partitioner import partitions_for_keys
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
from seglog.util.clock import Clock
from seglog.util.closing import Closeable

__all__ = ["ClusterProducer", "ClusterRecordMetadata"]


_TOPIC_CODECS = {"none": 0, "uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

#: What :meth:`ClusterProducer.send`'s future gives: where the record went (``topic``,
#: ``partition``, ``offset``, ``timestamp``, the serialized sizes), as the store's producer's.
ClusterRecordMetadata = RecordMetadata


class _Window:
    """The batches of one partition on their way to its leader: up to ``size`` requests in
    flight at once, answered in order. After a failure nothing new is sent: :meth:`finish`
    retries the failed batches and those queued behind them in order, each with its own bytes
    (the same sequence numbers when idempotent), until ``delivery.timeout.ms``.

    ``settle(token, data, count, result)`` takes each answered batch; ``lose(token, data, error)``
    each batch given up on, and may raise to end the shipment there."""

    def __init__(
        self,
        producer: ClusterProducer,
        tp: tuple[str, int],
        settle: Callable[[Any, Any, int, ProduceResult], None],
        lose: Callable[[Any, Any, BaseException], None],
    ) -> None:
        self.producer = producer
        self.tp = tp
        self.size = max(1, producer.config.max_in_flight_requests_per_connection)
        self.settle = settle
        self.lose = lose
        self.flying: collections.deque[tuple[int, Any, Any, int, asyncio.Task[ProduceResult]]] = collections.deque()
        self.failed: BaseException | None = None
        self.retry: list[tuple[int, Any, Any, int, BaseException | None]] = []
        self._order = 0

    @property
    def full(self) -> bool:
        return len(self.flying) >= self.size

    async def push(self, token: Any, data: Any, count: int) -> None:
        """Send one encoded batch once the window has room (queued for :meth:`finish` after a
        failure)."""
        while self.full and self.failed is None:
            await self.retire()
        self._order += 1
        if self.failed is not None:
            self.retry.append((self._order, token, data, count, None))
            return
        task = asyncio.ensure_future(self.producer._request_once(self.tp, data))
        self.flying.append((self._order, token, data, count, task))

    async def retire(self) -> None:
        """Wait for the oldest request in flight and settle its batch (or note its failure)."""
        order, token, data, count, task = self.flying.popleft()
        try:
            resp = await task
        except Exception as exc:  # noqa: BLE001 - every batch must end, whatever failed
            err = _as_write_error(self.tp, exc)
            self.failed = self.failed or err
            self.retry.append((order, token, data, count, err))
            return
        self.settle(token, data, count, resp)

    async def finish(self) -> None:
        """Wait for everything in flight, then retry what failed, in order."""
        while self.flying:
            await self.retire()
        retry, self.retry, self.failed = sorted(self.retry, key=lambda r: r[0]), [], None
        for _, token, data, count, err in retry:
            try:
                resp = await self.producer._send_encoded(
                    self.tp, data, None if isinstance(err, OutOfOrderSequenceError) else err
                )
            except Exception as exc:  # noqa: BLE001 - as in retire()
                # Later batches were numbered after this one: they go under a new epoch.
                self.producer._new_epoch()
                self.lose(token, data, _as_write_error(self.tp, exc))
                continue
            self.settle(token, data, count, resp)


def _as_write_error(tp: tuple[str, int], exc: BaseException) -> BaseException:
    return exc if isinstance(exc, SeglogError) else IndeterminateWriteError(f"{tp[0]}-{tp[1]}: {exc!r}")


class ClusterProducer(Closeable):
    """Sends records to partition leaders (see :meth:`seglog.cluster.local.LocalCluster.producer`,
    :meth:`seglog.cluster.client.ClusterClient.producer`).

    :meth:`send` appends the record to its partition's open batch at once (the store's record
    accumulator, in C: :class:`~seglog._native.accumulator.ProducerBatch`) and returns its
    :class:`~seglog._native.accumulator.RecordFuture`. A batch goes out when it reaches
    ``batch.size``, when ``linger.ms`` has passed since its first record, or on :meth:`flush`;
    up to ``max.in.flight.requests.per.connection`` requests per partition are in flight, and
    records sent meanwhile fill the next batches. A batch is retried (same sequence numbers when
    idempotent) until ``delivery.timeout.ms``; its futures then fail with the last error, whose
    ``definitely_not_written`` says whether the records may be in the log. Callbacks of the
    futures run on the producer's loop thread.
    """

    def __init__(self, cluster: ClientHost, config: ProducerConfig) -> None:
        self.cluster = cluster
        self.config = config
        self.acks = config.required_acks
        self.idempotent = config.idempotent
        self._c = cluster._client()
        self._tasks: set[asyncio.Task[None]] = set()
        self._seq: dict[tuple[str, int], int] = {}
        self._pid = -1
        self._epoch = -1
        self._pid_lock: asyncio.Lock | None = None
        self._sticky: dict[str, int] = {}
        self._closed = False
        self._locks: dict[tuple[str, int], asyncio.Lock] = {}
        # Batch buffers of send_batch, kept for the next batches once their requests are
        # answered (as Kafka's producer keeps its buffer pool): a fresh 1 MiB buffer a batch is
        # mapped and faulted in page by page by the C allocator each time.
        self._buffers: list[bytearray] = []
        self._codec = _TOPIC_CODECS.get(config.compression_type, 0)
        self._level = {
            1: config.compression_gzip_level,
            3: config.compression_lz4_level,
            4: config.compression_zstd_level,
        }.get(self._codec)
        if self._level == -1:
            self._level = None
        # The record path. Under the lock (taken by the accumulator on the caller's thread, by
        # the loop thread to take batches): the open batches, the full ones waiting to go
        # (``_ready``), the partitions with new batches the loop has not seen (``_dirty``),
        # and every batch not yet answered (``_unfinished``, for flush).
        self._lock = ReentrantLock()
        self._ready: dict[tuple[str, int], collections.deque[ProducerBatch]] = {}
        self._dirty: set[tuple[str, int]] = set()
        self._unfinished: set[ProducerBatch] = set()
        self._wake_pending = False
        self._draining: set[tuple[str, int]] = set()
        self._kicks: dict[tuple[str, int], asyncio.Future[None]] = {}
        self._rng = random.Random()
        # Woken whenever batches are answered, for the threads waiting in RecordFuture.get.
        self._answered = threading.Condition(threading.Lock())
        self._generation = Generation()
        clock = cluster.clock
        self._acc = Accumulator(
            self._lock,
            self._generation,
            self._new_batch,
            self._batch_full,
            self._slots_for,
            None if type(clock) is Clock else clock.time_ms,
            config.batch_size,
            False,
            config.partitioner_ignore_keys,
        )
        self._topics: dict[str, TopicSlots] = self._acc.topics

    @classmethod
    def from_keywords(cls, cluster: ClientHost, **config: Any) -> ClusterProducer:
        """A producer of ``cluster``; keywords are Kafka producer keys with '_' for '.'
        (``acks="all"``, ``linger_ms=5``, ``enable_idempotence=True``, ``delivery_timeout_ms=...``)."""
        return cls(cluster, ProducerConfig.from_dict(kafka_keys(config)))

    # -- public (any thread) ---------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: Any,
        key: Any = None,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Any = None,
    ) -> RecordFuture:
        """Send one record; returns its :class:`~seglog._native.accumulator.RecordFuture`
        (``result(timeout)`` gives the :class:`ClusterRecordMetadata`, ``add_done_callback``
        as a ``concurrent.futures.Future``'s).

        ``value``/``key``: bytes-like or None; ``headers``: a list of ``(str, bytes)`` pairs;
        ``timestamp``: milliseconds (default: now). The first record to a topic waits for its
        metadata up to ``max.block.ms``. Raises ``UnknownTopicOrPartitionError`` for a topic
        the cluster does not have or a partition the topic does not have,
        ``RecordTooLargeError`` for a record over ``max.request.size``."""
        if self._closed:
            raise RuntimeError("the producer is closed")
        st = self._topics.get(topic)
        if st is None or st.num_partitions != self._c.topic_partitions.get(topic):
            self._resolve(topic)
        return self._acc.send(topic, value, key, headers, timestamp, partition)  # type: ignore[return-value]

    def _resolve(self, topic: str) -> None:
        """Wait (up to ``max.block.ms``) for the topic's partition count, and make the
        accumulator take it up if it changed."""
        if topic not in self._c.topic_partitions:
            self._refuse_on_loop(
                f"send() to topic {topic!r}, whose metadata this producer has not seen yet, "
                "cannot wait for it on the producer's own loop thread (in a callback): send "
                "to it once from another thread first"
            )
            self.cluster._call(self._partition_count(topic))
        st = self._topics.get(topic)
        if st is not None and st.num_partitions != self._c.topic_partitions.get(topic):
            with self._lock:
                self._generation.value += 1

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
            earlier = bool(self._unfinished)
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

    def flush(self, timeout: float | None = None) -> None:
        """Send every record sent so far at once (whatever ``linger.ms``) and wait until each
        is acknowledged or has failed; ``TimeoutError`` after ``timeout`` seconds."""
        with self._lock:
            pending = list(self._unfinished)
            for st in list(self._topics.values()):
                for b in st.batches:
                    if b is not None:
                        self._batch_full(b)
        if not pending:
            return
        with self._answered:
            done = self._answered.wait_for(lambda: all(b.done for b in pending), timeout)
        if not done:
            left = sum(b.count for b in pending if not b.done)
            raise TimeoutError(f"{left} records still unacknowledged after {timeout} s")

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.flush(self.config.delivery_timeout_ms / 1000 + 5)
        finally:
            self._closed = True
            if not self.cluster._closed:
                self.cluster._call(self._c.close(), 10)

    # -- the accumulator's callbacks (the caller's thread, under the lock) ---------------------

    def _slots_for(self, topic: str) -> TopicSlots:
        n = self._c.topic_partitions.get(topic)
        if n is None:
            raise UnknownTopicOrPartitionError(f"no topic {topic!r} in the cluster's metadata")
        old = self._topics.pop(topic, None)
        if old is not None:
            # The topic changed under us: what is open goes where it was meant to go.
            for b in old.batches:
                if b is not None:
                    self._batch_full(b, old)
        st = TopicSlots(topic, n, self._rng.randrange(n), False, self.config.max_request_size, self._codec, self._level)
        st.generation = self._generation.value
        self._topics[topic] = st
        return st

    def _new_batch(self, st: TopicSlots, partition: int) -> ProducerBatch:
        size = self.config.batch_size
        b = ProducerBatch.for_partition(st.name, partition, size, st.max_batch, min(max(size, 1024), 1 << 20))
        b.sender = self._await_batch
        b.created_ms = time.monotonic_ns() // 1_000_000
        st.batches[partition] = b
        self._unfinished.add(b)
        self._mark((st.name, partition))
        return b

    def _batch_full(self, b: ProducerBatch, st: TopicSlots | None = None) -> None:
        """``b`` takes no more records: it waits in its partition's queue for the loop."""
        topic = b.topic
        assert topic is not None  # made for a topic (_new_batch)
        if st is None:
            st = self._topics.get(topic)
        if st is not None and b.partition < len(st.batches) and st.batches[b.partition] is b:
            self._detach(st, b)
        tp = (topic, b.partition)
        queue = self._ready.get(tp)
        if queue is None:
            queue = self._ready[tp] = collections.deque()
        queue.append(b)
        self._mark(tp)

    def _detach(self, st: TopicSlots, b: ProducerBatch) -> None:
        st.batches[b.partition] = None
        if b.partition == st.sticky and st.num_partitions > 1:
            # Kafka's sticky partitioner (KIP-480): keyless records move on once a batch is done.
            st.sticky = (st.sticky + 1 + self._rng.randrange(st.num_partitions - 1)) % st.num_partitions

    def _mark(self, tp: tuple[str, int]) -> None:
        self._dirty.add(tp)
        if not self._wake_pending:
            # One loop wake-up per burst of batches, not one per record.
            self._wake_pending = True
            self.cluster.loop.call_soon_threadsafe(self._take_dirty)

    def _await_batch(self, b: ProducerBatch, timeout: float | None) -> None:
        """RecordFuture.get: wait for the batch's answer (up to ``timeout`` s)."""
        self._refuse_on_loop(
            "a record's result cannot be awaited on the producer's own loop thread (in a "
            "callback), which is the thread that receives it: use add_done_callback"
        )
        with self._answered:
            self._answered.wait_for(lambda: b.done, timeout)

    def _refuse_on_loop(self, why: str) -> None:
        """Raise ``RuntimeError(why)`` on the producer's loop thread, where waiting for an answer
        would wait for the thread itself."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            return
        if running is self.cluster.loop:
            raise RuntimeError(why)

    # -- loop thread -----------------------------------------------------------------------------

    def _take_dirty(self) -> None:
        with self._lock:
            self._wake_pending = False
            dirty, self._dirty = self._dirty, set()
        for tp in dirty:
            if tp in self._draining:
                kick = self._kicks.get(tp)
                if kick is not None and not kick.done():
                    kick.set_result(None)
            else:
                self._draining.add(tp)
                self._start_drain(tp)

    def _start_drain(self, tp: tuple[str, int]) -> None:
        task = self.cluster.loop.create_task(self._drain(tp))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _next_batch(self, tp: tuple[str, int]) -> tuple[ProducerBatch | None, float | None]:
        """The partition's next batch to send, or None and how long (s) until its open batch
        has lingered enough (None when it has none)."""
        with self._lock:
            queue = self._ready.get(tp)
            if queue:
                return queue.popleft(), None
            st = self._topics.get(tp[0])
            if st is None or tp[1] >= len(st.batches):
                return None, None
            b = st.batches[tp[1]]
            if b is None or not b.count:
                return None, None
            linger = self.config.linger_ms
            if linger > 0:
                age = time.monotonic_ns() // 1_000_000 - b.created_ms
                if age < linger:
                    return None, (linger - age) / 1000
            self._detach(st, b)
            return b, None

    async def _linger(self, tp: tuple[str, int], wait: float) -> None:
        """Sleep ``wait`` s, or until a batch of the partition is full (``_take_dirty``)."""
        kick: asyncio.Future[None] = self.cluster.loop.create_future()
        self._kicks[tp] = kick

        def wake() -> None:
            if not kick.done():
                kick.set_result(None)

        timer = self.cluster.loop.call_later(wait, wake)
        try:
            await kick
        finally:
            timer.cancel()
            self._kicks.pop(tp, None)

    async def _drain(self, tp: tuple[str, int]) -> None:
        """Send the partition's batches as they come, a window of them in flight."""
        window = _Window(self, tp, self._settle_batch, self._lose_batch)
        try:
            async with self._tp_lock(tp):
                while True:
                    if window.failed is not None:
                        await window.finish()
                    if window.full:
                        await window.retire()
                        continue
                    b, wait = self._next_batch(tp)
                    if b is None:
                        if window.flying:
                            await window.retire()
                        elif wait is not None:
                            await self._linger(tp, wait)
                        else:
                            break
                        continue
                    try:
                        await self._ensure_pid()
                        data = self._build(tp, b)
                    except Exception as exc:  # noqa: BLE001 - the error belongs to the batch's futures
                        self._lose_batch(b, None, _as_write_error(tp, exc))
                        continue
                    await window.push(b, data, b.count)
                await window.finish()
        finally:
            self._draining.discard(tp)
            with self._lock:
                queue = self._ready.get(tp)
                st = self._topics.get(tp[0])
                open_batch = st is not None and tp[1] < len(st.batches) and st.batches[tp[1]] is not None
                again = bool(queue) or open_batch
            if again and not self.cluster.loop.is_closed():
                self._draining.add(tp)
                self._start_drain(tp)

    def _build(self, tp: tuple[str, int], b: ProducerBatch) -> Any:
        """Seal ``b`` at the partition's next sequence (advanced here)."""
        seq = self._seq.get(tp, 0) if self.idempotent else -1
        st = self._topics.get(tp[0])
        data = b.build(
            compression=st.codec if st is not None else self._codec,
            compression_level=st.level if st is not None else self._level,
            producer_id=self._pid if self.idempotent else -1,
            producer_epoch=self._epoch if self.idempotent else -1,
            base_sequence=seq,
        )
        if self.idempotent:
            self._seq[tp] = (seq + b.count) % 2**31
        return data

    def _settle_batch(self, b: ProducerBatch, data: Any, count: int, resp: ProduceResult) -> None:
        b.complete(resp.base_offset if self.acks else -1, resp.log_append_time)
        self._finished(b, data)

    def _lose_batch(self, b: ProducerBatch, data: Any, err: BaseException) -> None:
        b.fail(err)
        self._finished(b, data)

    def _finished(self, b: ProducerBatch, data: Any) -> None:
        with self._lock:
            self._unfinished.discard(b)
        with self._answered:
            self._answered.notify_all()
        if self.acks:
            # Answered: the connection holds no part of the bytes (with acks=0 nothing says so,
            # and the memory goes with the batch).
            try:
                if isinstance(data, memoryview):
                    data.release()
                b.discard()
            except BufferError:
                pass

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

    def _encode(
        self, tp: tuple[str, int], values: Any, keys: Any, timestamps: Any, into: bytearray | None = None
    ) -> tuple[bytes | bytearray, int]:
        """One batch of these records at the partition's next sequence (advanced here), written
        into ``into`` when given."""
        seq = self._seq.get(tp, 0) if self.idempotent else -1
        fields: dict[str, Any] = {
            "keys": keys,
            "timestamps": timestamps,
            "compression": self._codec,
            "compression_level": self._level,
        }
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

    def _new_epoch(self) -> None:
        """Give up on the producer id after a batch was given up on: Kafka bumps the epoch,
        and the batches after it are numbered afresh."""
        if self.idempotent:
            self._pid = -1
            self._seq.clear()

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

        def settle(slot: int, data: bytes | bytearray, n: int, resp: ProduceResult) -> None:
            results[slot] = BatchResult(
                tp[0],
                tp[1],
                resp.base_offset if self.acks else -1,
                resp.base_offset + n - 1 if self.acks else -1,
                n,
                resp.log_append_time,
            )
            self._keep(data)

        def lose(slot: int, data: bytes | bytearray, err: BaseException) -> None:
            raise err

        async with self._tp_lock(tp):
            window = _Window(self, tp, settle, lose)
            for slot, (_, v, k, t) in zip(slots, chunks):
                if self.idempotent and self._pid < 0:
                    await self._ensure_pid()  # another partition's failure began a new epoch
                data, _ = self._encode(tp, v, k, t, self._buffer())
                await window.push(slot, data, len(v))
            await window.finish()
