"""Planning on the driver: the offset range to read of each partition (starting and ending
offsets or timestamps, pushed filters, ``read_committed``) cut into Spark tasks
(:class:`SeglogInputPartition`) at segment boundaries and by Kafka's range splitting. Planning
reads no record data."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from pyspark.sql.datasource import InputPartition

from seglog.bindings.spark.checkpoints import CheckpointCache
from seglog.bindings.spark.dataloss import data_loss
from seglog.bindings.spark.filters import Constraints
from seglog.bindings.spark.logdirs import find_partition_dirs, select_partitions
from seglog.bindings.spark.options import EARLIEST, LATEST, Bound, ReadOptions
from seglog.bindings.spark.partitions import ReadablePartition, describe_partition
from seglog.bindings.spark.timestamps import TsBatch, find_timestamp_batch
from seglog.bindings.spark.transactions import transaction_state
from seglog.errors import OffsetOutOfRangeError


@dataclasses.dataclass(frozen=True, slots=True)
class SeglogInputPartition(InputPartition):
    """One Spark task: offsets [start, end) of one topic-partition, in the listed segments.

    ``start_at``/``end_at`` are timestamp bounds resolved to a batch on the driver; the task
    finds the exact record in that batch. ``aborted`` lists the aborted transactions
    (read_committed). Nothing here is record data."""

    index: int
    topic: str
    partition: int
    dir: str
    start: int
    end: int
    segments: tuple[int, ...]
    start_at: TsBatch | None = None
    end_at: TsBatch | None = None
    aborted: tuple[tuple[int, int, int], ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class _Range:
    topic: str
    partition: int
    start: int
    end: int
    info: ReadablePartition


def _timestamp_batch(info: ReadablePartition, bound: Bound) -> tuple[int | None, TsBatch | None]:
    """The timestamp a timestamp ``bound`` gives ``info``'s partition (None: it names none) and
    the batch holding the partition's first record that new (None: no record is)."""
    ts = bound.value if bound.value is not None else bound.lookup(info.tp)
    if ts is None:
        return None, None
    return ts, find_timestamp_batch(info, ts, info.log_start)


def resolve_start(info: ReadablePartition, ro: ReadOptions, bound: Bound) -> tuple[int, TsBatch | None]:
    """Where ``info``'s partition starts being read under the starting ``bound``, and the batch
    a timestamp bound resolved to (its exact record is found on the executor)."""
    tp = info.tp
    name = f"{tp[0]}-{tp[1]}"
    if bound.kind == "timestamp":
        ts, b = _timestamp_batch(info, bound)
        if ts is None:
            return info.log_start, None
        if b is None:
            if ro.timestamp_strategy == "latest":
                return info.bound, None
            raise OffsetOutOfRangeError(
                f"seglog: no record of {name} has a timestamp >= {ts} (the starting timestamp); "
                "use startingOffsetsByTimestampStrategy=latest to start at the end instead"
            )
        return b.base_offset, b
    if bound.kind == "earliest":
        return info.log_start, None
    if bound.kind == "latest":
        return info.bound, None
    v = bound.lookup(tp)
    if v is None or v == EARLIEST:
        return info.log_start, None
    if v == LATEST:
        return info.bound, None
    if v < info.log_start:
        data_loss(
            ro,
            f"startingOffsets asks for offset {v} of {name}, but its log starts at "
            f"{info.log_start} (older records were deleted)",
            v,
        )
        return info.log_start, None
    if v > info.bound:
        return _beyond_end(info, ro, "startingOffsets", v)
    return v, None


def resolve_end(info: ReadablePartition, ro: ReadOptions, bound: Bound, start: int) -> tuple[int, TsBatch | None]:
    """Where reading ``info``'s partition ends (exclusive) under the ending ``bound``, and the
    batch a timestamp bound resolved to."""
    tp = info.tp
    if bound.kind == "timestamp":
        _, b = _timestamp_batch(info, bound)
        if b is None:
            return info.bound, None
        return min(b.last_offset + 1, info.bound), b
    v = bound.lookup(tp) if bound.kind == "offsets" else LATEST
    if v is None or v == LATEST:
        return info.bound, None
    if v > info.bound:
        return _beyond_end(info, ro, "endingOffsets", v)
    return v, None


def _beyond_end(info: ReadablePartition, ro: ReadOptions, option: str, v: int) -> tuple[int, None]:
    """Offset ``v``, which the ``option`` asks for, is past the readable end of ``info``'s
    partition: data loss (:func:`data_loss`); reading goes up to that end instead."""
    tp = info.tp
    data_loss(ro, f"{option} asks for offset {v} of {tp[0]}-{tp[1]}, beyond its readable end {info.bound}", v)
    return info.bound, None


_Run = tuple[int, int, tuple[tuple[int, int], ...]]  # start, end, (segment base, segment end)*


def _split_by_segments(r: _Range, max_bytes: int) -> list[_Run]:
    """[start, end) cut at segment boundaries into runs of at most ``max_bytes`` of log
    (a single larger segment is one run)."""
    info = r.info
    runs: list[_Run] = []
    cur: list[tuple[int, int]] = []
    cur_start = r.start
    cur_bytes = 0
    for i, base in enumerate(info.segments):
        seg_end = info.segment_end(i)
        if seg_end <= r.start or seg_end <= base:
            continue  # before the range, or empty
        if base >= r.end:
            break
        size = info.sizes[i]
        if cur and cur_bytes + size > max_bytes:
            runs.append((cur_start, base, tuple(cur)))
            cur, cur_bytes, cur_start = [], 0, base
        cur.append((base, seg_end))
        cur_bytes += size
    if cur:
        runs.append((cur_start, r.end, tuple(cur)))
    return [run for run in runs if run[1] > run[0]]


