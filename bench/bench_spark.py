"""Spark reading seglog directories, side by side with the alternatives, in one run.

``test_registry``: the registry's ``spark-count`` and ``spark-aggregate`` benchmarks (what
``seglog bench --only spark`` runs: seglog vs ``spark.read.parquet``; goal: full rows >= 0.9x
Parquet). The rest of this file is a wider look for developers:

Data: ``SEGLOG_SPARK_BENCH_RECORDS`` records (default 10 million) with 8-byte keys and 100-byte
values in 8 partitions, written once by seglog; the same rows (all seven Kafka columns) written
once by pyarrow as Parquet (one file per partition, 100k-row row groups, snappy); and the very
Arrow batches the seglog source hands to Spark, saved as Arrow IPC files.

Readers:

* ``seglog``: ``spark.read.format("seglog")`` (decodes the segments in the Spark tasks);
* ``seglog_columns``: the same with ``columns=`` naming only what the query needs (``value``
  for the one-column aggregate, ``offset`` for ``count()``);
* ``parquet``: ``spark.read.parquet`` of the same rows;
* ``mapInArrow_ipc``: ``mapInArrow`` yielding the saved batches (memory-mapped, no decoding):
  the ceiling of Python-to-JVM transport for these batches;
* ``pyds_ipc``: a minimal Python data source yielding the same saved batches: the ceiling of
  the Python Data Source API itself (``seglog`` minus our decoding);
* ``mapInArrow_decode``: ``mapInArrow`` running the seglog reader's decode loop: the same work
  as ``seglog`` minus the Python data source API.

Queries: ``all_columns`` (an aggregate over every column), ``sum_length_value``
(``sum(length(value))``) and ``count``. Rows/s = records / median time. ``test_side_by_side``
also records each case's CPU seconds in the JVM and in Spark's Python workers (from /proc),
steadier than wall time on a shared machine.

Planning: the driver's planning of 10,000 segments (8 partitions), directly and through Spark.

``pytest bench/bench_spark.py`` runs it (a Java runtime is needed); with
``--benchmark-disable`` (the CI smoke pass) it uses 20,000 records and 200 segments.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import pytest

from seglog.benchmarks import cases
from seglog.benchmarks.spark import spark_query

pytestmark = pytest.mark.spark

RECORDS = int(os.environ.get("SEGLOG_SPARK_BENCH_RECORDS", 10_000_000))
PARTITIONS = 8
SEGMENTS = 10_000
T0 = 1_700_000_000_000


REGISTRY_CASES = cases("spark-count", "spark-aggregate")


@pytest.mark.parametrize("name,contender", REGISTRY_CASES, ids=[f"{n}-{c}" for n, c in REGISTRY_CASES])
def test_registry(bench_run: Callable[[str, str], None], name: str, contender: str) -> None:
    bench_run(name, contender)


def _smoke(config: Any) -> bool:
    return bool(config.getoption("benchmark_disable", False))


@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark")
    import shutil

    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime")
    from seglog.benchmarks.spark import spark_session

    # The registry's session, shared with test_registry; stopped at the end of the session.
    s = spark_session()
    s.dataSource.register(_ipc_source())
    return s


def _scratch(name: str) -> Any:
    """A private temporary directory (not pytest's tmp_path, whose old runs another pytest on
    the machine may delete while a long benchmark still reads them)."""
    import shutil
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp(prefix=f"seglog-bench-{name}-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def scratch():
    yield from _scratch("spark")


@pytest.fixture(scope="module")
def data(request, scratch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from seglog.benchmarks.spark import read_rows, write_logs
    from seglog.bindings.arrow import KAFKA_COLUMNS, arrow_schema

    n = 20_000 if _smoke(request.config) else RECORDS
    logs, parquet, ipc = scratch / "logs", scratch / "parquet", scratch / "ipc"
    parquet.mkdir()
    ipc.mkdir()
    records = write_logs(logs, n, PARTITIONS)
    rows = read_rows(logs)
    schema = arrow_schema(KAFKA_COLUMNS)
    for p in range(PARTITIONS):
        batches = rows.get(p, [])
        pq.write_table(
            pa.Table.from_batches(batches, schema),
            str(parquet / f"part-{p}.parquet"),
            row_group_size=100_000,
            compression="snappy",
        )
        with pa.OSFile(str(ipc / f"part-{p}.arrow"), "wb") as f, pa.ipc.new_file(f, schema) as w:
            for b in batches:
                w.write_batch(b)
    return {"records": records, "logs": logs, "parquet": parquet, "ipc": ipc}


def _frame(spark: Any, data: dict[str, Any], reader: str, query: str) -> Any:
    from pyspark.sql.types import StructType

    import seglog.bindings.spark as sp
    from seglog.bindings.arrow import KAFKA_COLUMNS

    if reader == "seglog":
        return spark.read.format("seglog").load(str(data["logs"]))
    if reader == "seglog_columns":
        cols = {"sum_length_value": "value", "count": "offset"}[query]
        return spark.read.format("seglog").option("columns", cols).load(str(data["logs"]))
    if reader == "parquet":
        return spark.read.parquet(str(data["parquet"]))
    schema: StructType = sp.spark_schema(KAFKA_COLUMNS)
    ipc_dir, logs = str(data["ipc"]), str(data["logs"])
    if reader == "pyds_ipc":
        return spark.read.format("seglog_bench_ipc").option("dir", ipc_dir).load()
    if reader == "mapInArrow_ipc":

        def from_ipc(it: Any) -> Any:
            import pyarrow as pa

            for batch in it:
                for p in batch.column(0).to_pylist():
                    reader_ = pa.ipc.open_file(pa.memory_map(f"{ipc_dir}/part-{p}.arrow"))
                    for i in range(reader_.num_record_batches):
                        yield reader_.get_batch(i)

        return spark.range(0, PARTITIONS, 1, PARTITIONS).mapInArrow(from_ipc, schema)

    def decode(it: Any) -> Any:
        import seglog.bindings.spark as s2

        ro = s2.parse_read_options({"path": logs})
        for batch in it:
            for p in batch.column(0).to_pylist():
                for part in s2.plan_batch(ro, s2.Constraints()):
                    if part.partition == p:
                        yield from s2.read_partition(part, ro)

    return spark.range(0, PARTITIONS, 1, PARTITIONS).mapInArrow(decode, schema)


def _ipc_source() -> Any:
    """A Python data source yielding the saved Arrow batches of each partition (defined in a
    function so that Spark pickles the classes by value for its workers)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    import seglog.bindings.spark as sp
    from seglog.bindings.arrow import KAFKA_COLUMNS

    class Reader(DataSourceReader):
        def __init__(self, ipc_dir: str) -> None:
            self.ipc_dir = ipc_dir

        def partitions(self) -> list[InputPartition]:
            return [InputPartition(p) for p in range(PARTITIONS)]

        def read(self, partition: InputPartition) -> Any:
            import pyarrow as pa

            r = pa.ipc.open_file(pa.memory_map(f"{self.ipc_dir}/part-{partition.value}.arrow"))
            for i in range(r.num_record_batches):
                yield r.get_batch(i)

    class Source(DataSource):
        @classmethod
        def name(cls) -> str:
            return "seglog_bench_ipc"

        def schema(self) -> Any:
            return sp.spark_schema(KAFKA_COLUMNS)

        def reader(self, schema: Any) -> Reader:
            return Reader(self.options["dir"])

    return Source


