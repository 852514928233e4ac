"""The index gives the same answer as a sorted list + bisect model, through appends, lookups,
truncations, trims, resizes, clean reopens and crashes; and any bytes on disk open as exactly
the valid prefix a plain-Python reading of Kafka's rules finds."""

from __future__ import annotations

import bisect
import os
import shutil
import struct
import tempfile
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from seglog._native.index import OffsetIndex, TimeIndex

INT32_MAX = 2**31 - 1
BASES = st.sampled_from([0, 1, 1000, 2**40, 2**62])
MACHINE_SETTINGS = settings(
    max_examples=60, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


class IndexMachine(RuleBasedStateMachine):
    """What the offset and time index machines share: a model of ``(key, value)`` entries in
    file order, and the rules whose effect on it is the same for both kinds of index."""

    INDEX: ClassVar[type[OffsetIndex | TimeIndex]]
    FILE_NAME: ClassVar[str]
    OFFSET_COLUMN: ClassVar[int]  # which side of an entry is the offset

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="seglog-idx-")
        self.path = os.path.join(self.dir, self.FILE_NAME)
        self.idx: Any = None
        self.model: list[tuple[int, int]] = []  # sorted on both sides
        self.cap = 0
        self.base = self.max_size = 0

    def open_index(self) -> Any:
        return self.INDEX(self.path, self.base, max_index_size=self.max_size)

    def empty_entry(self) -> tuple[int, int]:
        """What ``last_entry`` and a lookup below every entry answer."""
        raise NotImplementedError

    def last(self) -> tuple[int, int]:
        return self.model[-1] if self.model else self.empty_entry()

    @rule(data=st.data())
    @precondition(lambda self: self.idx is not None)
    def truncate_to(self, data: st.DataObject) -> None:
        assert self.idx is not None
        column = self.OFFSET_COLUMN
        target = data.draw(st.integers(self.base - 2, self.last()[column] + 2))
        self.idx.truncate_to(target)
        self.model = [e for e in self.model if e[column] < target]

    @rule()
    @precondition(lambda self: self.idx is not None)
    def trim(self) -> None:
        assert self.idx is not None
        self.idx.trim_to_valid_size()
        self.cap = len(self.model)

    @rule()
    @precondition(lambda self: self.idx is not None)
    def crash(self) -> None:
        # drop the object without close(): no trim, as after a crash (same page cache)
        self.idx = None
        self.idx = self.open_index()

    def teardown(self) -> None:
        if self.idx is not None:
            self.idx.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class OffsetIndexMachine(IndexMachine):
    INDEX = OffsetIndex
    FILE_NAME = "00000000000000000000.index"
    OFFSET_COLUMN = 0  # (offset, position)

    @rule(base=BASES, slots=st.integers(1, 40))
    @precondition(lambda self: self.idx is None)
    def open_new(self, base: int, slots: int) -> None:
        self.base, self.max_size = base, slots * 8 + 5  # not a multiple: Kafka rounds down
        self.idx = self.open_index()
        self.cap = slots

    def empty_entry(self) -> tuple[int, int]:
        return (self.base, 0)

    @rule(gap=st.one_of(st.integers(1, 5), st.integers(1, 2**31)), step=st.integers(0, 9000))
    @precondition(lambda self: self.idx is not None)
    def append(self, gap: int, step: int) -> None:
        assert self.idx is not None
        off, pos = self.last()[0] + gap, self.last()[1] + step
        if len(self.model) >= self.cap:
            with pytest.raises(ValueError, match="full"):
                self.idx.append(off, pos)
        elif off - self.base > INT32_MAX or pos > INT32_MAX:
            with pytest.raises(ValueError):
                self.idx.append(off, pos)
        else:
            self.idx.append(off, pos)
            self.model.append((off, pos))

    @rule(back=st.integers(0, 3))
    @precondition(lambda self: self.idx is not None and self.model and len(self.model) < self.cap)
    def append_not_increasing(self, back: int) -> None:
        assert self.idx is not None
        with pytest.raises(ValueError, match="no larger than the last offset"):
            self.idx.append(self.model[-1][0] - back, self.model[-1][1] + 1)

    @rule(data=st.data())
    @precondition(lambda self: self.idx is not None)
    def lookup(self, data: st.DataObject) -> None:
        assert self.idx is not None
        hi = self.last()[0] + 10
        target = data.draw(
            st.one_of(st.integers(self.base - 3, hi), st.sampled_from([o for o, _ in self.model] or [self.base]))
        )
        k = bisect.bisect_right([o for o, _ in self.model], target) - 1
        assert self.idx.lookup(target) == (self.model[k] if k >= 0 else self.empty_entry())

    @rule()
    @precondition(lambda self: self.idx is not None)
    def truncate_all(self) -> None:
        assert self.idx is not None
        self.idx.truncate()
        self.model = []

    @rule(slots=st.integers(0, 50))
    @precondition(lambda self: self.idx is not None)
    def resize(self, slots: int) -> None:
        assert self.idx is not None
        if slots < len(self.model):
            with pytest.raises(ValueError, match="cannot resize"):
                self.idx.resize(slots * 8 + 3)
        else:
            self.idx.resize(slots * 8 + 3)
            self.cap = slots

    @rule(trim=st.booleans(), read_only=st.booleans())
    @precondition(lambda self: self.idx is not None)
    def reopen(self, trim: bool, read_only: bool) -> None:
        assert self.idx is not None
        self.idx.close(trim=trim)
        if trim:
            self.cap = len(self.model)
        if read_only:
            with OffsetIndex(self.path, self.base, writable=False) as ro:
                ro.sanity_check()
                assert [ro.entry(i) for i in range(len(ro))] == self.model
        self.idx = self.open_index()

    @invariant()
    def same_as_model(self) -> None:
        if self.idx is None:
            return
        assert len(self.idx) == len(self.model)
        assert self.idx.max_entries == self.cap
        assert self.idx.is_full == (len(self.model) >= self.cap)
        assert self.idx.last_entry == self.last()
        assert [self.idx.entry(i) for i in range(len(self.idx))] == self.model
        assert bytes(self.idx.view()) == b"".join(struct.pack(">ii", o - self.base, p) for o, p in self.model)
        self.idx.sanity_check()