def _divide(start: int, end: int, parts: int) -> list[tuple[int, int]]:
    """Kafka's ``getDividedPartition``: ``parts`` contiguous pieces, the last takes the rest."""
    out = []
    remaining = end - start
    s = start
    for i in range(parts):
        this = remaining // (parts - i)
        remaining -= this
        e = min(s + this, end)
        out.append((s, e))
        s = e
    return [(a, b) for a, b in out if b > a]


def _round_half_up(x: float) -> int:
    return math.floor(x + 0.5)


def split_ranges(
    ranges: list[tuple[int, int]], min_partitions: int | None, max_records: int | None
) -> list[list[tuple[int, int]]]:
    """Kafka's ``KafkaOffsetRangeCalculator.getRanges`` over ``ranges`` (start, end): for each
    input range, the pieces it is cut into."""
    sizes = [e - s for s, e in ranges]
    out: list[list[tuple[int, int]]] = [[(s, e)] if e > s else [] for s, e in ranges]
    live = [i for i, n in enumerate(sizes) if n > 0]
    if min_partitions is not None and len(live) < min_partitions:
        total = sum(sizes[i] for i in live)

        def part_count(size: int, tot: int, parts: int) -> int:
            return max(_round_half_up(size / tot * parts), 1) if tot else 1

        unsplit = {i for i in live if part_count(sizes[i], total, min_partitions) == 1}
        split_total = total - sum(sizes[i] for i in unsplit)
        budget = max(min_partitions - len(unsplit), 1)
        for i in live:
            parts = 1 if i in unsplit else part_count(sizes[i], split_total, budget)
            out[i] = _divide(ranges[i][0], ranges[i][1], parts)
    if max_records is not None:
        for i in live:
            out[i] = [p for s, e in out[i] for p in _divide(s, e, math.ceil((e - s) / max_records))]
    return out


def plan(
    ro: ReadOptions,
    infos: list[ReadablePartition],
    ranges: dict[tuple[str, int], tuple[int, int]],
    start_at: Mapping[tuple[str, int], TsBatch | None] | None = None,
    end_at: Mapping[tuple[str, int], TsBatch | None] | None = None,
) -> list[SeglogInputPartition]:
    """Cut the per-partition offset ranges into input partitions (see the module docs)."""
    by_tp = {i.tp: i for i in infos}
    runs: list[tuple[ReadablePartition, int, int, tuple[tuple[int, int], ...]]] = []
    txn: dict[tuple[str, int], tuple[list[tuple[int, int, int]], int]] = {}
    for tp in sorted(ranges):
        info = by_tp[tp]
        start, end = ranges[tp]
        if ro.read_committed and end > start:
            aborted, lso = transaction_state(info, start)
            txn[tp] = (aborted, lso)
            end = min(end, lso)
        if end <= start:
            continue
        for s, e, segs in _split_by_segments(_Range(tp[0], tp[1], start, end, info), ro.max_bytes_per_partition):
            runs.append((info, s, e, segs))
    pieces = split_ranges([(s, e) for _, s, e, _ in runs], ro.min_partitions, ro.max_records_per_partition)
    out: list[SeglogInputPartition] = []
    for (info, _, _, segs), cut in zip(runs, pieces):
        sa = (start_at or {}).get(info.tp)
        ea = (end_at or {}).get(info.tp)
        aborted = txn.get(info.tp, ([], 0))[0]
        for s, e in cut:
            out.append(
                SeglogInputPartition(
                    index=len(out),
                    topic=info.topic,
                    partition=info.partition,
                    dir=info.dir,
                    start=s,
                    end=e,
                    segments=tuple(b for b, be in segs if b < e and be > s),
                    start_at=sa if sa is not None and s <= sa.last_offset and e > sa.base_offset else None,
                    end_at=ea if ea is not None and s <= ea.last_offset and e > ea.base_offset else None,
                    aborted=tuple(a for a in aborted if a[1] < e and a[2] >= s),
                )
            )
    return out


def load_partitions(ro: ReadOptions, constraints: Constraints | None = None) -> list[ReadablePartition]:
    """Find, select and describe the partitions to read (driver; no record data)."""
    dirs = select_partitions(find_partition_dirs(ro.paths), ro)
    if constraints is not None:
        dirs = [d for d in dirs if constraints.topic_ok(d.topic) and constraints.partition_ok(d.partition)]
    ckpts = CheckpointCache()
    return [describe_partition(d, ro.read_up_to, ckpts, fail_on_data_loss=ro.fail_on_data_loss) for d in dirs]


def plan_batch(ro: ReadOptions, constraints: Constraints) -> list[SeglogInputPartition]:
    """The tasks of a batch query: each partition's range from the options, narrowed by the
    pushed ``constraints``."""
    if constraints.nothing:
        return []
    infos = load_partitions(ro, constraints)
    ranges: dict[tuple[str, int], tuple[int, int]] = {}
    start_at: dict[tuple[str, int], TsBatch | None] = {}
    end_at: dict[tuple[str, int], TsBatch | None] = {}
    for info in infos:
        start, sa = resolve_start(info, ro, ro.starting)
        end, ea = resolve_end(info, ro, ro.ending, start)
        if constraints.offset_lo is not None:
            start = max(start, constraints.offset_lo)
        if constraints.offset_hi is not None:
            end = min(end, constraints.offset_hi)
        if constraints.timestamp_lo is not None and end > start:
            b = find_timestamp_batch(info, constraints.timestamp_lo, start)
            start = end if b is None else max(start, b.base_offset)
        ranges[info.tp] = (start, end)
        start_at[info.tp] = sa
        end_at[info.tp] = ea
    return plan(ro, infos, ranges, start_at, end_at)
