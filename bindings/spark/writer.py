"""Writing: the batch writer. Tasks encode their rows into record batches and append them to
the partitions' logs; the driver's commit then moves the log dir's high watermarks over the
job's records in one atomic rename, and drops what failed attempts left past them."""

from __future__ import annotations

import dataclasses
import itertools
import os
import time
from collections.abc import Iterator, Mapping

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from seglog.bindings.spark.checkpoints import (
    HIGH_WATERMARK_FILE,
    CheckpointCache,
    log_dir_update,
    read_offsets,
)
from seglog.bindings.spark.logdirs import find_partition_dirs
from seglog.bindings.spark.options import WriteOptions
from seglog.bindings.spark.partition_metadata import ensure_partition_metadata
from seglog.bindings.spark.partitions import describe_partition
from seglog.bindings.spark.rows import batch_cuts, header_lists, row_partitions
from seglog.bindings.spark.spool import Spool
from seglog.errors import ConfigError
from seglog.storage.checkpoints import OffsetCheckpointFile
from seglog.storage.log import Log
from seglog.storage.records import batch_headers, encode_batch


@dataclasses.dataclass(frozen=True, slots=True)
class SeglogCommitMessage(WriterCommitMessage):
    """What one task appended: (topic, partition, first offset, end offset) runs."""

    task: int
    attempt: int
    appended: tuple[tuple[str, int, int, int], ...]


#: How long a task waits for another writer of the same partition (another task of the job).
PARTITION_LOCK_WAIT_S = 600.0


def _log_open(d: str, config: Mapping[str, str]) -> Log:
    # Each partition has one writer at a time (seglog.storage.logdir): tasks of the job writing the
    # same partition take turns; a store, node or broker owning the log dir refuses them all.
    return Log.open(d, config or None, lock_wait_s=PARTITION_LOCK_WAIT_S)


def _leader_epoch(lg: Log) -> int | None:
    # As the store writes: a new log is led at epoch 0 (what a single Kafka broker writes, and
    # recorded in leader-epoch-checkpoint); a log that already has epochs keeps its latest.
    return None if lg.epoch_cache.latest_epoch >= 0 else 0


