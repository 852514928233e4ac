"""The peers seglog is measured against, on the same work: the Kafka clients' record-batch
code (aiokafka, kafka-python) and other ways to keep a log on disk (sqlite3 in WAL mode, LMDB,
a length-prefixed file, Parquet). Each peer's module is imported only when it is used, so that
a missing one only removes its own contender.

A *sink* appends the records of :class:`~seglog.benchmarks.inputs.BatchPool` batch by batch
(``write(first offset, values, keys, timestamps)``, ``close()``); a *reader* reads them all
back into columns.
"""

from __future__ import annotations

import os
import sqlite3
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .registry import Contender

AIOKAFKA = Contender("aiokafka", "peer", ("aiokafka",), "aiokafka")
KAFKA_PYTHON = Contender("kafka-python", "peer", ("kafka",), "kafka-python")
SQLITE = Contender("sqlite3 WAL", "peer", ("sqlite3",), "(Python's sqlite3 module)")
LMDB = Contender("LMDB", "peer", ("lmdb",), "lmdb")
PLAIN = Contender("length-prefixed file", "peer")
PARQUET = Contender("Parquet (pyarrow)", "peer", ("pyarrow",), "pyarrow")

HDR = struct.Struct(">IQ")  # length of key+value, timestamp


# -------------------------------------------------------------------------------------------------
# Kafka clients' record batches
# -------------------------------------------------------------------------------------------------


def aio_decode(buf: bytes, touch: bool) -> int:
    """Records in the batch ``buf`` as aiokafka decodes them (CRC checked); with ``touch``
    every record's offset, timestamp, key and value is read (what the columns hold)."""
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


# -------------------------------------------------------------------------------------------------
# The keyed partitioner's hash
# -------------------------------------------------------------------------------------------------

_MASK32 = 0xFFFFFFFF


def python_murmur2(data: bytes) -> int:
    """Kafka's murmur2 (``Utils.murmur2``, docs/kafka-format.md §11) in plain Python, as a signed
    32-bit int: what a partitioner without a native hash runs. It is also the model the
    property tests hold seglog's native hash to."""
    m = 0x5BD1E995
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK32
    for i in range(0, length - length % 4, 4):
        k = (int.from_bytes(data[i : i + 4], "little") * m) & _MASK32
        k = ((k ^ (k >> 24)) * m) & _MASK32
        h = ((h * m) & _MASK32) ^ k
    tail, base = length % 4, length & ~3
    if tail >= 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h = ((h ^ data[base]) * m) & _MASK32
    h ^= h >> 13
    h = (h * m) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


# -------------------------------------------------------------------------------------------------
# Sinks and readers
# -------------------------------------------------------------------------------------------------


def sqlite_log(path: Path) -> sqlite3.Connection:
    """A connection to ``path/log.db`` in WAL mode with its table ``log(offset, ts, key, value)``."""
    con = sqlite3.connect(path / "log.db", isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    con.execute("CREATE TABLE IF NOT EXISTS log (offset INTEGER PRIMARY KEY, ts INTEGER, key BLOB, value BLOB)")
    return con


def sqlite_scan(con: sqlite3.Connection) -> int:
    """Every row of the log table, in offset order, into four lists; returns the row count."""
    offsets, stamps, keys, values = [], [], [], []
    for o, t, k, v in con.execute("SELECT offset, ts, key, value FROM log ORDER BY offset"):
        offsets.append(o)
        stamps.append(t)
        keys.append(k)
        values.append(v)
    return len(offsets)


class SqliteSink:
    def __init__(self, d: Path) -> None:
        self.con = sqlite_log(d)

    def write(self, base: int, vals: list[bytes], keys: list[bytes], stamps: list[int]) -> None:
        con = self.con
        con.execute("BEGIN")
        con.executemany("INSERT INTO log VALUES (?, ?, ?, ?)", zip(range(base, base + len(vals)), stamps, keys, vals))
        con.execute("COMMIT")

    def close(self) -> None:
        self.con.close()


class LmdbSink:
    """Key: the offset (8 bytes, big-endian, so appends stay in order); value: timestamp, key,
    value. One write transaction per batch, sync off (as the page-cache writes of the others),
    all of a batch's items in one ``putmulti(append=True)`` (about twice as fast as a ``put``
    per record)."""

    def __init__(self, d: Path, map_size: int) -> None:
        import lmdb

        self.env = lmdb.open(str(d), map_size=map_size, sync=False, metasync=False)

    def write(self, base: int, vals: list[bytes], keys: list[bytes], stamps: list[int]) -> None:
        with self.env.begin(write=True) as txn:
            txn.cursor().putmulti(
                [
                    ((base + i).to_bytes(8, "big"), t.to_bytes(8, "big") + k + v)
                    for i, (v, k, t) in enumerate(zip(vals, keys, stamps))
                ],
                append=True,
            )

    def close(self) -> None:
        self.env.close()


class PlainSink:
    """Each record: 4-byte length of key+value, 8-byte timestamp, key, value; one write() per batch."""

    def __init__(self, d: Path) -> None:
        self.fd = os.open(d / "log.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, base: int, vals: list[bytes], keys: list[bytes], stamps: list[int]) -> None:
        pack = HDR.pack
        os.write(self.fd, b"".join([pack(len(k) + len(v), t) + k + v for v, k, t in zip(vals, keys, stamps)]))

    def close(self) -> None:
        os.close(self.fd)


class ParquetSink:
    """Columns to Arrow, written as row groups of 100,000 rows (Parquet's natural unit; a row
    group per 1,000-record batch would be unfair to it), uncompressed like the others."""

    ROW_GROUP = 100_000

    def __init__(self, d: Path) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.pa = pa
        self.schema = pa.schema(
            [("offset", pa.int64()), ("timestamp", pa.int64()), ("key", pa.binary()), ("value", pa.binary())]
        )
        self.writer = pq.ParquetWriter(str(d / "log.parquet"), self.schema, compression="none")
        self.pending: list[Any] = []
        self.rows = 0

    def write(self, base: int, vals: list[bytes], keys: list[bytes], stamps: list[int]) -> None:
        pa = self.pa
        self.pending.append(
            pa.record_batch(
                [
                    pa.array(range(base, base + len(vals)), pa.int64()),
                    pa.array(stamps, pa.int64()),
                    pa.array(keys, pa.binary()),
                    pa.array(vals, pa.binary()),
                ],
                schema=self.schema,
            )
        )
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


def read_sqlite(d: Path) -> Callable[[], int]:
    con = sqlite_log(d)

    def run() -> int:
        return sqlite_scan(con)

    run.close = con.close  # type: ignore[attr-defined]
    return run


def read_lmdb(d: Path) -> Callable[[], int]:
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


def read_plain(d: Path) -> Callable[[], int]:
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
            keys.append(data[pos : pos + 8])
            values.append(data[pos + 8 : pos + n])
            pos += n
        return len(values)

    return run


def read_parquet(d: Path) -> Callable[[], int]:
    import pyarrow.parquet as pq

    path = str(d / "log.parquet")
    return lambda: int(pq.read_table(path).num_rows)
