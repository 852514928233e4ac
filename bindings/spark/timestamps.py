"""Timestamp bounds (``startingTimestamp``, ``endingOffsetsByTimestamp``, a pushed
``timestamp >=`` filter): Kafka's ``offsetsForTimes`` over a partition's time indexes and batch
headers on the driver, the exact record inside the one batch found on the executor."""

from __future__ import annotations

import dataclasses
import os

import pyarrow as pa
import pyarrow.compute as pc

from seglog._native.segment import filename_prefix
from seglog.bindings.spark.partitions import ReadablePartition
from seglog.bindings.spark.segments import open_segment
from seglog.storage.records import decode_columns


def _last_time_index_timestamp(path: str) -> int | None:
    """The last entry's timestamp of a trimmed ``.timeindex`` (a closed segment's largest
    timestamp); None when the file is missing, empty or untrimmed (a zero tail)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            if size < 12 or size % 12:
                return None
            f.seek(size - 12)
            raw = f.read(12)
    except OSError:
        return None
    if raw == b"\0" * 12:
        return None
    return int.from_bytes(raw[:8], "big", signed=True)


@dataclasses.dataclass(frozen=True, slots=True)
class TsBatch:
    """The batch that holds the first record with timestamp >= ``timestamp`` (found by the
    time index and batch headers): the exact record is looked up inside it on the executor."""

    timestamp: int
    segment: int
    base_offset: int
    last_offset: int


def find_timestamp_batch(info: ReadablePartition, timestamp: int, start: int) -> TsBatch | None:
    """First batch at or after ``start`` (below the bound) whose max timestamp is >= ``timestamp``.

    Closed segments whose time index says their largest timestamp is older are skipped without
    opening them (Kafka's ``fetchOffsetByTimestamp``)."""
    last = len(info.segments) - 1
    for i, base in enumerate(info.segments):
        if info.segment_end(i) <= start:
            continue
        if base >= info.bound:
            break
        if i < last:
            largest = _last_time_index_timestamp(os.path.join(info.dir, filename_prefix(base) + ".timeindex"))
            if largest is not None and largest < timestamp:
                continue
        seg = open_segment(info.dir, base)
        try:
            b = seg.find_offset_by_timestamp(timestamp, start)
        finally:
            seg.close()
        if b is not None and b.base_offset < info.bound:
            return TsBatch(timestamp, base, b.base_offset, b.last_offset)
        if b is not None:
            break
    return None


def exact_timestamp_offset(d: str, ref: TsBatch) -> int:
    """The offset of the first record of ``ref``'s batch whose timestamp is >= its timestamp
    (decodes that one batch); the batch's end when none is."""
    seg = open_segment(d, ref.segment)
    try:
        found = seg.translate_offset(ref.base_offset)
        if found is None:
            return ref.last_offset + 1
        with seg.view(found.position, found.size) as view:
            cols = decode_columns(view, keys=False, values=False, headers=False)
    finally:
        seg.close()
    n = len(cols)
    if n == 0:
        return ref.last_offset + 1
    ts = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(cols.timestamps)])
    idx = pc.index(pc.greater_equal(ts, ref.timestamp), True).as_py()
    if idx < 0:
        return int(max(ref.last_offset, found.last_offset)) + 1
    offs = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(cols.offsets)])
    return int(offs[idx].as_py())
