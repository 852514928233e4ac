"""The partition log (``seglog.storage.log.Log``): offsets and epochs, roll rules, flush policy and
checkpoints, reads under the high watermark, lookups by time, truncation, DeleteRecords,
retention, close/reopen, and opening the directories a Kafka broker wrote."""

from __future__ import annotations

import os
import shutil
import struct

import pytest

from seglog._native.crc32c import crc32c
from seglog.errors import (
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
    RecordTooLargeError,
)
from seglog.storage.checkpoints import fsync_dir
from seglog.storage.log import Log, LogAppendInfo
from seglog.storage.logdir import parse_partition_dir
from seglog.storage.records import batch_headers, decode_records, encode_batch
from seglog.util.clock import Clock, ManualClock, Scheduler
from tests.conftest import T0
from tests.logkit import (
    CONSUMER_OFFSETS_6,
    KAFKA_REAL,
    batch,
    copy_partition,
    read_offset_index,
    read_time_index,
)

SMALL = {"segment.bytes": 1024, "index.interval.bytes": 100, "segment.index.bytes": 4096}


def open_log(tmp_path, config=None, name="t-0", **kw):
    kw.setdefault("clock", ManualClock(T0))
    return Log.open(tmp_path / name, {**SMALL, **(config or {})}, **kw)


def values(log, start=None, upper_bound="log_end"):
    out = []
    off = log.log_start_offset if start is None else start
    while off < log.log_end_offset:
        r = log.read(off, 10**6, upper_bound=upper_bound)
        if not r:
            break
        recs = decode_records(r.to_bytes(), min_offset=off)
        out += [(x.offset, x.value) for x in recs]
        off = recs[-1].offset + 1
    return out


def fill(log, n, *, per_batch=1, ts=None, size=40):
    for k in range(n):
        t = ts(k) if ts else T0 + k
        log.append(batch(per_batch, ts=t, size=size, tag=k))


# -- opening and names -------------------------------------------------------------------------


def test_parse_partition_dir():
    assert parse_partition_dir("orders-0") == ("orders", 0)
    assert parse_partition_dir("my-topic.v2-17") == ("my-topic.v2", 17)
    assert parse_partition_dir("__consumer_offsets-6") == ("__consumer_offsets", 6)
    assert parse_partition_dir("nodash") is None
    assert parse_partition_dir("x-") is None
    # Only ASCII digits: int() would fail on "²" and read "٣" as 3.
    for name in ("t-\u00b2", "t-\u0663", "t-\uff11", "t-0\n", "t- 1", "t-+1"):
        assert parse_partition_dir(name) is None, name


def test_segment_files_with_non_ascii_digits_or_a_newline_are_not_segments(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(1))
    log.close()
    d = tmp_path / "t-0"
    (d / ("0" * 19 + "\u0661.log")).write_bytes(b"")
    (d / (f"{5:020d}.log\n")).write_bytes(b"")
    log = open_log(tmp_path)
    assert [s.base_offset for s in log.segments] == [0] and log.log_end_offset == 1
    log.close()


def test_new_log_layout(tmp_path):
    log = open_log(tmp_path)
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (0, 0, 0)
    log.close()
    assert sorted(os.listdir(tmp_path / "t-0")) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
    ]
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n1\nt 0 0\n"
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n0\n"
    with pytest.raises(TypeError, match="Log.open"):
        Log()


# -- append ------------------------------------------------------------------------------------


def test_append_assigns_offsets_and_returns_info(tmp_path):
    log = open_log(tmp_path)
    a = log.append(batch(3, ts=[T0, T0 + 9, T0 + 1]))
    b = log.append(batch(2, ts=T0 + 2) + batch(1, ts=T0 + 3))
    assert (
        a.first_offset,
        a.last_offset,
        a.records,
        a.batches,
        a.max_timestamp,
        a.offset_of_max_timestamp,
        a.log_append_time,
    ) == (0, 2, 3, 1, T0 + 9, 2, -1)
    assert (b.first_offset, b.last_offset, b.records, b.batches) == (3, 5, 3, 2)
    assert log.log_end_offset == log.high_watermark == 6
    assert [o for o, _ in values(log)] == list(range(6))
    log.close()


def test_append_rejects_bad_input_before_writing(tmp_path):
    log = open_log(tmp_path, {"max.message.bytes": 200})
    with pytest.raises(RecordTooLargeError, match="max.message.bytes"):
        log.append(batch(1, size=400))
    with pytest.raises(InvalidRecordError, match="no batch"):
        log.append(b"")
    bad = bytearray(batch(1))
    bad[-2] ^= 4
    with pytest.raises(Exception, match="CRC"):
        log.append(bytes(bad))
    assert log.log_end_offset == 0 and log.size == 0
    log.close()
    with pytest.raises(KafkaStorageError, match="closed"):
        log.append(batch(1))


def test_timestamp_validation_and_log_append_time(tmp_path):
    clock = ManualClock(T0)
    log = open_log(tmp_path, {"message.timestamp.before.max.ms": 1000}, clock=clock)
    with pytest.raises(Exception, match="out of range"):
        log.append(batch(1, ts=T0 - 5000))
    log.close()
    log = open_log(tmp_path, {"message.timestamp.after.max.ms": 1000}, name="a-0", clock=clock)
    with pytest.raises(Exception, match="out of range"):
        log.append(batch(1, ts=T0 + 5000))
    assert log.append(batch(1, ts=T0 + 1000)).first_offset == 0
    log.close()
    log = open_log(tmp_path, {"message.timestamp.type": "LogAppendTime"}, name="u-0", clock=clock)
    info = log.append(batch(2, ts=5))
    assert info.log_append_time == T0
    recs = decode_records(log.read(0).to_bytes(), verify_crc=True)
    assert [(r.timestamp, r.timestamp_type) for r in recs] == [(T0, 1), (T0, 1)]
    log.close()


