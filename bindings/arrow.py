"""Decoded records as Arrow record batches in the column layout of Spark's Kafka source.

:func:`seglog.storage.records.decode_columns` already produces Arrow-layout buffers (int64 offsets and
millisecond timestamps, binary keys/values with validity bitmaps, headers as
``list<struct<key, value>>``). This module turns those buffers into the exact Arrow types Spark
expects from a Python data source, without a Python object per record:

=============  =====================================  =====================================
column         Arrow type                             from
=============  =====================================  =====================================
key            binary (null for a null key)           key buffers, as they are
value          binary (null for a tombstone)          value buffers, as they are
topic          string                                 one value repeated (built once, sliced)
partition      int32                                  one value repeated (built once, sliced)
offset         int64                                  offsets, as they are
timestamp      timestamp[us, tz=UTC]                  ms × 1000 (one vectorised multiply)
timestampType  int32 (0 CreateTime, 1 LogAppendTime,  int8 cast to int32
               -1 none)
headers        list<struct<key string, value binary>> header buffers; a record without headers
               (only when asked)                      is null, as in Spark's Kafka source
leaderEpoch    int32 (only when asked)                null where the batch has none (-1)
=============  =====================================  =====================================

Every field is nullable, as Spark declares them. Spark compares the first batch's schema with
the declared one and rejects any difference (``large_binary``, millisecond or zone-less
timestamps, ``int8``...), so :func:`arrow_schema` is the single source of these types.

>>> from seglog.storage.records import encode_batch, decode_columns
>>> b = ArrowBatchBuilder(["value", "offset", "timestamp"], topic="t", partition=0)
>>> cols = decode_columns(encode_batch([b"a", b"b"], timestamps=1700000000000), **b.decode_flags)
>>> b.build(cols).to_pydict()["timestamp"][0].isoformat()
'2023-11-14T22:13:20+00:00'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])

#: Column name -> (Arrow type, Spark SQL type), in the order of Spark's Kafka source, then the
#: two optional columns.
COLUMNS: dict[str, tuple[pa.DataType, str]] = {
    "key": (pa.binary(), "binary"),
    "value": (pa.binary(), "binary"),
    "topic": (pa.string(), "string"),
    "partition": (pa.int32(), "int"),
    "offset": (pa.int64(), "bigint"),
    "timestamp": (pa.timestamp("us", tz="UTC"), "timestamp"),
    "timestampType": (pa.int32(), "int"),
    "headers": (pa.list_(pa.field("element", HEADER_TYPE)), "array<struct<key:string,value:binary>>"),
    "leaderEpoch": (pa.int32(), "int"),
}

#: The columns of Spark's Kafka source without headers (its default).
KAFKA_COLUMNS: tuple[str, ...] = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")


def check_columns(columns: Sequence[str]) -> None:
    """Raise ``ValueError`` naming the first unknown or repeated column."""
    seen: set[str] = set()
    for name in columns:
        if name not in COLUMNS:
            raise ValueError(f"unknown column {name!r}; the columns are {', '.join(COLUMNS)}")
        if name in seen:
            raise ValueError(f"column {name!r} is listed twice")
        seen.add(name)


def arrow_schema(columns: Sequence[str]) -> pa.Schema:
    """The Arrow schema of batches holding ``columns`` (all nullable), in that order."""
    check_columns(columns)
    return pa.schema([pa.field(name, COLUMNS[name][0], nullable=True) for name in columns])


def spark_ddl(columns: Sequence[str]) -> str:
    """The same schema as a Spark DDL string."""
    check_columns(columns)
    return ", ".join(f"`{name}` {COLUMNS[name][1]}" for name in columns)


_TS_US = pa.timestamp("us", tz="UTC")
_US_PER_MS = pa.scalar(1000, pa.int64())
_INT32 = pa.int32()


class ArrowBatchBuilder:
    """Builds record batches of one topic-partition from :class:`seglog.storage.records.Columns`.

    ``decode_flags`` are the ``decode_columns`` keyword arguments that decode only what the
    columns need (no key, value or header bytes are copied for columns left out).
    """

    __slots__ = (
        "_const_cap",
        "_partition_arr",
        "_topic_arr",
        "columns",
        "decode_flags",
        "partition",
        "schema",
        "topic",
    )

    def __init__(self, columns: Sequence[str], *, topic: str, partition: int) -> None:
        self.columns = tuple(columns)
        self.schema = arrow_schema(self.columns)
        self.topic = topic
        self.partition = partition
        self.decode_flags: dict[str, Any] = {
            "keys": "key" in self.columns,
            "values": "value" in self.columns,
            "headers": "headers" in self.columns,
        }
        self._const_cap = -1
        self._topic_arr: pa.Array | None = None
        self._partition_arr: pa.Array | None = None

    def _constants(self, n: int) -> tuple[pa.Array, pa.Array]:
        # Batch sizes vary (whole Kafka batches per chunk): build the repeated values once for
        # the largest size seen and hand out zero-copy slices (pa.repeat costs ~40 us a call).
        if n > self._const_cap:
            self._topic_arr = pa.repeat(pa.scalar(self.topic, pa.string()), n)
            self._partition_arr = pa.repeat(pa.scalar(self.partition, pa.int32()), n)
            self._const_cap = n
        assert self._topic_arr is not None and self._partition_arr is not None
        if n == self._const_cap:
            return self._topic_arr, self._partition_arr
        return self._topic_arr.slice(0, n), self._partition_arr.slice(0, n)

    def build(self, cols: Any) -> pa.RecordBatch:
        """One record batch of ``len(cols)`` rows in :attr:`schema`."""
        n = len(cols)
        arrays: list[pa.Array] = []
        for name in self.columns:
            arrays.append(_COLUMN_BUILDERS[name](self, cols, n))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def empty(self) -> pa.RecordBatch:
        """A batch with no rows in :attr:`schema`."""
        return pa.RecordBatch.from_arrays([pa.array([], COLUMNS[c][0]) for c in self.columns], schema=self.schema)


def _bitmap(buf: Any) -> pa.Buffer | None:
    return None if buf is None else pa.py_buffer(buf)


def _binary(cols: Any, n: int, prefix: str) -> pa.Array:
    offsets = getattr(cols, f"{prefix}_offsets")
    if offsets is None:
        raise ValueError(f"the {prefix} column was not decoded")
    return pa.Array.from_buffers(
        pa.binary(),
        n,
        [
            _bitmap(getattr(cols, f"{prefix}_validity")),
            pa.py_buffer(offsets),
            pa.py_buffer(getattr(cols, f"{prefix}_data")),
        ],
        null_count=getattr(cols, f"{prefix}_null_count"),
    )


def _key(b: ArrowBatchBuilder, cols: Any, n: int) -> pa.Array:
    return _binary(cols, n, "key")


def _value(b: ArrowBatchBuilder, cols: Any, n: int) -> pa.Array:
    return _binary(cols, n, "value")


def _topic(b: ArrowBatchBuilder, cols: Any, n: int) -> pa.Array:
    return b._constants(n)[0]


def _partition(b: ArrowBatchBuilder, cols: Any, n: int) -> pa.Array:
    return b._constants(n)[1]


def _offset(b: ArrowBatchBuilder, cols: Any, n: int) -> pa.Array:
    return pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(cols.offsets)])


def _timestamp(b: ArrowBatchBuilder, cols: Any, n: int) -> pa.Array:
    ms = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(cols.timestamps)])
    return pc.multiply(ms, _US_PER_MS).view(_TS_US)


def _timestamp_type(b: ArrowBatchBuilder, cols: Any, n: int) -> pa.Array:
    return pa.Array.from_buffers(pa.int8(), n, [None, pa.py_buffer(cols.timestamp_types)]).cast(_INT32)


def _leader_epoch(b: ArrowBatchBuilder, cols: Any, n: int) -> pa.Array:
    raw = pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(cols.leader_epochs)])
    valid = pc.not_equal(raw, -1)
    if valid.false_count == 0:
        return raw
    return pa.Array.from_buffers(pa.int32(), n, [valid.buffers()[1], raw.buffers()[1]], null_count=valid.false_count)


def _headers(b: ArrowBatchBuilder, cols: Any, n: int) -> pa.Array:
    if cols.header_offsets is None:
        raise ValueError("the headers column was not decoded")
    nh = cols.header_count
    hkeys = pa.Array.from_buffers(
        pa.string(), nh, [None, pa.py_buffer(cols.header_key_offsets), pa.py_buffer(cols.header_key_data)]
    )
    hvals = pa.Array.from_buffers(
        pa.binary(),
        nh,
        [
            _bitmap(cols.header_value_validity),
            pa.py_buffer(cols.header_value_offsets),
            pa.py_buffer(cols.header_value_data),
        ],
        null_count=cols.header_value_null_count,
    )
    entries = pa.StructArray.from_arrays([hkeys, hvals], fields=list(HEADER_TYPE))
    offsets = pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(cols.header_offsets)])
    # Spark's Kafka source gives null, not an empty array, for a record without headers.
    present = pc.not_equal(offsets[1:], offsets[:-1])
    nulls = present.false_count
    validity = None if nulls == 0 else present.buffers()[1]
    return pa.Array.from_buffers(
        COLUMNS["headers"][0], n, [validity, offsets.buffers()[1]], null_count=nulls, children=[entries]
    )


_COLUMN_BUILDERS: dict[str, Any] = {
    "key": _key,
    "value": _value,
    "topic": _topic,
    "partition": _partition,
    "offset": _offset,
    "timestamp": _timestamp,
    "timestampType": _timestamp_type,
    "headers": _headers,
    "leaderEpoch": _leader_epoch,
}
