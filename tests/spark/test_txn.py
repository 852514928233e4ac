"""isolation.level=read_committed: aborted transactions are left out, reads stop at the last
stable offset; aborted ranges come from .txnindex files when a segment has one."""

from __future__ import annotations

import struct

import pytest

import seglog.bindings.spark as sp
from seglog import Log
from seglog.storage.records import encode_batch, encode_control_batch
from tests.conftest import T0
from tests.spark.helpers import patch_spark_modules

ABORT, COMMIT = 0, 1


def data(n, pid=-1, tag=b"v"):
    txn = pid >= 0
    return encode_batch(
        [tag + b"%d" % i for i in range(n)],
        timestamps=T0,
        producer_id=pid,
        producer_epoch=0 if txn else -1,
        base_sequence=0 if txn else -1,
        is_transactional=txn,
    )


def marker(kind, pid):
    return encode_control_batch(kind, timestamp=T0, producer_id=pid, producer_epoch=0)


# offsets: 0-2 plain | 3-5 txn 7 | 6-7 txn 8 | 8 ABORT 7 | 9-10 plain | 11 COMMIT 8 |
#          12-13 txn 9 (still open) | 14-15 plain
LOG = [data(3), data(3, 7), data(2, 8), marker(ABORT, 7), data(2), marker(COMMIT, 8), data(2, 9), data(2)]
COMMITTED = [0, 1, 2, 6, 7, 9, 10]
UNCOMMITTED = [0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 12, 13, 14, 15]


@pytest.fixture(scope="module")
def txlog(tmp_path_factory):
    root = tmp_path_factory.mktemp("txn")
    lg = Log.open(str(root / "tx-0"), {"segment.bytes": 300})
    for b in LOG:
        lg.append(b, origin="coordinator")  # markers: the coordinator's writes
    lg.close()
    return root


def offsets(spark, root, **opts):
    df = spark.read.format("seglog").options(**opts).load(str(root))
    return [r.offset for r in df.orderBy("offset").collect()]


def test_read_committed_skips_aborted_and_open_transactions(spark, txlog):
    assert len(list((txlog / "tx-0").glob("*.log"))) >= 3  # markers and data span segments
    assert offsets(spark, txlog) == UNCOMMITTED
    assert offsets(spark, txlog, **{"isolation.level": "read_committed"}) == COMMITTED
    assert offsets(spark, txlog, **{"isolation.level": "read_committed", "minPartitions": "5"}) == COMMITTED
    with_markers = offsets(spark, txlog, includeControl="true")
    assert 8 in with_markers and 11 in with_markers


def test_transaction_state_from_headers(txlog, tmp_path, monkeypatch):
    import shutil

    # seglog's Log writes Kafka's .txnindex for the abort; without it, planning reads the markers.
    assert list((txlog / "tx-0").glob("*.txnindex"))
    root = tmp_path / "logs"
    shutil.copytree(txlog / "tx-0", root / "tx-0")
    for f in (root / "tx-0").glob("*.txnindex"):
        f.unlink()
    for where in (txlog, root):
        ro = sp.parse_read_options({"path": str(where)})
        (info,) = sp.load_partitions(ro)
        assert sp.transaction_state(info, 0) == ([(7, 3, 8)], 12)
        assert sp.transaction_state(info, 9) == ([], 12)  # starting after the abort
    patch_spark_modules(monkeypatch, "decode_records", None)  # the index spares the decode
    (info,) = sp.load_partitions(sp.parse_read_options({"path": str(txlog)}))
    assert sp.transaction_state(info, 0) == ([(7, 3, 8)], 12)


def test_txnindex_is_used_when_present(txlog, tmp_path, monkeypatch):
    import shutil

    root = tmp_path / "logs"
    shutil.copytree(txlog / "tx-0", root / "tx-0")
    bases = sorted(int(f.stem) for f in (root / "tx-0").glob("*.log"))
    # The ABORT marker (offset 8) lies in the segment whose range holds 8; give that segment
    # (not the last) Kafka's index entry: planning then takes the abort from the index and
    # decodes no control record.
    seg = max(b for b in bases if b <= 8)
    assert seg != bases[-1]
    entry = struct.pack(">hqqqq", 0, 7, 3, 8, 3)
    (root / "tx-0" / f"{seg:020d}.txnindex").write_bytes(entry)
    ro = sp.parse_read_options({"path": str(root)})
    (info,) = sp.load_partitions(ro)
    patch_spark_modules(monkeypatch, "decode_records", None)  # decoding a marker would fail
    aborted, lso = sp.transaction_state(info, 0)
    assert aborted == [(7, 3, 8)] and lso == 12
    # The index is believed: an entry there is an abort even where the marker says otherwise.
    (root / "tx-0" / f"{seg:020d}.txnindex").write_bytes(entry + struct.pack(">hqqqq", 0, 8, 6, 11, 3))
    aborted, lso = sp.transaction_state(info, 0)
    assert sorted(aborted) == [(7, 3, 8), (8, 6, 11)]
