"""Batch reads: Spark's rows equal kafka-python's decode of the same segment files."""

from __future__ import annotations

import inspect
import pkgutil
from typing import Any

import pytest

from tests.conftest import T0
from tests.spark.conftest import DISCOVERY
from tests.spark.helpers import (
    CODECS,
    REAL,
    copy_real,
    expected_rows,
    oracle,
    sample_batches,
    spark_rows,
    write_log,
)


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    """Two topics, three partitions, many small segments, every codec, written by seglog."""
    root = tmp_path_factory.mktemp("ours")
    spec = {("orders", 0): 12, ("orders", 1): 7, ("audit", 0): 3}
    for (topic, p), n in spec.items():
        write_log(root / f"{topic}-{p}", sample_batches(p, n, 25, codecs=CODECS), {"segment.bytes": 4096})
    rows = [r for (topic, p) in spec for r in oracle(root / f"{topic}-{p}", topic, p)]
    return root, rows


def test_discovery_without_register(spark):
    assert DISCOVERY["result"] is True, f"format('seglog') before register failed: {DISCOVERY['result']!r}"
    assert "pyspark_seglog" in {m.name for m in pkgutil.iter_modules()}


def test_schema_matches_kafka_source(spark, ours):
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    root, _ = ours
    df = spark.read.format("seglog").option("includeHeaders", "true").load(str(root))
    assert df.schema == StructType(
        [
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("offset", LongType()),
            StructField("timestamp", TimestampType()),
            StructField("timestampType", IntegerType()),
            StructField(
                "headers", ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
            ),
        ]
    )


def test_arrow_schema_is_what_spark_expects():
    from pyspark.sql.pandas.types import to_arrow_schema

    from seglog.bindings.arrow import COLUMNS, arrow_schema
    from seglog.bindings.spark import spark_schema

    cols = list(COLUMNS)
    kw: dict[str, Any] = {"timezone": "UTC"} if "timezone" in inspect.signature(to_arrow_schema).parameters else {}
    assert arrow_schema(cols).equals(to_arrow_schema(spark_schema(cols), **kw))


def test_our_dirs_equal_kafka_python(spark, ours):
    root, rows = ours
    df = spark.read.format("seglog").option("includeHeaders", "true").load(str(root))
    got = spark_rows(df, headers=True)
    assert len(got) == 12 * 25 + 7 * 25 + 3 * 25
    assert got == expected_rows(rows, headers=True)


@pytest.mark.parametrize("rows", ["7", "1000000"])
def test_batch_size_does_not_change_rows(spark, ours, rows):
    """Batches cut below and far above a Kafka batch (so topic/partition columns of many
    sizes) give the same rows."""
    root, expected = ours
    df = spark.read.format("seglog").option("includeHeaders", "true").option("maxRowsPerBatch", rows).load(str(root))
    assert spark_rows(df, headers=True) == expected_rows(expected, headers=True)


def test_builder_constant_columns_across_sizes():
    import pyarrow as pa

    from seglog.bindings.arrow import KAFKA_COLUMNS, ArrowBatchBuilder
    from seglog.storage.records import decode_columns, encode_batch

    b = ArrowBatchBuilder(KAFKA_COLUMNS, topic="orders", partition=5)
    for n in (3, 9, 1, 9, 4, 12):
        cols = decode_columns(
            encode_batch([b"v%d" % i for i in range(n)], keys=[b"k"] * n, timestamps=T0), **b.decode_flags
        )
        rb = b.build(cols)
        rb.validate(full=True)
        assert rb.schema == b.schema
        assert rb.column("topic").equals(pa.array(["orders"] * n, pa.string()))
        assert rb.column("partition").equals(pa.array([5] * n, pa.int32()))
        assert rb.column("timestamp").cast(pa.int64()).to_pylist() == [T0 * 1000] * n
        assert rb.column("timestampType").to_pylist() == [0] * n
        # What Spark receives: the IPC stream of the batch.
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, rb.schema) as w:
            w.write_batch(rb)
        assert pa.ipc.open_stream(sink.getvalue()).read_next_batch().equals(rb)


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_kafka_dirs_equal_kafka_python(spark, tmp_path, name):
    if REAL[name][1]:
        pytest.importorskip("seglog._native.compression")
    root = copy_real([name], tmp_path / "logs")
    topic, _, p = name.rpartition("-")
    rows = oracle(root / name, topic, int(p))
    reader = spark.read.format("seglog").option("includeHeaders", "true")
    if topic.startswith("__"):
        # An internal topic is read only when named, as by Kafka's consumers.
        assert reader.load(str(root)).count() == 0
        reader = reader.option("subscribe", topic)
    df = reader.load(str(root))
    assert spark_rows(df, headers=True) == expected_rows(rows, headers=True)


def test_partition_dir_glob_and_list_paths(spark, ours):
    root, rows = ours
    one = spark.read.format("seglog").load(str(root / "orders-1"))
    assert one.count() == 7 * 25
    globbed = spark.read.format("seglog").load(str(root / "orders-*"))
    listed = spark.read.format("seglog").load([str(root / "orders-0"), str(root / "audit-0")])
    assert globbed.count() == 19 * 25
    assert listed.count() == 15 * 25


def test_topic_selection(spark, ours):
    root, _ = ours
    assert spark.read.format("seglog").option("topics", "audit").load(str(root)).count() == 75
    assert spark.read.format("seglog").option("subscribePattern", "ord.*").load(str(root)).count() == 19 * 25
    assert (
        (
            spark.read.format("seglog")
            .option("assign", '{"orders": [1]}')
            .load(str(root))
            .select("partition")
            .distinct()
            .collect()[0][0]
        )
        == 1
    )


def test_offset_ranges(spark, ours):
    root, rows = ours
    df = (
        spark.read.format("seglog")
        .option("startingOffsets", '{"orders": {"0": 30, "1": -2}, "audit": {"0": -2}}')
        .option("endingOffsets", '{"orders": {"0": 151, "1": -1}, "audit": {"0": 0}}')
        .load(str(root))
    )
    want = [r for r in rows if (r["topic"], r["partition"]) == ("orders", 0) and 30 <= r["offset"] < 151]
    want += [r for r in rows if (r["topic"], r["partition"]) == ("orders", 1)]
    assert spark_rows(df) == expected_rows(want)


def _first_at_or_after(rows, ts):
    """Kafka's offsetsForTimes: the first offset whose record timestamp is >= ts."""
    for r in rows:
        if r["timestamp"] >= ts:
            return r["offset"]
    return None


@pytest.mark.parametrize("start,end", [(T0 + 3200, T0 + 7100), (T0 + 3000, None), (None, T0 + 250)])
def test_timestamp_ranges_are_exact(spark, ours, start, end):
    root, rows = ours
    part = [r for r in rows if (r["topic"], r["partition"]) == ("orders", 0)]
    reader = spark.read.format("seglog").option("assign", '{"orders": [0]}')
    if start is not None:
        reader = reader.option("startingTimestamp", str(start))
    if end is not None:
        reader = reader.option("endingTimestamp", str(end))
    lo = 0 if start is None else _first_at_or_after(part, start)
    hi = 10**9 if end is None else _first_at_or_after(part, end)
    want = [r for r in part if lo <= r["offset"] < hi]
    assert want and len(want) < len(part)
    assert spark_rows(reader.load(str(root))) == expected_rows(want)
