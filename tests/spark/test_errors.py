"""Bad input gives one clear line naming the option, path or file."""
from __future__ import annotations

import re

import pytest

from seglog.records import batch_headers
from tests.spark.helpers import sample_batches, write_log


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("errs")
    write_log(root / "orders-0", sample_batches(0, 6, 10), {"segment.bytes": 1024})
    return root


def our_line(exc: BaseException) -> str:
    """The seglog error line inside Spark's wrapped message."""
    m = re.search(r"^\s*(?:seglog\.errors\.\w+|FileNotFoundError|[\w.]+Error): (seglog.*)$", str(exc), re.M)
    assert m, str(exc)
    return m.group(1)


def load_error(spark, path, **opts):
    with pytest.raises(Exception) as info:
        spark.read.format("seglog").options(**opts).load(path).collect()
    return our_line(info.value)


def test_missing_path(spark, tmp_path):
    line = load_error(spark, str(tmp_path / "nope"))
    assert line == f"seglog: path {str(tmp_path / 'nope')!r} does not exist"


def test_unknown_topic(spark, logdir):
    line = load_error(spark, str(logdir), topics="orders,payments")
    assert line.startswith("seglog: unknown topic 'payments': no payments-N directory under ")
    assert line.endswith("(topics there: orders)")


@pytest.mark.parametrize("opts,expected", [
    ({"startingOffsets": "first"}, "seglog option startingOffsets: expected earliest, latest or JSON"),
    ({"startingOffsets": '{"orders": {"0": "5"}}'}, "seglog option startingOffsets: value for orders-0 must be an integer"),
    ({"endingOffsets": '{"orders": [1]'}, "seglog option endingOffsets: not valid JSON"),
    ({"minPartitions": "two"}, "seglog option minPartitions: expected an integer, got 'two'"),
    ({"startingOffset": "earliest"}, "seglog: unknown read option 'startingoffset'; did you mean startingOffsets?"),
    ({"isolation.level": "serializable"}, "seglog option isolation.level: expected read_uncommitted or read_committed"),
])
def test_bad_options(spark, logdir, opts, expected):
    assert load_error(spark, str(logdir), **opts).startswith(expected)


def test_data_loss(spark, logdir, tmp_path):
    import shutil

    root = tmp_path / "logs"
    shutil.copytree(logdir / "orders-0", root / "orders-0")
    first = sorted((root / "orders-0").glob("*.log"))[0]
    for f in (root / "orders-0").glob(first.stem + ".*"):
        f.unlink()                                   # as retention deletes a segment
    start = int(sorted((root / "orders-0").glob("*.log"))[0].stem)
    line = load_error(spark, str(root), startingOffsets='{"orders": {"0": 0}}')
    assert line == (f"seglog: startingOffsets asks for offset 0 of orders-0, but its log starts at {start} "
                    "(older records were deleted); set failOnDataLoss=false to skip")
    df = spark.read.format("seglog").option("startingOffsets", '{"orders": {"0": 0}}') \
        .option("failOnDataLoss", "false").load(str(root))
    assert df.count() == 60 - start


def test_corrupt_segment(spark, logdir, tmp_path):
    import shutil

    root = tmp_path / "logs"
    shutil.copytree(logdir / "orders-0", root / "orders-0")
    seg = sorted((root / "orders-0").glob("*.log"))[1]
    data = bytearray(seg.read_bytes())
    h = batch_headers(bytes(data))[0]
    data[h.position + h.size - 3] ^= 0xFF            # a record byte: the CRC no longer matches
    seg.write_bytes(bytes(data))
    line = load_error(spark, str(root))
    assert line.startswith("seglog: CRC mismatch in the batch at offset ")
    assert line.endswith(f"; set failOnDataLoss=false to skip corrupt batches (in {seg}, at byte {h.position})")
    df = spark.read.format("seglog").option("failOnDataLoss", "false").load(str(root))
    assert df.count() == 60 - h.records_count


def test_torn_tail_of_a_live_log(spark, logdir, tmp_path):
    """A broker writing (or killed while writing) the last batch: the whole batches are read."""
    import shutil

    root = tmp_path / "logs"
    shutil.copytree(logdir / "orders-0", root / "orders-0")
    last = sorted((root / "orders-0").glob("*.log"))[-1]
    whole = last.read_bytes()
    with open(last, "ab") as f:
        f.write(whole[:40])                         # the first 40 bytes of a copy of a batch
    assert spark.read.format("seglog").load(str(root)).count() == 60
