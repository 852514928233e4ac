"""The benchmarks of ``seglog bench``: seglog and its peers on the same work.

Every ``_prepare_*`` function builds the data once (deterministic, seeded) and returns one
callable per available contender. Peers are imported inside ``prepare`` so that a missing one
only removes its own callable. Records are 8-byte keys, 100-byte or 1 KiB values and
millisecond timestamps, in batches of 1,000 (what a producer sends: ~100 KiB or ~1 MiB).
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import struct
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from .kafka import kafka_benches
from .registry import Benchmark, Contender, Goal, Work, java_missing

T0 = 1_700_000_000_000
PER_BATCH = 1_000
POOL = 16  # distinct input batches, cycled: inputs for 10 M records would not fit in memory
LOOKUPS = 1_024

SEGLOG = "seglog"
MEMCPY = "memcpy"
WRITE = "write()"
READ = "read()"

AIOKAFKA = Contender("aiokafka", "peer", ("aiokafka",), "aiokafka")
KAFKA_PYTHON = Contender("kafka-python", "peer", ("kafka",), "kafka-python")
SQLITE = Contender("sqlite3 WAL", "peer", ("sqlite3",), "(Python's sqlite3 module)")
LMDB = Contender("LMDB", "peer", ("lmdb",), "lmdb")
PLAIN = Contender("length-prefixed file", "peer")
PARQUET = Contender("Parquet (pyarrow)", "peer", ("pyarrow",), "pyarrow")


# -------------------------------------------------------------------------------------------------
# Shared inputs
# -------------------------------------------------------------------------------------------------

class Columns:
    """``records`` records as POOL distinct batches of PER_BATCH records, cycled: batch ``b``
    holds offsets ``b*PER_BATCH...``, with the values/keys of pool entry ``b % POOL`` and
    timestamps ``T0 + offset``."""

    def __init__(self, records: int, value_size: int, per_batch: int = PER_BATCH) -> None:
        rng = random.Random(value_size)
        self.records = records
        self.value_size = value_size
        self.per_batch = min(per_batch, records)
        self.batches = -(-records // self.per_batch)
        n = self.per_batch
        self.values = [[rng.randbytes(value_size) for _ in range(n)] for _ in range(min(POOL, self.batches))]
        self.keys = [[(p * n + i).to_bytes(8, "big") for i in range(n)] for p in range(len(self.values))]

    def __iter__(self) -> Iterator[tuple[int, list[bytes], list[bytes], list[int]]]:
        """(first offset, values, keys, timestamps) per batch."""
        for b in range(self.batches):
            base = b * self.per_batch
            n = min(self.per_batch, self.records - base)
            p = b % len(self.values)
            vals, keys = self.values[p], self.keys[p]
            if n < len(vals):
                vals, keys = vals[:n], keys[:n]
            yield base, vals, keys, list(range(T0 + base, T0 + base + n))

    @property
    def nbytes(self) -> int:
        return self.records * (self.value_size + 16)


def _workdir(base: Path, name: str) -> Path:
    d = base / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    return d


class _Fresh:
    """A new directory per round (the previous one removed, and the previous store closed,
    untimed), so that every timed write starts from an empty store and a clean page cache."""

    def __init__(self, base: Path, name: str, opener: Callable[[Path], Any]) -> None:
        self.base, self.name, self.opener = base, name, opener
        self.obj: Any = None
        self.round = 0

    def setup(self) -> None:
        self.close()
        self.round += 1
        self.obj = self.opener(_workdir(self.base, self.name))
        # What the previous contender left dirty in the page cache is written back now, not
        # during the next timed round (where its writeback and the kernel's throttling of
        # writers would land on whoever runs next).
        os.sync()

    def close(self) -> None:
        if self.obj is not None:
            closer = getattr(self.obj, "close", None)
            if closer is not None:
                closer()
            self.obj = None
        shutil.rmtree(self.base / self.name, ignore_errors=True)


# -------------------------------------------------------------------------------------------------
# CRC-32C
# -------------------------------------------------------------------------------------------------

def _prepare_crc32c(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    from seglog._native import crc32c as native

    data = random.Random(p["bytes"]).randbytes(p["bytes"])
    calls: dict[str, Callable[[], object]] = {SEGLOG: lambda: native.crc32c(data)}
    if "crc32c" in available:
        import crc32c as pkg

        calls["crc32c"] = lambda: pkg.crc32c(data)
        if pkg.crc32c(data) != native.crc32c(data):
            raise AssertionError("seglog and the crc32c package disagree")
    if "google-crc32c" in available:
        import importlib

        google_value = importlib.import_module("google_crc32c").value
        calls["google-crc32c"] = lambda: google_value(data)
    calls["portable table"] = lambda: native._crc32c_portable(data)
    buf = bytearray(len(data))

    def memcpy() -> None:
        buf[:] = data
    calls[MEMCPY] = memcpy
    return Work(items=len(data), calls=calls, nbytes=len(data))


def _crc_bench(label: str, size: int) -> Benchmark:
    return Benchmark(
        name=f"crc32c-{label}", group="crc32c", unit="bytes",
        title=f"CRC-32C of a {label} buffer",
        contenders=(Contender(SEGLOG, "seglog"),
                    Contender("crc32c", "peer", ("crc32c",), "crc32c"),
                    Contender("google-crc32c", "peer", ("google_crc32c",), "google-crc32c"),
                    Contender("portable table", "seglog", note="seglog's fallback without SSE4.2/ARMv8 CRC"),
                    Contender(MEMCPY, "limit")),
        goals=(Goal("≥0.9× crc32c package", "ratio", 0.9, "crc32c"),),
        prepare=_prepare_crc32c, quick={"bytes": size}, full={"bytes": size}, full_round_seconds=0.5)


# -------------------------------------------------------------------------------------------------
# Batch encode / decode / columnar decode
# -------------------------------------------------------------------------------------------------

BIG = 1 << 30


def _batch_inputs(p: Mapping[str, int]) -> tuple[int, list[bytes], list[bytes], list[int], bytes]:
    from seglog.storage.records import encode_batch

    value = p["value"]
    n = (1 << 20) // (value + 24)  # ~1 MiB batches
    rng = random.Random(value)
    values = [rng.randbytes(value) for _ in range(n)]
    keys = [b"%08d" % (i % 65536) for i in range(n)]
    stamps = [T0 + i // 16 for i in range(n)]
    return n, values, keys, stamps, encode_batch(values, keys=keys, timestamps=stamps)


def _builder_encode(builder: Any, keys: list[bytes], values: list[bytes], stamps: list[int]) -> bytes:
    append = builder.append
    for i, (k, v, t) in enumerate(zip(keys, values, stamps)):
        append(i, timestamp=t, key=k, value=v, headers=[])
    return bytes(builder.build())


def _prepare_encode(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    from seglog.storage.records import encode_batch

    n, values, keys, stamps, batch = _batch_inputs(p)
    calls: dict[str, Callable[[], object]] = {
        SEGLOG: lambda: encode_batch(values, keys=keys, timestamps=stamps)}
    if "aiokafka" in available:
        from aiokafka.record.default_records import DefaultRecordBatchBuilder as Aio

        calls["aiokafka"] = lambda: _builder_encode(Aio(2, 0, 0, -1, -1, -1, BIG), keys, values, stamps)
    if "kafka-python" in available:
        from kafka.record.default_records import DefaultRecordBatchBuilder as Kp  # type: ignore[import-untyped,unused-ignore]

        calls["kafka-python"] = lambda: _builder_encode(Kp(2, 0, False, -1, -1, -1, BIG), keys, values, stamps)
    for name, fn in calls.items():
        out = fn()
        assert isinstance(out, bytes)
        # The same bytes but for partitionLeaderEpoch (outside the CRC; kafka-python writes 0).
        if out[:12] + out[16:] != batch[:12] + batch[16:]:
            raise AssertionError(f"{name} encodes different bytes")
    buf = bytearray(len(batch))

    def memcpy() -> None:
        buf[:] = batch
    calls[MEMCPY] = memcpy
    return Work(items=n, calls=calls, nbytes=len(batch), params={"records_per_batch": n})


def _aio_decode(buf: bytes, touch: bool) -> int:
    from aiokafka.record.default_records import DefaultRecordBatch

    b = DefaultRecordBatch(buf)
    if not b.validate_crc():
        raise AssertionError("CRC")
    if not touch:
        return len(list(b))
    n = 0
    for r in b:
        r.offset, r.timestamp, r.key, r.value  # noqa: B018  (what the columns hold)
        n += 1
    return n


def _prepare_decode(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    from seglog.storage.records import decode_records

    n, _, _, _, batch = _batch_inputs(p)
    calls: dict[str, Callable[[], object]] = {SEGLOG: lambda: len(decode_records(batch))}
    if "aiokafka" in available:
        calls["aiokafka"] = lambda: _aio_decode(batch, False)
    if "kafka-python" in available:
        from kafka.record.default_records import DefaultRecordBatch as Kp

        def kp() -> int:
            b = Kp(batch)
            if not b.validate_crc():
                raise AssertionError("CRC")
            return len(list(b))
        calls["kafka-python"] = kp
    buf = bytearray(len(batch))

    def memcpy() -> None:
        buf[:] = batch
    calls[MEMCPY] = memcpy
    return Work(items=n, calls=calls, nbytes=len(batch), params={"records_per_batch": n})


SEGLOG_VIEWS = "seglog views"


def _prepare_columns(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    from seglog.storage.records import decode_columns

    n, _, _, _, batch = _batch_inputs(p)
    calls: dict[str, Callable[[], object]] = {SEGLOG: lambda: len(decode_columns(batch, headers=False))}
    if "seglog → Arrow" in available:
        calls["seglog → Arrow"] = lambda: decode_columns(batch, headers=False).to_arrow().num_rows
    calls[SEGLOG_VIEWS] = lambda: len(decode_columns(batch, headers=False, views=True))
    if "aiokafka" in available:
        calls["aiokafka"] = lambda: _aio_decode(batch, True)
    buf = bytearray(len(batch))

    def memcpy() -> None:
        buf[:] = batch
    calls[MEMCPY] = memcpy
    return Work(items=n, calls=calls, nbytes=len(batch), params={"records_per_batch": n})


def _codec_benches(label: str, value: int) -> list[Benchmark]:
    sizes = {"value": value}
    return [
        Benchmark(
            name=f"encode-{label}", group="records", unit="records",
            title=f"encode a ~1 MiB batch of {label} records from Python lists",
            contenders=(Contender(SEGLOG, "seglog"), AIOKAFKA, KAFKA_PYTHON, Contender(MEMCPY, "limit")),
            goals=(Goal("≥5× aiokafka", "ratio", 5.0, "aiokafka"),),
            prepare=_prepare_encode, quick=sizes, full=sizes, full_round_seconds=2),
        Benchmark(
            name=f"decode-{label}", group="records", unit="records",
            title=f"decode a ~1 MiB batch of {label} records to record objects (CRC checked)",
            contenders=(Contender(SEGLOG, "seglog"), AIOKAFKA, KAFKA_PYTHON, Contender(MEMCPY, "limit")),
            prepare=_prepare_decode, quick=sizes, full=sizes, full_round_seconds=2),
        Benchmark(
            name=f"columns-{label}", group="records", unit="records",
            title=f"decode a ~1 MiB batch of {label} records to columns (offset, timestamp, key, value)",
            contenders=(Contender(SEGLOG, "seglog"),
                        Contender("seglog → Arrow", "seglog", ("pyarrow",), "pyarrow"),
                        Contender(SEGLOG_VIEWS, "seglog",
                                  note="decode_columns(views=True): Arrow binary_view into the input"),
                        AIOKAFKA, Contender(MEMCPY, "limit")),
            goals=(Goal("≥10× aiokafka", "ratio", 10.0, "aiokafka"),
                   Goal("≥10× aiokafka (views)", "ratio", 10.0, "aiokafka", SEGLOG_VIEWS)),
            prepare=_prepare_columns, quick=sizes, full=sizes, full_round_seconds=1),
    ]


# -------------------------------------------------------------------------------------------------
# Storage: append and sequential read of N records, against sqlite3, LMDB, a plain file, Parquet
# -------------------------------------------------------------------------------------------------

HDR = struct.Struct(">IQ")  # length of key+value, timestamp


def _sqlite(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(path / "log.db", isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    con.execute("CREATE TABLE IF NOT EXISTS log (offset INTEGER PRIMARY KEY, ts INTEGER, key BLOB, value BLOB)")
    return con


class _SeglogSink:
    def __init__(self, d: Path) -> None:
        from seglog.storage.log import Log
        from seglog.storage.records import encode_batch

        self.log = Log.open(d / "t-0", {"segment.bytes": 1 << 30, "max.message.bytes": 8 << 20})
        self.encode = encode_batch

    def write(self, base: int, vals: list[bytes], keys: list[bytes], stamps: list[int]) -> None:
        self.log.append(self.encode(vals, keys=keys, timestamps=stamps))

    def close(self) -> None:
        self.log.close()


class _SqliteSink:
    def __init__(self, d: Path) -> None:
        self.con = _sqlite(d)

    def write(self, base: int, vals: list[bytes], keys: list[bytes], stamps: list[int]) -> None:
        con = self.con
        con.execute("BEGIN")
        con.executemany("INSERT INTO log VALUES (?, ?, ?, ?)", zip(range(base, base + len(vals)), stamps, keys, vals))
        con.execute("COMMIT")

    def close(self) -> None:
        self.con.close()


class _LmdbSink:
    """Key: the offset (8 bytes, big-endian, so appends stay in order); value: timestamp, key,
    value. One write transaction per batch, sync off (as the page-cache writes of the others),
    all of a batch's items in one ``putmulti(append=True)`` (about twice as fast as a ``put``
    per record)."""

    def __init__(self, d: Path, map_size: int) -> None:
        import lmdb

        self.env = lmdb.open(str(d), map_size=map_size, sync=False, metasync=False)

    def write(self, base: int, vals: list[bytes], keys: list[bytes], stamps: list[int]) -> None:
        with self.env.begin(write=True) as txn:
            txn.cursor().putmulti([((base + i).to_bytes(8, "big"), t.to_bytes(8, "big") + k + v)
                                   for i, (v, k, t) in enumerate(zip(vals, keys, stamps))], append=True)

    def close(self) -> None:
        self.env.close()


class _PlainSink:
    """Each record: 4-byte length of key+value, 8-byte timestamp, key, value; one write() per batch."""

    def __init__(self, d: Path) -> None:
        self.fd = os.open(d / "log.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, base: int, vals: list[bytes], keys: list[bytes], stamps: list[int]) -> None:
        pack = HDR.pack
        os.write(self.fd, b"".join([pack(len(k) + len(v), t) + k + v for v, k, t in zip(vals, keys, stamps)]))

    def close(self) -> None:
        os.close(self.fd)


class _ParquetSink:
    """Columns to Arrow, written as row groups of 100,000 rows (Parquet's natural unit; a row
    group per 1,000-record batch would be unfair to it), uncompressed like the others."""

    ROW_GROUP = 100_000

    def __init__(self, d: Path) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.pa = pa
        self.schema = pa.schema([("offset", pa.int64()), ("timestamp", pa.int64()),
                                 ("key", pa.binary()), ("value", pa.binary())])
        self.writer = pq.ParquetWriter(str(d / "log.parquet"), self.schema, compression="none")
        self.pending: list[Any] = []
        self.rows = 0

    def write(self, base: int, vals: list[bytes], keys: list[bytes], stamps: list[int]) -> None:
        pa = self.pa
        self.pending.append(pa.record_batch(
            [pa.array(range(base, base + len(vals)), pa.int64()), pa.array(stamps, pa.int64()),
             pa.array(keys, pa.binary()), pa.array(vals, pa.binary())], schema=self.schema))
        self.rows += len(vals)
        if self.rows >= self.ROW_GROUP:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.writer.write_table(self.pa.Table.from_batches(self.pending, self.schema))
            self.pending, self.rows = [], 0

    def close(self) -> None:
        self.flush()
        self.writer.close()


def _sinks(cols: Columns, available: frozenset[str]) -> dict[str, Callable[[Path], Any]]:
    out: dict[str, Callable[[Path], Any]] = {SEGLOG: _SeglogSink}
    if "sqlite3 WAL" in available:
        out["sqlite3 WAL"] = _SqliteSink
    if "LMDB" in available:
        size = max(1 << 26, cols.nbytes * 3)
        out["LMDB"] = lambda d: _LmdbSink(d, size)
    out["length-prefixed file"] = _PlainSink
    if "Parquet (pyarrow)" in available:
        out["Parquet (pyarrow)"] = _ParquetSink
    return out


def _fill(sink: Any, cols: Columns) -> None:
    for base, vals, keys, stamps in cols:
        sink.write(base, vals, keys, stamps)
    flush = getattr(sink, "flush", None)
    if flush is not None:
        flush()


def _filler(f: _Fresh, cols: Columns) -> Callable[[], None]:
    return lambda: _fill(f.obj, cols)


def _encoded_pool(cols: Columns) -> list[bytes]:
    from seglog.storage.records import encode_batch

    pool = []
    for i, (base, vals, keys, stamps) in enumerate(cols):
        if i >= len(cols.values):
            break
        pool.append(encode_batch(vals, keys=keys, timestamps=stamps))
    return pool


def _block_allocator(base: Path) -> Callable[[int, int, int], int] | None:
    """``allocate(fd, allocated, needed) -> allocated``: fallocate(KEEP_SIZE) in seglog's 4 MiB
    steps, or None where seglog allocates nothing ahead (not ext4)."""
    import ctypes
    import ctypes.util

    from seglog._native.segment import ALLOCATE_AHEAD as step
    from seglog._native.segment import allocates_ahead

    if not allocates_ahead(base):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    fallocate = libc.fallocate
    fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    keep_size = 1                                   # FALLOC_FL_KEEP_SIZE

    def allocate(fd: int, allocated: int, needed: int) -> int:
        end = -(-needed // step) * step
        fallocate(fd, keep_size, allocated, end - allocated)
        return end
    return allocate


def _prepare_append(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    cols = Columns(p["records"], p["value"])
    calls: dict[str, Callable[[], object]] = {}
    setup: dict[str, Callable[[], object]] = {}
    teardown: dict[str, Callable[[], object]] = {}
    fresh: list[_Fresh] = []
    for name, opener in _sinks(cols, available).items():
        f = _Fresh(base, f"append-{len(fresh)}", opener)
        fresh.append(f)
        setup[name] = f.setup
        teardown[name] = f.close
        calls[name] = _filler(f, cols)
    # The floor of any encoder: the columns iterated as every contender gets them, and write()
    # of the very bytes seglog writes, already encoded, into disk blocks allocated ahead as
    # seglog allocates them (where it does).
    pool = _encoded_pool(cols)
    plain = _Fresh(base, "append-write", lambda d: os.open(d / "raw.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
    plain_close = plain.close
    allocate = _block_allocator(base)

    def write_all() -> None:
        fd = plain.obj
        pos = allocated = 0
        for b, _ in enumerate(cols):
            data = pool[b % len(pool)]
            pos += len(data)
            if allocate is not None and pos > allocated:
                allocated = allocate(fd, allocated, pos)
            os.write(fd, data)

    def close_fd() -> None:
        if plain.obj is not None:
            os.close(plain.obj)
            plain.obj = None
        plain_close()
    plain.close = close_fd  # type: ignore[method-assign]
    setup[WRITE] = plain.setup
    teardown[WRITE] = lambda: plain.close()
    calls[WRITE] = write_all

    def close() -> None:
        for f in fresh:
            f.close()
        plain.close()
    return Work(items=cols.records, calls=calls, setup=setup, teardown=teardown, repeatable=False,
                nbytes=cols.nbytes, close=close, params={"records_per_batch": cols.per_batch})


def _read_files(paths: list[Path]) -> Callable[[], int]:
    """The read() limit: every byte of ``paths`` through one reused 8 MiB buffer."""
    buf = bytearray(8 << 20)

    def read_all() -> int:
        total = 0
        for path in paths:
            with open(path, "rb", buffering=0) as f:
                while k := f.readinto(buf):
                    total += k
        return total
    return read_all


def paced_latencies_ms(producer: Any, topic: str, value: bytes, count: int, rate: float) -> list[float]:
    """Send ``count`` records one at a time at ``rate`` records/s (partition 0) and return each
    one's send -> acknowledgement latency in ms."""
    import time

    done_at: dict[int, float] = {}
    sent_at: list[float] = []
    futs = []
    start = time.perf_counter()
    for i in range(count):
        due = start + i / rate
        now = time.perf_counter()
        if due > now:
            time.sleep(due - now)
        sent_at.append(time.perf_counter())
        f = producer.send(topic, value, partition=0)
        f.add_done_callback(lambda _f, i=i: done_at.__setitem__(i, time.perf_counter()))
        futs.append(f)
    for f in futs:
        f.result(30)
    return [(done_at[i] - sent_at[i]) * 1000 for i in range(len(futs))]


