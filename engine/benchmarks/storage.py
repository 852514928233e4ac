"""The log (group ``log``): append and sequential read of N records, seglog beside sqlite3,
LMDB, a length-prefixed file and Parquet; appends of pre-encoded batches; random offset and
timestamp lookups; each in batches cycled from a small pool and as a stream of distinct records.
The limits are ``write()`` and ``read()`` of the same bytes, ``bisect`` on an in-memory list for
the offset lookups, and a read of the bytes a timestamp lookup's record walk covers."""

from __future__ import annotations

import bisect
import ctypes
import ctypes.util
import mmap
import os
import random
import shutil
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from seglog._native.crc32c import crc32c
from seglog._native.segment import ALLOCATE_AHEAD, allocates_ahead
from seglog.storage.log import Log
from seglog.storage.records import decode_columns, encode_batch

from .inputs import READ, SEGLOG, T0, WRITE, BatchPool, Fresh, FreshCalls, FreshFile, Stream, read_files, workdir
from .peers import (
    LMDB,
    PARQUET,
    PLAIN,
    SQLITE,
    LmdbSink,
    ParquetSink,
    PlainSink,
    SqliteSink,
    read_lmdb,
    read_parquet,
    read_plain,
    read_sqlite,
)
from .registry import Benchmark, Contender, Goal, Work

LOOKUPS = 1_024


class SeglogSink:
    def __init__(self, d: Path) -> None:
        self.log = Log.open(d / "t-0", {"segment.bytes": 1 << 30, "max.message.bytes": 8 << 20})
        self.encode = encode_batch

    def write(self, base: int, vals: list[bytes], keys: list[bytes], stamps: list[int]) -> None:
        self.log.append(self.encode(vals, keys=keys, timestamps=stamps))

    def close(self) -> None:
        self.log.close()


def _sinks(cols: BatchPool | Stream, available: frozenset[str]) -> dict[str, Callable[[Path], Any]]:
    out: dict[str, Callable[[Path], Any]] = {SEGLOG: SeglogSink}
    if "sqlite3 WAL" in available:
        out["sqlite3 WAL"] = SqliteSink
    if "LMDB" in available:
        size = max(1 << 26, cols.nbytes * 3)
        out["LMDB"] = lambda d: LmdbSink(d, size)
    out["length-prefixed file"] = PlainSink
    if "Parquet (pyarrow)" in available:
        out["Parquet (pyarrow)"] = ParquetSink
    return out


def _batches(cols: BatchPool | Stream) -> Iterator[tuple[int, list[bytes], list[bytes], list[int]]]:
    """``(first offset, values, keys, timestamps)`` of every batch of ``cols``: a stream's made
    chunk by chunk, so that only one chunk exists at a time."""
    if isinstance(cols, BatchPool):
        yield from cols
        return
    for chunk in cols.chunks():
        for b in chunk:
            yield b[0], b[1], b[2], b[3]
        del chunk


def fill(sink: Any, cols: BatchPool | Stream) -> None:
    """Every record of ``cols`` into ``sink``, batch by batch (a stream's made chunk by chunk)."""
    for base, vals, keys, stamps in _batches(cols):
        sink.write(base, vals, keys, stamps)
    flush = getattr(sink, "flush", None)
    if flush is not None:
        flush()


def _encoded_pool(cols: BatchPool) -> list[bytes]:
    pool = []
    for i, (_base, vals, keys, stamps) in enumerate(cols):
        if i >= len(cols.values):
            break
        pool.append(encode_batch(vals, keys=keys, timestamps=stamps))
    return pool