class TimeIndexMachine(IndexMachine):
    INDEX = TimeIndex
    FILE_NAME = "00000000000000000000.timeindex"
    OFFSET_COLUMN = 1  # (timestamp, offset)

    @rule(base=BASES, slots=st.integers(1, 30))
    @precondition(lambda self: self.idx is None)
    def open_new(self, base: int, slots: int) -> None:
        self.base, self.max_size = base, slots * 12 + 7
        self.idx = self.open_index()
        self.cap = slots

    def empty_entry(self) -> tuple[int, int]:
        return (-1, self.base)

    def expect_maybe_append(self, ts: int, off: int, skip: bool) -> Any:
        """Kafka's TimeIndex.maybeAppend on the list model; returns the outcome or an error type."""
        n = len(self.model)
        last_ts, last_off = self.last()
        if not skip and n >= self.cap:
            return ValueError
        if n and (off < last_off or ts < last_ts):
            return ValueError
        if ts <= last_ts:
            return False
        if not 0 <= off - self.base <= INT32_MAX:
            return ValueError
        if off == self.base and n == 0 and ts == 0:
            return False  # the all-zero entry is never stored
        if off == self.base and n:
            self.model[-1] = (ts, off)  # second entry for the base offset: raise the last one
            return True
        if n >= self.cap:
            self.cap += 1  # skip_full_check grows the file by one entry
        self.model.append((ts, off))
        return True

    @rule(
        dts=st.one_of(st.integers(-2, 3), st.integers(0, 2**40)),
        doff=st.one_of(st.integers(-1, 3), st.integers(0, 2**31)),
        skip=st.booleans(),
        absolute_ts=st.sampled_from([None, None, None, -1, 0]),
    )
    @precondition(lambda self: self.idx is not None)
    def maybe_append(self, dts: int, doff: int, skip: bool, absolute_ts: int | None) -> None:
        assert self.idx is not None
        last_ts, last_off = self.last()
        ts = absolute_ts if absolute_ts is not None else max(last_ts, 0) + dts
        off = last_off + doff
        want = self.expect_maybe_append(ts, off, skip)
        if want is ValueError:
            with pytest.raises(ValueError):
                self.idx.maybe_append(ts, off, skip_full_check=skip)
        else:
            assert self.idx.maybe_append(ts, off, skip_full_check=skip) is want

    @rule(data=st.data())
    @precondition(lambda self: self.idx is not None)
    def lookup(self, data: st.DataObject) -> None:
        assert self.idx is not None
        hi = max(self.last()[0], 0) + 5
        target = data.draw(st.one_of(st.integers(-3, hi), st.sampled_from([t for t, _ in self.model] or [0])))
        k = bisect.bisect_right([t for t, _ in self.model], target) - 1
        assert self.idx.lookup(target) == (self.model[k] if k >= 0 else self.empty_entry())

    @rule(slots=st.integers(0, 40))
    @precondition(lambda self: self.idx is not None)
    def resize(self, slots: int) -> None:
        assert self.idx is not None
        if slots < len(self.model):
            with pytest.raises(ValueError, match="cannot resize"):
                self.idx.resize(slots * 12)
        else:
            self.idx.resize(slots * 12)
            self.cap = slots

    @rule(trim=st.booleans())
    @precondition(lambda self: self.idx is not None)
    def reopen(self, trim: bool) -> None:
        assert self.idx is not None
        self.idx.close(trim=trim)
        if trim:
            self.cap = len(self.model)
        self.idx = self.open_index()

    @invariant()
    def same_as_model(self) -> None:
        if self.idx is None:
            return
        assert [self.idx.entry(i) for i in range(len(self.idx))] == self.model
        assert self.idx.max_entries == self.cap
        assert self.idx.last_entry == self.last()
        self.idx.sanity_check()


