"""``ClusterConsumer.poll_columns``: the records ``poll`` returns, as the store consumer's Arrow
table (Spark's Kafka-source columns), decoded from the fetched bytes by the column decoder —
against a three-node ``LocalCluster`` (acks=all) and a single store's Kafka listener."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from seglog import Store
from seglog.client.kafka_table import kafka_schema
from seglog.cluster.client import ClusterClient
from seglog.cluster.consumer import ClusterConsumer, ConsumerRecord
from seglog.cluster.local import LocalCluster
from seglog.errors import KafkaStorageError
from seglog.storage.records import encode_batch, encode_control_batch

pa = pytest.importorskip("pyarrow")
ck = pytest.importorskip("confluent_kafka")

CODECS = ("gzip", "lz4", "zstd", "snappy")
PER_CODEC = 30


def _produce(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes, list[tuple[str, bytes]]]]:
    """PER_CODEC records per codec into partition 0, one compressed batch per codec (linger,
    one flush each); returns (partition, key, value, headers) in offset order."""
    sent: list[tuple[int, bytes | None, bytes, list[tuple[str, bytes]]]] = []
    for codec in CODECS:
        producer = ck.Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "compression.type": codec,
                "linger.ms": 200,
                "enable.idempotence": True,
                "message.timeout.ms": 20000,
            }
        )
        errors: list[Any] = []
        for i in range(PER_CODEC):
            key = None if i % 7 == 0 else b"k-%s-%d" % (codec.encode(), i % 3)
            value = b"%s-%03d-" % (codec.encode(), i) + b"x" * (i * 5)
            headers = [("h", b"%d" % i), ("codec", codec.encode())] if i % 2 else []
            producer.produce(
                topic,
                value,
                key,
                partition=0,
                headers=headers or None,
                on_delivery=lambda err, msg: errors.append(err) if err else None,
            )
            sent.append((0, key, value, headers))
        assert producer.flush(30) == 0
        assert not errors, errors
    return sent


def _all_records(consumer: ClusterConsumer, count: int) -> list[ConsumerRecord]:
    got: list[ConsumerRecord] = []
    deadline = time.monotonic() + 20
    while len(got) < count and time.monotonic() < deadline:
        got.extend(consumer.poll(timeout_ms=500))
    return got


def _all_rows(consumer: ClusterConsumer, count: int, **kw: Any) -> Any:
    tables = []
    n = 0
    deadline = time.monotonic() + 20
    while n < count and time.monotonic() < deadline:
        t = consumer.poll_columns(timeout_ms=500, **kw)
        if "max_records" in kw:
            assert t.num_rows <= kw["max_records"]
        n += t.num_rows
        tables.append(t)
    return pa.concat_tables(tables)


def _check_against_poll(make_consumer: Any, topic: str, sent: list[Any]) -> None:
    n = len(sent)
    c = make_consumer()
    c.assign([(topic, 0)])
    records = _all_records(c, n)
    c.close()
    assert [(r.offset, r.key, r.value) for r in records] == [(i, s[1], s[2]) for i, s in enumerate(sent)]

    c = make_consumer()
    c.assign([(topic, 0)])
    table = _all_rows(c, n, headers=True)
    assert c.position(topic, 0) == n
    assert c.poll_columns(timeout_ms=100).num_rows == 0  # nothing at or past the high watermark
    c.close()
    assert table.schema == kafka_schema(True)
    rows = table.to_pylist()
    assert len(rows) == n
    for r, row, s in zip(records, rows, sent, strict=True):
        assert (row["topic"], row["partition"], row["offset"], row["key"], row["value"]) == (
            r.topic,
            r.partition,
            r.offset,
            r.key,
            r.value,
        )
        assert int(row["timestamp"].timestamp() * 1000) == r.timestamp
        assert row["timestampType"] == 0  # CreateTime
        assert [(h["key"], h["value"]) for h in row["headers"]] == s[3]

    # max_records smaller than a fetch, then the rest: nothing lost, nothing twice.
    c = make_consumer()
    c.assign([(topic, 0)])
    small = _all_rows(c, n, max_records=7)
    c.close()
    assert small.schema == kafka_schema(False)
    assert small.column("offset").to_pylist() == list(range(n))
    assert small.column("value").to_pylist() == [s[2] for s in sent]

    # A seek into the middle of a (compressed) batch: the records before it are dropped.
    for at in (PER_CODEC // 2, PER_CODEC + 11, 3 * PER_CODEC + 1):
        c = make_consumer()
        c.assign([(topic, 0)])
        c.seek(topic, 0, at)
        part = _all_rows(c, n - at)
        c.seek(topic, 0, at)
        recs = _all_records(c, n - at)
        c.close()
        assert part.column("offset").to_pylist() == list(range(at, n))
        assert [r.offset for r in recs] == list(range(at, n))


def _check_arguments(consumer: ClusterConsumer, store_consumer: Any) -> None:
    cases: list[tuple[dict[str, Any], type[Exception]]] = [
        ({"max_records": 0}, ValueError),
        ({"max_records": "3"}, TypeError),
        ({"timeout_ms": 1.5}, TypeError),
        ({"max_records": True}, TypeError),
    ]
    for bad, error in cases:
        with pytest.raises(error) as ours:
            consumer.poll_columns(**bad)
        with pytest.raises(error) as theirs:
            store_consumer.poll_columns(**bad)
        assert str(ours.value) == str(theirs.value)
    consumer.close()
    store_consumer.close()
    with pytest.raises(KafkaStorageError, match="the consumer is closed"):
        consumer.poll_columns()
    with pytest.raises(KafkaStorageError, match="the consumer is closed"):
        store_consumer.poll_columns()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(nodes=3, dir=tmp_path / "cluster") as c:
        yield c


def test_poll_columns_on_a_three_node_cluster(cluster: LocalCluster, tmp_path: Path) -> None:
    cluster.create_topic("cols", partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
    sent = _produce(cluster.bootstrap_servers, "cols")
    _check_against_poll(cluster.consumer, "cols", sent)
    with Store.open(tmp_path / "store") as store:
        store.create_topic("cols", 1)
        sc = store.consumer()
        sc.assign([("cols", 0)])
        c = cluster.consumer()
        c.assign([("cols", 0)])
        _check_arguments(c, sc)


def test_poll_columns_of_several_partitions_and_an_empty_poll(cluster: LocalCluster) -> None:
    cluster.create_topic("many", partitions=3, replication_factor=3, config={"min.insync.replicas": 2})
    c = cluster.consumer()
    c.assign([("many", p) for p in range(3)])
    empty = c.poll_columns(timeout_ms=200, headers=True)
    assert empty.num_rows == 0 and empty.schema == kafka_schema(True)
    producer = cluster.producer(acks="all")
    for i in range(60):
        producer.send("many", b"v%02d" % i, key=b"k", partition=i % 3)
    producer.flush(30)
    producer.close()
    table = _all_rows(c, 60)
    c.close()
    got = sorted(zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(), strict=True))
    assert got == sorted((p, o) for p in range(3) for o in range(20))
    by_value = dict(zip(table.column("value").to_pylist(), table.column("partition").to_pylist(), strict=True))
    assert by_value == {b"v%02d" % i: i % 3 for i in range(60)}


def test_poll_columns_against_a_stores_kafka_listener(tmp_path: Path) -> None:
    with Store.open(tmp_path / "data") as store, store.serve() as broker:
        with ClusterClient(broker.bootstrap_servers, metadata_timeout_s=20) as client:
            client.create_topic("s", partitions=1, replication_factor=1)
            sent = _produce(broker.bootstrap_servers, "s")
            _check_against_poll(client.consumer, "s", sent)
            sc = store.consumer()
            sc.assign([("s", 0)])
            c = client.consumer()
            c.assign([("s", 0)])
            _check_arguments(c, sc)


def test_control_batches_are_skipped_and_stepped_over(tmp_path: Path) -> None:
    """A committed transaction's marker (a control batch) is no row, and the position steps
    past it (it ends the fetch): the next transaction's records come from the next poll."""
    with Store.open(tmp_path / "data") as store, store.serve() as broker:
        store.create_topic("tx", 1)
        with ClusterClient(broker.bootstrap_servers, metadata_timeout_s=20) as client:
            columns = client.consumer()
            columns.assign([("tx", 0)])
            records = client.consumer()
            records.assign([("tx", 0)])
            for round_ in range(2):
                values = [b"r%d-%d" % (round_, i) for i in range(5)]
                batch = encode_batch(
                    values,
                    timestamps=1_700_000_000_000,
                    producer_id=7,
                    producer_epoch=0,
                    base_sequence=5 * round_,
                    is_transactional=True,
                )
                store.append("tx", 0, batch)
                marker = encode_control_batch(1, timestamp=1_700_000_000_000, producer_id=7, producer_epoch=0)
                store.append("tx", 0, marker, origin="coordinator")
                first = 6 * round_  # five records, then the commit marker
                table = _all_rows(columns, 5)
                got = _all_records(records, 5)
                assert table.column("offset").to_pylist() == list(range(first, first + 5))
                assert [r.offset for r in got] == list(range(first, first + 5))
                assert table.column("value").to_pylist() == values == [r.value for r in got]
                assert (columns.position("tx", 0), records.position("tx", 0)) == (first + 6, first + 6)
                assert columns.poll_columns(timeout_ms=50).num_rows == 0
                assert records.poll(timeout_ms=50) == []
            columns.close()
            records.close()
