"""Per-partition producer state (Kafka's ``ProducerStateManager`` / ``ProducerAppendInfo``).

Two jobs:

* Idempotence. A batch from an idempotent producer carries (producer id, epoch, base
  sequence). The state keeps, per producer id, its epoch and the metadata of its last five
  batches; an append is checked against it before it reaches the log: a repeat of one of those
  five batches is a duplicate and is answered with the original offsets, a gap in the sequence
  is ``OutOfOrderSequenceError``, an older epoch ``InvalidProducerEpochError``.
* Transactions. Transactional data batches open a transaction for their producer id; the
  COMMIT or ABORT marker closes it. The first offset of the oldest open transaction bounds
  what ``read_committed`` consumers may read (the last stable offset), and aborted
  transactions (producer id, first offset, marker offset) tell them which batches to drop —
  the information Kafka keeps in ``.txnindex`` files.

Rules as in Kafka 3.x (``ProducerAppendInfo.checkSequence``): sequences wrap from
``Integer.MAX_VALUE`` to 0; a producer the state does not know may start at any sequence (its
state may have expired with retention); a known producer with a new epoch must start at 0.

Not persisted: the store allocates producer ids that are never reused, so the idempotence state
of earlier sessions is never needed; transaction state is rebuilt from batch headers when a
``read_committed`` reader first needs it (:meth:`ProducerStateManager.load_transactions`).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections import deque
from collections.abc import Iterable
from typing import Any, Protocol

from seglog.errors import InvalidProducerEpochError, OutOfOrderSequenceError

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 2**31 - 1
CONTROL_ABORT = 0
CONTROL_COMMIT = 1


class BatchHeaderLike(Protocol):
    producer_id: int
    producer_epoch: int
    base_sequence: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    records_count: int

    @property
    def is_transactional(self) -> bool: ...

    @property
    def is_control(self) -> bool: ...


@dataclasses.dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One appended batch of a producer: its sequence range and where it landed."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclasses.dataclass(frozen=True, slots=True)
class AbortedTxn:
    """An aborted transaction (a ``.txnindex`` entry)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


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
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.aborted: list[AbortedTxn] = []  # by marker offset, ascending
        self.transactions_loaded = False

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
               first_offset: int, last_offset: int, timestamp: int, *,
               transactional: bool = False) -> None:
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
        if transactional and producer_id not in self.ongoing:
            self.ongoing[producer_id] = first_offset

    def end_transaction(self, producer_id: int, epoch: int, control_type: int, marker_offset: int,
                        high_watermark: int) -> None:
        """Record a COMMIT/ABORT marker of ``producer_id``."""
        first = self.ongoing.pop(producer_id, None)
        entry = self.entries.get(producer_id)
        if entry is None:
            entry = self.entries[producer_id] = ProducerEntry(producer_id, epoch)
        if control_type == CONTROL_ABORT and first is not None:
            lso = self.first_unstable_offset()
            self.aborted.append(AbortedTxn(producer_id, first, marker_offset,
                                           lso if lso is not None else high_watermark))

    # -- transactions --------------------------------------------------------------------------

    def first_unstable_offset(self) -> int | None:
        return min(self.ongoing.values()) if self.ongoing else None

    def aborted_overlapping(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions whose range meets [start, end) (Kafka's
        ``collectAbortedTransactions``), in marker-offset order."""
        i = bisect.bisect_left([a.last_offset for a in self.aborted], start)
        return [a for a in self.aborted[i:] if a.first_offset < end]

    def load_transactions(self, batches: Iterable[Any], control_type_of: Any) -> None:
        """Rebuild the transaction state from every batch header of the log, oldest first.
        ``control_type_of(batch)`` returns a control batch's type (0 ABORT, 1 COMMIT...)."""
        self.ongoing.clear()
        self.aborted.clear()
        for b in batches:
            if b.magic != 2 or b.producer_id < 0:
                continue
            if b.is_control:
                ctype = control_type_of(b)
                if ctype in (CONTROL_ABORT, CONTROL_COMMIT):
                    first = self.ongoing.pop(b.producer_id, None)
                    if ctype == CONTROL_ABORT and first is not None:
                        lso = self.first_unstable_offset()
                        self.aborted.append(AbortedTxn(b.producer_id, first, b.base_offset,
                                                       lso if lso is not None else b.base_offset))
            elif b.is_transactional and b.producer_id not in self.ongoing:
                self.ongoing[b.producer_id] = b.base_offset
        self.transactions_loaded = True

    def truncate(self, end_offset: int) -> None:
        """Forget state about offsets at or past ``end_offset`` (after a log truncation)."""
        for pid in [p for p, first in self.ongoing.items() if first >= end_offset]:
            del self.ongoing[pid]
        self.aborted = [a for a in self.aborted if a.last_offset < end_offset]
        for entry in self.entries.values():
            while entry.batches and entry.batches[-1].last_offset >= end_offset:
                entry.batches.pop()
