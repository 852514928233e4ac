from collections.abc import Callable
from typing import Any, Final, Literal, TypeAlias, final

from typing_extensions import Buffer, Self

from seglog._native.builder import BatchBuilder

_Headers: TypeAlias = list[tuple[str | bytes, Buffer | None]] | tuple[tuple[str | bytes, Buffer | None], ...] | None

@final
class RecordMetadata:
    """Where a produced record landed (Kafka's ``RecordMetadata``)."""

    topic: Final[str]
    partition: Final[int]
    offset: Final[int]
    timestamp: Final[int]
    serialized_key_size: Final[int]
    serialized_value_size: Final[int]
    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        timestamp: int,
        serialized_key_size: int = -1,
        serialized_value_size: int = -1,
    ) -> None: ...
    def has_offset(self) -> bool: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class RecordFuture:
    """The pending result of one ``send`` (Kafka's ``FutureRecordMetadata``)."""

    def done(self) -> bool: ...
    def get(self, timeout: float | None = None) -> RecordMetadata:
        """The record's :class:`RecordMetadata`, once its batch is appended (raises the append's
        error); waits up to ``timeout`` seconds (None: as long as it takes), then raises
        ``TimeoutError``."""

    def result(self, timeout: float | None = None) -> RecordMetadata: ...
    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The append's error, or None once the record is appended; waits as :meth:`get`."""

    def succeeded(self) -> bool: ...
    def failed(self) -> bool: ...
    def add_callback(self, fn: Callable[[RecordMetadata], object]) -> Self:
        """Call ``fn(metadata)`` once the batch is appended (now, if it already is)."""

    def add_errback(self, fn: Callable[[BaseException], object]) -> Self:
        """Call ``fn(exception)`` if the batch fails (now, if it already has)."""

    def add_done_callback(self, fn: Callable[[RecordFuture], object]) -> None:
        """Call ``fn(future)`` once the batch is appended or has failed (now, if it is done), as
        ``concurrent.futures.Future.add_done_callback`` does."""

    topic: Final[str]
    partition: Final[int]

@final
class ProducerBatch(BatchBuilder):
    """A batch the producer fills for one partition (Kafka's ``ProducerBatch``)."""

    topic: str | None
    partition: int
    sender: Callable[[ProducerBatch, float | None], object] | None
    base_offset: int
    log_append_time: int
    error: BaseException | None
    done: bool
    waiters: list[Any] | None
    created_ms: int
    base_sequence: int
    def __init__(
        self,
        limit: int = 16384,
        *,
        max_record: int = -1,
        base_timestamp: int | None = None,
        initial_capacity: int = -1,
        topic: str | None = None,
        partition: int = -1,
    ) -> None: ...
    @staticmethod
    def for_partition(
        topic: str, partition: int, limit: int, max_record: int, initial_capacity: int = -1
    ) -> ProducerBatch:
        """``ProducerBatch(limit, max_record=..., initial_capacity=..., topic=...,
        partition=...)``, without the cost of keyword arguments."""

    def try_append(
        self, timestamp: int, key: Buffer | None, value: Buffer | None, headers: _Headers = None
    ) -> RecordFuture | None:
        """Append a record with the next offset delta and return its future, or None when the
        batch is not empty and the record would take it past ``limit``."""

    def complete(self, base_offset: int, log_append_time: int = -1) -> None:
        """Record the append's outcome and run the waiting callbacks."""

    def fail(self, error: BaseException) -> None:
        """Record the append's error and run the waiting callbacks."""

@final
class Generation:
    """A counter the store bumps whenever topics change."""

    value: int

@final
class TopicSlots:
    """The producer's state for one topic."""

    name: str
    num_partitions: int
    batches: list[ProducerBatch | None]
    sticky: int
    compact: bool
    codec: int
    level: int | None
    max_batch: int
    parts: list[Any] | None
    generation: int
    def __init__(
        self,
        name: str,
        num_partitions: int,
        sticky: int,
        compact: bool,
        max_batch: int,
        codec: int = 0,
        level: int | None = None,
    ) -> None: ...

@final
class ReentrantLock:
    """A re-entrant lock (``threading.RLock``'s interface) whose acquire/release are C calls."""

    def acquire(self) -> bool: ...
    def release(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc: object) -> Literal[False]:
        """Release the lock; exceptions are never suppressed."""

@final
class Accumulator:
    """``send`` for the producer (Kafka's ``RecordAccumulator.append``)."""

    topics: dict[str, TopicSlots]
    def __init__(
        self,
        lock: ReentrantLock,
        generation: Generation,
        new_batch: Callable[[TopicSlots, int], ProducerBatch],
        write: Callable[[ProducerBatch], object],
        slots_for: Callable[[str], TopicSlots],
        clock_ms: Callable[[], int] | None,
        batch_size: int,
        linger_zero: bool,
        ignore_keys: bool,
    ) -> None: ...
    def send(
        self,
        topic: str,
        value: Buffer | None,
        key: Buffer | None = None,
        headers: _Headers = None,
        timestamp: int | None = None,
        partition: int | None = None,
    ) -> RecordFuture | RecordMetadata:
        """Append one record to its partition's open batch; its future, or with
        ``linger.ms=0`` its metadata once written."""
