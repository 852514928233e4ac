"""The rows of a DataFrame being written, as the writer appends them: each row's partition
(the ``partition`` column, Kafka's murmur2 of the key, or sticky), the row ranges of one record
batch each, and the ``headers`` column as lists of pairs."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from seglog.client.partitioner import partitions_for_keys
from seglog.errors import UnknownTopicOrPartitionError


def batch_cuts(values: pa.Array, keys: pa.Array | None, target: int) -> list[tuple[int, int]]:
    """Row ranges of about ``target`` key + value bytes each (a batch ends with the row that
    crosses a multiple of ``target``, so it holds at most ``target`` plus one row)."""
    n = len(values)
    if n == 0:
        return []
    sizes = pc.fill_null(pc.binary_length(values), 0).cast(pa.int64())
    if keys is not None:
        sizes = pc.add(sizes, pc.fill_null(pc.binary_length(keys), 0).cast(pa.int64()))
    sizes = pc.add(sizes, 16)  # record framing, roughly
    ids = pc.divide(pc.subtract(pc.cumulative_sum(sizes), 1), target)
    ends = pc.run_end_encode(ids).run_ends.to_pylist()
    out, start = [], 0
    for e in ends:
        out.append((start, e))
        start = e
    return out


def row_partitions(rows: pa.RecordBatch, count: int, sticky: int, topic: str) -> pa.Array:
    """The partition of every row: the ``partition`` column, else Kafka's murmur2 of the key,
    else ``sticky`` (one partition for the keyless rows of an input batch)."""
    names = rows.schema.names
    n = rows.num_rows
    given = rows.column(names.index("partition")).cast(pa.int32()) if "partition" in names else None
    if given is not None and given.null_count == 0:
        parts = given
    else:
        if "key" in names:
            keys = rows.column(names.index("key"))
            if pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type):
                keys = keys.cast(pa.binary())
            hashed = pa.array(partitions_for_keys(keys.to_pylist(), count), pa.int32())
            by_key = pc.if_else(pc.equal(hashed, -1), sticky, hashed)
        else:
            by_key = pa.repeat(pa.scalar(sticky, pa.int32()), n)
        parts = by_key if given is None else pc.coalesce(given, by_key)
    lo, hi = pc.min_max(parts).values()
    if lo.as_py() < 0 or hi.as_py() >= count:
        bad = lo.as_py() if lo.as_py() < 0 else hi.as_py()
        raise UnknownTopicOrPartitionError(
            f"seglog: a row asks for partition {bad} of topic {topic!r}, which has {count} "
            f"partition(s) (0..{count - 1}); set numPartitions to create a new topic with more"
        )
    return parts


def header_lists(arr: pa.Array) -> list[Any]:
    """The ``headers`` column as ``encode_batch`` takes it: per row None or (key, value bytes)
    pairs."""
    out: list[Any] = []
    for rec in arr.to_pylist():
        if not rec:
            out.append(None)
        else:
            out.append([(h["key"], h["value"].encode() if isinstance(h["value"], str) else h["value"]) for h in rec])
    return out