def test_leader_epoch_written_into_batches_and_checkpointed(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(2), leader_epoch=0)
    log.append(batch(1))  # defaults to the latest epoch
    log.append(batch(3), leader_epoch=4)
    with pytest.raises(InvalidRecordError, match="older than"):
        log.append(batch(1), leader_epoch=3)
    heads = batch_headers(log.read(0, upper_bound="log_end").to_bytes(), verify_crc=True)
    assert [(h.base_offset, h.partition_leader_epoch) for h in heads] == [(0, 0), (2, 0), (3, 4)]
    assert log.epoch_cache.entries() == [(0, 0), (4, 3)]
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n4 3\n"
    log.truncate_to(3)
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    log.close()


def test_an_epoch_already_latest_is_assigned_again_when_its_entry_starts_past_the_append(tmp_path):
    # Appends in the latest epoch leave the cache alone, unless that epoch's entry starts beyond
    # the appended offsets (set ahead of the log): Kafka's assign then moves it back to them.
    log = open_log(tmp_path)
    log.append(batch(2), leader_epoch=1)
    log.append(batch(2), leader_epoch=1)
    assert log.epoch_cache.entries() == [(1, 0)]
    log.epoch_cache.assign(5, 20)
    log.append(batch(1), leader_epoch=5)
    log.append(batch(1), leader_epoch=5)
    assert log.epoch_cache.entries() == [(1, 0), (5, 4)]
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n5 4\n"
    log.close()


def test_append_takes_bytes_bytearray_and_memoryview_alike(tmp_path):
    log = open_log(tmp_path)
    b = batch(2)
    infos = [log.append(b), log.append(bytearray(b)), log.append(memoryview(b))]
    assert [(i.first_offset, i.last_offset, i.size) for i in infos] == [(0, 1, len(b)), (2, 3, len(b)), (4, 5, len(b))]
    buf = bytearray(b)
    log.append(buf)
    buf.extend(b"x")  # the log keeps no export of the caller's buffer
    with pytest.raises(TypeError, match="batches must be a bytes-like object"):
        log.append("text")
    log.close()


def test_append_info_is_read_only_and_compares_by_value(tmp_path):
    log = open_log(tmp_path)
    info = log.append(batch(3))
    assert (info.first_offset, info.last_offset, info.records, info.batches, info.log_start_offset) == (0, 2, 3, 1, 0)
    assert (info.log_append_time, info.duplicate) == (-1, False)
    assert info == LogAppendInfo(0, 2, info.max_timestamp, info.offset_of_max_timestamp, -1, 3, 1, info.size, 0)
    assert info != LogAppendInfo(0, 2, info.max_timestamp, info.offset_of_max_timestamp, -1, 3, 1, info.size, 0, True)
    assert "first_offset=0, last_offset=2" in repr(info)
    with pytest.raises(AttributeError):
        info.first_offset = 5
    log.close()


def test_follower_append_keeps_offsets_and_takes_epochs_from_batches(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(2, base_offset=0, epoch=1) + batch(1, base_offset=2, epoch=3), assign_offsets=False)
    with pytest.raises(InvalidRecordError, match="out-of-order"):
        log.append(batch(1, base_offset=1, epoch=3), assign_offsets=False)
    assert log.epoch_cache.entries() == [(1, 0), (3, 2)]
    heads = batch_headers(log.read(0, upper_bound="log_end").to_bytes())
    assert [h.partition_leader_epoch for h in heads] == [1, 3]
    log.close()


# -- roll --------------------------------------------------------------------------------------


def test_roll_on_segment_bytes_exactly_as_kafka(tmp_path):
    b = batch(1, size=40)
    n = len(b)
    log = open_log(tmp_path, {"segment.bytes": 3 * n})
    for _ in range(3):
        log.append(b)
    assert len(log.segments) == 1 and log.active.size == 3 * n  # size > segment.bytes - size rolls
    log.append(b)
    assert [s.base_offset for s in log.segments] == [0, 3]
    log.close()
    log = open_log(tmp_path, {"segment.bytes": 3 * n - 1}, name="u-0")
    for _ in range(3):
        log.append(b)
    assert [s.base_offset for s in log.segments] == [0, 2]
    # A batch larger than segment.bytes is refused as Kafka refuses it; nothing is written.
    big = batch(1, size=5 * n)
    with pytest.raises(
        RecordListTooLargeError,
        match=rf"Message batch size is {len(big)} bytes in "
        rf"append to partition u-0, which exceeds the maximum configured segment "
        rf"size of {3 * n - 1}",
    ):
        log.append(big)
    assert log.log_end_offset == 3
    log.append(b)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()
    names = sorted(os.listdir(tmp_path / "u-0"))
    assert names == sorted(f"{b:020d}.{e}" for b in (0, 2) for e in ("log", "index", "timeindex"))


