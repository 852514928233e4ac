"""How many partitions the process's open-file limit can still hold (checked before a topic is
created or grown, so that a partition is refused instead of failing half-made)."""

from __future__ import annotations

import os
import resource

from seglog._native.segment import FDS_PER_SEGMENT, open_segment_limit, open_segments
from seglog.errors import InvalidPartitionsError

#: Descriptors left free by :func:`check_descriptor_limit` for sockets, checkpoint and metadata
#: files, and whatever else the process opens.
FD_HEADROOM = 64


def check_descriptor_limit(new_partitions: int, action: str) -> None:
    """Refuse (``InvalidPartitionsError``) ``new_partitions`` more partitions when the process's
    open-file limit cannot hold them: each keeps its active segment's files open
    (``FDS_PER_SEGMENT`` descriptors), on top of the descriptors open now (``/proc/self/fd``),
    the room the open-segment cache may still take for older segments, and ``FD_HEADROOM``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return
    try:
        in_use = len(os.listdir("/proc/self/fd")) - 1  # less the one listing it
    except OSError:
        return  # no /proc: nothing to count by
    cache = max(0, open_segment_limit() - open_segments()) * FDS_PER_SEGMENT
    need = new_partitions * FDS_PER_SEGMENT
    free = soft - in_use - cache - FD_HEADROOM
    if need <= free:
        return
    fit = max(0, free // FDS_PER_SEGMENT)
    raise InvalidPartitionsError(
        f"cannot {action}: each partition keeps {FDS_PER_SEGMENT} files open, {need} descriptors "
        f"in all, but the open-file limit RLIMIT_NOFILE is {soft} (hard limit {hard}) and the "
        f"process has {in_use} open, keeps room for {cache} for older segments and {FD_HEADROOM} "
        f"for sockets and other files: at most {fit} more partition{'s' if fit != 1 else ''} fit. "
        "Raise the limit (`ulimit -n`, LimitNOFILE= in a systemd unit) or create fewer partitions",
        limit=soft,
    )


__all__ = ["FD_HEADROOM", "check_descriptor_limit"]
