"""The data source Spark sees: ``spark.read.format("seglog")``, ``spark.readStream`` and
``df.write.format("seglog")`` tied to the options, the readers and the writer; and
:func:`register`."""

from __future__ import annotations

import os
import sys
from types import FrameType
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from seglog.bindings.spark.checkpoints import log_dir_update
from seglog.bindings.spark.logdirs import find_partition_dirs, select_partitions
from seglog.bindings.spark.options import parse_read_options, parse_write_options
from seglog.bindings.spark.reader import SeglogPushdownReader, SeglogReader
from seglog.bindings.spark.schema import check_write_schema, columns_of, spark_schema
from seglog.bindings.spark.stream import SeglogStreamReader
from seglog.bindings.spark.writer import SeglogWriter, init_high_watermarks
from seglog.errors import ConfigError
from seglog.storage.checkpoints import ensure_meta_properties

NAME = "seglog"
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any, *, filter_pushdown: bool = True) -> None:
    """Register the ``seglog`` source with ``spark`` and (by default) turn on
    ``spark.sql.python.filterPushdown.enabled`` so pushed filters narrow the plan."""
    if filter_pushdown:
        spark.conf.set(PUSHDOWN_CONF, "true")
    try:
        spark.dataSource.register(SeglogDataSource)
    except Exception as exc:
        # PySpark 4.0 refuses to register a name it already found through pyspark_seglog.
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(exc):
            raise


def local_session(
    app_name: str,
    *,
    cores: int = 2,
    conf: dict[str, str] | None = None,
    log_level: str = "ERROR",
    register_source: bool = True,
) -> Any:
    """A local Spark session (``local[cores]``) for one program: no web UI, no console progress
    bar, ``cores`` shuffle partitions, ``conf`` on top, the log level set and (by default) the
    ``seglog`` source registered. Python workers run this interpreter unless ``PYSPARK_PYTHON``
    says otherwise."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    if register_source:
        register(spark)
    return spark


def _called_for_filter_pushdown() -> bool:
    """True when PySpark's filter-pushdown planner (``data_source_pushdown_filters``) asks for
    the reader. PySpark refuses a reader that defines ``pushFilters`` when the session has
    pushdown off, and ``reader()`` is not told which planner calls it."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if os.path.basename(frame.f_code.co_filename) == "data_source_pushdown_filters.py":
            return True
        frame = frame.f_back
    return False


class SeglogDataSource(DataSource):
    """``spark.read.format("seglog")`` / ``df.write.format("seglog")`` (see the package docs)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        ro = parse_read_options(self.options)
        # Fail at load() rather than at the first action: paths and topics must exist.
        select_partitions(find_partition_dirs(ro.paths), ro)
        return spark_schema(ro.columns)

    def reader(self, schema: StructType) -> DataSourceReader:
        ro = parse_read_options(self.options, columns=columns_of(schema))
        if ro.push_filters and _called_for_filter_pushdown():
            return SeglogPushdownReader(ro)
        return SeglogReader(ro)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return SeglogStreamReader(parse_read_options(self.options, streaming=True, columns=columns_of(schema)))

    def writer(self, schema: StructType, overwrite: bool) -> SeglogWriter:
        if overwrite:
            raise ConfigError("seglog: a commit log cannot be overwritten; use mode('append')", key="mode")
        spec = parse_write_options(self.options)
        check_write_schema(schema, spec.topic)
        log_dir = spec.log_dir
        os.makedirs(log_dir, exist_ok=True)
        with log_dir_update(log_dir):
            ensure_meta_properties(log_dir)
        counts: dict[str, int] = {}
        for pd in find_partition_dirs([log_dir]):
            counts[pd.topic] = max(counts.get(pd.topic, 0), pd.partition + 1)
        init_high_watermarks(log_dir)
        return SeglogWriter(spec, counts)
