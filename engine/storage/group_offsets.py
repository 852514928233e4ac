"""Committed consumer offsets in Kafka's internal ``__consumer_offsets`` topic.

A group's offsets live in partition ``abs(javaHashCode(group.id)) % offsets.topic.num.partitions``
of the compacted topic ``__consumer_offsets``, one record per (group, topic, partition): the
latest record for a key is the committed offset, a tombstone (null value) removes it. The
schemas are Kafka's (``OffsetCommitKey`` / ``OffsetCommitValue`` in
``group-coordinator/src/main/resources/common/message/``), all big-endian::

    key, version 0 or 1 (offset commit)         key, version 2 (group metadata: skipped)
      int16   version                             int16   version = 2
      string  group      (int16 length + UTF-8)   string  group
      string  topic
      int32   partition

    value, version 3 (written here; what Kafka 2.1+ writes)
      int16   version = 3
      int64   offset
      int32   leader epoch (-1 unknown)
      string  metadata
      int64   commit timestamp

Values of versions 0 (offset, metadata, commit timestamp), 1 (... , expire timestamp), 2
(offset, metadata, commit timestamp) and 4 (flexible: compact string, tagged fields) are read.
"""

from __future__ import annotations

import dataclasses
import struct
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from seglog.errors import CorruptRecordError
from seglog.storage.records import batch_headers, decode_records, encode_batch

if TYPE_CHECKING:
    from seglog.storage.log import Log
    from seglog.storage.log_manager import LogManager

OFFSETS_TOPIC = "__consumer_offsets"

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


@dataclasses.dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset: the next offset the group will consume, with its metadata."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1
    commit_timestamp: int = -1


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, 32-bit wraparound, signed)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for_group(group_id: str, num_partitions: int) -> int:
    """Kafka's ``GroupCoordinator.partitionFor``: ``Utils.abs(hashCode) % partitions``."""
    h = java_string_hash(group_id)
    h = 0 if h == -(1 << 31) else abs(h)
    return h % num_partitions


def _string(s: str) -> bytes:
    b = s.encode("utf-8")
    if len(b) > 32767:
        raise ValueError(f"string of {len(b)} bytes is too long for the offsets schema (max 32767)")
    return _I16.pack(len(b)) + b


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    return _I16.pack(1) + _string(group) + _string(topic) + _I32.pack(partition)


def encode_offset_value(om: OffsetAndMetadata) -> bytes:
    return (
        _I16.pack(3)
        + _I64.pack(om.offset)
        + _I32.pack(om.leader_epoch)
        + _string(om.metadata)
        + _I64.pack(om.commit_timestamp)
    )


class _Reader:
    __slots__ = ("buf", "pos", "what")

    def __init__(self, buf: bytes, what: str) -> None:
        self.buf = buf
        self.pos = 0
        self.what = what

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise CorruptRecordError(f"{self.what} ends after {len(self.buf)} bytes, inside a field at byte {self.pos}")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self.take(8))[0])

    def string(self) -> str:
        n = self.i16()
        return "" if n < 0 else self.take(n).decode("utf-8", "replace")

    def uvarint(self) -> int:
        shift = out = 0
        while True:
            b = self.take(1)[0]
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
            if shift > 28:
                raise CorruptRecordError(f"{self.what}: varint too long at byte {self.pos}")

    def compact_string(self) -> str:
        n = self.uvarint() - 1
        return "" if n < 0 else self.take(n).decode("utf-8", "replace")


def decode_offset_key(key: bytes) -> tuple[str, str, int] | None:
    """(group, topic, partition) of an offset-commit key; None for other key types."""
    r = _Reader(key, "__consumer_offsets key")
    version = r.i16()
    if version not in (0, 1):
        return None
    return r.string(), r.string(), r.i32()


def decode_offset_value(value: bytes) -> OffsetAndMetadata:
    r = _Reader(value, "__consumer_offsets value")
    version = r.i16()
    if version in (0, 1, 2):
        offset = r.i64()
        metadata = r.string()
        ts = r.i64()
        return OffsetAndMetadata(offset, metadata, -1, ts)
    if version == 3:
        offset = r.i64()
        epoch = r.i32()
        metadata = r.string()
        return OffsetAndMetadata(offset, metadata, epoch, r.i64())
    if version >= 4:
        offset = r.i64()
        epoch = r.i32()
        metadata = r.compact_string()
        return OffsetAndMetadata(offset, metadata, epoch, r.i64())
    raise CorruptRecordError(f"unknown __consumer_offsets value version {version}")


