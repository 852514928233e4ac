"""One partition log: a directory of segments in Kafka's layout. :class:`Log` is Kafka's
``UnifiedLog``, over :mod:`seglog.storage.local_log` (the segments: Kafka's ``LocalLog``) and
:mod:`seglog.storage.log_loader` (opening and recovery: Kafka's ``LogLoader``).

>>> import tempfile, os
>>> from seglog import Log
>>> from seglog.storage.records import encode_batch, decode_records
>>> d = os.path.join(tempfile.mkdtemp(), "orders-0")
>>> log = Log.open(d)
>>> log.append(encode_batch([b"a", b"b"], timestamps=1700000000000)).last_offset
1
>>> [r.value for r in decode_records(log.read(0).to_bytes())]
[b'a', b'b']
>>> log.close()

Durability model. Appends go to the page cache. ``flush()`` (or the ``flush.messages`` /
``flush.ms`` policy) fdatasyncs every segment holding unflushed data and msyncs their indexes;
only then does the *recovery point* move, so it never covers data that could still be lost.
The recovery point is checkpointed in the parent directory's ``recovery-point-offset-checkpoint``
(as a Kafka log dir holds it). On open without a clean-shutdown marker, every segment holding
offsets at or above the checkpointed recovery point is recovered: each batch's structure and
CRC are checked, indexes rebuilt, and the log cut at the first invalid byte (later segments are
deleted), so nothing corrupt is ever served and nothing flushed is ever lost.

Open files. The active segment keeps its files open; older segments open theirs on first use
and a process-wide cache closes the least recently opened idle ones beyond
``open_segment_limit()`` (see ``seglog._native.segment``), so opening a log after a clean
shutdown opens one segment, whatever their number. The open transactions are read from the
segments' headers when first needed (the LSO, a transactional append), not at open.

Offsets. ``log_start_offset <= high_watermark <= log_end_offset``. Consumers read below the high
watermark, followers up to the log end. A log that is not replicated (the default) moves its
high watermark to the log end on every append.

Producers and transactions. The log owns its idempotent producers' state
(:attr:`Log.producer_state`, :mod:`seglog.storage.producer_state`): :meth:`Log.append_as_leader`
checks a client's batches against it, every append updates it, and a replica's log
(``producer_snapshots=True``) snapshots it at each roll and reloads it after a truncation. Its
open transactions and the segments' ``.txnindex`` files are a
:class:`~seglog.storage.log_transactions.LogTransactions`; the segment files' names and the
leftovers of interrupted operations are :mod:`seglog.storage.segment_files`'.

Thread-safety: every public method takes the log's lock; reads return zero-copy views, which
keep the mapped data alive but make truncation of that data wait for (refuse until) release.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NoReturn, TypeVar

from seglog._native.crc32c import crc32c
from seglog._native.fetch import LogCore
from seglog._native.fetch import LogReadResult as LogReadResult  # re-exported: Log.read's result
from seglog._native.segment import (
    ROLL_AGE,
    ROLL_CHECK_WALL_AGE,
    AppendInfo,
    AppendRules,
    Segment,
    log_append_info,
    out_of_files_error,
    segments_first_at_or_after,
)
from seglog._native.segment import LogAppendInfo as LogAppendInfo  # public here
from seglog._native.segment import open_segment_limit as open_segment_limit  # noqa: F401 (public)
from seglog._native.segment import open_segments as open_segments  # noqa: F401 (public)
from seglog.config import LONG_MAX as _LONG_MAX
from seglog.config import LogConfig
from seglog.errors import (
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
)
from seglog.storage.checkpoints import OffsetCheckpointFile, fsync_dir
from seglog.storage.local_log import LocalLog
from seglog.storage.log_loader import RecoverySummary as RecoverySummary
from seglog.storage.log_loader import load_log
from seglog.storage.log_transactions import ATTR_CONTROL, ATTR_TXN_OR_CONTROL
from seglog.storage.logdir import CLEAN_SHUTDOWN_FILE as CLEAN_SHUTDOWN_FILE  # public here too
from seglog.storage.logdir import (
    LOG_START_FILE,
    RECOVERY_POINT_FILE,
    LogDir,
    PartitionClaim,
    checkpoint_update_lock,
    claim_partition,
    parse_partition_dir,
)
from seglog.storage.producer_state import ProducerStateManager, last_sequence
from seglog.storage.records import batch_headers, validate_batches
from seglog.storage.txnindex import AbortedTxn, TransactionIndex
from seglog.util.args import bytes_arg, int_arg, int_value
from seglog.util.clock import Clock, Scheduler
from seglog.util.closing import Closeable

#: Fault injection (opt-in): when set, every change of a log's recovery point (the offset below
#: which its data is fsynced) is appended to this file as ``<log dir>\t<recovery point>`` lines,
#: so a harness can cut the files back to what a power loss would leave after SIGKILLing the
#: process. One short ``O_APPEND`` write per change; never read by seglog.
FSYNC_JOURNAL_ENV = "SEGLOG_FSYNC_JOURNAL"


def _journal_recovery_point(directory: str, recovery_point: int) -> None:
    path = os.environ.get(FSYNC_JOURNAL_ENV)
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{os.path.abspath(directory)}\t{recovery_point}\n".encode())
    finally:
        os.close(fd)


EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3

#: Producer sequences wrap past 2^31-1 to 0.
_SEQUENCE_MOD = 2**31
#: Kafka's AppendOrigin of a leader append (see ``Log.append``).
_ORIGINS = frozenset({"client", "coordinator"})


_F = TypeVar("_F", bound=Callable[..., Any])


def _pauses_cleaning(method: _F) -> _F:
    """A :class:`Log` method that removes segments or closes the log: it first aborts a
    cleaning running on another thread, waits for it to stop, and keeps new ones out until it
    returns. Taken before the log's lock, which the cleaner takes to swap segments in; a nested
    call, or one from the cleaning thread itself, does not wait."""

    @functools.wraps(method)
    def paused(self: Log, *args: Any, **kwargs: Any) -> Any:
        self.pause_cleaning()
        try:
            return method(self, *args, **kwargs)
        finally:
            self.resume_cleaning()

    return paused  # type: ignore[return-value]


class Log(LogCore, Closeable):
    """A partition log directory. Create with :meth:`open`. Its reads (``read``,
    ``offset_for_timestamp``) are :class:`LogCore`'s native methods."""

    _dir_checkpoints: bool
    _claim: PartitionClaim | None  # this log's own claim of its dir, when no LogDir owner holds it

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("use Log.open(dir, config) to open a log")

    # ---------------------------------------------------------------------------------------------
    # Opening (loading: seglog.storage.log_loader)
    # ---------------------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        config: LogConfig | Mapping[str, Any] | None = None,
        *,
        clock: Clock | None = None,
        scheduler: Scheduler | None = None,
        read_only: bool = False,
        replicated: bool = False,
        recovery_point: int | None = None,
        log_start_offset: int | None = None,
        clean_shutdown: bool | None = None,
        high_watermark: int | None = None,
        dir_checkpoints: bool = True,
        owner: LogDir | None = None,
        lock_wait_s: float | None = 0.0,
        producer_snapshots: bool = False,
    ) -> Log:
        """Open (creating if needed) the partition log in ``directory``.

        ``recovery_point``, ``log_start_offset`` and ``clean_shutdown`` come from the caller
        (the store) when it owns the log dir's checkpoint files; when omitted they are read
        from the parent directory the way Kafka lays a log dir out. ``read_only`` opens a
        directory another program owns (a Kafka broker's) without changing any file.
        ``scheduler`` runs the ``flush.ms`` flusher and delayed file deletion; without one, a
        log whose ``flush.ms`` is set runs its flusher on a scheduler of its own (a daemon
        thread, or the ``ManualClock``'s ``advance``), which ``close()`` stops.
        ``dir_checkpoints=False`` leaves the parent directory's checkpoint files alone (neither
        read nor written): the owner of the log dir passes the values in and writes the files
        for all its partitions at once.

        One writer per partition (:mod:`seglog.storage.logdir`): ``owner`` is the
        :class:`~seglog.storage.logdir.LogDir` that holds the parent directory and hands this log the
        right to write (a store, a replica node). Without it a writable open claims the
        partition itself: ``LogDirectoryLockedError`` when an owner holds the parent directory
        (a store, a node, a Kafka broker) or another writable ``Log`` has the partition open,
        in this process or another; ``lock_wait_s`` is how long to wait for such another
        ``Log`` to close (None: until it does). A read-only open takes no lock.

        Producer state (:attr:`producer_state`, :mod:`seglog.storage.producer_state`): every
        append updates it. With ``producer_snapshots`` (a replica's log) it is loaded at open
        from the latest ``.snapshot`` file and the batches after it, written to a snapshot
        file at every roll, and reloaded after a truncation; without (a store's log, whose
        producer ids are never reused), it lives in memory and is rebuilt from the active
        segment's batches before the first idempotent append after the open: a producer that
        outlives the store's restart (a Kafka client retrying a batch whose answer the restart
        lost) is answered as a duplicate, not written twice.
        """
        self = LogCore.__new__(cls)  # no __init__ (it refuses direct construction)
        self._init(os.fspath(directory), config, clock or Clock(), scheduler, read_only, replicated, producer_snapshots)
        self._dir_checkpoints = dir_checkpoints
        self._claim = None
        if not read_only:
            if owner is not None:
                if not owner.holds(self.dir):
                    raise ValueError(
                        f"{owner!r} does not hold {self.dir}: a log dir hands out only "
                        "its own partitions, while it is open for writing"
                    )
            else:
                self._claim = claim_partition(
                    self.dir, holder=f"Log {self.dir}", wait_s=lock_wait_s, create=self._create_dir
                )
        try:
            self._load(recovery_point, log_start_offset, clean_shutdown, high_watermark)
            if producer_snapshots and not read_only:
                self.producer_state.load(self)
            elif not read_only:
                self._producers_from = self.active.base_offset
        except OSError as exc:
            self._release_claim()
            if exc.errno in (errno.EMFILE, errno.ENFILE) and not isinstance(exc, KafkaStorageError):
                raise out_of_files_error(self.dir, exc) from exc
            raise
        except BaseException:
            self._release_claim()
            raise
        return self

    def _create_dir(self) -> None:
        try:
            os.makedirs(self.dir, exist_ok=True)
            fsync_dir(os.path.dirname(self.dir))
        except OSError as exc:
            raise KafkaStorageError(
                f"cannot create the log directory {self.dir}: {exc.strerror or exc}", path=self.dir
            ) from exc

    def _release_claim(self) -> None:
        claim, self._claim = self._claim, None
        if claim is not None:
            claim.release()

    def _init(
        self,
        directory: str,
        config: LogConfig | Mapping[str, Any] | None,
        clock: Clock,
        scheduler: Scheduler | None,
        read_only: bool,
        replicated: bool,
        producer_snapshots: bool = False,
    ) -> None:
        self.config: LogConfig = LogConfig.coerce(config)
        self.dir = os.path.abspath(directory)
        self.clock = clock
        self.scheduler = scheduler
        self.read_only = read_only
        self.replicated = replicated
        self._lock = threading.RLock()
        #: The segment layer (Kafka's ``LocalLog``); ``_segments`` is its list (the same object
        #: for the log's lifetime), read directly on the append and read paths.
        self._local = LocalLog(self.dir, self.config, clock, scheduler, read_only)
        self._segments = self._local.segments
        self._closed = False
        self._flush_task: Any = None
        self._own_scheduler: Scheduler | None = None
        parsed = parse_partition_dir(os.path.basename(self.dir))
        self.topic, self.partition = parsed if parsed else (os.path.basename(self.dir), 0)
        self._tp = (self.topic, self.partition)
        parent = os.path.dirname(self.dir)
        self._recovery_file = OffsetCheckpointFile(os.path.join(parent, RECOVERY_POINT_FILE))
        self._log_start_file = OffsetCheckpointFile(os.path.join(parent, LOG_START_FILE))
        self._unflushed_messages = 0
        self._last_flush_ms = clock.monotonic_ms()
        # The open transactions and the segments' .txnindex files.
        self._txns = self._local.txns
        self._jitter = self._local.roll_jitter  # read by every append's roll check
        #: The native append's rules (AppendRules) for ``_rules_config``, made on the first append.
        self._rules: AppendRules | None = None
        self._rules_config: LogConfig | None = None
        #: For ``_rules_config``: (LogAppendTime, timestamps bounded, before.max.ms, after.max.ms, compacted).
        self._validation: tuple[bool, bool, int, int, bool] = (False, False, 0, 0, False)
        #: Idempotent producers' state (Kafka's ``ProducerStateManager``); see :meth:`open`.
        self.producer_state = ProducerStateManager(
            self.dir if producer_snapshots else None, name=os.path.basename(self.dir)
        )
        #: Without snapshots: the offset from which the producer state is still to be rebuilt
        #: (the active segment's base at the open), None once it was.
        self._producers_from: int | None = None
        #: Compaction's checkpoint: the first offset not yet cleaned (None: from the start). The
        #: cleaner moves it; a truncation below it brings it down to the new end.
        self.cleaner_offset: int | None = None
        # A cleaning may run on another thread than the log's writer (see begin_cleaning).
        self._cleaning_cond = threading.Condition(threading.Lock())
        self._cleaning_thread: int | None = None
        self._cleaning_pauses = 0

    def _load(
        self,
        recovery_point: int | None,
        log_start_offset: int | None,
        clean_shutdown: bool | None,
        high_watermark: int | None,
    ) -> None:
        loaded = load_log(
            self._local,
            compact=self.config.compact,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            clean_shutdown=clean_shutdown,
            high_watermark=high_watermark,
            checkpoints=(self._tp, self._recovery_file, self._log_start_file) if self._dir_checkpoints else None,
            create_dir=self._create_dir,
        )
        self.epoch_cache = loaded.epoch_cache
        self.recovery_summary = loaded.recovery_summary
        self.log_start_offset = loaded.log_start_offset
        self.recovery_point = loaded.recovery_point
        leo = self.log_end_offset
        if self.replicated:
            hw = high_watermark if high_watermark is not None else self.log_start_offset
            self._high_watermark = min(max(hw, self.log_start_offset), leo)
        else:
            self._high_watermark = leo
        if loaded.start_moved_back and not self.read_only:
            # Records written from here on are below the old checkpointed start: record the
            # new start now, or the next open would hide them.
            self.checkpoint()
        if not self.read_only:
            self._schedule_flusher()

    # ---------------------------------------------------------------------------------------------
    # State
    # ---------------------------------------------------------------------------------------------

    @property
    def active(self) -> Segment:
        return self._segments[-1]

    @property
    def segments(self) -> list[Segment]:
        with self._lock:
            return list(self._segments)

    @property
    def log_end_offset(self) -> int:
        if not self._segments:
            return 0
        return self._segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark (replication), clamped to [log start, log end]; returns it."""
        with self._lock:
            hw = min(max(offset, self.log_start_offset), self.log_end_offset)
            self._high_watermark = hw
            return hw

    def maybe_increment_high_watermark(self, offset: int) -> bool:
        """Move the high watermark forward only (never back); True if it moved."""
        with self._lock:
            hw = min(max(offset, self.log_start_offset), self.log_end_offset)
            if hw > self._high_watermark:
                self._high_watermark = hw
                return True
            return False

    @property
    def size(self) -> int:
        with self._lock:
            return sum(s.size for s in self._segments)

    @property
    def unflushed_messages(self) -> int:
        return self._unflushed_messages

    def __repr__(self) -> str:
        return (
            f"Log({self.dir!r}, log_start_offset={self.log_start_offset}, "
            f"high_watermark={self._high_watermark}, log_end_offset={self.log_end_offset}, "
            f"segments={len(self._segments)})"
        )

    # ---------------------------------------------------------------------------------------------
    # Append
    # ---------------------------------------------------------------------------------------------

    def append(
        self,
        batches: Any,
        *,
        assign_offsets: bool = True,
        leader_epoch: int | None = None,
        verify_crc: bool = True,
        origin: str = "client",
        check_producers: bool = False,
    ) -> LogAppendInfo:
        """Append already-encoded RecordBatch v2 bytes (one or more whole batches).

        As leader (``assign_offsets=True``) offsets are assigned from the log end and
        ``leader_epoch`` (default: the cache's latest epoch, if any) is written into every batch;
        with ``message.timestamp.type=LogAppendTime`` the batch timestamps are rewritten as Kafka
        does. As follower (``assign_offsets=False``) the batches keep their offsets and epochs.

        ``origin`` is Kafka's ``AppendOrigin`` of a leader append: ``"client"`` (the default:
        bytes from a producer) validates every batch as Kafka's broker does
        (:func:`seglog.storage.records.validate_batches`: CRC, structure of every record, offset deltas,
        counts, timestamps, producer fields, no control batches); ``"coordinator"`` (transaction
        markers and other batches this process wrote itself) checks structure and CRC only. A
        follower append checks structure and CRC, as Kafka's followers do. ``verify_crc=False``
        (client origin only) is for batches this process encoded and nothing has touched since:
        they skip the CRC and, when compressed and no timestamp bound is configured, the walk
        over their records (see docs/architecture.md).

        Raises ``CorruptRecordError``, ``RecordTooLargeError``, ``RecordListTooLargeError``
        (a batch over ``segment.bytes``), ``InvalidTimestampError`` or ``InvalidRecordError`` before
        anything is written.

        The producer state is updated from the appended batches. ``check_producers`` (a leader's
        append of a client's batches, :meth:`append_as_leader`) checks them against it first;
        without, they are taken as they come (tools, tests, replication, the coordinator).
        """
        if origin not in _ORIGINS:
            raise ValueError(f"origin must be one of {sorted(_ORIGINS)}, got {origin!r}")
        if leader_epoch is not None and type(leader_epoch) is not int:
            int_arg("leader_epoch", leader_epoch)
        if self._closed or self.read_only:
            self._check_writable()
        check = check_producers and assign_offsets
        if type(batches) is bytes:
            # Immutable and exported without a lock on it: no view to make or to give back.
            return self._append(batches, assign_offsets, leader_epoch, verify_crc, origin, check)
        view = bytes_arg("batches", batches)
        try:
            return self._append(view, assign_offsets, leader_epoch, verify_crc, origin, check)
        finally:
            # Give the caller's buffer back before an error propagates: the traceback keeps this
            # frame alive, and with it any view of the buffer (a producer must be able to free
            # the batch it exported here).
            view.release()

    def append_as_leader(
        self, batches: Any, *, leader_epoch: int | None = None, origin: str = "client", verify_crc: bool = True
    ) -> LogAppendInfo:
        """A leader's append (Kafka's ``appendAsLeader``): as :meth:`append` with offsets
        assigned, and for ``origin="client"`` the idempotent producers' checks first (Kafka's
        ``ProducerStateManager``; see :mod:`seglog.storage.producer_state`), under the log's lock
        and after the batches are validated: a batch repeating one of its producer's last five
        answers with the original offsets and ``duplicate=True``, writing nothing (in a request
        of several batches a repeat is ``OutOfOrderSequenceError``); an older producer epoch is
        ``InvalidProducerEpochError``, a sequence gap ``OutOfOrderSequenceError``, and nothing is
        written. ``origin="coordinator"`` (transaction markers) updates the state unchecked."""
        return self.append(
            batches, leader_epoch=leader_epoch, verify_crc=verify_crc, origin=origin, check_producers=origin == "client"
        )

    def append_as_follower(self, batches: Any) -> LogAppendInfo:
        """A follower's append (Kafka's ``appendAsFollower``): the batches keep the leader's
        offsets and epochs; the producer state follows them unchecked."""
        return self.append(batches, assign_offsets=False)

    def validate(self, batches: Any, *, verify_crc: bool = True) -> list[Any]:
        """Validate a producer's batches as ``append`` does (origin ``"client"``) without
        writing them; returns their headers. For a producer's retry that turns out to be a
        duplicate: Kafka validates a batch before it looks at its sequence."""
        view = bytes_arg("batches", batches)
        try:
            return self._validate_client(view, self.clock.time_ms(), verify_crc)
        finally:
            view.release()

    def _validate_client(self, view: bytes | memoryview, now: int, verify_crc: bool) -> list[Any]:
        cfg = self.config
        rules = self._rules
        if rules is None or self._rules_config is not cfg:
            rules = self._append_rules(cfg)
        log_append, bounded, before, after, compact = self._validation
        return validate_batches(
            view,
            rules.where,
            now=now,
            log_append_time=log_append,
            before_max_ms=before,
            after_max_ms=after,
            compacted=compact,
            verify_crc=verify_crc,
            walk_compressed=verify_crc or bounded,
            max_batch_size=rules.max_message_bytes + 12,
        )

    def _append(
        self,
        view: bytes | memoryview,
        assign_offsets: bool,
        leader_epoch: int | None,
        verify_crc: bool,
        origin: str,
        check_producers: bool,
    ) -> LogAppendInfo:
        cfg = self.config
        rules = self._rules
        if rules is None or self._rules_config is not cfg:
            rules = self._append_rules(cfg)
        log_append, bounded = self._validation[:2]
        # The clock is read only where the time matters: LogAppendTime, or timestamp bounds to
        # check (without either, validation never looks at it).
        now = self.clock.time_ms() if log_append or bounded else 0
        if assign_offsets and origin == "client":
            heads = self._validate_client(view, now, verify_crc)
        else:
            heads = batch_headers(view, verify_crc=verify_crc)
        if not heads:
            raise InvalidRecordError(f"nothing to append to {rules.where}: the buffer holds no batch")
        # The per-batch rules (segment.bytes, magic, max.message.bytes, contiguous offsets) and
        # Kafka's shouldRoll are the native append's (AppendRules), before it writes anything.
        if len(heads) == 1:
            h = heads[0]
            txn_or_control = bool(h.attributes & ATTR_TXN_OR_CONTROL)
            producers = h.producer_id >= 0
        else:
            txn_or_control = any(h.attributes & ATTR_TXN_OR_CONTROL for h in heads)
            producers = any(h.producer_id >= 0 for h in heads)
        if assign_offsets and log_append:
            view = memoryview(_with_log_append_time(view, heads, now))
        with self._lock:
            if self._closed or self.read_only:
                self._check_writable()
            cache = self.epoch_cache
            latest = cache.latest_epoch
            epoch = leader_epoch if leader_epoch is not None else latest
            if assign_offsets and epoch >= 0 and epoch < latest:
                raise InvalidRecordError(f"leader epoch {epoch} is older than the log's latest epoch {latest}")
            if producers and check_producers:
                dup = self._check_producers(heads)
                if dup is not None:
                    return dup
            seg = self._segments[-1]
            log_end = seg.next_offset
            first_new = heads[0].base_offset if not assign_offsets else log_end
            if not assign_offsets and first_new < log_end:
                raise InvalidRecordError(
                    f"out-of-order follower append to {self.dir}: batch starts at offset {first_new}, "
                    f"the log ends at {log_end}",
                    offset=first_new,
                )
            if txn_or_control:
                self._txns.ongoing()  # the open transactions before this append, read if not yet
            assign_from = first_new if assign_offsets else -1
            epoch_out = epoch if assign_offsets else -1
            # Positional: (buffer, assign_from, leader_epoch, verify_crc, rules, roll jitter).
            info = seg.append(view, assign_from, epoch_out, False, rules, self._jitter.get(seg.base_offset, 0))
            if isinstance(info, str):
                info = self._append_rolled(seg, info, view, first_new, assign_from, epoch_out)
            if txn_or_control:
                self._txns.track(self._segments[-1], view, heads, info.first_offset if assign_offsets else -1)
            if producers:
                self._update_producers(heads, info.first_offset if assign_offsets else -1)
            if assign_offsets:
                # The cache changes only for a new epoch (or one starting past its latest entry).
                if epoch >= 0 and not cache.holds_start(epoch, info.first_offset):
                    cache.assign(epoch, info.first_offset)
            else:
                # Follower: epochs come from the batches themselves.
                for h in heads:
                    if h.partition_leader_epoch > cache.latest_epoch:
                        cache.assign(h.partition_leader_epoch, h.base_offset)
            if not self.replicated:
                self._high_watermark = info.last_offset + 1
            self._unflushed_messages += info.records
            if self._unflushed_messages >= cfg.flush_messages:
                self.flush()
            return log_append_info(info, now if log_append else -1, self.log_start_offset)

    def _append_rules(self, cfg: LogConfig) -> AppendRules:
        """The native append's rules and the client validation's settings for ``cfg`` (made
        again when the config is replaced: a LogConfig is immutable)."""
        log_append = cfg.message_timestamp_type == "LogAppendTime"
        before, after = cfg.message_timestamp_before_max_ms, cfg.message_timestamp_after_max_ms
        self._validation = (
            log_append,
            not log_append and (before < _LONG_MAX or after < _LONG_MAX),
            before,
            after,
            cfg.compact,
        )
        self._rules = AppendRules(
            f"{self.topic}-{self.partition}", self.dir, cfg.max_message_bytes, cfg.segment_bytes, cfg.max_segment_ms
        )
        self._rules_config = cfg
        return self._rules

    def _append_rolled(
        self, seg: Segment, reason: str, view: bytes | memoryview, first: int, assign_from: int, epoch: int
    ) -> AppendInfo:
        """The append after the active segment's ``Segment.append`` answered that the log must
        roll first (``reason``): Kafka's wall-clock age rule decided here, the roll, the append."""
        if reason == ROLL_CHECK_WALL_AGE:
            # Kafka's timeWaitedForRoll without a batch timestamp: time since the creation.
            waited = self.clock.time_ms() - self._local.created_ms(seg)
            if waited <= self.config.max_segment_ms - self._jitter.get(seg.base_offset, 0):
                return seg.append(view, assign_from, epoch, False)
            reason = ROLL_AGE
        seg = self._roll(first, reason)
        return seg.append(view, assign_from, epoch, False)

    def _check_producers(self, heads: Sequence[Any]) -> LogAppendInfo | None:
        """A client's batches against the producer state (before anything is written): the
        original append's info if the one batch repeats a recent one, else None; raises
        ``InvalidProducerEpochError`` or ``OutOfOrderSequenceError``. In a request of several
        batches, each of a producer's batches must continue the one before it."""
        ps = self.producer_state
        if self._producers_from is not None:
            # The first idempotent append since the open (a log without snapshots): the state
            # from the active segment on, as it was at the open, and every append since.
            ps.rebuild(self, self._producers_from)
            self._producers_from = None
        if len(heads) == 1:
            # The common case (a producer's one batch), without the bookkeeping of several.
            h = heads[0]
            first_seq = h.base_sequence
            if h.producer_id < 0 or first_seq < 0:
                return None
            dup = ps.check(
                h.producer_id, h.producer_epoch, first_seq, (first_seq + h.last_offset - h.base_offset) % _SEQUENCE_MOD
            )
            if dup is None:
                return None
            return LogAppendInfo(
                dup.first_offset, dup.last_offset, dup.timestamp, -1, -1, 0, 0, 0, self.log_start_offset, True
            )
        seen: dict[int, tuple[int, int]] = {}
        for i, h in enumerate(heads):
            pid = h.producer_id
            if pid < 0 or h.base_sequence < 0:
                continue
            last_seq = last_sequence(h.base_sequence, h.last_offset - h.base_offset + 1)
            if pid in seen:
                epoch, prev_last = seen[pid]
                if h.producer_epoch != epoch or h.base_sequence != (prev_last + 1) % _SEQUENCE_MOD:
                    raise OutOfOrderSequenceError(
                        f"producer {pid}: batch {i} of the request does not continue the sequence of the previous one"
                    )
            else:
                if ps.check(pid, h.producer_epoch, h.base_sequence, last_seq) is not None:
                    raise OutOfOrderSequenceError(
                        f"producer {pid}: batch {i} repeats an earlier batch inside a multi-batch request"
                    )
            seen[pid] = (h.producer_epoch, last_seq)
        return None

    def _update_producers(self, heads: Sequence[Any], assign_from: int) -> None:
        """After an append: every data batch of a producer into the producer state, at the
        offsets it was written at (``assign_from``: the first assigned offset; -1: the batches'
        own)."""
        ps = self.producer_state
        cursor = assign_from
        for h in heads:
            span = h.last_offset - h.base_offset
            base = h.base_offset if assign_from < 0 else cursor
            if h.producer_id >= 0 and not h.attributes & ATTR_CONTROL:
                first_seq = h.base_sequence
                ps.update(
                    h.producer_id,
                    h.producer_epoch,
                    first_seq,
                    (first_seq + span) % _SEQUENCE_MOD if first_seq >= 0 else -1,
                    base,
                    base + span,
                    h.max_timestamp,
                )
            cursor = base + span + 1
        ps.map_end_offset = self._segments[-1].next_offset

    def _check_writable(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"log {self.dir} is closed")
        if self.read_only:
            raise KafkaStorageError(f"log {self.dir} is open read-only")

    def roll(self) -> Segment:
        """Start a new active segment at the log end (Kafka's ``roll``)."""
        with self._lock:
            self._check_writable()
            return self._roll(self.log_end_offset, "requested")

    def _roll(self, base: int, reason: str) -> Segment:
        old = self._segments[-1]
        seg = self._local.roll(base, reason)
        if seg is not old and self.producer_state.dir is not None:
            # Kafka's roll: the producer state as of the new segment's base offset.
            self.producer_state.take_snapshot(base)
        return seg

    # ---------------------------------------------------------------------------------------------
    # Flush
    # ---------------------------------------------------------------------------------------------

    def flush(self, up_to: int | None = None) -> None:
        """fdatasync every segment holding offsets in [recovery point, ``up_to``) (default: the
        log end), msync their indexes, then move the recovery point to ``up_to``."""
        with self._lock:
            if self._closed or self.read_only:
                return
            target = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
            if target <= self.recovery_point and self._unflushed_messages == 0:
                return
            self._local.flush(self.recovery_point)
            if target > self.recovery_point:
                self.recovery_point = target
                _journal_recovery_point(self.dir, target)
            if target >= self.log_end_offset:
                self._unflushed_messages = 0
            self._last_flush_ms = self.clock.monotonic_ms()

    def _schedule_flusher(self) -> None:
        if self.config.flush_ms >= 2**62:
            return
        period = max(1, min(self.config.flush_ms, 1000))
        sched = self.scheduler
        if sched is None:
            # A standalone log keeps its flush.ms itself, on a scheduler of its own (a daemon
            # thread; on a ManualClock the clock's advance runs it), stopped by close().
            sched = self._own_scheduler = Scheduler(self.clock, name=f"seglog-flush-{self.topic}-{self.partition}")
        self._flush_task = sched.schedule(
            f"flush {self.dir}", self.maybe_flush_by_time, delay_ms=period, period_ms=period
        )

    def _stop_flusher(self) -> None:
        sched = self.scheduler or self._own_scheduler
        if self._flush_task is not None and sched is not None:
            sched.cancel(self._flush_task)
            self._flush_task = None
        if self._own_scheduler is not None:
            # Not joined: its thread may be waiting for this log's lock, which the caller holds;
            # it finds the log closed and ends.
            self._own_scheduler.shutdown(wait=False)
            self._own_scheduler = None

    def maybe_flush_by_time(self) -> bool:
        """Flush if ``flush.ms`` has passed since the last flush and data is unflushed."""
        with self._lock:
            if self._closed or self._unflushed_messages == 0:
                return False
            if self.clock.monotonic_ms() - self._last_flush_ms >= self.config.flush_ms:
                self.flush()
                return True
            return False

    def checkpoint(self) -> None:
        """Write this log's recovery point and log start offset to the log dir's checkpoints
        (nothing when opened with ``dir_checkpoints=False``)."""
        if self.read_only or not self._dir_checkpoints:
            return
        # Values read under the file's lock: a checkpoint written from another thread (a
        # cluster's checkpoint worker) never lands after a newer one with older values.
        if self._claim is None:
            self._update_checkpoints()
        else:
            # Logs writing other partitions of the dir, maybe in other processes, update the
            # same files.
            with checkpoint_update_lock(os.path.dirname(self.dir)):
                self._update_checkpoints()

    def _update_checkpoints(self) -> None:
        self._recovery_file.update(lambda: {self._tp: self.recovery_point})
        self._log_start_file.update(
            lambda: {self._tp: self.log_start_offset if self.log_start_offset > self._segments[0].base_offset else None}
        )

    # ---------------------------------------------------------------------------------------------
    # Reads
    # ---------------------------------------------------------------------------------------------

    # ``read`` and ``offset_for_timestamp`` are LogCore's native methods (seglog._native.fetch);
    # what they hand back to Python is below: arguments that are not plain ints and strs,
    # failures, and the special timestamps.

    def _read_checked(self, offset: Any, max_bytes: Any, upper_bound: Any, min_one_batch: bool) -> LogReadResult:
        """``read`` with arguments that are not plain ``int``/``str``: a TypeError naming the
        wrong one, or the read with them as ints (NumPy's integers, say)."""
        offset = int_value("offset", offset)
        max_bytes = int_value("max_bytes", max_bytes)
        if type(upper_bound) is not str:
            upper_bound = int_value("upper_bound", upper_bound)
        return self.read(offset, max_bytes, upper_bound=upper_bound, min_one_batch=min_one_batch)

    def _read_out_of_range(self, offset: int) -> NoReturn:
        """``read``'s failure for an offset outside the log (called holding the lock)."""
        raise OffsetOutOfRangeError(
            f"offset {offset} is out of range for {self.dir}: the log holds [{self.log_start_offset}, {self.log_end_offset})",
            offset=offset,
        )

    def _offset_for_timestamp_special(self, timestamp: Any, upper_bound: Any) -> tuple[int, int] | None:
        """``offset_for_timestamp`` for what is not a plain search: the special timestamps
        (``-1``, ``-2``, ``-3``), arguments that are not plain ints, bad ones."""
        timestamp = int_value("timestamp", timestamp)
        if upper_bound is not None:
            upper_bound = int_value("upper_bound", upper_bound)
        lock = self._lock
        lock.acquire()
        try:
            hw = self._high_watermark if upper_bound is None else upper_bound
            if timestamp >= 0:
                return segments_first_at_or_after(self._segments, timestamp, self.log_start_offset, hw)
            if timestamp == EARLIEST_TIMESTAMP:
                return self.log_start_offset, -1
            if timestamp == LATEST_TIMESTAMP:
                return hw, -1
            if timestamp == MAX_TIMESTAMP:
                latest = self._local.max_timestamp_record(self.log_start_offset)
                # As Kafka's ListOffsets: an answer at or above the bound is not served.
                return latest if latest is not None and latest[0] < hw else None
            raise ValueError(f"invalid timestamp {timestamp}: use >= 0, or -1/-2/-3")
        finally:
            lock.release()

    def batches(self) -> Iterator[Any]:
        """BatchInfo of every batch, oldest first (headers only)."""
        for seg in self.segments:
            yield from seg.batches()

    # ---------------------------------------------------------------------------------------------
    # Transactions (Kafka's ProducerStateManager ongoing transactions + TransactionIndex)
    # ---------------------------------------------------------------------------------------------

    @property
    def last_stable_offset(self) -> int:
        """The LSO: the first offset of the oldest open transaction, capped by the high
        watermark. Read-committed consumers read below it."""
        with self._lock:
            first = min(self._txns.ongoing().values(), default=self._high_watermark)
            return min(first, self._high_watermark)

    @property
    def ongoing_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction."""
        with self._lock:
            return dict(self._txns.ongoing())

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[start_offset, upper_bound_offset)``, from the
        txn index of the segment holding ``start_offset`` and of later segments until one
        proves the search complete (Kafka's ``LocalLog.collectAbortedTransactions``). A
        read-committed reader drops the records of these producers from each transaction's first
        offset up to its marker."""
        with self._lock:
            return self._txns.collect_aborted(start_offset, upper_bound_offset)

    def transaction_index(self, segment: Segment) -> TransactionIndex:
        """The ``.txnindex`` of one of this log's segments."""
        with self._lock:
            return self._txns.index(segment)

    # ---------------------------------------------------------------------------------------------
    # A cleaning on another thread (Kafka's LogCleanerManager: abortAndPauseCleaning)
    # ---------------------------------------------------------------------------------------------

    def begin_cleaning(self) -> bool:
        """Claim the log for one cleaning on the calling thread; False if it is closed, being
        cleaned, or paused by a truncation, deletion or close under way. A cleaning reads the
        inactive segments without the log's lock and checks :attr:`cleaning_aborted` as it
        goes; every method that removes segments or closes the log first aborts it and waits
        for :meth:`end_cleaning` (``_pauses_cleaning``), so it never meets the cleaner's views."""
        with self._cleaning_cond:
            if self._closed or self._cleaning_thread is not None or self._cleaning_pauses:
                return False
            self._cleaning_thread = threading.get_ident()
            return True

    def end_cleaning(self) -> None:
        """The cleaning claimed by :meth:`begin_cleaning` is over (done or aborted)."""
        with self._cleaning_cond:
            self._cleaning_thread = None
            self._cleaning_cond.notify_all()

    @property
    def cleaning_aborted(self) -> bool:
        """True once a method waits for the running cleaning to stop."""
        return self._cleaning_pauses > 0

    @contextlib.contextmanager
    def cleaning_swap(self) -> Iterator[bool]:
        """The cleaner's swap of one cleaned group (or its move of :attr:`cleaner_offset`):
        holds the log's lock; yields False, swap nothing, when the cleaning was aborted or the
        log closed meanwhile."""
        with self._lock:
            yield not self._cleaning_pauses and not self._closed

    def pause_cleaning(self) -> None:
        """Abort a cleaning under way on another thread, wait for it to stop, and keep new ones
        out until :meth:`resume_cleaning` (calls nest)."""
        cond = self._cleaning_cond
        with cond:
            self._cleaning_pauses += 1
            me = threading.get_ident()
            while self._cleaning_thread is not None and self._cleaning_thread != me:
                cond.wait()

    def resume_cleaning(self) -> None:
        with self._cleaning_cond:
            self._cleaning_pauses -= 1

    # ---------------------------------------------------------------------------------------------
    # Truncation, deletion, retention
    # ---------------------------------------------------------------------------------------------

    @_pauses_cleaning
    def truncate_to(self, offset: int) -> bool:
        """Remove every batch holding offsets >= ``offset`` (a whole batch goes if it straddles
        ``offset``, as in Kafka). Never truncates below the log start. Returns True if anything
        was removed. The high watermark and recovery point follow the new end."""
        int_arg("offset", offset)
        with self._lock:
            self._check_writable()
            if offset < 0:
                raise ValueError(f"cannot truncate to a negative offset ({offset})")
            if offset >= self.log_end_offset:
                return False
            if offset < self.log_start_offset:
                return self.truncate_fully_and_start_at(offset)
            leo = self._local.truncate_to(offset)
            if self.log_start_offset > leo:
                # The batch holding ``offset`` began below the log start and went whole.
                self.log_start_offset = leo
            self.epoch_cache.truncate_from_end(leo)
            self._high_watermark = min(self._high_watermark, leo)
            if self.cleaner_offset is not None and self.cleaner_offset > leo:
                # What is appended at the removed offsets next is not clean yet.
                self.cleaner_offset = leo
            self.recovery_point = min(self.recovery_point, leo)
            _journal_recovery_point(self.dir, self.recovery_point)
            self._local.resize_active_indexes()
            # What lies between the recovery point and the new end is still unflushed.
            self._unflushed_messages = leo - self.recovery_point
            # The checkpointed recovery point may now lie past the end: rewritten, it would
            # vouch for whatever is appended at those offsets next (Kafka's LogManager.truncateTo).
            self.checkpoint()
            if self.producer_state.dir is not None:
                # From the snapshots (those past the new end go) and the batches after them.
                self.producer_state.truncate_and_reload(self)
            else:
                self.producer_state.truncate(leo)
            return True

    @_pauses_cleaning
    def truncate_fully_and_start_at(self, offset: int) -> bool:
        """Delete everything and continue with an empty log at ``offset``."""
        int_arg("offset", offset)
        with self._lock:
            self._check_writable()
            self._local.truncate_fully_and_start_at(offset)
            self.log_start_offset = offset
            self.cleaner_offset = None
            self._high_watermark = offset
            self.recovery_point = offset
            _journal_recovery_point(self.dir, offset)
            self.epoch_cache.truncate_from_end(offset)
            self._unflushed_messages = 0
            self.checkpoint()
            if self.producer_state.dir is not None:
                self.producer_state.truncate_and_reload(self)
            else:
                self.producer_state.truncate_fully_and_start_at(offset)
            return True

    @_pauses_cleaning
    def delete_records(self, before_offset: int) -> int:
        """Move the log start offset to ``before_offset`` (Kafka's DeleteRecords): records below
        it are no longer readable and whole segments below it are deleted. It may not pass the
        high watermark. Returns the new log start offset."""
        int_arg("before_offset", before_offset)
        with self._lock:
            self._check_writable()
            if before_offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot delete records before {before_offset}: the high watermark of {self.dir} "
                    f"is {self._high_watermark}",
                    offset=before_offset,
                )
            if before_offset <= self.log_start_offset:
                return self.log_start_offset
            self.log_start_offset = before_offset
            self.epoch_cache.truncate_from_start(before_offset)
            self._delete_segments(lambda seg, nxt: nxt is not None and nxt.base_offset <= before_offset)
            self.checkpoint()
            return self.log_start_offset

    @_pauses_cleaning
    def delete_old_segments(self) -> int:
        """Retention: delete whole segments past ``retention.ms`` or beyond ``retention.bytes``,
        oldest first, never one holding offsets at or above the high watermark. Returns how many
        segments were deleted."""
        with self._lock:
            if self.read_only or self._closed or not self.config.delete:
                return 0
            deleted = 0
            if self.config.retention_ms >= 0:
                now = self.clock.time_ms()
                deleted += self._delete_segments(
                    lambda seg, nxt: now - seg.largest_timestamp > self.config.retention_ms
                )
            if self.config.retention_bytes >= 0:
                excess = self.size - self.config.retention_bytes

                def over(seg: Segment, nxt: Segment | None) -> bool:
                    nonlocal excess
                    if excess - seg.size >= 0:
                        excess -= seg.size
                        return True
                    return False

                deleted += self._delete_segments(over)
            if self.log_start_offset < self._segments[0].base_offset:
                self.log_start_offset = self._segments[0].base_offset
            if deleted:
                self.epoch_cache.truncate_from_start(self.log_start_offset)
                self.checkpoint()
            return deleted

    def _delete_segments(self, predicate: Any) -> int:
        """Delete the oldest segments while ``predicate(segment, next)`` holds and the segment
        lies wholly below the high watermark. The active segment is rolled first if it must go."""
        n = 0
        while self._segments:
            seg = self._segments[0]
            nxt = self._segments[1] if len(self._segments) > 1 else None
            upper = nxt.base_offset if nxt is not None else seg.next_offset
            if upper > self._high_watermark or (nxt is None and seg.size == 0):
                break
            if not predicate(seg, nxt):
                break
            if nxt is None:
                self._roll(self.log_end_offset, "retention")
                nxt = self._segments[1]
            self._local.delete_oldest()
            self.log_start_offset = max(self.log_start_offset, nxt.base_offset)
            n += 1
        return n

    def replace_segments(self, new: Segment, old: Sequence[Segment]) -> None:
        """Put cleaner output in place of ``old`` (Kafka's ``replaceSegments``). ``new`` must
        carry the ``.swap`` suffix, start at the first old segment's base offset and cover no
        offset outside the old segments' range; it may be empty. The old segments are renamed
        ``.deleted`` (then deleted), then ``new`` loses its suffix: a crash at any step is
        completed by the next load (``remove_temporary_files``). The log start offset does
        not move."""
        with self._lock:
            self._check_writable()
            self._local.replace_segments(new, old)

    # ---------------------------------------------------------------------------------------------
    # Close
    # ---------------------------------------------------------------------------------------------

    @_pauses_cleaning
    def close(self) -> None:
        """Flush, checkpoint, trim the indexes (the max-timestamp entry included), close files."""
        with self._lock:
            if self._closed:
                return
            self._local.refuse_if_viewed(self._segments, "close")
            self._stop_flusher()
            # A storage error (a full disk) must not leave files open: close everything, as a
            # crash would leave it if trimming fails, then raise the first error.
            error: BaseException | None = None
            if not self.read_only:
                try:
                    self.flush()
                    self.checkpoint()
                except OSError as exc:
                    error = exc
            closing_error = self._local.close()  # every segment closed, whatever failed before
            error = error or closing_error
            self._closed = True
            self._release_claim()
            if error is not None:
                raise error

    @_pauses_cleaning
    def abandon(self) -> None:
        """Close every file as a killed process leaves them: nothing flushed, no checkpoint
        written, indexes not trimmed (fault injection: the data written so far stays in the
        files, as it stays in the page cache after SIGKILL). A segment whose data is still
        viewed keeps its files open until the views are released."""
        with self._lock:
            if self._closed:
                return
            self._stop_flusher()
            self._local.abandon()
            self._closed = True
            self._release_claim()

    @property
    def closed(self) -> bool:
        return self._closed


def _with_log_append_time(view: bytes | memoryview, heads: Sequence[Any], now: int) -> bytearray:
    """A copy of the batches with LogAppendTime set: attribute bit 3, maxTimestamp = now, and
    the CRC recomputed (what Kafka's broker rewrites; record deltas stay as sent)."""
    buf = bytearray(view)
    for h in heads:
        p = h.position
        attrs = int.from_bytes(buf[p + 21 : p + 23], "big") | 0x08
        buf[p + 21 : p + 23] = attrs.to_bytes(2, "big")
        buf[p + 35 : p + 43] = now.to_bytes(8, "big", signed=True)
        crc = crc32c(memoryview(buf)[p + 21 : p + h.size])
        buf[p + 17 : p + 21] = crc.to_bytes(4, "big")
    return buf