def _block_allocator(base: Path) -> Callable[[int, int, int], int] | None:
    """``allocate(fd, allocated, needed) -> allocated``: fallocate(KEEP_SIZE) in seglog's 4 MiB
    steps, or None where seglog allocates nothing ahead (not ext4)."""

    if not allocates_ahead(base):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    fallocate = libc.fallocate
    fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    keep_size = 1  # FALLOC_FL_KEEP_SIZE

    def allocate(fd: int, allocated: int, needed: int) -> int:
        end: int = -(-needed // ALLOCATE_AHEAD) * ALLOCATE_AHEAD
        fallocate(fd, keep_size, allocated, end - allocated)
        return end

    return allocate


def _prepare_append(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    cols = BatchPool(p["records"], p["value"])
    fc = FreshCalls(base, "append")
    for name, opener in _sinks(cols, available).items():
        fc.add(name, opener, lambda sink: fill(sink, cols), teardown=True)
    # The floor of any encoder: the columns iterated as every contender gets them, and write()
    # of the very bytes seglog writes, already encoded, into disk blocks allocated ahead as
    # seglog allocates them (where it does).
    pool = _encoded_pool(cols)
    plain = FreshFile(base, "append-write")
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

    fc.setup[WRITE] = plain.setup
    fc.teardown[WRITE] = plain.close
    fc.calls[WRITE] = write_all

    def close() -> None:
        fc.close()
        plain.close()

    return Work(
        items=cols.records,
        calls=fc.calls,
        setup=fc.setup,
        teardown=fc.teardown,
        repeatable=False,
        nbytes=cols.nbytes,
        close=close,
        params={"records_per_batch": cols.per_batch},
    )


def read_seglog(d: Path) -> Callable[[], int]:
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


READERS: dict[str, Callable[[Path], Callable[[], int]]] = {
    SEGLOG: read_seglog,
    "sqlite3 WAL": read_sqlite,
    "LMDB": read_lmdb,
    "length-prefixed file": read_plain,
    "Parquet (pyarrow)": read_parquet,
}


def _prepare_read(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    cols = BatchPool(p["records"], p["value"])
    calls: dict[str, Callable[[], object]] = {}
    closers: list[Callable[[], None]] = []
    dirs: dict[str, Path] = {}
    for i, (name, opener) in enumerate(_sinks(cols, available).items()):
        d = workdir(base, f"read-{i}")
        dirs[name] = d
        sink = opener(d)
        fill(sink, cols)
        sink.close()
        run = READERS[name](d)
        closers.append(getattr(run, "close", lambda: None))
        calls[name] = run
    seg_files = sorted((dirs[SEGLOG] / "t-0").glob("*.log"))
    calls[READ] = read_files(seg_files)

    def close() -> None:
        for c in closers:
            c()
        for d in dirs.values():
            shutil.rmtree(d, ignore_errors=True)

    return Work(items=cols.records, calls=calls, repeatable=False, nbytes=cols.nbytes, close=close)


def _prepare_append_batches(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    batch = encode_batch([random.Random(1).randbytes(1 << 20)], timestamps=T0)
    count = p["batches"]

    def open_log(d: Path) -> Log:
        return Log.open(d / "t-0", {"segment.bytes": 1 << 30, "max.message.bytes": 2 << 20})

    ours = Fresh(base, "batches-log", open_log)

    def append() -> None:
        for _ in range(count):
            ours.obj.append(batch)

    plain = FreshFile(base, "batches-write")

    def write() -> None:
        for _ in range(count):
            os.write(plain.obj, batch)

    def close() -> None:
        ours.close()
        plain.close()

    return Work(
        items=count * len(batch),
        calls={SEGLOG: append, WRITE: write},
        setup={SEGLOG: ours.setup, WRITE: plain.setup},
        teardown={SEGLOG: ours.close, WRITE: plain.close},
        repeatable=False,
        nbytes=count * len(batch),
        close=close,
    )


# -------------------------------------------------------------------------------------------------
# Streams: every record distinct, in the producer's batches
# -------------------------------------------------------------------------------------------------


def _stream_write_floor(
    stream: Stream,
    base: Path,
    name: str,
    calls: dict[str, Callable[[], object]],
    setup: dict[str, Callable[[], object]],
    warmup: dict[str, Callable[[], object]],
    teardown: dict[str, Callable[[], object]],
) -> FreshFile:
    """The stream appends' floor, added to ``calls`` (and its ``setup``, ``warmup`` and
    ``teardown``) as :data:`WRITE`: write() of the very bytes seglog writes, already encoded
    (made with each chunk, untimed), into disk blocks allocated ahead as seglog allocates them
    (where it does). Returns the file it writes, for the caller to close."""
    plain = FreshFile(base, name)
    allocate = _block_allocator(base)
    at = [0, 0]  # bytes written, bytes allocated

    def write_one(b: Any) -> None:
        data = b[4]
        at[0] += len(data)
        if allocate is not None and at[0] > at[1]:
            at[1] = allocate(plain.obj, at[1], at[0])
        os.write(plain.obj, data)

    def plain_setup() -> None:
        plain.setup()
        at[:] = [0, 0]
        stream.prime(encoded=True)

    run_w = stream.timed(write_one, encoded=True)
    calls[WRITE] = partial(run_w, None)
    warmup[WRITE] = partial(run_w, 1)
    setup[WRITE] = plain_setup
    teardown[WRITE] = plain.close
    return plain


def _prepare_append_batches_stream(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    """``Log.append`` of a stream's batches, each encoded untimed with its chunk, beside
    write() of the same bytes."""
    stream = Stream(p["records"], 100)
    ours = Fresh(base, "batches-stream-log", lambda d: Log.open(d / "t-0", {"segment.bytes": 1 << 30}))

    def append_one(b: Any) -> None:
        ours.obj.append(b[4])

    def ours_setup() -> None:
        ours.setup()
        stream.prime(encoded=True)

    run = stream.timed(append_one, encoded=True)
    calls: dict[str, Callable[[], object]] = {SEGLOG: partial(run, None)}
    warmup: dict[str, Callable[[], object]] = {SEGLOG: partial(run, 1)}
    setup: dict[str, Callable[[], object]] = {SEGLOG: ours_setup}
    teardown: dict[str, Callable[[], object]] = {SEGLOG: ours.close}
    plain = _stream_write_floor(stream, base, "batches-stream-write", calls, setup, warmup, teardown)

    def close() -> None:
        ours.close()
        plain.close()

    return stream.work(calls, setup, warmup, teardown, close)


def _prepare_append_stream(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    stream = Stream(p["records"], p["value"])
    fc = FreshCalls(base, "append-stream")
    warmup: dict[str, Callable[[], object]] = {}
    setup: dict[str, Callable[[], object]] = {}
    calls: dict[str, Callable[[], object]] = {}
    for name, opener in _sinks(stream, available).items():
        fc.add(name, opener, lambda sink: None, teardown=True)
        f = fc.fresh[-1]

        def write(b: Any, f: Fresh = f) -> None:
            f.obj.write(b[0], b[1], b[2], b[3])

        def finish(f: Fresh = f) -> None:
            flush = getattr(f.obj, "flush", None)
            if flush is not None:
                flush()

        def fresh(f: Fresh = f) -> None:
            f.setup()
            stream.prime()

        run = stream.timed(write, finish=finish)
        calls[name] = partial(run, None)
        warmup[name] = partial(run, 1)
        setup[name] = fresh
    plain = _stream_write_floor(stream, base, "append-stream-write", calls, setup, warmup, fc.teardown)

    def close() -> None:
        fc.close()
        plain.close()

    return stream.work(calls, setup, warmup, fc.teardown, close)


def _prepare_read_stream(p: Mapping[str, int], base: Path, available: frozenset[str]) -> Work:
    stream = Stream(p["records"], p["value"])
    readers: dict[str, Callable[[], int]] = {}
    closers: list[Callable[[], None]] = []
    dirs: dict[str, Path] = {}
    for i, (name, opener) in enumerate(_sinks(stream, available).items()):
        d = workdir(base, f"read-stream-{i}")
        dirs[name] = d
        sink = opener(d)
        fill(sink, stream)
        sink.close()
        run = READERS[name](d)
        closers.append(getattr(run, "close", lambda: None))
        readers[name] = run

    def counted(name: str, run: Callable[[], int]) -> Callable[[], int]:
        def check() -> int:
            got = run()
            if got != stream.records:
                raise AssertionError(f"{name} read {got} records, want {stream.records}")
            return got

        return check

    calls: dict[str, Callable[[], object]] = {n: counted(n, r) for n, r in readers.items()}
    calls[READ] = read_files(sorted((dirs[SEGLOG] / "t-0").glob("*.log")))

    def close() -> None:
        for c in closers:
            c()
        for d in dirs.values():
            shutil.rmtree(d, ignore_errors=True)

    return Work(
        items=stream.records,
        calls=calls,
        repeatable=False,
        nbytes=stream.nbytes,
        close=close,
        params={"records_per_batch": stream.per_batch, "batches": stream.batches},
    )


STORE_PEERS = (SQLITE, LMDB, PLAIN, PARQUET)
#: The append goals of both variants (hot batches and a stream).
APPEND_GOALS = (Goal("≥15× sqlite3", "ratio", 15.0, "sqlite3 WAL"), Goal("≥10× LMDB", "ratio", 10.0, "LMDB"))
#: Contenders and goal of both sequential reads (hot batches and a stream).
READ_CONTENDERS = (
    Contender(SEGLOG, "seglog"),
    *STORE_PEERS,
    Contender(READ, "limit", note="read() of seglog's segment files"),
)
READ_GOALS = (Goal("≥10× sqlite3", "ratio", 10.0, "sqlite3 WAL"),)


def stream_storage_benches(label: str, value: int) -> list[Benchmark]:
    quick = {"records": 1_000_000, "value": value}
    full = {"records": 10_000_000, "value": value}
    append_s, read_s = (150.0, 120.0) if value <= 100 else (400.0, 250.0)
    each = f"distinct {label} records in the producer's default 16 KiB batches"
    return [
        Benchmark(
            name=f"append-{label}-stream",
            group="log",
            unit="records",
            variant="stream",
            self_timed=True,
            title=f"encode + append a stream of {each} from Python lists",
            contenders=(
                Contender(SEGLOG, "seglog"),
                *STORE_PEERS,
                Contender(
                    WRITE,
                    "limit",
                    note="write() of the same batches pre-encoded, into blocks allocated as seglog's",
                ),
            ),
            goals=(*APPEND_GOALS, Goal("≥0.8× floor (within 1.25×)", "ratio", 0.8, WRITE)),
            prepare=_prepare_append_stream,
            quick=quick,
            full=full,
            full_round_seconds=append_s,
        ),
        Benchmark(
            name=f"read-{label}-stream",
            group="log",
            unit="records",
            variant="stream",
            title=f"sequential read of a stream of {each} into columns",
            contenders=READ_CONTENDERS,
            goals=READ_GOALS,
            prepare=_prepare_read_stream,
            quick=quick,
            full=full,
            full_round_seconds=read_s,
        ),
    ]


def storage_benches(label: str, value: int) -> list[Benchmark]:
    quick = {"records": 20_000, "value": value}
    full = {"records": 10_000_000, "value": value}
    # Seconds per round of the full run (10 M records): a 1 M-record run on a shared 2-core
    # machine, times ten.
    append_s, read_s = (80.0, 70.0) if value <= 100 else (290.0, 160.0)
    return [
        Benchmark(
            name=f"append-{label}",
            group="log",
            unit="records",
            variant="hot batch",
            title=f"encode + append {label} records from Python lists, batches of 1,000 cycled from 16 (hot batches)",
            contenders=(
                Contender(SEGLOG, "seglog"),
                *STORE_PEERS,
                Contender(
                    WRITE,
                    "limit",
                    note="the columns iterated as every contender gets them, and write() of "
                    "the same batches pre-encoded, into blocks allocated as seglog's",
                ),
            ),
            goals=APPEND_GOALS,
            prepare=_prepare_append,
            quick=quick,
            full=full,
            full_round_seconds=append_s,
        ),
        Benchmark(
            name=f"read-{label}",
            group="log",
            unit="records",
            variant="hot batch",
            title=f"sequential read of every {label} record into columns (written as 16 batches of 1,000 cycled)",
            contenders=READ_CONTENDERS,
            goals=READ_GOALS,
            prepare=_prepare_read,
            quick=quick,
            full=full,
            full_round_seconds=read_s,
        ),
    ]


def append_batches_benches() -> list[Benchmark]:
    """Log.append of pre-encoded batches beside write() of the same bytes: the batches of a
    stream of distinct 100 B records in the producer's 16 KiB batches, and one 1 MiB batch
    again and again."""
    stream = Benchmark(
        name="append-batches-stream",
        group="log",
        unit="records",
        variant="stream",
        self_timed=True,
        title="Log.append of a stream of distinct 100 B records, pre-encoded in 16 KiB batches, vs write()",
        contenders=(Contender(SEGLOG, "seglog"), Contender(WRITE, "limit", note="write() of the same batches")),
        goals=(Goal("≥0.8× plain write()", "ratio", 0.8, WRITE),),
        prepare=_prepare_append_batches_stream,
        quick={"records": 1_000_000},
        full={"records": 10_000_000},
        full_round_seconds=20,
    )
    return [stream, append_batches_bench()]


def append_batches_bench() -> Benchmark:
    return Benchmark(
        name="append-batches",
        group="log",
        unit="bytes",
        variant="hot batch",
        title="Log.append of pre-encoded 1 MiB batches vs write() of the same bytes (one batch again and again)",
        contenders=(Contender(SEGLOG, "seglog"), Contender(WRITE, "limit")),
        goals=(Goal("≥0.8× plain write()", "ratio", 0.8, WRITE),),
        prepare=_prepare_append_batches,
        quick={"batches": 16},
        full={"batches": 256},
        full_round_seconds=2,
    )


# -------------------------------------------------------------------------------------------------
# Random lookups
# -------------------------------------------------------------------------------------------------


#: The timestamp lookups' floor: the bytes Kafka's record-level step reads, with no index.
WALKED = "read of the bytes walked"
_V2_HEADER = 61


def _varint(b: bytes | memoryview, i: int) -> tuple[int, int]:
    """The zigzag varint at ``b[i]`` and the position after it."""
    shift = u = 0
    while True:
        c = b[i]
        i += 1
        u |= (c & 0x7F) << shift
        if c < 0x80:
            return (u >> 1) ^ -(u & 1), i
        shift += 7


def _segment_index(log: Log, offset: int) -> int:
    """The index in ``log.segments`` of the segment that holds ``offset``."""
    return bisect.bisect_right([sg.base_offset for sg in log.segments], offset) - 1


def _walked_spans(log: Log, offsets: list[int]) -> tuple[list[memoryview], Callable[[], None]]:
    """For each target offset of ``log`` (uncompressed v2 batches, timestamps rising with the
    offsets), a view of its segment's file from the start of the batch that holds it to the end
    of its record: what the record walk of a timestamp lookup reads. Returns the views and a
    function that releases them and their mappings."""
    segments = log.segments
    maps: dict[int, tuple[mmap.mmap, memoryview]] = {}
    spans: list[memoryview] = []
    for o in offsets:
        i = _segment_index(log, o)
        if i not in maps:
            with open(segments[i].log_path, "rb") as f:
                mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
            maps[i] = (mm, memoryview(mm))
        view = maps[i][1]
        head = segments[i].translate_offset(o)
        if head is None:
            raise AssertionError(f"offset {o} is not in {segments[i].log_path}")
        at = head.position + _V2_HEADER
        for _ in range(o - head.base_offset + 1):
            length, at = _varint(view, at)
            at += length
        spans.append(view[head.position : at])

    def release() -> None:
        for sp in spans:
            sp.release()
        for mm, view in maps.values():
            view.release()
            mm.close()

    return spans, release


def _prepare_lookup(
    p: Mapping[str, int], base: Path, available: frozenset[str], by_time: bool, stream: bool = False
) -> Work:
    """Random lookups in a log of 100 B records: batches of 1,000 (cycled from a pool of 16), or,
    with ``stream``, a stream of distinct records in the producer's default batches. Record ``i``
    has offset ``i`` and timestamp ``T0 + i`` in both."""
    cols: BatchPool | Stream = Stream(p["records"], 100) if stream else BatchPool(p["records"], 100)
    d = workdir(base, "lookup")
    sink = SeglogSink(d)
    fill(sink, cols)
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
        for o, t in zip(offsets[:16], stamps[:16]):
            found = oft(t)
            if found is None or found[0] != o:
                raise AssertionError(f"offset_for_timestamp({t}) gave {found}, want offset {o}")
        spans, release = _walked_spans(log, offsets)
        closers.insert(0, release)
        calls[WALKED] = lambda: [crc32c(sp) for sp in spans]
    else:
        read = log.read
        segments = log.segments
        # Each target with its segment's bound method, found before timing. Targets of their
        # own, drawn alike: on Log.read's targets it ran right after Log.read had brought their
        # index lines and batch headers into the caches and the TLB, and measured that.
        own = [rng.randrange(n) for _ in range(LOOKUPS)]
        pairs = [(segments[_segment_index(log, o)].translate_offset, o) for o in own]
        calls["Log.read(offset, 1)"] = lambda: [read(o, 1) for o in offsets]
        calls["Segment.translate_offset"] = lambda: [tr(o) for tr, o in pairs]
        for o in offsets[:16]:
            head = read(o, 1).to_bytes()[:27]  # the batch's base offset and last offset delta
            first = int.from_bytes(head[:8], "big")
            if len(head) < 27 or not first <= o <= first + int.from_bytes(head[23:27], "big"):
                raise AssertionError(f"Log.read({o}, 1) gave a batch from offset {first}, not the target's")
    if "sqlite3 WAL" in available:
        sq = workdir(base, "lookup-sqlite")
        s = SqliteSink(sq)
        fill(s, cols)
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
        lm = workdir(base, "lookup-lmdb")
        sink_l = LmdbSink(lm, max(1 << 26, cols.nbytes * 3))
        fill(sink_l, cols)
        env = sink_l.env
        keys = [o.to_bytes(8, "big") for o in offsets]

        def lmdb_get() -> list[Any]:
            with env.begin() as txn:
                get = txn.get
                return [get(k) for k in keys]

        calls["LMDB"] = lmdb_get
        closers.append(env.close)
    if not by_time:
        # An in-memory sorted list of every record's offset: bisect, no storage at all.
        table = list(range(n))
        left = bisect.bisect_left
        calls["bisect on a list"] = lambda: [left(table, o) for o in offsets]

    def close() -> None:
        for c in closers:
            c()
        for name in ("lookup", "lookup-sqlite", "lookup-lmdb"):
            shutil.rmtree(base / name, ignore_errors=True)

    params: dict[str, object] = {
        "records_per_batch": cols.per_batch,
        "batches": cols.batches,
        "segments": len(log.segments),
    }
    return Work(items=LOOKUPS, calls=calls, close=close, params=params)


def lookup_benches() -> list[Benchmark]:
    """Random offset and timestamp lookups: in a stream of distinct records in the producer's
    default batches (the log a producer writes), and in batches of 1,000 records (where the
    timestamp lookup's walk inside a batch is longest)."""
    # No storage at all: every key in a sorted Python list in memory, the machine's limit here.
    bisect_peer = Contender("bisect on a list", "limit", note="every key in a Python list in memory")
    offset_goal = Goal("<1 µs per Log.read(offset, 1)", "max_seconds_per_item", 1e-6, subject="Log.read(offset, 1)")
    time_goal = Goal("<2 µs per lookup", "max_seconds_per_item", 2e-6)
    offset_contenders = (
        Contender("Log.read(offset, 1)", "seglog"),
        Contender(
            "Segment.translate_offset",
            "seglog",
            note="the offset index and the batch header alone, no log layer; targets of its own",
        ),
        SQLITE,
        LMDB,
        bisect_peer,
    )
    time_contenders = (
        Contender("Log.offset_for_timestamp", "seglog"),
        Contender("sqlite3 WAL", "peer", ("sqlite3",), note="with an index on ts"),
        Contender(
            WALKED,
            "limit",
            note="crc32c of each target's batch from its start to the target record (what the record walk reads), no index",
        ),
    )
    kinds = (
        ("offset", False, offset_contenders, offset_goal),
        ("timestamp", True, time_contenders, time_goal),
    )
    out = []
    for stream in (True, False):
        if stream:
            sizes = ({"records": 1_000_000}, {"records": 10_000_000})
            suffix, variant, each = "-stream", "stream", "a stream of distinct 100 B records in 16 KiB batches"
        else:
            sizes = ({"records": 20_000}, {"records": 1_000_000})
            suffix, variant, each = "", "", "a log of 100 B records in batches of 1,000"
        out += [
            Benchmark(
                name=f"lookup-{kind}{suffix}",
                group="log",
                unit="lookups",
                variant=variant,
                title=f"random {kind} lookups (1,024 per call) in {each}",
                contenders=contenders,
                goals=(goal,),
                prepare=partial(_prepare_lookup, by_time=by_time, stream=stream),
                quick=sizes[0],
                full=sizes[1],
                full_round_seconds=1,
            )
            for kind, by_time, contenders, goal in kinds
        ]
    return out
