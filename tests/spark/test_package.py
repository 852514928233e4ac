"""The package's public names: what ``seglog.bindings.spark`` offered as one module it still
offers, and PySpark's discovery module hands it the data source."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

pytest.importorskip("pyspark")

import seglog.bindings.spark as sp  # noqa: E402

#: Every public name the single-module ``seglog.bindings.spark`` defined (its planning view of a
#: partition, ``PartitionInfo``, is now ``ReadablePartition``).
NAMES = [
    "HIGH_WATERMARK_FILE",
    "INTERNAL_TOPICS",
    "LOG_START_FILE",
    "NAME",
    "PARTITION_LOCK_WAIT_S",
    "PUSHDOWN_CONF",
    "Bound",
    "Constraints",
    "PartitionDir",
    "ReadOptions",
    "SeglogCommitMessage",
    "SeglogDataSource",
    "SeglogInputPartition",
    "SeglogPushdownReader",
    "SeglogReader",
    "SeglogStreamReader",
    "SeglogWriter",
    "TsBatch",
    "describe_partition",
    "exact_timestamp_offset",
    "find_partition_dirs",
    "find_timestamp_batch",
    "load_partitions",
    "parse_read_options",
    "plan",
    "plan_batch",
    "push_filters",
    "read_partition",
    "register",
    "select_partitions",
    "spark_schema",
    "split_ranges",
    "transaction_state",
]


@pytest.mark.parametrize("name", NAMES)
def test_public_name_is_still_there(name: str) -> None:
    assert name in sp.__all__
    assert getattr(sp, name) is not None


def test_every_module_imports_and_all_is_exact() -> None:
    for info in pkgutil.iter_modules(sp.__path__):
        importlib.import_module(f"{sp.__name__}.{info.name}")
    assert sorted(set(sp.__all__)) == sorted(sp.__all__)
    assert all(hasattr(sp, n) for n in sp.__all__)
    assert sp.HIGH_WATERMARK_FILE == "replication-offset-checkpoint"
    assert {"__consumer_offsets", "__transaction_state", "__cluster_metadata"} == sp.INTERNAL_TOPICS


def test_discovery_module_gives_the_data_source() -> None:
    import pyspark_seglog

    assert pyspark_seglog.DefaultSource is sp.SeglogDataSource
    assert sp.SeglogDataSource.name() == sp.NAME == "seglog"
