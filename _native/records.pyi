"""Kafka record batches: encode, decode (records or Arrow-layout columns), validate, and read
batch headers. Arbitrary input raises ``CorruptRecordError`` naming the byte position."""

from collections.abc import Iterable, Sequence
from typing import Any, TypeAlias, overload

from typing_extensions import Buffer, Self, disjoint_base, final

NO_TIMESTAMP_TYPE: int
CREATE_TIME: int
LOG_APPEND_TIME: int
CODEC_NAMES: dict[str, int]
CONTROL_TYPES: dict[int, str]
DEFAULT_MAX_DECOMPRESSED: int

# A column of keys, values or timestamps: a list (or other sequence), a NumPy array or a
# pyarrow array.
_Column: TypeAlias = Sequence[Any] | Any
_Aborted: TypeAlias = Iterable[tuple[int, int, int]]

def codec_id(compression: str | int | None) -> int:
    """The codec id (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd) of a name or id."""

@overload
def encode_batch(
    values: _Column,
    *,
    keys: _Column | None = None,
    timestamps: int | _Column | None = None,
    headers: Sequence[Sequence[tuple[str | bytes, bytes | None]] | None] | None = None,
    base_offset: int = 0,
    compression: str | int | None = 0,
    compression_level: int | None = None,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    log_append_time: int | None = None,
    allow_negative_timestamps: bool = False,
    into: None = None,
) -> bytes:
    """One RecordBatch v2 holding ``values`` (with ``keys``, ``timestamps`` and ``headers``)."""

@overload
def encode_batch(
    values: _Column,
    *,
    keys: _Column | None = None,
    timestamps: int | _Column | None = None,
    headers: Sequence[Sequence[tuple[str | bytes, bytes | None]] | None] | None = None,
    base_offset: int = 0,
    compression: str | int | None = 0,
    compression_level: int | None = None,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    log_append_time: int | None = None,
    allow_negative_timestamps: bool = False,
    into: bytearray,
) -> bytearray:
    """The same batch written into ``into`` (resized to it), which is returned."""

