"""Bad input gives one clear line naming the option, path or file."""

from __future__ import annotations

import re

import pytest

from seglog.storage.records import batch_headers
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


@pytest.mark.parametrize(
    "opts,expected",
    [
        ({"startingOffsets": "first"}, "seglog option startingOffsets: expected earliest, latest or JSON"),
        (
            {"startingOffsets": '{"orders": {"0": "5"}}'},
            "seglog option startingOffsets: value for orders-0 must be an integer",
        ),
        ({"endingOffsets": '{"orders": [1]'}, "seglog option endingOffsets: not valid JSON"),
        ({"minPartitions": "two"}, "seglog option minPartitions: expected an integer, got 'two'"),
        ({"startingOffset": "earliest"}, "seglog: unknown read option 'startingoffset'; did you mean startingOffsets?"),
        (
            {"isolation.level": "serializable"},
            "seglog option isolation.level: expected read_uncommitted or read_committed",
        ),
    ],
)
def test_bad_options(spark, logdir, opts, expected):
    assert load_error(spark, str(logdir), **opts).startswith(expected)


def test_data_loss(spark, logdir, tmp_path):
    import shutil

    root = tmp_path / "logs"
    shutil.copytree(logdir / "orders-0", root / "orders-0")
    first = sorted((root / "orders-0").glob("*.log"))[0]
    for f in (root / "orders-0").glob(first.stem + ".*"):
        f.unlink()  # as retention deletes a segment
    start = int(sorted((root / "orders-0").glob("*.log"))[0].stem)
    line = load_error(spark, str(root), startingOffsets='{"orders": {"0": 0}}')
    assert line == (
        f"seglog: startingOffsets asks for offset 0 of orders-0, but its log starts at {start} "
        "(older records were deleted); set failOnDataLoss=false to skip"
    )
    df = (
        spark.read.format("seglog")
        .option("startingOffsets", '{"orders": {"0": 0}}')
        .option("failOnDataLoss", "false")
        .load(str(root))
    )
    assert df.count() == 60 - start


def test_corrupt_segment(spark, logdir, tmp_path):
    import shutil

    root = tmp_path / "logs"
    shutil.copytree(logdir / "orders-0", root / "orders-0")
    seg = sorted((root / "orders-0").glob("*.log"))[1]
    data = bytearray(seg.read_bytes())
    h = batch_headers(bytes(data))[0]
    data[h.position + h.size - 3] ^= 0xFF  # a record byte: the CRC no longer matches
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
        f.write(whole[:40])  # the first 40 bytes of a copy of a batch
    assert spark.read.format("seglog").load(str(root)).count() == 60


# -- planning and reading without Spark (the same functions the Spark reader calls) ------------


def _read_all(root, **opts):
    import seglog.bindings.spark as sp

    ro = sp.parse_read_options({"path": str(root), **opts})
    rows: list[tuple[str, int]] = []
    for part in sp.plan_batch(ro, sp.Constraints()):
        for rb in sp.read_partition(part, ro):
            rows.extend(zip([part.topic] * rb.num_rows, rb.column("offset").to_pylist()))
    return rows


def _damage_header(seg, which, how):
    import struct

    data = bytearray(seg.read_bytes())
    h = batch_headers(bytes(data))[which]
    if how == "magic":
        data[h.position + 16] = 7
    else:
        struct.pack_into(">i", data, h.position + 8, 3)  # a length below any batch's
    seg.write_bytes(bytes(data))
    return h


