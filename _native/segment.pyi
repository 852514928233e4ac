"""One log segment: ``<base>.log`` with its ``.index``, ``.timeindex`` (and ``.txnindex``)."""

import os
from typing import ClassVar, Final, overload

from typing_extensions import Buffer, Self, disjoint_base, final

from seglog._native.index import OffsetIndex as OffsetIndex
from seglog._native.index import TimeIndex as TimeIndex
from seglog._native.records import BatchHeader

NO_PARTITION_LEADER_EPOCH: int
ALLOCATE_AHEAD: int
FDS_PER_SEGMENT: int
MIN_OPEN_SEGMENTS: int
MAX_OPEN_SEGMENTS: int
OPEN_SEGMENTS_FD_SHARE: int

def filename_prefix(offset: int) -> str:
    """Kafka's ``LogFileUtils.filenamePrefixFromOffset``: 20 digits, zero-padded."""

def allocates_ahead(path: str | os.PathLike[str]) -> bool:
    """Whether segments under ``path`` get disk blocks allocated ahead of their end of file."""

def default_open_segment_limit() -> int: ...
def open_segment_limit(limit: int | None = None) -> int:
    """The process-wide bound on inactive segments with open files; with ``limit``, set it
    first (``-1``: the default)."""

def open_segments() -> int:
    """How many inactive segments have their files open now."""

def out_of_files_error(path: str | os.PathLike[str], exc: OSError) -> OSError:
    """The storage error for EMFILE, ENFILE or ENOMEM opening ``path``."""

@disjoint_base
class Mapping:
    """A read-only mapping of the first bytes of a file; ``exports`` counts live views."""

    @property
    def exports(self) -> int: ...

# The batches a segment's header walks return: the one batch header class.
BatchInfo = BatchHeader

@disjoint_base
class RecoveryResult:
    """What ``Segment.recover`` kept and why it stopped."""

    @property
    def valid_bytes(self) -> int: ...
    @property
    def truncated_bytes(self) -> int: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def batches(self) -> int: ...
    @property
    def reason(self) -> str | None:
        """Why recovery cut the log (None when every byte was valid)."""
    @property
    def epoch_starts(self) -> list[tuple[int, int]]:
        """``(leader epoch, first offset)`` in log order."""
    @property
    def batch_infos(self) -> list[BatchInfo] | None:
        """Every kept batch, when recovery was asked to collect them."""

