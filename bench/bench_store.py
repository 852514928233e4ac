"""The store through its public API, side by side with the peers of the log benchmarks.

    pytest bench/bench_store.py --benchmark-columns=median,ops --benchmark-group-by=group

Records: 8-byte key + 100-byte value. ``extra_info["records_per_s"]`` holds the rate.

* ``send``: one Python call per record. ``Producer.send`` (linger.ms=5, batch.size 16 KiB,
  idempotent, then ``flush``) against the per-record builders of aiokafka (Cython) and
  kafka-python appending their 16 KiB batches to a ``Log``, and sqlite3 (WAL,
  synchronous=NORMAL, one ``execute`` per row, commit every 1,000). Goal: >= 1.5 M records/s.
* ``send_batch``: columns in one call. ``Producer.send_batch`` against the raw path it is built
  on (``encode_batch`` of ~1 MiB batches + ``Log.append``) and sqlite3 ``executemany``.
  Goal: >= 0.7x the raw log append.
* ``poll``: every record as a Python object. ``Consumer.poll`` against aiokafka decoding the
  same segment bytes and a sqlite3 ordered scan.
* ``poll_columns``: every record into Arrow columns. ``Consumer.poll_columns`` against
  ``decode_columns(...).to_arrow()`` straight over ``Log.read`` views (its ceiling).
  Goal: >= 10 M records/s.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from seglog import Store, TopicPartition
from seglog.log import Log
from seglog.records import decode_columns, encode_batch

WRITE_RECORDS = 200_000
READ_RECORDS = 1_000_000
VALUE = 100
T0 = 1_700_000_000_000
BATCH_SIZE = 16_384
RAW_CHUNK = 8_000  # ~0.9 MiB of 108-byte records, as send_batch cuts its columns

VALUES = [(b"%08d" % i) * 12 + b"abcd" for i in range(WRITE_RECORDS)]
KEYS = [b"%08d" % i for i in range(WRITE_RECORDS)]
assert len(VALUES[0]) == VALUE


@pytest.fixture
def workdir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="seglog-bench-", dir=os.environ.get("SEGLOG_BENCH_DIR")))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _rate(benchmark: Any, n: int) -> None:
    benchmark.extra_info["records"] = n
    stats = getattr(benchmark, "stats", None)
    if stats is not None and getattr(stats, "stats", None) is not None and stats.stats.median:
        benchmark.extra_info["records_per_s"] = round(n / stats.stats.median)


def _fresh(workdir: Path) -> Iterator[Path]:
    i = 0
    while True:
        i += 1
        yield workdir / f"run{i}"


class _Closer:
    """Closes the previous round's store or log during the next setup, so that close (which
    fsyncs) stays out of the timed append path for every contender alike."""

    def __init__(self) -> None:
        self.pending: list[Any] = []

    def __call__(self, obj: Any) -> Any:
        for old in self.pending:
            old.close()
        self.pending = [obj]
        return obj

    def close(self) -> None:
        self(None)
        self.pending = []


# -------------------------------------------------------------------------------------------------
# send: one call per record
# -------------------------------------------------------------------------------------------------

@pytest.mark.benchmark(group="send (one call per record)")
def test_send_store(benchmark: Any, workdir: Path) -> None:
    dirs = _fresh(workdir)
    closer = _Closer()

    def setup() -> tuple[tuple[Any, Any], dict[str, Any]]:
        store = closer(Store.open(next(dirs), config={"log.cleaner.enable": False}))
        store.create_topic("t", 1)
        return (store, store.producer(linger_ms=5, batch_size=BATCH_SIZE)), {}

    def run(store: Store, producer: Any) -> None:
        send = producer.send
        for k, v in zip(KEYS, VALUES):
            send("t", v, k)
        producer.flush()
        assert store.log("t", 0).log_end_offset == WRITE_RECORDS

    benchmark.pedantic(run, setup=setup, rounds=5)
    closer.close()
    _rate(benchmark, WRITE_RECORDS)


def _builder_send(lg: Log, make: Any) -> None:
    builder = make()
    n = 0
    for i, (k, v) in enumerate(zip(KEYS, VALUES)):
        if builder.append(n, timestamp=T0 + i, key=k, value=v, headers=[]) is None:
            lg.append(bytes(builder.build()))
            builder = make()
            n = 0
            builder.append(n, timestamp=T0 + i, key=k, value=v, headers=[])
        n += 1
    lg.append(bytes(builder.build()))
    assert lg.log_end_offset == WRITE_RECORDS


@pytest.mark.benchmark(group="send (one call per record)")
def test_send_aiokafka_builder_and_log(benchmark: Any, workdir: Path) -> None:
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    dirs = _fresh(workdir)
    closer = _Closer()
    benchmark.pedantic(_builder_send, setup=lambda: ((closer(Log.open(next(dirs) / "t-0")),
                                                      lambda: DefaultRecordBatchBuilder(
                                                          2, 0, 0, -1, -1, -1, BATCH_SIZE)), {}),
                       rounds=5)
    closer.close()
    _rate(benchmark, WRITE_RECORDS)


@pytest.mark.benchmark(group="send (one call per record)")
def test_send_kafka_python_builder_and_log(benchmark: Any, workdir: Path) -> None:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    dirs = _fresh(workdir)
    closer = _Closer()
    benchmark.pedantic(_builder_send, setup=lambda: ((closer(Log.open(next(dirs) / "t-0")),
                                                      lambda: DefaultRecordBatchBuilder(
                                                          2, 0, 0, -1, -1, -1, BATCH_SIZE)), {}),
                       rounds=3)
    closer.close()
    _rate(benchmark, WRITE_RECORDS)


def _sqlite(path: Path) -> sqlite3.Connection:
    path.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path / "db.sqlite", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE IF NOT EXISTS log (offset INTEGER PRIMARY KEY, ts INTEGER, key BLOB, value BLOB)")
    return db


@pytest.mark.benchmark(group="send (one call per record)")
def test_send_sqlite(benchmark: Any, workdir: Path) -> None:
    dirs = _fresh(workdir)

    def run() -> None:
        db = _sqlite(next(dirs))
        cur = db.cursor()
        cur.execute("BEGIN")
        for i, (k, v) in enumerate(zip(KEYS, VALUES)):
            cur.execute("INSERT INTO log VALUES (?, ?, ?, ?)", (i, T0 + i, k, v))
            if i % 1000 == 999:
                cur.execute("COMMIT")
                cur.execute("BEGIN")
        cur.execute("COMMIT")
        db.close()

    benchmark.pedantic(run, rounds=3)
    _rate(benchmark, WRITE_RECORDS)


# -------------------------------------------------------------------------------------------------
# send_batch: columns in one call
# -------------------------------------------------------------------------------------------------

@pytest.mark.benchmark(group="send_batch (columns)")
def test_send_batch_store(benchmark: Any, workdir: Path) -> None:
    dirs = _fresh(workdir)
    closer = _Closer()

    def setup() -> tuple[tuple[Any, Any], dict[str, Any]]:
        store = closer(Store.open(next(dirs), config={"log.cleaner.enable": False}))
        store.create_topic("t", 1)
        return (store, store.producer()), {}

    def run(store: Store, producer: Any) -> None:
        producer.send_batch("t", VALUES, keys=KEYS, timestamps=T0, partition=0)
        assert store.log("t", 0).log_end_offset == WRITE_RECORDS

    benchmark.pedantic(run, setup=setup, rounds=7)
    closer.close()
    _rate(benchmark, WRITE_RECORDS)


@pytest.mark.benchmark(group="send_batch (columns)")
def test_send_batch_raw_log_append(benchmark: Any, workdir: Path) -> None:
    dirs = _fresh(workdir)
    closer = _Closer()

    def setup() -> tuple[tuple[Log], dict[str, Any]]:
        return (closer(Log.open(next(dirs) / "t-0")),), {}

    def run(lg: Log) -> None:
        for s in range(0, WRITE_RECORDS, RAW_CHUNK):
            lg.append(encode_batch(VALUES[s:s + RAW_CHUNK], keys=KEYS[s:s + RAW_CHUNK], timestamps=T0))
        assert lg.log_end_offset == WRITE_RECORDS

    benchmark.pedantic(run, setup=setup, rounds=7)
    closer.close()
    _rate(benchmark, WRITE_RECORDS)


@pytest.mark.benchmark(group="send_batch (columns)")
def test_send_batch_sqlite_executemany(benchmark: Any, workdir: Path) -> None:
    dirs = _fresh(workdir)
    rows = [(i, T0, k, v) for i, (k, v) in enumerate(zip(KEYS, VALUES))]

    def run() -> None:
        db = _sqlite(next(dirs))
        for s in range(0, WRITE_RECORDS, 1000):
            db.execute("BEGIN")
            db.executemany("INSERT INTO log VALUES (?, ?, ?, ?)", rows[s:s + 1000])
            db.execute("COMMIT")
        db.close()

    benchmark.pedantic(run, rounds=3)
    _rate(benchmark, WRITE_RECORDS)


# -------------------------------------------------------------------------------------------------
# Reads
# -------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def filled() -> Iterator[tuple[Store, Path]]:
    d = Path(tempfile.mkdtemp(prefix="seglog-bench-read-", dir=os.environ.get("SEGLOG_BENCH_DIR")))
    store = Store.open(d / "store", config={"log.cleaner.enable": False})
    store.create_topic("t", 1, {"segment.bytes": 256 << 20})
    p = store.producer()
    for s in range(0, READ_RECORDS, WRITE_RECORDS):
        p.send_batch("t", VALUES, keys=KEYS, timestamps=T0, partition=0)
    db = _sqlite(d / "sqlite")
    db.execute("BEGIN")
    db.executemany("INSERT INTO log VALUES (?, ?, ?, ?)",
                   ((i, T0, KEYS[i % WRITE_RECORDS], VALUES[i % WRITE_RECORDS]) for i in range(READ_RECORDS)))
    db.execute("COMMIT")
    db.close()
    yield store, d
    store.close()
    shutil.rmtree(d, ignore_errors=True)


TP = TopicPartition("t", 0)


@pytest.mark.benchmark(group="poll (record objects)")
def test_poll_store(benchmark: Any, filled: tuple[Store, Path]) -> None:
    store, _ = filled
    c = store.consumer(auto_offset_reset="earliest")
    c.assign([TP])

    def run() -> int:
        c.seek(TP, 0)
        n = 0
        while recs := c.poll(max_records=10_000):
            for r in recs:
                r.offset, r.key, r.value  # noqa: B018 - touch the fields
                n += 1
        assert n == READ_RECORDS
        return n

    benchmark.pedantic(run, rounds=5)
    _rate(benchmark, READ_RECORDS)


@pytest.mark.benchmark(group="poll (record objects)")
def test_poll_aiokafka_decode(benchmark: Any, filled: tuple[Store, Path]) -> None:
    from aiokafka.record.memory_records import MemoryRecords

    store, _ = filled
    lg = store.log("t", 0)

    def run() -> int:
        n = 0
        offset = 0
        while offset < lg.log_end_offset:
            res = lg.read(offset, 1 << 20)
            data = res.to_bytes()
            mr = MemoryRecords(data)
            while (batch := mr.next_batch()) is not None:
                batch.validate_crc()
                for r in batch:
                    r.offset, r.key, r.value  # noqa: B018
                    n += 1
                offset = batch.next_offset
        assert n == READ_RECORDS
        return n

    benchmark.pedantic(run, rounds=3)
    _rate(benchmark, READ_RECORDS)


@pytest.mark.benchmark(group="poll (record objects)")
def test_poll_sqlite_scan(benchmark: Any, filled: tuple[Store, Path]) -> None:
    _, d = filled
    db = _sqlite(d / "sqlite")

    def run() -> int:
        n = 0
        for row in db.execute("SELECT offset, ts, key, value FROM log ORDER BY offset"):
            n += 1
        assert n == READ_RECORDS
        return n

    benchmark.pedantic(run, rounds=3)
    db.close()
    _rate(benchmark, READ_RECORDS)


@pytest.mark.benchmark(group="poll_columns (Arrow)")
def test_poll_columns_store(benchmark: Any, filled: tuple[Store, Path]) -> None:
    store, _ = filled
    c = store.consumer(auto_offset_reset="earliest")
    c.assign([TP])

    def run() -> int:
        c.seek(TP, 0)
        n = 0
        while (t := c.poll_columns()).num_rows:
            n += t.num_rows
        assert n == READ_RECORDS
        return n

    benchmark.pedantic(run, rounds=7)
    _rate(benchmark, READ_RECORDS)


@pytest.mark.benchmark(group="poll_columns (Arrow)")
def test_poll_columns_raw_decode_columns(benchmark: Any, filled: tuple[Store, Path]) -> None:
    store, _ = filled
    lg = store.log("t", 0)

    def run() -> int:
        n = 0
        offset = 0
        while offset < lg.log_end_offset:
            res = lg.read(offset, 1 << 20)
            for v in res.views():
                rb = decode_columns(v, keys=True, headers=False, min_offset=offset).to_arrow()
                v.release()
                n += rb.num_rows
                offset = rb.column("offset")[-1].as_py() + 1
        assert n == READ_RECORDS
        return n

    benchmark.pedantic(run, rounds=7)
    _rate(benchmark, READ_RECORDS)
