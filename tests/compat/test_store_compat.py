"""Files the store writes, read by kafka-python (an independent decoder); the whole directory
laid out as a Kafka log dir."""

from __future__ import annotations

import shutil
from pathlib import Path

from kafka.record.memory_records import MemoryRecords

from seglog import Store, TopicPartition
from seglog.storage.group_offsets import decode_offset_key, decode_offset_value
from seglog.storage.producer_state import BatchMetadata, ProducerEntry, encode_snapshot
from seglog.util.clock import ManualClock


def _kafka_python_records(path: Path) -> list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    out = []
    for seg in sorted(path.glob("*.log")):
        records = MemoryRecords(seg.read_bytes())
        while records.has_next():
            batch = records.next_batch()
            assert batch.validate_crc()
            for r in batch:
                out.append((r.offset, r.key, r.value, list(r.headers)))
    return out


def test_kafka_python_reads_every_api_path(tmp_path: Path) -> None:
    clock = ManualClock()
    expect: dict[int, list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]] = {0: [], 1: []}
    with Store.open(tmp_path, clock=clock) as store:
        store.create_topic("t", 2, {"segment.bytes": 2000})
        p = store.producer(linger_ms=5, batch_size=500)
        for i in range(60):
            md = p.send("t", b"send-%d" % i, key=b"k%d" % (i % 4), headers=[("n", b"%d" % i)])
            clock.advance(1)
        p.flush()
        p.send_batch("t", [b"batch-%d" % i for i in range(40)], keys=[b"k%d" % (i % 4) for i in range(40)])
        p.send("t", None, key=b"k1", partition=1)
        p.flush()
        c = store.consumer(auto_offset_reset="earliest")
        c.assign([("t", 0), ("t", 1)])
        while recs := c.poll(max_records=1000):
            for tp, rs in recs.items():
                expect[tp.partition].extend((r.offset, r.key, r.value, r.headers) for r in rs)
        g = store.consumer(group_id="grp")
        g.assign([("t", 0)])
        g.commit({TopicPartition("t", 0): 17})
    for part in (0, 1):
        got = _kafka_python_records(tmp_path / f"t-{part}")
        assert [(o, k, v, [tuple(h) for h in hs]) for o, k, v, hs in got] == expect[part]
        assert len(got) > 10
    # The committed offset is a Kafka __consumer_offsets record.
    found = []
    for d in tmp_path.glob("__consumer_offsets-*"):
        for o, k, v, _ in _kafka_python_records(d):
            assert k is not None and v is not None
            found.append((decode_offset_key(k), decode_offset_value(v).offset))
    assert found == [(("grp", "t", 0), 17)]
    # The dir-level files of a Kafka log dir are all there.
    for name in (
        "recovery-point-offset-checkpoint",
        "replication-offset-checkpoint",
        "log-start-offset-checkpoint",
        "cleaner-offset-checkpoint",
        ".kafka_cleanshutdown",
    ):
        assert (tmp_path / name).exists(), name


def _kafka_python_all(path: Path) -> list[tuple[int, int, bytes | None, bytes | None]]:
    out = []
    records = MemoryRecords((path / "00000000000000000000.log").read_bytes())
    while records.has_next():
        batch = records.next_batch()
        for r in batch:
            out.append((r.offset, -1 if r.timestamp is None else r.timestamp, r.key, r.value))
    return out


def test_broker_dirs_read_through_the_consumer(fixtures_dir: Path) -> None:
    """Kafka-written logs (LZ4 with LogAppendTime; legacy magic-0 gzip and snappy) through the
    store's consumer, checked against kafka-python."""
    import pytest

    pytest.importorskip("seglog._native.compression")
    for root in ("kafka-connect-spooldir", "kafkalite"):
        base = fixtures_dir / "kafka-real" / root
        with Store.open(base, read_only=True) as store:
            for topic in store.topics():
                expect = _kafka_python_all(base / f"{topic}-0")
                assert expect
                c = store.consumer(auto_offset_reset="earliest")
                c.assign([(topic, 0)])
                got: list[tuple[int, int, bytes | None, bytes | None]] = []
                while recs := c.poll(max_records=100_000):
                    got.extend((r.offset, r.timestamp, r.key, r.value) for r in recs)
                assert got == expect, topic
                c.seek((topic, 0), 0)
                table = c.poll_columns()
                assert table.column("offset").to_pylist() == [e[0] for e in expect]
                assert table.column("value").to_pylist() == [e[3] for e in expect]
                if topic.startswith("_confluent-controlcenter"):
                    assert set(table.column("timestampType").to_pylist()) == {1}


def test_producer_ids_start_above_those_in_a_broker_dir(fixtures_dir: Path, tmp_path: Path) -> None:
    """A Kafka-written partition holds batches of idempotent producers 1, 2 and 3 (kafka-python
    reads them): producers of a store opened on that dir get ids above all of them, and so do
    those of the next open, which reads the ids from the store metadata."""
    src = fixtures_dir / "kafka-real" / "LDI-POC" / "TestTopicPatient-0"
    shutil.copytree(src, tmp_path / "TestTopicPatient-0")
    records = MemoryRecords((tmp_path / "TestTopicPatient-0" / "00000000000000000000.log").read_bytes())
    kafka_ids = set()
    while records.has_next():
        kafka_ids.add(records.next_batch().producer_id)
    assert kafka_ids == {1, 2, 3}
    with Store.open(tmp_path) as store:
        ids = [store.producer(enable_idempotence=True).producer_id for _ in range(4)]
        assert min(ids) > max(kafka_ids) and len(set(ids)) == 4
        md = store.producer(enable_idempotence=True).send("TestTopicPatient", b"v", partition=0)
        assert md.offset == 3
    with Store.open(tmp_path) as store:
        assert store.producer(enable_idempotence=True).producer_id > max(ids)
    # Ids of producer snapshots count too (their batches may be gone from the log).
    other = tmp_path / "other"
    (other / "t-0").mkdir(parents=True)
    e = ProducerEntry(7000, 0)
    e.batches.append(BatchMetadata(0, 0, 0, 0, 0))
    (other / "t-0" / "00000000000000000000.snapshot").write_bytes(encode_snapshot([e]))
    with Store.open(other) as store:
        assert store.producer(enable_idempotence=True).producer_id == 7001
