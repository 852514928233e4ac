"""Committed consumer offsets and group metadata in Kafka's internal ``__consumer_offsets`` topic.

A group's records live in partition ``abs(javaHashCode(group.id)) % offsets.topic.num.partitions``
of the compacted topic ``__consumer_offsets``: one record per (group, topic, partition) for a
committed offset and one per group for its membership; the latest record for a key wins, a
tombstone (null value) removes it. The schemas are Kafka's (``OffsetCommitKey`` /
``OffsetCommitValue`` / ``GroupMetadataKey`` / ``GroupMetadataValue`` in
``group-coordinator/src/main/resources/common/message/``), all big-endian::

    key, version 0 or 1 (offset commit)         key, version 2 (group metadata)
      int16   version                             int16   version = 2
      string  group      (int16 length + UTF-8)   string  group
      string  topic
      int32   partition

    offset value, version 3 (written here; what Kafka 2.1+ writes)
      int16   version = 3
      int64   offset
      int32   leader epoch (-1 unknown)
      string  metadata
      int64   commit timestamp

    group metadata value, version 3 (written here; what Kafka 2.3+ writes)
      int16   version = 3
      string  protocol type
      int32   generation
      string  protocol (nullable: -1 length)
      string  leader (nullable)
      int64   current state timestamp
      int32   member count, then per member:
        string  member id
        string  group instance id (nullable)
        string  client id
        string  client host
        int32   rebalance timeout ms
        int32   session timeout ms
        bytes   subscription (int32 length + bytes)
        bytes   assignment

Offset values of versions 0 (offset, metadata, commit timestamp), 1 (... , expire timestamp), 2
(offset, metadata, commit timestamp) and 4 (flexible: compact string, tagged fields) are read;
group metadata values of versions 0 (no rebalance timeout, state timestamp or instance id), 1
(rebalance timeout), 2 (state timestamp) and 4 (flexible) too.
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


@dataclasses.dataclass(frozen=True, slots=True)
class MemberMetadata:
    """A member of a group's generation, as the group metadata record keeps it: its
    subscription is its metadata for the generation's protocol."""

    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class GroupMetadata:
    """A group's generation: written when its SyncGroup completes and when it empties."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    state_timestamp: int = -1
    members: tuple[MemberMetadata, ...] = ()


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


def _nullable(s: str | None) -> bytes:
    return _I16.pack(-1) if s is None else _string(s)


def _bytes(b: bytes) -> bytes:
    return _I32.pack(len(b)) + b


def encode_group_key(group: str) -> bytes:
    return _I16.pack(2) + _string(group)


def encode_group_value(md: GroupMetadata) -> bytes:
    out = [
        _I16.pack(3),
        _string(md.protocol_type),
        _I32.pack(md.generation),
        _nullable(md.protocol),
        _nullable(md.leader),
        _I64.pack(md.state_timestamp),
        _I32.pack(len(md.members)),
    ]
    for m in md.members:
        out += [
            _string(m.member_id),
            _nullable(m.instance_id),
            _string(m.client_id),
            _string(m.client_host),
            _I32.pack(m.rebalance_timeout_ms),
            _I32.pack(m.session_timeout_ms),
            _bytes(m.subscription),
            _bytes(m.assignment),
        ]
    return b"".join(out)


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

    def nullable_string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self.take(n).decode("utf-8", "replace")

    def bytes_(self) -> bytes:
        n = self.i32()
        return b"" if n < 0 else self.take(n)

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

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint() - 1
        return None if n < 0 else self.take(n).decode("utf-8", "replace")

    def compact_bytes(self) -> bytes:
        n = self.uvarint() - 1
        return b"" if n < 0 else self.take(n)

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def decode_offset_key(key: bytes) -> tuple[str, str, int] | None:
    """(group, topic, partition) of an offset-commit key; None for other key types."""
    r = _Reader(key, "__consumer_offsets key")
    version = r.i16()
    if version not in (0, 1):
        return None
    return r.string(), r.string(), r.i32()


def decode_group_key(key: bytes) -> str | None:
    """The group of a group metadata key (version 2); None for other key types."""
    r = _Reader(key, "__consumer_offsets key")
    if r.i16() != 2:
        return None
    return r.string()


def decode_group_value(value: bytes) -> GroupMetadata:
    r = _Reader(value, "__consumer_offsets group metadata value")
    version = r.i16()
    if not 0 <= version <= 4:
        raise CorruptRecordError(f"unknown __consumer_offsets group metadata value version {version}")
    flexible = version >= 4
    text = r.compact_string if flexible else r.string
    nullable = r.compact_nullable_string if flexible else r.nullable_string
    blob = r.compact_bytes if flexible else r.bytes_
    protocol_type = text()
    generation = r.i32()
    protocol = nullable()
    leader = nullable()
    ts = r.i64() if version >= 2 else -1
    count = r.uvarint() - 1 if flexible else r.i32()
    members = []
    for _ in range(max(count, 0)):
        member_id = text()
        instance_id = nullable() if version >= 3 else None
        client_id = text()
        client_host = text()
        rebalance = r.i32() if version >= 1 else -1
        session = r.i32()
        subscription = blob()
        assignment = blob()
        if flexible:
            r.skip_tags()
        if rebalance < 0:
            rebalance = session
        members.append(
            MemberMetadata(member_id, instance_id, client_id, client_host, rebalance, session, subscription, assignment)
        )
    return GroupMetadata(protocol_type, generation, protocol, leader, ts, tuple(members))


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


class PartitionReplay:
    """Replays a ``__consumer_offsets`` partition's log from its start to ``upper_bound``
    (``"high_watermark"``, or ``"log_end"`` for a replica that has just become leader), one read
    of ``chunk_bytes`` at a time (:meth:`step`): the committed offsets by (group, topic,
    partition) and the group metadata by group, the last record of a key winning and a
    tombstone removing it. The end is the bound when the replay starts."""

    def __init__(self, log: Log, upper_bound: str = "high_watermark", chunk_bytes: int = 1 << 20) -> None:
        self.log = log
        self.upper_bound = upper_bound
        self.chunk_bytes = chunk_bytes
        self.end = log.high_watermark if upper_bound == "high_watermark" else log.log_end_offset
        self.position = log.log_start_offset
        self.done = self.position >= self.end
        self.offsets: dict[tuple[str, str, int], OffsetAndMetadata] = {}
        self.groups: dict[str, GroupMetadata] = {}

    def step(self) -> bool:
        """Read the next chunk; True once the whole range is replayed."""
        if self.done:
            return True
        offset = self.position
        res = self.log.read(offset, self.chunk_bytes, upper_bound=self.upper_bound)
        nxt = offset
        for view in res.views():
            try:
                heads = batch_headers(view)
                if heads:
                    nxt = max(nxt, heads[-1].last_offset + 1)
                for rec in decode_records(view, min_offset=offset):
                    if rec.key is not None:
                        self._apply(rec.key, rec.value)
            finally:
                view.release()
        self.position = nxt
        self.done = nxt <= offset or nxt >= self.end
        return self.done

    def _apply(self, key: bytes, value: bytes | None) -> None:
        k = decode_offset_key(key)
        if k is not None:
            if value is None:
                self.offsets.pop(k, None)
            else:
                self.offsets[k] = decode_offset_value(value)
            return
        g = decode_group_key(key)
        if g is not None:
            if value is None:
                self.groups.pop(g, None)
            else:
                self.groups[g] = decode_group_value(value)


def replay(
    log: Log, upper_bound: str = "high_watermark"
) -> tuple[dict[tuple[str, str, int], OffsetAndMetadata], dict[str, GroupMetadata]]:
    """The committed offsets and group metadata of a ``__consumer_offsets`` partition's log
    (:class:`PartitionReplay`, run to its end)."""
    r = PartitionReplay(log, upper_bound)
    while not r.step():
        pass
    return r.offsets, r.groups


def read_offsets(log: Log, upper_bound: str = "high_watermark") -> dict[tuple[str, str, int], OffsetAndMetadata]:
    """The committed offsets of a ``__consumer_offsets`` partition's log (:func:`replay`)."""
    return replay(log, upper_bound)[0]


