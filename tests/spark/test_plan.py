"""Planning: no record data on the driver, Kafka's range splitting, pushed filters (checked
in the plan, not only in the rows), high watermarks, column options."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest

import seglog.bindings.spark as sp
from tests.conftest import T0
from tests.spark.conftest import requires_pushdown
from tests.spark.helpers import expected_rows, oracle, patch_spark_modules, sample_batches, spark_rows, write_log


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """orders-0: 40 batches of 10 records, one second apart, in many small segments."""
    root = tmp_path_factory.mktemp("plan")
    write_log(root / "orders-0", sample_batches(0, 40, 10), {"segment.bytes": 1024})
    write_log(root / "orders-1", sample_batches(1, 4, 10), {"segment.bytes": 1024})
    rows = oracle(root / "orders-0", "orders", 0) + oracle(root / "orders-1", "orders", 1)
    return root, rows


def options(root, **kw):
    return sp.parse_read_options({"path": str(root), **{k: str(v) for k, v in kw.items()}})


def test_planning_reads_no_record_data(logs, monkeypatch):
    root, _ = logs
    opened: list[tuple[Any, Any]] = []
    real_open = sp.segments.open_segment

    def open_segment(d: Any, b: Any) -> Any:
        opened.append((d, b))
        return real_open(d, b)

    patch_spark_modules(monkeypatch, "open_segment", open_segment)
    patch_spark_modules(monkeypatch, "decode_columns", None)  # any decode would fail
    patch_spark_modules(monkeypatch, "decode_records", None)
    parts = sp.plan_batch(options(root, maxBytesPerPartition=1), sp.Constraints())
    n_segments = len(list((root / "orders-0").glob("*.log"))) + len(list((root / "orders-1").glob("*.log")))
    assert len(parts) == n_segments > 10  # one task per segment here
    assert len(opened) == 2  # only each partition's last segment
    assert sorted(b for _, b in opened) == sorted(
        max(s for p in parts if p.partition == k for s in p.segments) for k in (0, 1)
    )


def test_segments_are_grouped_up_to_max_bytes(logs):
    root, rows = logs
    parts = sp.plan_batch(options(root), sp.Constraints())
    assert [(p.partition, p.start, p.end) for p in parts] == [(0, 0, 400), (1, 0, 40)]
    sizes = {int(f.stem): f.stat().st_size for f in (root / "orders-0").glob("*.log")}
    limit = sum(sizes.values()) // 3 + 1
    parts = sp.plan_batch(options(root, maxBytesPerPartition=limit), sp.Constraints())
    zero = [p for p in parts if p.partition == 0]
    assert 3 <= len(zero) <= 4 and zero[0].start == 0 and zero[-1].end == 400
    assert all(a.end == b.start == b.segments[0] for a, b in zip(zero, zero[1:]))
    for a, b in zip(zero, zero[1:]):  # each group is as large as the limit allows
        assert sum(sizes[s] for s in a.segments) <= limit < sum(sizes[s] for s in a.segments) + sizes[b.segments[0]]


def kafka_split_model(sizes, min_partitions):
    """Spark's KafkaOffsetRangeCalculator, written out independently for the test."""
    total = sum(sizes)

    def count(size, tot, parts):
        return max(int(math.floor(size / tot * parts + 0.5)), 1)

    unsplit = [i for i, s in enumerate(sizes) if count(s, total, min_partitions) == 1]
    rest_total = total - sum(sizes[i] for i in unsplit)
    budget = max(min_partitions - len(unsplit), 1)
    return [1 if i in unsplit else count(s, rest_total, budget) for i, s in enumerate(sizes)]


@pytest.mark.parametrize("min_partitions", [3, 5, 9, 40])
def test_min_partitions_split_like_kafka(logs, min_partitions):
    root, _ = logs
    parts = sp.plan_batch(options(root, minPartitions=min_partitions), sp.Constraints())
    counts = [sum(1 for p in parts if p.partition == k) for k in (0, 1)]
    assert counts == kafka_split_model([400, 40], min_partitions)
    for k, total in ((0, 400), (1, 40)):
        mine = sorted((p.start, p.end) for p in parts if p.partition == k)
        assert mine[0][0] == 0 and mine[-1][1] == total
        assert all(a[1] == b[0] for a, b in zip(mine, mine[1:]))


def test_max_records_per_partition(logs):
    root, _ = logs
    parts = sp.plan_batch(options(root, maxRecordsPerPartition=64), sp.Constraints())
    assert max(p.end - p.start for p in parts) <= 64
    assert sum(p.end - p.start for p in parts) == 440


def test_split_reads_every_record_once(spark, logs):
    root, rows = logs
    df = spark.read.format("seglog").option("minPartitions", "7").option("maxRecordsPerPartition", "33").load(str(root))
    assert df.rdd.getNumPartitions() >= 14
    assert spark_rows(df) == expected_rows(rows)


def executed_plan(df):
    return df._jdf.queryExecution().executedPlan().toString()


def filter_nodes(plan):
    """The Filter operators of a physical plan (not BatchScan's "RuntimeFilters")."""
    return re.findall(r"(?<![A-Za-z])Filter \((.*)\)\n", plan)