TestOffsetIndexModel = OffsetIndexMachine.TestCase
TestOffsetIndexModel.settings = MACHINE_SETTINGS
TestTimeIndexModel = TimeIndexMachine.TestCase
TestTimeIndexModel.settings = MACHINE_SETTINGS


# ---- arbitrary bytes on disk vs a plain-Python reading of the rules -------------------------


def reference_read(data: bytes, es: int, base: int) -> tuple[list[tuple[int, int]], bool]:
    """The valid entries and whether the file is corrupt, by the rules in docs/kafka-format.md §7
    plus the zero-tail rule, written independently of the native walk."""
    slots = len(data) // es
    entries: list[tuple[int, int]] = []
    corrupt = len(data) % es != 0
    stop, bad = slots, False
    prev: tuple[int, int] | None = None
    for i in range(slots):
        if es == 8:
            rel, pos = struct.unpack_from(">ii", data, i * 8)
            key, val = rel, pos
        else:
            ts, rel = struct.unpack_from(">qi", data, i * 12)
            key, val = ts, rel
        if i > 0 and rel == 0:
            stop = i
            break
        if es == 8:
            ok = rel >= 0 and pos >= 0 and (prev is None or (rel > prev[0] and pos >= prev[1]))
        else:
            ok = rel >= 0 and ts >= 0 and (prev is None or (ts > prev[0] and rel >= prev[1]))
        if not ok:
            stop, bad = i, True
            break
        prev = (key, val)
        entries.append((base + rel, pos) if es == 8 else (ts, base + rel))
    if not corrupt and not bad:
        if any(data[stop * es :]):
            corrupt = True
        elif stop == 1 and not any(data[:es]):
            entries = []
    return entries, corrupt or bad


