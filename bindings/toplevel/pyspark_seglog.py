"""PySpark finds Python data sources in top-level modules named ``pyspark_*`` that define
``DefaultSource``: with seglog installed, ``spark.read.format("seglog")`` works without
``spark.dataSource.register``."""

from seglog.bindings.spark import SeglogDataSource as DefaultSource

__all__ = ["DefaultSource"]
