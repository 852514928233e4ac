"""The embedded producer (Kafka's ``KafkaProducer``, in process).

>>> import tempfile
>>> from seglog import Store
>>> store = Store.open(tempfile.mkdtemp())
>>> _ = store.create_topic("events", partitions=2)
>>> producer = store.producer(linger_ms=5)
>>> future = producer.send("events", b"v1", key=b"k1")
>>> producer.flush()
>>> md = future.get()
>>> (md.topic, md.partition, md.offset)
('events', 1, 0)
>>> [(r.partition, r.first_offset, r.last_offset)
...  for r in producer.send_batch("events", [b"a", b"b", b"c"], keys=[b"k1", b"k2", b"k3"])]
[(0, 0, 0), (1, 1, 2)]
>>> store.close()

Records go through one :class:`~seglog._native.accumulator.ProducerBatch` per partition (the
record accumulator): ``send`` encodes the record into its partition's open batch at once and
returns a :class:`~seglog._native.accumulator.RecordFuture`. A batch is written to the log when it
reaches ``batch.size`` bytes, when ``linger.ms`` has passed since its first record (a timer on
the store's clock), on :meth:`Producer.flush`, or when one of its futures is asked for its
result. With ``linger.ms=0`` (Kafka's default) every ``send`` is written before it returns and
returns the :class:`~seglog._native.accumulator.RecordMetadata` itself.

Partitioning is Kafka's: ``murmur2(key) % partitions`` for keyed records, and for records
without a key the sticky partitioner (all records go to one partition until a batch for it is
complete, then another partition is chosen at random; KIP-480/794 without broker load).

``send_batch`` is the column path: values, keys, timestamps as lists, NumPy or Arrow arrays;
records are grouped by partition in C, encoded batch by batch (each up to
``max.request.size``) and appended directly, after any lingering records of the topic.

Idempotence (``enable.idempotence``, on by default as in Kafka 3): the producer gets a producer
id from the store and numbers each partition's batches; the log refuses gaps and answers a
repeat of one of the last five batches with its original offsets.

``acks``: ``0`` does not report offsets (they are -1); ``1`` and ``all`` report them once the
batch is in the log (for a single store the leader is the only replica, so they are the same).

Thread-safety: one lock serialises every call; a producer may be shared by threads.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from seglog._native.accumulator import (
    Accumulator,
    ProducerBatch,
    RecordFuture,
    RecordMetadata,
    ReentrantLock,
    TopicSlots,
)
from seglog._native.partition import group_by_partition
from seglog.client.columns import as_key_list, has_null, records_per_batch, slice_columns, take
from seglog.client.partitioner import partitions_for_keys
from seglog.config import ProducerConfig
from seglog.errors import (
    InvalidRecordError,
    KafkaStorageError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
)
from seglog.storage.records import codec_id, encode_batch
from seglog.util.clock import Clock
from seglog.util.closing import Closeable

if TYPE_CHECKING:
    from seglog.storage.log_manager import LogManager

log = logging.getLogger("seglog.client.producer")

__all__ = ["BatchResult", "Producer", "RecordFuture", "RecordMetadata"]

_SEQ_MOD = 2**31
_TOPIC_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@dataclasses.dataclass(frozen=True, slots=True)
class BatchResult:
    """One batch written by :meth:`Producer.send_batch`: records ``first_offset`` ..
    ``last_offset`` of ``partition`` (offsets -1 with ``acks=0``)."""

    topic: str
    partition: int
    first_offset: int
    last_offset: int
    record_count: int
    log_append_time: int = -1


class Producer(Closeable):
    """Create with :meth:`seglog.Store.producer`."""

    def __init__(
        self, store: LogManager, config: Mapping[str, Any] | ProducerConfig | None = None, **settings: Any
    ) -> None:
        cfg = ProducerConfig.coerce(config)
        if settings:
            cfg = cfg.with_overrides(**settings)
        self.config = cfg
        self._store = store
        self._clock = store.clock
        self._lock = ReentrantLock()
        self._acks = cfg.required_acks
        self._linger = cfg.linger_ms
        self._batch_size = cfg.batch_size
        self._codec = codec_id(cfg.compression_type)
        self._ignore_keys = cfg.partitioner_ignore_keys
        self._closed = False
        self.idempotent = cfg.idempotent
        self.producer_id = store._allocate_producer_id() if self.idempotent else -1
        self.producer_epoch = 0 if self.idempotent else -1
        self._sequences: dict[tuple[str, int], int] = {}
        self._rng = random.Random()
        # send_batch's batches are encoded into this one buffer (under the lock), each appended
        # before the next is encoded: a new 1 MiB bytes a batch is mapped and faulted in page by
        # page by the C allocator each time.
        self._batch_buf = bytearray()
        self._linger_task: Any = None
        # The system clock is read in C; an injected clock through its method.
        clock_ms = None if type(self._clock) is Clock else self._clock.time_ms
        self._acc = Accumulator(
            self._lock,
            store._generation,
            self._new_batch,
            self._send,
            self._slots_for,
            clock_ms,
            self._batch_size,
            self._linger <= 0,
            self._ignore_keys,
        )
        self._topics: dict[str, TopicSlots] = self._acc.topics
        # The per-record path goes straight to the accumulator's C method.
        self.send = self._acc.send  # type: ignore[method-assign]

    # ---------------------------------------------------------------------------------------------

    def _slots_for(self, topic: str) -> TopicSlots:
        """The producer's state for ``topic`` (the topic is created if auto-creation is on)."""
        if self._closed:
            raise KafkaStorageError("the producer is closed")
        old = self._topics.get(topic)
        if old is not None:
            # The topic changed under us: what is pending goes where it was meant to go.
            for b in old.batches:
                if b is not None:
                    self._send(b)
            del self._topics[topic]
        generation = self._store._generation.value
        t = self._store.ensure_topic(topic)
        cfg = t.config
        codec, level = self._codec, self._level(self._codec)
        if cfg.compression_type != "producer":
            codec = _TOPIC_CODECS[cfg.compression_type]
            level = self._topic_level(cfg, codec)
        max_batch = min(self.config.max_request_size, cfg.max_message_bytes, cfg.segment_bytes)
        n = len(t.partitions)
        st = TopicSlots(topic, n, self._rng.randrange(n), cfg.compact, max_batch, codec, level)
        st.parts = list(t.partitions)
        st.generation = generation
        self._topics[topic] = st
        return st

    def _level(self, codec: int) -> int | None:
        cfg = self.config
        level = {1: cfg.compression_gzip_level, 3: cfg.compression_lz4_level, 4: cfg.compression_zstd_level}.get(codec)
        return None if level is None or level == -1 else level

    @staticmethod
    def _topic_level(cfg: Any, codec: int) -> int | None:
        level = {1: cfg.compression_gzip_level, 3: cfg.compression_lz4_level, 4: cfg.compression_zstd_level}.get(codec)
        return None if level is None or level == -1 else level

    def partitions_for(self, topic: str) -> list[int]:
        """The partition numbers of ``topic`` (creating it if auto-creation is on)."""
        with self._lock:
            return list(range(self._state(topic).num_partitions))

    def _state(self, topic: str) -> TopicSlots:
        st = self._topics.get(topic)
        if st is None or st.generation != self._store._generation.value:
            st = self._slots_for(topic)
        return st

    # ---------------------------------------------------------------------------------------------
    # send
    # ---------------------------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: Any,
        key: Any = None,
        headers: Any = None,
        timestamp: int | None = None,
        partition: int | None = None,
    ) -> Any:
        """Send one record. Returns a :class:`RecordFuture` (``.get()`` gives the
        :class:`RecordMetadata`), or with ``linger.ms=0`` the RecordMetadata itself.

        ``value``/``key``: bytes-like or None; ``headers``: a list of ``(str, bytes)`` pairs;
        ``timestamp``: milliseconds (default: now, on the store's clock). Raises
        ``UnknownTopicOrPartitionError`` for a partition the topic does not have,
        ``InvalidRecordError`` for a keyless record on a compacted topic,
        ``RecordTooLargeError`` for a record over ``max.request.size``."""
        return self._acc.send(topic, value, key, headers, timestamp, partition)

    def _new_batch(self, st: TopicSlots, partition: int) -> ProducerBatch:
        b = ProducerBatch.for_partition(
            st.name, partition, self._batch_size, st.max_batch, min(max(self._batch_size, 1024), 1 << 20)
        )
        b.sender = self._send_from_future
        st.batches[partition] = b
        if self._linger > 0:
            b.created_ms = self._clock.monotonic_ms()
            if self._linger_task is None and self._store._scheduler is not None:
                # One pending timer per producer, for the oldest open batch: scheduling (and
                # waking the scheduler thread) once per batch would cost more than the batch.
                self._linger_task = self._store._scheduler.schedule(
                    "producer linger", self._linger_expired, delay_ms=self._linger
                )
        return b

    def _linger_expired(self) -> None:
        """Send every batch open for ``linger.ms``; re-arm for the oldest one left."""
        with self._lock:
            self._linger_task = None
            if self._closed:
                return
            now = self._clock.monotonic_ms()
            oldest = None
            for st in list(self._topics.values()):
                for b in st.batches:
                    if b is None:
                        continue
                    if now - b.created_ms >= self._linger:
                        self._send(b)
                    elif oldest is None or b.created_ms < oldest:
                        oldest = b.created_ms
            if oldest is not None and self._store._scheduler is not None:
                self._linger_task = self._store._scheduler.schedule(
                    "producer linger", self._linger_expired, delay_ms=oldest + self._linger - now
                )

    def _send_from_future(self, b: ProducerBatch, timeout: float | None = None) -> None:
        # In process, waiting would only delay the batch: it is written now, whatever the timeout.
        with self._lock:
            if not b.done and not b.sealed:
                self._send(b)

    def _send(self, b: ProducerBatch) -> None:
        """Write one open batch to the log; its outcome goes to its futures."""
        topic = b.topic
        assert topic is not None  # the producer's batches are made for a topic (_new_batch)
        st = self._topics.get(topic)
        if st is not None and b.partition < len(st.batches) and st.batches[b.partition] is b:
            st.batches[b.partition] = None
            if b.partition == st.sticky and st.num_partitions > 1:
                st.sticky = (st.sticky + 1 + self._rng.randrange(st.num_partitions - 1)) % st.num_partitions
        if b.done:
            return
        tp = (topic, b.partition)
        seq = self._sequences.get(tp, 0) if self.idempotent else -1
        codec = st.codec if st is not None else self._codec
        level = st.level if st is not None else None
        try:
            data = b.build(
                compression=codec,
                compression_level=level,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=seq,
            )
            try:
                part = (
                    st.parts[b.partition] if st is not None and st.parts else self._store.partition(topic, b.partition)
                )
                # Encoded just now by this thread, under the producer's lock: its CRC is the
                # encoder's own, so the log does not compute it a second time.
                first, append_time = part.append_batch(data, verify_crc=False)
            finally:
                if isinstance(data, memoryview):
                    data.release()
        except Exception as exc:  # noqa: BLE001 - the error belongs to the batch's futures
            b.fail(exc)
            b.discard()
            return
        self._store._notify()
        if self.idempotent:
            self._sequences[tp] = (seq + b.count) % _SEQ_MOD
        b.complete(first if self._acks != 0 else -1, append_time)
        b.discard()

    # ---------------------------------------------------------------------------------------------
    # send_batch
    # ---------------------------------------------------------------------------------------------

    def send_batch(
        self,
        topic: str,
        values: Any,
        keys: Any = None,
        timestamps: Any = None,
        headers: Sequence[Any] | None = None,
        partition: int | None = None,
    ) -> list[BatchResult]:
        """Send a column of records (values, and optionally keys, timestamps, headers, each
        a list, NumPy array or Arrow array of the same length) and return once they are in the
        log: one :class:`BatchResult` per batch written, in write order."""
        with self._lock:
            st = self._state(topic)
            n = len(values)
            if keys is not None and len(keys) != n:
                raise ValueError(f"keys has {len(keys)} items, values has {n}")
            if headers is not None and len(headers) != n:
                raise ValueError(f"headers has {len(headers)} items, values has {n}")
            if n == 0:
                return []
            if st.compact and (keys is None or has_null(keys)):
                raise InvalidRecordError(f"compacted topic {topic!r} cannot accept a record without a key")
            for b in st.batches:
                if b is not None:
                    self._send(b)
            if timestamps is None:
                timestamps = self._clock.time_ms()
            results: list[BatchResult] = []
            if partition is not None:
                if not 0 <= partition < st.num_partitions:
                    raise UnknownTopicOrPartitionError(
                        f"partition {partition} of topic {topic!r} does not exist (the topic has "
                        f"{st.num_partitions} partition(s))"
                    )
                self._write_range(st, partition, values, keys, timestamps, headers, results)
            elif keys is None or self._ignore_keys:
                self._write_sticky(st, values, keys, timestamps, headers, results)
            else:
                parts = partitions_for_keys(as_key_list(keys), st.num_partitions)
                order, groups = group_by_partition(parts, st.num_partitions, st.sticky)
                if len(groups) == 1:
                    self._write_range(st, groups[0][0], values, keys, timestamps, headers, results)
                else:
                    for p, start, end in groups:
                        idx = order[start:end]
                        self._write_range(
                            st,
                            p,
                            take(values, idx),
                            take(keys, idx),
                            take(timestamps, idx),
                            take(headers, idx),
                            results,
                        )
            return results

    def _write_sticky(
        self, st: TopicSlots, values: Any, keys: Any, timestamps: Any, headers: Any, results: list[BatchResult]
    ) -> None:
        n = len(values)
        per = records_per_batch(st.max_batch, values, keys)
        start = 0
        while start < n:
            end = min(n, start + per)
            self._write_range(st, st.sticky, *slice_columns(start, end, values, keys, timestamps, headers), results)
            if st.num_partitions > 1:
                st.sticky = (st.sticky + 1 + self._rng.randrange(st.num_partitions - 1)) % st.num_partitions
            start = end

    def _write_range(
        self,
        st: TopicSlots,
        partition: int,
        values: Any,
        keys: Any,
        timestamps: Any,
        headers: Any,
        results: list[BatchResult],
    ) -> None:
        n = len(values)
        per = records_per_batch(st.max_batch, values, keys)
        start = 0
        while start < n:
            end = min(n, start + per)
            try:
                self._write_one(st, partition, *slice_columns(start, end, values, keys, timestamps, headers), results)
            except RecordTooLargeError:
                if end - start == 1:
                    raise
                per = max(1, (end - start) // 2)
                continue
            start = end

    def _write_one(
        self,
        st: TopicSlots,
        partition: int,
        values: Any,
        keys: Any,
        timestamps: Any,
        headers: Any,
        results: list[BatchResult],
    ) -> None:
        n = len(values)
        tp = (st.name, partition)
        seq = self._sequences.get(tp, 0) if self.idempotent else -1
        data = encode_batch(
            values,
            keys=keys,
            timestamps=timestamps,
            headers=headers,
            compression=st.codec,
            compression_level=st.level,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=seq,
            into=self._batch_buf,
        )
        if len(data) > st.max_batch:
            raise RecordTooLargeError(
                f"a batch of {n} record(s) is {len(data)} bytes, over the limit of {st.max_batch} "
                "bytes (max.request.size / max.message.bytes)",
                limit=st.max_batch,
            )
        part = st.parts[partition] if st.parts else self._store.partition(st.name, partition)
        first, append_time = part.append_batch(data, verify_crc=False)  # bytes encoded just above
        self._store._notify()
        if self.idempotent:
            self._sequences[tp] = (seq + n) % _SEQ_MOD
        if self._acks == 0:
            results.append(BatchResult(st.name, partition, -1, -1, n, append_time))
        else:
            results.append(BatchResult(st.name, partition, first, first + n - 1, n, append_time))

    # ---------------------------------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> None:
        """Write every lingering batch now."""
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        for st in list(self._topics.values()):
            for b in st.batches:
                if b is not None:
                    self._send(b)

    def close(self, timeout: float | None = None) -> None:
        """Flush and close; later sends raise."""
        with self._lock:
            if self._closed:
                return
            try:
                self.flush()
            finally:
                self._closed = True
                if self._linger_task is not None and self._store._scheduler is not None:
                    self._store._scheduler.cancel(self._linger_task)
                    self._linger_task = None
                self._topics.clear()
                self._store._forget_client(self)

    def __repr__(self) -> str:
        return (
            f"Producer(producer_id={self.producer_id}, acks={self.config.acks}, "
            f"linger_ms={self._linger}, batch_size={self._batch_size})"
        )
