"""The ``seglog`` command line.

    seglog demo [--dir DIR | --keep] [--records N] three replicas: failover, rejoin, Spark count
    seglog demo --single [--records N]             one store end to end, with progress
    seglog describe DIR [--internal]               topics, partitions, offsets, segments, sizes
    seglog dump FILE... [--print-data-log] [--verify-index-only] [--index-sanity-check]
                                                   batches, records, index entries (kafka-dump-log)
    seglog produce DIR TOPIC [--file F]            lines as records
    seglog consume DIR TOPIC [--offset N | --timestamp T] [--format json]

Errors are one line on stderr naming the file, offset or option at fault (exit status 1; 2 for
a bad command line), never a traceback; Ctrl-C is one line too (exit status 130). Notes about
what a command chose to do (where ``consume`` starts, what ``dump`` skipped) go to stderr, so
stdout holds only records or dump output.
"""

from __future__ import annotations

import argparse
import base64
import bisect
import errno
import json
import os
import re
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

from seglog.errors import LogDirectoryLockedError, SeglogError, StorageError


class CliError(Exception):
    """A user-facing problem: printed as one line."""


def _note(command: str, text: str) -> None:
    """One informational line on stderr (stdout stays the records or the dump)."""
    sys.stderr.write(f"seglog {command}: {text}\n")
    sys.stderr.flush()


def _log_dir(path: str, *, create: bool = False, create_option: str | None = None) -> None:
    """Check that ``path`` can be a log directory before a store is opened on it: an existing
    directory, or (``create``) one that can be made. The error names the path once and says
    what it is instead; ``create_option`` is the option that would create it, if the command
    has one."""
    if os.path.isdir(path):
        return
    if os.path.exists(path):
        raise CliError(f"{path}: is a file, not a log directory")
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise CliError(f"{path}: cannot be a log directory: {parent} is a file")
    if not create:
        hint = f" (use {create_option} to create it)" if create_option else ""
        raise CliError(f"{path}: the log directory does not exist{hint}")


# -------------------------------------------------------------------------------------------------
# Progress
# -------------------------------------------------------------------------------------------------

class _Progress:
    """A progress bar on a terminal; a line every 10 % otherwise."""

    def __init__(self, label: str, total: int, stream: IO[str], unit: str = "records") -> None:
        self.label = label
        self.total = max(total, 1)
        self.stream = stream
        self.unit = unit
        self.tty = stream.isatty()
        self.start = time.perf_counter()
        self.last_step = -1

    def update(self, done: int) -> None:
        frac = min(done / self.total, 1.0)
        rate = done / max(time.perf_counter() - self.start, 1e-9)
        if self.tty:
            width = 30
            bar = "#" * int(frac * width) + "." * (width - int(frac * width))
            self.stream.write(f"\r  {self.label} [{bar}] {frac * 100:5.1f}% {done:,}/{self.total:,} "
                              f"{self.unit} ({rate / 1e6:.2f} M/s)")
            self.stream.flush()
            return
        step = int(frac * 10)
        if step != self.last_step:
            self.last_step = step
            self.stream.write(f"  {self.label}: {frac * 100:3.0f}% ({done:,} of {self.total:,} {self.unit})\n")
            self.stream.flush()

    def finish(self, done: int) -> float:
        self.update(done)
        elapsed = time.perf_counter() - self.start
        if self.tty:
            self.stream.write("\n")
        return elapsed


# -------------------------------------------------------------------------------------------------
# demo
# -------------------------------------------------------------------------------------------------

def _demo(args: argparse.Namespace) -> int:
    from seglog import Store, TopicPartition

    out = sys.stdout
    if args.records < 1:
        raise CliError(f"--records must be at least 1, got {args.records}")
    if args.partitions < 1:
        raise CliError(f"--partitions must be at least 1, got {args.partitions}")
    base = args.base
    os.makedirs(base, exist_ok=True)
    path = os.path.join(base, "store")
    n, parts = args.records, args.partitions
    topic = "demo-events"
    out.write(f"seglog demo: a store in {path}\n")
    with Store.open(path) as store:
        if topic in store.topics():
            store.delete_topic(topic)
        store.create_topic(topic, parts, {"segment.bytes": args.segment_bytes})
        out.write(f"  created topic {topic!r}: {parts} partitions, segment.bytes={args.segment_bytes:,}; "
                  f"producing with compression.type={args.compression}\n")
        producer = store.producer(compression_type=args.compression)
        chunk = 50_000
        bar = _Progress("produce", n, out)
        sent = 0
        while sent < n:
            m = min(chunk, n - sent)
            values = [b"event %010d " % i + b"." * 80 for i in range(sent, sent + m)]
            keys = [b"user-%d" % (i % 1000) for i in range(sent, sent + m)]
            producer.send_batch(topic, values, keys=keys)
            sent += m
            bar.update(sent)
        t_prod = bar.finish(sent)
        out.write(f"  produced {n:,} records (keys user-0..user-999, murmur2-partitioned) in "
                  f"{t_prod:.2f} s: {n / t_prod / 1e6:.2f} M records/s\n")

        consumer = store.consumer(group_id="demo-verifier", auto_offset_reset="earliest")
        consumer.assign([TopicPartition(topic, p) for p in range(parts)])
        import pyarrow as pa
        import pyarrow.compute as pc

        bar = _Progress("consume", n, out)
        got = 0
        numbers = []
        while got < n:
            table = consumer.poll_columns(timeout_ms=0)
            if not table.num_rows:
                break
            # The event number inside each value, without a Python object per record.
            digits = pc.binary_slice(table.column("value"), 6, 16)
            numbers.append(pc.cast(pc.cast(digits, pa.string()), pa.int64()))
            got += table.num_rows
            bar.update(got)
        t_cons = bar.finish(got)
        consumer.commit()
        seen = pa.chunked_array(numbers, pa.int64()) if numbers else pa.chunked_array([], pa.int64())
        distinct = pc.count_distinct(seen).as_py() if got else 0
        in_range = got == 0 or (pc.min(seen).as_py() >= 0 and pc.max(seen).as_py() < n)
        missing = n - distinct if in_range else n
        out.write(f"  consumed {got:,} records back as Arrow columns in {t_cons:.2f} s: "
                  f"{got / max(t_cons, 1e-9) / 1e6:.2f} M records/s\n")
        if got != n or missing:
            raise CliError(f"verification failed: {got:,} records read, {missing:,} of {n:,} missing")
        out.write(f"  verified: every one of the {n:,} records came back exactly once; offsets "
                  f"committed for group demo-verifier\n")
        desc = store.describe(topic)
    with Store.open(path, read_only=True) as ro:
        out.write("\n")
        _print_describe(ro.describe(internal=False), out)
    out.write(f"\n  files in {path}/{topic}-0:\n")
    for name in sorted(os.listdir(os.path.join(path, f"{topic}-0")))[:8]:
        size = os.path.getsize(os.path.join(path, f"{topic}-0", name))
        out.write(f"    {name:40s} {size:>12,} bytes\n")
    if _demo_keeps(args):
        out.write(f"\n  the directory is a Kafka log dir: try `seglog describe {path}` or "
                  f"`seglog dump {desc[0].partitions[0].path}/{'0' * 20}.log`\n")
        if not args.dir:
            out.write(f"  (kept in {base})\n")
    else:
        out.write(f"\n  the temporary directory {base} is removed now (--keep keeps it, to look at with "
                  "`seglog describe` and `seglog dump`)\n")
    return 0


