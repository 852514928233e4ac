"""A Hypothesis state machine of the partition log against a plain list model.

The model holds the records (offset, value, timestamp), the batch boundaries (truncation removes
whole batches), the log start and the high watermark. Every rule's answer is compared with the
model: reads, lookups by offset (``bisect`` over the model's batches) and by time (a scan of the
model), truncation, DeleteRecords, retention, roll, close/reopen, and a ``crash`` that leaves the
directory as a power loss would: every segment file cut back to the length it had when it was
last made durable (observed at ``Log.flush``), and every directory entry not made durable by a
directory fsync gone. Invariants after every step: offsets contiguous from the log start,
``log_start <= HW <= LEO``, nothing flushed is ever lost, nothing corrupt is ever returned.
"""

from __future__ import annotations

import bisect
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

import seglog.storage.checkpoints
import seglog.storage.local_log
import seglog.storage.log
from seglog.errors import RecordListTooLargeError
from seglog.storage.log import Log
from seglog.storage.records import batch_headers, decode_records, encode_batch
from seglog.util.clock import ManualClock
from tests.conftest import T0

CONFIG = {
    "segment.bytes": 700,
    "segment.ms": 10_000,
    "segment.index.bytes": 96,  # 12 offset / 8 time entries: index-full rolls happen
    "index.interval.bytes": 120,
    "retention.ms": 30_000,
    "retention.bytes": 2_500,
    "file.delete.delay.ms": 0,
}
SEGMENT_FILE = re.compile(r"^\d{20}\.(log|index|timeindex)$")

# fsync_dir observers: directory path -> callback(listing), set while a machine runs.
_dir_observers: dict[str, Callable[[list[str]], None]] = {}


@contextmanager
def observe_dir_fsyncs():
    real = seglog.storage.checkpoints.fsync_dir

    def observed(path: str) -> None:
        real(path)
        cb = _dir_observers.get(os.path.abspath(path))
        if cb is not None:
            cb(sorted(os.listdir(path)))

    # The storage modules call the name each imported: patch every one.
    modules: tuple[Any, ...] = (seglog.storage.log, seglog.storage.local_log, seglog.storage.checkpoints)
    saved = [m.fsync_dir for m in modules]
    for m in modules:
        m.fsync_dir = observed
    try:
        yield
    finally:
        for m, f in zip(modules, saved):
            m.fsync_dir = f


