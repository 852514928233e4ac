"""Streaming: the micro-batch reader. Its offsets are Spark's Kafka source's,
``{"topic": {"partition": next offset}}``; each micro-batch is planned and read as a batch
query is."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from seglog.bindings.spark.dataloss import data_loss
from seglog.bindings.spark.options import ReadOptions
from seglog.bindings.spark.partitions import ReadablePartition
from seglog.bindings.spark.planning import load_partitions, plan, resolve_start
from seglog.bindings.spark.reader import read_task
from seglog.bindings.spark.timestamps import exact_timestamp_offset

try:  # PySpark >= 4.2: admission control for stream readers.
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - PySpark 4.0 / 4.1
    ReadAllAvailable = ReadMaxRows = None  # type: ignore[assignment,misc]
    SupportsTriggerAvailableNow = None  # type: ignore[assignment,misc]


def _to_json_offsets(m: Mapping[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for t, p in sorted(m):
        out.setdefault(t, {})[str(p)] = int(m[(t, p)])
    return out


def _from_json_offsets(doc: Mapping[str, Any]) -> dict[tuple[str, int], int]:
    return {(t, int(p)): int(o) for t, parts in doc.items() for p, o in parts.items()}


_StreamBase: tuple[type, ...] = (
    (DataSourceStreamReader,)
    if SupportsTriggerAvailableNow is None
    else (DataSourceStreamReader, SupportsTriggerAvailableNow)
)


class SeglogStreamReader(*_StreamBase):  # type: ignore[misc]
    """Micro-batch reader; offsets are ``{"topic": {"partition": next offset}}`` as in Spark's
    Kafka source. New partitions start at their log start. With PySpark >= 4.2,
    ``maxRecordsPerTrigger`` caps each micro-batch and ``trigger(availableNow=True)`` stops at
    the log ends seen when the query starts."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._target: dict[tuple[str, int], int] | None = None

    def _infos(self) -> list[ReadablePartition]:
        return load_partitions(self.options)

    def initialOffset(self) -> dict[str, Any]:
        ro = self.options
        out: dict[tuple[str, int], int] = {}
        for info in self._infos():
            start, ts_batch = resolve_start(info, ro, ro.starting)
            if ts_batch is not None:
                # A stream's offsets are exact: look the record up now (one batch decoded).
                start = min(exact_timestamp_offset(info.dir, ts_batch), info.bound)
            out[info.tp] = start
        return _to_json_offsets(out)

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:
        # PySpark >= 4.2 sees the two parameters and passes the start and a read limit; 4.0 and
        # 4.1 call it without arguments (no admission control).
        infos = self._infos()
        ends = {i.tp: i.bound for i in infos}
        if self._target is not None:  # trigger(availableNow=True): never past the target
            ends = {tp: min(v, self._target[tp]) for tp, v in ends.items() if tp in self._target}
        if start is None:
            return _to_json_offsets(ends)
        begin = _from_json_offsets(start)
        for tp, b in begin.items():
            ends[tp] = max(ends.get(tp, b), b)
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            ends = _rate_limit(begin, ends, limit.max_rows, {i.tp: i.log_start for i in infos})
        return _to_json_offsets(ends)

    def getDefaultReadLimit(self) -> Any:
        n = self.options.max_records_per_trigger
        if n is None:
            return ReadAllAvailable()
        return ReadMaxRows(n)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return _to_json_offsets({i.tp: i.bound for i in self._infos()})

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {i.tp: i.bound for i in self._infos()}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        ro = self.options
        begin = _from_json_offsets(start) if start else {}
        stop = _from_json_offsets(end)
        infos = {i.tp: i for i in self._infos()}
        ranges: dict[tuple[str, int], tuple[int, int]] = {}
        for tp, e in stop.items():
            info = infos.get(tp)
            if info is None:
                data_loss(ro, f"partition {tp[0]}-{tp[1]} disappeared")
                continue
            b = begin.get(tp, info.log_start)
            if b < info.log_start:
                data_loss(
                    ro,
                    f"offsets [{b}, {info.log_start}) of {tp[0]}-{tp[1]} were deleted before the stream read them",
                    b,
                )
                b = info.log_start
            e = min(e, info.log_end)
            if e > b:
                ranges[tp] = (b, e)
        return list(plan(ro, list(infos.values()), ranges))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_task(partition, self.options)

    def commit(self, end: dict[str, Any]) -> None:
        pass


def _rate_limit(
    begin: Mapping[tuple[str, int], int],
    ends: dict[tuple[str, int], int],
    limit: int,
    log_starts: Mapping[tuple[str, int], int],
) -> dict[tuple[str, int], int]:
    """Kafka's ``rateLimit``: ``limit`` offsets shared across partitions by their backlog."""
    sizes = {tp: e - begin.get(tp, log_starts.get(tp, 0)) for tp, e in ends.items()}
    total = sum(s for s in sizes.values() if s > 0)
    if total <= limit:
        return ends
    out = {}
    for tp, e in ends.items():
        b = begin.get(tp, log_starts.get(tp, 0))
        size = sizes[tp]
        if size <= 0:
            out[tp] = e
            continue
        prorate = limit * (size / total)
        step = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(e, b + step)
    return out
