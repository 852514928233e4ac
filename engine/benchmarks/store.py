"""The store's producer and consumer (group ``store``): ``Producer.send`` one record a call,
``Producer.send_batch`` of columns, ``Consumer.poll_columns`` into Arrow, beside the Kafka
clients' batch builders and sqlite3."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from seglog import Store, TopicPartition
from seglog.storage.log import Log
from seglog.storage.records import decode_columns, encode_batch

from .inputs import READ, T0, FreshCalls, Stream, read_files, workdir
from .peers import sqlite_log, sqlite_scan
from .registry import Benchmark, Contender, Goal, Work


def _store_values(n: int) -> tuple[list[bytes], list[bytes]]:
    values = [(b"%08d" % i) * 12 + b"abcd" for i in range(n)]
    keys = [b"%08d" % i for i in range(n)]
    return values, keys


def _open_store(d: Path) -> Any:
    store = Store.open(d, config={"log.cleaner.enable": False})
    store.create_topic("t", 1)
    return store


class _StoreProducer:
    """A fresh store and one producer of it, both opened untimed: a store's first producer
    reserves a block of producer ids in the store's metadata (a file written and synced, about
    1 ms here), once per store, not per call."""

    def __init__(self, d: Path) -> None:
        self.store = _open_store(d)
        self.producer = self.store.producer()

    def close(self) -> None:
        self.producer.close()
        self.store.close()


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
    n = p["records"]
    values, keys = _store_values(n)
    batch_size = 16_384
    fc = FreshCalls(base, "send")
    add = fc.add

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

        add(
            "aiokafka",
            lambda d: Log.open(d / "t-0"),
            lambda lg: _builder_send(lg, lambda: Aio(2, 0, 0, -1, -1, -1, batch_size), keys, values),
        )
    if "kafka-python" in available:
        from kafka.record.default_records import DefaultRecordBatchBuilder as Kp

        add(
            "kafka-python",
            lambda d: Log.open(d / "t-0"),
            lambda lg: _builder_send(lg, lambda: Kp(2, 0, 0, -1, -1, -1, batch_size), keys, values),
        )

    def sqlite_rows(con: sqlite3.Connection) -> None:
        cur = con.cursor()
        cur.execute("BEGIN")
        for i, (k, v) in enumerate(zip(keys, values)):
            cur.execute("INSERT INTO log VALUES (?, ?, ?, ?)", (i, T0 + i, k, v))
            if i % 1000 == 999:
                cur.execute("COMMIT")
                cur.execute("BEGIN")
        cur.execute("COMMIT")

    add("sqlite3 WAL", sqlite_log, sqlite_rows)

    return Work(items=n, calls=fc.calls, setup=fc.setup, repeatable=False, nbytes=n * 116, close=fc.close)


def _prepare_send_batch(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    n = p["records"]
    values, keys = _store_values(n)
    chunk = 8_000  # ~0.9 MiB of these records, as send_batch cuts its columns
    fc = FreshCalls(base, "send-batch")
    add = fc.add

    add(
        "Producer.send_batch",
        _StoreProducer,
        lambda sp: sp.producer.send_batch("t", values, keys=keys, timestamps=T0, partition=0),
    )

    def raw(lg: Any) -> None:
        buf = bytearray()  # one kept batch buffer, as send_batch keeps one
        for s in range(0, n, chunk):
            lg.append(encode_batch(values[s : s + chunk], keys=keys[s : s + chunk], timestamps=T0, into=buf))

    add("encode_batch + Log.append", lambda d: Log.open(d / "t-0"), raw)
    rows = [(i, T0, k, v) for i, (k, v) in enumerate(zip(keys, values))]

    def sqlite_many(con: sqlite3.Connection) -> None:
        for s in range(0, n, 1000):
            con.execute("BEGIN")
            con.executemany("INSERT INTO log VALUES (?, ?, ?, ?)", rows[s : s + 1000])
            con.execute("COMMIT")

    add("sqlite3 WAL", sqlite_log, sqlite_many)

    return Work(items=n, calls=fc.calls, setup=fc.setup, repeatable=False, nbytes=n * 116, close=fc.close)


def _stream_columns(stream: Stream) -> Iterator[tuple[int, list[bytes], list[bytes], list[int]]]:
    """The stream chunk by chunk, each as one column: (first offset, values, keys, timestamps)."""
    for chunk in stream.chunks():
        yield (
            chunk[0][0],
            [v for b in chunk for v in b[1]],
            [k for b in chunk for k in b[2]],
            [t for b in chunk for t in b[3]],
        )
        del chunk


def _prepare_poll_columns(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    """A store's partition holding a stream of distinct 100 B records (8-byte keys), written by
    ``send_batch`` in the producer's batches; every contender reads all of it."""
    n = p["records"]
    stream = Stream(n, 100)
    d = workdir(base, "poll")
    store = Store.open(d / "store", config={"log.cleaner.enable": False})
    store.create_topic("t", 1, {"segment.bytes": 256 << 20})
    producer = store.producer()
    for _, values, keys, stamps in _stream_columns(stream):
        producer.send_batch("t", values, keys=keys, timestamps=stamps, partition=0)
    del values, keys, stamps
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

    calls: dict[str, Callable[[], object]] = {
        "Consumer.poll_columns": poll_columns,
        "decode_columns over Log.read": raw,
    }
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
        sq = workdir(base, "poll-sqlite")
        con = sqlite_log(sq)
        con.execute("BEGIN")
        for first, values, keys, stamps in _stream_columns(stream):
            con.executemany(
                "INSERT INTO log VALUES (?, ?, ?, ?)", zip(range(first, first + len(values)), stamps, keys, values)
            )
        con.execute("COMMIT")
        del values, keys, stamps

        calls["sqlite3 WAL"] = lambda: sqlite_scan(con)
        closers.append(con.close)
    seg_files = sorted((d / "store").glob("t-0/*.log"))
    calls[READ] = read_files(seg_files)

    def close() -> None:
        for c in closers:
            c()
        shutil.rmtree(d, ignore_errors=True)
        shutil.rmtree(base / "poll-sqlite", ignore_errors=True)

    return Work(items=n, calls=calls, repeatable=False, nbytes=n * 116, close=close)


