"""seglog.util.closing.Closeable: the ``with`` protocol over a class's ``close()``."""

from __future__ import annotations

import pytest

from seglog.util.closing import Closeable


class _Resource(Closeable):
    def __init__(self) -> None:
        self.closes = 0

    def close(self) -> None:
        self.closes += 1


def test_with_gives_the_object_and_closes_it_once() -> None:
    r = _Resource()
    with r as got:
        assert got is r
        assert r.closes == 0
    assert r.closes == 1


def test_an_exception_closes_and_is_not_suppressed() -> None:
    r = _Resource()
    with pytest.raises(ValueError, match="boom"), r:
        raise ValueError("boom")
    assert r.closes == 1


def test_the_storage_classes_use_it() -> None:
    from seglog import Log, Store
    from seglog.storage.logdir import LogDir

    for cls in (Log, Store, LogDir):
        assert issubclass(cls, Closeable), cls
