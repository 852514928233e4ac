"""``read_committed`` on the driver: the aborted transactions of a partition's offset range and
its last stable offset, from batch headers, ``.txnindex`` files and transaction markers."""

from __future__ import annotations

import os

from seglog._native.segment import filename_prefix
from seglog.bindings.spark.partitions import ReadablePartition
from seglog.bindings.spark.segments import open_segment
from seglog.storage.records import decode_records
from seglog.storage.txnindex import TransactionIndex


def _read_txn_index(path: str, base: int) -> list[tuple[int, int, int]] | None:
    """(producer id, first offset, marker offset) of each entry of a ``.txnindex``; None when the
    segment has none."""
    index = TransactionIndex(path, base)
    if not index.exists:
        return None
    return [(t.producer_id, t.first_offset, t.last_offset) for t in index.all_entries()]


def transaction_state(info: ReadablePartition, start: int) -> tuple[list[tuple[int, int, int]], int]:
    """(aborted transactions overlapping [start, bound), last stable offset) of a partition.

    Walks the batch headers from ``start`` to the bound, tracking each producer's open
    transaction; a marker closes it. Whether a marker aborted is read from the segment's
    ``.txnindex`` when it has one, else from the marker's control record key."""
    aborted: list[tuple[int, int, int]] = []
    open_first: dict[int, int] = {}
    for i, base in enumerate(info.segments):
        if info.segment_end(i) <= start:
            continue
        if base >= info.bound:
            break
        index = _read_txn_index(os.path.join(info.dir, filename_prefix(base) + ".txnindex"), base)
        if index is not None:
            aborted.extend(e for e in index if e[2] >= start and e[1] < info.bound)
        seg = open_segment(info.dir, base)
        try:
            pos = 0
            if start > base:
                found = seg.translate_offset(start)
                pos = found.position if found is not None else seg.size
            for b in seg.batches(pos):
                if b.base_offset >= info.bound:
                    break
                if b.is_control:
                    first = open_first.pop(b.producer_id, None)
                    if index is None and first is not None:
                        with seg.view(b.position, b.size) as view:
                            recs = decode_records(view, include_control=True)
                        if recs and recs[0].control_type == 0:
                            aborted.append((b.producer_id, first, b.last_offset))
                elif b.is_transactional:
                    open_first.setdefault(b.producer_id, b.base_offset)
        finally:
            seg.close()
    lso = min(open_first.values(), default=info.bound)
    return aborted, min(lso, info.bound)
