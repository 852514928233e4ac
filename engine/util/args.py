"""Argument type checks for the public API: a wrong type is a ``TypeError`` that names the
argument and the type expected, instead of whatever the first operation on it raises."""

from __future__ import annotations

import operator
from typing import Any


def int_arg(name: str, value: Any, *, optional: bool = False) -> Any:
    """``value`` when it is an integer (an int or anything with ``__index__``, such as NumPy's
    integers; not a bool), or None when ``optional``; else a TypeError naming ``name``."""
    if type(value) is int or (optional and value is None):
        return value
    if not isinstance(value, bool) and hasattr(type(value), "__index__"):
        return value
    expected = "an int or None" if optional else "an int"
    raise TypeError(f"{name} must be {expected}, not {type(value).__name__}")


def int_value(name: str, value: Any) -> int:
    """``value`` as a plain ``int`` (an int subclass or anything with ``__index__`` becomes its
    value; a bool is refused), else the TypeError of :func:`int_arg`."""
    return int(operator.index(int_arg(name, value)))


def bytes_arg(name: str, value: Any) -> memoryview:
    """``value`` as a flat byte memoryview, or a TypeError naming ``name``."""
    if isinstance(value, str):
        raise TypeError(f"{name} must be a bytes-like object (encoded record batches), not str")
    try:
        return memoryview(value).cast("B")
    except TypeError:
        raise TypeError(
            f"{name} must be a bytes-like object (encoded record batches), not {type(value).__name__}"
        ) from None