# -------------------------------------------------------------------------------------------------
# describe
# -------------------------------------------------------------------------------------------------

def _human(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _print_describe(topics: Sequence[Any], out: IO[str]) -> None:
    rows = [("TOPIC", "PARTITION", "LOG-START", "HIGH-WATERMARK", "LOG-END", "RECOVERY-POINT",
             "SEGMENTS", "SIZE")]
    for t in topics:
        for p in t.partitions:
            rows.append((t.name, str(p.partition), f"{p.log_start_offset:,}", f"{p.high_watermark:,}",
                         f"{p.log_end_offset:,}", f"{p.recovery_point:,}", str(p.segments),
                         _human(p.size_bytes)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        cells = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]
        out.write("  ".join(cells).rstrip() + "\n")
    for t in topics:
        if t.config_overrides:
            cfg = ", ".join(f"{k}={_fmt_cfg(v)}" for k, v in sorted(t.config_overrides.items()))
            out.write(f"{t.name}: {cfg}\n")


def _fmt_cfg(v: Any) -> str:
    return ",".join(v) if isinstance(v, (tuple, list)) else str(v)


def _describe(args: argparse.Namespace) -> int:
    from seglog import Store

    if args.bootstrap:
        if args.dir:
            raise CliError("give a log directory or --bootstrap, not both")
        from seglog.cluster.client import ClusterClient, format_describe

        with ClusterClient(args.bootstrap, metadata_timeout_s=args.timeout) as client:
            parts = client.describe_topics([args.topic] if args.topic else None)
        if args.topic and not parts:
            raise CliError(f"topic {args.topic!r} does not exist in the cluster at {args.bootstrap}")
        sys.stdout.write(format_describe(parts))
        return 0
    if not args.dir:
        raise CliError("give a log directory, or --bootstrap HOST:PORT for a running cluster")
    _log_dir(args.dir)
    with Store.open(args.dir, read_only=True) as store:
        topics = store.describe(args.topic, internal=args.internal) if args.topic else \
            store.describe(internal=args.internal)
        if not topics:
            sys.stdout.write(f"{args.dir}: no topics\n")
            return 0
        _print_describe(topics, sys.stdout)
    return 0


# -------------------------------------------------------------------------------------------------
# produce / consume
# -------------------------------------------------------------------------------------------------

def _produce(args: argparse.Namespace) -> int:
    from seglog import Store

    _log_dir(args.dir, create=args.create, create_option="--create")
    source: IO[bytes]
    if args.file and args.file != "-":
        try:
            source = open(args.file, "rb")
        except OSError as exc:
            raise CliError(f"{args.file}: {exc.strerror}") from None
    else:
        source = sys.stdin.buffer
    sep = args.key_separator.encode() if args.key_separator is not None else None
    count = 0
    with Store.open(args.dir, create=args.create) as store:
        if args.topic not in store.topics():
            if not args.create:
                raise CliError(f"topic {args.topic!r} does not exist in {args.dir} (use --create "
                               "to create it)")
            store.create_topic(args.topic, args.partitions)
        producer = store.producer(linger_ms=100, compression_type=args.compression)
        try:
            for lineno, line in enumerate(source, 1):
                line = line.rstrip(b"\n").rstrip(b"\r")
                key = None
                if sep is not None:
                    key, found, value = line.partition(sep)
                    if not found:
                        raise CliError(f"line {lineno}: no key separator {args.key_separator!r}")
                else:
                    value = line
                producer.send(args.topic, value, key=key, partition=args.partition)
                count += 1
            producer.flush()
        finally:
            if source is not sys.stdin.buffer:
                source.close()
    sys.stderr.write(f"produced {count:,} record(s) to {args.topic}\n")
    return 0


def _text(b: bytes | None) -> Any:
    if b is None:
        return None
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(b).decode("ascii")}


def _holds(tp: Any, start: int, end: int) -> str:
    """``orders-0 holds offsets 0 to 41`` / ``orders-0 holds no records (log end 0)``."""
    if end <= start:
        return f"{tp.topic}-{tp.partition} holds no records (its log end is offset {end})"
    return f"{tp.topic}-{tp.partition} holds offsets {start} to {end - 1}"


def _position(consumer: Any, tps: Sequence[Any], args: argparse.Namespace) -> None:
    """Seek each partition to where ``consume`` starts, and say so on stderr where that is not
    what was asked for or not obvious: an ``--offset`` past the end starts at the end (as
    kafka-console-consumer does, whose consumer resets an out-of-range offset to the latest);
    a group without a committed offset starts at the end too (Kafka's auto.offset.reset=latest)."""
    begin = consumer.beginning_offsets(tps)
    end = consumer.end_offsets(tps)
    fresh = []
    for tp in tps:
        if args.offset is not None:
            if args.offset < 0:
                start = max(end[tp] + args.offset, begin[tp])
            elif args.offset > end[tp]:
                _note("consume", f"--offset {args.offset} is past the end: {_holds(tp, begin[tp], end[tp])}; "
                                 f"starting at its end, offset {end[tp]}")
                start = end[tp]
            else:
                start = args.offset
            consumer.seek(tp, start)
        elif args.timestamp is not None:
            found = consumer.offsets_for_times({tp: args.timestamp})[tp]
            if found is None:
                consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, found.offset)
        elif args.from_beginning:
            consumer.seek_to_beginning(tp)
        elif args.group is not None and consumer.committed(tp) is None:
            fresh.append(tp)
    if fresh:
        names = ", ".join(f"{tp.topic}-{tp.partition} at offset {end[tp]}" for tp in fresh)
        _note("consume", f"group {args.group!r} has no committed offset yet: starting at the end "
                         f"({names}), as a new Kafka consumer group does; add --from-beginning to "
                         "read from the start")


