"""Kafka's text checkpoint files, written crash-safely (``CheckpointFile``,
``OffsetCheckpointFile``, ``LeaderEpochCheckpointFile``; ``docs/kafka-format.md`` §8.3)::

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
        raise KafkaStorageError(f"cannot write checkpoint file {path}: {exc.strerror or exc}", path=path) from exc
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


def read_file(path: str, cannot_read: Callable[[OSError], Exception]) -> bytes | None:
    """The bytes of ``path``; None if it does not exist. Any other error reading it raises
    ``cannot_read(the OSError)`` (chained to it), so each caller names the file its own way."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise cannot_read(exc) from exc


def read_text(path: str, what: str = "file") -> str | None:
    """The UTF-8 text of ``path``; None if it does not exist. Bytes that are not UTF-8 raise
    ``CorruptCheckpointError`` naming the line; other read errors a ``KafkaStorageError``."""
    data = read_file(
        path, lambda exc: KafkaStorageError(f"cannot read {what} {path}: {exc.strerror or exc}", path=path)
    )
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise CorruptCheckpointError(
            path, f"line {line} is not valid UTF-8 (byte 0x{data[exc.start]:02x} at byte {exc.start})"
        ) from None


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
                raise CorruptCheckpointError(
                    self.path, f"line {i + 3}: entry {i + 1} {' '.join(row)[:80]!r} is not 'topic partition offset'"
                )
            try:
                out[(row[0], parse_int(row[1]))] = parse_int(row[2])
            except ValueError:
                raise CorruptCheckpointError(
                    self.path, f"line {i + 3}: entry {i + 1} {' '.join(row)[:80]!r} has a non-integer field"
                ) from None
        return out

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        write_checkpoint(self.path, (f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())))

    def update(
        self, changes: Mapping[tuple[str, int], int | None] | Callable[[], Mapping[tuple[str, int], int | None]]
    ) -> None:
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
                raise CorruptCheckpointError(self.path, f"line {i + 3}: entry {i + 1} is not 'epoch startOffset'")
            try:
                out.append((parse_int(row[0]), parse_int(row[1])))
            except ValueError:
                raise CorruptCheckpointError(
                    self.path, f"line {i + 3}: entry {i + 1} has a non-integer field"
                ) from None
        return out

    def write(self, entries: Iterable[tuple[int, int]]) -> None:
        write_checkpoint(self.path, (f"{e} {o}" for e, o in entries))


# -------------------------------------------------------------------------------------------------
# meta.properties (Kafka's MetaProperties; a java.util.Properties file)
# -------------------------------------------------------------------------------------------------

META_PROPERTIES_FILE = "meta.properties"
# Kafka writes the file with Properties.store(writer, ""): an empty comment line, a line with
# the date, then key=value lines. Version 0 is ZooKeeper mode (broker.id), 1 is KRaft (node.id).
_META_KEY_ORDER = ("cluster.id", "version", "broker.id", "node.id", "directory.id")


def _properties_unescape(text: str) -> str:
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 == len(text):
            out.append(c)
            i += 1
            continue
        n = text[i + 1]
        if n == "u":
            code = text[i + 2 : i + 6]
            if len(code) != 4 or any(ch not in "0123456789abcdefABCDEF" for ch in code):
                raise ValueError(f"malformed \\uxxxx escape {text[i : i + 6]!r}")
            out.append(chr(int(code, 16)))
            i += 6
            continue
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(n, n))
        i += 2
    return "".join(out)


def _properties_escape(text: str, key: bool) -> str:
    out = []
    for i, c in enumerate(text):
        if c == " " and (key or i == 0):
            out.append("\\ ")
        elif c in "\\=:#!":
            out.append("\\" + c)
        elif c in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[c])
        elif ord(c) < 0x20 or ord(c) > 0x7E:
            out.append("".join("\\u%04X" % u for u in _utf16_units(c)))
        else:
            out.append(c)
    return "".join(out)


def _utf16_units(c: str) -> list[int]:
    data = c.encode("utf-16-be")
    return [int.from_bytes(data[j : j + 2], "big") for j in range(0, len(data), 2)]


