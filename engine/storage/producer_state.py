"""Idempotent-producer state of one partition (Kafka's ``ProducerStateManager``,
``ProducerAppendInfo`` and ``ProducerStateEntry``), held by the partition's
:class:`~seglog.storage.log.Log` (``Log.producer_state``; the log checks client appends against
it, updates it from every append, snapshots it at a roll and reloads it after a truncation), with
Kafka's ``.snapshot`` files when given a directory.

Per producer id: the producer epoch and the metadata of its last five batches (first/last
sequence, first/last offset, timestamp). A batch from a client is checked before it reaches
the log (Kafka 3.x ``ProducerAppendInfo.checkSequence``):

1. it repeats one of the five cached batches (same epoch, same first and last sequence): a
   duplicate — nothing is appended, the original offsets are returned;
2. its epoch is older than the producer's: ``InvalidProducerEpochError``;
3. a newer epoch must start at sequence 0 (unless the producer had no epoch yet);
4. the same epoch must continue at last sequence + 1 (0 after 2^31-1; 0 when the producer has no
   batch left, e.g. after a truncation); otherwise ``OutOfOrderSequenceError`` — a duplicate
   older than the five-batch window lands here too. A producer the state does not know
   (expired, or its records deleted) may start at any sequence.

Followers apply their batches without checks (replication origin), so a newly elected leader
answers retries of batches its predecessor replicated with the original offsets.

Persistence. The store's logs keep no snapshots (``ProducerStateManager(name=...)``): the store
allocates producer ids that are never reused, so the state of earlier sessions is needed only
for a producer that outlives a restart of the store (a Kafka client retrying a batch whose
answer was lost): the log rebuilds the state from its active segment's batches
(:meth:`ProducerStateManager.rebuild`) before its first idempotent append after the open.
A replica's log (``Log.open(..., producer_snapshots=True)``, ``ProducerStateManager(partition_dir)``)
writes snapshot files ``<offset %020d>.snapshot``
(``ProducerSnapshot`` v1, big-endian; the offset is the log offset the state reflects, i.e. the
log end offset when it was taken)::

    int16  version = 1
    uint32 crc              CRC-32C of every byte after this field
    int32  count
    count x 46 bytes:
      int64 producerId  int16 epoch  int32 lastSequence  int64 lastOffset
      int32 offsetDelta (lastSeq - firstSeq of the last batch)  int64 timestamp
      int32 coordinatorEpoch  int64 currentTxnFirstOffset (-1: none)

Kafka keeps only each producer's last batch in a snapshot; on load the state is rebuilt from
the latest snapshot at or below the log end plus the batches after it. Snapshots are written at
every segment roll (state as of the new segment's base offset) and at clean shutdown, and
deleted beyond the log end (after truncation) and below the log start. Open and aborted
transactions are the log's (``Log.last_stable_offset``, ``Log.collect_aborted_transactions``,
the ``.txnindex`` files).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import struct
from collections import deque
from collections.abc import Iterable
from typing import Any

from seglog._native.crc32c import crc32c
from seglog.errors import InvalidProducerEpochError, KafkaStorageError, OutOfOrderSequenceError
from seglog.storage.checkpoints import atomic_write
from seglog.storage.local_log import first_segment_from

log = logging.getLogger("seglog.storage.producer_state")

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 2**31 - 1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
SNAPSHOT_VERSION = 1
SNAPSHOT_SUFFIX = ".snapshot"
_SNAPSHOT_NAME = re.compile(r"^(\d{20})\.snapshot\Z", re.ASCII)
_HEAD = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")
assert _ENTRY.size == 46


@dataclasses.dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One appended batch of a producer: its sequence range and where it landed."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclasses.dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = dataclasses.field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


def last_sequence(base_sequence: int, records: int) -> int:
    """The last sequence of a batch of ``records`` records, wrapping past 2^31-1 as Kafka does
    (-1 for a batch without sequence numbers)."""
    if base_sequence < 0:
        return NO_SEQUENCE
    return (base_sequence + records - 1) % (INT32_MAX + 1)


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def snapshot_path(directory: str, offset: int) -> str:
    return os.path.join(directory, "%020d%s" % (offset, SNAPSHOT_SUFFIX))


def encode_snapshot(entries: Iterable[ProducerEntry]) -> bytes:
    body = bytearray()
    n = 0
    for e in sorted(entries, key=lambda e: e.producer_id):
        if not e.batches:
            continue
        b = e.batches[-1]
        body += _ENTRY.pack(
            e.producer_id,
            e.epoch,
            b.last_seq,
            b.last_offset,
            b.last_seq - b.first_seq if b.last_seq >= b.first_seq else b.last_offset - b.first_offset,
            b.timestamp,
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
        n += 1
    payload = struct.pack(">i", n) + bytes(body)
    return struct.pack(">hI", SNAPSHOT_VERSION, crc32c(payload)) + payload


def decode_snapshot(data: bytes, path: str = "<snapshot>") -> list[ProducerEntry]:
    """Entries of a snapshot file; raises ValueError naming the file on any damage."""
    if len(data) < _HEAD.size:
        raise ValueError(f"producer snapshot {path} is {len(data)} bytes, shorter than its {_HEAD.size}-byte header")
    version, crc, count = _HEAD.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise ValueError(f"producer snapshot {path} has version {version}, expected {SNAPSHOT_VERSION}")
    if crc32c(data[6:]) != crc:
        raise ValueError(f"producer snapshot {path} fails its CRC-32C check")
    if count < 0 or len(data) != _HEAD.size + count * _ENTRY.size:
        raise ValueError(
            f"producer snapshot {path} declares {count} entries but holds "
            f"{len(data) - _HEAD.size} bytes of them ({_ENTRY.size} bytes each)"
        )
    out = []
    for i in range(count):
        pid, epoch, last_seq, last_offset, delta, ts, coord, txn = _ENTRY.unpack_from(
            data, _HEAD.size + i * _ENTRY.size
        )
        e = ProducerEntry(pid, epoch, coordinator_epoch=coord, current_txn_first_offset=txn)
        e.batches.append(BatchMetadata(last_seq - delta, last_seq, last_offset - delta, last_offset, ts))
        out.append(e)
    return out


class ProducerStateManager:
    """Producer state of one partition (see module docs): with ``directory``, a replica's, with
    snapshot files there; without, the store's (in memory; ``name`` labels its errors). Not
    thread-safe: its :class:`~seglog.storage.log.Log` uses it under the log's lock."""

    def __init__(self, directory: str | None = None, *, name: str | None = None) -> None:
        self.dir = directory
        self.name = name or (os.path.basename(directory.rstrip(os.sep)) if directory else "a partition")
        self.producers: dict[int, ProducerEntry] = {}
        self.map_end_offset = 0
        self.snapshots_loaded = 0

    @property
    def entries(self) -> dict[int, ProducerEntry]:
        """The producers by id (the store's name for :attr:`producers`)."""
        return self.producers

    # -- client-side check (leader) -------------------------------------------------------------

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """Validate a client's batch before it is appended; the cached metadata if it repeats
        one of the producer's last five batches, else None. Raises
        ``InvalidProducerEpochError`` or ``OutOfOrderSequenceError``."""
        entry = self.producers.get(producer_id)
        if entry is None or entry.epoch == NO_PRODUCER_EPOCH:
            return None
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {producer_id} sent epoch {epoch} to {self.name}, older than its current epoch {entry.epoch}"
            )
        dup = entry.find_duplicate(epoch, first_seq, last_seq)
        if dup is not None:
            return dup
        if epoch != entry.epoch:
            if first_seq != 0:
                raise OutOfOrderSequenceError(
                    f"producer {producer_id} started epoch {epoch} at sequence {first_seq} on "
                    f"{self.name}; a new epoch must start at sequence 0"
                )
            return None
        current = entry.last_seq
        if not _in_sequence(current, first_seq):
            raise OutOfOrderSequenceError(
                f"producer {producer_id} epoch {epoch} sent sequence {first_seq} to {self.name}; "
                f"expected {(current + 1) % (INT32_MAX + 1)} (last written {current})"
            )
        return None

    # -- updates ---------------------------------------------------------------------------------

    def update(
        self,
        producer_id: int,
        epoch: int,
        first_seq: int,
        last_seq: int,
        first_offset: int,
        last_offset: int,
        timestamp: int,
    ) -> None:
        """Record an appended batch (leader, follower or the store)."""
        if producer_id < 0:
            return
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_id)
        if epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        if first_seq >= 0:
            entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))
        entry.last_timestamp = timestamp
        self.map_end_offset = max(self.map_end_offset, last_offset + 1)

    def truncate(self, end_offset: int) -> None:
        """Forget batches at or past ``end_offset`` (after a log truncation, without snapshots)."""
        for entry in self.producers.values():
            while entry.batches and entry.batches[-1].last_offset >= end_offset:
                entry.batches.pop()
        self.map_end_offset = min(self.map_end_offset, end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget every producer: the log was emptied and continues at ``offset`` (without
        snapshots; with them, :meth:`truncate_and_reload`)."""
        self.producers.clear()
        self.map_end_offset = offset

    def update_from_batches(self, heads: Iterable[Any]) -> None:
        """Apply batch headers (``batch_headers`` / ``BatchInfo``) in log order."""
        for h in heads:
            if h.producer_id >= 0 and not h.is_control:
                self.update(
                    h.producer_id,
                    h.producer_epoch,
                    h.base_sequence,
                    last_sequence(h.base_sequence, h.last_offset - h.base_offset + 1),
                    h.base_offset,
                    h.last_offset,
                    h.max_timestamp,
                )
            self.map_end_offset = max(self.map_end_offset, h.last_offset + 1)

    # -- snapshots -------------------------------------------------------------------------------

    def _directory(self) -> str:
        if self.dir is None:
            raise ValueError(f"the producer state of {self.name} has no directory for snapshots")
        return self.dir

    def snapshot_offsets(self) -> list[int]:
        out = []
        if self.dir is None:
            return []
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        for n in names:
            m = _SNAPSHOT_NAME.match(n)
            if m:
                out.append(int(m.group(1)))
        return sorted(out)

    def take_snapshot(self, offset: int | None = None) -> str:
        """Write the state as ``<offset>.snapshot`` (default: the map end offset)."""
        off = self.map_end_offset if offset is None else offset
        path = snapshot_path(self._directory(), off)
        atomic_write(path, encode_snapshot(self.producers.values()))
        return path

    def delete_snapshots(self, *, above: int | None = None, below: int | None = None) -> None:
        for off in self.snapshot_offsets():
            if (above is not None and off > above) or (below is not None and off < below):
                try:
                    os.unlink(snapshot_path(self._directory(), off))
                except FileNotFoundError:
                    pass

    def load(self, log: Any) -> None:
        """Rebuild from the latest usable snapshot at or below the log end plus the batches
        after it (on open and after truncation)."""
        leo = log.log_end_offset
        start = log.log_start_offset
        self.delete_snapshots(above=leo, below=start)
        self.producers.clear()
        self.map_end_offset = start
        for off in reversed(self.snapshot_offsets()):
            path = snapshot_path(self._directory(), off)
            try:
                with open(path, "rb") as f:
                    entries = decode_snapshot(f.read(), path)
            except (OSError, ValueError) as exc:
                # (``log`` is the partition's Log here, not this module's logger.)
                logging.getLogger("seglog.storage.producer_state").warning(
                    "ignoring producer snapshot %s (deleted; the state is rebuilt from the log): %s", path, exc
                )
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
                except OSError as err:
                    raise KafkaStorageError(
                        f"cannot remove the damaged producer snapshot {path}: {err.strerror or err}", path=path
                    ) from err
                continue
            for e in entries:
                self.producers[e.producer_id] = e
            self.map_end_offset = off
            self.snapshots_loaded += 1
            break
        self._replay(log, self.map_end_offset)

    def truncate_and_reload(self, log: Any) -> None:
        """The log was truncated (or its start moved): rebuild from the snapshots and the log."""
        self.load(log)

    def rebuild(self, log: Any, from_offset: int) -> None:
        """Forget every producer and apply ``log``'s batches from ``from_offset`` on (a state
        without snapshots, rebuilt from the tail of the log after an open)."""
        self.producers.clear()
        self.map_end_offset = from_offset
        self._replay(log, from_offset)

    def _replay(self, log: Any, from_offset: int) -> None:
        segs = log.segments
        for seg in segs[first_segment_from(segs, from_offset) :]:
            if seg.next_offset <= from_offset:
                continue
            for b in seg.batches():
                if b.last_offset < from_offset:
                    continue
                self.update_from_batches((b,))
        self.map_end_offset = max(self.map_end_offset, log.log_end_offset)