@st.composite
def index_files(draw: st.DrawFn, es: int) -> bytes:
    n = draw(st.integers(0, 12))
    if es == 8:
        rels = sorted(draw(st.lists(st.integers(0, 2000), min_size=n, max_size=n, unique=True)))
        poss = sorted(draw(st.lists(st.integers(0, 10**6), min_size=n, max_size=n)))
        data = bytearray(b"".join(struct.pack(">ii", r, p) for r, p in zip(rels, poss)))
    else:
        tss = sorted(draw(st.lists(st.integers(0, 2**45), min_size=n, max_size=n, unique=True)))
        rels = sorted(draw(st.lists(st.integers(0, 2000), min_size=n, max_size=n)))
        data = bytearray(b"".join(struct.pack(">qi", t, r) for t, r in zip(tss, rels)))
    data += bytes(es * draw(st.integers(0, 20)))  # preallocated tail
    for _ in range(draw(st.integers(0, 3))):  # damage
        kind = draw(st.sampled_from(["flip", "zero", "cut", "junk"]))
        if kind == "flip" and data:
            i = draw(st.integers(0, len(data) - 1))
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "zero" and data:
            i = draw(st.integers(0, len(data) - 1))
            j = draw(st.integers(i, len(data)))
            data[i:j] = bytes(j - i)
        elif kind == "cut":
            del data[draw(st.integers(0, len(data))) :]
        else:
            data += draw(st.binary(max_size=2 * es))
    if draw(st.booleans()):
        return bytes(data)
    return draw(st.binary(max_size=es * 6))  # or plain noise


@pytest.mark.parametrize("cls", [OffsetIndex, TimeIndex])
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), base=BASES)
def test_any_file_opens_as_the_valid_prefix(
    tmp_path_factory: pytest.TempPathFactory, cls: type[OffsetIndex | TimeIndex], data: st.DataObject, base: int
) -> None:
    raw = data.draw(index_files(cls.ENTRY_SIZE))
    path = tmp_path_factory.mktemp("fuzz") / "x"
    path.write_bytes(raw)
    want, corrupt = reference_read(raw, cls.ENTRY_SIZE, base)
    for writable in (False, True):
        idx = cls(path, base, writable=writable)
        assert [idx.entry(i) for i in range(len(idx))] == want
        if corrupt:
            with pytest.raises(ValueError, match="corrupt"):
                idx.sanity_check()
        else:
            idx.sanity_check()
        if writable:
            idx.truncate()  # what recovery does before rebuilding
            idx.resize(idx.length)  # rounds a ragged length down
            idx.sanity_check()
            assert not any(path.read_bytes())
            idx.close()
            assert path.read_bytes() == b""
        else:
            idx.close()
            assert path.read_bytes() == raw  # a read-only index never writes


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    gaps=st.lists(st.integers(1, 50), min_size=1, max_size=3000),
    targets=st.lists(st.integers(-10, 160_000), min_size=1, max_size=50),
    base=BASES,
)
def test_large_lookups_match_bisect(
    tmp_path_factory: pytest.TempPathFactory, gaps: list[int], targets: list[int], base: int
) -> None:
    # sizes past the 8 KiB warm section, which the state machines do not reach
    offsets = [base + sum(gaps[: i + 1]) for i in range(len(gaps))]
    stamps = [10 * (o - base) for o in offsets]
    d = tmp_path_factory.mktemp("big")
    with (
        OffsetIndex(d / "i", base, max_index_size=8 * len(offsets)) as oi,
        TimeIndex(d / "t", base, max_index_size=12 * len(offsets)) as ti,
    ):
        for i, o in enumerate(offsets):
            oi.append(o, 100 * i)
            assert ti.maybe_append(stamps[i], o)
        for t in targets:
            k = bisect.bisect_right(offsets, base + t) - 1
            assert oi.lookup(base + t) == ((offsets[k], 100 * k) if k >= 0 else (base, 0))
            k = bisect.bisect_right(stamps, t) - 1
            assert ti.lookup(t) == ((stamps[k], offsets[k]) if k >= 0 else (-1, base))
