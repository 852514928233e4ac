"""The opt-in wall-clock shift of node processes (``SEGLOG_WALL_CLOCK_OFFSET_FILE``, the F9
fault hook): only the wall reading moves, by what the file says, noticed within 50 ms."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from seglog.util.clock import WALL_CLOCK_OFFSET_ENV, Clock, OffsetWallClock, clock_from_env


def _settle(clock: OffsetWallClock) -> None:
    time.sleep(OffsetWallClock.RECHECK_NS / 1e9 + 0.01)
    clock.time_ms()


def test_offset_moves_the_wall_reading_only(tmp_path: Path) -> None:
    path = tmp_path / "offset"
    clock = OffsetWallClock(str(path))  # no file yet: no shift
    assert abs(clock.time_ms() - time.time() * 1000) < 1000
    path.write_text("3600000\n")
    _settle(clock)
    mono0, wall0 = clock.monotonic_ms(), clock.time_ms()
    assert abs(wall0 - (time.time() * 1000 + 3_600_000)) < 1000
    assert abs(mono0 - time.monotonic() * 1000) < 1000
    path.write_text("-3600000")
    _settle(clock)
    assert abs(clock.time_ms() - (time.time() * 1000 - 3_600_000)) < 1000
    assert clock.monotonic_ms() >= mono0  # the monotonic reading never jumped
    path.write_text("not a number")
    _settle(clock)
    assert clock.offset_ms == 0


def test_clock_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WALL_CLOCK_OFFSET_ENV, raising=False)
    assert type(clock_from_env()) is Clock
    monkeypatch.setenv(WALL_CLOCK_OFFSET_ENV, str(tmp_path / "offset"))
    c = clock_from_env()
    assert isinstance(c, OffsetWallClock) and c.path == str(tmp_path / "offset")