def _read_seglog(d: Path) -> Callable[[], int]:
    from seglog.storage.log import Log
    from seglog.storage.records import decode_columns

    log = Log.open(d / "t-0")

    def run() -> int:
        n, off = 0, log.log_start_offset
        end = log.log_end_offset
        while off < end:
            for v in log.read(off, 8 << 20).views():
                n += decode_columns(v, headers=False).count
                v.release()
            off = log.log_start_offset + n
        return n
    run.close = log.close  # type: ignore[attr-defined]
    return run


def _read_sqlite(d: Path) -> Callable[[], int]:
    con = _sqlite(d)

    def run() -> int:
        offsets, stamps, keys, values = [], [], [], []
        for o, t, k, v in con.execute("SELECT offset, ts, key, value FROM log ORDER BY offset"):
            offsets.append(o)
            stamps.append(t)
            keys.append(k)
            values.append(v)
        return len(offsets)
    run.close = con.close  # type: ignore[attr-defined]
    return run


def _read_lmdb(d: Path) -> Callable[[], int]:
    import lmdb

    env = lmdb.open(str(d), readonly=True, lock=False)

    def run() -> int:
        offsets, stamps, keys, values = [], [], [], []
        with env.begin() as txn:
            for k, v in txn.cursor():
                offsets.append(k)
                stamps.append(v[:8])
                keys.append(v[8:16])
                values.append(v[16:])
        return len(offsets)
    run.close = env.close  # type: ignore[attr-defined]
    return run