@pytest.mark.parametrize(
    "where,how", [("middle", "magic"), ("middle", "length"), ("last", "magic"), ("last", "length")]
)
def test_malformed_batch_header_fails_the_read(logdir, tmp_path, caplog, where, how):
    """A malformed header used to end the header walk quietly: the rest of the segment was
    left out of the read. Now failOnDataLoss=true (the default) fails naming file and byte;
    false skips the rest of that segment with a warning."""
    import shutil

    from seglog.errors import CorruptRecordError

    root = tmp_path / "logs"
    shutil.copytree(logdir / "orders-0", root / "orders-0")
    segs = sorted((root / "orders-0").glob("*.log"))
    assert len(segs) >= 2
    seg = segs[0] if where == "middle" else segs[-1]
    n_batches = len(batch_headers(seg.read_bytes()))
    h = _damage_header(seg, n_batches // 2, how)
    with pytest.raises(CorruptRecordError) as info:
        _read_all(root)
    msg = str(info.value)
    assert msg.startswith("seglog: unknown magic byte 7" if how == "magic" else "seglog: batch length 3 is below")
    assert msg.endswith(f"; set failOnDataLoss=false to skip the rest of the segment (in {seg}, at byte {h.position})")
    caplog.clear()
    rows = _read_all(root, failOnDataLoss="false")
    lost = {o for o in range(60)} - {o for _, o in rows}
    assert h.base_offset in lost and len(rows) == 60 - len(lost)
    assert any(
        "skipping the rest of the segment" in r.getMessage() and str(seg) in r.getMessage() for r in caplog.records
    )


def test_internal_topics_only_when_named(tmp_path):
    """As Kafka's consumers with exclude.internal.topics: the default (every topic) and
    subscribePattern leave __consumer_offsets and __transaction_state out; topics/assign
    naming them read them."""
    root = tmp_path / "logs"
    write_log(root / "orders-0", sample_batches(0, 1, 5))
    write_log(root / "__consumer_offsets-0", sample_batches(0, 1, 3))
    write_log(root / "__transaction_state-1", sample_batches(1, 1, 2))
    assert {t for t, _ in _read_all(root)} == {"orders"}
    assert {t for t, _ in _read_all(root, subscribePattern=".*")} == {"orders"}
    assert {t for t, _ in _read_all(root, subscribePattern="__.*")} == set()
    assert {t for t, _ in _read_all(root, topics="__consumer_offsets,orders")} == {"__consumer_offsets", "orders"}
    assert {t for t, _ in _read_all(root, subscribe="__transaction_state")} == {"__transaction_state"}
    assert {t for t, _ in _read_all(root, assign='{"__consumer_offsets": [0]}')} == {"__consumer_offsets"}
    # A path that is the partition dir itself names it too.
    assert {t for t, _ in _read_all(root / "__consumer_offsets-0")} == {"__consumer_offsets"}
    assert {t for t, _ in _read_all(root / "__*-*")} == {"__consumer_offsets", "__transaction_state"}


def test_batch_refuses_latest_start():
    import seglog.bindings.spark as sp
    from seglog.errors import ConfigError

    with pytest.raises(
        ConfigError,
        match=r"^seglog option startingOffsets: 'latest' is not a valid start "
        r"for a batch query",
    ):
        sp.parse_read_options({"path": "/x", "startingOffsets": "latest"})
    with pytest.raises(ConfigError, match=r"offset -1 \(latest\) for t-1 is not a valid start for a batch"):
        sp.parse_read_options({"path": "/x", "startingOffsets": '{"t": {"0": 5, "1": -1}}'})
    # A stream starts at latest by default; -1 per partition is fine there too.
    ro = sp.parse_read_options({"path": "/x", "startingOffsets": '{"t": {"1": -1}}'}, streaming=True)
    assert ro.starting.lookup(("t", 1)) == -1
    assert sp.parse_read_options({"path": "/x"}, streaming=True).starting.kind == "latest"


@pytest.mark.parametrize("side", ["starting", "ending"])
def test_offsets_beyond_the_readable_end(side, caplog):
    """A starting or ending offset past what may be read is data loss: an error naming the
    option, the partition and the end, or (failOnDataLoss=false) a warning and the end."""
    import seglog.bindings.spark as sp
    from seglog.bindings.spark.partitions import ReadablePartition
    from seglog.bindings.spark.planning import resolve_end, resolve_start
    from seglog.errors import OffsetOutOfRangeError

    info = ReadablePartition("orders", 0, "/x/orders-0", (0,), (100,), log_start=0, log_end=10, bound=8)
    option = f"{side}Offsets"
    message = f"{option} asks for offset 9 of orders-0, beyond its readable end 8"

    def resolve(**extra):
        ro = sp.parse_read_options({"path": "/x", option: '{"orders": {"0": 9}}', **extra})
        if side == "starting":
            return resolve_start(info, ro, ro.starting)
        return resolve_end(info, ro, ro.ending, 0)

    with pytest.raises(OffsetOutOfRangeError, match=re.escape(message)):
        resolve()
    assert resolve(failOnDataLoss="false") == (8, None)
    assert any(message in r.getMessage() for r in caplog.records)


def test_malformed_header_through_spark(spark, logdir, tmp_path):
    import shutil

    root = tmp_path / "logs"
    shutil.copytree(logdir / "orders-0", root / "orders-0")
    seg = sorted((root / "orders-0").glob("*.log"))[0]
    h = _damage_header(seg, 1, "magic")
    line = load_error(spark, str(root))
    assert line == (
        f"seglog: unknown magic byte 7 (known: 0, 1, 2); set failOnDataLoss=false to skip "
        f"the rest of the segment (in {seg}, at byte {h.position})"
    )
    assert spark.read.format("seglog").option("failOnDataLoss", "false").load(str(root)).count() < 60
    line = load_error(spark, str(root), startingOffsets="latest")
    assert line.startswith("seglog option startingOffsets: 'latest' is not a valid start for a batch query")
