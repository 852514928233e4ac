"""A partition's segments (Kafka's ``LocalLog``): the ordered segment list and its active segment,
creating and rolling segments, the largest-timestamp lookup across them, truncation, deletion (at
once or after ``file.delete.delay.ms``), the cleaner's segment replacement, and closing or
abandoning the files.

It knows offsets only as the segments hold them: the log start offset, the high watermark, the
recovery point, producer state and validation belong to :class:`~seglog.storage.log.Log`, which
drives this layer under its lock (nothing here locks). :attr:`LocalLog.segments` is one list for
the log's lifetime (changed in place, never rebound): the log and its
:class:`~seglog.storage.log_transactions.LogTransactions` read the same list. The hot paths read
it directly: an append's roll check and write, a read (``Log.read``, a native method of
``seglog._native.fetch.LogCore``) across the list, and a timestamp search, also native
(``seglog._native.segment.segments_first_at_or_after``); a Python call in between would cost a
random one-batch read ~10%.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Sequence
from typing import Any

from seglog._native.segment import Segment, filename_prefix
from seglog.config import LogConfig
from seglog.errors import KafkaStorageError
from seglog.storage.checkpoints import fsync_dir
from seglog.storage.log_transactions import LogTransactions
from seglog.storage.records import decode_records
from seglog.storage.segment_files import DELETED_SUFFIX, SWAP_SUFFIX
from seglog.util.clock import Clock, Scheduler

# The partition log's logger: what the segment layer reports is about the log.
log = logging.getLogger("seglog.storage.log")


def first_segment_from(segments: Sequence[Segment], offset: int) -> int:
    """The index of the first of ``segments`` (oldest first) that may hold offsets at or above
    ``offset``: a segment ends at or below the next one's base, so those before it are passed
    over by their successors' base offsets, without opening their files."""
    i, last = 0, len(segments) - 1
    while i < last and segments[i + 1].base_offset <= offset:
        i += 1
    return i


