"""The partition log from Python, side by side with the obvious alternatives.

- pre-encoded append: 32 batches of 1 MiB through ``Log.append`` vs a plain ``os.write`` of the
  same bytes to a file (the page-cache limit). Goal: >= 0.8x plain write.
- encode + append from Python lists: 200,000 records of 100 bytes (key 8 B, timestamp) in batches
  of 1,000: ``encode_batch`` + ``Log.append`` vs sqlite3 (WAL, synchronous=NORMAL, executemany in
  transactions of 1,000) and LMDB (``put(append=True)``, 1,000 per transaction, sync off) when
  ``lmdb`` is installed. Goal: >= 15x sqlite3 and >= 10x LMDB records/s.
- sequential read into columns: the same 200,000 records, ``decode_columns`` over ``Log.read``
  views vs a sqlite3 ordered scan into Python lists. Goal: >= 10x sqlite3.
- random offset lookups from Python: ``Segment.translate_offset`` and ``Log.read(offset, 1)`` over
  200,000 records (200 batches in one segment), 1,024 lookups per timed call. Goal: < 2 us each.

Every benchmark runs well under a minute. ``pytest bench/bench_log.py`` reports per-call times;
records/s and per-lookup figures are in ``extra_info``.
"""
from __future__ import annotations

import os
import random
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from seglog.log import Log
from seglog.records import decode_columns, encode_batch

RECORDS = 200_000
PER_BATCH = 1_000
VALUE = 100
T0 = 1_700_000_000_000
BIG_BATCHES = 32
LOOKUPS = 1_024


def _columns() -> tuple[list[list[bytes]], list[list[bytes]], list[list[int]]]:
    rng = random.Random(1)
    payload = bytes(rng.getrandbits(8) for _ in range(VALUE * 16))
    vals, keys, stamps = [], [], []
    for b in range(RECORDS // PER_BATCH):
        base = b * PER_BATCH
        vals.append([payload[(i % 16) * VALUE:(i % 16 + 1) * VALUE] for i in range(base, base + PER_BATCH)])
        keys.append([i.to_bytes(8, "big") for i in range(base, base + PER_BATCH)])
        stamps.append([T0 + i for i in range(base, base + PER_BATCH)])
    return vals, keys, stamps


COLUMNS = _columns()


@pytest.fixture
def workdir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="seglog-bench-", dir=os.environ.get("SEGLOG_BENCH_DIR")))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _median(benchmark) -> float | None:
    """The median time, or None when benchmarks run disabled (the CI smoke pass)."""
    stats = getattr(benchmark, "stats", None)
    inner = getattr(stats, "stats", None) if stats is not None else None
    return inner.median if inner is not None and inner.median else None


def _fresh(workdir: Path, name: str) -> Path:
    p = workdir / name
    shutil.rmtree(p, ignore_errors=True)
    return p


# -- pre-encoded append vs write() ---------------------------------------------------------------

BIG = encode_batch([os.urandom(1 << 20)], timestamps=T0)


@pytest.mark.benchmark(group="append-1MiB-batches")
def test_append_preencoded_1mib(benchmark, workdir):
    state: dict[str, Log] = {}

    def setup() -> None:
        state["log"] = Log.open(_fresh(workdir, "a-0"), {"segment.bytes": 1 << 30, "max.message.bytes": 2 << 20})

    def run() -> None:
        log = state["log"]
        for _ in range(BIG_BATCHES):
            log.append(BIG)

    benchmark.pedantic(run, setup=setup, rounds=5)
    state["log"].close()
    if (median := _median(benchmark)) is not None:
        benchmark.extra_info["MiB/s"] = BIG_BATCHES * len(BIG) / median / 2**20


@pytest.mark.benchmark(group="append-1MiB-batches")
def test_plain_write_1mib(benchmark, workdir):
    state: dict[str, int] = {}

    def setup() -> None:
        p = workdir / "plain.bin"
        if p.exists():
            p.unlink()
        state["fd"] = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def run() -> None:
        fd = state["fd"]
        for _ in range(BIG_BATCHES):
            os.write(fd, BIG)

    benchmark.pedantic(run, setup=setup, rounds=5)
    os.close(state["fd"])
    if (median := _median(benchmark)) is not None:
        benchmark.extra_info["MiB/s"] = BIG_BATCHES * len(BIG) / median / 2**20


# -- encode + append from Python lists -----------------------------------------------------------


@pytest.mark.benchmark(group="encode-append-200k")
def test_encode_append_seglog(benchmark, workdir):
    vals, keys, stamps = COLUMNS
    state: dict[str, Log] = {}

    def setup() -> None:
        state["log"] = Log.open(_fresh(workdir, "e-0"), {"segment.bytes": 1 << 30})

    def run() -> None:
        log = state["log"]
        for v, k, t in zip(vals, keys, stamps):
            log.append(encode_batch(v, keys=k, timestamps=t))

    benchmark.pedantic(run, setup=setup, rounds=3)
    state["log"].close()
    if (median := _median(benchmark)) is not None:
        benchmark.extra_info["records/s"] = RECORDS / median