def group_batch(group: str, md: GroupMetadata | None, now_ms: int) -> bytes:
    """One record batch holding ``group``'s metadata record (None: a tombstone), stamped ``now_ms``."""
    return encode_batch(
        [None if md is None else encode_group_value(md)], keys=[encode_group_key(group)], timestamps=now_ms
    )


def offsets_batch(group: str, offsets: Mapping[tuple[str, int], OffsetAndMetadata | None], now_ms: int) -> bytes:
    """One record batch committing ``offsets`` of ``group`` (None: a tombstone), stamped ``now_ms``."""
    keys = []
    values: list[bytes | None] = []
    for (topic, partition), om in offsets.items():
        keys.append(encode_offset_key(group, topic, partition))
        values.append(None if om is None else encode_offset_value(om))
    return encode_batch(values, keys=keys, timestamps=now_ms)


class GroupOffsets:
    """The committed offsets and group metadata of every group, cached per
    ``__consumer_offsets`` partition and loaded from the log the first time a group of that
    partition is asked for."""

    def __init__(self, store: LogManager) -> None:
        self._store = store
        self._lock = threading.RLock()
        self._loaded: dict[int, dict[tuple[str, str, int], OffsetAndMetadata]] = {}
        self._groups: dict[int, dict[str, GroupMetadata]] = {}

    def _num_partitions(self) -> int:
        return self._store._offsets_topic_partitions()

    def _partition_of(self, group: str) -> int:
        return partition_for_group(group, self._num_partitions())

    def _load(self, p: int) -> dict[tuple[str, str, int], OffsetAndMetadata]:
        cache = self._loaded.get(p)
        if cache is not None:
            return cache
        log = self._store._existing_log(OFFSETS_TOPIC, p)
        cache, groups = ({}, {}) if log is None else replay(log)
        self._loaded[p] = cache
        self._groups[p] = groups
        return cache

    def group_metadata(self, group: str) -> GroupMetadata | None:
        """The group's last stored generation (None: none stored, or deleted)."""
        with self._lock:
            p = self._partition_of(group)
            self._load(p)
            return self._groups[p].get(group)

    def store_group(self, group: str, md: GroupMetadata | None, *, durable: bool = True) -> None:
        """Append the group's metadata record (None: a tombstone) and, when ``durable``, fsync it."""
        with self._lock:
            p = self._partition_of(group)
            self._load(p)
            batch = group_batch(group, md, self._store.clock.time_ms())
            log = self._store._ensure_offsets_log(p)
            self._store._append_to(OFFSETS_TOPIC, p, batch)
            if durable:
                log.flush()
            if md is None:
                self._groups[p].pop(group, None)
            else:
                self._groups[p][group] = md

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
            self._groups.clear()
