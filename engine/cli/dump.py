"""``seglog dump``: the batches, records and index entries of segment files, checked as Kafka's
``kafka-dump-log.sh`` (DumpLogSegments) checks them, and the index sanity check a broker runs at
startup; also transaction indexes, producer snapshots and checkpoint files."""

from __future__ import annotations

import argparse
import bisect
import os
import re
import struct
import sys
from typing import Any

from seglog._native.crc32c import crc32c
from seglog._native.index import OffsetIndex, TimeIndex
from seglog.cli.common import CliError, codec_names, note
from seglog.errors import CorruptRecordError, SeglogError
from seglog.storage.records import batch_headers, decode_records

__all__ = ["run_dump"]


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


def run_dump(args: argparse.Namespace) -> int:
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
                note("dump", f"skipping {path}: not a segment file")
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
        note(
            "dump",
            f"skipping {len(dirs)} director{'y' if len(dirs) == 1 else 'ies'} ("
            f"{', '.join(dirs[:3])}{', ...' if len(dirs) > 3 else ''}): dump reads the files in them",
        )
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
        sys.stdout.write(
            f"not a checkpoint file: byte {exc.start} is not text "
            f"(a checkpoint is UTF-8 lines: version, count, entries)\n"
        )
        return 1
    lines = text.splitlines()
    if text and (len(lines) < 2 or not lines[0].strip().lstrip("-").isdigit() or not lines[1].strip().isdigit()):
        first = lines[0][:40] if lines else ""
        sys.stdout.write(
            f"not a checkpoint file: it starts {first!r}, not with a version line and an entry-count line\n"
        )
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
    codecs = codec_names()
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
            f"isvalid: {str(valid).lower()}\n"
        )
        if args.print_data_log and valid:
            try:
                recs = decode_records(
                    data[h.position : h.position + h.size],
                    include_control=True,
                    max_decompressed=args.max_message_size * 64,
                )
            except (CorruptRecordError, SeglogError, ValueError) as exc:
                out.write(f"| cannot decode the records of the batch at position {h.position}: {exc}\n")
                problems += 1
                continue
            for r in recs:
                line = (
                    f"| offset: {r.offset} {ts_type}: {r.timestamp} "
                    f"keySize: {len(r.key) if r.key is not None else -1} "
                    f"valueSize: {len(r.value) if r.value is not None else -1} "
                    f"sequence: {r.sequence} headerKeys: [{','.join(k for k, _ in r.headers)}]"
                )
                if r.is_control:
                    names: dict[int | None, str] = {0: "ABORT", 1: "COMMIT"}
                    line += f" endTxnMarker: {names.get(r.control_type, r.control_type)}"
                else:
                    line += f" key: {_show(r.key)} payload: {_show(r.value)}"
                out.write(line + "\n")
    if bad_at is not None:
        if bad_at == 0 and not heads:
            out.write(
                f"Not a Kafka log segment: {_first_batch(data, reason)}; none of its "
                f"{len(data)} bytes read as record batches\n"
            )
        else:
            out.write(
                f"Found a corrupt batch at position {bad_at} of {path}: {reason}; "
                f"{len(data) - bad_at} byte(s) from there on cannot be read\n"
            )
        problems += 1
    return problems


def _first_batch(data: bytes, reason: str) -> str:
    """What the first bytes of a file claim as a batch header, in Kafka's terms, and why that
    cannot be a batch."""
    if len(data) < 17:
        return (
            f"the file holds {len(data)} byte(s), fewer than the 17 that start every batch "
            "(offset, length, leader epoch, magic)"
        )
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
        e = data[i * entry : (i + 1) * entry]
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
                out.write(
                    f"{path}: entry {i} (timestamp {ts}, offset {offset}) does not increase "
                    f"after entry {i - 1} (timestamp {prev[0]}, offset {prev[1]})\n"
                )
                problems += 1
            if heads is not None:
                k = bisect.bisect_left(last_offsets, offset)
                if k == len(heads):
                    out.write(
                        f"{path}: entry {i} (timestamp {ts}, offset {offset}): no batch of "
                        f"{log_path} reaches offset {offset}\n"
                    )
                    problems += 1
                elif heads[k].last_offset != offset:
                    out.write(
                        f"{path}: entry {i} (timestamp {ts}, offset {offset}): the batch at "
                        f"position {heads[k].position} holding it ends at offset "
                        f"{heads[k].last_offset}; an entry names a batch's last offset\n"
                    )
                    problems += 1
                else:
                    log_ts = _batch_max_timestamp(log_data, heads[k])
                    if log_ts != ts:
                        out.write(
                            f"{path}: entry {i} (timestamp {ts}, offset {offset}): the batch at "
                            f"position {heads[k].position} has largest timestamp {log_ts}\n"
                        )
                        problems += 1
            prev = (ts, offset)
        else:
            rel, pos = struct.unpack(">ii", e)
            offset = base + rel
            if not args.verify_index_only:
                out.write(f"offset: {offset} position: {pos}\n")
            if prev is not None and (offset <= prev[0] or pos <= prev[1]):
                out.write(
                    f"{path}: entry {i} (offset {offset}, position {pos}) does not increase "
                    f"after entry {i - 1} (offset {prev[0]}, position {prev[1]})\n"
                )
                problems += 1
            if heads is not None:
                h = by_pos.get(pos)
                if h is None:
                    out.write(
                        f"{path}: entry {i} (offset {offset}, position {pos}): no batch starts "
                        f"at position {pos} of {log_path}\n"
                    )
                    problems += 1
                elif h.last_offset != offset:
                    out.write(
                        f"{path}: entry {i} (offset {offset}, position {pos}): the batch there "
                        f"ends at offset {h.last_offset} (index offset {offset}, log offset "
                        f"{h.last_offset})\n"
                    )
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
    recs = decode_records(data[h.position : h.position + h.size])
    return max((r.timestamp for r in recs), default=-1)


def _index_sanity_check(path: str, base: int, time_index: bool) -> int:
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
        version, pid, first, last, lso = struct.unpack(">hqqqq", data[i * 34 : (i + 1) * 34])
        sys.stdout.write(
            f"version: {version} producerId: {pid} firstOffset: {first} lastOffset: {last} lastStableOffset: {lso}\n"
        )
    return problems


def _dump_snapshot(path: str) -> int:
    data = _read(path)
    if len(data) < 10:
        raise CliError(f"{path}: {len(data)} bytes is too short for a producer snapshot (10 at least)")
    version, crc, count = struct.unpack(">hIi", data[:10])
    actual = crc32c(data[6:])
    if version != 1:
        raise CliError(f"{path}: not a producer snapshot: it declares version {version} (Kafka writes version 1)")
    if actual != crc:
        raise CliError(f"{path}: CRC mismatch: stored {crc:08x}, computed {actual:08x}")
    if len(data) != 10 + 46 * count:
        raise CliError(f"{path}: {count} entries need {10 + 46 * count} bytes, the file has {len(data)}")
    for i in range(count):
        pid, epoch, seq, off, delta, ts, coord, txn = struct.unpack(">qhiqiqiq", data[10 + 46 * i : 10 + 46 * (i + 1)])
        sys.stdout.write(
            f"producerId: {pid} producerEpoch: {epoch} coordinatorEpoch: {coord} "
            f"currentTxnFirstOffset: {txn} lastTimestamp: {ts} "
            f"firstSequence: {seq - delta} lastSequence: {seq} lastOffset: {off} "
            f"offsetDelta: {delta}\n"
        )
    return 0
