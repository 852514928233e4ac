"""Loading a partition directory without a ``Log`` (``seglog.storage.log_loader.load_log`` over a
``seglog.storage.local_log.LocalLog``): what it returns, and the segment layer it fills."""

from __future__ import annotations

import os

import pytest

from seglog.config import LogConfig
from seglog.storage.checkpoints import OffsetCheckpointFile
from seglog.storage.local_log import LocalLog, first_segment_from
from seglog.storage.log import Log
from seglog.storage.log_loader import load_log
from seglog.util.clock import ManualClock
from tests.conftest import T0
from tests.logkit import batch

CONFIG = {"segment.bytes": 300, "index.interval.bytes": 100, "segment.index.bytes": 4096}


def write_log(tmp_path, records: int) -> list[int]:
    """A log of ``records`` one-record batches; returns its segments' base offsets."""
    log = Log.open(tmp_path / "t-0", CONFIG, clock=ManualClock(T0))
    for _ in range(records):
        log.append(batch(1))
    log.flush(up_to=15)
    log.checkpoint()
    bases = [s.base_offset for s in log.segments]
    log.abandon()  # a crash: recovery point 15 checkpointed, the rest not flushed
    return bases


def local_log(tmp_path) -> LocalLog:
    return LocalLog(str(tmp_path / "t-0"), LogConfig.coerce(CONFIG), ManualClock(T0), None, False)


def no_create() -> None:
    pytest.fail("the directory exists: load_log must not create it")


def test_load_log_recovers_a_torn_tail_and_returns_the_offsets(tmp_path):
    bases = write_log(tmp_path, 30)
    active = tmp_path / "t-0" / f"{bases[-1]:020d}.log"
    size = os.path.getsize(active)
    with open(active, "ab") as f:
        f.write(b"\xff" * 37)  # a torn write after the last batch
    local = local_log(tmp_path)
    loaded = load_log(
        local,
        compact=False,
        recovery_point=None,
        log_start_offset=None,
        clean_shutdown=None,
        high_watermark=None,
        checkpoints=(
            ("t", 0),
            OffsetCheckpointFile(str(tmp_path / "recovery-point-offset-checkpoint")),
            OffsetCheckpointFile(str(tmp_path / "log-start-offset-checkpoint")),
        ),
        create_dir=no_create,
    )
    try:
        assert [s.base_offset for s in local.segments] == bases
        assert local.log_end_offset == 30 and os.path.getsize(active) == size
        assert (loaded.log_start_offset, loaded.recovery_point, loaded.start_moved_back) == (0, 15, False)
        summary = loaded.recovery_summary
        assert summary.bytes_truncated == 37 and summary.segments_deleted == 0
        # From the segment holding the recovery point on.
        assert summary.segments_recovered == sum(1 for b in bases if b >= max(b for b in bases if b <= 15))
        assert loaded.epoch_cache.entries() == []
    finally:
        assert local.close() is None


def test_load_log_moves_a_log_start_past_the_data_back(tmp_path):
    write_log(tmp_path, 20)
    local = local_log(tmp_path)
    loaded = load_log(
        local,
        compact=False,
        recovery_point=20,
        log_start_offset=100,
        clean_shutdown=True,
        high_watermark=None,
        checkpoints=None,
        create_dir=no_create,
    )
    try:
        assert (loaded.log_start_offset, loaded.recovery_point, loaded.start_moved_back) == (20, 20, True)
        assert loaded.recovery_summary.segments_recovered == 0
    finally:
        local.close()


def test_first_segment_from_skips_only_segments_below_the_offset(tmp_path):
    write_log(tmp_path, 30)
    log = Log.open(tmp_path / "t-0", CONFIG, clock=ManualClock(T0))
    try:
        segs = log.segments
        assert len(segs) > 3
        for offset in range(-1, 32):
            i = first_segment_from(segs, offset)
            # Every segment before i ends where its successor starts, at or below the offset;
            # segment i is the last one or its successor starts past the offset.
            assert all(segs[j + 1].base_offset <= offset for j in range(i))
            assert i == len(segs) - 1 or segs[i + 1].base_offset > offset
    finally:
        log.close()