def _consume(args: argparse.Namespace) -> int:
    from seglog import Store, TopicPartition

    if (args.offset is not None) + (args.timestamp is not None) + bool(args.from_beginning) > 1:
        raise CliError("give at most one of --offset, --timestamp, --from-beginning")
    _log_dir(args.dir)
    out = sys.stdout.buffer
    writable = args.group is not None
    # Without --group nothing is written (a read-only open: no lock, no file touched). A group's
    # commit needs the dir's owner: its lock, and the one __consumer_offsets partition the group
    # maps to (created at the commit if new).
    try:
        store = Store.open(args.dir, read_only=not writable, create=False)
    except StorageError as exc:
        cause = exc.__cause__
        unwritable = isinstance(cause, OSError) and cause.errno in (errno.EACCES, errno.EPERM, errno.EROFS)
        if not (isinstance(exc, LogDirectoryLockedError) or unwritable):
            raise
        raise CliError(f"cannot commit the offsets of group {args.group!r}: {exc}; without --group, "
                       "consume reads the log dir without writing to it") from None
    with store:
        if args.topic not in store.topics(internal=True):
            raise CliError(f"topic {args.topic!r} does not exist in {args.dir}")
        n_parts = store.partitions_for(args.topic)
        parts = [args.partition] if args.partition is not None else range(n_parts)
        for p in parts:
            if not 0 <= p < n_parts:
                raise CliError(f"--partition {p}: topic {args.topic!r} has {n_parts} partition(s)")
        consumer = store.consumer(
            group_id=args.group, auto_offset_reset="earliest" if args.group is None else "latest",
            isolation_level=args.isolation_level, enable_auto_commit=False)
        tps = [TopicPartition(args.topic, p) for p in parts]
        consumer.assign(tps)
        _position(consumer, tps, args)
        shown = 0
        limit = args.max_messages
        while limit is None or shown < limit:
            recs = consumer.poll(max_records=10_000 if limit is None else min(10_000, limit - shown),
                                 timeout_ms=args.timeout_ms)
            if not recs:
                break
            for tp, rs in recs.items():
                for r in rs:
                    if args.format == "json":
                        line = json.dumps({
                            "topic": tp.topic, "partition": tp.partition, "offset": r.offset,
                            "timestamp": r.timestamp, "key": _text(r.key), "value": _text(r.value),
                            "headers": [[k, _text(v)] for k, v in r.headers]}, ensure_ascii=False)
                        out.write(line.encode("utf-8") + b"\n")
                    else:
                        if args.print_key:
                            out.write((r.key if r.key is not None else b"null") + args.key_separator.encode())
                        out.write((r.value if r.value is not None else b"null") + b"\n")
                    shown += 1
        out.flush()
        if writable:
            consumer.commit()
    return 0


# -------------------------------------------------------------------------------------------------
# dump
# -------------------------------------------------------------------------------------------------

def _codecs() -> dict[int, str]:
    """Codec id -> Kafka's name (none, gzip, snappy, lz4, zstd): the one list every command
    uses, from the records module's table (which also knows the topic-level alias
    "uncompressed" for none)."""
    from seglog.storage.records import CODEC_NAMES

    by_id: dict[int, str] = {}
    for name, codec in CODEC_NAMES.items():
        by_id.setdefault(codec, name)
    return dict(sorted(by_id.items()))


_DUMPABLE = ".log, .index, .timeindex, .txnindex, .snapshot or a checkpoint"


def _dump_kind(name: str) -> str | None:
    """What ``dump`` makes of a file name: a segment's data or index file, a producer snapshot, a
    checkpoint, or None for anything else (a partition's partition.metadata, a log dir's .lock or
    meta.properties, ``.deleted``/``.cleaned``/``.swap`` leftovers, ...)."""
    for suffix in (".log", ".index", ".timeindex", ".txnindex", ".snapshot"):
        if name.endswith(suffix):
            return suffix
    if name.endswith("-checkpoint"):
        return "checkpoint"
    return None


def _dump(args: argparse.Namespace) -> int:
    problems = 0
    dumped = 0
    dirs: list[str] = []
    single = len(args.files) == 1
    for path in args.files:
        if not os.path.exists(path):
            raise CliError(f"{path}: no such file")
        name = os.path.basename(path)
        kind = None if os.path.isdir(path) else _dump_kind(name)
        if kind is None:
            if single:
                what = "is a directory" if os.path.isdir(path) else "not a segment file"
                raise CliError(f"{path}: {what} (expected {_DUMPABLE})")
            # `seglog dump DIR/*`: say what was left out and go on, as kafka-dump-log does.
            if os.path.isdir(path):
                dirs.append(path)
            else:
                _note("dump", f"skipping {path}: not a segment file")
            continue
        dumped += 1
        sys.stdout.write(f"Dumping {path}\n")
        if kind == ".log":
            if args.verify_index_only or args.index_sanity_check:
                continue
            problems += _dump_log(path, args)
        elif kind == ".index":
            problems += _dump_index(path, args, time_index=False)
        elif kind == ".timeindex":
            problems += _dump_index(path, args, time_index=True)
        elif kind == ".txnindex":
            problems += _dump_txnindex(path)
        elif kind == ".snapshot":
            problems += _dump_snapshot(path)
        else:
            problems += _dump_checkpoint(path)
    if dirs:
        _note("dump", f"skipping {len(dirs)} director{'y' if len(dirs) == 1 else 'ies'} ("
                      f"{', '.join(dirs[:3])}{', ...' if len(dirs) > 3 else ''}): dump reads the files in them")
    if not dumped:
        raise CliError(f"none of the {len(args.files)} files is a segment file (expected {_DUMPABLE})")
    if problems:
        sys.stderr.write(f"seglog dump: {problems} problem(s) found\n")
        return 1
    return 0


def _dump_checkpoint(path: str) -> int:
    """A text checkpoint file (version line, count line, entries), printed as it is once it reads
    as one."""
    data = _read(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        sys.stdout.write(f"not a checkpoint file: byte {exc.start} is not text "
                         f"(a checkpoint is UTF-8 lines: version, count, entries)\n")
        return 1
    lines = text.splitlines()
    if text and (len(lines) < 2 or not lines[0].strip().lstrip("-").isdigit()
                 or not lines[1].strip().isdigit()):
        first = lines[0][:40] if lines else ""
        sys.stdout.write(f"not a checkpoint file: it starts {first!r}, not with a version line and "
                         "an entry-count line\n")
        return 1
    sys.stdout.write(text)
    return 0


def _base_offset(path: str) -> int:
    stem = os.path.basename(path).split(".")[0]
    if not stem.isdigit():
        raise CliError(f"{path}: the file name is not a 20-digit base offset")
    return int(stem)


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror}") from None