class LocalLog:
    """The segments of the partition directory ``directory``; see the module docstring."""

    def __init__(
        self, directory: str, config: LogConfig, clock: Clock, scheduler: Scheduler | None, read_only: bool
    ) -> None:
        self.dir = directory
        self.config = config
        self.clock = clock
        self.scheduler = scheduler
        self.read_only = read_only
        #: Oldest first; the last is the active segment.
        self.segments: list[Segment] = []
        #: The open transactions and the segments' ``.txnindex`` files.
        self.txns = LogTransactions(directory, self.segments)
        #: Segments renamed ``.deleted`` whose files are removed later.
        self._pending_deletes: list[Segment] = []
        self._created: dict[int, int] = {}
        #: Base offset -> the random part taken off ``segment.ms`` for the segment that starts
        #: there (``segment.jitter.ms``), for the segments this process created.
        self.roll_jitter: dict[int, int] = {}
        self._rng = random.Random()

    # ---------------------------------------------------------------------------------------------
    # Segments
    # ---------------------------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        if not self.segments:
            return 0
        return self.segments[-1].next_offset

    def segment_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = dict(
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            segment_bytes=self.config.segment_bytes,
        )
        if self.config.preallocate:
            kw["allocate_ahead"] = self.config.segment_bytes
        return kw

    def open_segment(self, base: int, lazy: bool = False) -> Segment:
        """The existing segment at ``base`` (a missing index file is created empty by opening;
        loading then rebuilds it)."""
        return Segment(self.dir, base, read_only=self.read_only, lazy=lazy, **self.segment_kwargs())

    def create_segment(self, base: int) -> Segment:
        """A new empty segment at ``base`` (not yet in :attr:`segments`), its name durable."""
        path = os.path.join(self.dir, filename_prefix(base) + ".log")
        if os.path.exists(path):
            # An empty segment left by a crash during a roll: reuse it if it is empty.
            seg = Segment(self.dir, base, **self.segment_kwargs())
            if seg.size:
                raise KafkaStorageError(
                    f"cannot roll to a new segment at offset {base}: {path} already exists and holds {seg.size} bytes",
                    path=path,
                )
            return seg
        self._created[base] = self.clock.time_ms()
        self.roll_jitter[base] = self.config.random_segment_jitter(self._rng)
        seg = Segment(self.dir, base, create=True, **self.segment_kwargs())
        # The new file's name is durable before anything relies on it: once older segments
        # are deleted (retention, DeleteRecords, truncation), it alone records the log end.
        fsync_dir(self.dir)
        return seg

    def created_ms(self, seg: Segment) -> int:
        """When ``seg`` was created (first asked, for a segment this process did not create)."""
        return self._created.setdefault(seg.base_offset, self.clock.time_ms())

    def roll(self, base: int, reason: str) -> Segment:
        """Start a new active segment at ``base``; the active one stays unless it is empty and
        already starts there. Returns the active segment."""
        old = self.segments[-1]
        if old.size == 0 and old.base_offset == base:
            return old
        log.debug("rolling %s at offset %d (%s)", self.dir, base, reason)
        old.on_become_inactive()
        if old.size == 0:
            # An empty active segment is replaced, not kept (Kafka deletes it on roll).
            self.segments.pop()
            old.delete()
        else:
            old.evictable = True
        seg = self.create_segment(base)
        self.segments.append(seg)
        return seg

    def resize_active_indexes(self) -> None:
        """Give the active segment's indexes their full size again (``segment.index.bytes``)."""
        active = self.segments[-1]
        active.offset_index.resize(self.config.segment_index_bytes)
        active.time_index.resize(self.config.segment_index_bytes)

    def flush(self, recovery_point: int) -> None:
        """fdatasync every segment that may hold offsets at or above ``recovery_point``, with its
        indexes and ``.txnindex``."""
        segs = self.segments
        for i, seg in enumerate(segs):
            # An inactive segment ends at or below the next one's base: no need to open a
            # parked one to learn it holds nothing unflushed.
            if i + 1 < len(segs) and (segs[i + 1].base_offset <= recovery_point or seg.next_offset <= recovery_point):
                continue
            seg.flush()
            self.txns.flush(seg)

    # ---------------------------------------------------------------------------------------------
    # Reads
    # ---------------------------------------------------------------------------------------------

    def max_timestamp_record(self, start: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or above ``start`` with the largest
        timestamp. Each segment knows its maximum; only in the segment holding ``start`` can
        that maximum lie in records below it (DeleteRecords), and there the batches left are
        read."""
        best_ts, best_seg, best_batch = -1, None, None
        for seg in self.segments:
            if seg.next_offset <= start or seg.max_timestamp_so_far <= best_ts:
                continue
            if seg.base_offset >= start:
                best_ts, best_seg = seg.max_timestamp_so_far, seg
                best_batch = seg.translate_offset(seg.offset_of_max_timestamp)
                continue
            first = seg.translate_offset(start)
            for b in seg.batches(first.position if first is not None else seg.size):
                ts = b.max_timestamp
                if b.base_offset < start:
                    recs = decode_records(seg.view(b.position, b.size), min_offset=start)
                    ts = max((r.timestamp for r in recs), default=-1)
                if ts > best_ts:
                    best_ts, best_seg, best_batch = ts, seg, b
        if best_seg is None or best_batch is None:
            return None
        for rec in decode_records(best_seg.view(best_batch.position, best_batch.size), min_offset=start):
            if rec.timestamp == best_ts:
                return rec.offset, rec.timestamp
        return None

    # ---------------------------------------------------------------------------------------------
    # Truncation and deletion
    # ---------------------------------------------------------------------------------------------

    def refuse_if_viewed(self, segments: Sequence[Segment], action: str) -> None:
        """Check before changing anything: a segment refuses truncation or deletion while
        views of its data live, and a refusal half way would leave the log inconsistent."""
        for seg in segments:
            n = seg.live_views()
            if n:
                raise BufferError(
                    f"cannot {action} {self.dir}: {n} exported view(s) of "
                    f"{seg.log_path} are still alive; release them first"
                )

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding offsets >= ``offset`` (a batch straddling it goes whole)
        and every segment left empty above it; returns the new log end (the active segment's
        indexes keep their trimmed size: :meth:`resize_active_indexes`). Refuses (BufferError,
        nothing changed) while views of the data to remove live."""
        self.refuse_if_viewed([s for s in self.segments if s.next_offset > offset], "truncate")
        while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
            self.segments.pop().delete()
        active = self.segments[-1]
        active.evictable = False  # the active segment again: its files stay open
        active.truncate_to(offset)
        leo = active.next_offset
        self.txns.truncate_to(active, leo)
        return leo

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and continue with an empty one at ``offset``."""
        self.refuse_if_viewed(self.segments, "truncate")
        for seg in self.segments:
            seg.delete()
        self.segments[:] = [self.create_segment(offset)]
        self.txns.clear()

    def delete_oldest(self) -> Segment:
        """Take the oldest segment out of the log and delete it (:meth:`schedule_delete`)."""
        seg = self.segments.pop(0)
        self.schedule_delete(seg)
        return seg

    def schedule_delete(self, seg: Segment) -> None:
        """Rename to ``.deleted`` now; remove after ``file.delete.delay.ms`` (Kafka's async
        delete), or at once without a scheduler."""
        seg.change_suffix("", DELETED_SUFFIX)
        if self.scheduler is None or self.config.file_delete_delay_ms <= 0:
            self._delete_now(seg)
            return
        self._pending_deletes.append(seg)
        self.scheduler.schedule(
            f"delete {seg.log_path}", lambda: self._delete_now(seg), delay_ms=self.config.file_delete_delay_ms
        )

    def _delete_now(self, seg: Segment) -> None:
        try:
            seg.delete()
        except BufferError:
            # Views of its data are still alive: try again later.
            if self.scheduler is not None:
                self.scheduler.schedule(f"delete {seg.log_path}", lambda: self._delete_now(seg), delay_ms=1000)
            return
        if seg in self._pending_deletes:
            self._pending_deletes.remove(seg)

    def replace_segments(self, new: Segment, old: Sequence[Segment]) -> None:
        """Put ``new`` (carrying the ``.swap`` suffix, starting at the first old segment's base)
        in place of the consecutive inactive segments ``old``: they are renamed ``.deleted``
        (then deleted), then ``new`` loses its suffix."""
        if not old:
            raise ValueError("no segments to replace")
        try:
            first = self.segments.index(old[0])
        except ValueError:
            raise KafkaStorageError(f"segment {old[0].log_path} is no longer part of {self.dir}") from None
        if self.segments[first : first + len(old)] != list(old):
            raise KafkaStorageError(f"the segments to replace in {self.dir} are not consecutive")
        if first + len(old) >= len(self.segments):
            raise KafkaStorageError(f"the active segment of {self.dir} cannot be replaced")
        if new.suffix != SWAP_SUFFIX:
            raise ValueError(f"the replacement {new.log_path} must carry the {SWAP_SUFFIX} suffix")
        if new.base_offset != old[0].base_offset:
            raise ValueError(
                f"the replacement {new.log_path} must start at offset "
                f"{old[0].base_offset}, the base offset of {old[0].log_path}"
            )
        for seg in old:
            self.schedule_delete(seg)
        new.change_suffix(SWAP_SUFFIX, "")
        new.evictable = True
        self.segments[first : first + len(old)] = [new]

    # ---------------------------------------------------------------------------------------------
    # Close
    # ---------------------------------------------------------------------------------------------

    def close(self) -> OSError | None:
        """Close every segment (trimming the indexes and writing the max-timestamp entry unless
        read-only) and delete the pending ones. A storage error (a full disk) does not leave
        files open: every segment is closed, as a crash would leave it if trimming fails, and
        the first error is returned."""
        error: OSError | None = None
        for seg in self.segments:
            try:
                if not self.read_only:
                    seg.on_become_inactive()
                seg.close()
            except OSError as exc:
                error = error or exc
                # No room for the max-timestamp entry: still cut the sparse preallocated
                # tails, which some filesystems (tmpfs) cannot even read back when full.
                for idx in (seg.offset_index, seg.time_index):
                    try:
                        idx.trim_to_valid_size()
                    except OSError:
                        pass
                seg.close_without_trim()
        for seg in list(self._pending_deletes):
            try:
                seg.delete()
            except BufferError:
                pass
        return error

    def abandon(self) -> None:
        """Close every file as a killed process leaves them (nothing flushed, indexes not
        trimmed); a segment whose data is still viewed keeps its files open until the views
        are released."""
        for seg in self.segments + self._pending_deletes:
            try:
                seg.close_without_trim()
            except BufferError:
                pass
