"""Fixtures of the unit tests: a manual clock, and a store on it in the test's tmp dir."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from seglog import Store
from seglog.util.clock import ManualClock
from tests.conftest import T0


@pytest.fixture
def clock() -> ManualClock:
    """A clock that moves only when a test advances it, starting at ``T0``."""
    return ManualClock(T0)


@pytest.fixture
def store_config() -> dict[str, Any] | None:
    """The broker config of the ``store`` fixture; a test module overrides it to change it."""
    return None


@pytest.fixture
def store(tmp_path: Path, clock: ManualClock, store_config: dict[str, Any] | None) -> Iterator[Store]:
    """A store in the test's tmp dir on ``clock``, closed after the test."""
    s = Store.open(tmp_path, store_config, clock=clock)
    yield s
    s.close()
