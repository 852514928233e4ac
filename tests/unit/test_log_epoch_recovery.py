"""Recovery keeps the leader-epoch cache's start offsets of epochs that began before the
recovered segment (Kafka's LogSegment.recover assigns only newer epochs)."""

from __future__ import annotations

import os

from seglog.storage.log import Log
from seglog.storage.records import encode_batch


def test_recovering_a_later_segment_keeps_earlier_epoch_starts(tmp_path: os.PathLike[str]) -> None:
    d = os.path.join(tmp_path, "t-0")
    log = Log.open(d, {"segment.bytes": 1024}, replicated=True)
    ts = 1_700_000_000_000
    for _ in range(3):
        log.append(encode_batch([b"a" * 100], timestamps=ts), leader_epoch=0)
    for _ in range(30):
        log.append(encode_batch([b"b" * 100], timestamps=ts), leader_epoch=2)
    assert len(log.segments) > 2
    last_base = log.segments[-1].base_offset
    log.append(encode_batch([b"c" * 100], timestamps=ts), leader_epoch=5)
    assert log.segments[-1].base_offset == last_base  # epoch 2 and 5 share the last segment
    log.flush(up_to=last_base)
    log.checkpoint()
    before = log.epoch_cache.entries()
    assert before == [(0, 0), (2, 3), (5, 33)]
    log.abandon()
    again = Log.open(d, {"segment.bytes": 1024}, replicated=True)
    try:
        assert again.recovery_summary.segments_recovered >= 1
        assert again.epoch_cache.entries() == before
    finally:
        again.close()


def test_recovery_adds_epochs_the_cache_file_lost(tmp_path: os.PathLike[str]) -> None:
    d = os.path.join(tmp_path, "t-0")
    log = Log.open(d, replicated=True)
    ts = 1_700_000_000_000
    log.append(encode_batch([b"a"], timestamps=ts), leader_epoch=0)
    log.append(encode_batch([b"b"], timestamps=ts), leader_epoch=3)
    log.abandon()
    os.unlink(os.path.join(d, "leader-epoch-checkpoint"))
    again = Log.open(d, replicated=True)
    try:
        assert again.epoch_cache.entries() == [(0, 0), (3, 1)]
    finally:
        again.close()