def _dump_log(path: str, args: argparse.Namespace) -> int:
    from seglog.errors import CorruptRecordError
    from seglog.storage.records import batch_headers, decode_records

    data = _read(path)
    base = _base_offset(path)
    sys.stdout.write(f"Log starting offset: {base}\n")
    problems = 0
    try:
        heads = batch_headers(data)
        bad_at = None
    except CorruptRecordError as exc:
        bad_at = exc.position if exc.position is not None else 0
        heads = batch_headers(data, 0, bad_at) if bad_at else []
        reason = re.sub(r" \(at byte \d+\)$", "", exc.message)
    out = sys.stdout
    codecs = _codecs()
    for h in heads:
        try:
            batch_headers(data, h.position, h.position + h.size, verify_crc=True)
            valid = True
        except CorruptRecordError:
            valid = False
            problems += 1
        ts_type = {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}[h.timestamp_type]
        horizon = h.base_timestamp if h.magic == 2 and h.attributes & 0x40 else None
        out.write(
            f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
            f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
            f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
            f"partitionLeaderEpoch: {h.partition_leader_epoch} "
            f"isTransactional: {str(h.is_transactional).lower()} isControl: {str(h.is_control).lower()} "
            f"deleteHorizonMs: {horizon if horizon is not None else 'none'} position: {h.position} "
            f"{ts_type}: {h.max_timestamp} size: {h.size} magic: {h.magic} "
            f"compresscodec: {codecs.get(h.compression, h.compression)} crc: {h.crc} "
            f"isvalid: {str(valid).lower()}\n")
        if args.print_data_log and valid:
            try:
                recs = decode_records(data[h.position:h.position + h.size], include_control=True,
                                      max_decompressed=args.max_message_size * 64)
            except (CorruptRecordError, SeglogError, ValueError) as exc:
                out.write(f"| cannot decode the records of the batch at position {h.position}: {exc}\n")
                problems += 1
                continue
            for r in recs:
                line = (f"| offset: {r.offset} {ts_type}: {r.timestamp} "
                        f"keySize: {len(r.key) if r.key is not None else -1} "
                        f"valueSize: {len(r.value) if r.value is not None else -1} "
                        f"sequence: {r.sequence} headerKeys: [{','.join(k for k, _ in r.headers)}]")
                if r.is_control:
                    names = {0: "ABORT", 1: "COMMIT"}
                    line += f" endTxnMarker: {names.get(r.control_type, r.control_type)}"
                else:
                    line += f" key: {_show(r.key)} payload: {_show(r.value)}"
                out.write(line + "\n")
    if bad_at is not None:
        if bad_at == 0 and not heads:
            out.write(f"Not a Kafka log segment: {_first_batch(data, reason)}; none of its "
                      f"{len(data)} bytes read as record batches\n")
        else:
            out.write(f"Found a corrupt batch at position {bad_at} of {path}: {reason}; "
                      f"{len(data) - bad_at} byte(s) from there on cannot be read\n")
        problems += 1
    return problems


def _first_batch(data: bytes, reason: str) -> str:
    """What the first bytes of a file claim as a batch header, in Kafka's terms, and why that
    cannot be a batch."""
    if len(data) < 17:
        return (f"the file holds {len(data)} byte(s), fewer than the 17 that start every batch "
                "(offset, length, leader epoch, magic)")
    length = int.from_bytes(data[8:12], "big", signed=True)
    magic = data[16]
    said = f"the first batch, at position 0, declares length {length}"
    if length < 14:
        said += " (a batch is at least 14 bytes after its offset and length)"
    elif length > len(data) - 12:
        said += f" (only {len(data) - 12} bytes follow)"
    said += f" and magic {magic}"
    if magic > 2:
        said += " (Kafka's are 0, 1 and 2)"
    elif 14 <= length <= len(data) - 12:
        said += f", but {reason}"
    return said


def _show(b: bytes | None) -> str:
    if b is None:
        return "null"
    return b.decode("utf-8", "backslashreplace")


def _index_entries(data: bytes, entry: int) -> list[bytes]:
    n = len(data) // entry
    out = []
    for i in range(n):
        e = data[i * entry:(i + 1) * entry]
        if i > 0 and not any(e):
            break  # the preallocated, never written tail
        out.append(e)
    return out


