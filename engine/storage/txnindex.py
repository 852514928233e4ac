"""Kafka's transaction index, ``<base>.txnindex``: the aborted transactions whose ABORT marker lies
in a segment (``AbortedTxn`` and ``TransactionIndex``, ``org.apache.kafka.storage.internals.log``;
spec ``docs/kafka-format.md`` §3 and §7.4).

One entry, 34 bytes, big-endian, back to back, no header::

    +0   int16  version            always 0
    +2   int64  producerId
    +10  int64  firstOffset        first offset of the producer's transaction
    +18  int64  lastOffset         offset of the ABORT marker
    +26  int64  lastStableOffset   the partition's LSO once this transaction completed

Entries are in strictly increasing ``lastOffset``. Unlike the offset and time indexes the file is
neither preallocated nor memory-mapped: it is created by the first append and usually absent.

A read-committed fetch of ``[fetch_offset, upper_bound_offset)`` needs every aborted transaction
that overlaps it: :meth:`TransactionIndex.collect_aborted` returns those of one segment and whether
the search may stop there (an entry whose ``lastStableOffset`` reaches the upper bound proves that
no later segment holds a transaction overlapping the range); otherwise the caller goes on with the
next segment (Kafka's ``collectAbortedTxns``).

Durability: appends go to the page cache; :meth:`TransactionIndex.flush` fdatasyncs the file (and
the directory, when the file is new). A crash may leave a torn last entry: readers ignore a partial
trailing entry as Kafka's iterator does, :meth:`TransactionIndex.sanity_check` reports it, and log
recovery rebuilds the index from the markers in the segment.

The file is opened for each operation and never held open, so renaming or deleting it (which the
segment does for its whole file set) leaves no stale descriptor behind. The entries are cached in
memory once read: this object must be the file's only writer. Not thread-safe on its own; the log
calls it under its lock.
"""

from __future__ import annotations

import dataclasses
import os
import struct
from typing import NamedTuple

from seglog.errors import CorruptIndexError, InvalidOffsetError, KafkaStorageError

__all__ = ["ENTRY_SIZE", "VERSION", "AbortedTxn", "TransactionIndex", "TxnIndexSearchResult"]

VERSION = 0
ENTRY_SIZE = 34
_ENTRY = struct.Struct(">hqqqq")
assert _ENTRY.size == ENTRY_SIZE
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