@requires_pushdown
def test_pushed_filters_narrow_the_plan(spark, logs):
    root, rows = logs
    load = lambda: spark.read.format("seglog").option("maxBytesPerPartition", "1").load(str(root))  # noqa: E731
    everything = load().rdd.getNumPartitions()
    q = load().where("partition = 0 AND offset >= 250 AND offset < 300 AND topic = 'orders'")
    plan = executed_plan(q)
    assert filter_nodes(plan) == [], plan  # all four handled by the source
    assert q.rdd.getNumPartitions() < everything / 3
    want = [r for r in rows if r["partition"] == 0 and 250 <= r["offset"] < 300]
    assert spark_rows(q) == expected_rows(want)

    # A timestamp lower bound prunes segments but stays in Spark's Filter (Kafka timestamps
    # are not ordered); the rows must still be exactly right.
    cut = T0 + 30_000
    q = load().where(f"timestamp >= timestamp_millis({cut})")
    plan = executed_plan(q)
    assert len(filter_nodes(plan)) == 1 and "timestamp" in filter_nodes(plan)[0], plan
    assert q.rdd.getNumPartitions() < everything / 2
    assert spark_rows(q) == expected_rows([r for r in rows if r["timestamp"] >= cut])


def test_filters_same_rows_without_pushdown(spark, logs):
    root, _ = logs
    where = "partition IN (1) OR offset < 3"
    q1 = spark.read.format("seglog").load(str(root)).where(where)
    q2 = spark.read.format("seglog").option("pushFilters", "false").load(str(root)).where(where)
    assert filter_nodes(executed_plan(q1))  # an OR is never pushed
    assert spark_rows(q1) == spark_rows(q2)
    q3 = spark.read.format("seglog").load(str(root)).where("offset IN (5, 77, 399) AND partition = 0")
    assert [r["offset"] for r in spark_rows(q3)] == [5, 77, 399]


@requires_pushdown
def test_push_filters_in_process():
    from pyspark.sql.datasource import EqualTo, GreaterThan, In, IsNotNull, LessThanOrEqual, StringStartsWith

    fs = [
        IsNotNull(("offset",)),
        In(("partition",), (0, 2)),
        GreaterThan(("offset",), 9),
        LessThanOrEqual(("offset",), 20),
        StringStartsWith(("topic",), "ord"),
        EqualTo(("value",), b"x"),
        In(("offset",), (12, 15)),
    ]
    c, rest = sp.push_filters(fs)
    assert rest == [fs[5], fs[6]] and all(a is b for a, b in zip(rest, [fs[5], fs[6]]))
    assert (c.offset_lo, c.offset_hi) == (12, 16)
    assert c.partition_ok(2) and not c.partition_ok(1)
    assert c.topic_ok("orders") and not c.topic_ok("audit")


def test_pushdown_off_in_the_session(spark, logs):
    """With the session's pushdown conf off, PySpark refuses readers that define pushFilters;
    the source then hands out its plain reader and Spark filters everything itself."""
    root, rows = logs
    spark.conf.set(sp.PUSHDOWN_CONF, "false")
    try:
        q = spark.read.format("seglog").load(str(root)).where("partition = 1 AND offset >= 30")
        assert filter_nodes(executed_plan(q))
        assert spark_rows(q) == expected_rows([r for r in rows if r["partition"] == 1 and r["offset"] >= 30])
    finally:
        spark.conf.set(sp.PUSHDOWN_CONF, "true")


def test_high_watermark_bounds_reads(spark, tmp_path):
    write_log(tmp_path / "t-0", sample_batches(0, 5, 10))
    write_log(tmp_path / "t-1", sample_batches(1, 5, 10))
    read = lambda **o: spark.read.format("seglog").options(**o).load(str(tmp_path)).count()  # noqa: E731
    assert read() == 100  # no checkpoint: the log ends
    with pytest.raises(Exception, match="readUpTo=highWatermark, but .*replication-offset-checkpoint"):
        read(readUpTo="highWatermark")
    (tmp_path / "replication-offset-checkpoint").write_text("0\n1\nt 0 23\n")
    assert read() == 23  # t-1 is not in the file: nothing committed
    assert read(readUpTo="highWatermark") == 23
    assert read(readUpTo="logEnd") == 100


def test_column_options(spark, logs):
    root, rows = logs
    df = spark.read.format("seglog").option("columns", "value,offset").load(str(root))
    assert df.columns == ["value", "offset"]
    got = sorted((r.offset, bytes(r.value) if r.value is not None else None) for r in df.where("offset < 5").collect())
    assert got == sorted((r["offset"], r["value"]) for r in rows if r["offset"] < 5)
    df = spark.read.format("seglog").schema("offset bigint, partition int").load(str(root))
    assert df.groupBy("partition").count().orderBy("partition").collect() == [(0, 400), (1, 40)]
    assert spark.read.format("seglog").option("columns", "offset").load(str(root)).count() == 440
    with pytest.raises(Exception, match="column 'offset' must be bigint, the schema says int"):
        spark.read.format("seglog").schema("offset int").load(str(root)).collect()


def test_leader_epoch_column(spark, tmp_path):
    from seglog import Log
    from seglog.storage.records import encode_batch

    lg = Log.open(str(tmp_path / "e-0"))
    lg.append(encode_batch([b"a"], timestamps=T0))
    lg.append(encode_batch([b"b", b"c"], timestamps=T0), leader_epoch=4)
    lg.close()
    df = spark.read.format("seglog").option("includeLeaderEpoch", "true").load(str(tmp_path))
    assert df.columns[-1] == "leaderEpoch"
    assert [(r.offset, r.leaderEpoch) for r in df.orderBy("offset").collect()] == [(0, None), (1, 4), (2, 4)]
