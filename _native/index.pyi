"""Kafka's sparse offset index (``.index``) and time index (``.timeindex``)."""

import os

from typing_extensions import Self, disjoint_base, final

DEFAULT_MAX_INDEX_SIZE: int

@disjoint_base
class _Index:
    """What both indexes share: the file, its mapping and its entry count."""

    ENTRY_SIZE: int

    def __init__(
        self,
        path: str | os.PathLike[str],
        base_offset: int,
        max_index_size: int = ...,
        writable: bool = True,
        entries: int = -1,
    ) -> None: ...
    @property
    def path(self) -> str: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def max_index_size(self) -> int: ...
    @property
    def writable(self) -> bool: ...
    @property
    def zero_tail_at_open(self) -> int: ...
    @property
    def views(self) -> int:
        """Number of live exported views."""
    @property
    def entries(self) -> int:
        """Number of valid entries."""
    @property
    def max_entries(self) -> int:
        """Entries the current file length holds (Kafka's maxEntries)."""
    @property
    def is_full(self) -> bool: ...
    @property
    def length(self) -> int:
        """File length in bytes."""
    @property
    def closed(self) -> bool: ...
    def reserve(self, entries: int) -> None: ...
    def sanity_check(self) -> None: ...
    def resize(self, new_size: int) -> bool: ...
    def trim_to_valid_size(self) -> bool: ...
    def truncate(self) -> None: ...
    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= ``offset`` (Kafka's ``truncateTo``)."""
    def view(self) -> memoryview: ...
    def flush(self) -> None: ...
    def close(self, trim: bool = True) -> None: ...
    def delete(self) -> bool: ...
    def rename_to(self, new_path: str | os.PathLike[str]) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc: object) -> None: ...
    def __len__(self) -> int: ...

@final
class OffsetIndex(_Index):
    """``.index``: (relative offset int32, position int32) entries."""

    def append(self, offset: int, position: int) -> None: ...
    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry with offset <= ``target_offset``, or
        (base_offset, 0)."""
    def entry(self, i: int) -> tuple[int, int]:
        """Entry ``i`` as (offset, position); negative ``i`` counts from the end."""
    @property
    def last_entry(self) -> tuple[int, int]: ...
    @property
    def last_offset(self) -> int: ...

@final
class TimeIndex(_Index):
    """``.timeindex``: (timestamp int64, relative offset int32) entries."""

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> bool: ...
    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= ``target_timestamp``, or
        (-1, base_offset)."""
    def entry(self, i: int) -> tuple[int, int]:
        """Entry ``i`` as (timestamp, offset); negative ``i`` counts from the end."""
    @property
    def last_entry(self) -> tuple[int, int]: ...
