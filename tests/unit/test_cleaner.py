"""Compaction against a plain model: the latest record per key survives, offsets unchanged."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from seglog import Log, Store
from seglog.storage.cleaner import Cleaner
from seglog.storage.records import batch_headers, decode_records
from seglog.util.clock import ManualClock


@pytest.fixture
def store_config() -> dict[str, Any]:
    """The cleaner runs only when a test calls it."""
    return {"log.cleaner.enable": False}


def _records(store: Store, topic: str = "c") -> list[Any]:
    lg = store.log(topic, 0)
    return decode_records(lg.read(lg.log_start_offset, 1 << 30).to_bytes())


def _expected(
    written: Sequence[tuple[int, bytes | None, bytes | None]], end: int, drop_tombstones: bool = False
) -> list[tuple[int, bytes | None, bytes | None]]:
    last: dict[bytes, int] = {}
    for off, k, _ in written:
        if off < end and k is not None:
            last[k] = off
    out = []
    for off, k, v in written:
        if off >= end or (k is not None and last[k] == off and not (drop_tombstones and v is None)):
            out.append((off, k, v))
    return out


def _produce(store: Store, n: int, keys: int, seed: int, topic: str = "c") -> list[Any]:
    rng = random.Random(seed)
    p = store.producer(linger_ms=0)
    written = []
    for i in range(n):
        k = b"key-%d" % rng.randrange(keys)
        v = None if rng.random() < 0.1 else b"value-%d-" % i + b"x" * rng.randrange(50)
        md = p.send(topic, v, key=k, headers=[("i", b"%d" % i)] if i % 5 == 0 else None)
        written.append((md.offset, k, v))
    return written


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_latest_per_key_survives(store: Store, clock: ManualClock, seed: int) -> None:
    store.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": 2048})
    written = _produce(store, 600, 40, seed)
    lg = store.log("c", 0)
    end = lg.active.base_offset
    before_heads = {h.base_offset: h for s in lg.segments for h in s.batches()}
    res = Cleaner(clock).clean(lg, None)
    assert res is not None and res.first_dirty_offset == end
    # Groups are formed from the input's sizes, so the first cleaning keeps the segment count
    # (a group with no survivor leaves an empty segment, as in Kafka); the next one merges.
    assert res.bytes_after < res.bytes_before and res.segments_after == res.segments_before
    assert lg.log_start_offset == 0
    got = [(r.offset, r.key, r.value) for r in _records(store)]
    assert got == _expected(written, end)
    # Headers survive rewriting.
    hdr = {r.offset: r.headers for r in _records(store)}
    for off, _, _ in _expected(written, end):
        assert hdr[off] == ([("i", b"%d" % off)] if off % 5 == 0 else [])
    # Every surviving batch keeps its offsets and producer fields.
    for s in lg.segments:
        for h in s.batches():
            orig = before_heads[h.base_offset]
            assert (h.last_offset, h.producer_id, h.producer_epoch, h.base_sequence) == (
                orig.last_offset,
                orig.producer_id,
                orig.producer_epoch,
                orig.base_sequence,
            )
    # A consumer reads the same thing, and nothing needs cleaning now.
    c = store.consumer(auto_offset_reset="earliest")
    c.assign([("c", 0)])
    assert [r.offset for r in c.poll(max_records=10_000)] == [o for o, _, _ in got]
    assert Cleaner(clock).clean(lg, res.first_dirty_offset) is None
    again = Cleaner(clock).clean(lg, None, force=True)
    assert again is not None and again.segments_after < again.segments_before
    assert [(r.offset, r.key, r.value) for r in _records(store)] == got


def test_tombstones_go_after_delete_retention(store: Store, clock: ManualClock) -> None:
    store.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": 1024, "delete.retention.ms": 60_000})
    p = store.producer()
    written: list[tuple[int, bytes, bytes | None]] = []
    for i in range(30):
        written.append((p.send("c", b"v" * 40, key=b"a%d" % i).offset, b"a%d" % i, b"v" * 40))
    for i in range(0, 30, 3):
        written.append((p.send("c", None, key=b"a%d" % i).offset, b"a%d" % i, None))
    lg = store.log("c", 0)
    lg.roll()
    cleaner = Cleaner(clock)
    r1 = cleaner.clean(lg, None, force=True)
    assert r1 is not None and r1.tombstones_removed == 0
    assert [(r.offset, r.key, r.value) for r in _records(store)] == _expected(written, r1.first_dirty_offset)
    heads = [h for s in lg.segments for h in s.batches()]
    with_tombstones = [h for h in batch_headers(lg.read(0, 1 << 30).to_bytes()) if h.attributes & 0x40]
    assert with_tombstones and all(h.base_timestamp == clock.time_ms() + 60_000 for h in with_tombstones)
    assert heads
    clock.advance(59_999)
    assert cleaner.clean(lg, None, force=True).tombstones_removed == 0  # type: ignore[union-attr]
    clock.advance(1)
    r3 = cleaner.clean(lg, None, force=True)
    assert r3 is not None and r3.tombstones_removed == 10
    assert [(r.offset, r.key, r.value) for r in _records(store)] == _expected(
        written, r1.first_dirty_offset, drop_tombstones=True
    )


def test_dirty_ratio_and_compaction_lag(store: Store, clock: ManualClock) -> None:
    store.create_topic(
        "c",
        1,
        {
            "cleanup.policy": "compact",
            "segment.bytes": 1024,
            "min.cleanable.dirty.ratio": 0.9,
            "min.compaction.lag.ms": 10_000,
        },
    )
    p = store.producer()
    for i in range(100):
        p.send("c", b"v" * 30, key=b"k%d" % (i % 10), timestamp=clock.time_ms())
    lg = store.log("c", 0)
    cleaner = Cleaner(clock)
    assert cleaner.clean(lg, None) is None  # every segment is younger than the lag
    clock.advance(10_001)
    res = cleaner.clean(lg, None)
    assert res is not None
    # Right after cleaning, the dirty part is empty: below the ratio.
    for i in range(3):
        p.send("c", b"w", key=b"k%d" % i, timestamp=clock.time_ms() - 20_000)
    lg.roll()
    assert cleaner.cleanable_range(lg, res.first_dirty_offset) is None
    assert cleaner.cleanable_range(lg, res.first_dirty_offset, force=True) is not None


def test_keyless_records_are_dropped(store: Store, clock: ManualClock) -> None:
    store.create_topic("c", 1)  # delete policy: keyless records allowed
    p = store.producer()
    p.send("c", b"no key")
    p.send("c", b"keyed", key=b"k")
    store.alter_topic_config("c", {"cleanup.policy": "compact"})
    lg = store.log("c", 0)
    lg.roll()
    Cleaner(clock).clean(lg, None, force=True)
    assert [(r.offset, r.key) for r in _records(store)] == [(1, b"k")]


def _three_keys_ten_times(store: Store, **config: Any) -> Log:
    """Compacted topic ``c`` (``config`` added to its settings) with 10 rounds of keys k0..k2 over
    several rolled segments: only the last round (offsets 27-29) survives cleaning."""
    store.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": 600, **config})
    p = store.producer()
    for _ in range(10):
        for k in range(3):
            p.send("c", b"v" * 60, key=b"k%d" % k)
    lg = store.log("c", 0)
    lg.roll()
    return lg


def test_fully_obsolete_segments_are_emptied(store: Store, clock: ManualClock) -> None:
    lg = _three_keys_ten_times(store)
    res = Cleaner(clock).clean(lg, None, force=True)
    assert res is not None
    assert [r.offset for r in _records(store)] == [27, 28, 29]
    assert lg.log_start_offset == lg.segments[0].base_offset == 0
    assert res.bytes_after < res.bytes_before


def test_compact_delete_policy_also_expires(store: Store, clock: ManualClock) -> None:
    store.create_topic(
        "c",
        1,
        {"cleanup.policy": "compact,delete", "segment.bytes": 500, "retention.ms": 1000, "file.delete.delay.ms": 0},
    )
    p = store.producer()
    for i in range(20):
        p.send("c", b"v" * 50, key=b"k%d" % (i % 2))
    store.log("c", 0).roll()
    assert store.run_cleaner() == 1
    # Segments the cleaner emptied have no timestamp: retention reads their modification time
    # (as Kafka's), here put at the manual clock's present.
    now = clock.time_ms() / 1000
    for seg in store.log("c", 0).segments:
        os.utime(seg.log_path, (now, now))
    clock.advance(2000)
    assert store.run_retention() >= 1
    assert _records(store) == []


def test_compressed_batches_are_rebuilt_with_their_codec(store: Store, clock: ManualClock) -> None:
    pytest.importorskip("seglog._native.compression")
    store.create_topic("c", 1, {"cleanup.policy": "compact", "compression.type": "lz4"})
    p = store.producer(linger_ms=10)
    for i in range(50):
        p.send("c", b"value %d" % i, key=b"k%d" % (i % 7))
    p.flush()
    lg = store.log("c", 0)
    lg.roll()
    Cleaner(clock).clean(lg, None, force=True)
    heads = batch_headers(lg.read(0, 1 << 30).to_bytes())
    assert {h.compression for h in heads} == {3}
    assert sorted(r.value for r in _records(store)) == sorted(b"value %d" % i for i in range(43, 50))


def test_group_with_no_survivor_keeps_the_log_start(store: Store, clock: ManualClock) -> None:
    # Kafka's cleaner swaps in an empty cleaned segment named after the group's first base
    # offset: the log start offset stays, and a fetch from it is served, not out of range.
    lg = _three_keys_ten_times(store)
    bases_before = [s.base_offset for s in lg.segments]
    res = Cleaner(clock).clean(lg, None, force=True)
    assert res is not None
    assert lg.log_start_offset == 0
    assert lg.segments[0].base_offset == 0 and lg.segments[0].size == 0
    assert set(s.base_offset for s in lg.segments) <= set(bases_before)
    assert [r.offset for r in decode_records(lg.read(0, 1 << 30).to_bytes())] == [27, 28, 29]
    c = store.consumer(auto_offset_reset="earliest")
    c.assign([("c", 0)])
    assert [r.offset for r in c.poll(max_records=100)] == [27, 28, 29]
    store.close()
    # The empty segments and the log start survive a reopen.
    with Store.open(store.dir, clock=clock, config={"log.cleaner.enable": False}) as again:
        lg = again.log("c", 0)
        assert lg.log_start_offset == 0
        assert [r.offset for r in decode_records(lg.read(0, 1 << 30).to_bytes())] == [27, 28, 29]


def test_empty_cleaned_segments_go_with_retention(store: Store, clock: ManualClock) -> None:
    # Kafka's retention deletes an empty segment like any other, only the last one is kept;
    # an empty segment has no timestamp, so its modification time (the last cleaned segment's)
    # stands in for it.
    lg = _three_keys_ten_times(
        store, **{"cleanup.policy": "compact,delete", "retention.ms": 10_000_000, "file.delete.delay.ms": 0}
    )
    Cleaner(clock).clean(lg, None, force=True)
    empty = [s for s in lg.segments[:-1] if s.size == 0]
    assert empty and lg.log_start_offset == 0
    old = (clock.time_ms() - 20_000_000) / 1000
    for seg in empty:
        os.utime(seg.log_path, (old, old))
    assert store.run_retention() == len(empty)
    assert lg.log_start_offset == lg.segments[0].base_offset > 0
    assert [r.offset for r in _records(store)] == [27, 28, 29]


def test_unclean_restart_keeps_segments_after_an_empty_cleaned_one(tmp_path: Path, clock: ManualClock) -> None:
    # Recovery of an unflushed segment that ends before the next segment's base offset takes it
    # as a lost tail and deletes what follows; in a compacted log that gap is the cleaner's
    # work (here: an empty cleaned segment), and the later segments must stay.
    s = Store.open(tmp_path, clock=clock, config={"log.cleaner.enable": False})
    s.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": 600})
    p = s.producer()
    for i in range(30):
        p.send("c", b"v" * 60, key=b"k%d" % (i % 3))
    lg = s.log("c", 0)
    lg.roll()
    Cleaner(clock).clean(lg, None, force=True)
    assert lg.segments[0].size == 0
    s.close()
    # As after a crash with nothing checkpointed: every segment is recovered.
    os.unlink(tmp_path / ".kafka_cleanshutdown")
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n1\nc 0 0\n")
    with Store.open(tmp_path, clock=clock, config={"log.cleaner.enable": False}) as again:
        lg = again.log("c", 0)
        assert lg.recovery_summary.segments_deleted == 0, lg.recovery_summary
        assert lg.recovery_summary.segments_recovered >= 2
        assert lg.log_start_offset == 0 and lg.log_end_offset == 30
        assert [r.offset for r in decode_records(lg.read(0, 1 << 30).to_bytes())] == [27, 28, 29]


def test_an_upper_bound_keeps_the_segments_it_falls_in(store: Store, clock: ManualClock) -> None:
    """``upper`` (a replica's high watermark): only segments wholly below it are cleaned, and
    records at or above it decide nothing."""
    lg = _three_keys_ten_times(store)
    bases = [s.base_offset for s in lg.segments]
    upper = bases[2] + 1  # inside the third segment
    res = Cleaner(clock).clean(lg, None, force=True, upper=upper)
    assert res is not None and res.first_dirty_offset == bases[2]
    kept = [r.offset for r in _records(store)]
    # Below the third segment only each key's last record there survives; from it on, all.
    assert [o for o in kept if o >= bases[2]] == list(range(bases[2], 30))
    assert len([o for o in kept if o < bases[2]]) == 3
    assert Cleaner(clock).clean(lg, None, force=True, upper=bases[0] + 1) is None


class _HeldAtSwap:
    """A crash hook that holds the cleaner before its first swap until released."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()

    def __call__(self, step: str) -> None:
        if step == "cleaned" and not self.reached.is_set():
            self.reached.set()
            assert self.release.wait(30)


def _clean_on_a_thread(lg: Log, clock: ManualClock, hook: _HeldAtSwap) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(Cleaner(clock, crash_hook=hook).clean(lg, None, force=True)))
    t.start()
    assert hook.reached.wait(30)
    return t, out