def _sqlite(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    con.execute("CREATE TABLE IF NOT EXISTS log (offset INTEGER PRIMARY KEY, ts INTEGER, key BLOB, value BLOB)")
    return con


@pytest.mark.benchmark(group="encode-append-200k")
def test_encode_append_sqlite3(benchmark, workdir):
    vals, keys, stamps = COLUMNS
    state: dict[str, sqlite3.Connection] = {}

    def setup() -> None:
        d = _fresh(workdir, "sq")
        d.mkdir()
        state["con"] = _sqlite(d / "log.db")

    def run() -> None:
        con = state["con"]
        off = 0
        for v, k, t in zip(vals, keys, stamps):
            con.execute("BEGIN")
            con.executemany("INSERT INTO log VALUES (?, ?, ?, ?)",
                            zip(range(off, off + len(v)), t, k, v))
            con.execute("COMMIT")
            off += len(v)

    benchmark.pedantic(run, setup=setup, rounds=3)
    state["con"].close()
    if (median := _median(benchmark)) is not None:
        benchmark.extra_info["records/s"] = RECORDS / median


@pytest.mark.benchmark(group="encode-append-200k")
def test_encode_append_lmdb(benchmark, workdir):
    lmdb = pytest.importorskip("lmdb")
    vals, keys, stamps = COLUMNS
    state: dict[str, object] = {}

    def setup() -> None:
        d = _fresh(workdir, "lm")
        d.mkdir()
        state["env"] = lmdb.open(str(d), map_size=1 << 30, sync=False, metasync=False)

    def run() -> None:
        env = state["env"]
        off = 0
        for v, k, t in zip(vals, keys, stamps):
            with env.begin(write=True) as txn:   # type: ignore[attr-defined]
                for i in range(len(v)):
                    txn.put((off + i).to_bytes(8, "big"), t[i].to_bytes(8, "big") + k[i] + v[i],
                            append=True)
            off += len(v)

    benchmark.pedantic(run, setup=setup, rounds=3)
    state["env"].close()                          # type: ignore[attr-defined]
    if (median := _median(benchmark)) is not None:
        benchmark.extra_info["records/s"] = RECORDS / median


# -- sequential read into columns ----------------------------------------------------------------


@pytest.fixture(scope="module")
def filled() -> Iterator[tuple[Log, sqlite3.Connection]]:
    vals, keys, stamps = COLUMNS
    d = Path(tempfile.mkdtemp(prefix="seglog-bench-", dir=os.environ.get("SEGLOG_BENCH_DIR")))
    log = Log.open(d / "r-0", {"segment.bytes": 1 << 30})
    con = _sqlite(d / "log.db")
    off = 0
    for v, k, t in zip(vals, keys, stamps):
        log.append(encode_batch(v, keys=k, timestamps=t))
        con.execute("BEGIN")
        con.executemany("INSERT INTO log VALUES (?, ?, ?, ?)", zip(range(off, off + len(v)), t, k, v))
        con.execute("COMMIT")
        off += len(v)
    yield log, con
    log.close()
    con.close()
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.benchmark(group="read-columns-200k")
def test_read_columns_seglog(benchmark, filled):
    log, _ = filled

    def run() -> int:
        n, off = 0, 0
        while off < log.log_end_offset:
            r = log.read(off, 8 << 20)
            for v in r.views():
                cols = decode_columns(v)
                n += cols.count
                v.release()
            off = log.log_start_offset + n
        return n

    assert benchmark(run) == RECORDS
    if (median := _median(benchmark)) is not None:
        benchmark.extra_info["records/s"] = RECORDS / median


@pytest.mark.benchmark(group="read-columns-200k")
def test_read_columns_sqlite3(benchmark, filled):
    _, con = filled

    def run() -> int:
        offsets, stamps, keys, values = [], [], [], []
        for o, t, k, v in con.execute("SELECT offset, ts, key, value FROM log ORDER BY offset"):
            offsets.append(o)
            stamps.append(t)
            keys.append(k)
            values.append(v)
        return len(offsets)

    assert benchmark(run) == RECORDS
    if (median := _median(benchmark)) is not None:
        benchmark.extra_info["records/s"] = RECORDS / median


# -- random offset lookups ------------------------------------------------------------------------


@pytest.mark.benchmark(group="random-lookup")
def test_lookup_translate_offset(benchmark, filled):
    log, _ = filled
    seg = log.segments[0]
    rng = random.Random(3)
    targets = [rng.randrange(RECORDS) for _ in range(LOOKUPS)]
    tr = seg.translate_offset

    def run() -> None:
        for t in targets:
            tr(t)

    benchmark(run)
    if (median := _median(benchmark)) is not None:
        benchmark.extra_info["us/lookup"] = median / LOOKUPS * 1e6


@pytest.mark.benchmark(group="random-lookup")
def test_lookup_log_read_1_byte(benchmark, filled):
    log, _ = filled
    rng = random.Random(4)
    targets = [rng.randrange(RECORDS) for _ in range(LOOKUPS)]
    read = log.read

    def run() -> None:
        for t in targets:
            read(t, 1)

    benchmark(run)
    if (median := _median(benchmark)) is not None:
        benchmark.extra_info["us/lookup"] = median / LOOKUPS * 1e6