def test_a_refused_append_neither_writes_nor_rolls(tmp_path):
    # The log's per-batch rules are checked before the roll: a full segment stays the active
    # one when the next append is refused, whatever its origin.
    b = batch(1, size=40)
    log = open_log(tmp_path, {"segment.bytes": 2 * len(b), "max.message.bytes": 120})
    log.append(b, origin="coordinator")
    log.append(b, origin="coordinator")
    big = batch(1, size=100, base_offset=2)
    assert len(b) <= 120 + 12 < len(big) < 2 * len(b)
    for append in (
        lambda: log.append(big, origin="coordinator"),
        lambda: log.append_as_follower(big),
    ):
        with pytest.raises(RecordTooLargeError) as e:
            append()
        assert str(e.value) == (
            f"the batch at byte 0 is {len(big)} bytes, over max.message.bytes 120 (+12 bytes of log "
            f"overhead) of {log.dir} (limit 120)"
        )
    limit = 2 * len(b)
    with pytest.raises(RecordListTooLargeError, match=rf"to partition t-0, which exceeds .* of {limit} \(at byte 0"):
        log.append(batch(1, size=limit), origin="coordinator")
    gap = bytearray(batch(2))
    struct.pack_into(">i", gap, 23, 2)
    struct.pack_into(">I", gap, 17, crc32c(bytes(gap[21:])))
    with pytest.raises(InvalidRecordError, match="holds 2 records but spans 3 offsets"):
        log.append(bytes(gap), origin="coordinator")
    assert [s.base_offset for s in log.segments] == [0] and log.log_end_offset == 2
    log.append(b, origin="coordinator")
    assert [s.base_offset for s in log.segments] == [0, 2]
    # The rules follow a replaced config.
    log.config = log.config.with_overrides({"max.message.bytes": 400})
    log.append(big, origin="coordinator")
    assert log.log_end_offset == 4
    log.close()


def test_roll_on_segment_ms_by_batch_timestamp(tmp_path):
    clock = ManualClock(T0)
    log = open_log(tmp_path, {"segment.ms": 1000}, clock=clock)
    log.append(batch(1, ts=T0))
    log.append(batch(1, ts=T0 + 1000))  # waited exactly segment.ms: no roll
    assert len(log.segments) == 1
    log.append(batch(1, ts=T0 + 1001))
    assert [s.base_offset for s in log.segments] == [0, 2]
    # The clock does not matter while batches carry timestamps...
    clock.advance(10_000)
    log.append(batch(1, ts=T0 + 1500))
    assert len(log.segments) == 2
    log.close()


def test_roll_on_segment_ms_by_clock_without_timestamps(tmp_path):
    clock = ManualClock(T0)
    log = open_log(tmp_path, {"segment.ms": 1000}, clock=clock)
    log.append(batch(1, ts=-1))
    clock.advance(1000)
    log.append(batch(1, ts=-1))
    assert len(log.segments) == 1
    clock.advance(1)
    log.append(batch(1, ts=-1))
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_roll_when_an_index_is_full(tmp_path):
    # index.interval.bytes 0: every append after the first adds an entry; 3 offset entries fit.
    log = open_log(tmp_path, {"index.interval.bytes": 0, "segment.index.bytes": 24})
    for k in range(10):
        log.append(batch(1, ts=T0 + k))
    bases = [s.base_offset for s in log.segments]
    # The time index (12-byte entries) holds 2 in 24 bytes and fills first.
    assert bases == [0, 3, 6, 9]
    for s in log.segments[:-1]:
        assert os.path.getsize(s.offset_index.path) == 16
        assert os.path.getsize(s.time_index.path) == 24
    assert [o for o, _ in values(log)] == list(range(10))
    log.close()


def test_roll_on_relative_offset_overflow(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(1, base_offset=0), assign_offsets=False)
    far = 2**31 + 10
    log.append(batch(2, base_offset=far), assign_offsets=False)
    assert [s.base_offset for s in log.segments] == [0, far]
    assert log.log_end_offset == far + 2
    assert [o for o, _ in values(log)] == [0, far, far + 1]
    log.close()


def test_explicit_roll_and_empty_active_segment(tmp_path):
    log = open_log(tmp_path)
    log.roll()  # empty: nothing to roll
    assert len(log.segments) == 1
    log.append(batch(2))
    seg = log.roll()
    assert seg.base_offset == 2 and len(log.segments) == 2
    assert log.roll() is seg
    log.close()


# -- flush policy and checkpoints --------------------------------------------------------------


def test_flush_messages_moves_the_recovery_point(tmp_path):
    log = open_log(tmp_path, {"flush.messages": 3})
    log.append(batch(2))
    assert (log.recovery_point, log.unflushed_messages) == (0, 2)
    log.append(batch(1))
    assert (log.recovery_point, log.unflushed_messages) == (3, 0)
    log.append(batch(1))
    log.flush()
    assert log.recovery_point == 4
    log.append(batch(2))
    log.flush(up_to=5)
    assert (log.recovery_point, log.unflushed_messages) == (5, 2)
    log.append(batch(3))
    log.close()
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n1\nt 0 9\n"


def test_new_segment_files_are_durable_at_once(tmp_path, monkeypatch):
    import seglog.storage.local_log
    import seglog.storage.log

    synced: list[str] = []

    def observed(path: str) -> None:
        synced.append(path)
        fsync_dir(path)

    for module in (seglog.storage.log, seglog.storage.local_log):  # the partition dir, the segments
        monkeypatch.setattr(module, "fsync_dir", observed)
    log = open_log(tmp_path, {"segment.bytes": 300})
    d = str(tmp_path / "t-0")
    assert synced == [str(tmp_path), d]  # the partition directory, its first segment
    fill(log, 1)
    log.flush()
    assert synced[2:] == []
    fill(log, 20)
    assert synced[2:] == [d] * (len(log.segments) - 1)  # one per roll
    log.close()


