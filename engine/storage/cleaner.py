"""Log compaction (Kafka's ``LogCleaner``): for ``cleanup.policy=compact`` (or
``compact,delete``) keep only the latest record of each key, offsets unchanged.

One cleaning of a log:

1. The cleanable range. Everything before the active segment, less segments newer than
   ``min.compaction.lag.ms``. The *dirty* part starts at the cleaner checkpoint (the end of the
   previous cleaning, ``cleaner-offset-checkpoint``); the log is cleaned when dirty bytes make
   up at least ``min.cleanable.dirty.ratio`` of the cleanable bytes, or when a dirty segment is
   older than ``max.compaction.lag.ms``.
2. The offset map: key -> latest offset, over the dirty part.
3. Rewrite, in groups of consecutive segments that together fit ``segment.bytes``: a record
   survives if it has a key, no later record of the dirty part has the same key, and it is not
   a tombstone past its delete horizon. A batch whose records all survive is copied byte for
   byte; otherwise it is rebuilt with the original base offset, last offset delta, producer
   fields, codec and partition leader epoch, so offsets and producer sequences are preserved. A
   batch with no survivor is dropped. Records without a key are dropped.
4. Tombstones (KIP-534): when a batch holding a tombstone is first cleaned, its delete horizon
   (now + ``delete.retention.ms``) is written into the rebuilt batch (attribute bit 6, the
   horizon in ``baseTimestamp``); a later cleaning after the horizon drops the tombstone. So a
   consumer has at least ``delete.retention.ms`` after compaction to see every delete.
5. Crash safety, Kafka's protocol: each group is written to ``<base>.log.cleaned`` (and
   ``.index.cleaned``, ``.timeindex.cleaned``), fsynced, renamed to ``.swap``; the old
   segments are renamed ``.deleted``; the ``.swap`` files lose their suffix. Loading a log
   deletes ``.cleaned`` and ``.deleted`` files and completes a ``.swap`` (``log_loader.load_log``), so a
   crash at any step leaves either the old segments or the cleaned ones. A group none of whose
   records survive is replaced by an empty segment named after its base offset (Kafka's
   ``cleanSegments`` does the same): the log start offset stays where it was; retention or
   DeleteRecords may remove the empty segment later, like any other.

Threads (Kafka's cleaner threads): a cleaning may run on another thread than the log's writer,
appends going on. It claims the log (``Log.begin_cleaning``), reads inactive segments only, and
swaps each group in under the log's lock. A truncation, deletion or close of the log aborts it
and waits for it to stop (``Log.pause_cleaning``): the cleaning checks between batches, deletes
its unfinished output, and the groups swapped before stay. A cleaning run to its end moves the
log's checkpoint (``Log.cleaner_offset``), which the caller writes to
``cleaner-offset-checkpoint``.

Not done: cleaning logs that hold transactional batches (aborted records would need the
transaction index; such logs are skipped with a warning), and keeping an empty batch as the
last batch of a producer (seglog's producer ids are never reused, so the state is not needed).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from seglog._native.builder import BatchBuilder
from seglog._native.segment import Segment, filename_prefix
from seglog.errors import KafkaStorageError
from seglog.storage.log import Log
from seglog.storage.records import batch_headers, decode_columns, decode_records
from seglog.storage.segment_files import CLEANED_SUFFIX, SWAP_SUFFIX
from seglog.util.clock import Clock

log = logging.getLogger("seglog.storage.cleaner")


def _check(lg: Log) -> None:
    """Between batches: stop if the writer aborted the cleaning, and let other threads run (a
    cleaning beside a node's loop would otherwise hold the GIL for whole switch intervals)."""
    if lg.cleaning_aborted:
        raise _Aborted
    time.sleep(0)


ATTR_DELETE_HORIZON = 0x40
INT32_MAX = 2**31 - 1
_CHUNK = 1 << 20


@dataclasses.dataclass(frozen=True, slots=True)
class CleanResult:
    first_dirty_offset: int  # the new cleaner checkpoint
    segments_before: int
    segments_after: int
    bytes_before: int
    bytes_after: int
    records_removed: int
    tombstones_removed: int


class _SkipLog(Exception):
    pass


class _Aborted(Exception):
    """The log's writer aborted the cleaning (a truncation, deletion or close)."""


@dataclasses.dataclass(slots=True)
class _Stats:
    removed: int = 0
    tombstones: int = 0


class Cleaner:
    """Cleans one log at a time. ``crash_hook(step)`` (tests) is called after each durable step
    of a group's swap: ``"cleaned"``, ``"swap"``, ``"replaced"``."""

    def __init__(self, clock: Clock | None = None, *, crash_hook: Callable[[str], None] | None = None) -> None:
        self.clock = clock or Clock()
        self.crash_hook = crash_hook

    # ---------------------------------------------------------------------------------------------

    def cleanable_range(
        self, lg: Log, checkpoint: int | None, *, force: bool = False, upper: int | None = None
    ) -> tuple[int, int] | None:
        """(first dirty offset, first uncleanable offset) if the log should be cleaned now. With
        ``upper`` (a replica's high watermark) only segments wholly below it are cleanable, so a
        record that may still be truncated never decides what is removed (Kafka bounds the
        cleaner by the last stable offset, itself at most the high watermark)."""
        cfg = lg.config
        segs = lg.segments
        if len(segs) < 2:
            return None
        start = lg.log_start_offset
        active = segs[-1]
        first_dirty = start if checkpoint is None else checkpoint
        if first_dirty < start or first_dirty > active.base_offset:
            first_dirty = start
        now = self.clock.time_ms()
        end = active.base_offset
        if upper is not None:
            for seg in segs[:-1]:
                if seg.next_offset > upper:
                    end = min(end, seg.base_offset)
                    break
        if cfg.min_compaction_lag_ms > 0:
            for seg in segs[:-1]:
                if seg.next_offset > first_dirty and seg.largest_timestamp > now - cfg.min_compaction_lag_ms:
                    end = min(end, seg.base_offset)
                    break
        if end <= first_dirty:
            return None
        dirty = [s for s in segs[:-1] if s.next_offset > first_dirty and s.base_offset < end]
        if not dirty:
            return None
        if force:
            return first_dirty, end
        dirty_bytes = sum(s.size for s in dirty)
        clean_bytes = sum(s.size for s in segs[:-1] if s.next_offset <= first_dirty)
        total = dirty_bytes + clean_bytes
        ratio = dirty_bytes / total if total else 0.0
        overdue = False
        if cfg.max_compaction_lag_ms < 2**63 - 1:
            overdue = any(0 <= s.rolling_based_timestamp < now - cfg.max_compaction_lag_ms for s in dirty)
        if dirty_bytes and (ratio >= cfg.min_cleanable_dirty_ratio or overdue):
            return first_dirty, end
        return None

    def clean(
        self, lg: Log, checkpoint: int | None = None, *, force: bool = False, upper: int | None = None
    ) -> CleanResult | None:
        """Clean ``lg`` if it needs it (always with ``force``), from ``checkpoint`` (None: the
        log start; callers pass :attr:`Log.cleaner_offset`, which a cleaning moves), below
        ``upper`` when given (see :meth:`cleanable_range`). Returns what was done, or None.

        It may run on another thread than the log's writer, appends going on: it reads only
        inactive segments, and swaps each cleaned group in under the log's lock. A truncation,
        deletion or close of the log aborts it (:meth:`Log.begin_cleaning`); an aborted
        cleaning leaves the groups swapped so far, deletes its unfinished output and returns
        None."""
        if lg.read_only or lg.closed or not lg.config.compact:
            return None
        if not lg.begin_cleaning():
            return None
        try:
            return self._clean(lg, checkpoint, force, upper)
        except _Aborted:
            log.info("cleaning of %s stopped: the log is being truncated, deleted or closed", lg.dir)
            return None
        finally:
            lg.end_cleaning()

    def _clean(self, lg: Log, checkpoint: int | None, force: bool, upper: int | None) -> CleanResult | None:
        rng = self.cleanable_range(lg, checkpoint, force=force, upper=upper)
        if rng is None:
            return None
        first_dirty, end = rng
        try:
            offset_map, map_end = self._build_offset_map(lg, first_dirty, end)
        except _SkipLog as exc:
            log.warning("not cleaning %s: %s", lg.dir, exc)
            return None
        segs = lg.segments
        to_clean = [s for s in segs[:-1] if s.base_offset < end]
        before = len(to_clean)
        bytes_before = sum(s.size for s in to_clean)
        stats = _Stats()
        after = 0
        bytes_after = 0
        now = self.clock.time_ms()
        for group in self._groups(to_clean, lg.config.segment_bytes):
            out = self._clean_group(lg, group, offset_map, map_end, now, stats)
            after += 1
            bytes_after += out.size
        with lg.cleaning_swap() as go:
            if go:
                lg.cleaner_offset = end
        log.info(
            "cleaned %s: %d segments (%d bytes) -> %d (%d bytes), %d records removed",
            lg.dir,
            before,
            bytes_before,
            after,
            bytes_after,
            stats.removed,
        )
        return CleanResult(end, before, after, bytes_before, bytes_after, stats.removed, stats.tombstones)

    # ---------------------------------------------------------------------------------------------

    def _build_offset_map(self, lg: Log, start: int, end: int) -> tuple[dict[bytes, int], int]:
        offset_map: dict[bytes, int] = {}
        last = start - 1
        for seg in lg.segments:
            if seg.next_offset <= start or seg.base_offset >= end:
                continue
            view = seg.view()
            try:
                heads = batch_headers(view)
                for h in heads:
                    if h.magic != 2:
                        raise _SkipLog(f"it holds a magic {h.magic} batch at offset {h.base_offset}")
                    if h.is_transactional:
                        raise _SkipLog(f"it holds transactional batches (offset {h.base_offset})")
                # Decode a few MiB at a time: memory stays bounded whatever segment.bytes is.
                i = 0
                while i < len(heads):
                    _check(lg)
                    j = i
                    size = 0
                    while j < len(heads) and (size == 0 or size + heads[j].size <= _CHUNK * 4):
                        size += heads[j].size
                        j += 1
                    a, b = heads[i].position, heads[j - 1].position + heads[j - 1].size
                    piece = view[a:b]
                    try:
                        cols = decode_columns(piece, keys=True, headers=False, min_offset=start, max_offset=end)
                    finally:
                        piece.release()
                    i = j
                    if not cols.count:
                        continue
                    rb = cols.to_arrow()
                    keys = rb.column("key").to_pylist()
                    offsets = rb.column("offset").to_pylist()
                    offset_map.update(zip(keys, offsets))
                    last = max(last, offsets[-1])
            finally:
                view.release()
        offset_map.pop(None, None)  # type: ignore[call-overload]
        return offset_map, last

    @staticmethod
    def _groups(segs: Sequence[Segment], max_bytes: int) -> list[list[Segment]]:
        groups: list[list[Segment]] = []
        cur: list[Segment] = []
        size = 0
        for seg in segs:
            if cur and (size + seg.size > max_bytes or seg.next_offset - cur[0].base_offset > INT32_MAX):
                groups.append(cur)
                cur, size = [], 0
            cur.append(seg)
            size += seg.size
        if cur:
            groups.append(cur)
        return groups

    def _hook(self, step: str) -> None:
        if self.crash_hook is not None:
            self.crash_hook(step)

    def _clean_group(
        self, lg: Log, group: list[Segment], offset_map: dict[bytes, int], map_end: int, now: int, stats: _Stats
    ) -> Segment:
        cfg = lg.config
        base = group[0].base_offset
        prefix = os.path.join(lg.dir, filename_prefix(base))
        for ext in (".log", ".index", ".timeindex", ".txnindex"):
            for suffix in (CLEANED_SUFFIX, SWAP_SUFFIX):
                if os.path.exists(prefix + ext + suffix):
                    os.unlink(prefix + ext + suffix)
        out = Segment(
            lg.dir,
            base,
            create=True,
            suffix=CLEANED_SUFFIX,
            index_interval_bytes=cfg.index_interval_bytes,
            max_index_size=cfg.segment_index_bytes,
            segment_bytes=cfg.segment_bytes,
        )
        try:
            pending = bytearray()
            for seg in group:
                view = seg.view()
                try:
                    for h in batch_headers(view):
                        _check(lg)
                        piece = view[h.position : h.position + h.size]
                        try:
                            kept = self._filter(piece, h, offset_map, map_end, now, cfg.delete_retention_ms, stats)
                            if kept is not None:
                                pending += kept
                        finally:
                            piece.release()
                        if len(pending) >= _CHUNK:
                            out.append(pending, -1, -1, False)
                            pending = bytearray()
                finally:
                    view.release()
            if pending:
                out.append(pending, -1, -1, False)
            out.flush()
            out.on_become_inactive()
            # As Kafka's cleaner: the cleaned segment keeps the last old segment's modification
            # time, which retention reads when the segment holds no timestamp (an empty one).
            mtime = os.stat(group[-1].log_path).st_mtime_ns
            os.utime(out.log_path, ns=(mtime, mtime))
            self._hook("cleaned")
        except BaseException:
            out.delete()
            raise
        # Even when nothing survives, the (empty) cleaned segment replaces the group, as in
        # Kafka: it keeps the group's base offset, so the log start offset does not move and a
        # consumer at the log start is not sent out of range.
        with lg.cleaning_swap() as go:
            if not go:
                out.delete()
                raise _Aborted
            out.change_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
            self._hook("swap")
            try:
                lg.replace_segments(out, group)
            except KafkaStorageError:
                # The group left the log (it cannot while the cleaning holds it): a .swap left
                # behind would bring the removed records back at the next load.
                out.delete()
                raise
        self._hook("replaced")
        return out

    @staticmethod
    def _filter(
        piece: memoryview,
        h: Any,
        offset_map: dict[bytes, int],
        map_end: int,
        now: int,
        delete_retention_ms: int,
        stats: _Stats,
    ) -> Any:
        """The batch to write for ``piece``: itself, a rebuilt batch, or None."""
        if h.is_control:
            return piece
        records = decode_records(piece)
        has_horizon = bool(h.attributes & ATTR_DELETE_HORIZON)
        horizon = h.base_timestamp if has_horizon else -1
        keep = []
        tombstones = False
        for i, r in enumerate(records):
            if i & 511 == 511:
                time.sleep(0)  # a large batch's records: let other threads run (see _check)
            if r.offset > map_end:
                keep.append(r)
                tombstones = tombstones or r.value is None
                continue
            if r.key is None or r.offset < offset_map.get(r.key, -1):
                stats.removed += 1
                continue
            if r.value is None:
                if has_horizon and now >= horizon:
                    stats.removed += 1
                    stats.tombstones += 1
                    continue
                tombstones = True
            keep.append(r)
        set_horizon = tombstones and not has_horizon
        if len(keep) == len(records) and not set_horizon:
            return piece
        if not keep:
            return None
        if set_horizon:
            horizon = now + delete_retention_ms
        builder = BatchBuilder(
            INT32_MAX, base_timestamp=horizon if (has_horizon or set_horizon) else None, initial_capacity=h.size + 64
        )
        base = h.base_offset
        log_append = h.timestamp_type == 1
        for r in keep:
            builder.append_with_delta(
                r.offset - base, r.timestamp, r.key, r.value, tuple(r.headers) if r.headers else None
            )
        return builder.build(
            base_offset=base,
            compression=h.compression,
            partition_leader_epoch=h.partition_leader_epoch,
            producer_id=h.producer_id,
            producer_epoch=h.producer_epoch,
            base_sequence=h.base_sequence,
            is_transactional=h.is_transactional,
            log_append_time=h.max_timestamp if log_append else None,
            last_offset_delta=h.last_offset - h.base_offset,
            delete_horizon=has_horizon or set_horizon,
        )
