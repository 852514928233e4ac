"""Reading on the executor: one task's offsets of one partition decoded from its segment
files (``mmap``) straight into Arrow record batches of Spark's schema; and the batch readers
that hand Spark the plan and the batches."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from seglog._native.segment import Segment, filename_prefix
from seglog.bindings.arrow import ArrowBatchBuilder
from seglog.bindings.spark.dataloss import corrupt_segment, data_loss, log
from seglog.bindings.spark.filters import Constraints, push_filters
from seglog.bindings.spark.options import ReadOptions
from seglog.bindings.spark.planning import SeglogInputPartition, plan_batch
from seglog.bindings.spark.segments import open_segment, walk_problem
from seglog.bindings.spark.timestamps import exact_timestamp_offset
from seglog.errors import CorruptRecordError, SeglogError
from seglog.storage.records import batch_headers, decode_columns

_MIN_CHUNK = 64 << 10
_MAX_CHUNK = 64 << 20


def _segment_range(seg: Segment, lo: int, hi: int) -> tuple[int, int] | None:
    """Byte range of the whole batches holding offsets [lo, hi) in ``seg``."""
    found = seg.translate_offset(lo)
    if found is None:
        return None
    pos = found.position
    if hi < seg.next_offset:
        e = seg.translate_offset(hi)
        if e is None:
            return None
        end = e.position if (e.magic == 2 and e.base_offset >= hi) else e.position + e.size
    else:
        # Up to the last whole batch: a broker may be writing (or have torn) the tail.
        last = seg.translate_offset(seg.next_offset - 1)
        end = pos if last is None else last.position + last.size
    return (pos, end) if end > pos else None


def _walk_error(seg: Segment, pos: int) -> str:
    try:
        seg.batches(pos)
    except SeglogError as exc:
        return str(exc.message)
    return f"{seg.log_path}: invalid batch at byte {pos}"


def read_partition(part: SeglogInputPartition, ro: ReadOptions) -> Iterator[pa.RecordBatch]:
    """Record batches (Spark's schema, at most ``maxRowsPerBatch`` rows) of one input partition."""
    builder = ArrowBatchBuilder(ro.columns, topic=part.topic, partition=part.partition)
    start, end = part.start, part.end
    if part.start_at is not None:
        start = max(start, exact_timestamp_offset(part.dir, part.start_at))
    if part.end_at is not None:
        end = min(end, exact_timestamp_offset(part.dir, part.end_at))
    if start >= end:
        return
    flags = dict(builder.decode_flags, include_control=ro.include_control, aborted=part.aborted or None)
    rows = ro.max_rows_per_batch
    chunk = 1 << 20
    for i, base in enumerate(part.segments):
        nxt = part.segments[i + 1] if i + 1 < len(part.segments) else end
        lo, hi = max(start, base), min(end, nxt)
        if lo >= hi:
            continue
        try:
            seg = open_segment(part.dir, base)
        except FileNotFoundError:
            data_loss(
                ro,
                f"segment {os.path.join(part.dir, filename_prefix(base))}.log of "
                f"{part.topic}-{part.partition} is gone (deleted by retention?)",
                base,
            )
            continue
        try:
            span = _segment_range(seg, lo, hi)
            if span is None or hi > seg.next_offset:
                # Offsets asked for that the header walk does not reach: compaction may have
                # removed them, or a malformed header hides them.
                problem = walk_problem(seg, seg.offset_index.lookup(lo)[1])
                if problem is not None:
                    corrupt_segment(ro.fail_on_data_loss, seg, problem, "the rest of the segment")
            if span is None:
                continue
            pos, stop = span
            while pos < stop:
                nxt_pos = seg.batch_end(pos, chunk, stop, True)
                if nxt_pos <= pos:
                    msg = _walk_error(seg, pos)
                    if ro.fail_on_data_loss:
                        raise CorruptRecordError(
                            f"seglog: {msg}; set failOnDataLoss=false to skip it", path=seg.log_path, position=pos
                        )
                    log.warning("seglog: %s; skipping the rest of the segment (failOnDataLoss=false)", msg)
                    break
                for cols in _decode(seg, pos, nxt_pos, lo, hi, flags, ro):
                    n = len(cols)
                    if n == 0:
                        continue
                    rb = builder.build(cols)
                    if n <= rows:
                        yield rb
                    else:
                        for k in range(0, n, rows):
                            yield rb.slice(k, rows)
                    # Aim the next chunk at ``rows`` records.
                    chunk = min(max(int((nxt_pos - pos) * rows / n), _MIN_CHUNK), _MAX_CHUNK)
                pos = nxt_pos
        finally:
            seg.close()


def read_task(partition: InputPartition, ro: ReadOptions) -> Iterator[pa.RecordBatch]:
    """The record batches of the task Spark hands a reader's ``read``: none for Spark's
    stand-in when the plan is empty."""
    if not isinstance(partition, SeglogInputPartition):
        return iter(())
    return read_partition(partition, ro)


def _decode(
    seg: Segment, pos: int, end: int, lo: int, hi: int, flags: dict[str, Any], ro: ReadOptions
) -> Iterator[Any]:
    try:
        with seg.view(pos, end - pos) as view:
            cols = decode_columns(view, min_offset=lo, max_offset=hi, **flags)
        yield cols
        return
    except CorruptRecordError as exc:
        if ro.fail_on_data_loss:
            rel = exc.position
            msg = exc.message
            if rel is not None and msg.endswith(f" (at byte {rel})"):
                msg = msg[: -len(f" (at byte {rel})")]
            raise CorruptRecordError(
                f"seglog: {msg}; set failOnDataLoss=false to skip corrupt batches",
                path=seg.log_path,
                position=None if rel is None else pos + rel,
            ) from None
    # failOnDataLoss=false: batch by batch, skipping the ones that do not decode.
    with seg.view(pos, end - pos) as view:
        heads = [(h.position, h.size) for h in batch_headers(view)]
    for p, size in heads:
        try:
            with seg.view(pos + p, size) as view:
                cols = decode_columns(view, min_offset=lo, max_offset=hi, **flags)
        except CorruptRecordError as exc:
            log.warning("seglog: %s: skipping the corrupt batch at byte %d: %s", seg.log_path, pos + p, exc)
            continue
        yield cols


class SeglogReader(DataSourceReader):
    """Batch reader (no filter pushdown: used when the session has it off)."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.constraints = Constraints()

    def partitions(self) -> Sequence[InputPartition]:
        return list(plan_batch(self.options, self.constraints))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_task(partition, self.options)


class SeglogPushdownReader(SeglogReader):
    """Batch reader that narrows its plan by the filters Spark pushes (PySpark >= 4.1)."""

    def pushFilters(self, filters: list[Any]) -> Iterable[Any]:
        self.constraints, rest = push_filters(filters)
        return rest
