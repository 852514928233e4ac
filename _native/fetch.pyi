"""The fetch batching loop: whole batches from a start offset, within byte limits."""

import threading
from typing import ClassVar

from typing_extensions import disjoint_base

from seglog._native.segment import Segment

@disjoint_base
class FetchSlice:
    """Whole batches ``[position, position + length)`` of one segment's ``.log``."""

    @property
    def segment(self) -> Segment: ...
    @property
    def position(self) -> int: ...
    @property
    def length(self) -> int: ...
    @property
    def path(self) -> str: ...
    @property
    def fd(self) -> int:
        """The segment's ``.log`` descriptor, valid until the segment closes it."""
    def view(self) -> memoryview: ...
    def dup_fd(self) -> int:
        """A new descriptor of the segment's ``.log``; the caller closes it."""

def fetch_partition(
    segments: list[Segment], start_offset: int, max_bytes: int, upper_bound: int, min_one_batch: bool = True
) -> list[FetchSlice]:
    """Slices of whole batches holding offsets from ``start_offset`` up to (not including)
    ``upper_bound``, at most ``max_bytes`` in total."""

@disjoint_base
class LogReadResult:
    """Whole batches from a log read, as zero-copy slices of the segment files, with the log's
    offsets at the time of the read."""

    def __init__(
        self,
        slices: tuple[FetchSlice, ...],
        start_offset: int,
        high_watermark: int,
        log_start_offset: int,
        log_end_offset: int,
    ) -> None: ...
    @property
    def slices(self) -> tuple[FetchSlice, ...]: ...
    @property
    def start_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def size(self) -> int: ...
    def views(self) -> list[memoryview]: ...
    def to_bytes(self) -> bytes: ...
    def __bool__(self) -> bool: ...
    def __eq__(self, value: object, /) -> bool: ...
    __hash__: ClassVar[None]  # type: ignore[assignment]

@disjoint_base
class LogCore:
    """The base of ``seglog.storage.log.Log``: the fields its reads use in native slots, and
    its ``read`` and ``offset_for_timestamp`` as native methods."""

    _segments: list[Segment]
    _lock: threading.RLock
    _high_watermark: int
    log_start_offset: int
    def read(
        self,
        offset: int,
        max_bytes: int = 1048576,
        *,
        upper_bound: str | int = "high_watermark",
        min_one_batch: bool = True,
    ) -> LogReadResult:
        """Whole batches holding ``offset`` onwards, at most ``max_bytes`` (but at least one
        batch when ``min_one_batch``), never past the upper bound: ``"high_watermark"``
        (consumers), ``"log_end"`` (followers) or an explicit offset. Raises
        ``OffsetOutOfRangeError`` outside [log start, log end]."""
    def offset_for_timestamp(self, timestamp: int, *, upper_bound: int | None = None) -> tuple[int, int] | None:
        """Kafka's ListOffsets: the first offset whose timestamp is >= ``timestamp``, with that
        record's timestamp; ``-2`` earliest, ``-1`` latest (the high watermark), ``-3`` the
        record with the largest timestamp. None when no record qualifies."""

def fetch_many(requests: list[tuple[list[Segment], int, int, int]], max_total_bytes: int) -> list[list[FetchSlice]]:
    """Several partitions ``(segments, start_offset, partition_max_bytes, upper_bound)`` under
    one byte limit; one list of FetchSlice per request, in order."""