def _dump_index(path: str, args: argparse.Namespace, *, time_index: bool) -> int:
    """Print an index and check each entry against the batch it names, as Kafka's
    DumpLogSegments does: an offset-index entry must point at the start of a batch whose last
    offset is the entry's offset; a time-index entry's offset must be the last offset of a
    batch whose largest record timestamp is the entry's timestamp, and timestamps must
    increase. With ``--index-sanity-check`` only the file's own structure is checked (what a
    broker checks at startup to decide on a rebuild)."""
    from seglog.storage.records import batch_headers

    data = _read(path)
    base = _base_offset(path)
    size = 12 if time_index else 8
    problems = 0
    out = sys.stdout
    if args.index_sanity_check:
        return _index_sanity_check(path, base, time_index)
    if len(data) % size:
        out.write(f"{path}: the file size {len(data)} is not a multiple of the {size}-byte entry size\n")
        problems += 1
    log_path = path[: -len(".timeindex" if time_index else ".index")] + ".log"
    heads = None
    log_data = b""
    if os.path.exists(log_path):
        try:
            log_data = _read(log_path)
            heads = batch_headers(log_data, allow_truncated=True)
        except SeglogError as exc:
            out.write(f"{path}: cannot check against {log_path}: {exc}\n")
    by_pos = {h.position: h for h in heads} if heads is not None else {}
    last_offsets = [h.last_offset for h in heads] if heads is not None else []
    entries = _index_entries(data, size)
    if not entries:
        out.write(f"{path} is empty.\n")
    prev = None
    for i, e in enumerate(entries):
        if time_index:
            ts, rel = struct.unpack(">qi", e)
            offset = base + rel
            if not args.verify_index_only:
                out.write(f"timestamp: {ts} offset: {offset}\n")
            if prev is not None and (ts <= prev[0] or offset < prev[1]):
                out.write(f"{path}: entry {i} (timestamp {ts}, offset {offset}) does not increase "
                          f"after entry {i - 1} (timestamp {prev[0]}, offset {prev[1]})\n")
                problems += 1
            if heads is not None:
                k = bisect.bisect_left(last_offsets, offset)
                if k == len(heads):
                    out.write(f"{path}: entry {i} (timestamp {ts}, offset {offset}): no batch of "
                              f"{log_path} reaches offset {offset}\n")
                    problems += 1
                elif heads[k].last_offset != offset:
                    out.write(f"{path}: entry {i} (timestamp {ts}, offset {offset}): the batch at "
                              f"position {heads[k].position} holding it ends at offset "
                              f"{heads[k].last_offset}; an entry names a batch's last offset\n")
                    problems += 1
                else:
                    log_ts = _batch_max_timestamp(log_data, heads[k])
                    if log_ts != ts:
                        out.write(f"{path}: entry {i} (timestamp {ts}, offset {offset}): the batch at "
                                  f"position {heads[k].position} has largest timestamp {log_ts}\n")
                        problems += 1
            prev = (ts, offset)
        else:
            rel, pos = struct.unpack(">ii", e)
            offset = base + rel
            if not args.verify_index_only:
                out.write(f"offset: {offset} position: {pos}\n")
            if prev is not None and (offset <= prev[0] or pos <= prev[1]):
                out.write(f"{path}: entry {i} (offset {offset}, position {pos}) does not increase "
                          f"after entry {i - 1} (offset {prev[0]}, position {prev[1]})\n")
                problems += 1
            if heads is not None:
                h = by_pos.get(pos)
                if h is None:
                    out.write(f"{path}: entry {i} (offset {offset}, position {pos}): no batch starts "
                              f"at position {pos} of {log_path}\n")
                    problems += 1
                elif h.last_offset != offset:
                    out.write(f"{path}: entry {i} (offset {offset}, position {pos}): the batch there "
                              f"ends at offset {h.last_offset} (index offset {offset}, log offset "
                              f"{h.last_offset})\n")
                    problems += 1
            prev = (offset, pos)
    if args.verify_index_only and not problems:
        out.write(f"{path}: index matches the log\n")
    return problems


def _batch_max_timestamp(data: bytes, h: Any) -> int:
    """The largest record timestamp of a batch: its header's for v2 (Kafka keeps it there), the
    records' for a legacy entry (a v1 wrapper's own timestamp need not be their maximum)."""
    if h.magic == 2:
        return int(h.max_timestamp)
    from seglog.storage.records import decode_records

    recs = decode_records(data[h.position:h.position + h.size])
    return max((r.timestamp for r in recs), default=-1)


def _index_sanity_check(path: str, base: int, time_index: bool) -> int:
    from seglog._native.index import OffsetIndex, TimeIndex

    cls = TimeIndex if time_index else OffsetIndex
    try:
        index = cls(path, base, writable=False)
    except (SeglogError, ValueError, OSError) as exc:
        sys.stdout.write(f"{path} failed the sanity check: {exc}\n")
        return 1
    try:
        index.sanity_check()
    except (SeglogError, ValueError) as exc:
        sys.stdout.write(f"{path} failed the sanity check: {exc}\n")
        return 1
    finally:
        index.close()
    sys.stdout.write(f"{path} passed sanity check.\n")
    return 0