def encode_control_batch(
    control_type: int,
    *,
    base_offset: int = 0,
    timestamp: int,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transaction marker batch (0 ABORT, 1 COMMIT)."""

@final
class Record:
    """One decoded record (any magic)."""

    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def timestamp_type(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> list[tuple[str, bytes | None]]: ...
    @property
    def control_type(self) -> int | None: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def sequence(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def magic(self) -> int: ...
    def _tuple(self) -> tuple[object, ...]: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@disjoint_base
class BatchHeader:
    """The header of one batch (any magic) and where it lies in the buffer."""

    @property
    def position(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def magic(self) -> int: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def partition_leader_epoch(self) -> int: ...
    @property
    def crc(self) -> int: ...
    @property
    def attributes(self) -> int: ...
    @property
    def base_timestamp(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def records_count(self) -> int: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def compression(self) -> int: ...
    @property
    def timestamp_type(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def last_sequence(self) -> int: ...

def batch_headers(
    buf: Buffer, start: int = 0, end: int = -1, *, verify_crc: bool = False, allow_truncated: bool = False
) -> list[BatchHeader]:
    """Headers of the batches in ``buf[start:end]`` without decoding records."""

def legacy_base_offset(entry: Buffer) -> tuple[int, int]:
    """(base offset, record count) of the one legacy (v0/v1) entry in ``entry``."""

def validate_batches(
    buf: Buffer,
    where: str,
    *,
    now: int,
    log_append_time: bool = False,
    before_max_ms: int = ...,
    after_max_ms: int = ...,
    compacted: bool = False,
    verify_crc: bool = True,
    walk_compressed: bool = True,
    max_batch_size: int = -1,
    produce_request: bool = False,
    max_decompressed: int = ...,
) -> list[BatchHeader]:
    """Check the batches of an append to ``where`` as a broker does; their headers."""

def decode_records(
    buf: Buffer,
    *,
    verify_crc: bool = True,
    include_control: bool = False,
    allow_truncated: bool = False,
    min_offset: int | None = None,
    max_offset: int | None = None,
    max_decompressed: int = ...,
    aborted: _Aborted | None = None,
) -> list[Record]:
    """Every record in ``buf`` (any number of batches, any magic)."""

@final
class RecordIterator:
    """Iterates records batch by batch: memory stays bounded by one batch's records."""

    def __iter__(self) -> Self: ...
    def __next__(self) -> Record: ...

def iter_records(
    buf: Buffer,
    *,
    verify_crc: bool = True,
    include_control: bool = False,
    allow_truncated: bool = False,
    min_offset: int | None = None,
    max_offset: int | None = None,
    max_decompressed: int = ...,
    aborted: _Aborted | None = None,
) -> RecordIterator:
    """Iterate the records in ``buf`` lazily, one batch decoded at a time."""

@final
class NativeBuffer:
    """An owned block of memory exported through the buffer protocol (read-only)."""

    @property
    def nbytes(self) -> int: ...
    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

@final
class Columns:
    """Decoded records as Arrow-layout buffers (None where a column was not asked for)."""

    @property
    def count(self) -> int: ...
    @property
    def offsets(self) -> NativeBuffer: ...
    @property
    def timestamps(self) -> NativeBuffer: ...
    @property
    def timestamp_types(self) -> NativeBuffer: ...
    @property
    def leader_epochs(self) -> NativeBuffer: ...
    @property
    def key_offsets(self) -> NativeBuffer | None: ...
    @property
    def key_data(self) -> NativeBuffer | None: ...
    @property
    def key_validity(self) -> NativeBuffer | None: ...
    @property
    def value_offsets(self) -> NativeBuffer | None: ...
    @property
    def value_data(self) -> NativeBuffer | None: ...
    @property
    def value_validity(self) -> NativeBuffer | None: ...
    @property
    def header_offsets(self) -> NativeBuffer | None: ...
    @property
    def header_key_offsets(self) -> NativeBuffer | None: ...
    @property
    def header_key_data(self) -> NativeBuffer | None: ...
    @property
    def header_value_offsets(self) -> NativeBuffer | None: ...
    @property
    def header_value_data(self) -> NativeBuffer | None: ...
    @property
    def header_value_validity(self) -> NativeBuffer | None: ...
    @property
    def key_null_count(self) -> int: ...
    @property
    def value_null_count(self) -> int: ...
    @property
    def header_value_null_count(self) -> int: ...
    @property
    def header_count(self) -> int: ...
    @property
    def key_views(self) -> NativeBuffer | None: ...
    @property
    def value_views(self) -> NativeBuffer | None: ...
    @property
    def view_buffers(self) -> tuple[memoryview, NativeBuffer] | None:
        """With ``views=True``: the input, then the bytes copied out of compressed batches."""
    def __len__(self) -> int: ...
    def to_arrow(self) -> Any:
        """A ``pyarrow.RecordBatch`` over these buffers (pyarrow is an optional dependency)."""

def decode_columns(
    buf: Buffer,
    *,
    keys: bool = True,
    headers: bool = True,
    verify_crc: bool = True,
    include_control: bool = False,
    allow_truncated: bool = False,
    min_offset: int | None = None,
    max_offset: int | None = None,
    max_decompressed: int = ...,
    values: bool = True,
    aborted: _Aborted | None = None,
    views: bool = False,
) -> Columns:
    """The records in ``buf`` as Arrow-layout columns."""

def first_at_or_after(
    buf: Buffer,
    timestamp: int,
    *,
    min_offset: int | None = None,
    max_offset: int | None = None,
    verify_crc: bool = False,
    max_decompressed: int = ...,
) -> tuple[int, int] | None:
    """``(offset, timestamp)`` of the first data record whose timestamp is >= ``timestamp``."""
