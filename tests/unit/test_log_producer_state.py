"""The partition log owns its idempotent producers' state (``Log.producer_state``): a leader's
client append is checked against it, every append updates it, a replica's log snapshots it at
each roll, reloads it after a truncation and loads it when it opens."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from seglog import Store
from seglog.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from seglog.storage.log import Log
from seglog.storage.producer_state import decode_snapshot
from seglog.storage.records import encode_batch
from seglog.util.clock import ManualClock

T0 = 1_700_000_000_000


def idem(seq: int, *values: bytes, pid: int = 7, epoch: int = 0) -> bytes:
    return encode_batch(list(values) or [b"v"], timestamps=T0, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def open_log(path: Path, **kw: object) -> Log:
    return Log.open(path / "t-0", {"segment.bytes": 1024}, clock=ManualClock(T0), **kw)  # type: ignore[arg-type]


def test_a_client_retry_is_answered_with_the_original_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    first = log.append_as_leader(idem(0, b"a", b"b"))
    assert (first.first_offset, first.last_offset, first.duplicate) == (0, 1, False)
    log.append_as_leader(idem(2, b"c"))
    again = log.append_as_leader(idem(0, b"a", b"b"))
    assert (again.first_offset, again.last_offset, again.duplicate) == (0, 1, True)
    assert log.log_end_offset == 3
    with pytest.raises(OutOfOrderSequenceError, match="expected 3"):
        log.append_as_leader(idem(5))
    log.append_as_leader(idem(0, epoch=1))
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(idem(1))
    assert log.log_end_offset == 4
    # A plain append takes the batch as it comes (and the state follows it).
    assert log.append(idem(0, b"a", b"b")).first_offset == 4
    # A coordinator's write is not checked either.
    assert not log.append_as_leader(idem(0, epoch=1), origin="coordinator").duplicate
    log.close()


def test_several_batches_of_one_request_must_continue_each_other(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(idem(0))
    with pytest.raises(OutOfOrderSequenceError, match="batch 1 of the request"):
        log.append_as_leader(idem(1) + idem(3))
    with pytest.raises(OutOfOrderSequenceError, match="repeats an earlier batch"):
        log.append_as_leader(idem(0) + idem(1))
    assert log.log_end_offset == 1
    assert log.append_as_leader(idem(1) + idem(2)).last_offset == 2
    log.close()


def test_a_follower_append_feeds_the_state_a_new_leader_answers_retries_from(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "a")
    follower = open_log(tmp_path / "b")
    leader.append_as_leader(idem(0, b"x"), leader_epoch=0)
    follower.append_as_follower(leader.read(0, upper_bound="log_end").to_bytes())
    retry = follower.append_as_leader(idem(0, b"x"), leader_epoch=1)
    assert retry.duplicate and retry.first_offset == 0 and follower.log_end_offset == 1
    leader.close()
    follower.close()


def test_a_replica_log_snapshots_at_roll_and_reloads_after_truncation(tmp_path: Path) -> None:
    log = open_log(tmp_path, producer_snapshots=True)
    seq = 0
    while len(log.segments) < 3:
        log.append_as_leader(idem(seq, b"x" * 60, b"y" * 60))
        seq += 2
    bases = [s.base_offset for s in log.segments[1:]]
    snaps = sorted(int(n.split(".")[0]) for n in os.listdir(log.dir) if n.endswith(".snapshot"))
    assert snaps == bases
    for base in bases:
        path = os.path.join(log.dir, "%020d.snapshot" % base)
        with open(path, "rb") as f:
            (entry,) = decode_snapshot(f.read(), path)
        # The state as of the segment's base offset: the producer's last batch ends just before.
        assert entry.batches[-1].last_offset == base - 1
    cut = bases[-1] - 4
    log.truncate_to(cut)
    assert not os.path.exists(os.path.join(log.dir, "%020d.snapshot" % bases[-1]))
    assert log.producer_state.producers[7].last_seq == cut - 1
    assert log.append_as_leader(idem(cut, b"z")).first_offset == cut
    log.close()
    again = open_log(tmp_path, producer_snapshots=True)
    assert again.producer_state.snapshots_loaded == 1
    retry = again.append_as_leader(idem(cut, b"z"))
    assert retry.duplicate and retry.first_offset == cut
    again.close()


def test_a_store_log_keeps_no_snapshots_and_its_state_is_the_logs(tmp_path: Path) -> None:
    with Store.open(tmp_path, {"log.segment.bytes": 1024}) as store:
        store.create_topic("t", 1)
        seq = 0
        while len(store.log("t", 0).segments) < 3:
            assert not store.append("t", 0, idem(seq, b"x" * 200)).duplicate
            seq += 1
        assert store.append("t", 0, idem(seq - 1, b"x" * 200)).duplicate
        state = store.log("t", 0).producer_state
        assert state.producers[7].last_seq == seq - 1 and state.dir is None
        assert not [n for n in os.listdir(store.log("t", 0).dir) if n.endswith(".snapshot")]


def test_a_store_log_answers_a_retry_across_a_restart_from_its_active_segment(tmp_path: Path) -> None:
    # A Kafka client retries a batch whose answer a restart of the store lost: the reopened log
    # rebuilds its producers from the active segment's batches before the first idempotent append.
    with Store.open(tmp_path) as store:
        store.create_topic("t", 1)
        store.append("t", 0, encode_batch([b"plain"]))
        for seq in range(3):
            store.append("t", 0, idem(seq, b"v%d" % seq))
    with Store.open(tmp_path) as store:
        again = store.append("t", 0, idem(2, b"v2"))
        assert (again.first_offset, again.duplicate) == (3, True)
        with pytest.raises(OutOfOrderSequenceError, match="expected 3"):
            store.append("t", 0, idem(5, b"v5"))
        assert not store.append("t", 0, idem(3, b"v3")).duplicate
        assert store.log("t", 0).log_end_offset == 5
