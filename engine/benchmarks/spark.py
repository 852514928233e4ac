"""Spark (group ``spark``): ``count()`` and a full-row aggregate over segment dirs read with
``spark.read.format("seglog")``, beside the same rows as Parquet. One local session serves
every Spark benchmark of a run (:func:`spark_session`, stopped by :func:`stop_session`)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from seglog.storage.log import Log
from seglog.storage.records import encode_batch

from .inputs import PER_BATCH, T0, workdir
from .registry import Benchmark, Contender, Goal, Work, java_missing

_SPARK: dict[str, Any] = {}


def spark_session() -> Any:
    """One local[2] session for every Spark benchmark of a run; :func:`stop_session` stops it."""
    if "session" not in _SPARK:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        # PySpark (and the Spark binding over it) load only when a Spark benchmark runs.
        from pyspark.sql import SparkSession

        from seglog.bindings.spark import register

        s = (
            SparkSession.builder.master("local[2]")
            .appName("seglog-bench")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.driver.memory", "4g")
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate()
        )
        s.sparkContext.setLogLevel("ERROR")
        register(s)
        _SPARK["session"] = s
    return _SPARK["session"]


def stop_session() -> None:
    """Stop the Spark session, if a benchmark started one."""
    s = _SPARK.pop("session", None)
    if s is not None:
        s.stop()


def write_logs(logs: Path, records: int, partitions: int) -> int:
    """Partition dirs ``bench-0`` ... under ``logs``, ``records // partitions`` records each:
    8-byte keys and 100-byte values (random, seeded), batches of PER_BATCH. Returns the
    records written."""
    import numpy as np  # lazy: optional dependencies (seglog[bench]), as the peers'

    rng = np.random.default_rng(7)
    per_part = records // partitions
    for part in range(partitions):
        lg = Log.open(str(logs / f"bench-{part}"))
        for b in range(0, per_part, PER_BATCH):
            k = min(PER_BATCH, per_part - b)
            vals = rng.integers(0, 256, size=(k, 100), dtype=np.uint8).view("S100").ravel()
            keys = rng.integers(0, 256, size=(k, 8), dtype=np.uint8).view("S8").ravel()
            lg.append(encode_batch(vals, keys=keys, timestamps=T0 + b))
        lg.close()
    return per_part * partitions


def read_rows(logs: Path) -> dict[int, list[Any]]:
    """Each partition's rows under ``logs`` (all seven Kafka columns) as Arrow record batches,
    read as the seglog source reads them, without Spark."""
    import seglog.bindings.spark as sp  # lazy: needs PySpark, an optional dependency

    ro = sp.parse_read_options({"path": str(logs)})
    rows: dict[int, list[Any]] = {}
    for task in sp.plan_batch(ro, sp.Constraints()):
        rows.setdefault(task.partition, []).extend(sp.read_partition(task, ro))
    return rows


def _spark_data(p: Mapping[str, int], base: Path) -> dict[str, Any]:
    """Segment dirs written by seglog and the same rows (all seven Kafka columns, as the
    seglog source produces them) as Parquet, one file per partition, snappy."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = workdir(base, "spark")
    logs, parquet = root / "logs", root / "parquet"
    parquet.mkdir(parents=True)
    records = write_logs(logs, p["records"], p["partitions"])
    rows = read_rows(logs)
    for part in range(p["partitions"]):
        pq.write_table(
            pa.Table.from_batches(rows.get(part, [])),
            str(parquet / f"part-{part}.parquet"),
            row_group_size=100_000,
            compression="snappy",
        )
    return {"records": records, "logs": str(logs), "parquet": str(parquet), "root": root}


def spark_query(df: Any, query: str) -> Any:
    """Run ``query`` over ``df`` and collect it: ``"count"`` (``count()``),
    ``"sum_length_value"`` (``sum(length(value))``) or anything else: an aggregate over all
    seven Kafka columns."""
    from pyspark.sql import functions as F

    if query == "count":
        return df.count()
    if query == "sum_length_value":
        return df.agg(F.sum(F.length("value"))).collect()
    return df.agg(
        F.sum(F.length("key")),
        F.sum(F.length("value")),
        F.max("topic"),
        F.sum("partition"),
        F.max("offset"),
        F.max("timestamp"),
        F.sum("timestampType"),
    ).collect()


def _prepare_spark(p: Mapping[str, int], base: Path, available: frozenset[str], query: str) -> Work:
    data = _spark_data(p, base)
    spark = spark_session()
    frames = {
        'spark.read.format("seglog")': spark.read.format("seglog").load(data["logs"]),
        "spark.read.parquet": spark.read.parquet(data["parquet"]),
    }
    if query == "count":
        frames["seglog, columns=offset"] = spark.read.format("seglog").option("columns", "offset").load(data["logs"])
    expected = {name: spark_query(df, query) for name, df in frames.items()}  # also warms up
    if query == "count" and any(v != data["records"] for v in expected.values()):
        raise AssertionError(f"count() disagrees: {expected}")

    def runner(df: Any) -> Callable[[], object]:
        return lambda: spark_query(df, query)

    calls: dict[str, Callable[[], object]] = {name: runner(df) for name, df in frames.items()}
    return Work(
        items=data["records"],
        calls=calls,
        repeatable=False,
        close=lambda: shutil.rmtree(data["root"], ignore_errors=True),
    )


def spark_benches() -> list[Benchmark]:
    quick = {"records": 20_000, "partitions": 2}
    full = {"records": 10_000_000, "partitions": 8}
    seglog = Contender('spark.read.format("seglog")', "seglog", ("pyspark", "pyarrow"), "pyspark")
    parquet = Contender("spark.read.parquet", "peer", ("pyspark", "pyarrow"), "pyspark")
    return [
        Benchmark(
            name="spark-count",
            group="spark",
            unit="rows",
            title="Spark count() over the segment dirs vs the same rows as Parquet",
            contenders=(seglog, Contender("seglog, columns=offset", "seglog", ("pyspark",), "pyspark"), parquet),
            prepare=lambda p, b, a: _prepare_spark(p, b, a, "count"),
            quick=quick,
            full=full,
            unavailable=java_missing,
            full_round_seconds=30,
        ),
        Benchmark(
            name="spark-aggregate",
            group="spark",
            unit="rows",
            title="Spark aggregate over every column (full rows) vs the same rows as Parquet",
            contenders=(seglog, parquet),
            goals=(Goal("full row ≥0.9× Parquet", "ratio", 0.9, "spark.read.parquet"),),
            prepare=lambda p, b, a: _prepare_spark(p, b, a, "aggregate"),
            quick=quick,
            full=full,
            unavailable=java_missing,
            full_round_seconds=30,
        ),
    ]
