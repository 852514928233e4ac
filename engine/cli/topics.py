"""The commands on a log dir's topics: ``seglog describe``, ``seglog produce`` and
``seglog consume``."""

from __future__ import annotations

import argparse
import base64
import errno
import json
import sys
from collections.abc import Sequence
from typing import IO, Any

from seglog.cli.common import CliError, check_log_dir, note
from seglog.errors import LogDirectoryLockedError, StorageError
from seglog.storage.topic import TopicPartition
from seglog.store import Store

__all__ = ["print_describe", "run_consume", "run_describe", "run_produce"]


def _human(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def print_describe(topics: Sequence[Any], out: IO[str]) -> None:
    rows = [("TOPIC", "PARTITION", "LOG-START", "HIGH-WATERMARK", "LOG-END", "RECOVERY-POINT", "SEGMENTS", "SIZE")]
    for t in topics:
        for p in t.partitions:
            rows.append(
                (
                    t.name,
                    str(p.partition),
                    f"{p.log_start_offset:,}",
                    f"{p.high_watermark:,}",
                    f"{p.log_end_offset:,}",
                    f"{p.recovery_point:,}",
                    str(p.segments),
                    _human(p.size_bytes),
                )
            )
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


def run_describe(args: argparse.Namespace) -> int:
    if args.bootstrap:
        if args.dir:
            raise CliError("give a log directory or --bootstrap, not both")
        # lazy: the cluster client loads only for --bootstrap (keeps start-up fast)
        from seglog.cluster.client import ClusterClient, format_describe

        with ClusterClient(args.bootstrap, metadata_timeout_s=args.timeout) as client:
            parts = client.describe_topics([args.topic] if args.topic else None)
            marks = {p.tp: client.watermarks(p.topic, p.partition) for p in parts}
        if args.topic and not parts:
            raise CliError(f"topic {args.topic!r} does not exist in the cluster at {args.bootstrap}")
        sys.stdout.write(format_describe(parts, marks))
        return 0
    if not args.dir:
        raise CliError("give a log directory, or --bootstrap HOST:PORT for a running cluster")
    check_log_dir(args.dir)
    with Store.open(args.dir, read_only=True) as store:
        topics = (
            store.describe(args.topic, internal=args.internal) if args.topic else store.describe(internal=args.internal)
        )
        if not topics:
            sys.stdout.write(f"{args.dir}: no topics\n")
            return 0
        print_describe(topics, sys.stdout)
    return 0


def run_produce(args: argparse.Namespace) -> int:
    check_log_dir(args.dir, create=args.create, create_option="--create")
    source: IO[bytes]
    if args.file and args.file != "-":
        try:
            source = open(args.file, "rb")  # noqa: SIM115 - or stdin; closed after the loop
        except OSError as exc:
            raise CliError(f"{args.file}: {exc.strerror}") from None
    else:
        source = sys.stdin.buffer
    sep = args.key_separator.encode() if args.key_separator is not None else None
    count = 0
    with Store.open(args.dir, create=args.create) as store:
        if args.topic not in store.topics():
            if not args.create:
                raise CliError(f"topic {args.topic!r} does not exist in {args.dir} (use --create to create it)")
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
                note(
                    "consume",
                    f"--offset {args.offset} is past the end: {_holds(tp, begin[tp], end[tp])}; "
                    f"starting at its end, offset {end[tp]}",
                )
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
        note(
            "consume",
            f"group {args.group!r} has no committed offset yet: starting at the end "
            f"({names}), as a new Kafka consumer group does; add --from-beginning to "
            "read from the start",
        )


def run_consume(args: argparse.Namespace) -> int:
    if (args.offset is not None) + (args.timestamp is not None) + bool(args.from_beginning) > 1:
        raise CliError("give at most one of --offset, --timestamp, --from-beginning")
    check_log_dir(args.dir)
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
        raise CliError(
            f"cannot commit the offsets of group {args.group!r}: {exc}; without --group, "
            "consume reads the log dir without writing to it"
        ) from None
    with store:
        if args.topic not in store.topics(internal=True):
            raise CliError(f"topic {args.topic!r} does not exist in {args.dir}")
        n_parts = store.partitions_for(args.topic)
        parts = [args.partition] if args.partition is not None else range(n_parts)
        for p in parts:
            if not 0 <= p < n_parts:
                raise CliError(f"--partition {p}: topic {args.topic!r} has {n_parts} partition(s)")
        consumer = store.consumer(
            group_id=args.group,
            auto_offset_reset="earliest" if args.group is None else "latest",
            isolation_level=args.isolation_level,
            enable_auto_commit=False,
        )
        tps = [TopicPartition(args.topic, p) for p in parts]
        consumer.assign(tps)
        _position(consumer, tps, args)
        shown = 0
        limit = args.max_messages
        while limit is None or shown < limit:
            recs = consumer.poll(
                max_records=10_000 if limit is None else min(10_000, limit - shown), timeout_ms=args.timeout_ms
            )
            if not recs:
                break
            for tp, rs in recs.items():
                for r in rs:
                    if args.format == "json":
                        line = json.dumps(
                            {
                                "topic": tp.topic,
                                "partition": tp.partition,
                                "offset": r.offset,
                                "timestamp": r.timestamp,
                                "key": _text(r.key),
                                "value": _text(r.value),
                                "headers": [[k, _text(v)] for k, v in r.headers],
                            },
                            ensure_ascii=False,
                        )
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
