"""Writing: DataFrame -> write -> read gives the same rows; a job's records become visible all
together at commit (the high watermark), never in part."""

from __future__ import annotations

import datetime as dt

import pytest

import seglog.bindings.spark as sp
from seglog import Log
from seglog.client.partitioner import partition_for_key
from seglog.storage.checkpoints import OffsetCheckpointFile
from seglog.storage.records import decode_records, encode_batch
from tests.conftest import T0
from tests.spark.helpers import oracle

UTC = dt.timezone.utc


def rows(n, start=0):
    out = []
    for i in range(start, start + n):
        out.append(
            (
                None if i % 6 == 1 else b"key-%d" % (i % 17),
                None if i % 9 == 4 else b"value-%d" % i,
                dt.datetime.fromtimestamp((T0 + i * 10) / 1000, UTC),
                [("a", b"%d" % i), ("b", None)] if i % 4 == 0 else None,
            )
        )
    return out


SCHEMA = "key binary, value binary, timestamp timestamp, headers array<struct<key: string, value: binary>>"


def read_back(spark, path, **opts):
    df = spark.read.format("seglog").option("includeHeaders", "true").options(**opts).load(str(path))
    out = []
    for r in df.collect():
        out.append(
            (
                r.topic,
                r.partition,
                None if r.key is None else bytes(r.key),
                None if r.value is None else bytes(r.value),
                r.timestamp.replace(tzinfo=UTC) if r.timestamp.tzinfo is None else r.timestamp,
                None
                if r.headers is None
                else [(h.key, None if h.value is None else bytes(h.value)) for h in r.headers],
            )
        )
    return out


def test_round_trip(spark, tmp_path):
    data = rows(300)
    df = spark.createDataFrame(data, SCHEMA).repartition(3)
    df.write.format("seglog").mode("append").option("topic", "w").option("numPartitions", "4").save(str(tmp_path))
    got = read_back(spark, tmp_path)
    assert sorted((x[2:] for x in got), key=repr) == sorted(
        ((k, v, ts, [tuple(h) for h in hs] if hs else None) for k, v, ts, hs in data), key=repr
    )
    # Keyed rows land where Kafka's partitioner puts them; offsets are dense per partition.
    for topic, p, k, *_ in got:
        if k is not None:
            assert p == partition_for_key(k, 4)
    for p in range(4):
        offs = sorted(
            r.offset
            for r in spark.read.format("seglog")
            .load(str(tmp_path))
            .where(f"partition = {p}")
            .select("offset")
            .collect()
        )
        assert offs == list(range(len(offs)))
    # kafka-python reads what Spark wrote.
    theirs = [r for p in range(4) for r in oracle(tmp_path / f"w-{p}", "w", p)]
    assert sorted(((r["key"], r["value"]) for r in theirs), key=repr) == sorted(
        ((k, v) for k, v, _, _ in data), key=repr
    )
    hw = OffsetCheckpointFile(str(tmp_path / "replication-offset-checkpoint")).read()
    assert sum(hw.values()) == 300 and set(hw) == {("w", p) for p in range(4)}


def test_topic_and_partition_columns(spark, tmp_path):
    df = spark.createDataFrame(
        [("a", 0, "x0"), ("b", 1, "y1"), ("a", 1, "x1"), ("b", 1, "y2")], "topic string, partition int, value string"
    )
    df.write.format("seglog").mode("append").option("numPartitions", "2").save(str(tmp_path))
    got = sorted((t, p, v) for t, p, _, v, _, _ in read_back(spark, tmp_path))
    assert got == [("a", 0, b"x0"), ("a", 1, b"x1"), ("b", 1, b"y1"), ("b", 1, b"y2")]
    # Appending again continues the same logs.
    df.write.format("seglog").mode("append").save(str(tmp_path))
    assert spark.read.format("seglog").load(str(tmp_path)).count() == 8


def test_write_errors(spark, tmp_path):
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="no topic to write to: set option topic"):
        df.write.format("seglog").mode("append").save(str(tmp_path))
    with pytest.raises(Exception, match="a commit log cannot be overwritten"):
        df.write.format("seglog").mode("overwrite").option("topic", "t").save(str(tmp_path))
    with pytest.raises(Exception, match="needs a 'value' column"):
        spark.createDataFrame([("v",)], "key string").write.format("seglog").mode("append").option("topic", "t").save(
            str(tmp_path)
        )
    bad = spark.createDataFrame([(5, "v")], "partition int, value string")
    with pytest.raises(Exception, match="asks for partition 5 of topic 't', which has 1 partition"):
        bad.write.format("seglog").mode("append").option("topic", "t").save(str(tmp_path))


