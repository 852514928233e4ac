"""A partition log's transactions (Kafka's ``ProducerStateManager`` ongoing transactions and each
segment's ``TransactionIndex``): the open transaction of each producer, and the ``.txnindex`` of
each segment, where an ABORT marker records the aborted transaction's range for read-committed
readers.

The open transactions are read from the segments' transactional and control batch headers when
first needed (the LSO, a transactional append), not when the log opens, and kept up to date by
appends from then on. Not thread-safe: its :class:`~seglog.storage.log.Log` uses it under the
log's lock.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import Any

from seglog._native.segment import Segment, filename_prefix
from seglog.errors import CorruptIndexError
from seglog.storage.records import decode_records
from seglog.storage.txnindex import AbortedTxn, TransactionIndex

# RecordBatch attribute bits (docs/kafka-format.md §2.2, "Attributes").
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_TXN_OR_CONTROL = ATTR_TRANSACTIONAL | ATTR_CONTROL


class LogTransactions:
    """The open transactions of one log and its segments' transaction indexes. ``segments`` is
    the log's own list of its segments, oldest first, which the log changes in place."""

    def __init__(self, directory: str, segments: Sequence[Segment]) -> None:
        self.dir = directory
        self._segments = segments
        # Producer id -> first offset of its open transaction; and each segment's .txnindex,
        # keyed by base offset with the Segment it belongs to (a later segment at the same base
        # offset gets a fresh one).
        self._ongoing: dict[int, int] = {}
        self._loaded = False
        self._indexes: dict[int, tuple[Segment, TransactionIndex]] = {}

    def ongoing(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction (read from the segments' headers
        on first need, opening each segment in turn)."""
        if not self._loaded:
            self.load(set())
        return self._ongoing

    def index(self, seg: Segment) -> TransactionIndex:
        """The ``.txnindex`` of one of the log's segments."""
        entry = self._indexes.get(seg.base_offset)
        if entry is None or entry[0] is not seg:
            live = {id(s) for s in self._segments}
            for base, (owner, _) in list(self._indexes.items()):
                if id(owner) not in live:
                    del self._indexes[base]
            path = os.path.join(self.dir, filename_prefix(seg.base_offset) + ".txnindex" + seg.suffix)
            entry = (seg, TransactionIndex(path, seg.base_offset))
            self._indexes[seg.base_offset] = entry
        return entry[1]

    def sanity_check(self, seg: Segment, end: int | None = None) -> None:
        """Kafka's load-time check, plus: no entry past the segment's data (a stale index).
        ``end``, the next segment's base offset, stands in for the segment's own end where
        reading that would open the segment's files."""
        idx = self.index(seg)
        idx.sanity_check()
        last = idx.last_offset
        if last is None:
            return
        if end is None:
            end = seg.next_offset
        if last >= end:
            raise CorruptIndexError(
                f"transaction index {idx.path}: last entry's marker offset {last} "
                f"is past the segment's data (which ends before offset {end})",
                path=idx.path,
                offset=last,
            )

    def flush(self, seg: Segment) -> None:
        """Flush the segment's index, if it was opened."""
        entry = self._indexes.get(seg.base_offset)
        if entry is not None and entry[0] is seg:
            entry[1].flush()

    def collect_aborted(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[start_offset, upper_bound_offset)``, from the
        index of the segment holding ``start_offset`` and of later segments until one proves the
        search complete (Kafka's ``LocalLog.collectAbortedTransactions``)."""
        segs = self._segments
        i = 0
        for k, seg in enumerate(segs):
            if seg.base_offset <= start_offset:
                i = k
            else:
                break
        found: list[AbortedTxn] = []
        for seg in segs[i:]:
            result = self.index(seg).collect_aborted(start_offset, upper_bound_offset)
            found.extend(result.aborted)
            if result.is_complete:
                break
        return found

    def _apply(
        self, producer_id: int, base_offset: int, attributes: int, marker: Callable[[], int | None]
    ) -> AbortedTxn | None:
        """One batch through the open-transaction state (Kafka's ``ProducerAppendInfo``): a
        transactional data batch opens its producer's transaction if none is open; a COMMIT or
        ABORT marker closes it (an ABORT with none open covers just the marker, as in Kafka).
        ``marker()`` gives the control type of a control batch. Returns the entry an ABORT adds
        to the txn index: its LSO is the first offset of the oldest transaction still open, or
        the marker's offset + 1."""
        if producer_id < 0:
            return None
        if attributes & ATTR_CONTROL:
            kind = marker()
            if kind not in (0, 1):
                return None  # an empty (cleaned) control batch, or not a transaction marker
            first = self._ongoing.pop(producer_id, base_offset)
            if kind == 1:
                return None
            lso = min(self._ongoing.values(), default=base_offset + 1)
            return AbortedTxn(producer_id, first, base_offset, lso)
        if attributes & ATTR_TRANSACTIONAL:
            self._ongoing.setdefault(producer_id, base_offset)
        return None

    def track(self, seg: Segment, view: bytes | memoryview, heads: Sequence[Any], assign_from: int) -> None:
        """After an append to ``seg``: update the open transactions, index aborts in ``seg``.
        ``assign_from``: the first offset assigned to the batches; -1, their own offsets."""
        next_off = assign_from
        for h in heads:
            base = h.base_offset if assign_from < 0 else next_off
            next_off = base + (h.last_offset - h.base_offset) + 1
            if h.producer_id < 0 or not h.attributes & ATTR_TXN_OR_CONTROL:
                continue
            aborted = self._apply(h.producer_id, base, h.attributes, functools.partial(_view_marker_type, view, h))
            if aborted is not None:
                self.index(seg).append(aborted)

    def load(self, rebuild: set[int], *, read_only: bool = False) -> None:
        """Rebuild the open transactions from every segment's transactional and control batch
        headers (each marker's one control record decoded), and the txn index of the segments
        in ``rebuild`` (just recovered; not in a read-only log) from the ABORT markers replayed
        through that state."""
        self._ongoing = {}
        self._loaded = False
        for seg in self._segments:
            idx = None
            if seg.base_offset in rebuild and not read_only:
                idx = self.index(seg)
                idx.reset()
            for b in seg.transaction_batches():
                aborted = self._apply(
                    b.producer_id, b.base_offset, b.attributes, functools.partial(_segment_marker_type, seg, b)
                )
                if aborted is not None and idx is not None:
                    idx.append(aborted)
            if idx is not None:
                idx.flush()
        self._loaded = True

    def truncate_to(self, active: Segment, end_offset: int) -> None:
        """The log now ends at ``end_offset`` in ``active``: its index loses later entries, and
        the open transactions are read again on first need."""
        self.index(active).truncate_to(end_offset)
        self._loaded = False

    def clear(self) -> None:
        """The log was emptied: no open transaction, no index."""
        self._ongoing.clear()
        self._loaded = True
        self._indexes.clear()


def marker_type(batch: Any, records_count: int) -> int | None:
    """The control type of a control batch's first record (0 ABORT, 1 COMMIT, ...); None for an
    empty batch."""
    if records_count <= 0:
        return None
    for rec in decode_records(batch, include_control=True):
        t: int | None = rec.control_type
        return t
    return None


def _view_marker_type(view: bytes | memoryview, h: Any) -> int | None:
    return marker_type(view[h.position : h.position + h.size], h.records_count)


def _segment_marker_type(seg: Segment, b: Any) -> int | None:
    with seg.view(b.position, b.size) as v:
        return marker_type(v, b.records_count)


__all__ = ["ATTR_CONTROL", "ATTR_TRANSACTIONAL", "ATTR_TXN_OR_CONTROL", "LogTransactions", "marker_type"]
