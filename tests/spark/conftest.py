"""One SparkSession (``local[2]``, UI off, two shuffle partitions) for every Spark test.

The session is made before anything registers the source, and its first read uses
``format("seglog")`` unregistered: that read only works if PySpark discovered the
``pyspark_seglog`` module by itself (recorded in ``spark_discovery``)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

import pytest

DISCOVERY: dict[str, object] = {}


def _has(module: str, name: str) -> bool:
    try:
        return hasattr(__import__(module, fromlist=[name]), name)
    except ImportError:
        return False


#: Filter pushdown for Python data sources arrived in PySpark 4.1.
requires_pushdown = pytest.mark.skipif(
    not _has("pyspark.sql.datasource", "EqualTo"), reason="filter pushdown needs PySpark >= 4.1"
)
#: Admission control (ReadLimit, SupportsTriggerAvailableNow) arrived in PySpark 4.2.
requires_admission_control = pytest.mark.skipif(
    not _has("pyspark.sql.streaming.datasource", "ReadMaxRows"),
    reason="streaming admission control needs PySpark >= 4.2",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.spark)
            # PySpark 4.0's py4j sockets are left for the garbage collector.
            item.add_marker(pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning"))
            item.add_marker(
                pytest.mark.filterwarnings(
                    "ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning"
                )
            )


@pytest.fixture(scope="session")
def spark_session():
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime: PySpark needs one (java on PATH or JAVA_HOME)")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("seglog-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    empty = tempfile.mkdtemp(prefix="seglog-discovery-")
    try:
        discovered: bool | Exception = spark.read.format("seglog").load(empty).count() == 0
    except Exception as exc:  # noqa: BLE001 - recorded, asserted by test_discovery
        discovered = exc
    finally:
        shutil.rmtree(empty, ignore_errors=True)
    from seglog.bindings.spark import register

    register(spark)
    DISCOVERY["result"] = discovered
    yield spark
    spark.stop()


@pytest.fixture
def spark(spark_session):
    return spark_session
