import sys
from typing import Final, TypeAlias

from typing_extensions import Buffer, disjoint_base

_Headers: TypeAlias = list[tuple[str | bytes, Buffer | None]] | tuple[tuple[str | bytes, Buffer | None], ...] | None

@disjoint_base
class BatchBuilder:
    """One RecordBatch v2 under construction (Kafka's ``MemoryRecordsBuilder``)."""

    limit: Final[int]
    max_record: Final[int]
    count: Final[int]
    base_timestamp: Final[int]
    max_timestamp: Final[int]
    sealed: Final[bool]
    size: Final[int]  # bytes of the batch so far, header included (uncompressed)
    last_offset_delta: Final[int]
    def __init__(
        self,
        limit: int = 16384,
        *,
        max_record: int = -1,
        base_timestamp: int | None = None,
        initial_capacity: int = -1,
    ) -> None: ...
    def __len__(self) -> int: ...
    def append(self, timestamp: int, key: Buffer | None, value: Buffer | None, headers: _Headers = None) -> None:
        """Append a record with the next offset delta, whatever the size."""

    def append_with_delta(
        self,
        offset_delta: int,
        timestamp: int,
        key: Buffer | None,
        value: Buffer | None,
        headers: _Headers = None,
    ) -> None:
        """Append a record at an explicit offset delta (strictly increasing)."""

    def build(
        self,
        *,
        base_offset: int = 0,
        compression: int | str | None = 0,
        compression_level: int | None = None,
        partition_leader_epoch: int = -1,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        is_control: bool = False,
        log_append_time: int | None = None,
        max_timestamp: int | None = None,
        last_offset_delta: int | None = None,
        delete_horizon: bool = False,
    ) -> memoryview | bytearray:
        """Seal the batch and return it: a memoryview of the builder's memory when
        uncompressed, a ``bytearray`` when compressed."""

    def discard(self) -> None:
        """Free the batch's memory once it is written."""

    if sys.version_info >= (3, 12):
        def __buffer__(self, flags: int, /) -> memoryview: ...
        def __release_buffer__(self, buffer: memoryview, /) -> None: ...
