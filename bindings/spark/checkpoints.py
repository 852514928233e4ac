"""A log dir's offset checkpoint files as the source reads and updates them: the log start
offsets and the high watermarks (``replication-offset-checkpoint``), a corrupt file refused
naming its path."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from seglog.errors import SeglogError
from seglog.storage.checkpoints import CorruptCheckpointError, OffsetCheckpointFile
from seglog.storage.logdir import LOG_START_FILE, checkpoint_update_lock, shared_claim
from seglog.storage.logdir import REPLICATION_OFFSET_FILE as HIGH_WATERMARK_FILE

__all__ = ["HIGH_WATERMARK_FILE", "LOG_START_FILE", "CheckpointCache", "log_dir_update", "read_offsets"]


@contextlib.contextmanager
def log_dir_update(log_dir: str) -> Iterator[None]:
    """Changing the log dir's shared files (the high-watermark file, ``meta.properties``, a
    new partition's ``partition.metadata``): a writer sharing the dir (refused while a store, a
    node or a Kafka broker owns it), one read-modify-write at a time."""
    with shared_claim(log_dir, holder="a Spark write"), checkpoint_update_lock(log_dir):
        yield


def read_offsets(f: OffsetCheckpointFile) -> dict[tuple[str, int], int]:
    """The file's offsets by (topic, partition) (none when it is missing); a corrupt file is a
    :class:`seglog.errors.SeglogError` naming it."""
    try:
        return f.read()
    except CorruptCheckpointError as exc:
        raise SeglogError(f"seglog: {exc}", path=f.path) from None


class CheckpointCache:
    """Per-log-dir checkpoint files, read once per planning."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], dict[tuple[str, int], int] | None] = {}

    def get(self, log_dir: str, name: str) -> dict[tuple[str, int], int] | None:
        """The offsets of checkpoint file ``name`` of ``log_dir``; None when it does not exist."""
        key = (log_dir, name)
        if key not in self._cache:
            path = os.path.join(log_dir, name)
            self._cache[key] = read_offsets(OffsetCheckpointFile(path)) if os.path.exists(path) else None
        return self._cache[key]
