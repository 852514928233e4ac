"""Kafka's keyed partitioner: murmur2 of the serialized key, made non-negative, modulo the
partition count.

Mirrors ``org.apache.kafka.common.utils.Utils.murmur2`` / ``Utils.toPositive`` and
``BuiltInPartitioner.partitionForKey`` (Java client). The hash is in ``include/murmur2.h``.

| step       | Kafka (Java)                               | here                                  |
|------------|--------------------------------------------|---------------------------------------|
| hash       | ``Utils.murmur2(byte[] key)`` -> int       | ``murmur2(key)`` -> signed int32      |
| positive   | ``Utils.toPositive(h)`` = ``h & 0x7fffffff`` | same                                  |
| partition  | ``toPositive(h) % numPartitions``          | ``partition_for_key(key, n)``         |
| null key   | not hashed (sticky partitioner)            | ``TypeError``; ``-1`` in the vector form |

``numPartitions`` is every partition of the topic, available or not. Keys are the serialized
bytes: an empty key is hashed like any other, ``None`` is not a key.

``group_by_partition`` orders a column of records by the partitions so computed, for the
producers that write a column at once (``send_batch``).
"""
from cpython.array cimport array, clone
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t

import array as _array
from operator import index as _operator_index

from murmur2 cimport seglog_murmur2, seglog_partition_for_key

cdef array _INT32_TEMPLATE = _array.array("i")
if _INT32_TEMPLATE.itemsize != 4:  # pragma: no cover - every supported platform has 32-bit int
    raise ImportError("array('i') is not 32 bits wide on this platform")
cdef array _INT64_TEMPLATE = _array.array("q")

cdef enum:
    _MAX_PARTITIONS = 0x7fffffff  # a Java int, as Kafka counts partitions


cdef uint32_t _check_partitions(object num_partitions) except 0:
    if type(num_partitions) is int and 1 <= num_partitions <= _MAX_PARTITIONS:
        return <uint32_t>num_partitions
    if isinstance(num_partitions, bool) or not hasattr(num_partitions, "__index__"):
        raise TypeError(f"num_partitions must be an int, not {type(num_partitions).__name__}")
    num_partitions = _operator_index(num_partitions)
    if num_partitions < 1 or num_partitions > _MAX_PARTITIONS:
        raise ValueError(
            f"num_partitions must be between 1 and {_MAX_PARTITIONS} (a topic's partition count), "
            f"got {num_partitions}")
    return <uint32_t>num_partitions


cdef int32_t _murmur2_view(const uint8_t[::1] key) noexcept:
    if key.shape[0] == 0:
        return seglog_murmur2(<const uint8_t *>b"", 0)
    return seglog_murmur2(&key[0], <size_t>key.shape[0])


cdef int32_t _murmur2_other(object key, str where) except? -1:
    # Anything but exact bytes: None and str get their own message, the rest goes through the
    # typed-memoryview conversion (bytearray, memoryview, mmap, uint8 arrays).
    if key is None:
        raise TypeError(
            f"{where} is None: Kafka does not hash null keys (the producer places keyless records "
            f"with its sticky partitioner); pass the serialized key bytes")
    if isinstance(key, str):
        raise TypeError(f"{where} is a str: pass the serialized key bytes, e.g. key.encode()")
    try:
        return _murmur2_view(key)
    except (TypeError, ValueError, BufferError) as exc:
        raise TypeError(f"{where} must be a bytes-like object of the serialized key: {exc}") from exc


def murmur2(key):
    """Return Kafka's murmur2 hash of ``key`` (bytes-like) as the signed 32-bit int Java gives.

    >>> murmur2(b"21")
    -973932308
    """
    if PyBytes_CheckExact(key):
        return seglog_murmur2(<const uint8_t *>PyBytes_AS_STRING(key), <size_t>PyBytes_GET_SIZE(key))
    return _murmur2_other(key, "key")