def _aborted(lg: Log) -> bool:
    return lg.cleaning_aborted  # a call: mypy does not carry a property's narrowing across it


def _checkpoint(lg: Log) -> int | None:
    return lg.cleaner_offset


def _leftovers(lg: Log) -> list[str]:
    return sorted(f for f in os.listdir(lg.dir) if f.endswith((".cleaned", ".swap")))


def test_appends_go_on_while_a_cleaning_runs_on_another_thread(store: Store, clock: ManualClock) -> None:
    """The cleaner reads inactive segments without the log's lock: the writer appends while a
    cleaning is held before its swap, and both the cleaning and the appends are kept."""
    lg = _three_keys_ten_times(store)
    hook = _HeldAtSwap()
    t, out = _clean_on_a_thread(lg, clock, hook)
    p = store.producer()
    for k in range(3):
        p.send("c", b"new", key=b"k%d" % k)
    assert lg.log_end_offset == 33  # appended while the cleaning waits
    hook.release.set()
    t.join(30)
    assert out and out[0] is not None
    assert lg.cleaner_offset == out[0].first_dirty_offset == 30
    assert [(r.offset, r.value) for r in _records(store)] == [(o, b"v" * 60) for o in (27, 28, 29)] + [
        (o, b"new") for o in (30, 31, 32)
    ]
    assert _leftovers(lg) == []