CASES = [
    (r, q)
    for q in ("all_columns", "sum_length_value", "count")
    for r in ("seglog", "seglog_columns", "parquet", "mapInArrow_ipc", "pyds_ipc", "mapInArrow_decode")
    if not (r == "seglog_columns" and q == "all_columns")
]


@pytest.mark.parametrize("reader,query", CASES, ids=[f"{q}-{r}" for r, q in CASES])
def test_read(benchmark, spark, data, reader, query):
    if reader.startswith("mapInArrow"):
        pytest.importorskip("pandas")  # PySpark's mapInArrow insists on it
    df = _frame(spark, data, reader, query)
    expected = spark_query(df, query)  # also the warm-up
    if query == "count":
        assert expected == data["records"]
    benchmark.extra_info["records"] = data["records"]
    result = benchmark.pedantic(spark_query, args=(df, query), rounds=1 if benchmark.disabled else 3, iterations=1)
    assert result == expected
    if not benchmark.disabled:
        benchmark.extra_info["rows_per_s"] = data["records"] / benchmark.stats.stats.median


def test_side_by_side(benchmark, spark, data):
    """Every case once per round, the order rotated each round, so that load from other
    processes on the machine falls on all readers alike; reports medians and the ratios the
    goals are stated in (``extra_info``)."""
    cases = [c for c in CASES if not (c[0].startswith("mapInArrow") and not _has_pandas())]
    frames = {c: _frame(spark, data, *c) for c in cases}
    times: dict[tuple[str, str], list[float]] = {c: [] for c in cases}
    cpu: dict[tuple[str, str], list[tuple[float, float]]] = {c: [] for c in cases}
    loads: list[float] = []
    state = {"round": 0}

    def one_round() -> None:
        k = state["round"]
        state["round"] += 1
        order = cases[k % len(cases) :] + cases[: k % len(cases)]
        for c in order:
            c0 = _cpu_of_children()
            t = time.perf_counter()
            spark_query(frames[c], c[1])
            times[c].append(time.perf_counter() - t)
            c1 = _cpu_of_children()
            cpu[c].append((c1[0] - c0[0], c1[1] - c0[1]))
        loads.append(os.getloadavg()[0])

    one_round()  # warm-up, not kept
    for c in cases:
        times[c].clear()
        cpu[c].clear()
    benchmark.pedantic(one_round, rounds=1 if benchmark.disabled else 5, iterations=1)
    n = data["records"]
    med = {c: statistics.median(v) for c, v in times.items()}
    info = benchmark.extra_info
    info["records"] = n
    info["load_average_1m"] = [round(x, 2) for x in loads]
    for (reader, query), m in med.items():
        info[f"{query}/{reader}/median_s"] = round(m, 3)
        info[f"{query}/{reader}/Mrows_per_s"] = round(n / m / 1e6, 3)
        if cpu[(reader, query)] and cpu[(reader, query)][0][0] >= 0:
            # CPU seconds of the JVM and of the Python workers: less noisy than wall time on a
            # shared machine, and they show where the time goes.
            info[f"{query}/{reader}/cpu_jvm_s"] = round(statistics.median(x[0] for x in cpu[(reader, query)]), 2)
            info[f"{query}/{reader}/cpu_python_s"] = round(statistics.median(x[1] for x in cpu[(reader, query)]), 2)
    for query in ("all_columns", "sum_length_value", "count"):
        ours = med.get(("seglog", query))
        for other in ("parquet", "mapInArrow_ipc", "pyds_ipc", "mapInArrow_decode", "seglog_columns"):
            if ours and (other, query) in med:
                # speed of seglog relative to the other reader (rows/s ratio)
                info[f"{query}/seglog_vs_{other}"] = round(med[(other, query)] / ours, 3)


