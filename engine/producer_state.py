"""Per-partition idempotent-producer state (Kafka's ``ProducerStateManager`` /
``ProducerAppendInfo``, the sequence part).

A batch from an idempotent producer carries (producer id, epoch, base sequence). The state
keeps, per producer id, its epoch and the metadata of its last five batches; an append is
checked against it before it reaches the log: a repeat of one of those five batches is a
duplicate and is answered with the original offsets, a gap in the sequence is
``OutOfOrderSequenceError``, an older epoch ``InvalidProducerEpochError``.

Rules as in Kafka 3.x (``ProducerAppendInfo.checkSequence``): sequences wrap from
``Integer.MAX_VALUE`` to 0; a producer the state does not know may start at any sequence (its
state may have expired with retention); a known producer with a new epoch must start at 0.

Not persisted: the store allocates producer ids that are never reused, so the state of earlier
sessions is never needed. Open and aborted transactions are the log's (``Log.last_stable_offset``,
``Log.collect_aborted_transactions``, the ``.txnindex`` files).
"""

from __future__ import annotations

import dataclasses
from collections import deque

from seglog.errors import InvalidProducerEpochError, OutOfOrderSequenceError

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 2**31 - 1


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
    epoch: int = -1
    batches: deque[BatchMetadata] = dataclasses.field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


def last_sequence(base_sequence: int, base_offset: int, last_offset: int) -> int:
    """The batch's last sequence, wrapping past ``Integer.MAX_VALUE`` as Kafka does."""
    if base_sequence < 0:
        return -1
    return (base_sequence + (last_offset - base_offset)) % (INT32_MAX + 1)


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateManager:
    """The producer state of one partition. Not thread-safe: the store calls it under the
    partition's lock."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.entries: dict[int, ProducerEntry] = {}

    # -- idempotence -------------------------------------------------------------------------

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
              first_offset_hint: int = -1) -> BatchMetadata | None:
        """Validate a batch before it is appended; returns the original batch if it is a
        duplicate of one of the producer's last five, None if it may be appended."""
        entry = self.entries.get(producer_id)
        if entry is None or entry.epoch < 0:
            return None
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {producer_id} epoch {epoch} is older than the current epoch "
                f"{entry.epoch} of {self.name}")
        dup = entry.find_duplicate(epoch, first_seq, last_seq)
        if dup is not None:
            return dup
        if epoch > entry.epoch:
            if first_seq != 0:
                raise OutOfOrderSequenceError(
                    f"invalid sequence number for new epoch of producer {producer_id} at "
                    f"{self.name}: epoch {epoch}, first sequence {first_seq} (expected 0)")
            return None
        current = entry.last_seq
        if current < 0:
            if first_seq != 0:
                raise OutOfOrderSequenceError(
                    f"out of order sequence number for producer {producer_id} at {self.name}: "
                    f"found {first_seq}, expected 0")
            return None
        if not _in_sequence(current, first_seq):
            raise OutOfOrderSequenceError(
                f"out of order sequence number for producer {producer_id} at {self.name}: "
                f"found {first_seq}, expected {(current + 1) % (INT32_MAX + 1)} (last appended "
                f"sequence {current})")
        return None

    def update(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
               first_offset: int, last_offset: int, timestamp: int) -> None:
        """Record an appended data batch."""
        entry = self.entries.get(producer_id)
        if entry is None:
            entry = self.entries[producer_id] = ProducerEntry(producer_id)
        if epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        if first_seq >= 0:
            entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))
        entry.last_timestamp = timestamp

    def truncate(self, end_offset: int) -> None:
        """Forget batches at or past ``end_offset`` (after a log truncation)."""
        for entry in self.entries.values():
            while entry.batches and entry.batches[-1].last_offset >= end_offset:
                entry.batches.pop()
