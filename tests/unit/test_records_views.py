"""decode_columns(views=True): Arrow binary_view keys and values that point into the input."""

from __future__ import annotations

import gc
import struct

import numpy as np
import pyarrow as pa
import pytest

from seglog.storage.records import decode_columns, encode_batch
from tests.conftest import T0 as T

VALUES = [b"short", None, b"", b"exactly12by!", b"thirteen-byte", b"v" * 1024]
KEYS = [None, b"k", b"a-much-longer-key", b"", None, b"0123456789abc"]


def entries(cols, which: str) -> list[tuple[int, bytes, int, int]]:
    raw = bytes(getattr(cols, f"{which}_views"))
    out = []
    for i in range(len(raw) // 16):
        (length,) = struct.unpack_from("<i", raw, i * 16)
        if length <= 12:
            out.append((length, raw[i * 16 + 4 : i * 16 + 16], -1, -1))
        else:
            index, offset = struct.unpack_from("<ii", raw, i * 16 + 8)
            out.append((length, raw[i * 16 + 4 : i * 16 + 8], index, offset))
    return out


def test_values_point_into_the_input_and_short_ones_are_inline() -> None:
    buf = encode_batch(VALUES, keys=KEYS, timestamps=T)
    cols = decode_columns(buf, views=True)
    assert cols.value_offsets is None and cols.value_data is None
    assert cols.view_buffers is not None
    assert bytes(cols.view_buffers[0]) == bytes(buf)
    assert len(cols.view_buffers[1]) == 0  # nothing copied: the batch is uncompressed
    for (length, inline, index, offset), v in zip(entries(cols, "value"), VALUES):
        assert length == (0 if v is None else len(v))
        if v is None or len(v) <= 12:
            assert index == -1 and inline == (v or b"").ljust(12, b"\0")
        else:
            assert index == 0 and inline == v[:4]
            assert bytes(buf)[offset : offset + length] == v
    table = cols.to_arrow()
    table.validate(full=True)
    assert table.schema.field("value").type == pa.binary_view()
    assert table.column("value").to_pylist() == VALUES
    assert table.column("key").to_pylist() == KEYS
    assert cols.value_null_count == 1 and cols.key_null_count == 2


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_records_are_copied_to_the_second_buffer(codec: str) -> None:
    plain = encode_batch(VALUES, keys=KEYS, timestamps=T, base_offset=0)
    packed = encode_batch(VALUES, keys=KEYS, timestamps=T, base_offset=len(VALUES), compression=codec)
    buf = bytes(plain) + bytes(packed)
    cols = decode_columns(buf, views=True)
    indexes = [e[2] for e in entries(cols, "value")]
    n = len(VALUES)
    assert set(indexes[:n]) <= {-1, 0} and set(indexes[n:]) <= {-1, 1}
    assert cols.view_buffers is not None
    spill = bytes(cols.view_buffers[1])
    for (length, prefix, index, offset), v in zip(entries(cols, "value")[n:], VALUES):
        if index == 1:
            assert spill[offset : offset + length] == v and prefix == v[:4]
    assert len(spill) == sum(len(x) for x in VALUES + KEYS if x is not None and len(x) > 12)
    assert cols.to_arrow().column("value").to_pylist() == VALUES * 2
    assert cols.to_arrow().column("key").to_pylist() == KEYS * 2


def test_the_columns_keep_the_input_alive_and_exported() -> None:
    buf = bytearray(encode_batch(VALUES, timestamps=T))
    table = decode_columns(buf, views=True).to_arrow()
    gc.collect()
    with pytest.raises(BufferError):
        buf.extend(b"more")  # still exported: cannot be resized under the views
    assert table.column("value").to_pylist() == VALUES
    del table
    gc.collect()
    buf.extend(b"")  # released with the last array


def test_same_result_as_the_copying_form_with_filters() -> None:
    values = [np.random.default_rng(7).bytes(int(n)) for n in np.random.default_rng(8).integers(0, 40, 500)]
    buf = b"".join(
        bytes(
            encode_batch(values[i : i + 50], base_offset=i, timestamps=T + i, compression="lz4" if i % 100 else "none")
        )
        for i in range(0, 500, 50)
    )
    for kw in ({}, {"min_offset": 120, "max_offset": 377}, {"keys": False}, {"values": False}, {"headers": False}):
        a = decode_columns(buf, **kw).to_arrow()
        b = decode_columns(buf, views=True, **kw).to_arrow()
        assert a.column_names == b.column_names
        for name in a.column_names:
            assert a.column(name).to_pylist() == b.column(name).to_pylist(), (kw, name)


def test_a_view_column_casts_to_plain_binary() -> None:
    buf = encode_batch(VALUES, keys=KEYS, timestamps=T)
    arr = decode_columns(buf, views=True).to_arrow().column("value")
    assert arr.cast(pa.binary()).to_pylist() == VALUES