@pytest.mark.parametrize("action", ["truncate", "truncate fully", "close", "retention"])
def test_a_truncation_or_close_aborts_a_cleaning_and_waits_for_it(
    store: Store, clock: ManualClock, action: str
) -> None:
    """A truncation, deletion or close waits for a cleaning under way to stop (it never meets
    the cleaner's views of the segments it removes); the cleaning drops its unfinished output,
    swaps nothing more in and leaves the checkpoint where it was."""
    lg = _three_keys_ten_times(
        store, **({"cleanup.policy": "compact,delete", "retention.bytes": 0} if action == "retention" else {})
    )
    hook = _HeldAtSwap()
    t, out = _clean_on_a_thread(lg, clock, hook)
    done = threading.Event()
    ops = {
        "truncate": lambda: lg.truncate_to(15),
        "truncate fully": lambda: lg.truncate_fully_and_start_at(40),
        "close": lg.close,
        "retention": lg.delete_old_segments,
    }

    def act() -> None:
        ops[action]()
        done.set()

    waiter = threading.Thread(target=act)
    waiter.start()
    deadline = time.monotonic() + 10
    while not _aborted(lg) and time.monotonic() < deadline:
        time.sleep(0.001)
    assert _aborted(lg)
    time.sleep(0.1)
    assert not done.is_set(), f"{action} went ahead while the cleaner held its views"
    hook.release.set()
    t.join(30)
    waiter.join(30)
    assert done.is_set() and out == [None]
    assert _checkpoint(lg) is None
    assert not _aborted(lg)
    if action == "close":
        assert _leftovers(lg) == [] and not any(f.endswith(".cleaned") for f in os.listdir(lg.dir))
        return
    assert _leftovers(lg) == []
    kept = [r.offset for r in _records(store)]
    if action == "truncate":
        assert kept == list(range(15))  # nothing cleaned: the held group's output was dropped
    elif action == "truncate fully":
        assert kept == [] and lg.log_start_offset == 40
    else:
        assert kept == [] and lg.log_start_offset == 30
    # The log cleans again once the operation is over.
    assert lg.begin_cleaning()
    lg.end_cleaning()


def test_a_truncation_brings_the_checkpoint_down(store: Store, clock: ManualClock) -> None:
    """``Log.cleaner_offset``: moved by a cleaning; a truncation below it brings it to the new
    end (what is appended there next is dirty); a full truncation clears it."""
    lg = _three_keys_ten_times(store)
    assert _checkpoint(lg) is None
    res = Cleaner(clock).clean(lg, lg.cleaner_offset, force=True)
    assert res is not None and _checkpoint(lg) == res.first_dirty_offset == 30
    p = store.producer()
    for i in range(6):
        p.send("c", b"w", key=b"k%d" % (i % 3))
    lg.truncate_to(31)
    assert lg.cleaner_offset == 30  # at or below the new end: kept
    lg.truncate_to(28)
    assert lg.cleaner_offset == lg.log_end_offset == 28
    lg.truncate_fully_and_start_at(50)
    assert lg.cleaner_offset is None
