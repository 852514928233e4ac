"""Disk faults for a stopped (SIGKILLed) node's data directory, and disk-full on a size-limited
tmpfs (``docs/replication.md`` §9.3 F5-F7).

Power loss (F6). SIGKILL loses nothing on this machine (the page cache is shared), so the loss is
made explicit: a node started with ``SEGLOG_FSYNC_JOURNAL=<file>`` appends every change of each
log's recovery point (the offset below which the log is fsynced) to that file
(:data:`seglog.storage.log.FSYNC_JOURNAL_ENV`). After the kill, :func:`power_loss` cuts every partition's
segments back to that point — or, with ``keep="random"``, to a random byte among the unsynced
ones, since some dirty pages may have reached the disk — empties the cut segment's indexes and
deletes later segments, as in the in-process simulation. Checkpoints, epoch caches and producer
snapshots are written tmp + fsync + rename by the engine, so they survive as they are.

Torn and corrupt writes (F7): :func:`torn_tail` cuts the active segment inside its last 1-3
batches, :func:`garbage_tail` appends junk, :func:`flip_bit` flips one bit inside the last batch
or an older one (past the CRC field, so the batch CRC no longer matches).

Disk full (F5): :class:`Tmpfs` mounts a size-limited tmpfs (root only; :func:`tmpfs_available`
says whether this machine allows it) and :meth:`Tmpfs.fill` takes the remaining space.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import random
import re
import subprocess
import tempfile

from seglog.storage.log import FSYNC_JOURNAL_ENV

__all__ = [
    "FSYNC_JOURNAL_ENV",
    "Tmpfs",
    "batches_in",
    "flip_bit",
    "garbage_tail",
    "partition_dirs",
    "power_loss",
    "read_journal",
    "segments_of",
    "tmpfs_available",
    "torn_tail",
]

_SEGMENT = re.compile(r"^(\d{20})\.log$")
_PARTITION = re.compile(r"^.+-\d+$")
HEADER = 61  # RecordBatch v2 header bytes


@dataclasses.dataclass(frozen=True, slots=True)
class BatchPos:
    base_offset: int
    last_offset: int
    position: int
    size: int


def batches_in(path: str) -> list[BatchPos]:
    """Whole batches of one .log file, by their headers alone (stops at a torn tail)."""
    out = []
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos + HEADER <= len(data):
        length = int.from_bytes(data[pos + 8 : pos + 12], "big")
        size = 12 + length
        if length < HEADER - 12 or pos + size > len(data):
            break
        base = int.from_bytes(data[pos : pos + 8], "big")
        out.append(BatchPos(base, base + int.from_bytes(data[pos + 23 : pos + 27], "big"), pos, size))
        pos += size
    return out


def partition_dirs(data_dir: str) -> list[str]:
    return sorted(
        os.path.join(data_dir, n)
        for n in os.listdir(data_dir)
        if _PARTITION.match(n) and os.path.isdir(os.path.join(data_dir, n))
    )


def segments_of(partition_dir: str) -> list[tuple[int, str]]:
    """(base offset, .log path), ascending."""
    out = []
    for n in os.listdir(partition_dir):
        m = _SEGMENT.match(n)
        if m:
            out.append((int(m.group(1)), os.path.join(partition_dir, n)))
    return sorted(out)


def read_journal(path: str) -> dict[str, int]:
    """Last journaled recovery point per absolute log dir (a torn last line is ignored)."""
    out: dict[str, int] = {}
    if not os.path.exists(path):
        return out
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.endswith("\n"):
                break
            d, _, rp = line.rstrip("\n").partition("\t")
            if rp.isdigit():
                out[d] = int(rp)
    return out


def _checkpointed_recovery_point(partition_dir: str) -> int:
    topic, _, part = os.path.basename(partition_dir).rpartition("-")
    path = os.path.join(os.path.dirname(partition_dir), "recovery-point-offset-checkpoint")
    try:
        with open(path, encoding="utf-8") as f:
            for line in f.read().splitlines()[2:]:
                t, p, o = line.split()
                if t == topic and p == part:
                    return int(o)
    except (OSError, ValueError):
        pass
    return 0


def _drop_segment(log_path: str) -> None:
    prefix = log_path[: -len(".log")]
    for ext in (".log", ".index", ".timeindex", ".txnindex"):
        if os.path.exists(prefix + ext):
            os.unlink(prefix + ext)


def _truncate(path: str, size: int) -> None:
    if os.path.exists(path):
        os.truncate(path, size)


def power_loss(
    data_dir: str, journal: str, rng: random.Random | None = None, keep: str = "durable"
) -> dict[str, dict[str, int]]:
    """Cut every partition of a stopped node's ``data_dir`` back to what was fsynced. Returns per
    partition dir: the recovery point used and the bytes and whole batches lost."""
    if keep not in ("durable", "random"):
        raise ValueError(f"keep must be 'durable' or 'random', got {keep!r}")
    rng = rng or random.Random(0)
    journaled = read_journal(journal)
    report: dict[str, dict[str, int]] = {}
    for d in partition_dirs(data_dir):
        rp = journaled.get(os.path.abspath(d))
        if rp is None:
            rp = _checkpointed_recovery_point(d)
        segs = segments_of(d)
        # (path, durable bytes, written bytes) for each segment past the recovery point
        spans = []
        for k, (base, path) in enumerate(segs):
            next_base = segs[k + 1][0] if k + 1 < len(segs) else None
            if next_base is not None and next_base <= rp:
                continue
            size = os.path.getsize(path)
            durable = 0
            if base < rp:
                durable = size
                for b in batches_in(path):
                    if b.base_offset >= rp:
                        durable = b.position
                        break
            spans.append((path, durable, size))
        lost_bytes = sum(size - durable for _, durable, size in spans)
        lost_batches = 0
        if lost_bytes:
            pick = rng.randint(0, lost_bytes) if keep == "random" else 0
            for k, (path, durable, size) in enumerate(spans):
                if pick <= size - durable:
                    cut = durable + pick
                    lost_batches += sum(1 for b in batches_in(path) if b.position + b.size > cut)
                    os.truncate(path, cut)
                    prefix = path[: -len(".log")]
                    _truncate(prefix + ".index", 0)
                    _truncate(prefix + ".timeindex", 0)
                    for later, _, _ in spans[k + 1 :]:
                        lost_batches += len(batches_in(later))
                        _drop_segment(later)
                    lost_bytes = sum(s - durable for _, durable, s in spans[k:]) - pick
                    break
                pick -= size - durable
        report[d] = {"recovery_point": rp, "lost_bytes": lost_bytes, "lost_batches": lost_batches}
    return report


def _active_segment(partition_dir: str) -> str:
    segs = segments_of(partition_dir)
    if not segs:
        raise FileNotFoundError(f"no segment in {partition_dir}")
    return segs[-1][1]


def torn_tail(partition_dir: str, rng: random.Random, batches: int = 3) -> int:
    """Cut the active segment at a random byte inside its last 1..``batches`` batches; returns
    the new length (the file is left alone when it holds no batch)."""
    path = _active_segment(partition_dir)
    bs = batches_in(path)
    if not bs:
        return os.path.getsize(path)
    first = bs[-min(len(bs), rng.randint(1, batches))]
    cut = rng.randrange(first.position, bs[-1].position + bs[-1].size)
    os.truncate(path, cut)
    return cut


def garbage_tail(partition_dir: str, rng: random.Random, nbytes: int = 100) -> int:
    """Append ``nbytes`` random bytes to the active segment; returns the new length."""
    path = _active_segment(partition_dir)
    with open(path, "ab") as f:
        f.write(rng.randbytes(nbytes))
    return os.path.getsize(path)


def flip_bit(partition_dir: str, rng: random.Random, where: str = "last") -> tuple[str, int, int]:
    """Flip one bit in the payload of the last batch (``"last"``) or of an older one
    (``"older"``, any segment); returns (file, byte position, base offset of that batch)."""
    if where not in ("last", "older"):
        raise ValueError(f"where must be 'last' or 'older', got {where!r}")
    cands: list[tuple[str, BatchPos]] = []
    for _, path in segments_of(partition_dir):
        cands += [(path, b) for b in batches_in(path)]
    if not cands:
        raise FileNotFoundError(f"no batch to damage in {partition_dir}")
    if where == "last" or len(cands) == 1:
        path, b = cands[-1]
    else:
        path, b = rng.choice(cands[:-1])
    # Past the CRC (bytes 17-20): attributes onward are covered by it.
    pos = b.position + rng.randrange(21, b.size)
    with open(path, "r+b") as f:
        f.seek(pos)
        byte = f.read(1)[0]
        f.seek(pos)
        f.write(bytes([byte ^ (1 << rng.randrange(8))]))
    return path, pos, b.base_offset


def tmpfs_available() -> str | None:
    """None when a size-limited tmpfs can be mounted here; else the reason it cannot."""
    probe = tempfile.mkdtemp(prefix="seglog-tmpfs-probe-")
    try:
        r = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", probe], capture_output=True, text=True, timeout=10
        )
        if r.returncode != 0:
            return f"mount -t tmpfs failed: {(r.stderr or r.stdout).strip() or r.returncode}"
        subprocess.run(["umount", probe], capture_output=True, timeout=10)
        return None
    except (OSError, subprocess.SubprocessError) as exc:
        return f"mount -t tmpfs failed: {exc}"
    finally:
        try:
            os.rmdir(probe)
        except OSError:
            pass


class Tmpfs:
    """A size-limited tmpfs mounted on ``path`` (created if needed) until :meth:`close`."""

    def __init__(self, path: str, size: str = "8m") -> None:
        self.path = path
        os.makedirs(path, exist_ok=True)
        r = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path], capture_output=True, text=True, timeout=10
        )
        if r.returncode != 0:
            raise OSError(f"cannot mount a {size} tmpfs on {path}: {(r.stderr or r.stdout).strip()}")
        self.mounted = True
        self._ballast = os.path.join(path, ".ballast")

    def free_bytes(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def fill(self, leave: int = 0) -> int:
        """Take all free space but ``leave`` bytes with a ballast file; returns its size."""
        written = 0
        with open(self._ballast, "ab") as f:
            chunk = b"\0" * 65536
            while True:
                room = self.free_bytes() - leave
                if room <= 0:
                    break
                try:
                    f.write(chunk[: min(len(chunk), room)])
                    f.flush()
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
                written += min(len(chunk), room)
        return written

    def free(self) -> None:
        """Remove the ballast."""
        if os.path.exists(self._ballast):
            os.unlink(self._ballast)

    def close(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", self.path], capture_output=True, timeout=10)
            self.mounted = False

    def __enter__(self) -> Tmpfs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