def test_truncation_keeps_counting_unflushed_messages(tmp_path):
    log = open_log(tmp_path, {"flush.messages": 5})
    log.append(batch(2))
    log.flush()
    log.append(batch(3))
    log.append(batch(1))  # 4 unflushed: 2..5
    log.truncate_to(5)  # 2..4 are still unflushed
    assert log.unflushed_messages == 3
    log.append(batch(2))  # 5 unflushed now: flushed by the policy
    assert log.recovery_point == 7 and log.unflushed_messages == 0
    log.close()


def test_flush_ms_runs_on_the_scheduler(tmp_path):
    clock = ManualClock(T0)
    sched = Scheduler(clock)
    log = open_log(tmp_path, {"flush.ms": 500}, clock=clock, scheduler=sched)
    log.append(batch(2))
    clock.advance(499)
    assert log.recovery_point == 0
    clock.advance(1)
    assert log.recovery_point == 2 and log.unflushed_messages == 0
    log.append(batch(1))
    clock.advance(200)
    assert log.recovery_point == 2
    clock.advance(400)
    assert log.recovery_point == 3
    log.close()
    sched.shutdown()


def test_flush_ms_on_a_standalone_log_flushes_on_time(tmp_path):
    # No scheduler given: the log runs flush.ms itself instead of ignoring it.
    clock = ManualClock(T0)
    log = open_log(tmp_path, {"flush.ms": 500}, clock=clock)
    log.append(batch(2))
    clock.advance(499)
    assert log.recovery_point == 0
    clock.advance(1)
    assert log.recovery_point == 2 and log.unflushed_messages == 0
    log.close()
    clock.advance(10_000)  # the log's own flusher is gone with it
    # The system clock: a daemon thread flushes, and close() stops it.
    import threading
    import time

    log = open_log(tmp_path, {"flush.ms": 20}, name="w-0", clock=Clock())
    log.append(batch(3))
    deadline = time.monotonic() + 10
    while log.recovery_point < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert log.recovery_point == 3
    name = "seglog-flush-w-0"
    assert any(t.name == name for t in threading.enumerate())
    log.close()
    deadline = time.monotonic() + 10
    while any(t.name == name for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(t.name == name for t in threading.enumerate())
    # Without flush.ms no thread is started.
    log = open_log(tmp_path, name="n-0", clock=Clock())
    assert not any(t.name == "seglog-flush-n-0" for t in threading.enumerate())
    log.close()


def test_checkpoint_files_exact_text(tmp_path):
    a = open_log(tmp_path, name="alpha-1")
    b = open_log(tmp_path, name="beta.x-0")
    fill(a, 5)
    fill(b, 3)
    a.flush()
    a.checkpoint()
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n1\nalpha 1 5\n"
    b.close()
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n2\nalpha 1 5\nbeta.x 0 3\n"
    a.delete_records(2)
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\nalpha 1 2\n"
    a.close()
    assert not any(n.endswith(".tmp") for n in os.listdir(tmp_path))


# -- reads -------------------------------------------------------------------------------------


def test_read_upper_bounds_and_range(tmp_path):
    log = open_log(tmp_path, replicated=True)
    fill(log, 20, per_batch=2)
    assert log.high_watermark == 0
    assert not log.read(0)  # consumers see nothing yet
    assert len(log.read(0, upper_bound="log_end").to_bytes()) > 0
    log.update_high_watermark(10)
    assert [o for o, _ in values(log, upper_bound="high_watermark")] == list(range(10))
    assert [o for o, _ in values(log, upper_bound=26)] == list(range(26))
    assert [o for o, _ in values(log, upper_bound=25)] == list(range(24))  # not half a batch
    assert values(log, 4, upper_bound=4) == []
    r = log.read(3, 1)
    assert (r.start_offset, r.high_watermark, r.log_start_offset, r.log_end_offset) == (3, 10, 0, 40)
    assert [x.offset for x in decode_records(r.to_bytes())] == [2, 3]  # the whole batch
    assert r.size == sum(v.nbytes for v in r.views())
    assert log.update_high_watermark(99) == 40
    assert not log.maybe_increment_high_watermark(30)
    with pytest.raises(OffsetOutOfRangeError, match=r"\[0, 40\)"):
        log.read(41)
    assert not log.read(40)
    with pytest.raises(ValueError, match="upper_bound"):
        log.read(0, upper_bound="nope")
    # An offset bound past any int64 is the log end; a negative one reads nothing.
    assert log.read(0, 10**6, upper_bound=2**70).size == log.read(0, 10**6, upper_bound="log_end").size > 0
    assert not log.read(0, upper_bound=-1)
    with pytest.raises(ValueError, match="max_bytes"):
        log.read(0, -1)
    a, b = log.read(3, 1), log.read(3, 1)
    assert a == a and a != b  # the same slice objects, or not equal (as the dataclass it was)
    assert repr(a).startswith("LogReadResult(slices=(FetchSlice(") and "log_end_offset=40)" in repr(a)
    log.close()


def test_native_reads_take_the_same_arguments_as_python_ones(tmp_path):
    """``read`` and ``offset_for_timestamp`` are native methods with a Python path for what is
    not a plain int or str: int subclasses and ``__index__`` objects read as their values, bools
    and floats are refused by name, special timestamps and bounds answer as before, and the
    lock is released whatever happened (another thread can still read)."""
    import enum
    import threading

    class Off(enum.IntEnum):
        THREE = 3

    class Idx:
        def __init__(self, v: int = 3) -> None:
            self.v = v

        def __index__(self) -> int:
            return self.v

    log = open_log(tmp_path, {"segment.bytes": 300}, replicated=True)
    fill(log, 20, per_batch=2)
    log.update_high_watermark(10)
    stamps = {r.offset: r.timestamp for r in decode_records(log.read(0, 10**6, upper_bound="log_end").to_bytes())}
    assert sorted(stamps) == list(range(40))

    def first_at(ts: int, bound: int) -> tuple[int, int] | None:
        return next(((o, t) for o, t in sorted(stamps.items()) if t >= ts and o < bound), None)

    want = log.read(3, 1)
    for offset in (Off.THREE, Idx()):
        got = log.read(offset, 1)
        assert (got.to_bytes(), got.start_offset, type(got.start_offset)) == (want.to_bytes(), 3, int)
    assert log.read(3, Idx(), upper_bound=Idx(5)).to_bytes() == want.to_bytes()
    assert not log.read(3, upper_bound=Idx())  # nothing below offset 3 from 3
    for bad, match in ((True, "offset must be an int, not bool"), (3.0, "offset must be an int, not float")):
        with pytest.raises(TypeError, match=match):
            log.read(bad)
    with pytest.raises(TypeError, match="upper_bound must be an int, not bool"):
        log.read(3, upper_bound=True)
    with pytest.raises(OffsetOutOfRangeError, match=r"offset 41 is out of range for .*t-0: the log holds \[0, 40\)"):
        log.read(Off.THREE + 38)
    assert log.offset_for_timestamp(T0 + 3) == first_at(T0 + 3, 10) is not None
    assert log.offset_for_timestamp(Idx(), upper_bound=Idx()) == first_at(3, 3) == (0, stamps[0])
    assert log.offset_for_timestamp(T0 + 15) is None  # only at or above the high watermark
    assert log.offset_for_timestamp(T0 + 15, upper_bound=40) == first_at(T0 + 15, 40) is not None
    assert log.offset_for_timestamp(-2) == (0, -1)
    assert log.offset_for_timestamp(-1) == (10, -1)
    assert log.offset_for_timestamp(-3) is None  # the largest timestamp is at or above the high watermark
    with pytest.raises(ValueError, match="invalid timestamp -4"):
        log.offset_for_timestamp(-4)
    with pytest.raises(TypeError, match="upper_bound must be an int, not bool"):
        log.offset_for_timestamp(T0, upper_bound=False)
    # Every failure above released the lock: another thread reads at once.
    out: list[object] = []
    t = threading.Thread(target=lambda: out.append(log.read(3, 1).to_bytes()))
    t.start()
    t.join(5)
    assert out == [want.to_bytes()]
    log.close()


def test_read_only_log_without_index_files_answers_the_same(tmp_path):
    """A read-only directory (a broker's) may lack ``.index``/``.timeindex`` files: reads and
    timestamp searches walk the batch headers from the segment's start and give the same answers."""
    log = open_log(tmp_path, {"segment.bytes": 400})
    stamps = []
    for k in range(40):
        ts = [T0 + 10 * k + d for d in (5, 0, 7)]
        log.append(batch(3, ts=ts, tag=k))
        stamps += ts
    log.close()
    ro = Log.open(tmp_path / "t-0", read_only=True)
    targets = [T0 - 1, T0 + 3, T0 + 8, T0 + 200, T0 + 397, T0 + 398]
    want_ts = [ro.offset_for_timestamp(t) for t in targets]
    want_read = [ro.read(o, 1).to_bytes() for o in range(0, 120, 7)]
    ro.close()
    for f in (tmp_path / "t-0").iterdir():
        if f.suffix in (".index", ".timeindex"):
            f.unlink()
    ro = Log.open(tmp_path / "t-0", read_only=True)
    assert len(ro.segments) > 3
    assert [ro.offset_for_timestamp(t) for t in targets] == want_ts
    assert want_ts == [next(((i, t) for i, t in enumerate(stamps) if t >= x), None) for x in targets]
    assert [ro.read(o, 1).to_bytes() for o in range(0, 120, 7)] == want_read
    assert not any(f.suffix == ".index" for f in (tmp_path / "t-0").iterdir())
    ro.close()


def test_read_across_many_segments_returns_the_model(tmp_path):
    log = open_log(tmp_path, {"segment.bytes": 300})
    model = []
    for k in range(60):
        n = 1 + k % 4
        log.append(batch(n, tag=k, size=10 + k % 7))
        model += [f"{k}:{i}".encode().ljust(10 + k % 7, b".") for i in range(n)]
    assert len(log.segments) > 10
    assert [v for _, v in values(log)] == model
    for off in range(0, len(model), 7):
        r = log.read(off, 1)
        recs = decode_records(r.to_bytes())
        assert recs[0].offset <= off <= recs[-1].offset
    log.close()


def test_offset_for_timestamp(tmp_path):
    log = open_log(tmp_path, {"segment.bytes": 400}, replicated=True)
    stamps = []
    for k in range(40):
        ts = [T0 + 10 * k + d for d in (5, 0, 7)]  # not sorted inside a batch
        log.append(batch(3, ts=ts, tag=k))
        stamps += ts
    log.update_high_watermark(len(stamps))
    assert len(log.segments) > 3
    for target in [T0 - 1, T0, T0 + 3, T0 + 6, T0 + 7, T0 + 8, T0 + 200, T0 + 395, T0 + 397, T0 + 398]:
        want = next(((i, t) for i, t in enumerate(stamps) if t >= target), None)
        assert log.offset_for_timestamp(target) == want, target
    assert log.offset_for_timestamp(-2) == (0, -1)
    assert log.offset_for_timestamp(-1) == (120, -1)
    assert log.offset_for_timestamp(-3) == (119, T0 + 397)
    with pytest.raises(ValueError):
        log.offset_for_timestamp(-4)
    # Never above the high watermark.
    log.update_high_watermark(60)
    assert log.offset_for_timestamp(-1) == (60, -1)
    assert log.offset_for_timestamp(T0 + 250) is None
    assert log.offset_for_timestamp(-3) is None  # the max record is above it
    assert log.offset_for_timestamp(T0 + 196) == (59, T0 + 197)
    # The max-timestamp record is found after a reopen (time index last entries).
    log.close()
    log = open_log(tmp_path, {"segment.bytes": 400})
    assert log.offset_for_timestamp(-3) == (119, T0 + 397)
    assert log.offset_for_timestamp(T0 + 396) == (119, T0 + 397)
    log.close()


def test_offset_for_timestamp_after_delete_records(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(3, ts=[T0 + 50, T0 + 1, T0 + 2]))
    log.append(batch(2, ts=[T0 + 3, T0 + 4]))
    log.delete_records(1)
    assert log.offset_for_timestamp(T0) == (1, T0 + 1)
    assert log.offset_for_timestamp(-2) == (1, -1)
    # The largest readable timestamp is now T0 + 4 at offset 4.
    assert log.offset_for_timestamp(-3) == (4, T0 + 4)
    log.close()


# -- truncation --------------------------------------------------------------------------------


def test_truncate_to_across_segments(tmp_path):
    log = open_log(tmp_path, {"segment.bytes": 300, "flush.messages": 1})
    fill(log, 30, per_batch=2)
    nseg = len(log.segments)
    assert log.truncate_to(61) is False
    assert log.truncate_to(25) is True
    assert log.log_end_offset == 24  # the batch 24..25 goes whole
    assert (log.high_watermark, log.recovery_point) == (24, 24)
    assert len(log.segments) < nseg
    assert log.active.next_offset == 24
    assert [o for o, _ in values(log)] == list(range(24))
    info = log.append(batch(1))
    assert info.first_offset == 24
    # The active segment's indexes accept entries again after being trimmed at roll.
    fill(log, 10)
    assert [o for o, _ in values(log)] == list(range(35))
    with pytest.raises(ValueError):
        log.truncate_to(-1)
    log.close()
    log = open_log(tmp_path, {"segment.bytes": 300})
    assert [o for o, _ in values(log)] == list(range(35))
    log.close()


def test_truncate_refused_while_a_view_lives_leaves_the_log_intact(tmp_path):
    log = open_log(tmp_path, {"segment.bytes": 300})
    fill(log, 30)
    nseg = len(log.segments)
    r = log.read(29)
    v = r.views()
    with pytest.raises(BufferError):
        log.truncate_to(3)
    assert len(log.segments) == nseg and log.log_end_offset == 30
    assert [o for o, _ in values(log)] == list(range(30))
    del v, r
    log.truncate_to(3)
    assert [o for o, _ in values(log)] == [0, 1, 2]
    log.close()


def test_truncate_into_a_batch_straddling_the_log_start(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(3))
    log.delete_records(2)
    assert log.truncate_to(2) is True  # the batch 0..2 holds offset 2: it goes whole
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (0, 0, 0)
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n0\n"
    assert log.append(batch(1)).first_offset == 0
    log.close()


def test_truncate_fully_below_log_start(tmp_path):
    log = open_log(tmp_path, {"segment.bytes": 300})
    fill(log, 20)
    log.delete_records(10)
    log.truncate_to(5)
    assert (log.log_start_offset, log.log_end_offset) == (5, 5)
    assert [s.base_offset for s in log.segments] == [5]
    log.append(batch(1))
    assert values(log) == [(5, b"0:0".ljust(10, b"."))]
    log.close()


# -- DeleteRecords and retention ---------------------------------------------------------------


def test_delete_records(tmp_path):
    log = open_log(tmp_path, {"segment.bytes": 300}, replicated=True)
    fill(log, 30)
    log.update_high_watermark(20)
    with pytest.raises(OffsetOutOfRangeError, match="high watermark"):
        log.delete_records(21)
    bases = [s.base_offset for s in log.segments]
    assert log.delete_records(12) == 12
    assert log.log_start_offset == 12
    assert log.segments[0].base_offset == max(b for b in bases if b <= 12)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(11)
    assert [o for o, _ in values(log, upper_bound="high_watermark")] == list(range(12, 20))
    assert log.delete_records(5) == 12
    log.close()
    log = open_log(tmp_path, {"segment.bytes": 300}, replicated=True)
    assert log.log_start_offset == 12
    log.close()


def test_retention_by_time_never_at_or_above_the_high_watermark(tmp_path):
    clock = ManualClock(T0)
    log = open_log(
        tmp_path, {"segment.bytes": 300, "retention.ms": 1000, "file.delete.delay.ms": 0}, clock=clock, replicated=True
    )
    fill(log, 30, ts=lambda k: T0 + 10 * k)
    bases = [s.base_offset for s in log.segments]
    log.update_high_watermark(bases[3] + 1)  # inside segment 3
    clock.advance(10_000)  # everything is expired
    assert log.delete_old_segments() == 3
    assert log.log_start_offset == bases[3]
    assert [s.base_offset for s in log.segments] == bases[3:]
    log.update_high_watermark(30)
    assert log.delete_old_segments() == len(bases) - 3
    # The active segment had to go too: rolled first, the log stays at its end.
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (30, 30, 1)
    assert not [n for n in os.listdir(tmp_path / "t-0") if n.endswith(".deleted")]
    log.append(batch(1))
    assert values(log) == [(30, b"0:0".ljust(10, b"."))]
    log.close()


def test_retention_by_time_keeps_young_segments(tmp_path):
    clock = ManualClock(T0)
    log = open_log(tmp_path, {"segment.bytes": 300, "retention.ms": 1000}, clock=clock)
    fill(log, 30, ts=lambda k: T0 + 100 * k)
    clock.advance(2000)  # now = T0 + 2000: records with ts < T0 + 1000 are expired
    bases = [s.base_offset for s in log.segments]
    maxes = [s.largest_timestamp for s in log.segments]
    want = 0
    while want < len(bases) and T0 + 2000 - maxes[want] > 1000:
        want += 1
    assert 0 < want < len(bases)
    assert log.delete_old_segments() == want
    assert log.segments[0].base_offset == bases[want]
    log.close()


def test_retention_by_bytes_and_delayed_file_deletion(tmp_path):
    clock = ManualClock(T0)
    sched = Scheduler(clock)
    log = open_log(
        tmp_path,
        {"segment.bytes": 300, "retention.bytes": 700, "file.delete.delay.ms": 5000},
        clock=clock,
        scheduler=sched,
    )
    fill(log, 40)
    sizes = [s.size for s in log.segments]
    total = sum(sizes)
    n = 0
    while total - sizes[n] >= 700:
        total -= sizes[n]
        n += 1
    first_left = log.segments[n].base_offset
    assert log.delete_old_segments() == n
    assert log.size >= 700 and log.size - log.segments[0].size < 700
    assert log.log_start_offset == first_left
    d = tmp_path / "t-0"
    deleted = [x for x in os.listdir(d) if x.endswith(".deleted")]
    assert len(deleted) == 3 * n
    clock.advance(5000)
    assert not [x for x in os.listdir(d) if x.endswith(".deleted")]
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n0\n"  # = first base
    log.close()
    sched.shutdown()


def test_retention_off_and_compact_policy(tmp_path):
    clock = ManualClock(T0)
    log = open_log(tmp_path, {"segment.bytes": 300, "retention.ms": -1}, clock=clock)
    fill(log, 20)
    clock.advance(10**9)
    assert log.delete_old_segments() == 0
    log.close()
    log = open_log(
        tmp_path, {"segment.bytes": 300, "retention.ms": 1, "cleanup.policy": "compact"}, name="c-0", clock=clock
    )
    for k in range(20):  # a compacted log takes keyed records only
        log.append(encode_batch([b"v".ljust(40, b".")], keys=[b"k%d" % k], timestamps=clock.time_ms()))
    clock.advance(10**6)
    assert log.delete_old_segments() == 0
    log.close()


# -- close / reopen ----------------------------------------------------------------------------


def test_close_and_reopen_keeps_everything(tmp_path):
    clock = ManualClock(T0)
    log = open_log(tmp_path, {"segment.bytes": 300}, clock=clock)
    fill(log, 25, per_batch=2, ts=lambda k: T0 + k)
    log.append(batch(1), leader_epoch=2)
    want = values(log)
    bases = [s.base_offset for s in log.segments]
    log.close()
    assert log.closed
    log.close()  # idempotent
    d = tmp_path / "t-0"
    for b in bases[:-1]:
        seg_idx = read_offset_index(d / f"{b:020d}.index", b)
        assert os.path.getsize(d / f"{b:020d}.index") == 8 * len(seg_idx)
    log = open_log(tmp_path, {"segment.bytes": 300}, clock=clock)
    # Without the log dir's clean-shutdown marker, Kafka recovers from the segment holding the
    # recovery point: here the active one only.
    assert log.recovery_summary.segments_recovered == 1
    assert values(log) == want and [s.base_offset for s in log.segments] == bases
    assert log.epoch_cache.entries() == [(2, 50)]
    assert log.append(batch(1)).first_offset == 51
    assert batch_headers(log.read(51).to_bytes())[0].partition_leader_epoch == 2
    log.close()


def test_unclean_reopen_recovers_only_past_the_recovery_point(tmp_path):
    log = open_log(tmp_path, {"segment.bytes": 300})
    fill(log, 30)
    log.flush(up_to=15)
    log.checkpoint()
    segs = log.segments
    log.abandon()  # the crash: files closed as a killed process leaves them
    floor = max(s.base_offset for s in segs if s.base_offset <= 15)
    rp_segments = sum(1 for s in segs if s.base_offset >= floor)
    log = open_log(tmp_path, {"segment.bytes": 300})
    assert log.recovery_summary.segments_recovered == rp_segments
    assert log.recovery_point == 15
    assert [o for o, _ in values(log)] == list(range(30))
    log.close()


def test_reopen_with_clean_shutdown_marker_skips_recovery(tmp_path):
    log = open_log(tmp_path, {"segment.bytes": 300})
    fill(log, 30)
    log.close()
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n0\n")
    log = open_log(tmp_path, {"segment.bytes": 300})
    assert log.recovery_summary.segments_recovered == len(log.segments)
    log.close()
    (tmp_path / ".kafka_cleanshutdown").write_text("")
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n0\n")
    log = open_log(tmp_path, {"segment.bytes": 300})
    assert log.recovery_summary.segments_recovered == 0 and log.recovery_point == 30
    log.close()


def test_leftover_files_are_cleaned_on_open(tmp_path):
    log = open_log(tmp_path, {"segment.bytes": 300})
    fill(log, 10)
    log.close()
    d = tmp_path / "t-0"
    (d / "00000000000000000099.index").write_bytes(b"")  # orphan index
    (d / "00000000000000000098.log.deleted").write_bytes(b"x")
    (d / "leader-epoch-checkpoint.tmp").write_bytes(b"junk")
    log = open_log(tmp_path, {"segment.bytes": 300})
    names = os.listdir(d)
    assert not any(n.startswith("0000000000000000009") for n in names)
    assert "leader-epoch-checkpoint.tmp" not in names
    assert [o for o, _ in values(log)] == list(range(10))
    log.close()


def test_read_only_log_refuses_writes(tmp_path):
    log = open_log(tmp_path)
    fill(log, 3)
    log.close()
    ro = Log.open(tmp_path / "t-0", SMALL, read_only=True)
    with pytest.raises(KafkaStorageError, match="read-only"):
        ro.append(batch(1))
    with pytest.raises(KafkaStorageError, match="read-only"):
        ro.truncate_to(1)
    assert ro.delete_old_segments() == 0
    assert [o for o, _ in values(ro)] == [0, 1, 2]
    ro.close()
    with pytest.raises(FileNotFoundError):
        Log.open(tmp_path / "missing-0", read_only=True)


# -- Kafka-written directories -----------------------------------------------------------------


def test_read_only_open_of_kafka_consumer_offsets(tmp_path):
    before = {p.name: p.read_bytes() for p in CONSUMER_OFFSETS_6.iterdir()}
    log = Log.open(CONSUMER_OFFSETS_6, read_only=True)
    assert (log.topic, log.partition) == ("__consumer_offsets", 6)
    assert (log.log_start_offset, log.log_end_offset) == (0, 13)
    recs = [r for r in decode_records(log.read(0, 10**6).to_bytes())]
    assert [r.offset for r in recs] == list(range(13))
    assert log.offset_for_timestamp(-3) == (12, 1769793578176)
    assert log.offset_for_timestamp(1769791783399) == (3, 1769791783399)
    assert log.epoch_cache.entries() == [(0, 0)]
    log.close()
    assert {p.name: p.read_bytes() for p in CONSUMER_OFFSETS_6.iterdir()} == before


@pytest.mark.parametrize(
    "rel,n",
    [
        ("LDI-POC/TestTopicPatient-0", 3),
        ("kafkalite/hamlet-gzip-0", 5382),
        ("kafka-connect-spooldir/_confluent-command-0", 2),
    ],
)
def test_read_only_open_of_other_kafka_dirs(rel, n):
    src = KAFKA_REAL / rel
    heads = batch_headers((src / "00000000000000000000.log").read_bytes())
    if any(h.compression for h in heads):
        pytest.importorskip("seglog._native.compression")
    log = Log.open(src, read_only=True)
    assert log.log_end_offset == n
    got = []
    off = 0
    while off < n:
        recs = decode_records(log.read(off, 1 << 16).to_bytes(), min_offset=off)
        got += [r.offset for r in recs]
        off = recs[-1].offset + 1
    assert got == list(range(n))
    assert os.listdir(src) == ["00000000000000000000.log"]
    log.close()


def test_writable_open_of_a_kafka_copy(tmp_path):
    d = copy_partition(CONSUMER_OFFSETS_6, tmp_path, "__consumer_offsets-6")
    log = Log.open(d)
    # No recovery-point checkpoint and no clean-shutdown marker here: everything is recovered.
    assert log.recovery_summary.segments_recovered == 1
    assert log.recovery_summary.bytes_truncated == 0
    assert log.log_end_offset == 13
    info = log.append(encode_batch([b"v"], keys=[b"k"], timestamps=1769793578200))
    assert info.first_offset == 13
    assert batch_headers(log.read(13).to_bytes())[0].partition_leader_epoch == 0
    log.close()
    # Recovery counts the bytes since the last rebuilt entry (13751 - 9571 > 4096), so the first
    # append adds its entry. (Kafka counts from 0 after a restart and would add none: both
    # are valid sparse indexes.)
    assert read_offset_index(d / "00000000000000000000.index", 0) == [(3, 4730), (7, 9571), (13, 13751)]
    assert read_time_index(d / "00000000000000000000.timeindex", 0)[-1] == (1769793578200, 13)
    assert (d / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n1\n__consumer_offsets 6 14\n"
    log = Log.open(d)
    assert [r.offset for r in decode_records(log.read(0, 10**6).to_bytes())] == list(range(14))
    log.close()
    shutil.rmtree(d)


def test_preallocate_allocates_the_whole_segment_and_roll_gives_back_the_rest(tmp_path):
    """``preallocate=true``: the first append allocates blocks for all of segment.bytes (past an
    unchanged file length, unlike Kafka's setLength); without it, 4 MiB steps."""
    log = open_log(tmp_path, {"preallocate": True, "segment.bytes": 16 << 20})
    if log.active.allocate_step == 0:
        log.close()
        pytest.skip(f"{tmp_path} is not on ext4: no blocks are allocated ahead there")
    log.append(batch(100, size=100))
    seg = log.active
    assert seg.allocated_to == 16 << 20
    assert os.stat(seg.log_path).st_blocks * 512 >= 16 << 20
    assert os.path.getsize(seg.log_path) == seg.size
    log.roll()
    assert seg.allocated_to == seg.size
    assert os.stat(seg.log_path).st_blocks * 512 < seg.size + 64 * 1024
    log.close()
    log = open_log(tmp_path, {"segment.bytes": 16 << 20}, name="t-1")
    log.append(batch(100, size=100))
    assert log.active.allocated_to == 4 << 20
    log.close()
    assert os.stat(os.path.join(log.dir, "00000000000000000000.log")).st_blocks * 512 < (4 << 20)
