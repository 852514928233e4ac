from array import array
from collections.abc import Iterable
from typing import SupportsIndex

from typing_extensions import Buffer

def murmur2(key: Buffer) -> int:
    """Kafka's murmur2 of the serialized key, as the signed 32-bit int Java returns."""

def partition_for_key(key: Buffer, num_partitions: SupportsIndex) -> int:
    """``(murmur2(key) & 0x7fffffff) % num_partitions``; ``TypeError`` for a ``None`` key."""

def partitions_for_keys(keys: Iterable[Buffer | None], num_partitions: SupportsIndex) -> array[int]:
    """``partition_for_key`` over ``keys``, ``-1`` where the key is ``None``."""

def group_by_partition(
    partitions: Buffer, num_partitions: int, null_partition: int
) -> tuple[array[int], list[tuple[int, int, int]]]:
    """A stable counting sort of record indices by partition: ``(order, groups)``, ``order`` an
    ``array('q')`` of record indices, ``groups`` the ``(partition, start, end)`` ranges of
    ``order`` in partition order; -1 entries (null keys) go to ``null_partition``."""
