"""``failOnDataLoss``: offsets that are gone or a segment that is corrupt fail the read, or
(``failOnDataLoss=false``) are skipped with a warning on the ``seglog.spark`` logger."""

from __future__ import annotations

import logging

from seglog._native.segment import Segment
from seglog.bindings.spark.options import ReadOptions
from seglog.errors import CorruptRecordError, OffsetOutOfRangeError

log = logging.getLogger("seglog.spark")


def data_loss(ro: ReadOptions, message: str, offset: int | None = None) -> None:
    """Offsets asked for are gone: fail (``failOnDataLoss=true``) or warn and go on."""
    if ro.fail_on_data_loss:
        raise OffsetOutOfRangeError(f"seglog: {message}; set failOnDataLoss=false to skip", offset=offset)
    log.warning("seglog: %s; skipping (failOnDataLoss=false)", message)


def corrupt_segment(fail_on_data_loss: bool, seg: Segment, problem: tuple[str, int], what: str) -> None:
    """A malformed segment: fail the read (``failOnDataLoss=true``) naming the file and byte,
    or warn that ``what`` is skipped."""
    msg, pos = problem
    if fail_on_data_loss:
        raise CorruptRecordError(
            f"seglog: {msg}; set failOnDataLoss=false to skip {what}", path=seg.log_path, position=pos
        )
    log.warning("seglog: %s: %s at byte %d; skipping %s (failOnDataLoss=false)", seg.log_path, msg, pos, what)
