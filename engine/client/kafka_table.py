"""Records as an Arrow table with the columns of Spark's Kafka source: ``key``, ``value``,
``topic``, ``partition``, ``offset``, ``timestamp`` (ms, UTC), ``timestampType`` and, when asked
for, ``headers`` — what :meth:`seglog.client.consumer.Consumer.poll_columns` returns.

``pyarrow`` is an optional dependency: it is imported when a table is first made.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from seglog.storage.records import decode_columns

if TYPE_CHECKING:
    from seglog.storage.topic import TopicPartition

__all__ = ["columns_table", "constant_array", "empty_table", "kafka_schema"]

_SCHEMAS: dict[bool, Any] = {}


def kafka_schema(headers: bool) -> Any:
    """The table's schema (with a ``headers`` column or not), made once."""
    s = _SCHEMAS.get(headers)
    if s is None:
        import pyarrow as pa  # optional dependency, imported on first use

        fields = [
            pa.field("key", pa.binary()),
            pa.field("value", pa.binary()),
            pa.field("topic", pa.string()),
            pa.field("partition", pa.int32()),
            pa.field("offset", pa.int64()),
            pa.field("timestamp", pa.timestamp("ms", tz="UTC")),
            pa.field("timestampType", pa.int32()),
        ]
        if headers:
            fields.append(
                pa.field("headers", pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])))
            )
        s = _SCHEMAS[headers] = pa.schema(fields)
    return s


def empty_table(headers: bool) -> Any:
    """A table of no records."""
    return kafka_schema(headers).empty_table()


_CONSTANTS: dict[tuple[str, Any], Any] = {}


def constant_array(kind: str, value: Any, n: int) -> Any:
    """An Arrow array of ``n`` copies of ``value``: a zero-copy slice of a cached one."""
    import pyarrow as pa  # optional dependency, imported on first use

    key = (kind, value)
    arr = _CONSTANTS.get(key)
    if arr is None or len(arr) < n:
        size = max(n, 2 * len(arr) if arr is not None else 1 << 16)
        typ = {"topic": pa.string(), "partition": pa.int32(), "tstype": pa.int32()}[kind]
        arr = pa.repeat(pa.scalar(value, typ), size)
        if len(_CONSTANTS) > 1024:
            _CONSTANTS.clear()
        _CONSTANTS[key] = arr
    return arr.slice(0, n)


def columns_table(
    tp: TopicPartition,
    pieces: Sequence[memoryview],
    pos: int,
    headers: bool,
    check: bool,
    *,
    allow_truncated: bool = False,
    max_offset: int | None = None,
) -> Any:
    """The records of ``tp`` from ``pos`` on in ``pieces`` (whole batches of its log) as one
    table; ``check`` verifies each batch's CRC. ``allow_truncated``: a piece may end in a
    partial batch (a Fetch response's last one), which is left out; ``max_offset``: only records
    below it (a high watermark)."""
    import pyarrow as pa  # optional dependency, imported on first use

    schema = kafka_schema(headers)
    batches = []
    ts_type = pa.timestamp("ms", tz="UTC")
    for piece in pieces:
        cols = decode_columns(
            piece,
            keys=True,
            headers=headers,
            min_offset=pos,
            max_offset=max_offset,
            verify_crc=check,
            allow_truncated=allow_truncated,
        )
        n = cols.count
        if not n:
            continue
        rb = cols.to_arrow()
        kinds = bytes(cols.timestamp_types)
        if not kinds.strip(b"\x00"):
            ts_types = constant_array("tstype", 0, n)
        elif not kinds.strip(b"\x01"):
            ts_types = constant_array("tstype", 1, n)
        else:
            ts_types = rb.column("timestampType").cast(pa.int32())
        arrays = [
            rb.column("key"),
            rb.column("value"),
            constant_array("topic", tp.topic, n),
            constant_array("partition", tp.partition, n),
            rb.column("offset"),
            rb.column("timestamp").view(ts_type),
            ts_types,
        ]
        if headers:
            arrays.append(rb.column("headers"))
        batches.append(pa.RecordBatch.from_arrays(arrays, schema=schema))
    if not batches:
        return schema.empty_table()
    return pa.Table.from_batches(batches, schema=schema)