def store_benches() -> list[Benchmark]:
    return [
        Benchmark(
            name="send",
            group="store",
            unit="records",
            title="one Python call per 100 B record (Producer.send, linger 5 ms, 16 KiB batches)",
            contenders=(
                Contender("Producer.send", "seglog"),
                Contender("aiokafka", "peer", ("aiokafka",), "aiokafka", "its batch builder + Log.append"),
                Contender("kafka-python", "peer", ("kafka",), "kafka-python", "its batch builder + Log.append"),
                Contender("sqlite3 WAL", "peer", ("sqlite3",), note="one execute per row"),
            ),
            goals=(Goal("≥1.5 M records/s", "min_items_per_second", 1.5e6),),
            prepare=_prepare_send,
            quick={"records": 20_000},
            full={"records": 1_000_000},
            full_round_seconds=10,
        ),
        Benchmark(
            name="send_batch",
            group="store",
            unit="records",
            title="100 B records as columns in one call (Producer.send_batch)",
            contenders=(
                Contender("Producer.send_batch", "seglog"),
                Contender("encode_batch + Log.append", "seglog", note="the raw path send_batch is built on"),
                Contender("sqlite3 WAL", "peer", ("sqlite3",), note="executemany"),
            ),
            goals=(Goal("≥0.7× raw append", "ratio", 0.7, "encode_batch + Log.append"),),
            prepare=_prepare_send_batch,
            quick={"records": 20_000},
            full={"records": 1_000_000},
            full_round_seconds=5,
        ),
        Benchmark(
            name="poll_columns",
            group="store",
            unit="records",
            variant="stream",
            title="consume a stream of distinct 100 B records into Arrow columns (Consumer.poll_columns)",
            contenders=(
                Contender("Consumer.poll_columns", "seglog"),
                Contender("decode_columns over Log.read", "seglog", ("pyarrow",), "pyarrow", "its ceiling"),
                Contender("aiokafka", "peer", ("aiokafka",), "aiokafka", "record objects"),
                Contender("sqlite3 WAL", "peer", ("sqlite3",), note="ordered scan into lists"),
                Contender(READ, "limit", note="read() of the segment files"),
            ),
            goals=(Goal("≥10 M records/s", "min_items_per_second", 1e7),),
            prepare=_prepare_poll_columns,
            quick={"records": 50_000},
            full={"records": 10_000_000},
            full_round_seconds=15,
        ),
    ]