@dataclasses.dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction (Kafka's ``AbortedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def to_bytes(self) -> bytes:
        """The 34-byte entry (version 0)."""
        for name in ("producer_id", "first_offset", "last_offset", "last_stable_offset"):
            v = getattr(self, name)
            if not _INT64_MIN <= v <= _INT64_MAX:
                raise ValueError(f"AbortedTxn.{name} = {v} does not fit an int64")
        return _ENTRY.pack(VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)

    @classmethod
    def from_bytes(cls, buf: bytes | bytearray | memoryview, position: int = 0) -> AbortedTxn:
        """Decode the entry at ``position``; raises ValueError for a version other than 0."""
        version, pid, first, last, lso = _ENTRY.unpack_from(buf, position)
        if version != VERSION:
            raise ValueError(f"unknown aborted transaction version {version} (only {VERSION} exists)")
        return cls(pid, first, last, lso)


class TxnIndexSearchResult(NamedTuple):
    """Kafka's ``TxnIndexSearchResult``: the overlapping aborted transactions found, and whether
    later segments can be skipped."""

    aborted: list[AbortedTxn]
    is_complete: bool


class TransactionIndex:
    """The ``.txnindex`` of the segment based at ``base_offset`` (Kafka's ``TransactionIndex``)."""

    def __init__(self, path: str | os.PathLike[str], base_offset: int) -> None:
        self.path = os.fspath(path)
        self.base_offset = base_offset
        self._entries: list[AbortedTxn] | None = None  # None: not read yet
        self._dirty = False  # written since the last flush
        self._created = False  # created since the last flush (directory entry unsynced)
        self._closed = False

    def __repr__(self) -> str:
        return f"TransactionIndex({self.path!r}, base_offset={self.base_offset})"

    # -- reading ------------------------------------------------------------------------------

    def _read_file(self) -> bytes:
        try:
            with open(self.path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return b""
        except OSError as exc:
            raise KafkaStorageError(f"cannot read transaction index {self.path}: {exc}", path=self.path) from exc

    def _load(self) -> list[AbortedTxn]:
        if self._entries is None:
            data = self._read_file()
            # As Kafka's iterator: a partial trailing entry (a torn append) is not an entry.
            entries = []
            for i in range(len(data) // ENTRY_SIZE):
                try:
                    entries.append(AbortedTxn.from_bytes(data, i * ENTRY_SIZE))
                except ValueError as exc:
                    raise CorruptIndexError(
                        f"transaction index {self.path}: entry {i} at position {i * ENTRY_SIZE}: {exc}",
                        path=self.path,
                        position=i * ENTRY_SIZE,
                    ) from None
            self._entries = entries
        return self._entries

    def all_entries(self) -> list[AbortedTxn]:
        """Every entry, in file order."""
        return list(self._load())

    def __len__(self) -> int:
        return len(self._load())

    @property
    def last_offset(self) -> int | None:
        """The last entry's ``lastOffset`` (None when empty)."""
        entries = self._load()
        return entries[-1].last_offset if entries else None

    @property
    def exists(self) -> bool:
        return os.path.exists(self.path)

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """The aborted transactions overlapping ``[fetch_offset, upper_bound_offset)``: those with
        ``lastOffset >= fetch_offset`` and ``firstOffset < upper_bound_offset``. The search is
        complete at the first entry whose ``lastStableOffset >= upper_bound_offset``: every
        transaction still open when that one completed started at or after the bound."""
        found = []
        for txn in self._load():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def sanity_check(self) -> None:
        """Raise ``CorruptIndexError`` naming the file and the entry if the file is not a whole
        number of version-0 entries, each with ``base_offset <= firstOffset <= lastOffset``
        (the first offset may lie in an earlier segment: only ``lastOffset`` is bounded) and
        ``lastOffset`` strictly increasing. Reads the file itself, not the cache."""
        data = self._read_file()
        n, torn = divmod(len(data), ENTRY_SIZE)
        prev: int | None = None
        for i in range(n):
            pos = i * ENTRY_SIZE
            version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
            where = f"transaction index {self.path}: entry {i} at position {pos}"
            fault = None
            if version != VERSION:
                fault = f"version {version}, expected {VERSION}"
            elif last < self.base_offset:
                fault = f"last offset {last} is below the segment's base offset {self.base_offset}"
            elif first > last:
                fault = f"first offset {first} is after the last offset {last}"
            elif prev is not None and last <= prev:
                fault = f"last offset {last} does not follow the previous entry's {prev}"
            if fault is not None:
                raise CorruptIndexError(f"{where}: {fault}", path=self.path, position=pos)
            prev = last
        if torn:
            raise CorruptIndexError(
                f"transaction index {self.path}: length {len(data)} is not a multiple of the "
                f"{ENTRY_SIZE}-byte entry size: entry {n} at position {n * ENTRY_SIZE} is torn "
                f"({torn} bytes)",
                path=self.path,
                position=n * ENTRY_SIZE,
            )

    # -- writing ------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"transaction index {self.path} is closed", path=self.path)

    def append(self, txn: AbortedTxn) -> None:
        """Append an entry; its ``lastOffset`` must be above the last entry's (Kafka throws
        otherwise) and at or above the segment's base offset. Creates the file if needed."""
        self._check_open()
        entries = self._load()
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise InvalidOffsetError(
                f"cannot append {txn} to transaction index {self.path}: last offsets must increase, "
                f"and {txn.last_offset} is not above the last entry's {entries[-1].last_offset}",
                path=self.path,
                offset=txn.last_offset,
            )
        if txn.last_offset < self.base_offset:
            raise InvalidOffsetError(
                f"cannot append {txn} to transaction index {self.path}: last offset "
                f"{txn.last_offset} is below the segment's base offset {self.base_offset}",
                path=self.path,
                offset=txn.last_offset,
            )
        entry = txn.to_bytes()
        created = not os.path.exists(self.path)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                size = os.fstat(fd).st_size
                if size != len(entries) * ENTRY_SIZE:
                    # Appending after a torn or foreign tail would misalign every later entry.
                    raise CorruptIndexError(
                        f"transaction index {self.path} holds {size} bytes, not the "
                        f"{len(entries)} entries of {ENTRY_SIZE} bytes known; recover the segment",
                        path=self.path,
                        position=size,
                    )
                written = os.pwrite(fd, entry, size)
                if written != ENTRY_SIZE:
                    os.ftruncate(fd, size)
                    raise OSError(f"short write: {written} of {ENTRY_SIZE} bytes")
            finally:
                os.close(fd)
        except CorruptIndexError:
            raise
        except OSError as exc:
            raise KafkaStorageError(f"cannot append to transaction index {self.path}: {exc}", path=self.path) from exc
        entries.append(txn)
        self._dirty = True
        self._created = self._created or created

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with ``lastOffset >= offset`` (the file keeps the rest)."""
        self._check_open()
        entries = self._load()
        keep = next((i for i, t in enumerate(entries) if t.last_offset >= offset), len(entries))
        if keep == len(entries):
            return
        self._cut(keep)

    def reset(self) -> None:
        """Remove every entry (Kafka's ``reset``: the file, if any, is emptied, not deleted)."""
        self._check_open()
        self._entries = []
        if self.exists:
            self._cut(0)

    def _cut(self, entries: int) -> None:
        try:
            os.truncate(self.path, entries * ENTRY_SIZE)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise KafkaStorageError(f"cannot truncate transaction index {self.path}: {exc}", path=self.path) from exc
        if self._entries is not None:
            del self._entries[entries:]
        self._dirty = True

    def flush(self) -> None:
        """Make the appends and truncations so far durable: fdatasync the file, and fsync the
        directory when the file was created since the last flush."""
        if not self._dirty or self._closed:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            self._dirty = self._created = False
            return
        except OSError as exc:
            raise KafkaStorageError(f"cannot open transaction index {self.path}: {exc}", path=self.path) from exc
        try:
            os.fdatasync(fd)
        except OSError as exc:
            raise KafkaStorageError(
                f"fdatasync of transaction index {self.path} failed: {exc}", path=self.path
            ) from exc
        finally:
            os.close(fd)
        if self._created:
            _fsync_dir(os.path.dirname(self.path) or ".")
        self._dirty = self._created = False

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Flush and refuse further writes (reads stay possible). Idempotent."""
        if not self._closed:
            self.flush()
            self._closed = True

    def rename_to(self, path: str | os.PathLike[str]) -> None:
        """Rename the file (if it exists) and follow it (Kafka's ``renameTo``)."""
        path = os.fspath(path)
        if os.path.exists(self.path):
            os.replace(self.path, path)
        self.path = path

    def delete(self) -> bool:
        """Remove the file; True if it existed (Kafka's ``deleteIfExists``)."""
        self._closed = True
        self._entries = []
        self._dirty = self._created = False
        try:
            os.unlink(self.path)
            return True
        except FileNotFoundError:
            return False


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
