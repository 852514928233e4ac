"""The one place where native status becomes a Python exception.

``_native`` may not import the engine, yet native code must raise the engine's exception
types (``CorruptRecordError`` and friends). The engine installs its classes here when
``seglog`` is imported (``seglog.errors`` calls :func:`install`); until then the builtin
fallbacks below are used, so the native modules stay usable on their own.
"""

from __future__ import annotations

from typing import Any

_classes: dict[str, type[BaseException]] = {
    "corrupt_record": ValueError,
    "invalid_record": ValueError,
    "invalid_timestamp": ValueError,
    "record_too_large": ValueError,
    "record_list_too_large": ValueError,
    "unknown_topic_or_partition": KeyError,
    "unsupported_compression": ValueError,
    "storage": OSError,
    # index files (.index / .timeindex): a file that fails the sanity check (rebuild it),
    # an append that breaks the ordering or int32 relative-offset rules, an append to a full index
    "corrupt_index": ValueError,
    "invalid_offset": ValueError,
    "index_full": ValueError,
}


def install(**classes: type[BaseException]) -> None:
    unknown = set(classes) - set(_classes)
    if unknown:
        raise KeyError(f"unknown native error kinds: {sorted(unknown)}")
    _classes.update(classes)


def make(kind: str, message: str, **fields: Any) -> BaseException:
    """Build the exception for ``kind``; ``fields`` (position, path, offset, limit...) are
    attached as attributes when the class accepts them as keywords."""
    cls = _classes[kind]
    try:
        return cls(message, **fields)
    except TypeError:
        exc = cls(message)
        for k, v in fields.items():
            try:
                setattr(exc, k, v)
            except AttributeError:
                pass
        return exc


def corrupt(message: str, position: int | None = None, **fields: Any) -> BaseException:
    if position is not None:
        message = f"{message} (at byte {position})"
    return make("corrupt_record", message, position=position, **fields)
