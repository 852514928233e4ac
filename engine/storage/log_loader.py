"""Opening a partition directory (Kafka's ``LogLoader``): the leftovers of interrupted operations
settled, the segments scanned and, after a crash, recovered, the recovery point and log start
offset read from the log dir's checkpoints, the leader epochs checked against what survived.

:func:`load_log` fills a :class:`~seglog.storage.local_log.LocalLog`'s segment list and returns
what the :class:`~seglog.storage.log.Log` needs beside it (:class:`LoadedLog`); it changes no
``Log`` state itself. Recovery is described in :mod:`seglog.storage.log` (durability model).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable

from seglog.storage.checkpoints import CorruptCheckpointError, OffsetCheckpointFile
from seglog.storage.leader_epoch import LeaderEpochCache
from seglog.storage.local_log import LocalLog
from seglog.storage.logdir import CLEAN_SHUTDOWN_FILE
from seglog.storage.segment_files import index_missing, remove_temporary_files, segment_bases

# The partition log's logger: recovery reports under the log's name, as tools expect.
log = logging.getLogger("seglog.storage.log")


@dataclasses.dataclass(frozen=True, slots=True)
class RecoverySummary:
    segments_recovered: int
    bytes_truncated: int
    segments_deleted: int
    reasons: tuple[str, ...]
    #: Everything recovery removed: the invalid tail plus the later segments it deleted, in
    #: bytes and in records (offsets the segments' readable batches held before recovery).
    bytes_removed: int = 0
    records_removed: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class LoadedLog:
    """What loading a partition directory found, beside the segments it put in the
    :class:`~seglog.storage.local_log.LocalLog`."""

    epoch_cache: LeaderEpochCache
    log_start_offset: int
    #: The offset below which the data is known durable (the log end after a clean shutdown).
    recovery_point: int
    recovery_summary: RecoverySummary
    #: The checkpointed log start offset lay past the data and was moved back to the log end:
    #: it must be checkpointed again before records are written below the old value.
    start_moved_back: bool


def read_tp_checkpoint(f: OffsetCheckpointFile, tp: tuple[str, int], default: int) -> int:
    """The partition ``tp``'s entry in the checkpoint file ``f``; ``default`` when it has none or
    the file is corrupt (logged)."""
    try:
        return f.read().get(tp, default)
    except CorruptCheckpointError as exc:
        log.warning("%s; treating it as absent", exc)
        return default


def load_log(
    local: LocalLog,
    *,
    compact: bool,
    recovery_point: int | None,
    log_start_offset: int | None,
    clean_shutdown: bool | None,
    high_watermark: int | None,
    checkpoints: tuple[tuple[str, int], OffsetCheckpointFile, OffsetCheckpointFile] | None,
    create_dir: Callable[[], None],
) -> LoadedLog:
    """Load the segments of ``local.dir`` into ``local.segments`` (empty before).

    ``recovery_point``, ``log_start_offset`` and ``clean_shutdown`` default to what the parent
    directory records: the partition's entries in ``checkpoints`` (its topic-partition, the
    recovery-point and log-start checkpoint files; None: 0 for both) and the clean-shutdown
    marker. ``high_watermark`` (the checkpointed one) is only reported. ``create_dir`` makes a
    missing directory (a writable open)."""
    directory = local.dir
    read_only = local.read_only
    if not os.path.isdir(directory):
        if read_only:
            raise FileNotFoundError(f"log directory not found: {directory}")
        create_dir()
    parent = os.path.dirname(directory)
    if clean_shutdown is None:
        clean_shutdown = os.path.exists(os.path.join(parent, CLEAN_SHUTDOWN_FILE))
    if recovery_point is None:
        recovery_point = read_tp_checkpoint(checkpoints[1], checkpoints[0], 0) if checkpoints else 0
    if log_start_offset is None:
        log_start_offset = read_tp_checkpoint(checkpoints[2], checkpoints[0], 0) if checkpoints else 0
    epoch_cache = LeaderEpochCache(directory, read_only=read_only)
    if not read_only:
        remove_temporary_files(directory)
    bases = segment_bases(directory)
    segments = local.segments
    txns = local.txns
    reasons: list[str] = []
    recovered = truncated = deleted = removed_bytes = removed_records = 0
    end_before = 0
    epoch_starts: list[tuple[int, int]] = []
    rebuilt: set[int] = set()
    # Kafka recovers from the segment holding the recovery point (the last based at or
    # below it) on: a segment's next offset, read from its possibly torn tail, cannot say
    # whether it holds data past the recovery point.
    # A segment before that one ends at or below the next one's base, so at or below the
    # recovery point: it needs no recovery.
    unflushed_from = max((b for b in bases if b <= recovery_point), default=-1)
    for i, base in enumerate(bases):
        missing_index = index_missing(directory, base)
        last = i + 1 == len(bases)
        needs_recovery = missing_index or (not clean_shutdown and base >= unflushed_from)
        seg = None
        if (not needs_recovery or read_only) and not last:
            # An inactive segment opens its files on first use (and checks its indexes
            # then): opening a log holds no descriptor for it.
            seg = local.open_segment(base, lazy=True)
            if not read_only:
                try:
                    txns.sanity_check(seg, bases[i + 1])
                except Exception as exc:  # noqa: BLE001 - any index problem means rebuild
                    log.warning("rebuilding the indexes of %s: %s", seg.log_path, exc)
                    needs_recovery = True
                    seg = None
        if seg is None:
            seg = local.open_segment(base)
        if not needs_recovery and last and not read_only:
            try:
                seg.sanity_check()
                txns.sanity_check(seg)
            except Exception as exc:  # noqa: BLE001 - any index problem means rebuild
                log.warning("rebuilding the indexes of %s: %s", seg.log_path, exc)
                needs_recovery = True
        if needs_recovery and not read_only:
            end_before = seg.next_offset
            res = seg.recover()
            recovered += 1
            rebuilt.add(base)
            epoch_starts.extend(res.epoch_starts)
            # Segments are created at the log end, so an unflushed segment ending before
            # the next one starts lost its tail: what follows would leave a hole. Not in a
            # compacted log, where the cleaner leaves such gaps (a cleaned segment whose last
            # records were superseded, or an empty one).
            lost_tail = not clean_shutdown and not compact and i + 1 < len(bases) and seg.next_offset < bases[i + 1]
            if res.truncated_bytes or lost_tail:
                truncated += res.truncated_bytes
                removed_bytes += res.truncated_bytes
                removed_records += max(0, end_before - seg.next_offset)
                reason = (
                    f"{res.reason}; truncated {res.truncated_bytes} bytes"
                    if res.truncated_bytes
                    else f"ends at offset {seg.next_offset}, before the next segment's base "
                    f"offset {bases[i + 1]}: the records between were lost"
                )
                reasons.append(f"{seg.log_path}: {reason}")
                log.warning("recovery of %s: %s", seg.log_path, reason)
                segments.append(seg)  # the last one now: stays open
                # Kafka deletes every later segment once one was cut short.
                for later in bases[i + 1 :]:
                    gone = local.open_segment(later)
                    removed_bytes += gone.size
                    removed_records += max(0, gone.next_offset - gone.base_offset)
                    gone.delete()
                    deleted += 1
                break
            if not last:
                # Recovered: its files join the open-segment cache, which closes them
                # when it is full.
                seg.evictable = True
        segments.append(seg)
    # Drop empty non-active segments whose successor starts at the same offset (left by a
    # crash during a roll) and keep offsets monotonic across segments.
    segments.sort(key=lambda s: s.base_offset)
    if not segments and not read_only:
        segments.append(local.create_segment(log_start_offset))
    summary = RecoverySummary(recovered, truncated, deleted, tuple(reasons), removed_bytes, removed_records)
    if rebuilt:
        # The txn indexes of the recovered segments are rebuilt from the state as it
        # stands before each; otherwise the state is read on first need.
        txns.load(rebuilt, read_only=read_only)
    leo = local.log_end_offset
    if log_start_offset > leo:
        # Kafka: the log start checkpoint is ahead of the data (files removed outside).
        log.warning("log start offset %d of %s is beyond its end %d", log_start_offset, directory, leo)
        log_start_offset = leo
        start_moved_back = True
    else:
        start_moved_back = False
    first_base = segments[0].base_offset if segments else 0
    log_start_offset = max(log_start_offset, first_base)
    for epoch, start in epoch_starts:
        # Kafka's LogSegment.recover: only epochs newer than the cache's latest are added;
        # a recovered segment's first batch is not where an older epoch started.
        if not read_only and epoch > epoch_cache.latest_epoch:
            epoch_cache.assign(epoch, start)
    if not read_only:
        epoch_cache.truncate_from_end(leo)
        epoch_cache.truncate_from_start(log_start_offset)
        local.resize_active_indexes()
    if removed_bytes or removed_records:
        # One line per log for tools that count what recovery cut (fault-injection reports).
        log.warning(
            "%s: recovery truncates to %d (%d records, %d bytes), checkpointed high watermark %d",
            directory,
            leo,
            removed_records,
            removed_bytes,
            -1 if high_watermark is None else high_watermark,
        )
    return LoadedLog(
        epoch_cache=epoch_cache,
        log_start_offset=log_start_offset,
        recovery_point=leo if clean_shutdown else min(recovery_point, leo),
        recovery_summary=summary,
        start_moved_back=start_moved_back,
    )
