"""Kafka's text checkpoint files, written crash-safely (``CheckpointFile``,
``OffsetCheckpointFile``, ``LeaderEpochCheckpointFile``; ``kafka-format.md`` §7.1)::

    <version>\\n
    <entry count>\\n
    <entry>\\n          (count times)

Writes go to ``<name>.tmp``, are fsynced, renamed over the file, and the directory is fsynced,
so a crash leaves either the old or the new file, never a mix. Reading a malformed file raises
``CorruptCheckpointError`` naming the file and line; the caller decides whether to fall back
(Kafka treats a bad recovery-point file as "recover everything").
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping

from seglog.errors import KafkaStorageError, SeglogError


class CorruptCheckpointError(SeglogError):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"corrupt checkpoint file {path}: {message}")
        self.path = path


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data``: tmp file, fsync, rename, fsync of the directory."""
    tmp = path + ".tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        # The old file is still in place; say which file could not be written.
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise KafkaStorageError(f"cannot write checkpoint file {path}: {exc.strerror or exc}",
                                path=path) from exc
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def write_checkpoint(path: str, entries: Iterable[str], version: int = 0) -> None:
    lines = list(entries)
    text = f"{version}\n{len(lines)}\n" + "".join(f"{e}\n" for e in lines)
    atomic_write(path, text.encode("utf-8"))


_INT = re.compile(r"-?[0-9]+", re.ASCII)


def parse_int(text: str) -> int:
    """A decimal integer as Kafka writes one (ASCII digits, optional '-'); ValueError otherwise
    (Python's int() would also take '+1', '1_0', ' 1' and non-ASCII digits)."""
    if not _INT.fullmatch(text):
        raise ValueError(f"not a decimal integer: {text!r}")
    return int(text)


def read_text(path: str, what: str = "file") -> str | None:
    """The UTF-8 text of ``path``; None if it does not exist. Bytes that are not UTF-8 raise
    ``CorruptCheckpointError`` naming the line; other read errors a ``KafkaStorageError``."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise KafkaStorageError(f"cannot read {what} {path}: {exc.strerror or exc}", path=path) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise CorruptCheckpointError(path, f"line {line} is not valid UTF-8 (byte "
                                           f"0x{data[exc.start]:02x} at byte {exc.start})") from None


def read_checkpoint(path: str, version: int = 0) -> list[list[str]] | None:
    """Entries as lists of whitespace-separated fields; None if the file does not exist."""
    text = read_text(path, "checkpoint file")
    if text is None:
        return None
    if text == "":
        return []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise CorruptCheckpointError(path, "missing version or entry count line")
    try:
        got_version = parse_int(lines[0].strip())
    except ValueError:
        raise CorruptCheckpointError(path, f"line 1: bad version {lines[0][:40]!r}") from None
    try:
        count = parse_int(lines[1].strip())
    except ValueError:
        raise CorruptCheckpointError(path, f"line 2: bad entry count {lines[1][:40]!r}") from None
    if got_version != version:
        raise CorruptCheckpointError(path, f"unrecognised version {got_version} (expected {version})")
    body = lines[2:]
    if count < 0 or len(body) != count:
        raise CorruptCheckpointError(path, f"line 2: expected {count} entries, found {len(body)}")
    return [line.split() for line in body]


_dir_locks: dict[str, threading.Lock] = {}
_dir_locks_guard = threading.Lock()


def _lock_for(path: str) -> threading.Lock:
    with _dir_locks_guard:
        return _dir_locks.setdefault(os.path.abspath(path), threading.Lock())


class OffsetCheckpointFile:
    """``topic partition offset`` entries (recovery points, high watermarks, log start offsets)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def read(self) -> dict[tuple[str, int], int]:
        rows = read_checkpoint(self.path)
        out: dict[tuple[str, int], int] = {}
        for i, row in enumerate(rows or []):
            if len(row) != 3:
                raise CorruptCheckpointError(self.path, f"line {i + 3}: entry {i + 1} "
                                             f"{' '.join(row)[:80]!r} is not 'topic partition offset'")
            try:
                out[(row[0], parse_int(row[1]))] = parse_int(row[2])
            except ValueError:
                raise CorruptCheckpointError(self.path, f"line {i + 3}: entry {i + 1} "
                                             f"{' '.join(row)[:80]!r} has a non-integer field") from None
        return out

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        write_checkpoint(self.path, (f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())))

    def update(self, changes: Mapping[tuple[str, int], int | None]
               | Callable[[], Mapping[tuple[str, int], int | None]]) -> None:
        """Read-modify-write under a process-wide lock for this path (None removes an entry).
        ``changes`` may be a function, called under the lock: two threads checkpointing the same
        log then cannot write an older value last. An unreadable existing file is replaced (its
        entries are lost, which is safe for recovery points: those partitions are then
        recovered in full)."""
        with _lock_for(self.path):
            if callable(changes):
                changes = changes()
            try:
                current = self.read()
            except CorruptCheckpointError:
                current = {}
            for key, value in changes.items():
                if value is None:
                    current.pop(key, None)
                else:
                    current[key] = value
            self.write(current)


class LeaderEpochCheckpointFile:
    """``epoch startOffset`` entries, ascending."""

    def __init__(self, path: str) -> None:
        self.path = path

    def read(self) -> list[tuple[int, int]]:
        rows = read_checkpoint(self.path)
        out = []
        for i, row in enumerate(rows or []):
            if len(row) != 2:
                raise CorruptCheckpointError(self.path, f"line {i + 3}: entry {i + 1} is not "
                                             "'epoch startOffset'")
            try:
                out.append((parse_int(row[0]), parse_int(row[1])))
            except ValueError:
                raise CorruptCheckpointError(self.path, f"line {i + 3}: entry {i + 1} has a "
                                             "non-integer field") from None
        return out

    def write(self, entries: Iterable[tuple[int, int]]) -> None:
        write_checkpoint(self.path, (f"{e} {o}" for e, o in entries))