def _dump_txnindex(path: str) -> int:
    data = _read(path)
    problems = 0
    if len(data) % 34:
        sys.stdout.write(f"the file size {len(data)} is not a multiple of the 34-byte entry size\n")
        problems += 1
    for i in range(len(data) // 34):
        version, pid, first, last, lso = struct.unpack(">hqqqq", data[i * 34:(i + 1) * 34])
        sys.stdout.write(f"version: {version} producerId: {pid} firstOffset: {first} "
                         f"lastOffset: {last} lastStableOffset: {lso}\n")
    return problems


def _dump_snapshot(path: str) -> int:
    from seglog._native.crc32c import crc32c

    data = _read(path)
    if len(data) < 10:
        raise CliError(f"{path}: {len(data)} bytes is too short for a producer snapshot (10 at least)")
    version, crc, count = struct.unpack(">hIi", data[:10])
    actual = crc32c(data[6:])
    if version != 1:
        raise CliError(f"{path}: not a producer snapshot: it declares version {version} "
                       "(Kafka writes version 1)")
    if actual != crc:
        raise CliError(f"{path}: CRC mismatch: stored {crc:08x}, computed {actual:08x}")
    if len(data) != 10 + 46 * count:
        raise CliError(f"{path}: {count} entries need {10 + 46 * count} bytes, the file has {len(data)}")
    for i in range(count):
        pid, epoch, seq, off, delta, ts, coord, txn = struct.unpack(
            ">qhiqiqiq", data[10 + 46 * i:10 + 46 * (i + 1)])
        sys.stdout.write(f"producerId: {pid} producerEpoch: {epoch} coordinatorEpoch: {coord} "
                         f"currentTxnFirstOffset: {txn} lastTimestamp: {ts} "
                         f"firstSequence: {seq - delta} lastSequence: {seq} lastOffset: {off} "
                         f"offsetDelta: {delta}\n")
    return 0


# -------------------------------------------------------------------------------------------------
# Entry point
# -------------------------------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit status 2
        self.exit(2, f"{self.prog}: error: {message}\n")


def _spark_missing() -> str | None:
    """Why Spark cannot run here (one line, with how to get it), or None if it can."""
    import importlib.util
    import shutil

    if importlib.util.find_spec("pyspark") is None:
        return 'pyspark is not installed (pip install "seglog[spark]")'
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime found (install one, e.g. OpenJDK 17, or set JAVA_HOME)"
    return None


def _spark_count(node_dirs: Sequence[str], say: Callable[[str], None]) -> dict[str, int] | None:
    """Each node's log dir read by Spark (``format("seglog")``): records per dir."""
    missing = _spark_missing()
    if missing is not None:
        say(f"  Spark: skipped, {missing}")
        return None
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from seglog.bindings.spark import register

    say("  Spark: starting a local session (local[2]) ...")
    spark = (SparkSession.builder.master("local[2]").appName("seglog-demo")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    try:
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        counts = {}
        for d in node_dirs:
            df = spark.read.format("seglog").option("columns", "offset").load(d)
            counts[d] = df.count()
            say(f"    spark.read.format(\"seglog\").load({os.path.basename(d)!r}).count() = {counts[d]:,}")
        return counts
    finally:
        spark.stop()


def _poll_until(predicate: Callable[[], bool], timeout_s: float, failure: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise CliError(f"{failure} within {timeout_s:.0f} s")
        time.sleep(0.05)


def _cluster_demo(args: argparse.Namespace) -> int:
    """The three-replica story: produce, kill the leader, watch the ISR shrink and the
    election, keep producing, restart the node and watch it rejoin, consume everything, then
    Spark counts every node's segment dirs."""
    from seglog.cluster.local import LocalCluster

    out = sys.stdout

    def say(text: str) -> None:
        out.write(text + "\n")
        out.flush()

    n = 200_000 if args.records is None else args.records
    if n < 1:
        raise CliError(f"--records must be at least 1, got {n}")
    base = args.base
    path = os.path.join(base, "cluster")
    if os.path.exists(path):
        import shutil

        shutil.rmtree(path)
    topic = "orders"
    acked: list[int] = []  # offsets, by record number
    t_start = time.perf_counter()
    with LocalCluster(nodes=3, dir=path) as cluster:
        say(f"seglog demo: three replica nodes in one process (loopback TCP, in-memory coordinator), "
            f"data in {path}")
        cluster.create_topic(topic, partitions=1, replication_factor=3, config={"min.insync.replicas": 2})
        _poll_until(lambda: cluster.leader(topic) is not None, 30, "no leader was elected for the new topic")
        leader = cluster.leader(topic)
        assert leader is not None
        say(f"  topic {topic!r}: replication factor 3, min.insync.replicas=2; leader node {leader}, "
            f"ISR {cluster.isr(topic)}")
        producer = cluster.producer(acks="all", enable_idempotence=True)

        def produce(label: str, start: int, count: int) -> None:
            bar = _Progress(label, count, out)
            chunk = 20_000
            done = 0
            while done < count:
                m = min(chunk, count - done)
                values = [b"order-%09d " % i + b"." * 84 for i in range(start + done, start + done + m)]
                for r in producer.send_batch(topic, values, partition=0):
                    acked.extend(range(r.first_offset, r.last_offset + 1))
                done += m
                bar.update(done)
            t = bar.finish(done)
            say(f"  {label}: {count:,} records acknowledged by the ISR (acks=all) in {t:.2f} s, "
                f"{count / max(t, 1e-9) / 1e6:.2f} M records/s")

        produce("produce", 0, n)
        say(f"  killing the leader, node {leader} (abrupt: sockets closed, nothing flushed)")
        cluster.kill(leader)
        t0 = time.perf_counter()
        shown = ""
        while True:
            st = cluster.state(topic)
            line = f"leader {st.leader if st else '?'}, ISR {list(st.isr) if st else []}"
            if line != shown:
                say(f"    {time.perf_counter() - t0:5.2f} s  {line}")
                shown = line
            if st is not None and st.leader not in (-1, leader) and leader not in st.isr:
                break
            if time.perf_counter() - t0 > 30:
                raise CliError("no new leader was elected within 30 s")
            time.sleep(0.05)
        st = cluster.state(topic)
        assert st is not None
        say(f"  the ISR shrank to {list(st.isr)} and node {st.leader} was elected leader "
            f"(leader epoch {st.leader_epoch}); producing on")
        produce("produce", n, n)
        say(f"  restarting node {leader} from its directory")
        cluster.restart(leader)
        t0 = time.perf_counter()
        _poll_until(lambda: leader in cluster.isr(topic), 60, f"node {leader} did not rejoin the ISR")
        say(f"  node {leader} recovered its log, caught up from the leader and rejoined the ISR in "
            f"{time.perf_counter() - t0:.2f} s: ISR {cluster.isr(topic)}")
        producer.close()

        total = len(acked)
        consumer = cluster.consumer()
        consumer.assign([(topic, 0)])
        bar = _Progress("consume", total, out)
        seen = [-1] * total
        got = dups = stray = 0
        while got < total:
            batch = consumer.poll(2000, max_records=100_000)
            if not batch:
                break
            for r in batch:
                i = int(r.value[6:15]) if r.value else -1
                if not 0 <= i < total:
                    stray += 1
                elif seen[i] >= 0:
                    dups += 1
                else:
                    seen[i] = r.offset
            got += len(batch)
            bar.update(got)
        t_cons = bar.finish(got)
        consumer.close()
        lost = sum(1 for i in range(total) if seen[i] != acked[i])
        say(f"  consumed {got:,} records in {t_cons:.2f} s: {total:,} acknowledged, {lost} lost or "
            f"moved, {dups} duplicated, {stray} unexpected")
        if lost or dups or stray or got != total:
            raise CliError(f"verification failed: {lost} acknowledged records lost, {dups} duplicated, "
                           f"{stray} unexpected")
        say(f"  verified: every acknowledged record is there exactly once, at the offset it was "
            f"acknowledged with ({time.perf_counter() - t_start:.1f} s so far)")
        # Followers learn the final high watermark with their next fetch; wait for it, so that
        # each node's checkpoint (what Spark reads up to) covers everything.
        _poll_until(lambda: sorted(cluster.high_watermarks(topic).values()) == [total] * 3, 30,
                    "the replicas' high watermarks did not all reach the log end")
        node_dirs = [cluster.node_dir(i) for i in cluster.ids]
    # Closed cleanly: every node flushed its logs and checkpointed its high watermark.
    say("  the cluster is shut down; each node's directory is a Kafka log dir:")
    counts = _spark_count(node_dirs, say) if not args.no_spark else None
    if args.no_spark:
        say("  Spark: skipped (--no-spark)")
    if counts is not None:
        bad = {d: c for d, c in counts.items() if c != total}
        if bad:
            raise CliError(f"Spark counted {bad} records, expected {total:,} in every replica")
        say(f"  Spark read {total:,} records from each of the three replicas")
    if _demo_keeps(args):
        say(f"  files kept in {path}: try `seglog describe {node_dirs[0]}`")
    else:
        say(f"  the temporary directory {base} is removed now (--keep keeps it, to look at with "
            "`seglog describe`)")
    return 0


def _demo_keeps(args: argparse.Namespace) -> bool:
    """Whether the demo's data stays once it ends: always in a --dir, in a temporary directory
    only with --keep."""
    return bool(args.dir) or bool(args.keep)


def _remove_tree(path: str) -> None:
    """Remove ``path``; a second Ctrl-C meanwhile does not cut the removal short."""
    import shutil
    import signal
    import threading

    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main_thread else None
    try:
        shutil.rmtree(path, ignore_errors=True)
    finally:
        if main_thread:
            signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)


def _demo_main(args: argparse.Namespace) -> int:
    """Either demo in ``--dir`` or a new temporary directory, removed at the end (also on
    Ctrl-C or an error) unless ``--keep``."""
    if args.single and args.records is None:
        args.records = 1_000_000
    args.base = os.path.abspath(args.dir) if args.dir else tempfile.mkdtemp(prefix="seglog-demo-")
    try:
        return _demo(args) if args.single else _cluster_demo(args)
    except KeyboardInterrupt:
        if _demo_keeps(args):
            args.interrupted = f"interrupted; the data is kept in {args.base}"
        raise
    finally:
        if not _demo_keeps(args):
            _remove_tree(args.base)


def _positive(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _bench(args: argparse.Namespace) -> int:
    """The benchmark suite: seglog beside its peers on the same work, side by side."""
    from pathlib import Path

    from seglog.benchmarks import BENCHMARKS, NOT_YET
    from seglog.benchmarks.runner import Options, SelectionError, estimate_seconds, run, select

    try:
        chosen = select(BENCHMARKS, args.only)
    except SelectionError as exc:
        raise CliError(str(exc)) from None
    if args.list:
        for b in BENCHMARKS:
            goals = "; ".join(g.text for g in b.goals)
            print(f"{b.name:18} {b.title}" + (f"  [goal {goals}]" if goals else ""))
        for name, why in NOT_YET.items():
            print(f"{name:18} not available: {why}")
        return 0
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CliError(f"--out {args.out}: exists and is not a directory")
    opts = Options(quick=args.quick, rounds=args.rounds, records=args.records, work_dir=args.work_dir)
    if args.work_dir is not None and not os.path.isdir(args.work_dir):
        raise CliError(f"--work-dir {args.work_dir}: no such directory")
    est = estimate_seconds(chosen, opts)
    if args.quick:
        mode = "--quick: small sizes, about a minute plus Spark's start-up"
    else:
        sizes = (f"{args.records:,} records where sized in records" if args.records
                 else "10 M records for append/read/poll_columns/Spark")
        mode = (f"full sizes ({sizes}): roughly {max(1, round(est / 60))} min (as measured on a "
                "shared 2-core machine); --quick runs in about a minute")
    sys.stderr.write(f"seglog bench: {len(chosen)} benchmarks, {opts.n_rounds} rounds; {mode}\n")
    argv = ["seglog", *(args.argv or ["bench"])]
    doc = run(chosen, opts, out, argv=argv)
    broken = [b["name"] for b in doc["benchmarks"]
              if b["status"] == "error" or any(c["status"] == "error" for c in b["contenders"])]
    if broken:
        raise CliError(f"{len(broken)} benchmark(s) failed: {', '.join(broken)} (see {out / 'results.json'})")
    return 0
def _node(args: argparse.Namespace) -> int:
    from seglog.cluster.server import run

    overrides: dict[str, str] = {}
    for item in args.override or []:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise CliError(f"--override {item!r}: expected key=value")
        overrides[key.strip()] = value.strip()
    if not os.path.isfile(args.config):
        raise CliError(f"{args.config}: no such file")
    return run(args.config, overrides)


def _serve(args: argparse.Namespace) -> int:
    """``seglog serve``: the store as a one-node Kafka broker until SIGINT/SIGTERM."""
    import asyncio
    import signal

    from seglog.config import BrokerConfig, _parse_properties
    from seglog.errors import ConfigError
    from seglog.kafka.security import is_security_key, listener_options
    from seglog.kafka.server import KafkaServer
    from seglog.store import Store

    config = None
    security: dict[str, str] = {}
    listeners: list[str] = []
    if args.config:
        if not os.path.isfile(args.config):
            raise CliError(f"{args.config}: no such file")
        # Listener security keys (ssl.*, sasl.*, listener.name.*) are the listener's, the rest
        # the store's.
        with open(args.config, "rb") as f:
            raw = f.read()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("iso-8859-1")
        entries = _parse_properties(text, args.config)
        security = {k: v for k, (v, _) in entries.items() if is_security_key(k)}
        rest = {k: v for k, (v, _) in entries.items() if not is_security_key(k)}
        try:
            config = BrokerConfig.from_dict(rest)
        except ConfigError as exc:
            line = entries[exc.key][1] if exc.key in entries else None
            raise CliError(f"{exc.message} (in {args.config}"
                           + (f", line {line})" if line else ")")) from None
        listeners = [v.strip() for v in rest.get("listeners", "").split(",") if v.strip()]
    listen = args.listen
    if listen is None:
        if len(listeners) > 1:
            raise CliError(f"{args.config}: listeners has {len(listeners)} entries; seglog serve "
                           f"serves one (pick it with --listen)")
        listen = listeners[0] if listeners else "127.0.0.1:9092"
    try:
        name, host, port, options = listener_options(listen, security)
    except ConfigError as exc:
        where = f" ({args.config})" if args.config else ""
        raise CliError(f"{'--listen: ' if args.listen else ''}{exc}{where}") from None

    async def run(store: Store) -> None:
        server = KafkaServer(store, host, port, **options)
        await server.start()
        sys.stderr.write(f"seglog serve: serving {store.dir} to Kafka clients on "
                         f"{server.bootstrap_servers} ({options['security_protocol']})\n")
        sys.stderr.flush()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            await server.close()

    with Store.open(args.dir, config) as store:
        asyncio.run(run(store))
    sys.stderr.write("seglog serve: stopped\n")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="seglog", description="An embedded commit log in Apache Kafka's on-disk format.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    demo = sub.add_parser("demo", help="three replicas in one process: produce, kill the leader, "
                          "rejoin, consume with nothing lost, Spark counts the files (--single: "
                          "one store, a million records)")
    demo.add_argument("--dir", help="directory to work in, kept at the end (default: a new temporary "
                      "directory, removed at the end unless --keep)")
    demo.add_argument("--records", type=int, default=None,
                      help="records to produce (default 200,000 per phase; 1,000,000 with --single)")
    demo.add_argument("--keep", action="store_true",
                      help="keep the temporary directory when the demo ends (it says where)")
    demo.add_argument("--no-spark", action="store_true", help="leave out the Spark count")
    demo.add_argument("--single", action="store_true",
                      help="the single-store demo: produce, consume as Arrow columns, verify")
    demo.add_argument("--partitions", type=int, default=3, help="--single: partitions of the topic (default 3)")
    demo.add_argument("--segment-bytes", type=int, default=16 << 20,
                      help="--single: segment.bytes (default 16 MiB)")
    codecs = list(_codecs().values())
    demo.add_argument("--compression", default="none", choices=codecs,
                      help="--single: the producer's compression.type (default none)")
    demo.set_defaults(func=_demo_main)

    node = sub.add_parser("node", help="run one replica node process (Kafka broker keys; ZooKeeper "
                          "coordination); SIGTERM shuts it down cleanly")
    node.add_argument("--config", required=True, help="the node's .properties file (node.id, log.dirs, "
                      "listeners, zookeeper.connect, ...)")
    node.add_argument("--override", action="append", metavar="KEY=VALUE",
                      help="set a property over the file's (repeatable)")
    node.set_defaults(func=_node)

    describe = sub.add_parser("describe", help="topics, partitions, offsets, segments and sizes of a log dir; "
                              "with --bootstrap, each partition's Leader, Replicas and Isr in a running cluster")
    describe.add_argument("dir", nargs="?", help="a store or a Kafka broker's log.dir")
    describe.add_argument("--bootstrap", metavar="HOST:PORT[,HOST:PORT...]",
                          help="describe a running cluster as kafka-topics.sh --describe does")
    describe.add_argument("--timeout", type=float, default=10.0,
                          help="--bootstrap: seconds to wait for a node to answer (default 10)")
    describe.add_argument("--topic", help="only this topic")
    describe.add_argument("--internal", action="store_true", help="include internal topics (__consumer_offsets)")
    describe.set_defaults(func=_describe)

    dump = sub.add_parser("dump", help="print the batches, records and index entries of segment files")
    dump.add_argument("files", nargs="+", metavar="FILE",
                      help=".log, .index, .timeindex, .txnindex, .snapshot or checkpoint files")
    dump.add_argument("--print-data-log", action="store_true", help="print every record too")
    dump.add_argument("--verify-index-only", action="store_true",
                      help="check each index entry against the batch it names in the .log (an "
                           "offset entry: the batch at its position ends at its offset; a time "
                           "entry: the batch ending at its offset has its timestamp) and print "
                           "only problems")
    dump.add_argument("--index-sanity-check", action="store_true",
                      help="check only the index files' own structure, as a broker does at startup")
    dump.add_argument("--max-message-size", type=int, default=5 * 1024 * 1024,
                      help="largest batch to decode (default 5 MiB)")
    dump.set_defaults(func=_dump)

    produce = sub.add_parser("produce", help="append lines (stdin or a file) as records")
    produce.add_argument("dir")
    produce.add_argument("topic")
    produce.add_argument("--file", help="read lines from this file (default: stdin)")
    produce.add_argument("--key-separator", help="split each line into key and value at this string")
    produce.add_argument("--partition", type=int, help="write every record to this partition")
    produce.add_argument("--create", action="store_true", help="create the topic if it is missing")
    produce.add_argument("--partitions", type=int, default=1, help="partitions when creating (default 1)")
    produce.add_argument("--compression", default="none", choices=codecs,
                         help="the producer's compression.type (default none)")
    produce.set_defaults(func=_produce)

    consume = sub.add_parser("consume", help="print records as text or JSON lines")
    consume.add_argument("dir")
    consume.add_argument("topic")
    consume.add_argument("--partition", type=int, help="only this partition")
    consume.add_argument("--offset", type=int,
                         help="start at this offset (negative: that many before the end)")
    consume.add_argument("--timestamp", type=int, help="start at the first record at or after this time (ms)")
    consume.add_argument("--from-beginning", action="store_true",
                         help="start at the log start (the default without --group)")
    consume.add_argument("--group", help="a consumer group: start at its committed offsets, commit at the end")
    consume.add_argument("--max-messages", type=int, help="stop after this many records")
    consume.add_argument("--format", choices=["text", "json"], default="text")
    consume.add_argument("--print-key", action="store_true", help="text format: print key<sep>value")
    consume.add_argument("--key-separator", default="\t", help="separator for --print-key (default TAB)")
    consume.add_argument("--isolation-level", choices=["read_uncommitted", "read_committed"],
                         default="read_uncommitted")
    consume.add_argument("--timeout-ms", type=int, default=0, help="wait this long for new records")
    consume.set_defaults(func=_consume)

    serve = sub.add_parser("serve", help="serve a log dir to Kafka clients over Kafka's protocol (a "
                           "one-node broker); SIGINT/SIGTERM stops it")
    serve.add_argument("dir", help="the store's log dir (created if missing)")
    serve.add_argument("--listen", default=None, metavar="[NAME://]HOST:PORT",
                       help="address to listen on, with a security protocol (PLAINTEXT, SSL, "
                       "SASL_PLAINTEXT, SASL_SSL) or a listener.security.protocol.map name "
                       "(default: the config's listeners, else 127.0.0.1:9092; port 0: any free "
                       "port)")
    serve.add_argument("--config", help="a .properties file of Kafka broker keys (log.segment.bytes, "
                       "num.partitions, socket.request.max.bytes, ...)")
    serve.set_defaults(func=_serve)

    bench = sub.add_parser("bench", help="the benchmark suite: seglog beside its peers, as a table, "
                           "a JSON file and a chart")
    bench.add_argument("--quick", action="store_true", help="small sizes, about a minute (what CI runs)")
    bench.add_argument("--only", nargs="+", metavar="NAME",
                       help="only these benchmarks (names, groups or patterns like 'encode-*'; see --list)")
    bench.add_argument("--out", default="seglog-bench", metavar="DIR",
                       help="directory for results.json and ratios.png (default ./seglog-bench)")
    bench.add_argument("--rounds", type=_positive, help="rounds per benchmark (default 3 quick, 5 full)")
    bench.add_argument("--records", type=_positive,
                       help="records for the benchmarks sized in records (overrides --quick/full sizes)")
    bench.add_argument("--work-dir", help="where the benchmarks write their files (default: the temp dir)")
    bench.add_argument("--list", action="store_true", help="list the benchmarks and their goals, run nothing")
    bench.set_defaults(func=_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(argv) if argv is not None else sys.argv[1:]
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return int(func(args))
    except CliError as exc:
        sys.stderr.write(f"seglog {args.command}: error: {exc}\n")
        return 1
    except BrokenPipeError:  # pragma: no cover - `seglog consume ... | head`
        return 0
    except (SeglogError, OSError, ValueError, TypeError) as exc:
        if isinstance(exc, OSError) and not isinstance(exc, SeglogError) and exc.filename is not None:
            # "x: Not a directory", not "[Errno 20] Not a directory: 'x'".
            sys.stderr.write(f"seglog {args.command}: error: {exc.filename}: {exc.strerror}\n")
        else:
            sys.stderr.write(f"seglog {args.command}: error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write(f"seglog {args.command}: {getattr(args, 'interrupted', 'interrupted')}\n")
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