def partition_for_key(key, num_partitions):
    """Return the partition Kafka's producer picks for ``key`` among ``num_partitions``:
    ``(murmur2(key) & 0x7fffffff) % num_partitions``.

    ``key`` is the serialized key (bytes-like, may be empty); ``None`` raises ``TypeError``
    because Kafka never hashes a null key. ``num_partitions`` is the topic's partition count,
    1 .. 2**31 - 1.
    """
    cdef uint32_t n = _check_partitions(num_partitions)
    cdef int32_t h
    if PyBytes_CheckExact(key):
        return seglog_partition_for_key(<const uint8_t *>PyBytes_AS_STRING(key),
                                        <size_t>PyBytes_GET_SIZE(key), n)
    h = _murmur2_other(key, "key")
    return <int32_t>((<uint32_t>h & 0x7fffffffu) % n)


def partitions_for_keys(keys, num_partitions):
    """Return ``array('i')`` with ``partition_for_key(k, num_partitions)`` for every ``k`` in
    ``keys``, and ``-1`` where ``k`` is ``None`` (a keyless record: the caller places it).

    ``keys`` is a list (or any iterable, copied into one first) of serialized keys; ``bytes``
    items are hashed without any Python-level work, other bytes-like items through the buffer
    protocol.
    """
    cdef uint32_t n = _check_partitions(num_partitions)
    if keys is None or isinstance(keys, (bytes, bytearray, str)):
        raise TypeError(f"keys must be a list of serialized keys, not {type(keys).__name__}")
    cdef list seq = keys if type(keys) is list else list(keys)
    cdef Py_ssize_t i, count = len(seq)
    cdef array out = clone(_INT32_TEMPLATE, count, False)
    cdef int *res = out.data.as_ints
    cdef object item
    cdef int32_t h
    for i in range(count):
        # Only a buffer export of an exotic item can run Python code here; should it shrink
        # the list, stop rather than read past its end.
        if i >= len(seq):
            raise RuntimeError("keys changed size while partitions_for_keys was reading it")
        item = seq[i]
        if PyBytes_CheckExact(item):
            res[i] = seglog_partition_for_key(<const uint8_t *>PyBytes_AS_STRING(item),
                                              <size_t>PyBytes_GET_SIZE(item), n)
        elif item is None:
            res[i] = -1
        else:
            h = _murmur2_other(item, f"keys[{i}]")
            res[i] = <int32_t>((<uint32_t>h & 0x7fffffffu) % n)
    return out


def group_by_partition(const int32_t[::1] partitions, int32_t num_partitions, int32_t null_partition):
    """A stable counting sort of record indices by partition: returns ``(order, groups)``
    where ``order`` is an ``array('q')`` of record indices and ``groups`` a list of
    ``(partition, start, end)`` ranges of ``order``, in partition order. Entries of -1 (null
    keys) go to ``null_partition``.

    ``partitions`` is what :func:`partitions_for_keys` returns (any C-contiguous int32 buffer);
    the producers write each group as its partition's batches."""
    cdef Py_ssize_t n = partitions.shape[0], i
    cdef int32_t p
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    if not 0 <= null_partition < num_partitions:
        raise ValueError(f"null_partition {null_partition} is outside [0, {num_partitions})")
    cdef array counts = clone(_INT64_TEMPLATE, num_partitions + 1, True)
    cdef int64_t[::1] c = counts
    cdef array order = clone(_INT64_TEMPLATE, n, True)
    cdef int64_t[::1] o = order
    for i in range(n):
        p = partitions[i]
        if p == -1:
            p = null_partition
        elif p < 0 or p >= num_partitions:
            raise ValueError(f"partition {p} of record {i} is outside [0, {num_partitions})")
        c[p + 1] += 1
    for i in range(num_partitions):
        c[i + 1] += c[i]
    starts = counts.tolist()
    for i in range(n):
        p = partitions[i]
        if p == -1:
            p = null_partition
        o[c[p]] = i
        c[p] += 1
    groups = [(q, starts[q], starts[q + 1]) for q in range(num_partitions) if starts[q + 1] > starts[q]]
    return order, groups