class SeglogWriter(DataSourceArrowWriter):
    """Batch writer (the commit protocol: this module's and the package's docs)."""

    def __init__(self, spec: WriteOptions, partition_counts: dict[str, int]) -> None:
        self.spec = spec
        self.partition_counts = partition_counts

    # -- executor ------------------------------------------------------------------------------

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SeglogCommitMessage:
        ctx = TaskContext.get()
        task = ctx.partitionId() if ctx is not None else 0
        attempt = ctx.attemptNumber() if ctx is not None else 0
        spools: dict[tuple[str, int], Spool] = {}
        try:
            for n, batch in enumerate(iterator):
                if batch.num_rows:
                    self._encode(batch, task + n, spools)
            appended = []
            for tp in sorted(spools):
                first, end = self._append(tp, spools[tp])
                appended.append((tp[0], tp[1], first, end))
        finally:
            for s in spools.values():
                s.close()
        return SeglogCommitMessage(task, attempt, tuple(appended))

    def _partition_count(self, topic: str) -> int:
        return int(self.partition_counts.get(topic, self.spec.num_partitions))

    def _encode(self, batch: pa.RecordBatch, sticky: int, spools: dict[tuple[str, int], Spool]) -> None:
        names = batch.schema.names
        topic_opt = self.spec.topic
        if topic_opt:
            by_topic = [(topic_opt, batch)]
        else:
            topics = batch.column(names.index("topic")).cast(pa.string())
            if topics.null_count:
                raise ConfigError("seglog: the 'topic' column has nulls; every row needs a topic", key="topic")
            by_topic = [(t, batch.filter(pc.equal(topics, t))) for t in pc.unique(topics).to_pylist()]
        for topic, rows in by_topic:
            count = self._partition_count(topic)
            parts = row_partitions(rows, count, sticky % count, topic)
            for p in sorted(pc.unique(parts).to_pylist()):
                sub = (
                    rows
                    if len(by_topic) == 1 and pc.all(pc.equal(parts, p)).as_py()
                    else rows.filter(pc.equal(parts, p))
                )
                self._encode_partition(sub, spools.setdefault((topic, p), Spool()))

    def _encode_partition(self, rows: pa.RecordBatch, spool: Spool) -> None:
        names = rows.schema.names

        def col(name: str) -> pa.Array | None:
            return rows.column(names.index(name)) if name in names else None

        values = col("value")
        keys = col("key")
        assert values is not None
        ts = col("timestamp")
        now = int(time.time() * 1000)
        if ts is None:
            ts_ms = pa.repeat(pa.scalar(now, pa.int64()), rows.num_rows)
        else:
            ts_ms = pc.fill_null(ts.cast(pa.timestamp("ms", "UTC"), safe=False).cast(pa.int64()), now)
        headers = col("headers")
        for s, e in batch_cuts(values, keys, self.spec.batch_bytes):
            spool.add(
                encode_batch(
                    values.slice(s, e - s),
                    keys=None if keys is None else keys.slice(s, e - s),
                    timestamps=ts_ms.slice(s, e - s),
                    headers=None if headers is None else header_lists(headers.slice(s, e - s)),
                    compression=self.spec.compression,
                )
            )

    def _append(self, tp: tuple[str, int], spool: Spool) -> tuple[int, int]:
        d = os.path.join(self.spec.log_dir, f"{tp[0]}-{tp[1]}")
        lg = _log_open(d, self.spec.config)
        try:
            ensure_partition_metadata(self.spec.log_dir, d, tp[0])
            first = lg.log_end_offset
            try:
                for data in spool.pieces(16 << 20):
                    lg.append(data, leader_epoch=_leader_epoch(lg))
                lg.flush()
            except BaseException:
                lg.truncate_to(first)
                raise
            end = lg.log_end_offset
        finally:
            lg.close()
        return first, end

    # -- driver --------------------------------------------------------------------------------

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        runs: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for m in messages:
            if isinstance(m, SeglogCommitMessage):
                for t, p, s, e in m.appended:
                    if e > s:
                        runs.setdefault((t, p), []).append((s, e))
        log_dir = self.spec.log_dir
        hw_file = OffsetCheckpointFile(os.path.join(log_dir, HIGH_WATERMARK_FILE))
        current = read_offsets(hw_file)
        updates: dict[tuple[str, int], int | None] = {}
        for tp in sorted(runs):
            d = os.path.join(log_dir, f"{tp[0]}-{tp[1]}")
            lg = _log_open(d, self.spec.config)
            try:
                hw = max(current.get(tp, lg.log_start_offset), lg.log_start_offset)
                updates[tp] = settle(lg, min(hw, lg.log_end_offset), sorted(runs[tp]))
            finally:
                lg.close()
        if updates:
            with log_dir_update(log_dir):
                hw_file.update(updates)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Drop what the job appended past the high watermarks. Best effort: Spark may still be
        stopping tasks, and a record appended after this is removed by the next commit."""
        log_dir = self.spec.log_dir
        hws = read_offsets(OffsetCheckpointFile(os.path.join(log_dir, HIGH_WATERMARK_FILE)))
        topics = {self.spec.topic} if self.spec.topic else set(self.partition_counts)
        topics |= {t for m in messages if isinstance(m, SeglogCommitMessage) for t, _, _, _ in m.appended}
        for pd in find_partition_dirs([log_dir]):
            if pd.topic not in topics:
                continue
            tp = (pd.topic, pd.partition)
            lg = _log_open(pd.dir, self.spec.config)
            try:
                lg.truncate_to(max(hws.get(tp, lg.log_start_offset), lg.log_start_offset))
            finally:
                lg.close()


def settle(lg: Log, hw: int, runs: list[tuple[int, int]]) -> int:
    """Make the job's ``runs`` the records right after ``hw`` and return the new high
    watermark; anything else past ``hw`` (left by failed attempts) is dropped."""
    if runs[0][0] == hw and all(a[1] == b[0] for a, b in itertools.pairwise(runs)):
        end = runs[-1][1]
        if lg.log_end_offset > end:
            lg.truncate_to(end)
        return end
    # Move the runs down over the leftovers: copy them out, cut the log, append them again.
    copies: list[bytes] = []
    for s, e in runs:
        off = s
        while off < e:
            r = lg.read(off, 16 << 20, upper_bound=e)
            data = r.to_bytes()
            if not data:
                break
            copies.append(data)
            off = batch_headers(data)[-1].last_offset + 1
    lg.truncate_to(hw)
    for data in copies:
        # Batches this log already held (transaction markers among them): not a client's.
        lg.append(data, leader_epoch=_leader_epoch(lg), origin="coordinator")
    lg.flush()
    return int(lg.log_end_offset)


def init_high_watermarks(log_dir: str) -> None:
    """Create the high-watermark file of a log dir that has none, with the log ends of the
    partitions already there, so their records stay visible to readers that honour it."""
    path = os.path.join(log_dir, HIGH_WATERMARK_FILE)
    with log_dir_update(log_dir):
        if os.path.exists(path):
            return
        ckpts = CheckpointCache()
        ends = {}
        for pd in find_partition_dirs([log_dir]):
            info = describe_partition(pd, "logEnd", ckpts)
            ends[info.tp] = info.log_end
        OffsetCheckpointFile(path).write(ends)
