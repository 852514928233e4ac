"""A partition dir's segment files as the source reads them: listed by name and size, opened
read-only, their batch headers checked."""

from __future__ import annotations

import os
import re

from seglog._native.segment import Segment
from seglog.errors import CorruptRecordError
from seglog.storage.records import batch_headers

_SEGMENT_LOG = re.compile(r"^(\d{20})\.log$")


def segment_files(d: str) -> tuple[list[int], list[int]]:
    """(base offsets, sizes) of the ``.log`` files of partition dir ``d``, by base offset."""
    bases, sizes = [], []
    with os.scandir(d) as it:
        for e in it:
            m = _SEGMENT_LOG.match(e.name)
            if m:
                bases.append(int(m.group(1)))
                sizes.append(e.stat().st_size)
    order = sorted(range(len(bases)), key=bases.__getitem__)
    return [bases[i] for i in order], [sizes[i] for i in order]


def open_segment(d: str, base: int) -> Segment:
    """The segment of partition dir ``d`` at ``base``, read-only (every open goes through here)."""
    return Segment(d, base, read_only=True)


def walk_problem(seg: Segment, start: int) -> tuple[str, int] | None:
    """(message, byte) when the batch headers from position ``start`` of ``seg`` stop at a
    malformed header before the end of the file. None when they reach the end, or when what
    remains is a torn last batch: a broker may be writing it (Kafka's own file reader ends
    there too)."""
    end = seg.batch_end(start, 1 << 62, -1, True)
    if end >= seg.size:
        return None
    with seg.view(end, seg.size - end) as rest:
        try:
            batch_headers(rest, allow_truncated=True)
        except CorruptRecordError as exc:
            return re.sub(r" \(at byte \d+\)$", "", exc.message), end
    return None