class ObservedLog(Log):
    """A Log that reports each completed flush (the moment data becomes durable)."""

    on_flush: Callable[[], None] | None = None

    def flush(self, up_to: int | None = None) -> None:
        super().flush(up_to)
        if self.on_flush is not None:
            self.on_flush()


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="seglog-model-")
        self.dir = os.path.join(self.root, "m-0")
        self.clock = ManualClock(T0)
        self.records: dict[int, tuple[bytes, int]] = {}
        self.batches: list[tuple[int, int]] = []  # (base, last) of live batches, ascending
        self.start = 0
        self.leo = 0
        self.hw = 0
        self.durable = 0  # every offset in [start, durable) must survive a crash
        self.flushed_sizes: dict[str, int] = {}
        self.durable_names: set[str] = set()
        self.serial = 0
        _dir_observers[self.dir] = self._dir_synced
        self.log = self._open()

    # -- plumbing ------------------------------------------------------------------------------

    def _open(self, **kw) -> ObservedLog:
        log = ObservedLog.open(self.dir, CONFIG, clock=self.clock, replicated=True, high_watermark=self.hw, **kw)
        assert isinstance(log, ObservedLog)
        log.on_flush = self._flushed
        return log

    def _flushed(self) -> None:
        self.flushed_sizes = {
            n: os.path.getsize(os.path.join(self.dir, n)) for n in os.listdir(self.dir) if SEGMENT_FILE.match(n)
        }
        self.durable = max(self.durable, self.log.recovery_point)

    def _dir_synced(self, listing: list[str]) -> None:
        self.durable_names = set(listing)

    def _sync_model_to(self, start: int, leo: int, hw: int) -> None:
        for off in [o for o in self.records if o < start or o >= leo]:
            del self.records[off]
        self.batches = [b for b in self.batches if b[1] >= start and b[0] < leo]
        self.start, self.leo, self.hw = start, leo, hw
        self.durable = min(self.durable, leo)

    def _all(self, upper_bound: str | int = "log_end") -> list[tuple[int, bytes | None, int]]:
        out: list[tuple[int, bytes | None, int]] = []
        off = self.log.log_start_offset
        while True:
            r = self.log.read(off, 1 << 20, upper_bound=upper_bound)
            if not r:
                break
            recs = decode_records(r.to_bytes(), verify_crc=True, min_offset=off)
            assert recs, f"a read at {off} returned batches without records at or after it"
            out += [(x.offset, x.value, x.timestamp) for x in recs]
            off = recs[-1].offset + 1
        return out

    def teardown(self) -> None:
        _dir_observers.pop(self.dir, None)
        try:
            self.log.close()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    # -- rules ---------------------------------------------------------------------------------

    @rule(
        sizes=st.lists(st.lists(st.integers(0, 120), min_size=1, max_size=4), min_size=1, max_size=3),
        jitter=st.integers(-2000, 2000),
    )
    def append(self, sizes, jitter):
        batches = []
        expected = []
        now = self.clock.time_ms()
        for group in sizes:
            vals, stamps = [], []
            for size in group:
                self.serial += 1
                vals.append(f"v{self.serial}".encode().ljust(size, b"."))
                stamps.append(now + jitter + (self.serial % 7) * 100 - 300)
            batches.append(encode_batch(vals, timestamps=stamps))
            expected.append(list(zip(vals, stamps)))
        data = b"".join(batches)
        if max(len(b) for b in batches) > CONFIG["segment.bytes"]:
            # Kafka refuses a batch that cannot fit one segment; nothing is written.
            with pytest.raises(RecordListTooLargeError):
                self.log.append(data)
            assert self.log.log_end_offset == self.leo
            return
        info = self.log.append(data)
        assert info.first_offset == self.leo
        off = self.leo
        for recs in expected:
            self.batches.append((off, off + len(recs) - 1))
            for v, t in recs:
                self.records[off] = (v, t)
                off += 1
        assert info.last_offset == off - 1
        self.leo = off

    @rule(ms=st.integers(0, 15_000))
    def advance_clock(self, ms):
        self.clock.advance(ms)

    @rule()
    def roll(self):
        self.log.roll()

    @rule()
    def flush(self):
        self.log.flush()
        assert self.log.recovery_point == self.leo
        self.durable = self.leo

    @rule(data=st.data())
    def move_high_watermark(self, data):
        hw = data.draw(st.integers(self.hw, self.leo))
        assert self.log.update_high_watermark(hw) == hw
        self.hw = hw

    @rule(data=st.data(), max_bytes=st.sampled_from([0, 1, 100, 400, 5000]), follower=st.booleans())
    def read(self, data, max_bytes, follower):
        off = data.draw(st.integers(self.start, self.leo))
        bound = self.leo if follower else self.hw
        r = self.log.read(off, max_bytes, upper_bound="log_end" if follower else "high_watermark")
        assert r.high_watermark == self.hw and r.log_end_offset == self.leo
        lasts = [b[1] for b in self.batches]
        i = bisect.bisect_left(lasts, off)  # the batch holding off
        if off >= bound or i == len(self.batches) or self.batches[i][1] >= bound:
            assert not r
            return
        recs = decode_records(r.to_bytes(), verify_crc=True)
        assert recs[0].offset == self.batches[i][0]
        offsets = [x.offset for x in recs]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
        assert offsets[-1] < bound
        assert r.size <= max_bytes or len(batch_headers(r.to_bytes())) == 1
        for x in recs:
            if x.offset >= self.start:
                assert (x.value, x.timestamp) == self.records[x.offset]

    @rule(data=st.data())
    def lookup_time(self, data):
        stamps = [t for _, t in self.records.values()]
        target = data.draw(
            st.one_of(
                st.sampled_from([-1, -2, -3]),
                st.sampled_from(stamps) if stamps else st.just(T0),
                st.integers(T0 - 5000, self.clock.time_ms() + 5000),
            )
        )
        got = self.log.offset_for_timestamp(target)
        readable = [(o, self.records[o][1]) for o in range(self.start, self.hw)]
        if target == -2:
            assert got == (self.start, -1)
        elif target == -1:
            assert got == (self.hw, -1)
        elif target == -3:
            # The first record with the largest timestamp; not served at or above the HW.
            best = None
            for o in range(self.start, self.leo):
                t = self.records[o][1]
                if t >= 0 and (best is None or t > best[1]):
                    best = (o, t)
            assert got == (best if best is not None and best[0] < self.hw else None)
        else:
            assert got == next(((o, t) for o, t in readable if t >= target), None)

    @rule(data=st.data())
    def truncate(self, data):
        off = data.draw(st.integers(self.start, self.leo))
        changed = self.log.truncate_to(off)
        assert changed == (off < self.leo)
        if not changed:
            return
        lasts = [b[1] for b in self.batches]
        i = bisect.bisect_left(lasts, off)
        new_leo = self.batches[i][0]  # the batch holding off goes whole
        self.batches = self.batches[:i]
        self._sync_model_to(min(self.start, new_leo), new_leo, min(self.hw, new_leo))
        assert self.log.log_end_offset == self.leo

    @rule(data=st.data())
    def delete_records(self, data):
        off = data.draw(st.integers(self.start, self.hw))
        assert self.log.delete_records(off) == max(off, self.start)
        self._sync_model_to(max(off, self.start), self.leo, self.hw)

    @rule()
    def retention(self):
        now = self.clock.time_ms()
        before = self.start
        self.log.delete_old_segments()
        new_start = self.log.log_start_offset
        assert before <= new_start <= self.hw
        gone = [self.records[o] for o in range(before, new_start)]
        # Removed for age or for size: by age every removed record was old enough...
        by_age = all(now - t > CONFIG["retention.ms"] for _, t in gone)
        # ...by size only while the log stayed over retention.bytes.
        by_size = self.log.size >= CONFIG["retention.bytes"] or not gone
        assert by_age or by_size, (before, new_start)
        self._sync_model_to(new_start, self.leo, self.hw)

    @rule()
    def close_reopen(self):
        self.log.close()
        self.log = self._open()
        assert self.log.recovery_summary.segments_recovered <= 1
        assert self.log.recovery_point == self.leo

    @rule()
    def crash(self):
        # The process dies: files stay as they are, nothing is trimmed or checkpointed...
        self.log.abandon()
        # ...and the machine loses power: only what was made durable remains.
        for name in os.listdir(self.dir):
            path = os.path.join(self.dir, name)
            if name not in self.durable_names:
                os.unlink(path)
            elif SEGMENT_FILE.match(name):
                keep = min(os.path.getsize(path), self.flushed_sizes.get(name, 0))
                os.truncate(path, keep)
        self.log = self._open()
        got = self._all()
        start, leo = self.log.log_start_offset, self.log.log_end_offset
        offsets = [o for o, _, _ in got]
        assert offsets == list(range(start, leo)), "offsets must be contiguous after recovery"
        # Nothing flushed is lost, nothing is invented.
        assert leo >= self.durable, f"lost flushed records: log end {leo} < durable {self.durable}"
        if self.durable > self.start:
            assert start <= self.start, f"lost flushed records: log start {start} > {self.start}"
        for o, v, t in got:
            assert o < self.leo and (v, t) == self.records.get(o, (v, t)), o
            if o >= self.start:
                assert (v, t) == self.records[o]
        self._sync_model_to(start, leo, self.log.high_watermark)
        self.batches = [(b.base_offset, b.last_offset) for b in self.log.batches() if b.last_offset >= start]
        for seg in self.log.segments:
            seg.sanity_check()

    # -- invariants ----------------------------------------------------------------------------

    @invariant()
    def offsets_and_bounds(self):
        log = self.log
        assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (self.start, self.hw, self.leo)
        assert log.log_start_offset <= log.high_watermark <= log.log_end_offset
        assert log.recovery_point <= log.log_end_offset
        segs = log.segments
        assert all(a.next_offset <= b.base_offset for a, b in zip(segs, segs[1:]))


class LogModelCheck(LogMachine):
    @invariant()
    def everything_readable(self):
        got = self._all()
        assert [(o, v, t) for o, v, t in got if o >= self.start] == [
            (o, *self.records[o]) for o in range(self.start, self.leo)
        ]


#: The README suite's run (~15 s here); the slow stage's ``_long`` run takes 3,000 examples of
#: twice the steps.
FAST = settings(
    max_examples=120,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def test_log_against_model():
    with observe_dir_fsyncs():
        run_state_machine_as_test(LogModelCheck, settings=FAST)


@pytest.mark.slow
def test_log_against_model_long():
    with observe_dir_fsyncs():
        run_state_machine_as_test(LogModelCheck, settings=settings(FAST, max_examples=3000, stateful_step_count=100))
