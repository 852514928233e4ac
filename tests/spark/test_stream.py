"""Structured Streaming follows growing logs: records appended between runs are read exactly
once, micro-batches respect maxRecordsPerTrigger (PySpark >= 4.2), new partitions are found."""

from __future__ import annotations

import pytest

from tests.spark.conftest import requires_admission_control
from tests.spark.helpers import sample_batches, write_log


def run_available_now(spark, root, checkpoint, **opts):
    """One trigger(availableNow=True) run; returns the (partition, offset) of each micro-batch."""
    batches = []

    def collect(df, batch_id):
        batches.append(sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect()))

    q = (
        spark.readStream.format("seglog")
        .options(**opts)
        .load(str(root))
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    return [b for b in batches if b]


@requires_admission_control
def test_stream_reads_appends_exactly_once(spark, tmp_path):
    root = tmp_path / "logs"
    write_log(root / "s-0", sample_batches(0, 10, 10))
    ckpt = tmp_path / "ckpt"
    first = run_available_now(spark, root, ckpt, startingOffsets="earliest", maxRecordsPerTrigger="40")
    assert [len(b) for b in first] == [40, 40, 20]
    assert sorted(x for b in first for x in b) == [(0, o) for o in range(100)]

    write_log(root / "s-0", sample_batches(0, 3, 10))  # 30 more records
    write_log(root / "s-1", sample_batches(1, 2, 10))  # a new partition: read from its start
    second = run_available_now(spark, root, ckpt, startingOffsets="earliest", maxRecordsPerTrigger="40")
    got = sorted(x for b in second for x in b)
    assert got == [(0, o) for o in range(100, 130)] + [(1, o) for o in range(20)]
    assert all(len(b) <= 40 for b in second)

    assert run_available_now(spark, root, ckpt, startingOffsets="earliest") == []


def test_stream_without_a_limit_reads_everything_once(spark, tmp_path):
    """Every PySpark 4.x: no maxRecordsPerTrigger, appends between runs read exactly once."""
    root = tmp_path / "logs"
    write_log(root / "s-0", sample_batches(0, 3, 10))
    ckpt = tmp_path / "ckpt"
    first = run_available_now(spark, root, ckpt, startingOffsets="earliest")
    assert sorted(x for b in first for x in b) == [(0, o) for o in range(30)]
    write_log(root / "s-0", sample_batches(0, 1, 7))
    second = run_available_now(spark, root, ckpt, startingOffsets="earliest")
    assert sorted(x for b in second for x in b) == [(0, o) for o in range(30, 37)]


def test_stream_starts_at_latest_by_default(spark, tmp_path):
    root = tmp_path / "logs"
    write_log(root / "s-0", sample_batches(0, 2, 10))
    ckpt = tmp_path / "ckpt"
    assert run_available_now(spark, root, ckpt) == []
    write_log(root / "s-0", sample_batches(0, 1, 5))
    assert run_available_now(spark, root, ckpt) == [[(0, o) for o in range(20, 25)]]


def test_stream_rejects_ending_offsets(spark, tmp_path):
    write_log(tmp_path / "s-0", sample_batches(0, 1, 1))
    with pytest.raises(Exception, match="seglog option endingOffsets: is for batch queries only"):
        run_available_now(spark, tmp_path, tmp_path / "ckpt", endingOffsets="latest")
