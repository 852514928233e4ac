"""A replica node's log directories (``log.dirs``, Kafka's JBOD) and the high-watermark
checkpoints in them: the part of Kafka's ``LogManager`` and ``ReplicaManager`` that knows which
dir holds which partition, which dirs are offline, and what goes into each dir's
``replication-offset-checkpoint``. :class:`seglog.cluster.node.ReplicaNode` owns one
:class:`LogDirs` and keeps the role logic (which partitions it serves, what a failed dir means
for them, what the controller is told).

Each dir is laid out as a Kafka broker lays one out, its files covering only the partitions in
it, and is owned through a :class:`seglog.storage.logdir.LogDir` while the node runs::

    <dir>/.lock                            fcntl-locked while the node runs
    <dir>/<topic>-<partition>/...          partition logs (segments, leader-epoch-checkpoint,
                                           producer snapshots)
    <dir>/replication-offset-checkpoint    high watermarks (every
                                           replica.high.watermark.checkpoint.interval.ms)
    <dir>/recovery-point-offset-checkpoint written by the logs, as is log-start-offset-checkpoint
    <dir>/cleaner-offset-checkpoint        compacted replicas: the first offset not yet cleaned
                                           (with the high watermarks, when it changed)
    <dir>/.kafka_cleanshutdown             present only after a clean shutdown

:meth:`LogDirs.open` creates every dir that is missing and locks it (a lock held by another
process is an error), finds every partition directory in every dir (one partition in two dirs is
an error naming both) and reads each dir's high watermarks (a corrupt file counts as empty: those
replicas start their high watermark at the log start). A dir that cannot be read starts offline;
with every dir offline the open fails. A partition new to the node goes to the healthy dir
holding the fewest partitions, ties to the one listed first (Kafka's ``LogManager.nextLogDirs``).

Checkpoint files are written by :class:`seglog.storage.checkpoints.OffsetCheckpointFile`: a
temporary file, fsynced, renamed over the old one, then the directory fsynced, so a crash leaves
the old checkpoint or the new one. A dir's file is rewritten whole from the high watermarks of
its open logs plus the entries read at open for partitions not opened since.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence

from seglog.cluster.metadata import TopicPartition
from seglog.errors import LogDirectoryLockedError, StorageError
from seglog.storage.checkpoints import CorruptCheckpointError, OffsetCheckpointFile
from seglog.storage.log import Log
from seglog.storage.logdir import LOCK_FILE, REPLICATION_OFFSET_FILE, LogDir

log = logging.getLogger("seglog.cluster.node")

HW_CHECKPOINT_FILE = REPLICATION_OFFSET_FILE

#: Per healthy dir: its high-watermark file, the high watermarks to write to it, the open logs
#: whose own checkpoints (recovery point, log start) are written with them, and its cleaner
#: checkpoint file with the entries to write to it (None: unchanged since the last write).
CheckpointValues = dict[
    str,
    tuple[
        OffsetCheckpointFile,
        dict[TopicPartition, int],
        list[Log],
        OffsetCheckpointFile,
        dict[TopicPartition, int] | None,
    ],
]


def resolve_log_dirs(data_dir: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> tuple[str, ...]:
    """The log dirs as absolute paths, in the order given; ``ValueError`` for none, or for one
    directory listed twice (under any name)."""
    raw = [data_dir] if isinstance(data_dir, (str, os.PathLike)) else list(data_dir)
    dirs = tuple(os.path.abspath(os.fspath(d)) for d in raw)
    if not dirs:
        raise ValueError("a node needs at least one log dir")
    real = [os.path.realpath(d) for d in dirs]
    for i, r in enumerate(real):
        if r in real[:i]:
            raise ValueError(
                f"log dir {dirs[i]} is listed twice (as {dirs[real.index(r)]}); "
                "every log dir must be a different directory"
            )
    return dirs


class LogDirs:
    """The log dirs of node ``node_id`` (see module docs). Reusable: :meth:`open` after
    :meth:`close` starts from the disk again."""

    def __init__(self, node_id: int, paths: tuple[str, ...]) -> None:
        self.node_id = node_id
        #: The log dirs, in the order given (``log.dirs``).
        self.paths = paths
        #: Failed or unreadable dirs (offline until the node restarts), with the error.
        self.offline: dict[str, str] = {}
        #: Dirs offline since the open: what they hold is unknown.
        self.unscanned: set[str] = set()
        #: Dirs that were shut down cleanly (or held no partition) when opened.
        self.clean: set[str] = set()
        #: Partitions found at open that no log has been opened for since.
        self.unopened: set[TopicPartition] = set()
        self._home: dict[TopicPartition, str] = {}
        self._held: dict[str, LogDir] = {}
        self._hw_checkpoint: dict[TopicPartition, int] = {}
        self._hw_dir: dict[TopicPartition, str] = {}
        #: The cleaner checkpoints read at open, and what each dir's file last got.
        self._cleaner_checkpoint: dict[TopicPartition, int] = {}
        self._cleaner_written: dict[str, dict[TopicPartition, int] | None] = {}

    # -- open and close ---------------------------------------------------------------------------

    def open(self) -> None:
        """Lock every dir, find its partitions, read its high watermarks, then remove the
        clean-shutdown markers (the logs recover at the next open unless :meth:`close_cleanly`
        writes them again). Raises ``LogDirectoryLockedError`` or ``StorageError`` (no usable
        dir, a partition in two dirs) with every dir unlocked again."""
        self.offline = {}
        self.unscanned = set()
        self.clean = set()
        self._home = {}
        self._hw_checkpoint = {}
        self._hw_dir = {}
        self._cleaner_checkpoint = {}
        self._cleaner_written = {}
        self.unopened = set()
        found: dict[TopicPartition, str] = {}
        markers = []
        try:
            for d in self.paths:
                try:
                    ld = self._lock(d)
                    ld.remove_deleted_dirs()  # what a deletion cut short by a crash left
                    in_dir = ld.partition_dirs()
                except LogDirectoryLockedError:
                    raise
                except OSError as exc:
                    log.error("node %d: log dir %s is offline from the start: %s", self.node_id, d, exc)
                    self.offline[d] = str(exc)
                    self.unscanned.add(d)
                    continue
                for tp, path in in_dir.items():
                    if tp in found:
                        name = os.path.basename(path)
                        raise StorageError(
                            f"partition {name} is in two log dirs: {os.path.join(found[tp], name)} and "
                            f"{path}; delete one of them",
                            path=path,
                        )
                    found[tp] = d
                # A dir with no logs at all lost nothing, whatever ended the last run.
                if ld.clean_shutdown or not in_dir:
                    self.clean.add(d)
                markers.append(ld)
                try:
                    hws = ld.high_watermarks.read()
                except CorruptCheckpointError as exc:
                    log.warning("%s; high watermarks in %s start at the log start", exc, d)
                    hws = {}
                for tp, hw in hws.items():
                    self._hw_checkpoint[tp] = hw
                    self._hw_dir[tp] = d
                try:
                    cleaned = ld.cleaner_offsets.read()
                except CorruptCheckpointError as exc:
                    log.warning("%s; compacted logs in %s are cleaned from their start again", exc, d)
                    self._cleaner_written[d] = None  # rewritten at the next checkpoint
                else:
                    self._cleaner_written[d] = cleaned
                    # An entry for a partition that is not in this dir is a stale one.
                    self._cleaner_checkpoint.update((tp, off) for tp, off in cleaned.items() if found.get(tp) == d)
            if len(self.offline) == len(self.paths):
                raise StorageError(
                    f"node {self.node_id}: no usable log dir: "
                    + "; ".join(f"{d}: {e}" for d, e in self.offline.items()),
                    path=self.paths[0],
                )
        except BaseException:
            self.close()
            raise
        self._home = found
        self.unopened = set(found)
        for ld in markers:
            ld.remove_clean_shutdown_marker()

    def _lock(self, d: str) -> LogDir:
        """Create ``d`` if missing and own it (:class:`seglog.storage.logdir.LogDir`: its ``.lock``
        held, as a Kafka broker holds it) until :meth:`close`."""
        held = self._held.get(d)
        if held is not None:
            return held
        try:
            ld = LogDir.open(d, holder=f"node {self.node_id}")
        except LogDirectoryLockedError as exc:
            if "in this process" in exc.args[0]:
                raise
            raise LogDirectoryLockedError(
                f"log dir {d} is locked by another process (its {LOCK_FILE} is held: another node, a "
                "store, a Log writing one of its partitions, or a Kafka broker runs on it)",
                path=os.path.join(d, LOCK_FILE),
            ) from None
        self._held[d] = ld
        return ld

    def close(self) -> None:
        """Unlock every dir (idempotent)."""
        held, self._held = self._held, {}
        for ld in held.values():
            try:
                ld.close()
            except OSError:
                pass

    def write_clean_shutdown_markers(self, failed: dict[str, BaseException]) -> None:
        """Leave the clean-shutdown marker in every dir that neither failed (offline, or in
        ``failed``: the shutdown's own writes there) nor holds logs an unclean open left
        unrecovered; a marker that cannot be written is added to ``failed``."""
        for d in self.paths:
            if d in self.offline or d in failed:
                continue  # no marker: the logs in it recover at the next start
            if d not in self.clean and any(self._home[tp] == d for tp in self.unopened):
                continue  # after an unclean start, logs this run never opened are still unrecovered
            try:
                self._held[d].write_clean_shutdown_marker(b"")
            except OSError as exc:
                failed[d] = exc

    # -- where partitions live ------------------------------------------------------------------

    @property
    def all_clean(self) -> bool:
        """Every dir was opened and had been shut down cleanly."""
        return not self.offline and len(self.clean) == len(self.paths)

    @property
    def all_failed(self) -> bool:
        """Every dir is offline."""
        return bool(self.offline) and len(self.offline) == len(self.paths)

    def home(self, tp: TopicPartition) -> str | None:
        """The dir holding the partition (None: none yet)."""
        return self._home.get(tp)

    def partitions_in(self, d: str) -> list[TopicPartition]:
        """The partitions whose home is ``d``, sorted."""
        return sorted(tp for tp, home in self._home.items() if home == d)

    def next_dir(self) -> str | None:
        """Where a partition new to this node goes: the healthy dir holding the fewest
        partitions, ties to the first listed (Kafka's ``LogManager.nextLogDirs``)."""
        counts = dict.fromkeys((d for d in self.paths if d not in self.offline), 0)
        if not counts:
            return None
        for d in self._home.values():
            if d in counts:
                counts[d] += 1
        return min(counts, key=lambda d: (counts[d], self.paths.index(d)))

    def place(self, tp: TopicPartition) -> str | None:
        """The partition's dir, choosing one (:meth:`next_dir`) if it has none yet; None when no
        dir is healthy."""
        home = self._home.get(tp)
        if home is None:
            home = self.next_dir()
            if home is not None:
                self._home[tp] = home
        return home

    def owner(self, d: str) -> LogDir:
        """The held :class:`LogDir` of ``d`` (the owner its logs are opened with)."""
        return self._held[d]

    def forget(self, tp: TopicPartition) -> None:
        """The partition's dir was deleted: it has no home, and no checkpoint entry from now on."""
        self._home.pop(tp, None)
        self.unopened.discard(tp)
        self._hw_checkpoint.pop(tp, None)
        self._hw_dir.pop(tp, None)
        self._cleaner_checkpoint.pop(tp, None)

    def opened(self, tp: TopicPartition) -> None:
        """A log was opened for ``tp``: its dir no longer holds it unrecovered."""
        self.unopened.discard(tp)

    def fail(self, d: str, reason: str) -> list[TopicPartition] | None:
        """Take ``d`` offline; the partitions in it, or None if it already was."""
        if d in self.offline:
            return None
        self.offline[d] = reason
        return self.partitions_in(d)

    # -- high-watermark checkpoints -------------------------------------------------------------

    def checkpointed_high_watermark(self, tp: TopicPartition) -> int | None:
        """The partition's high watermark as read at :meth:`open` (None: no entry)."""
        return self._hw_checkpoint.get(tp)

    def checkpointed_cleaner_offset(self, tp: TopicPartition) -> int | None:
        """The partition's cleaner checkpoint (first offset not yet cleaned) as read at
        :meth:`open` from its dir's ``cleaner-offset-checkpoint`` (None: no entry)."""
        return self._cleaner_checkpoint.get(tp)

    def checkpoint_values(self, logs: Iterable[tuple[TopicPartition, Log]]) -> CheckpointValues:
        """Per healthy dir holding open logs: the high watermarks of its partitions (entries
        read at open for partitions not opened since are kept), its open logs, and its cleaner
        checkpoints if they changed (each open log's :attr:`Log.cleaner_offset`, with the
        entries read at open for partitions not opened since)."""
        out: CheckpointValues = {}
        cleaned: dict[str, dict[TopicPartition, int]] = {}
        for tp, lg in logs:
            d = self._home[tp]
            if lg.closed or d in self.offline:
                continue
            if d not in out:
                ld = self._held[d]
                hws = {t: hw for t, hw in self._hw_checkpoint.items() if self._home.get(t, self._hw_dir.get(t)) == d}
                out[d] = (ld.high_watermarks, hws, [], ld.cleaner_offsets, None)
                cleaned[d] = {t: off for t, off in self._cleaner_checkpoint.items() if self._home.get(t) == d}
            out[d][1][tp] = lg.high_watermark
            out[d][2].append(lg)
            if lg.cleaner_offset is None:
                cleaned[d].pop(tp, None)
            else:
                cleaned[d][tp] = lg.cleaner_offset
        for d, entries in cleaned.items():
            if entries != self._cleaner_written.get(d):
                hw_file, hws, logs_, cleaner_file, _ = out[d]
                out[d] = (hw_file, hws, logs_, cleaner_file, entries)
                self._cleaner_written[d] = entries
        return out

    @staticmethod
    def write_checkpoints(values: CheckpointValues) -> dict[str, BaseException]:
        """Write each dir's checkpoint files (the high watermarks, then each open log's recovery
        point and log start); the dirs whose writes failed, with the error. Safe to run on
        another thread than the node's: it reads only ``values``."""
        failed: dict[str, BaseException] = {}
        for d, (hw_file, hws, logs, cleaner_file, cleaned) in values.items():
            try:
                hw_file.write(hws)
                if cleaned is not None:
                    cleaner_file.write(cleaned)
                for lg in logs:
                    if not lg.closed:
                        lg.checkpoint()
            except OSError as exc:
                failed[d] = exc
        return failed


__all__ = ["HW_CHECKPOINT_FILE", "CheckpointValues", "LogDirs", "resolve_log_dirs"]
