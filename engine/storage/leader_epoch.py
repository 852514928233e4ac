"""The leader-epoch cache of one partition (Kafka's ``LeaderEpochFileCache``), persisted in the
partition directory's ``leader-epoch-checkpoint`` (``epoch startOffset`` lines, ascending).

Every change is written through to the file (tmp + fsync + rename) before the method returns,
so a new leader's (epoch, start offset) is durable before it serves (KIP-101).
"""

from __future__ import annotations

import bisect
import os
import threading

from seglog.storage.checkpoints import CorruptCheckpointError, LeaderEpochCheckpointFile

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
FILE_NAME = "leader-epoch-checkpoint"


class LeaderEpochCache:
    def __init__(self, directory: str, *, read_only: bool = False) -> None:
        self._file = LeaderEpochCheckpointFile(os.path.join(directory, FILE_NAME))
        self._read_only = read_only
        self._lock = threading.RLock()
        try:
            entries = self._file.read()
        except CorruptCheckpointError:
            entries = []  # rebuilt from the batches' partitionLeaderEpoch by recovery
            self.corrupt_on_load = True
        else:
            self.corrupt_on_load = False
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for epoch, start in entries:
            self._assign(epoch, start)
        #: The last entry's epoch, kept by every change (``_flush``): read on every append,
        #: without the lock (an int attribute is read whole).
        self._latest = self._epochs[-1] if self._epochs else UNDEFINED_EPOCH
        self._last: tuple[int, int] | None = (self._epochs[-1], self._starts[-1]) if self._epochs else None

    # -- queries ---------------------------------------------------------------------------------

    def entries(self) -> list[tuple[int, int]]:
        with self._lock:
            return list(zip(self._epochs, self._starts))

    @property
    def latest_epoch(self) -> int:
        return self._latest

    def holds_start(self, epoch: int, start_offset: int) -> bool:
        """Whether :meth:`assign` of ``epoch`` at ``start_offset`` would leave the cache as it
        is because ``epoch`` is its latest and starts at or below ``start_offset`` (a leader's
        every append but the first of its epoch): one read, without the lock."""
        last = self._last
        return last is not None and last[0] == epoch and start_offset >= last[1]

    @property
    def latest_entry(self) -> tuple[int, int] | None:
        with self._lock:
            return (self._epochs[-1], self._starts[-1]) if self._epochs else None

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch whose range holds ``offset`` (UNDEFINED_EPOCH before the first entry)."""
        with self._lock:
            i = bisect.bisect_right(self._starts, offset) - 1
            return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's ``endOffsetFor``: (largest epoch <= requested, end offset of that epoch),
        where the end offset is the start of the next higher epoch, or the log end offset for
        the latest epoch; (UNDEFINED, UNDEFINED) when the requested epoch is undefined or above
        every known epoch."""
        with self._lock:
            if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if requested_epoch == self._epochs[-1]:
                return requested_epoch, log_end_offset
            hi = bisect.bisect_right(self._epochs, requested_epoch)
            if hi >= len(self._epochs):
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if hi == 0:
                return requested_epoch, self._starts[0]
            return self._epochs[hi - 1], self._starts[hi]

    # -- changes ---------------------------------------------------------------------------------

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or start_offset < 0:
            return False
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._starts[-1]:
            return False
        # Kafka removes every entry the new one contradicts: later-or-equal epochs and
        # entries starting at or after the new start.
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return True

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True if the cache changed."""
        with self._lock:
            changed = self._assign(epoch, start_offset)
            if changed:
                self._flush()
            return changed

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (log truncated to it)."""
        with self._lock:
            changed = False
            while self._starts and self._starts[-1] >= end_offset:
                self._epochs.pop()
                self._starts.pop()
                changed = True
            if changed:
                self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log start moved to ``start_offset``: the epoch covering it now starts there."""
        with self._lock:
            i = bisect.bisect_right(self._starts, start_offset) - 1
            if i < 0 or (i == 0 and self._starts[0] == start_offset):
                return
            epoch = self._epochs[i]
            del self._epochs[: i + 1]
            del self._starts[: i + 1]
            self._epochs.insert(0, epoch)
            self._starts.insert(0, start_offset)
            self._flush()

    def clear(self) -> None:
        with self._lock:
            self._epochs.clear()
            self._starts.clear()
            self._flush()

    def _flush(self) -> None:
        """After every change of the entries (before the file write, which may fail)."""
        self._latest = self._epochs[-1] if self._epochs else UNDEFINED_EPOCH
        self._last = (self._epochs[-1], self._starts[-1]) if self._epochs else None
        if not self._read_only:
            self._file.write(zip(self._epochs, self._starts))