def _read_plain(d: Path) -> Callable[[], int]:
    path = d / "log.bin"

    def run() -> int:
        stamps, keys, values = [], [], []
        unpack = HDR.unpack_from
        with open(path, "rb") as f:
            data = f.read()
        pos, end = 0, len(data)
        while pos < end:
            n, t = unpack(data, pos)
            pos += 12
            stamps.append(t)
            keys.append(data[pos:pos + 8])
            values.append(data[pos + 8:pos + n])
            pos += n
        return len(values)
    return run


def _read_parquet(d: Path) -> Callable[[], int]:
    import pyarrow.parquet as pq

    path = str(d / "log.parquet")
    return lambda: int(pq.read_table(path).num_rows)


READERS: dict[str, Callable[[Path], Callable[[], int]]] = {
    SEGLOG: _read_seglog, "sqlite3 WAL": _read_sqlite, "LMDB": _read_lmdb,
    "length-prefixed file": _read_plain, "Parquet (pyarrow)": _read_parquet}


def _prepare_read(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    cols = Columns(p["records"], p["value"])
    calls: dict[str, Callable[[], object]] = {}
    closers: list[Callable[[], None]] = []
    dirs: dict[str, Path] = {}
    for i, (name, opener) in enumerate(_sinks(cols, available).items()):
        d = _workdir(base, f"read-{i}")
        dirs[name] = d
        sink = opener(d)
        _fill(sink, cols)
        sink.close()
        run = READERS[name](d)
        closers.append(getattr(run, "close", lambda: None))
        calls[name] = run
    seg_files = sorted((dirs[SEGLOG] / "t-0").glob("*.log"))
    calls[READ] = _read_files(seg_files)

    def close() -> None:
        for c in closers:
            c()
        for d in dirs.values():
            shutil.rmtree(d, ignore_errors=True)
    return Work(items=cols.records, calls=calls, repeatable=False, nbytes=cols.nbytes, close=close)


def _prepare_append_batches(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    from seglog.storage.log import Log
    from seglog.storage.records import encode_batch

    batch = encode_batch([random.Random(1).randbytes(1 << 20)], timestamps=T0)
    count = p["batches"]

    def open_log(d: Path) -> Log:
        return Log.open(d / "t-0", {"segment.bytes": 1 << 30, "max.message.bytes": 2 << 20})

    ours = _Fresh(base, "batches-log", open_log)

    def append() -> None:
        for _ in range(count):
            ours.obj.append(batch)
    plain = _Fresh(base, "batches-write", lambda d: os.open(d / "raw.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
    fd_close = plain.close

    def close_fd() -> None:
        if plain.obj is not None:
            os.close(plain.obj)
            plain.obj = None
        fd_close()
    plain.close = close_fd  # type: ignore[method-assign]

    def write() -> None:
        for _ in range(count):
            os.write(plain.obj, batch)

    def close() -> None:
        ours.close()
        plain.close()
    return Work(items=count * len(batch), calls={SEGLOG: append, WRITE: write},
                setup={SEGLOG: ours.setup, WRITE: plain.setup},
                teardown={SEGLOG: lambda: ours.close(), WRITE: lambda: plain.close()},
                repeatable=False, nbytes=count * len(batch), close=close)


STORE_PEERS = (SQLITE, LMDB, PLAIN, PARQUET)


def _storage_benches(label: str, value: int) -> list[Benchmark]:
    quick = {"records": 20_000, "value": value}
    full = {"records": 10_000_000, "value": value}
    # Seconds per round of the full run (10 M records): a 1 M-record run on a shared 2-core
    # machine, times ten.
    append_s, read_s = (80.0, 70.0) if value <= 100 else (290.0, 160.0)
    return [
        Benchmark(
            name=f"append-{label}", group="log", unit="records",
            title=f"encode + append {label} records from Python lists, batches of 1,000",
            contenders=(Contender(SEGLOG, "seglog"), *STORE_PEERS, Contender(WRITE, "limit",
                        note="the columns iterated as every contender gets them, and write() of "
                             "the same batches pre-encoded, into blocks allocated as seglog's")),
            goals=(Goal("≥15× sqlite3", "ratio", 15.0, "sqlite3 WAL"), Goal("≥10× LMDB", "ratio", 10.0, "LMDB")),
            prepare=_prepare_append, quick=quick, full=full, full_round_seconds=append_s),
        Benchmark(
            name=f"read-{label}", group="log", unit="records",
            title=f"sequential read of every {label} record into columns",
            contenders=(Contender(SEGLOG, "seglog"), *STORE_PEERS, Contender(READ, "limit",
                        note="read() of seglog's segment files")),
            goals=(Goal("≥10× sqlite3", "ratio", 10.0, "sqlite3 WAL"),),
            prepare=_prepare_read, quick=quick, full=full, full_round_seconds=read_s),
    ]


# -------------------------------------------------------------------------------------------------
# Random lookups
# -------------------------------------------------------------------------------------------------

def _prepare_lookup(p: Mapping[str, int], base: Path, available: frozenset[str], by_time: bool) -> Work:
    import bisect

    from seglog.storage.log import Log

    cols = Columns(p["records"], 100)
    d = _workdir(base, "lookup")
    sink = _SeglogSink(d)
    _fill(sink, cols)
    sink.close()
    log = Log.open(d / "t-0")
    rng = random.Random(3)
    n = cols.records
    offsets = [rng.randrange(n) for _ in range(LOOKUPS)]
    stamps = [T0 + o for o in offsets]
    calls: dict[str, Callable[[], object]] = {}
    closers: list[Callable[[], None]] = [log.close]
    if by_time:
        oft = log.offset_for_timestamp
        calls["Log.offset_for_timestamp"] = lambda: [oft(t) for t in stamps]
        found = oft(stamps[0])
        if found is None or found[0] != offsets[0]:
            raise AssertionError(f"offset_for_timestamp({stamps[0]}) gave {found}, want {offsets[0]}")
    else:
        read = log.read
        seg = log.segments[0]
        calls["Log.read(offset, 1)"] = lambda: [read(o, 1) for o in offsets]
        calls["Segment.translate_offset"] = lambda: [seg.translate_offset(o) for o in offsets]
    if "sqlite3 WAL" in available:
        sq = _workdir(base, "lookup-sqlite")
        s = _SqliteSink(sq)
        _fill(s, cols)
        con = s.con
        if by_time:
            con.execute("CREATE INDEX IF NOT EXISTS log_ts ON log (ts)")
            q = "SELECT offset, ts FROM log WHERE ts >= ? ORDER BY ts LIMIT 1"
            calls["sqlite3 WAL"] = lambda: [con.execute(q, (t,)).fetchone() for t in stamps]
        else:
            q = "SELECT ts, key, value FROM log WHERE offset = ?"
            calls["sqlite3 WAL"] = lambda: [con.execute(q, (o,)).fetchone() for o in offsets]
        closers.append(con.close)
    if "LMDB" in available and not by_time:
        lm = _workdir(base, "lookup-lmdb")
        sink_l = _LmdbSink(lm, max(1 << 26, cols.nbytes * 3))
        _fill(sink_l, cols)
        env = sink_l.env
        keys = [o.to_bytes(8, "big") for o in offsets]

        def lmdb_get() -> list[Any]:
            with env.begin() as txn:
                get = txn.get
                return [get(k) for k in keys]
        calls["LMDB"] = lmdb_get
        closers.append(env.close)
    # An in-memory sorted list of every record's offset or timestamp: bisect, no storage at all.
    table = list(range(T0, T0 + n)) if by_time else list(range(n))
    left = bisect.bisect_left
    targets = stamps if by_time else offsets
    calls["bisect on a list"] = lambda: [left(table, t) for t in targets]

    def close() -> None:
        for c in closers:
            c()
        for name in ("lookup", "lookup-sqlite", "lookup-lmdb"):
            shutil.rmtree(base / name, ignore_errors=True)
    return Work(items=LOOKUPS, calls=calls, close=close)


def _lookup_benches() -> list[Benchmark]:
    quick = {"records": 20_000}
    full = {"records": 1_000_000}
    # No storage at all: every key in a sorted Python list in memory, the machine's limit here.
    bisect_peer = Contender("bisect on a list", "limit", note="every key in a Python list in memory")
    return [
        Benchmark(
            name="lookup-offset", group="log", unit="lookups",
            title="random offset lookups (1,024 per call) in a log of 100 B records",
            contenders=(Contender("Log.read(offset, 1)", "seglog"), Contender("Segment.translate_offset", "seglog"),
                        SQLITE, LMDB, bisect_peer),
            goals=(Goal("<2 µs per lookup", "max_seconds_per_item", 2e-6),),
            prepare=lambda p, b, a: _prepare_lookup(p, b, a, False), quick=quick, full=full,
            full_round_seconds=1),
        Benchmark(
            name="lookup-timestamp", group="log", unit="lookups",
            title="random timestamp lookups (1,024 per call) in a log of 100 B records",
            contenders=(Contender("Log.offset_for_timestamp", "seglog"),
                        Contender("sqlite3 WAL", "peer", ("sqlite3",), note="with an index on ts"),
                        bisect_peer),
            goals=(Goal("<2 µs per lookup", "max_seconds_per_item", 2e-6),),
            prepare=lambda p, b, a: _prepare_lookup(p, b, a, True), quick=quick, full=full,
            full_round_seconds=1),
    ]


# -------------------------------------------------------------------------------------------------
# Store: send, send_batch, poll_columns
# -------------------------------------------------------------------------------------------------

def _store_values(n: int) -> tuple[list[bytes], list[bytes]]:
    values = [(b"%08d" % i) * 12 + b"abcd" for i in range(n)]
    keys = [b"%08d" % i for i in range(n)]
    return values, keys


def _open_store(d: Path) -> Any:
    from seglog import Store

    store = Store.open(d, config={"log.cleaner.enable": False})
    store.create_topic("t", 1)
    return store


def _builder_send(lg: Any, make: Callable[[], Any], keys: list[bytes], values: list[bytes]) -> None:
    builder = make()
    n = 0
    for i, (k, v) in enumerate(zip(keys, values)):
        if builder.append(n, timestamp=T0 + i, key=k, value=v, headers=[]) is None:
            lg.append(bytes(builder.build()))
            builder = make()
            n = 0
            builder.append(n, timestamp=T0 + i, key=k, value=v, headers=[])
        n += 1
    lg.append(bytes(builder.build()))


def _prepare_send(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    from seglog.storage.log import Log

    n = p["records"]
    values, keys = _store_values(n)
    batch_size = 16_384
    calls: dict[str, Callable[[], object]] = {}
    setup: dict[str, Callable[[], object]] = {}
    fresh: list[_Fresh] = []

    def add(name: str, opener: Callable[[Path], Any], run: Callable[[Any], None]) -> None:
        f = _Fresh(base, f"send-{len(fresh)}", opener)
        fresh.append(f)
        setup[name] = f.setup
        calls[name] = lambda: run(f.obj)

    def send(store: Any) -> None:
        producer = store.producer(linger_ms=5, batch_size=batch_size)
        s = producer.send
        for k, v in zip(keys, values):
            s("t", v, k)
        producer.flush()
        if store.log("t", 0).log_end_offset != n:
            raise AssertionError("send lost records")
    add("Producer.send", _open_store, send)
    if "aiokafka" in available:
        from aiokafka.record.default_records import DefaultRecordBatchBuilder as Aio

        add("aiokafka", lambda d: Log.open(d / "t-0"),
            lambda lg: _builder_send(lg, lambda: Aio(2, 0, 0, -1, -1, -1, batch_size), keys, values))
    if "kafka-python" in available:
        from kafka.record.default_records import DefaultRecordBatchBuilder as Kp

        add("kafka-python", lambda d: Log.open(d / "t-0"),
            lambda lg: _builder_send(lg, lambda: Kp(2, 0, 0, -1, -1, -1, batch_size), keys, values))

    def sqlite_rows(con: sqlite3.Connection) -> None:
        cur = con.cursor()
        cur.execute("BEGIN")
        for i, (k, v) in enumerate(zip(keys, values)):
            cur.execute("INSERT INTO log VALUES (?, ?, ?, ?)", (i, T0 + i, k, v))
            if i % 1000 == 999:
                cur.execute("COMMIT")
                cur.execute("BEGIN")
        cur.execute("COMMIT")
    add("sqlite3 WAL", _sqlite, sqlite_rows)

    def close() -> None:
        for f in fresh:
            f.close()
    return Work(items=n, calls=calls, setup=setup, repeatable=False, nbytes=n * 116, close=close)


def _prepare_send_batch(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    from seglog.storage.log import Log
    from seglog.storage.records import encode_batch

    n = p["records"]
    values, keys = _store_values(n)
    chunk = 8_000  # ~0.9 MiB of these records, as send_batch cuts its columns
    calls: dict[str, Callable[[], object]] = {}
    setup: dict[str, Callable[[], object]] = {}
    fresh: list[_Fresh] = []

    def add(name: str, opener: Callable[[Path], Any], run: Callable[[Any], None]) -> None:
        f = _Fresh(base, f"send-batch-{len(fresh)}", opener)
        fresh.append(f)
        setup[name] = f.setup
        calls[name] = lambda: run(f.obj)

    add("Producer.send_batch", _open_store,
        lambda store: store.producer().send_batch("t", values, keys=keys, timestamps=T0, partition=0))

    def raw(lg: Any) -> None:
        for s in range(0, n, chunk):
            lg.append(encode_batch(values[s:s + chunk], keys=keys[s:s + chunk], timestamps=T0))
    add("encode_batch + Log.append", lambda d: Log.open(d / "t-0"), raw)
    rows = [(i, T0, k, v) for i, (k, v) in enumerate(zip(keys, values))]

    def sqlite_many(con: sqlite3.Connection) -> None:
        for s in range(0, n, 1000):
            con.execute("BEGIN")
            con.executemany("INSERT INTO log VALUES (?, ?, ?, ?)", rows[s:s + 1000])
            con.execute("COMMIT")
    add("sqlite3 WAL", _sqlite, sqlite_many)

    def close() -> None:
        for f in fresh:
            f.close()
    return Work(items=n, calls=calls, setup=setup, repeatable=False, nbytes=n * 116, close=close)


def _prepare_poll_columns(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    from seglog import TopicPartition
    from seglog.storage.records import decode_columns

    n = p["records"]
    chunk = 100_000
    values, keys = _store_values(min(n, chunk))
    d = _workdir(base, "poll")
    from seglog import Store

    store = Store.open(d / "store", config={"log.cleaner.enable": False})
    store.create_topic("t", 1, {"segment.bytes": 256 << 20})
    producer = store.producer()
    done = 0
    while done < n:
        k = min(chunk, n - done)
        producer.send_batch("t", values[:k], keys=keys[:k], timestamps=T0, partition=0)
        done += k
    lg = store.log("t", 0)
    tp = TopicPartition("t", 0)
    consumer = store.consumer(auto_offset_reset="earliest")
    consumer.assign([tp])

    def poll_columns() -> int:
        consumer.seek(tp, 0)
        got = 0
        while (t := consumer.poll_columns()).num_rows:
            got += t.num_rows
        if got != n:
            raise AssertionError(f"poll_columns returned {got} records, want {n}")
        return got

    def raw() -> int:
        got, offset = 0, 0
        while offset < lg.log_end_offset:
            for v in lg.read(offset, 1 << 20).views():
                rb = decode_columns(v, keys=True, headers=False, min_offset=offset).to_arrow()
                v.release()
                got += rb.num_rows
                offset = rb.column("offset")[-1].as_py() + 1
        return got

    calls: dict[str, Callable[[], object]] = {"Consumer.poll_columns": poll_columns,
                                              "decode_columns over Log.read": raw}
    closers: list[Callable[[], None]] = [store.close]
    if "aiokafka" in available:
        from aiokafka.record.memory_records import MemoryRecords

        def aio() -> int:
            got, offset = 0, 0
            while offset < lg.log_end_offset:
                mr = MemoryRecords(lg.read(offset, 1 << 20).to_bytes())
                while (batch := mr.next_batch()) is not None:
                    batch.validate_crc()
                    for r in batch:
                        r.offset, r.timestamp, r.key, r.value  # noqa: B018
                        got += 1
                    offset = batch.next_offset
            return got
        calls["aiokafka"] = aio
    if "sqlite3 WAL" in available:
        sq = _workdir(base, "poll-sqlite")
        con = _sqlite(sq)
        con.execute("BEGIN")
        m = len(values)
        con.executemany("INSERT INTO log VALUES (?, ?, ?, ?)",
                        ((i, T0, keys[i % m], values[i % m]) for i in range(n)))
        con.execute("COMMIT")

        def sqlite_scan() -> int:
            offsets, stamps, ks, vs = [], [], [], []
            for o, t, k, v in con.execute("SELECT offset, ts, key, value FROM log ORDER BY offset"):
                offsets.append(o)
                stamps.append(t)
                ks.append(k)
                vs.append(v)
            return len(offsets)
        calls["sqlite3 WAL"] = sqlite_scan
        closers.append(con.close)
    seg_files = sorted((d / "store").glob("t-0/*.log"))
    calls[READ] = _read_files(seg_files)

    def close() -> None:
        for c in closers:
            c()
        shutil.rmtree(d, ignore_errors=True)
        shutil.rmtree(base / "poll-sqlite", ignore_errors=True)
    return Work(items=n, calls=calls, repeatable=False, nbytes=n * 116, close=close)


def _store_benches() -> list[Benchmark]:
    return [
        Benchmark(
            name="send", group="store", unit="records",
            title="one Python call per 100 B record (Producer.send, linger 5 ms, 16 KiB batches)",
            contenders=(Contender("Producer.send", "seglog"),
                        Contender("aiokafka", "peer", ("aiokafka",), "aiokafka", "its batch builder + Log.append"),
                        Contender("kafka-python", "peer", ("kafka",), "kafka-python", "its batch builder + Log.append"),
                        Contender("sqlite3 WAL", "peer", ("sqlite3",), note="one execute per row")),
            goals=(Goal("≥1.5 M records/s", "min_items_per_second", 1.5e6),),
            prepare=_prepare_send, quick={"records": 20_000}, full={"records": 1_000_000},
            full_round_seconds=10),
        Benchmark(
            name="send_batch", group="store", unit="records",
            title="100 B records as columns in one call (Producer.send_batch)",
            contenders=(Contender("Producer.send_batch", "seglog"),
                        Contender("encode_batch + Log.append", "seglog", note="the raw path send_batch is built on"),
                        Contender("sqlite3 WAL", "peer", ("sqlite3",), note="executemany")),
            goals=(Goal("≥0.7× raw append", "ratio", 0.7, "encode_batch + Log.append"),),
            prepare=_prepare_send_batch, quick={"records": 20_000}, full={"records": 1_000_000},
            full_round_seconds=5),
        Benchmark(
            name="poll_columns", group="store", unit="records",
            title="consume every 100 B record into Arrow columns (Consumer.poll_columns)",
            contenders=(Contender("Consumer.poll_columns", "seglog"),
                        Contender("decode_columns over Log.read", "seglog", ("pyarrow",), "pyarrow",
                                  "its ceiling"),
                        Contender("aiokafka", "peer", ("aiokafka",), "aiokafka", "record objects"),
                        Contender("sqlite3 WAL", "peer", ("sqlite3",), note="ordered scan into lists"),
                        Contender(READ, "limit", note="read() of the segment files")),
            goals=(Goal("≥10 M records/s", "min_items_per_second", 1e7),),
            prepare=_prepare_poll_columns, quick={"records": 50_000}, full={"records": 10_000_000},
            full_round_seconds=15),
    ]


# -------------------------------------------------------------------------------------------------
# Spark
# -------------------------------------------------------------------------------------------------

_SPARK: dict[str, Any] = {}


def spark_session() -> Any:
    """One local[2] session for every Spark benchmark of a run; :func:`shutdown` stops it."""
    if "session" not in _SPARK:
        import sys

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from pyspark.sql import SparkSession

        from seglog.bindings.spark import register

        s = (SparkSession.builder.master("local[2]").appName("seglog-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.memory", "4g").config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
        s.sparkContext.setLogLevel("ERROR")
        register(s)
        _SPARK["session"] = s
    return _SPARK["session"]


def shutdown() -> None:
    """Stop what the benchmarks keep between them (the Spark session)."""
    s = _SPARK.pop("session", None)
    if s is not None:
        s.stop()


def _spark_data(p: Mapping[str, int], base: Path) -> dict[str, Any]:
    """Segment dirs written by seglog and the same rows (all seven Kafka columns, as the
    seglog source produces them) as Parquet, one file per partition, snappy."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    import seglog.bindings.spark as sp
    from seglog import Log
    from seglog.storage.records import encode_batch

    n, parts = p["records"], p["partitions"]
    root = _workdir(base, "spark")
    logs, parquet = root / "logs", root / "parquet"
    parquet.mkdir(parents=True)
    rng = np.random.default_rng(7)
    per_part = n // parts
    for part in range(parts):
        lg = Log.open(str(logs / f"bench-{part}"))
        for b in range(0, per_part, PER_BATCH):
            k = min(PER_BATCH, per_part - b)
            vals = rng.integers(0, 256, size=(k, 100), dtype=np.uint8).view("S100").ravel()
            keys = rng.integers(0, 256, size=(k, 8), dtype=np.uint8).view("S8").ravel()
            lg.append(encode_batch(vals, keys=keys, timestamps=T0 + b))
        lg.close()
    ro = sp.parse_read_options({"path": str(logs)})
    planned = sp.plan_batch(ro, sp.Constraints())
    for part in range(parts):
        batches = [b for q in planned if q.partition == part for b in sp.read_partition(q, ro)]
        pq.write_table(pa.Table.from_batches(batches), str(parquet / f"part-{part}.parquet"),
                       row_group_size=100_000, compression="snappy")
    return {"records": per_part * parts, "logs": str(logs), "parquet": str(parquet), "root": root}


def _spark_query(df: Any, query: str) -> Any:
    from pyspark.sql import functions as F

    if query == "count":
        return df.count()
    return df.agg(F.sum(F.length("key")), F.sum(F.length("value")), F.max("topic"),
                  F.sum("partition"), F.max("offset"), F.max("timestamp"),
                  F.sum("timestampType")).collect()


def _prepare_spark(p: Mapping[str, int], base: Path, available: frozenset[str], query: str) -> Work:
    data = _spark_data(p, base)
    spark = spark_session()
    frames = {
        "spark.read.format(\"seglog\")": spark.read.format("seglog").load(data["logs"]),
        "spark.read.parquet": spark.read.parquet(data["parquet"]),
    }
    if query == "count":
        frames["seglog, columns=offset"] = (spark.read.format("seglog").option("columns", "offset")
                                            .load(data["logs"]))
    expected = {name: _spark_query(df, query) for name, df in frames.items()}  # also warms up
    if query == "count" and any(v != data["records"] for v in expected.values()):
        raise AssertionError(f"count() disagrees: {expected}")
    def runner(df: Any) -> Callable[[], object]:
        return lambda: _spark_query(df, query)
    calls: dict[str, Callable[[], object]] = {name: runner(df) for name, df in frames.items()}
    return Work(items=data["records"], calls=calls, repeatable=False,
                close=lambda: shutil.rmtree(data["root"], ignore_errors=True))


def _spark_benches() -> list[Benchmark]:
    quick = {"records": 20_000, "partitions": 2}
    full = {"records": 10_000_000, "partitions": 8}
    seglog = Contender("spark.read.format(\"seglog\")", "seglog", ("pyspark", "pyarrow"), "pyspark")
    parquet = Contender("spark.read.parquet", "peer", ("pyspark", "pyarrow"), "pyspark")
    return [
        Benchmark(
            name="spark-count", group="spark", unit="rows",
            title="Spark count() over the segment dirs vs the same rows as Parquet",
            contenders=(seglog, Contender("seglog, columns=offset", "seglog", ("pyspark",), "pyspark"), parquet),
            prepare=lambda p, b, a: _prepare_spark(p, b, a, "count"), quick=quick, full=full,
            unavailable=java_missing, full_round_seconds=30),
        Benchmark(
            name="spark-aggregate", group="spark", unit="rows",
            title="Spark aggregate over every column (full rows) vs the same rows as Parquet",
            contenders=(seglog, parquet),
            goals=(Goal("full row ≥0.9× Parquet", "ratio", 0.9, "spark.read.parquet"),),
            prepare=lambda p, b, a: _prepare_spark(p, b, a, "aggregate"), quick=quick, full=full,
            unavailable=java_missing, full_round_seconds=30),
    ]


# -------------------------------------------------------------------------------------------------
# Replication
# -------------------------------------------------------------------------------------------------

def _prepare_replication(p: Mapping[str, int], base: Path, available: frozenset[str],
                         zookeeper: bool = False) -> Work:
    from seglog.cluster import start_cluster
    from seglog.storage.log import Log
    from seglog.storage.records import encode_batch

    n = p["count"]
    value = b"v" * 100
    zk: Any = None
    if zookeeper:
        # Three `seglog node` processes coordinated by a throwaway ZooKeeper server.
        from seglog.cluster.zkserver import ZooKeeperServer

        zk = ZooKeeperServer()
        zk.__enter__()
        try:
            cluster: Any = start_cluster(nodes=3, coordinator="zookeeper", processes=True,
                                         zookeeper=f"{zk.connect_string}/bench")
        except BaseException:
            zk.__exit__(None, None, None)
            raise
    else:
        cluster = start_cluster(nodes=3, dir=_workdir(base, "cluster"))
    try:
        cluster.create_topic("rf3", 1, 3, {"min.insync.replicas": 2})
        cluster.create_topic("rf1", 1, 1)
    except BaseException:
        cluster.close()
        if zk is not None:
            zk.__exit__(None, None, None)
        raise

    # A producer per call, closed in it (its metadata fetch is timed too). Two ClusterProducers
    # alive at once do not both get metadata (the second fails with an unknown topic), and
    # under load a later producer of the same cluster can fail so too: that is reported as the
    # benchmark's error.
    def produce(topic: str, acks: str) -> Callable[[], None]:
        def run() -> None:
            with cluster.producer(acks=acks, batch_size=64 * 1024) as producer:
                futures = [producer.send(topic, value, partition=0) for _ in range(n)]
                producer.flush(120)
                futures[-1].result(10)
        return run

    batch = encode_batch([value] * 500, timestamps=T0)
    bare = _Fresh(base, "replication-log", lambda d: Log.open(d / "t-0"))

    def bare_append() -> None:
        for _ in range(max(1, n // 500)):
            bare.obj.append(batch)

    def close() -> None:
        bare.close()
        try:
            cluster.close()
        finally:
            if zk is not None:
                zk.__exit__(None, None, None)
        shutil.rmtree(base / "cluster", ignore_errors=True)
    calls: dict[str, Callable[[], object]] = {
        "3 replicas, acks=all": produce("rf3", "all"), "3 replicas, acks=1": produce("rf3", "1"),
        "1 replica": produce("rf1", "1"), "Log.append (no network)": bare_append}
    return Work(items=n, calls=calls, setup={"Log.append (no network)": bare.setup}, repeatable=False,
                close=close)


def _zookeeper_missing() -> str | None:
    from seglog.cluster.zkserver import unavailable_reason

    return unavailable_reason()


def _replication_benches() -> list[Benchmark]:
    return [Benchmark(
        name="replication", group="replication", unit="records",
        title="produce 100 B records to a 3-node LocalCluster on loopback, acks=all vs acks=1",
        contenders=(Contender("3 replicas, acks=all", "seglog"), Contender("3 replicas, acks=1", "seglog"),
                    Contender("1 replica", "seglog"),
                    Contender("Log.append (no network)", "limit", note="the same records, batches of 500")),
        prepare=_prepare_replication, quick={"count": 2_000}, full={"count": 20_000},
        full_round_seconds=10), Benchmark(
        name="replication-zookeeper", group="replication", unit="records",
        title="produce 100 B records to 3 `seglog node` processes coordinated by ZooKeeper, acks=all vs acks=1",
        contenders=(Contender("3 replicas, acks=all", "seglog", ("kazoo",), "seglog[zookeeper]"),
                    Contender("3 replicas, acks=1", "seglog", ("kazoo",), "seglog[zookeeper]"),
                    Contender("1 replica", "seglog", ("kazoo",), "seglog[zookeeper]"),
                    Contender("Log.append (no network)", "limit", note="the same records, batches of 500")),
        prepare=lambda p, b, a: _prepare_replication(p, b, a, zookeeper=True),
        quick={"count": 2_000}, full={"count": 20_000}, unavailable=_zookeeper_missing,
        full_round_seconds=10)]


BENCHMARKS: tuple[Benchmark, ...] = (
    _crc_bench("100B", 100),
    _crc_bench("4KiB", 4096),
    _crc_bench("1MiB", 1 << 20),
    *_codec_benches("100B", 100),
    *_codec_benches("1KiB", 1024),
    Benchmark(
        name="append-batches", group="log", unit="bytes",
        title="Log.append of pre-encoded 1 MiB batches vs write() of the same bytes",
        contenders=(Contender(SEGLOG, "seglog"), Contender(WRITE, "limit")),
        goals=(Goal("≥0.8× plain write()", "ratio", 0.8, WRITE),),
        prepare=_prepare_append_batches, quick={"batches": 16}, full={"batches": 256},
        full_round_seconds=2),
    *_storage_benches("100B", 100),
    *_storage_benches("1KiB", 1024),
    *_lookup_benches(),
    *_store_benches(),
    *_spark_benches(),
    *_replication_benches(),
    *kafka_benches(),
)

NOT_YET: dict[str, str] = {}


def get(name: str) -> Benchmark:
    for b in BENCHMARKS:
        if b.name == name:
            return b
    raise KeyError(f"no benchmark {name!r}; valid names: {', '.join(b.name for b in BENCHMARKS)}")