def test_failed_job_is_invisible(spark, tmp_path):
    base = spark.createDataFrame([(b"old-%d" % i,) for i in range(20)], "value binary")
    base.write.format("seglog").mode("append").option("topic", "t").option("numPartitions", "2").save(str(tmp_path))
    before = sorted(read_back(spark, tmp_path), key=repr)

    # Four tasks; the one holding 'boom' fails after the others may have written and the job aborts.
    vals = [("new-%d" % i,) for i in range(40)] + [("boom",)]
    failing = (
        spark.createDataFrame(vals, "value string")
        .repartition(4)
        .selectExpr("CASE WHEN value = 'boom' THEN raise_error('injected failure') ELSE value END AS value")
    )
    with pytest.raises(Exception, match="injected failure"):
        failing.write.format("seglog").mode("append").option("topic", "t").save(str(tmp_path))
    assert sorted(read_back(spark, tmp_path), key=repr) == before
    # Past the high watermark there may be records of tasks that finished: invisible above, and
    # removed by the abort or by the next commit.

    good = spark.createDataFrame([("ok-%d" % i,) for i in range(10)], "value string")
    good.write.format("seglog").mode("append").option("topic", "t").save(str(tmp_path))
    after = sorted(v for _, _, _, v, _, _ in read_back(spark, tmp_path))
    assert after == sorted([v for _, _, _, v, _, _ in before] + [b"ok-%d" % i for i in range(10)])
    hw = OffsetCheckpointFile(str(tmp_path / "replication-offset-checkpoint")).read()
    for (t, p), end in hw.items():  # offsets below the high watermark are dense: no leftovers
        offs = [r.offset for r in spark.read.format("seglog").load(str(tmp_path / f"{t}-{p}")).collect()]
        assert sorted(offs) == list(range(end))


def test_commit_moves_the_job_over_leftovers(tmp_path):
    """A failed attempt's records between the high watermark and the job's own runs are
    dropped at commit and the job's runs moved down (no Spark needed)."""
    d = tmp_path / "t-0"
    lg = Log.open(str(d))
    lg.append(encode_batch([b"c0", b"c1"], timestamps=T0))  # committed: [0, 2)
    lg.append(encode_batch([b"junk"], timestamps=T0))  # a failed attempt: [2, 3)
    lg.append(encode_batch([b"j0", b"j1"], timestamps=T0))  # this job: [3, 5)
    lg.append(encode_batch([b"junk2"], timestamps=T0))  # another leftover: [5, 6)
    lg.append(encode_batch([b"j2"], timestamps=T0))  # this job: [6, 7)
    hw = sp.writer.settle(lg, 2, [(3, 5), (6, 7)])
    assert hw == 5
    assert [r.value for r in decode_records(lg.read(0, 1 << 20, upper_bound="log_end").to_bytes())] == [
        b"c0",
        b"c1",
        b"j0",
        b"j1",
        b"j2",
    ]
    lg.close()


def test_commit_drops_a_leftover_tail(tmp_path):
    lg = Log.open(str(tmp_path / "t-0"))
    lg.append(encode_batch([b"a"], timestamps=T0))
    lg.append(encode_batch([b"b"], timestamps=T0))
    lg.append(encode_batch([b"junk"], timestamps=T0))
    assert sp.writer.settle(lg, 0, [(0, 1), (1, 2)]) == 2
    assert lg.log_end_offset == 2
    lg.close()


def test_writer_leaves_the_files_the_store_leaves(tmp_path):
    """The writer's partitions carry what the store's carry: ``partition.metadata`` with one
    topic id per topic, ``leader-epoch-checkpoint`` and batches led at epoch 0; the dir gets
    Kafka's ``meta.properties`` (no Spark needed: the writer's methods are called directly)."""
    import pyarrow as pa
    from pyspark.sql.datasource import WriterCommitMessage
    from pyspark.sql.types import StructType

    from seglog import Store
    from seglog.storage.records import batch_headers

    source = sp.SeglogDataSource({"path": str(tmp_path), "topic": "w", "numPartitions": "3"})
    schema = StructType.fromJson(
        {
            "type": "struct",
            "fields": [
                {"name": "key", "type": "binary", "nullable": True, "metadata": {}},
                {"name": "value", "type": "binary", "nullable": True, "metadata": {}},
            ],
        }
    )
    writer = source.writer(schema, False)
    assert (tmp_path / "meta.properties").read_text().splitlines()[2:] == ["version=0"]
    batch = pa.record_batch(
        [
            pa.array([b"k%d" % i for i in range(60)], pa.binary()),
            pa.array([b"v%d" % i for i in range(60)], pa.binary()),
        ],
        names=["key", "value"],
    )
    msgs: list[WriterCommitMessage | None] = [
        writer.write(iter([batch.slice(0, 30)])),
        writer.write(iter([batch.slice(30)])),
    ]
    writer.commit(msgs)
    ids = set()
    for p in range(3):
        d = tmp_path / f"w-{p}"
        meta = (d / "partition.metadata").read_text()
        assert meta.startswith("version: 0\ntopic_id: ") and not meta.endswith("\n")
        ids.add(meta.split(": ")[-1])
        assert (d / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
        heads = batch_headers((d / "00000000000000000000.log").read_bytes())
        assert heads and {h.partition_leader_epoch for h in heads} == {0}
    assert len(ids) == 1 and len(ids.pop()) == 22
    # The store sees the same topic id and keeps writing at that epoch; a second job on a
    # topic the store made takes the store's topic id.
    with Store.open(tmp_path) as store:
        tid = store.describe("w")[0].topic_id
        store.producer().send("w", b"more", partition=0)
        store.create_topic("s", 1)
    heads = batch_headers((tmp_path / "w-0" / "00000000000000000000.log").read_bytes())
    assert {h.partition_leader_epoch for h in heads} == {0}
    assert tid is not None and (tmp_path / "w-1" / "partition.metadata").read_text().endswith(tid)
    store_id = (tmp_path / "s-0" / "partition.metadata").read_text()
    (tmp_path / "s-0" / "partition.metadata").unlink()
    writer = sp.SeglogDataSource({"path": str(tmp_path), "topic": "s"}).writer(schema, False)
    writer.commit([writer.write(iter([batch]))])
    assert (tmp_path / "s-0" / "partition.metadata").read_text() == store_id
