"""OffsetIndex / TimeIndex: Kafka's file format, append rules, lookups, truncation, crash-left and
corrupt files, view counting. Byte-level expectations are built with ``struct`` (big-endian), not
with the code under test."""

from __future__ import annotations

import bisect
import os
import shutil
import struct
import sys
from pathlib import Path

import pytest

from seglog._native import _errors
from seglog._native.index import OffsetIndex, TimeIndex

KAFKA_DIR = ("kafka-real", "LDI-POC", "__consumer_offsets-6")
INT32_MAX = 2**31 - 1


def oentries(*pairs: tuple[int, int]) -> bytes:
    return b"".join(struct.pack(">ii", rel, pos) for rel, pos in pairs)


def tentries(*pairs: tuple[int, int]) -> bytes:
    return b"".join(struct.pack(">qi", ts, rel) for ts, rel in pairs)


def all_entries(idx: OffsetIndex | TimeIndex) -> list[tuple[int, int]]:
    return [idx.entry(i) for i in range(len(idx))]


@pytest.fixture
def kafka_dir(fixtures_dir: Path) -> Path:
    return fixtures_dir.joinpath(*KAFKA_DIR)


# ---- Kafka's own files ---------------------------------------------------------------------


def test_reads_kafka_offset_index(kafka_dir: Path) -> None:
    with OffsetIndex(kafka_dir / "00000000000000000000.index", 0, writable=False) as idx:
        idx.sanity_check()
        assert all_entries(idx) == [(3, 4730), (7, 9571)]
        assert idx.max_entries == 2 and idx.is_full and idx.zero_tail_at_open == 0
        assert idx.lookup(0) == (0, 0)
        assert idx.lookup(2) == (0, 0)
        assert idx.lookup(3) == (3, 4730)
        assert idx.lookup(6) == (3, 4730)
        assert idx.lookup(7) == (7, 9571)
        assert idx.lookup(10**12) == (7, 9571)
        assert idx.last_entry == (7, 9571)


def test_reads_kafka_time_index(kafka_dir: Path) -> None:
    with TimeIndex(kafka_dir / "00000000000000000000.timeindex", 0, writable=False) as idx:
        idx.sanity_check()
        want = [(1769791783399, 3), (1769792518093, 7), (1769793578176, 12)]
        assert all_entries(idx) == want
        assert idx.last_entry == want[-1]
        assert idx.lookup(1769791783398) == (-1, 0)
        assert idx.lookup(1769791783399) == want[0]
        assert idx.lookup(1769792518092) == want[0]
        assert idx.lookup(1769792518093) == want[1]
        assert idx.lookup(2**62) == want[2]


def test_read_only_close_leaves_kafka_file_alone(kafka_dir: Path) -> None:
    path = kafka_dir / "00000000000000000000.index"
    before = path.read_bytes()
    idx = OffsetIndex(path, 0, writable=False)
    idx.close()
    assert path.read_bytes() == before


def test_continues_a_copy_of_kafka_index(kafka_dir: Path, tmp_path: Path) -> None:
    src = kafka_dir / "00000000000000000000.index"
    dst = tmp_path / src.name
    shutil.copy(src, dst)
    with OffsetIndex(dst, 0) as idx:
        assert idx.is_full  # a trimmed file maps only its entries
        assert idx.resize(4096)
        idx.append(12, 14000)
        assert idx.lookup(100) == (12, 14000)
    assert dst.read_bytes() == src.read_bytes() + oentries((12, 14000))


# ---- creation and file format --------------------------------------------------------------