@disjoint_base
class AppendInfo:
    """What one ``Segment.append`` wrote."""

    @property
    def first_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def offset_of_max_timestamp(self) -> int: ...
    @property
    def position(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def batches(self) -> int: ...
    @property
    def records(self) -> int: ...

@disjoint_base
class LogAppendInfo:
    """What a log's append wrote (``Log.append``)."""

    def __init__(
        self,
        first_offset: int,
        last_offset: int,
        max_timestamp: int,
        offset_of_max_timestamp: int,
        log_append_time: int,
        records: int,
        batches: int,
        size: int,
        log_start_offset: int,
        duplicate: bool = False,
    ) -> None: ...
    @property
    def first_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def offset_of_max_timestamp(self) -> int: ...
    @property
    def log_append_time(self) -> int: ...
    @property
    def records(self) -> int: ...
    @property
    def batches(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def duplicate(self) -> bool: ...
    def _fields(self) -> tuple[int, int, int, int, int, int, int, int, int, bool]: ...
    def __eq__(self, value: object, /) -> bool: ...
    __hash__: ClassVar[None]  # type: ignore[assignment]

def log_append_info(info: AppendInfo, log_append_time: int, log_start_offset: int) -> LogAppendInfo: ...

ROLL_SIZE: Final[str]
ROLL_INDEX_FULL: Final[str]
ROLL_OFFSET_OVERFLOW: Final[str]
ROLL_AGE: Final[str]
ROLL_CHECK_WALL_AGE: Final[str]

@disjoint_base
class AppendRules:
    """A log's rules for its appends, applied by ``Segment.append`` before it writes."""

    def __init__(
        self, where: str, log_dir: str, max_message_bytes: int, segment_bytes: int, max_segment_ms: int
    ) -> None: ...
    @property
    def where(self) -> str: ...
    @property
    def log_dir(self) -> str: ...
    @property
    def max_message_bytes(self) -> int: ...
    @property
    def segment_bytes(self) -> int: ...
    @property
    def max_segment_ms(self) -> int: ...

@final
class Segment:
    """One segment of a partition log."""

    def __init__(
        self,
        dir: str | os.PathLike[str],
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10485760,
        segment_bytes: int = 1073741824,
        create: bool = False,
        read_only: bool = False,
        suffix: str = "",
        allocate_ahead: int = ...,
        lazy: bool = False,
    ) -> None: ...
    @property
    def dir(self) -> str | os.PathLike[str]: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def log_path(self) -> str: ...
    @property
    def index_interval_bytes(self) -> int: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def bytes_since_last_index_entry(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    @property
    def suffix(self) -> str: ...
    @property
    def allocated_to(self) -> int: ...
    @property
    def allocate_step(self) -> int: ...
    @property
    def evictable(self) -> bool: ...
    @evictable.setter
    def evictable(self, value: bool) -> None: ...
    @property
    def files_open(self) -> bool: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def max_timestamp_so_far(self) -> int: ...
    @property
    def offset_of_max_timestamp(self) -> int: ...
    @property
    def rolling_based_timestamp(self) -> int: ...
    @property
    def offset_index(self) -> OffsetIndex: ...
    @property
    def time_index(self) -> TimeIndex: ...
    @property
    def largest_timestamp(self) -> int: ...
    @property
    def index_full(self) -> bool: ...
    def live_views(self) -> int: ...
    def can_convert_to_relative_offset(self, offset: int) -> bool: ...
    def fileno(self) -> int: ...
    def dup_fileno(self) -> int: ...
    def __len__(self) -> int: ...
    @overload
    def append(
        self,
        batches: Buffer,
        assign_from: int = -1,
        leader_epoch: int = -1,
        verify_crc: bool = True,
        rules: None = None,
        roll_jitter_ms: int = 0,
    ) -> AppendInfo:
        """Append whole v2 batches; structure and (with ``verify_crc``) CRCs are checked before
        anything is written."""
    @overload
    def append(
        self,
        batches: Buffer,
        assign_from: int,
        leader_epoch: int,
        verify_crc: bool,
        rules: AppendRules,
        roll_jitter_ms: int = 0,
    ) -> AppendInfo | str:
        """With the log's rules: the log's per-batch checks too, and nothing written but the
        reason (``ROLL_*``) when Kafka's ``shouldRoll`` says the log must roll first."""
    def release_allocated(self) -> None: ...
    def view(self, position: int = 0, length: int = -1) -> memoryview: ...
    def translate_offset(self, offset: int, start_position: int = 0) -> BatchInfo | None:
        """The first batch whose last offset is >= ``offset``; None if no batch holds it."""
    def read(
        self, start_offset: int, max_bytes: int, max_position: int = -1, min_one_batch: bool = True
    ) -> memoryview | None: ...
    def batch_end(self, start: int, max_bytes: int, max_position: int, min_one_batch: bool) -> int: ...
    def fetch_span(
        self, offset: int, max_bytes: int, upper_bound: int, min_one_batch: bool
    ) -> tuple[int, int, bool] | None:
        """``(start, end, stop)`` of the whole batches from the one holding ``offset`` within
        ``max_bytes`` and below ``upper_bound``; None if no batch holds ``offset`` or later."""
    def batches(self, start_position: int = 0, verify_crc: bool = False) -> list[BatchInfo]: ...
    def transaction_batches(self, start_position: int = 0) -> list[BatchInfo]: ...
    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int = 0) -> BatchInfo | None: ...
    def first_at_or_after(
        self, timestamp: int, starting_offset: int = 0, bound: int = ...
    ) -> tuple[int, int] | None: ...
    def recover(self, collect_batches: bool = False, max_batch_size: int = -1) -> RecoveryResult: ...
    def _recover(self, collect_batches: bool, max_batch_size: int) -> RecoveryResult: ...
    def truncate_to(self, offset: int) -> int: ...
    def sanity_check(self) -> None: ...
    def flush(self) -> None: ...
    def on_become_inactive(self) -> None: ...
    def close(self) -> None: ...
    def close_without_trim(self) -> None: ...
    def change_suffix(self, old: str, new: str) -> None: ...
    def delete(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc: object) -> None: ...

def segments_first_at_or_after(
    segments: list[Segment], timestamp: int, start: int, bound: int
) -> tuple[int, int] | None:
    """``(offset, timestamp)`` of the first record in ``[start, bound)`` whose timestamp is >=
    ``timestamp`` across a log's segments, oldest first; None if there is none."""
