"""A Kafka log directory and its one owner (Kafka's ``LogManager``, for one ``log.dir``).

A log dir holds partition directories (``<topic>-<partition>``) and the files that cover all of
them::

    <dir>/
      .lock                              POSIX-record-locked by the owner (as a Kafka broker locks it)
      .kafka_cleanshutdown               present only after a clean shutdown
      recovery-point-offset-checkpoint   per partition: offset below which data is fsynced
      log-start-offset-checkpoint        partitions whose log start is past their first segment
      replication-offset-checkpoint      per partition: high watermark
      cleaner-offset-checkpoint          compacted partitions: first offset not yet cleaned
      <topic>-<partition>/               one partition log each (seglog.storage.log.Log)

Exactly one writer at a time. :meth:`LogDir.open` takes the dir for its owner (a
:class:`seglog.Store`, a replica node, a Kafka broker): an exclusive record lock on ``.lock``
(``fcntl`` ``F_SETLK``, what Kafka's ``FileChannel.tryLock`` takes, so seglog and a broker exclude
each other) plus an entry in this process's table (record locks never conflict inside one
process). The owner opens its partitions with ``Log.open(..., owner=log_dir)``, handing each
log the permission to write. A :class:`seglog.Log` opened on its own (``Log.open`` of a partition
directory, the Spark writer's tasks) claims its partition instead, with :func:`claim_partition`:
a *shared* record lock on the parent's ``.lock`` (any number of such logs, in any processes,
may write different partitions of one dir, but no owner may take it meanwhile, and none may
start while an owner holds it) and an exclusive ``flock`` on the partition directory itself
(one writer per partition, in this process or another). A second writer, whatever its entry
point, gets :class:`~seglog.errors.LogDirectoryLockedError`. Read-only opens take no lock and
write nothing.

Fork: a child process does not inherit record locks, so the table is emptied in a forked child
(the inherited descriptors are closed there, which leaves the parent's locks in place).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from seglog.errors import LogDirectoryLockedError, StorageError
from seglog.storage.checkpoints import CorruptCheckpointError, OffsetCheckpointFile, atomic_write, fsync_dir
from seglog.util.closing import Closeable

log = logging.getLogger("seglog.storage.logdir")

LOCK_FILE = ".lock"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
REPLICATION_OFFSET_FILE = "replication-offset-checkpoint"
CLEANER_OFFSET_FILE = "cleaner-offset-checkpoint"

_DELETE_DIR = re.compile(r"^.+-\d+\.[0-9a-f]{32}-delete\Z", re.ASCII)
_LOCKED = (errno.EACCES, errno.EAGAIN, errno.EWOULDBLOCK)


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``topic-N`` → (topic, N), splitting at the last '-' as Kafka does; None otherwise."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not (part.isascii() and part.isdigit()):
        return None
    return topic, int(part)


# -------------------------------------------------------------------------------------------------
# This process's claims on log dirs
# -------------------------------------------------------------------------------------------------


class _Claim:
    """This process's hold on one log dir's ``.lock``: exclusive (an owner) or shared (``count``
    partition writers). One descriptor per dir and process: closing any descriptor of a file
    drops all of the process's record locks on it."""

    __slots__ = ("count", "exclusive", "fd", "holder")

    def __init__(self, fd: int, exclusive: bool, holder: str) -> None:
        self.fd = fd
        self.exclusive = exclusive
        self.count = 1
        self.holder = holder


