"""Column helpers for the producers' column path (``send_batch``): the column forms
:func:`seglog.storage.records.encode_batch` accepts — lists or tuples, NumPy arrays, Arrow
arrays — sliced, gathered, sized and converted alike, whatever their kind.

A column may also be ``None`` (no such column) or an ``int`` (one timestamp for every record);
both pass through :func:`slice_column` and :func:`take` unchanged.
"""

from __future__ import annotations

import operator
from typing import Any

__all__ = ["as_key_list", "has_null", "item_size", "records_per_batch", "slice_column", "slice_columns", "take"]


def _module(col: Any) -> str:
    """The module a column's type comes from (``numpy``, ``pyarrow.lib``, ``builtins``)."""
    return type(col).__module__ or ""


def slice_column(col: Any, start: int, end: int) -> Any:
    """Items ``start`` .. ``end - 1`` of ``col``, in its own kind (the column itself when that is
    all of it)."""
    if col is None or isinstance(col, int):
        return col
    if start == 0 and end == len(col):
        return col
    if _module(col).startswith("pyarrow"):
        return col.slice(start, end - start)
    return col[start:end]


def slice_columns(
    start: int, end: int, values: Any, keys: Any, timestamps: Any, headers: Any
) -> tuple[Any, Any, Any, Any]:
    """:func:`slice_column` of each of a batch's record columns, in the same order."""
    return (
        slice_column(values, start, end),
        slice_column(keys, start, end),
        slice_column(timestamps, start, end),
        slice_column(headers, start, end),
    )


def take(col: Any, idx: Any) -> Any:
    """The items of ``col`` at the positions ``idx`` (int64 indices, as
    :func:`seglog._native.partition.group_by_partition` returns them), in that order."""
    if col is None or isinstance(col, int):
        return col
    mod = _module(col)
    if mod.startswith("pyarrow"):
        import pyarrow as pa  # optional dependency: only an Arrow column gets here

        return col.take(pa.array(idx, type=pa.int64()))
    if mod.startswith("numpy"):
        import numpy as np  # optional dependency: only a NumPy column gets here

        return col[np.frombuffer(idx, dtype=np.int64)]
    if len(idx) == 1:
        return [col[idx[0]]]
    return list(operator.itemgetter(*idx)(col))


def records_per_batch(limit: int, values: Any, keys: Any) -> int:
    """How many records to put in one batch so that it stays under ``limit`` bytes (an
    estimate: a batch that still comes out too large is split again)."""
    per_record = item_size(values, "values") + item_size(keys, "keys") + 16
    return max(1, int(limit * 0.9) // per_record)


def item_size(col: Any, name: str) -> int:
    """Bytes per item of a binary column: the average for Arrow, the width for NumPy, the
    largest of a sample for Python sequences."""
    if col is None:
        return 0
    n = len(col)
    if n == 0:
        return 0
    mod = _module(col)
    if mod.startswith("pyarrow"):
        # optional dependency: only an Arrow column gets here
        import pyarrow as pa
        import pyarrow.compute as pc

        if pa.types.is_fixed_size_binary(col.type):
            return int(col.type.byte_width)
        total = pc.sum(pc.binary_length(col)).as_py() or 0
        return max(1, int(total) // n)
    if mod.startswith("numpy"):
        if col.dtype.kind == "O":
            col = col.tolist()
        else:
            return int(col.dtype.itemsize * (col.shape[1] if col.ndim == 2 else 1))
    step = max(1, n // 512)
    try:
        sample = [len(x) for x in col[::step] if x is not None]
    except TypeError:
        for i, x in enumerate(col):
            if x is not None and (isinstance(x, str) or not hasattr(x, "__len__")):
                raise TypeError(f"{name}[{i}] is a {type(x).__name__}, not bytes-like or None") from None
        raise
    return max(1, max(sample) if sample else 1)


def has_null(col: Any) -> bool:
    """Whether any item of ``col`` is null (``None``)."""
    mod = _module(col)
    if mod.startswith("pyarrow"):
        return bool(col.null_count)
    if mod.startswith("numpy"):
        return col.dtype.kind == "O" and any(x is None for x in col)
    return any(x is None for x in col)


def as_key_list(keys: Any) -> list[Any]:
    """A key column as a list of ``bytes``/``None`` (what the partitioner hashes)."""
    if isinstance(keys, list):
        return keys
    mod = _module(keys)
    if mod.startswith("pyarrow"):
        return keys.to_pylist()  # type: ignore[no-any-return]
    if mod.startswith("numpy"):
        if keys.dtype.kind == "S":
            return list(keys.tolist())
        if keys.dtype.kind == "u" and keys.ndim == 2:
            return [bytes(r) for r in keys]
        return list(keys.tolist())
    return list(keys)