def parse_properties(text: str) -> dict[str, str]:
    """A java.util.Properties text (``Properties.load``): ``#``/``!`` comments, ``=``, ``:`` or
    white space between key and value, backslash line continuations and escapes. Raises
    ValueError on a malformed escape."""
    props: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        # A line ending in an odd number of backslashes continues on the next one.
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1:
            line = line[:-1]
            if i < len(lines):
                line += lines[i].lstrip(" \t\f")
                i += 1
            else:
                break
        j = 0
        while j < len(line) and line[j] not in "=: \t\f":
            j += 2 if line[j] == "\\" else 1
        key = line[:j]
        rest = line[j:].lstrip(" \t\f")
        if rest[:1] in ("=", ":") and line[j : j + 1] in (" ", "\t", "\f", "=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        props[_properties_unescape(key)] = _properties_unescape(rest)
    return props


def format_properties(props: Mapping[str, str], *, now: float | None = None) -> bytes:
    """``props`` as ``Properties.store(writer, "")`` writes them: an empty comment, the date
    (``EEE MMM dd HH:mm:ss zzz yyyy``, UTC), then ``key=value`` lines; meta.properties keys in
    the order Kafka's files usually show them."""
    import time

    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(now))
    keys = [k for k in _META_KEY_ORDER if k in props] + sorted(k for k in props if k not in _META_KEY_ORDER)
    lines = ["#", "#" + stamp] + [f"{_properties_escape(k, True)}={_properties_escape(props[k], False)}" for k in keys]
    return ("\n".join(lines) + "\n").encode("utf-8")


def read_meta_properties(path: str) -> dict[str, str] | None:
    """The checked contents of a ``meta.properties`` file, None when there is none. Raises
    ``CorruptCheckpointError`` naming the file when it cannot be read or is not a valid Kafka
    meta.properties: a version other than 0 or 1, a ``broker.id`` (version 0) or ``node.id``
    (version 1, required there with ``cluster.id``) that is not a base-10 int."""
    raw = read_file(path, lambda exc: CorruptCheckpointError(path, f"cannot read it: {exc.strerror or exc}"))
    if raw is None:
        return None
    try:
        # Properties.load reads ISO 8859-1; \uXXXX escapes carry the rest.
        props = parse_properties(raw.decode("latin-1"))
    except ValueError as exc:
        raise CorruptCheckpointError(path, str(exc)) from None
    version = props.get("version", "0").strip()
    if version not in ("0", "1"):
        raise CorruptCheckpointError(
            path, f"unknown meta.properties version {version!r} (Kafka knows 0, ZooKeeper mode, and 1, KRaft)"
        )
    id_key = "broker.id" if version == "0" else "node.id"
    if version == "1":
        for required in ("node.id", "cluster.id"):
            if required not in props:
                raise CorruptCheckpointError(path, f"version 1 requires {required}, which is missing")
    if id_key in props:
        try:
            int(props[id_key].strip())
        except ValueError:
            raise CorruptCheckpointError(path, f"{id_key} {props[id_key]!r} is not a base-10 integer") from None
    return props


def write_meta_properties(path: str, props: Mapping[str, str]) -> None:
    """Write ``props`` crash-safely in Kafka's meta.properties layout."""
    atomic_write(path, format_properties(props))


def ensure_meta_properties(log_dir: str, broker_id: int = -1) -> dict[str, str]:
    """Kafka's ``meta.properties`` for the writable log dir ``log_dir``: an existing file is
    read, checked and kept; a missing one is written as a ZooKeeper-mode broker writes it
    (``version=0``, ``broker.id`` when ``broker_id`` >= 0). No ``cluster.id`` is made up: a
    broker refuses a dir whose cluster id differs from its cluster's, and adds its own to a
    file without one. A ``broker_id`` >= 0 must match the file's id (Kafka refuses to start on
    a dir of another broker); a version-0 file without ``broker.id`` gets it. Returns the
    properties."""
    path = os.path.join(log_dir, META_PROPERTIES_FILE)
    props = read_meta_properties(path)
    if props is None:
        props = {"version": "0"}
        if broker_id >= 0:
            props["broker.id"] = str(broker_id)
        write_meta_properties(path, props)
        return props
    id_key = "broker.id" if props.get("version", "0").strip() == "0" else "node.id"
    if broker_id >= 0:
        if id_key not in props:
            props[id_key] = str(broker_id)
            write_meta_properties(path, props)
        elif int(props[id_key].strip()) != broker_id:
            raise KafkaStorageError(
                f"{path} belongs to broker {props[id_key].strip()} ({id_key}), but this store is "
                f"configured as broker {broker_id} (broker.id/node.id): a log dir serves one broker",
                path=path,
            )
    return props