@pytest.mark.parametrize("cls,size", [(OffsetIndex, 8), (TimeIndex, 12)])
def test_new_file_is_preallocated_kafka_style(tmp_path: Path, cls: type[OffsetIndex | TimeIndex], size: int) -> None:
    path = tmp_path / "x"
    idx = cls(path, 0)  # default segment.index.bytes
    assert size == idx.ENTRY_SIZE
    assert os.path.getsize(path) == (10485760 // size) * size
    assert idx.max_entries == 10485760 // size
    assert len(idx) == 0 and idx.entries == 0 and not idx.is_full
    assert idx.zero_tail_at_open == 0
    idx.close()
    assert os.path.getsize(path) == 0  # trimmed on close
    small = cls(tmp_path / "y", 5, max_index_size=100)
    assert os.path.getsize(tmp_path / "y") == (100 // size) * size
    small.close()


def _cached_pages(path: Path) -> int:
    """How many of ``path``'s pages are in the page cache (``mincore`` over a read-only mapping
    of it, which faults nothing in)."""
    import ctypes
    import mmap

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = os.path.getsize(path)
    pages = -(-size // mmap.PAGESIZE)
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
        try:
            vec = ctypes.create_string_buffer(pages)
            assert libc.mincore(addr, size, vec) == 0, os.strerror(ctypes.get_errno())
            return sum(b & 1 for b in vec.raw)
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mincore and the page cache as Linux has them")
@pytest.mark.parametrize("cls", [OffsetIndex, TimeIndex])
def test_first_entry_of_a_new_index_brings_in_its_own_pages_only(
    tmp_path: Path, cls: type[OffsetIndex | TimeIndex]
) -> None:
    """The index maps its preallocated 10 MB file for random access: a store into it faults in
    its own page, and the kernel does not read ahead (zero-fill) megabytes of the sparse file,
    which cost each new segment milliseconds of CPU."""
    path = tmp_path / "x"
    idx = cls(path, 0)
    if isinstance(idx, OffsetIndex):
        idx.append(1, 4096)
    else:
        idx.maybe_append(10, 1)
    assert len(idx) == 1
    cached = _cached_pages(path)
    idx.close()
    # One page written, and at most the kernel's fault-around of pages already cached: the
    # read-ahead this replaces brought in hundreds.
    assert 1 <= cached <= 16, f"{cached} pages of the new index in the page cache"


@pytest.mark.parametrize("cls", [OffsetIndex, TimeIndex])
def test_bad_arguments(tmp_path: Path, cls: type[OffsetIndex | TimeIndex]) -> None:
    with pytest.raises(ValueError, match="max index size"):
        cls(tmp_path / "a", 0, max_index_size=cls.ENTRY_SIZE - 1)
    with pytest.raises(ValueError, match="max index size"):
        cls(tmp_path / "a", 0, max_index_size=2**31)
    with pytest.raises(ValueError, match="negative"):
        cls(tmp_path / "a", -1)
    assert not (tmp_path / "a").exists()
    with pytest.raises(FileNotFoundError):
        cls(tmp_path / "missing", 0, writable=False)
    idx = cls(tmp_path / "b", 0, max_index_size=64)
    with pytest.raises(RuntimeError, match="already initialised"):
        idx.__init__(tmp_path / "c", 0)
    idx.close()


def test_offset_index_bytes_are_kafka_format(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000001000.index"
    with OffsetIndex(path, 1000, max_index_size=80) as idx:
        idx.append(1003, 4730)
        idx.append(1007, 9571)
        idx.append(1000 + INT32_MAX, INT32_MAX)
        assert bytes(idx.view()) == oentries((3, 4730), (7, 9571), (INT32_MAX, INT32_MAX))
    assert path.read_bytes() == oentries((3, 4730), (7, 9571), (INT32_MAX, INT32_MAX))


def test_time_index_bytes_are_kafka_format(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000001000.timeindex"
    with TimeIndex(path, 1000, max_index_size=120) as idx:
        assert idx.maybe_append(1769791783399, 1003)
        assert idx.maybe_append(1769792518093, 1007)
        assert idx.maybe_append(1769793578176, 1012)
    assert path.read_bytes() == tentries((1769791783399, 3), (1769792518093, 7), (1769793578176, 12))


# ---- append rules --------------------------------------------------------------------------


def test_offset_append_rules(tmp_path: Path) -> None:
    with OffsetIndex(tmp_path / "i", 100, max_index_size=32) as idx:
        with pytest.raises(ValueError, match="offset 99 does not fit"):
            idx.append(99, 10)
        with pytest.raises(ValueError, match=str(INT32_MAX)):
            idx.append(100 + INT32_MAX + 1, 10)
        with pytest.raises(ValueError, match="position -1"):
            idx.append(105, -1)
        idx.append(105, 4000)
        with pytest.raises(ValueError, match="offset 105 .* no larger than the last offset appended \\(105\\)"):
            idx.append(105, 9000)
        with pytest.raises(ValueError, match="offset 104 .* \\(105\\)"):
            idx.append(104, 9000)
        with pytest.raises(ValueError, match="position 3999"):
            idx.append(106, 3999)
        idx.append(106, 4000)  # equal positions are not rejected
        idx.append(110, 8000)
        idx.append(111, 9000)
        assert idx.is_full
        with pytest.raises(ValueError, match="full index \\(4 entries"):
            idx.append(200, 10000)
        assert all_entries(idx) == [(105, 4000), (106, 4000), (110, 8000), (111, 9000)]


def test_offset_append_errors_use_error_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Invalid(Exception):
        def __init__(self, message: str, **fields: object) -> None:
            super().__init__(message)
            self.fields = fields

    class Full(Exception):
        pass

    monkeypatch.setitem(_errors._classes, "invalid_offset", Invalid)
    monkeypatch.setitem(_errors._classes, "index_full", Full)
    with OffsetIndex(tmp_path / "i", 0, max_index_size=16) as idx:
        idx.append(5, 100)
        with pytest.raises(Invalid) as ei:
            idx.append(5, 200)
        assert ei.value.fields["offset"] == 5 and ei.value.fields["path"] == idx.path
        idx.append(6, 200)
        with pytest.raises(Full):
            idx.append(7, 300)


def test_offset_append_base_zero_pair_is_implicit(tmp_path: Path) -> None:
    with OffsetIndex(tmp_path / "i", 50, max_index_size=64) as idx:
        idx.append(50, 0)  # what lookup answers anyway
        assert len(idx) == 0 and idx.lookup(60) == (50, 0)
        idx.append(50, 10)
        assert all_entries(idx) == [(50, 10)]


def test_time_append_rules(tmp_path: Path) -> None:
    with TimeIndex(tmp_path / "t", 100, max_index_size=36) as idx:
        assert not idx.maybe_append(-1, 100)  # no timestamp: never indexed
        assert not idx.maybe_append(-5, 100)
        with pytest.raises(ValueError, match="offset 99 does not fit"):
            idx.maybe_append(10, 99)
        assert idx.maybe_append(1000, 103)
        assert not idx.maybe_append(1000, 103)  # equal timestamp: silently skipped
        assert not idx.maybe_append(1000, 150)
        with pytest.raises(ValueError, match="timestamp 999 .* \\(1000\\)"):
            idx.maybe_append(999, 150)
        with pytest.raises(ValueError, match="offset 102 .* \\(103\\)"):
            idx.maybe_append(2000, 102)
        assert idx.maybe_append(1001, 103)  # same offset, larger timestamp
        assert idx.maybe_append(1500, 200)
        assert idx.is_full
        with pytest.raises(ValueError, match="full index"):
            idx.maybe_append(1600, 201)
        # roll/close: the final max-timestamp entry gets in anyway; the file grows by one entry
        assert idx.maybe_append(1600, 201, skip_full_check=True)
        assert idx.length == 48
        assert all_entries(idx) == [(1000, 103), (1001, 103), (1500, 200), (1600, 201)]
        assert idx.last_entry == (1600, 201)


def test_time_final_entry_grows_an_empty_trimmed_file(tmp_path: Path) -> None:
    path = tmp_path / "t"
    path.write_bytes(b"")
    with TimeIndex(path, 0) as idx:
        assert idx.is_full
        with pytest.raises(ValueError, match="full"):
            idx.maybe_append(5, 1)
        v = idx.view()
        with pytest.raises(BufferError, match="1 exported view"):
            idx.maybe_append(5, 1, skip_full_check=True)
        v.release()
        assert idx.maybe_append(5, 1, skip_full_check=True)
        assert all_entries(idx) == [(5, 1)] and idx.length == 12
    assert path.read_bytes() == tentries((5, 1))


def test_time_append_for_base_offset_raises_last_timestamp(tmp_path: Path) -> None:
    path = tmp_path / "t"
    with TimeIndex(path, 100, max_index_size=120) as idx:
        assert not idx.maybe_append(0, 100)  # all-zero entry: never stored
        assert len(idx) == 0 and idx.last_entry == (-1, 100)
        assert idx.maybe_append(5, 100)
        assert idx.maybe_append(9, 100)  # replaces (5, 100): a second rel-0 entry would read as tail
        assert all_entries(idx) == [(9, 100)]
        assert idx.maybe_append(12, 101)
    assert path.read_bytes() == tentries((9, 0), (12, 1))


# ---- lookups -------------------------------------------------------------------------------


def test_lookup_empty(tmp_path: Path) -> None:
    with OffsetIndex(tmp_path / "i", 7, max_index_size=64) as o, TimeIndex(tmp_path / "t", 7, max_index_size=64) as t:
        for target in (-(2**63), -1, 0, 7, 8, 2**63 - 1):
            assert o.lookup(target) == (7, 0)
            assert t.lookup(target) == (-1, 7)
        assert o.last_entry == (7, 0) and t.last_entry == (-1, 7)
        with pytest.raises(OverflowError):
            o.lookup(2**63)


@pytest.mark.parametrize("n", [1, 2, 3, 1023, 1024, 1025, 1026, 5000])
def test_offset_lookup_matches_bisect_everywhere(tmp_path: Path, n: int) -> None:
    # sizes around the 1024-entry warm section; every target from below the first entry to past the last
    base = 1000
    offsets = [base + 3 + 7 * i for i in range(n)]
    with OffsetIndex(tmp_path / "i", base, max_index_size=n * 8) as idx:
        for i, off in enumerate(offsets):
            idx.append(off, 4100 * (i + 1))
        assert idx.is_full
        for target in range(base - 2, offsets[-1] + 3):
            k = bisect.bisect_right(offsets, target) - 1
            want = (offsets[k], 4100 * (k + 1)) if k >= 0 else (base, 0)
            assert idx.lookup(target) == want, target
        assert idx.lookup(base + INT32_MAX + 10) == (offsets[-1], 4100 * n)


@pytest.mark.parametrize("n", [1, 2, 681, 682, 683, 684, 3000])
def test_time_lookup_matches_bisect_everywhere(tmp_path: Path, n: int) -> None:
    stamps = [10**12 + 5 * i for i in range(n)]
    with TimeIndex(tmp_path / "t", 0, max_index_size=n * 12) as idx:
        for i, ts in enumerate(stamps):
            assert idx.maybe_append(ts, 2 * i + 1)
        for target in range(stamps[0] - 2, stamps[-1] + 3):
            k = bisect.bisect_right(stamps, target) - 1
            want = (stamps[k], 2 * k + 1) if k >= 0 else (-1, 0)
            assert idx.lookup(target) == want, target


def test_entry_indexing(tmp_path: Path) -> None:
    with OffsetIndex(tmp_path / "i", 0, max_index_size=64) as idx:
        idx.append(1, 10)
        idx.append(2, 20)
        assert idx.entry(0) == (1, 10) and idx.entry(-1) == (2, 20) and idx.entry(-2) == (1, 10)
        for bad in (2, -3, 100):
            with pytest.raises(IndexError, match="out of range"):
                idx.entry(bad)


# ---- truncation, trimming, resizing --------------------------------------------------------


def test_offset_truncate_to_kafka_semantics(tmp_path: Path) -> None:
    path = tmp_path / "i"
    with OffsetIndex(path, 100, max_index_size=800) as idx:

        def fill() -> None:
            idx.truncate()
            for off in (110, 120, 130, 140):
                idx.append(off, off * 10)

        fill()
        idx.truncate_to(130)  # exact entry: removed with everything above
        assert all_entries(idx) == [(110, 1100), (120, 1200)]
        fill()
        idx.truncate_to(125)  # between: entries above removed
        assert all_entries(idx) == [(110, 1100), (120, 1200)]
        fill()
        idx.truncate_to(141)
        assert len(idx) == 4
        idx.truncate_to(100 + INT32_MAX + 5)
        assert len(idx) == 4
        idx.truncate_to(110)
        assert len(idx) == 0
        fill()
        idx.truncate_to(5)  # below the base offset
        assert len(idx) == 0
        fill()
        idx.truncate_to(125)
        idx.append(121, 1250)  # appending after a truncation
        assert all_entries(idx) == [(110, 1100), (120, 1200), (121, 1250)]
        idx.close(trim=False)
    # removed entries were zeroed: after a crash the file reads back as exactly these entries
    with OffsetIndex(path, 100, max_index_size=800) as idx:
        idx.sanity_check()
        assert all_entries(idx) == [(110, 1100), (120, 1200), (121, 1250)]
        assert idx.zero_tail_at_open == 97


def test_time_truncate_to_removes_offsets_at_and_above(tmp_path: Path) -> None:
    with TimeIndex(tmp_path / "t", 0, max_index_size=120) as idx:
        for ts, off in ((10, 5), (20, 5), (30, 8), (40, 9)):
            assert idx.maybe_append(ts, off)
        idx.truncate_to(9)
        assert all_entries(idx) == [(10, 5), (20, 5), (30, 8)]
        idx.truncate_to(6)
        assert all_entries(idx) == [(10, 5), (20, 5)]
        idx.truncate_to(5)  # both entries for offset 5 go
        assert len(idx) == 0 and idx.last_entry == (-1, 0)
        assert idx.maybe_append(5, 3)  # timestamps restart after truncation


def test_trim_and_resize(tmp_path: Path) -> None:
    path = tmp_path / "i"
    idx = OffsetIndex(path, 0, max_index_size=1000)
    assert idx.length == 1000 and idx.max_entries == 125
    for i in range(1, 4):
        idx.append(i, i * 100)
    assert idx.trim_to_valid_size() is True
    assert os.path.getsize(path) == 24 and idx.is_full
    assert idx.trim_to_valid_size() is False
    with pytest.raises(ValueError, match="holds 3 entries"):
        idx.resize(16)
    with pytest.raises(ValueError, match="negative"):
        idx.resize(-8)
    assert idx.resize(1005) is True  # rounded down to whole entries
    assert os.path.getsize(path) == 1000 and idx.max_entries == 125
    assert idx.resize(1007) is False
    idx.append(4, 400)
    assert all_entries(idx) == [(1, 100), (2, 200), (3, 300), (4, 400)]
    idx.flush()
    idx.truncate()
    assert idx.trim_to_valid_size() and idx.length == 0
    assert idx.lookup(3) == (0, 0) and idx.is_full
    assert idx.resize(16)
    idx.append(9, 900)
    idx.close()
    assert path.read_bytes() == oentries((9, 900))


def test_empty_file_opens_unmapped(tmp_path: Path) -> None:
    path = tmp_path / "i"
    path.write_bytes(b"")
    for writable in (False, True):
        with OffsetIndex(path, 3, writable=writable) as idx:
            idx.sanity_check()
            assert len(idx) == 0 and idx.max_entries == 0 and idx.is_full
            assert idx.lookup(10) == (3, 0) and bytes(idx.view()) == b""
            if writable:
                with pytest.raises(ValueError, match="full"):
                    idx.append(4, 10)


# ---- crash-left and corrupt files ----------------------------------------------------------


@pytest.mark.parametrize("cls", [OffsetIndex, TimeIndex])
def test_crash_left_all_zero_file_is_empty(tmp_path: Path, cls: type[OffsetIndex | TimeIndex]) -> None:
    path = tmp_path / "x"
    path.write_bytes(bytes(cls.ENTRY_SIZE * 500))
    with cls(path, 42) as idx:
        idx.sanity_check()
        assert len(idx) == 0 and idx.zero_tail_at_open == 500
    path.write_bytes(bytes(cls.ENTRY_SIZE))  # one zero slot, trimmed
    with cls(path, 42, writable=False) as idx:
        idx.sanity_check()
        assert len(idx) == 0


def test_crash_left_offset_index_tail(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    # entry 0 may have relative offset 0; a zero relative offset later starts the tail
    path.write_bytes(oentries((0, 17), (3, 4730), (7, 9571)) + bytes(8 * 1000))
    with OffsetIndex(path, 0) as idx:
        idx.sanity_check()
        assert all_entries(idx) == [(0, 17), (3, 4730), (7, 9571)]
        assert idx.zero_tail_at_open == 1000 and idx.max_entries == 1003
        idx.append(9, 12000)
    assert path.read_bytes() == oentries((0, 17), (3, 4730), (7, 9571), (9, 12000))


def test_crash_left_time_index_tail(tmp_path: Path) -> None:
    path = tmp_path / "t"
    path.write_bytes(tentries((0, 0), (5, 3), (9, 7)) + bytes(12 * 77))
    with TimeIndex(path, 0, writable=False) as idx:
        idx.sanity_check()
        assert all_entries(idx) == [(0, 0), (5, 3), (9, 7)]
        assert idx.zero_tail_at_open == 77


def test_crash_simulation_drop_without_close(tmp_path: Path) -> None:
    path = tmp_path / "i"
    idx = OffsetIndex(path, 0, max_index_size=4096)
    for i in range(1, 50):
        idx.append(i * 2, i * 4097)
    idx.flush()
    del idx  # no close: no trim, like a crash
    assert os.path.getsize(path) == 4096
    with OffsetIndex(path, 0, max_index_size=4096) as again:
        again.sanity_check()
        assert all_entries(again) == [(i * 2, i * 4097) for i in range(1, 50)]


def _expect_corrupt(idx: OffsetIndex | TimeIndex, *fragments: str) -> str:
    with pytest.raises(ValueError) as ei:
        idx.sanity_check()
    msg = str(ei.value)
    assert idx.path in msg and "corrupt" in msg and "rebuild" in msg
    for f in fragments:
        assert f in msg, msg
    return msg


@pytest.mark.parametrize("cls", [OffsetIndex, TimeIndex])
def test_length_not_a_multiple(tmp_path: Path, cls: type[OffsetIndex | TimeIndex]) -> None:
    path = tmp_path / "x"
    good = oentries((3, 100), (5, 200)) if cls is OffsetIndex else tentries((10, 3), (20, 5))
    path.write_bytes(good + b"\x00\x01\x02")
    idx = cls(path, 0)
    _expect_corrupt(idx, f"file length {len(good) + 3} is not a multiple of the entry size {cls.ENTRY_SIZE}")
    assert len(idx) == 2  # the valid prefix is still readable
    idx.truncate()  # recovery: reset, re-expand, rebuild
    idx.resize(cls.ENTRY_SIZE * 10)
    idx.sanity_check()
    idx.close()
    assert path.read_bytes() == b""


def test_decreasing_offsets(tmp_path: Path) -> None:
    path = tmp_path / "i"
    path.write_bytes(oentries((3, 100), (9, 200), (8, 300), (20, 400)) + bytes(80))
    idx = OffsetIndex(path, 1000, writable=False)
    _expect_corrupt(idx, "entry 2 (offset 1008) is not larger than entry 1 (offset 1009)")
    assert all_entries(idx) == [(1003, 100), (1009, 200)]
    idx.close()
    path.write_bytes(oentries((3, 100), (3, 200)))
    with OffsetIndex(path, 0, writable=False) as idx:
        _expect_corrupt(idx, "entry 1 (offset 3) is not larger than entry 0 (offset 3)")


def test_offset_before_base_and_bad_positions(tmp_path: Path) -> None:
    path = tmp_path / "i"
    path.write_bytes(oentries((-4, 100)))
    with OffsetIndex(path, 1000, writable=False) as idx:
        _expect_corrupt(idx, "entry 0 has relative offset -4 (offset 996), below the base offset 1000")
        assert len(idx) == 0
    path.write_bytes(oentries((3, 100), (5, -7)))
    with OffsetIndex(path, 0, writable=False) as idx:
        _expect_corrupt(idx, "entry 1 (offset 5) has a negative position -7")
    path.write_bytes(oentries((3, 100), (5, 99)))
    with OffsetIndex(path, 0, writable=False) as idx:
        _expect_corrupt(idx, "entry 1 (offset 5) has position 99, before entry 0's position 100")


def test_time_index_corruptions(tmp_path: Path) -> None:
    path = tmp_path / "t"
    cases = [
        (tentries((10, 3), (9, 5)), "entry 1 (timestamp 9) is not larger than entry 0 (timestamp 10)"),
        (tentries((10, 3), (10, 5)), "entry 1 (timestamp 10) is not larger than entry 0 (timestamp 10)"),
        (tentries((10, 3), (11, 2)), "entry 1 (offset 502) is smaller than entry 0 (offset 503)"),
        (tentries((10, -1)), "entry 0 has relative offset -1 (offset 499), below the base offset 500"),
        (tentries((-3, 1)), "entry 0 (offset 501) has a negative timestamp -3"),
    ]
    for data, fragment in cases:
        path.write_bytes(data + bytes(24))
        with TimeIndex(path, 500, writable=False) as idx:
            _expect_corrupt(idx, fragment)


@pytest.mark.parametrize("cls", [OffsetIndex, TimeIndex])
def test_junk_after_the_zero_tail(tmp_path: Path, cls: type[OffsetIndex | TimeIndex]) -> None:
    # a crash that lost a middle page: zeros, then entries again
    path = tmp_path / "x"
    es = cls.ENTRY_SIZE
    head = oentries((3, 100), (5, 200)) if cls is OffsetIndex else tentries((10, 3), (20, 5))
    tail = oentries((90, 9000)) if cls is OffsetIndex else tentries((90, 90))
    data = bytearray(head + bytes(es * 2000))
    data[es * 1502 : es * 1503] = tail
    path.write_bytes(bytes(data))
    idx = cls(path, 0)
    first_junk = es * 1502 + min(i for i, b in enumerate(tail) if b)
    _expect_corrupt(idx, f"byte {first_junk} (entry 1502)", "end at entry 2")
    assert len(idx) == 2 and idx.zero_tail_at_open == 0
    idx.truncate()  # zeroes the junk too
    idx.sanity_check()
    idx.close(trim=False)
    assert Path(path).read_bytes() == bytes(len(data))


def test_entry_zero_all_zero_but_entries_follow(tmp_path: Path) -> None:
    # (base, position 0) at slot 0 followed by real entries is read as an entry
    path = tmp_path / "i"
    path.write_bytes(oentries((0, 0), (4, 5000)))
    with OffsetIndex(path, 0, writable=False) as idx:
        idx.sanity_check()
        assert all_entries(idx) == [(0, 0), (4, 5000)]


def test_sanity_check_notices_outside_modification(tmp_path: Path) -> None:
    path = tmp_path / "i"
    with OffsetIndex(path, 0, max_index_size=64) as idx:
        idx.append(5, 100)
        with open(path, "r+b") as f:
            f.seek(8)
            f.write(oentries((6, 200)))
        _expect_corrupt(idx, "holds 2 valid entries but the index has 1")


def test_corrupt_index_error_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class CorruptIndexError(Exception):
        def __init__(self, message: str, *, path: str | None = None, entry: int | None = None) -> None:
            super().__init__(message)
            self.path, self.entry = path, entry

    monkeypatch.setitem(_errors._classes, "corrupt_index", CorruptIndexError)
    path = tmp_path / "i"
    path.write_bytes(oentries((3, 100), (9, 200), (8, 300)))
    with OffsetIndex(path, 0, writable=False) as idx:
        with pytest.raises(CorruptIndexError) as ei:
            idx.sanity_check()
        assert ei.value.path == str(path) and ei.value.entry == 2


def test_error_table_has_index_kinds() -> None:
    for kind in ("corrupt_index", "invalid_offset", "index_full"):
        assert isinstance(_errors.make(kind, "m"), Exception)


# ---- views, read-only mode, lifecycle -------------------------------------------------------


def test_views_are_counted_and_block_remapping(tmp_path: Path) -> None:
    path = tmp_path / "i"
    idx = OffsetIndex(path, 0, max_index_size=800)
    idx.append(3, 100)
    idx.append(4, 200)
    v = idx.view()
    w = memoryview(idx)[8:]  # type: ignore[arg-type]  # index.pyi does not declare the buffer protocol
    assert idx.views == 2
    assert v.readonly and v.nbytes == 16 and v.format == "B"
    assert bytes(v) == oentries((3, 100), (4, 200)) and bytes(w) == oentries((4, 200))
    for action in (lambda: idx.resize(80), idx.trim_to_valid_size, idx.close, idx.delete):
        with pytest.raises(BufferError, match=f"{path}: 2 exported views still alive"):
            action()
    idx.append(5, 300)  # appends and lookups are fine
    assert idx.lookup(5) == (5, 300) and v.nbytes == 16
    idx.truncate_to(4)  # truncation does not unmap: the view sees zeros
    assert bytes(v) == oentries((3, 100)) + bytes(8)
    del w
    with pytest.raises(BufferError, match="1 exported view still alive"):
        idx.close()
    v.release()
    assert idx.views == 0
    idx.close()
    assert path.read_bytes() == oentries((3, 100))


def test_writable_view_refused(tmp_path: Path) -> None:
    import ctypes

    get_buffer = ctypes.pythonapi.PyObject_GetBuffer
    get_buffer.argtypes = [ctypes.py_object, ctypes.c_void_p, ctypes.c_int]
    py_buffer = ctypes.create_string_buffer(256)  # larger than a Py_buffer
    PyBUF_WRITABLE = 0x0001
    with OffsetIndex(tmp_path / "i", 0, max_index_size=64) as idx:
        with pytest.raises(BufferError, match="read-only"):
            get_buffer(idx, ctypes.addressof(py_buffer), PyBUF_WRITABLE)
        assert idx.views == 0


def test_read_only_index_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "i"
    path.write_bytes(oentries((3, 100)) + bytes(16))
    idx = OffsetIndex(path, 0, writable=False)
    for action in (
        lambda: idx.append(9, 200),
        lambda: idx.truncate_to(0),
        idx.truncate,
        lambda: idx.resize(8),
        idx.trim_to_valid_size,
    ):
        with pytest.raises(OSError, match="read-only"):
            action()
    idx.flush()
    idx.close()
    assert os.path.getsize(path) == 24  # not trimmed
    t = TimeIndex(tmp_path / "t", 0, max_index_size=24)
    t.close()
    t = TimeIndex(tmp_path / "t", 0, writable=False)
    with pytest.raises(OSError, match="read-only"):
        t.maybe_append(5, 1)
    t.close()


def test_closed_index(tmp_path: Path) -> None:
    path = tmp_path / "i"
    idx = OffsetIndex(path, 0, max_index_size=64)
    idx.append(1, 10)
    idx.close()
    idx.close()  # idempotent
    assert idx.closed and len(idx) == 0 and "closed" in repr(idx)
    for action in (
        lambda: idx.lookup(1),
        lambda: idx.append(2, 20),
        lambda: idx.entry(0),
        idx.sanity_check,
        idx.flush,
        idx.view,
        lambda: idx.resize(8),
    ):
        with pytest.raises(ValueError, match="closed"):
            action()
    assert idx.delete() is True and not path.exists()
    assert idx.delete() is False


def test_delete_and_rename(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    idx = OffsetIndex(path, 0, max_index_size=64)
    idx.append(1, 10)
    idx.rename_to(str(path) + ".deleted")
    assert idx.path == str(path) + ".deleted" and not path.exists()
    idx.append(2, 20)
    assert idx.delete() is True
    assert not Path(idx.path).exists() and idx.closed


def test_context_manager_trims(tmp_path: Path) -> None:
    path = tmp_path / "t"
    with TimeIndex(path, 0) as idx:
        idx.maybe_append(100, 1)
        assert os.path.getsize(path) == 10485756
    assert idx.closed and path.read_bytes() == tentries((100, 1))


def test_remaps_survive_garbage_collection(tmp_path: Path) -> None:
    import gc

    idx = OffsetIndex(tmp_path / "i", 0, max_index_size=16)
    idx.append(1, 10)
    for step in (idx.trim_to_valid_size, lambda: idx.resize(64), lambda: idx.resize(8), lambda: idx.close(trim=False)):
        step()
        gc.collect()
    assert (tmp_path / "i").read_bytes() == oentries((1, 10))


def test_lookups_from_another_thread_while_appending(tmp_path: Path) -> None:
    import threading

    idx = OffsetIndex(tmp_path / "i", 0, max_index_size=8 * 30000)
    stop = threading.Event()
    bad: list[tuple[int, tuple[int, int]]] = []

    def reader() -> None:
        t = 0
        while not stop.is_set():
            t = (t * 1103515245 + 12345) % 300000
            got = idx.lookup(t)
            if got != (0, 0) and not (got[0] <= t and got[1] == got[0] * 10):
                bad.append((t, got))

    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often
    th = threading.Thread(target=reader)
    th.start()
    try:
        for round_ in range(3):
            off = idx.last_entry[0] + 1 + round_
            while not idx.is_full and off < 250000:
                idx.append(off, off * 10)
                off += 7
            idx.truncate_to(idx.last_entry[0] // 2)
    finally:
        stop.set()
        th.join()
        sys.setswitchinterval(old_interval)
    assert not bad
    idx.sanity_check()
    idx.close()


def test_resize_refuses_a_replaced_file(tmp_path: Path) -> None:
    path = tmp_path / "i"
    idx = OffsetIndex(path, 0, max_index_size=800)
    idx.append(1, 10)
    os.replace(path, tmp_path / "moved")  # renamed behind our back
    path.write_bytes(b"other")  # and something else put at the old name
    with pytest.raises(OSError, match="no longer the file this index mapped"):
        idx.trim_to_valid_size()
    with pytest.raises(OSError, match="no longer the file"):
        idx.close()
    assert not idx.closed and path.read_bytes() == b"other"
    idx.close(trim=False)
    assert os.path.getsize(tmp_path / "moved") == 800
    gone = OffsetIndex(tmp_path / "gone", 0, max_index_size=80)
    os.unlink(tmp_path / "gone")
    gone.close()  # removed by someone else: still closes
    assert gone.closed