_CLAIMS: dict[str, _Claim] = {}
_PARTITIONS: dict[str, tuple[str, int]] = {}  # partition dirs this process writes -> (who, flock fd)
_CLAIMS_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    global _CLAIMS_LOCK
    # Another thread may have held the table's lock at the fork.
    _CLAIMS_LOCK = threading.Lock()
    # The child holds none of the parent's record locks; its copies of the partitions' flock
    # descriptors would keep them locked after the parent lets go.
    fds = [claim.fd for claim in _CLAIMS.values()] + [fd for _, fd in _PARTITIONS.values()]
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
    _CLAIMS.clear()
    _PARTITIONS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _claim(directory: str, *, exclusive: bool, holder: str) -> str:
    """Take (or, shared, join) this process's claim on ``directory``; the key to release it."""
    key = os.path.realpath(directory)
    with _CLAIMS_LOCK:
        held = _CLAIMS.get(key)
        if held is not None:
            if exclusive or held.exclusive:
                raise LogDirectoryLockedError(
                    f"the log directory {directory} is already open for writing in this process "
                    f"(by {held.holder}); close that first, or open this one read-only",
                    path=directory,
                )
            held.count += 1
            return key
        path = os.path.join(directory, LOCK_FILE)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise StorageError(
                f"cannot open the lock file {path}: {exc.strerror or exc}; a log "
                "directory that cannot be written can only be opened read-only",
                path=path,
            ) from exc
        try:
            fcntl.lockf(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in _LOCKED:
                raise LogDirectoryLockedError(
                    f"the log directory {directory} is locked by another process (its {LOCK_FILE} "
                    "is held: a store, a replica node, a Log writing one of its partitions, or a "
                    "Kafka broker); open it read-only to read it",
                    path=directory,
                ) from None
            raise
        _CLAIMS[key] = _Claim(fd, exclusive, holder)
        return key


def _release(key: str) -> None:
    with _CLAIMS_LOCK:
        held = _CLAIMS.get(key)
        if held is None:
            return
        held.count -= 1
        if held.count <= 0:
            del _CLAIMS[key]
            os.close(held.fd)


@contextlib.contextmanager
def shared_claim(directory: str | os.PathLike[str], *, holder: str = "a writer") -> Iterator[None]:
    """Hold a shared claim on a log dir for the duration (writers that change files of the dir
    without owning it, e.g. the Spark writer's driver committing high watermarks):
    ``LogDirectoryLockedError`` if an owner holds it."""
    key = _claim(os.path.abspath(os.fspath(directory)), exclusive=False, holder=holder)
    try:
        yield
    finally:
        _release(key)


@contextlib.contextmanager
def checkpoint_update_lock(directory: str | os.PathLike[str]) -> Iterator[None]:
    """Serialise read-modify-writes of a log dir's checkpoint files among the writers sharing
    it (an exclusive ``flock`` on the directory itself, across processes)."""
    fd = os.open(os.fspath(directory), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class PartitionClaim:
    """A writable :class:`seglog.Log`'s claim on its partition when no owner opened it (see
    :func:`claim_partition`); :meth:`release` gives it back."""

    __slots__ = ("_fd", "_key", "_pid", "dir")

    def __init__(self, partition_dir: str, key: str, fd: int) -> None:
        self.dir = partition_dir
        self._key: str | None = key
        self._fd = fd
        self._pid = os.getpid()

    def release(self) -> None:
        if self._key is None:
            return
        key, self._key = self._key, None
        if self._pid != os.getpid():
            return  # a forked child's copy: the parent's locks stay
        with _CLAIMS_LOCK:
            if _PARTITIONS.get(os.path.realpath(self.dir), ("", -1))[1] == self._fd:
                del _PARTITIONS[os.path.realpath(self.dir)]
        try:
            os.close(self._fd)
        finally:
            _release(key)

    def __del__(self) -> None:
        # A Log dropped without close() can write no more: its partition is free again.
        try:
            self.release()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def claim_partition(
    partition_dir: str, *, holder: str = "a Log", wait_s: float | None = 0.0, create: Callable[[], None] | None = None
) -> PartitionClaim:
    """Claim the partition directory ``partition_dir`` (created if missing) for one writer that
    no owner handed it: a shared claim on the parent log dir, then an exclusive ``flock`` on the
    partition directory. ``wait_s`` is how long to wait for another writer of the same partition
    to finish (None: as long as it takes); an owner holding the dir is never waited for.
    ``create`` makes a missing partition directory (once the parent is claimed: a refused
    writer creates nothing there)."""
    partition_dir = os.path.abspath(partition_dir)
    # The log dir the partition really is in: a symlink to a partition (or to a log dir) must
    # not lead around the lock of the dir that holds it.
    parent = os.path.dirname(os.path.realpath(partition_dir))
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as exc:
        raise StorageError(f"cannot create the log directory {parent}: {exc.strerror or exc}", path=parent) from exc
    key = _claim(parent, exclusive=False, holder=holder)
    fd = -1
    try:
        if not os.path.isdir(partition_dir):
            if create is not None:
                create()
            else:
                os.makedirs(partition_dir, exist_ok=True)
                fsync_dir(parent)
        fd = os.open(partition_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        deadline = None if wait_s is None else time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in _LOCKED:
                    raise
            if deadline is not None and time.monotonic() >= deadline:
                with _CLAIMS_LOCK:
                    other = _PARTITIONS.get(os.path.realpath(partition_dir))
                where = f"by {other[0]} in this process" if other else "by another Log (in this process or another)"
                waited = f" (waited {wait_s:g} s)" if wait_s else ""
                raise LogDirectoryLockedError(
                    f"the partition {partition_dir} is open for writing {where}{waited}; one "
                    "partition has one writer at a time: close that one, or open this one read-only",
                    path=partition_dir,
                )
            time.sleep(0.01)
        with _CLAIMS_LOCK:
            _PARTITIONS[os.path.realpath(partition_dir)] = (holder, fd)
        return PartitionClaim(partition_dir, key, fd)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        _release(key)
        raise


# -------------------------------------------------------------------------------------------------
# The owner
# -------------------------------------------------------------------------------------------------


class LogDir(Closeable):
    """One log directory, opened by its owner (writable: locked until :meth:`close`) or read-only
    (no lock, no file written). Create with :meth:`open`."""

    path: str
    read_only: bool
    #: Whether the clean-shutdown marker was there when the dir was opened.
    clean_shutdown: bool
    #: The dir-level checkpoint files (Kafka's names), each for every partition of the dir.
    recovery_points: OffsetCheckpointFile
    log_start_offsets: OffsetCheckpointFile
    high_watermarks: OffsetCheckpointFile
    cleaner_offsets: OffsetCheckpointFile
    _key: str | None  # the lock's key while this owner holds it
    _pid: int  # the process that opened it (a forked child's copy holds no lock)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("use LogDir.open(directory) to open a log directory")

    @classmethod
    def open(
        cls, directory: str | os.PathLike[str], *, read_only: bool = False, create: bool = True, holder: str = "a store"
    ) -> LogDir:
        """Open ``directory`` (created unless ``create=False`` or ``read_only``). A writable open
        takes the dir's lock for ``holder`` (named in the error another opener gets):
        ``LogDirectoryLockedError`` if a store, a node, a partition writer or a Kafka broker holds
        it, in this process or another."""
        self = object.__new__(cls)
        self.path = os.path.abspath(os.fspath(directory))
        self.read_only = read_only
        self._key = None
        self._pid = os.getpid()
        if not os.path.isdir(self.path):
            if read_only or not create:
                raise StorageError(f"log directory not found: {self.path}", path=self.path)
            try:
                os.makedirs(self.path, exist_ok=True)
            except OSError as exc:
                raise StorageError(
                    f"cannot create the log directory {self.path}: {exc.strerror or exc}", path=self.path
                ) from exc
        if not read_only:
            self._key = _claim(self.path, exclusive=True, holder=holder)
        self.recovery_points = OffsetCheckpointFile(os.path.join(self.path, RECOVERY_POINT_FILE))
        self.log_start_offsets = OffsetCheckpointFile(os.path.join(self.path, LOG_START_FILE))
        self.high_watermarks = OffsetCheckpointFile(os.path.join(self.path, REPLICATION_OFFSET_FILE))
        self.cleaner_offsets = OffsetCheckpointFile(os.path.join(self.path, CLEANER_OFFSET_FILE))
        self.clean_shutdown = os.path.exists(self.marker_path)
        return self

    @property
    def marker_path(self) -> str:
        return os.path.join(self.path, CLEAN_SHUTDOWN_FILE)

    @property
    def locked(self) -> bool:
        """True while this owner holds the lock."""
        return self._key is not None

    def holds(self, partition_dir: str) -> bool:
        """Whether ``partition_dir`` is a partition of this dir, opened writable by its owner."""
        return self._key is not None and os.path.dirname(os.path.abspath(partition_dir)) == self.path

    # -- discovery ------------------------------------------------------------------------------

    def partition_dirs(self) -> dict[tuple[str, int], str]:
        """Every ``<topic>-<partition>`` directory, by (topic, partition), in name order."""
        out: dict[tuple[str, int], str] = {}
        for name in sorted(os.listdir(self.path)):
            tp = parse_partition_dir(name)
            if tp is None or tp in out:
                continue
            path = os.path.join(self.path, name)
            if os.path.isdir(path):
                out[tp] = path
        return out

    def partition_path(self, topic: str, partition: int) -> str:
        return os.path.join(self.path, f"{topic}-{partition}")

    def remove_deleted_dirs(self) -> None:
        """Remove what deletions left (``<topic>-<n>.<uuid>-delete`` dirs); nothing read-only."""
        if self.read_only:
            return
        for name in os.listdir(self.path):
            if _DELETE_DIR.match(name):
                shutil.rmtree(os.path.join(self.path, name), ignore_errors=True)

    # -- checkpoints and the marker -------------------------------------------------------------

    @staticmethod
    def read_offsets(f: OffsetCheckpointFile) -> dict[tuple[str, int], int]:
        """A checkpoint's entries; a corrupt file counts as empty (logged): it only costs
        recovery time."""
        try:
            return f.read()
        except CorruptCheckpointError as exc:
            log.warning("%s; treating it as empty", exc)
            return {}

    def remove_clean_shutdown_marker(self) -> None:
        """Once the logs are loaded: the next open must recover unless this owner closes cleanly."""
        self._check_writable()
        try:
            os.unlink(self.marker_path)
        except FileNotFoundError:
            pass

    def write_clean_shutdown_marker(self, content: bytes = b"") -> None:
        self._check_writable()
        atomic_write(self.marker_path, content)

    # -- close ----------------------------------------------------------------------------------

    def _check_writable(self) -> None:
        if self._key is None:
            raise StorageError(f"the log directory {self.path} is not open for writing", path=self.path)

    def close(self) -> None:
        """Release the lock (idempotent)."""
        key, self._key = self._key, None
        if key is not None and self._pid == os.getpid():  # a forked child's copy holds nothing
            _release(key)

    def __repr__(self) -> str:
        return f"LogDir({self.path!r}, {'read-only' if self.read_only else 'locked' if self._key else 'closed'})"


__all__ = [
    "CLEANER_OFFSET_FILE",
    "CLEAN_SHUTDOWN_FILE",
    "LOCK_FILE",
    "LOG_START_FILE",
    "RECOVERY_POINT_FILE",
    "REPLICATION_OFFSET_FILE",
    "LogDir",
    "PartitionClaim",
    "checkpoint_update_lock",
    "claim_partition",
    "parse_partition_dir",
    "shared_claim",
]