def _cpu_of_children() -> tuple[float, float]:
    """CPU seconds used so far by this process's descendants: (the JVM, the Python workers and
    planners Spark started), from /proc; (-1, -1) where there is no /proc."""
    if not os.path.isdir("/proc/self/task"):
        return -1.0, -1.0
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[tuple[int, bool, float]]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm, rest = stat.split("(", 1)[1].rsplit(")", 1)
        fields = rest.split()
        # utime, stime, and the waited-for children's cutime, cstime (fields 14-17)
        used = sum(int(x) for x in fields[11:15]) / tick
        children.setdefault(int(fields[1]), []).append((int(name), comm == "java", used))
    jvm = py = 0.0
    stack = [os.getpid()]
    while stack:
        for pid, is_jvm, used in children.get(stack.pop(), []):
            if is_jvm:
                jvm += used
            else:
                py += used
            stack.append(pid)
    return jvm, py


def _has_pandas() -> bool:
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def many_segments(request):
    yield from _many_segments(request)


def _many_segments(request: Any) -> Any:
    from seglog import Log
    from seglog.storage.records import encode_batch

    total = 200 if _smoke(request.config) else SEGMENTS
    scratch = _scratch("segments")
    root = next(scratch)
    for p in range(PARTITIONS):
        # 200 bytes hold one 170-byte batch: each append rolls a new segment (a batch larger
        # than segment.bytes is refused, as Kafka refuses it).
        lg = Log.open(str(root / f"many-{p}"), {"segment.bytes": 200})
        for i in range(total // PARTITIONS):
            lg.append(encode_batch([b"x" * 100], timestamps=T0 + i))
        lg.close()
    n = sum(1 for p in range(PARTITIONS) for f in os.listdir(root / f"many-{p}") if f.endswith(".log"))
    assert n == total
    yield root, total
    next(scratch, None)


@pytest.mark.parametrize("mode", ["grouped", "one_task_per_segment", "startingTimestamp"])
def test_plan_segments(benchmark, many_segments, mode):
    import seglog.bindings.spark as sp

    root, total = many_segments
    opts = {"path": str(root)}
    if mode == "one_task_per_segment":
        opts["maxBytesPerPartition"] = "1"
    if mode == "startingTimestamp":
        opts["startingTimestamp"] = str(T0 + total // PARTITIONS - 10)
    ro = sp.parse_read_options(opts)
    parts = benchmark(sp.plan_batch, ro, sp.Constraints())
    benchmark.extra_info["segments"] = total
    benchmark.extra_info["input_partitions"] = len(parts)


def test_plan_segments_through_spark(benchmark, spark, many_segments):
    """load() + physical planning (Python planner processes included), no job run."""
    root, total = many_segments

    def plan() -> int:
        df = spark.read.format("seglog").load(str(root))
        return int(df._jdf.queryExecution().executedPlan().toString().count("BatchScan"))

    plan()
    assert benchmark.pedantic(plan, rounds=1 if benchmark.disabled else 5, iterations=1) == 1
    benchmark.extra_info["segments"] = total
