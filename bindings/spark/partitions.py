"""One partition as planning sees it (:class:`ReadablePartition`): its segment files and the
offset range that may be read, found from file names, ``stat`` and the last segment's batch
headers, never from record data."""

from __future__ import annotations

import dataclasses
import os

from seglog.bindings.spark.checkpoints import HIGH_WATERMARK_FILE, LOG_START_FILE, CheckpointCache
from seglog.bindings.spark.dataloss import corrupt_segment
from seglog.bindings.spark.logdirs import PartitionDir
from seglog.bindings.spark.segments import open_segment, segment_files, walk_problem


@dataclasses.dataclass(frozen=True, slots=True)
class ReadablePartition:
    """One partition as planning sees it: its segment files (base offsets and sizes) and the
    offset range that may be read."""

    topic: str
    partition: int
    dir: str
    segments: tuple[int, ...]
    sizes: tuple[int, ...]
    log_start: int
    log_end: int
    bound: int  # exclusive end of what may be read (log end or high watermark)

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    def segment_end(self, i: int) -> int:
        return self.segments[i + 1] if i + 1 < len(self.segments) else self.log_end


def describe_partition(
    pd: PartitionDir, read_up_to: str, ckpts: CheckpointCache, *, fail_on_data_loss: bool = True
) -> ReadablePartition:
    """What planning knows of ``pd``; ``read_up_to`` (``auto``, ``logEnd``, ``highWatermark``)
    decides whether the high watermark bounds what may be read."""
    bases, sizes = segment_files(pd.dir)
    starts = ckpts.get(pd.log_dir, LOG_START_FILE) or {}
    tp = (pd.topic, pd.partition)
    if bases:
        seg = open_segment(pd.dir, bases[-1])
        try:
            log_end = seg.next_offset
            # The log end comes from a header walk of the last segment's tail: a malformed
            # header there would hide every record after it.
            problem = walk_problem(seg, seg.offset_index.lookup(log_end)[1])
            if problem is not None:
                corrupt_segment(fail_on_data_loss, seg, problem, "the rest of the segment")
        finally:
            seg.close()
        log_start = max(bases[0], min(starts.get(tp, 0), log_end))
    else:
        log_start = log_end = starts.get(tp, 0)
    hws = ckpts.get(pd.log_dir, HIGH_WATERMARK_FILE)
    if read_up_to == "highWatermark" and hws is None:
        raise FileNotFoundError(
            f"seglog: readUpTo=highWatermark, but {os.path.join(pd.log_dir, HIGH_WATERMARK_FILE)} "
            "does not exist; use readUpTo=logEnd to read everything on disk"
        )
    if read_up_to == "logEnd" or hws is None:
        bound = log_end
    else:
        bound = min(log_end, max(hws.get(tp, log_start), log_start))
    return ReadablePartition(pd.topic, pd.partition, pd.dir, tuple(bases), tuple(sizes), log_start, log_end, bound)
