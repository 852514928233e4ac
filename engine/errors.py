"""seglog's exception hierarchy (placeholder; the full table comes with the config work)."""
from __future__ import annotations

from seglog._native import _errors as _native_errors


class SeglogError(Exception):
    """Base of every error seglog raises on purpose."""


class CorruptRecordError(SeglogError):
    code = 2

    def __init__(self, message: str, *, position: int | None = None, path: str | None = None,
                 offset: int | None = None) -> None:
        super().__init__(message)
        self.position = position
        self.path = path
        self.offset = offset


_native_errors.install(corrupt_record=CorruptRecordError)
