"""The store through its public API, side by side with the peers of the log benchmarks.

    pytest bench/bench_store.py --benchmark-columns=median,ops --benchmark-group-by=group

Records: 8-byte key + 100-byte value.

* ``send``, ``send_batch``, ``poll_columns``: the registry's benchmarks
  (``seglog.benchmarks.store``; ``seglog bench --only store`` runs the same work). Goals:
  send >= 1.5 M records/s, send_batch >= 0.7x the raw ``encode_batch`` + ``Log.append`` path,
  poll_columns >= 10 M records/s.
* ``poll`` (here only): every record as a Python object. ``Consumer.poll`` against aiokafka
  decoding the same segment bytes and a sqlite3 ordered scan.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from seglog import Store, TopicPartition
from seglog.benchmarks import cases
from seglog.benchmarks.peers import sqlite_log

WRITE_RECORDS = 200_000
READ_RECORDS = 1_000_000
VALUE = 100
T0 = 1_700_000_000_000

VALUES = [(b"%08d" % i) * 12 + b"abcd" for i in range(WRITE_RECORDS)]
KEYS = [b"%08d" % i for i in range(WRITE_RECORDS)]
assert len(VALUES[0]) == VALUE

CASES = cases("send", "send_batch", "poll_columns")


@pytest.mark.parametrize("name,contender", CASES, ids=[f"{n}-{c}" for n, c in CASES])
def test_store(bench_run: Callable[[str, str], None], name: str, contender: str) -> None:
    bench_run(name, contender)


def _rate(benchmark: Any, n: int) -> None:
    benchmark.extra_info["records"] = n
    stats = getattr(benchmark, "stats", None)
    if stats is not None and getattr(stats, "stats", None) is not None and stats.stats.median:
        benchmark.extra_info["records_per_s"] = round(n / stats.stats.median)


def _sqlite(path: Path) -> sqlite3.Connection:
    path.mkdir(parents=True, exist_ok=True)
    return sqlite_log(path)


# -------------------------------------------------------------------------------------------------
# poll: record objects
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
    db.executemany(
        "INSERT INTO log VALUES (?, ?, ?, ?)",
        ((i, T0, KEYS[i % WRITE_RECORDS], VALUES[i % WRITE_RECORDS]) for i in range(READ_RECORDS)),
    )
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
