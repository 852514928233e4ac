"""The segment files of a partition directory, by name (Kafka's ``LogFileUtils`` and the
file steps of its ``LogLoader``): ``<base offset %020d>.log`` / ``.index`` / ``.timeindex`` /
``.txnindex``, with the suffixes of an operation under way — ``.deleted`` (removed once the delete
delay passes), ``.cleaned`` (the cleaner's output being written), ``.swap`` (cleaned output ready to
replace the segments it covers) — and the leftovers a crash in the middle of one leaves, which
:func:`remove_temporary_files` settles before a log is loaded."""

from __future__ import annotations

import os
import re

from seglog._native.segment import filename_prefix
from seglog.storage.records import batch_headers

DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex)((?:\.deleted|\.cleaned|\.swap)?)\Z", re.ASCII)


def remove_temporary_files(directory: str) -> None:
    """Kafka's first load step: delete ``.cleaned``/``.deleted`` leftovers and finish an
    interrupted swap (``.swap`` files replace the segments they overlap)."""
    swaps = []
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if name.endswith(".tmp"):
            os.unlink(path)
            continue
        m = SEGMENT_FILE.match(name)
        if not m:
            continue
        if m.group(3) in (DELETED_SUFFIX, CLEANED_SUFFIX):
            os.unlink(path)
        elif m.group(3) == SWAP_SUFFIX:
            swaps.append((int(m.group(1)), m.group(2), path))
    swap_logs = sorted(base for base, ext, _ in swaps if ext == "log")
    if swap_logs:
        # The swap's offset range is [min swap base, end of its data); remove the originals it
        # replaces, then rename the swap files into place.
        lo = swap_logs[0]
        # An empty swap (a cleaned group with no survivor) still replaces the segment at
        # its own base offset.
        hi = max(lo + 1, max(_swap_end(directory, base) for base in swap_logs))
        for name in os.listdir(directory):
            m = SEGMENT_FILE.match(name)
            if m and not m.group(3) and lo <= int(m.group(1)) < hi:
                os.unlink(os.path.join(directory, name))
        for base, ext, path in swaps:
            os.replace(path, path[: -len(SWAP_SUFFIX)])
    # Orphan index files (no .log) are stale: Kafka deletes them.
    logs = {
        int(m.group(1))
        for n in os.listdir(directory)
        if (m := SEGMENT_FILE.match(n)) and m.group(2) == "log" and not m.group(3)
    }
    for name in os.listdir(directory):
        m = SEGMENT_FILE.match(name)
        if m and not m.group(3) and m.group(2) != "log" and int(m.group(1)) not in logs:
            os.unlink(os.path.join(directory, name))


def _swap_end(directory: str, base: int) -> int:
    path = os.path.join(directory, filename_prefix(base) + ".log" + SWAP_SUFFIX)
    with open(path, "rb") as f:
        data = f.read()
    heads = batch_headers(data, allow_truncated=True)
    return heads[-1].last_offset + 1 if heads else base


def segment_bases(directory: str) -> list[int]:
    """The base offsets of the directory's segments (``.log`` files without a suffix), sorted."""
    bases = []
    for name in os.listdir(directory):
        m = SEGMENT_FILE.match(name)
        if m and m.group(2) == "log" and not m.group(3):
            bases.append(int(m.group(1)))
    return sorted(bases)


def index_missing(directory: str, base: int) -> bool:
    """Whether the segment at ``base`` lacks its offset or time index file."""
    prefix = os.path.join(directory, filename_prefix(base))
    return not (os.path.exists(prefix + ".index") and os.path.exists(prefix + ".timeindex"))


__all__ = [
    "CLEANED_SUFFIX",
    "DELETED_SUFFIX",
    "SEGMENT_FILE",
    "SWAP_SUFFIX",
    "index_missing",
    "remove_temporary_files",
    "segment_bases",
]
