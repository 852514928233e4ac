"""Columns.to_arrow: the record batch handed to pyarrow through the Arrow C data interface,
over the decoder's own buffers. What it must get right beyond the values (which the validity,
views and vector tests compare with decode_records): the schema of every layout, empty columns,
and the lifetime of the buffers, which the batch keeps until pyarrow lets the last of them go."""

from __future__ import annotations

import gc
import sys
import threading
from typing import Any

import pyarrow as pa
import pytest

from seglog.storage.records import decode_columns, encode_batch
from tests.conftest import T0 as T

VALUES = [b"short", None, b"", b"exactly12by!", b"thirteen-byte", b"v" * 1024]
KEYS = [None, b"k", b"a-much-longer-key", b"", None, b"0123456789abc"]
HEADERS: list[list[tuple[str, bytes | None]]] = [
    [("h", b"x")],
    [],
    [("a", None), ("b", b"")],
    [],
    [("\u00e9", b"y")],
    [],
]

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def _data(compression: str = "none") -> bytes:
    return bytes(encode_batch(VALUES, keys=KEYS, headers=HEADERS, timestamps=T, compression=compression))


@pytest.mark.parametrize("views", [False, True])
@pytest.mark.parametrize(
    "kw", [{}, {"keys": False}, {"values": False}, {"headers": False}, {"keys": False, "values": False}]
)
@pytest.mark.parametrize("data", [b"", "one batch"], ids=["empty", "one-batch"])
def test_schema_of_every_layout(views: bool, kw: dict[str, Any], data: bytes | str) -> None:
    buf = _data() if data else b""
    batch = decode_columns(buf, views=views, **kw).to_arrow()
    binary = pa.binary_view() if views else pa.binary()
    want = [
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("timestampType", pa.int8()),
        ("leaderEpoch", pa.int32()),
    ]
    if kw.get("keys", True):
        want.append(("key", binary))
    if kw.get("values", True):
        want.append(("value", binary))
    if kw.get("headers", True):
        want.append(("headers", HEADER_TYPE))
    assert batch.schema == pa.schema(want)
    batch.validate(full=True)
    assert batch.num_rows == (len(VALUES) if data else 0)
    if data:
        assert batch.column("offset").to_pylist() == list(range(len(VALUES)))
        if kw.get("headers", True):
            assert [[(e["key"], e["value"]) for e in row] for row in batch.column("headers").to_pylist()] == HEADERS


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_a_column_outlives_its_batch_and_columns(codec: str) -> None:
    # One array taken out of the batch keeps every buffer of the export: the decoder's (copied
    # values, offsets) and, with views, the input and the bytes copied out of compressed batches.
    buf = bytearray(_data(codec))
    values = decode_columns(buf, views=True).to_arrow().column("value")
    copied = decode_columns(buf).to_arrow().column("key")
    gc.collect()
    with pytest.raises(BufferError):
        buf.extend(b"more")  # the views still point into it
    assert values.to_pylist() == VALUES
    assert copied.to_pylist() == KEYS
    del values
    gc.collect()
    buf.extend(b"")  # released with the last array that pointed into it
    assert copied.to_pylist() == KEYS


def test_every_export_is_released() -> None:
    data = _data()
    base = sys.getrefcount(data)
    batches = [decode_columns(data, views=True).to_arrow() for _ in range(200)]
    assert sys.getrefcount(data) == base + 200  # each batch's columns hold the input
    tables = [pa.Table.from_batches([b]) for b in batches[::2]]
    del batches
    gc.collect()
    assert sys.getrefcount(data) == base + 100
    del tables
    gc.collect()
    assert sys.getrefcount(data) == base


def test_released_on_another_thread() -> None:
    data = _data()
    base = sys.getrefcount(data)
    box = [decode_columns(data, views=True).to_arrow() for _ in range(20)]

    def drop() -> None:
        assert sum(b.num_rows for b in box) == 20 * len(VALUES)
        box.clear()

    t = threading.Thread(target=drop)
    t.start()
    t.join(10)
    gc.collect()
    assert sys.getrefcount(data) == base