def read_offsets(log: Log, upper_bound: str = "high_watermark") -> dict[tuple[str, str, int], OffsetAndMetadata]:
    """Replay a ``__consumer_offsets`` partition's log from its start to ``upper_bound``
    (``"high_watermark"``, or ``"log_end"`` for a replica that has just become leader): the
    committed offsets by (group, topic, partition), the last record of a key winning and a
    tombstone removing it; other key types (group metadata) are skipped."""
    cache: dict[tuple[str, str, int], OffsetAndMetadata] = {}
    end = log.high_watermark if upper_bound == "high_watermark" else log.log_end_offset
    offset = log.log_start_offset
    while offset < end:
        res = log.read(offset, 1 << 20, upper_bound=upper_bound)
        nxt = offset
        for view in res.views():
            try:
                heads = batch_headers(view)
                if heads:
                    nxt = max(nxt, heads[-1].last_offset + 1)
                for rec in decode_records(view, min_offset=offset):
                    if rec.key is None:
                        continue
                    k = decode_offset_key(rec.key)
                    if k is None:
                        continue
                    if rec.value is None:
                        cache.pop(k, None)
                    else:
                        cache[k] = decode_offset_value(rec.value)
            finally:
                view.release()
        if nxt <= offset:
            break
        offset = nxt
    return cache


def offsets_batch(group: str, offsets: Mapping[tuple[str, int], OffsetAndMetadata | None], now_ms: int) -> bytes:
    """One record batch committing ``offsets`` of ``group`` (None: a tombstone), stamped ``now_ms``."""
    keys = []
    values: list[bytes | None] = []
    for (topic, partition), om in offsets.items():
        keys.append(encode_offset_key(group, topic, partition))
        values.append(None if om is None else encode_offset_value(om))
    return encode_batch(values, keys=keys, timestamps=now_ms)


class GroupOffsets:
    """The committed offsets of every group, cached per ``__consumer_offsets`` partition and
    loaded from the log the first time a group of that partition is asked for."""

    def __init__(self, store: LogManager) -> None:
        self._store = store
        self._lock = threading.RLock()
        self._loaded: dict[int, dict[tuple[str, str, int], OffsetAndMetadata]] = {}

    def _num_partitions(self) -> int:
        return self._store._offsets_topic_partitions()

    def _partition_of(self, group: str) -> int:
        return partition_for_group(group, self._num_partitions())

    def _load(self, p: int) -> dict[tuple[str, str, int], OffsetAndMetadata]:
        cache = self._loaded.get(p)
        if cache is not None:
            return cache
        log = self._store._existing_log(OFFSETS_TOPIC, p)
        cache = {} if log is None else read_offsets(log)
        self._loaded[p] = cache
        return cache

    def committed(self, group: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        with self._lock:
            return self._load(self._partition_of(group)).get((group, topic, partition))

    def group_offsets(self, group: str) -> dict[tuple[str, int], OffsetAndMetadata]:
        with self._lock:
            cache = self._load(self._partition_of(group))
            return {(t, p): om for (g, t, p), om in cache.items() if g == group}

    def groups(self) -> list[str]:
        with self._lock:
            names: set[str] = set()
            for p in range(self._num_partitions()):
                if self._store._existing_log(OFFSETS_TOPIC, p) is not None:
                    names.update(g for g, _, _ in self._load(p))
            return sorted(names)

    def commit(
        self, group: str, offsets: Mapping[tuple[str, int], OffsetAndMetadata | None], *, durable: bool = True
    ) -> None:
        """Append one batch with the group's new offsets (None deletes one) and, when
        ``durable``, fsync it before returning."""
        if not offsets:
            return
        with self._lock:
            p = self._partition_of(group)
            cache = self._load(p)
            batch = offsets_batch(group, offsets, self._store.clock.time_ms())
            log = self._store._ensure_offsets_log(p)
            self._store._append_to(OFFSETS_TOPIC, p, batch)
            if durable:
                log.flush()
            for (topic, partition), om in offsets.items():
                if om is None:
                    cache.pop((group, topic, partition), None)
                else:
                    cache[(group, topic, partition)] = om

    def forget_topic(self, topic: str) -> Iterable[tuple[str, int]]:
        """Cached entries of a deleted topic are dropped (tombstones are written by the store)."""
        with self._lock:
            gone = []
            for cache in self._loaded.values():
                for k in [k for k in cache if k[1] == topic]:
                    del cache[k]
                    gone.append((k[0], k[2]))
            return gone

    def invalidate(self) -> None:
        with self._lock:
            self._loaded.clear()
