"""Random lookups on a 262,144-entry offset index (a 1 GiB segment indexed every 4 KiB), from
Python: seglog's OffsetIndex.lookup vs ``bisect`` on Python lists vs a pure-Python binary search
over the same big-endian index bytes (what a line-by-line port of Kafka's OffsetIndex does).
Goal (docs/performance.md §3.3 and §4): <= 0.3 us p50 per lookup, >= 5x bisect, >= 15x pure Python.

    pytest bench/bench_index.py                 # pytest-benchmark; per-lookup ns in extra_info
    python bench/bench_index.py                 # side-by-side table of per-lookup medians
"""

from __future__ import annotations

import bisect
import random
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from seglog._native.index import OffsetIndex, TimeIndex

ENTRIES = 262_144
BATCH = 1024  # lookups per timed call, so the harness overhead is amortised
SEED = 20240611


def build(directory: Path) -> tuple[OffsetIndex, TimeIndex, list[int], list[int], list[int]]:
    """Entries as LogSegment makes them: one per ~4 KiB batch, offsets = batch last offsets."""
    rng = random.Random(SEED)
    oi = OffsetIndex(directory / "00000000000000000000.index", 0, max_index_size=ENTRIES * 8)
    ti = TimeIndex(directory / "00000000000000000000.timeindex", 0, max_index_size=ENTRIES * 12)
    offsets, positions, stamps = [], [], []
    off, pos, ts = 0, 0, 1_700_000_000_000
    for _ in range(ENTRIES):
        off += rng.randint(20, 60)
        pos += 4096 + rng.randint(1, 400)
        ts += rng.randint(1, 5)
        oi.append(off, pos)
        ti.maybe_append(ts, off)
        offsets.append(off)
        positions.append(pos)
        stamps.append(ts)
    return oi, ti, offsets, positions, stamps


def targets(hi: int, n: int = BATCH) -> list[int]:
    rng = random.Random(SEED + 1)
    return [rng.randrange(0, hi) for _ in range(n)]


def bisect_lookup(offsets: list[int], positions: list[int], base: int) -> Callable[[int], tuple[int, int]]:
    br = bisect.bisect_right

    def lookup(target: int) -> tuple[int, int]:
        k = br(offsets, target) - 1
        return (offsets[k], positions[k]) if k >= 0 else (base, 0)

    return lookup


def python_mmap_lookup(view: memoryview, entries: int, base: int) -> Callable[[int], tuple[int, int]]:
    unpack = struct.Struct(">ii").unpack_from

    def lookup(target: int) -> tuple[int, int]:
        lo, hi = 0, entries - 1
        if entries == 0 or unpack(view, 0)[0] + base > target:
            return (base, 0)
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack(view, mid * 8)[0] + base <= target:
                lo = mid
            else:
                hi = mid - 1
        rel, pos = unpack(view, lo * 8)
        return (base + rel, pos)

    return lookup


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    oi, ti, offsets, positions, stamps = build(tmp_path_factory.mktemp("bench_index"))
    view = oi.view()
    qs = targets(offsets[-1] + 1)
    py = python_mmap_lookup(view, len(oi), 0)
    bl = bisect_lookup(offsets, positions, 0)
    for q in qs[:64]:  # the three agree
        assert oi.lookup(q) == bl(q) == py(q)
    yield {
        "oi": oi,
        "ti": ti,
        "qs": qs,
        "py": py,
        "bisect": bl,
        "ts_qs": targets(stamps[-1] + 1 - stamps[0]),
        "ts0": stamps[0],
    }
    view.release()
    oi.close()
    ti.close()


def run_batch(benchmark: Any, lookup: Callable[[int], Any], qs: list[int]) -> None:
    def batch() -> None:
        for q in qs:
            lookup(q)

    benchmark(batch)
    if benchmark.stats is not None:
        benchmark.extra_info["ns_per_lookup_median"] = round(benchmark.stats.stats.median / len(qs) * 1e9, 1)


def test_offset_lookup_seglog(benchmark: Any, setup: dict[str, Any]) -> None:
    run_batch(benchmark, setup["oi"].lookup, setup["qs"])


def test_offset_lookup_bisect_list(benchmark: Any, setup: dict[str, Any]) -> None:
    run_batch(benchmark, setup["bisect"], setup["qs"])


def test_offset_lookup_python_over_mmap(benchmark: Any, setup: dict[str, Any]) -> None:
    run_batch(benchmark, setup["py"], setup["qs"])


def test_time_lookup_seglog(benchmark: Any, setup: dict[str, Any]) -> None:
    ts0 = setup["ts0"]
    run_batch(benchmark, setup["ti"].lookup, [ts0 + q for q in setup["ts_qs"]])


def main() -> None:
    """Side by side in one process: per-lookup time of each round of BATCH random lookups."""
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with tempfile.TemporaryDirectory() as d:
        oi, ti, offsets, positions, stamps = build(Path(d))
        view = oi.view()
        qs = targets(offsets[-1] + 1)
        tqs = [stamps[0] + q for q in targets(stamps[-1] + 1 - stamps[0])]
        impls: list[tuple[str, Callable[[int], Any], list[int]]] = [
            ("seglog OffsetIndex.lookup", oi.lookup, qs),
            ("seglog TimeIndex.lookup", ti.lookup, tqs),
            ("bisect on Python lists", bisect_lookup(offsets, positions, 0), qs),
            ("pure Python over mmap bytes", python_mmap_lookup(view, len(oi), 0), qs),
        ]
        samples: dict[str, list[float]] = {name: [] for name, _, _ in impls}
        for _ in range(rounds):  # interleaved, so noise hits all alike
            for name, fn, q in impls:
                t0 = time.perf_counter_ns()
                for x in q:
                    fn(x)
                samples[name].append((time.perf_counter_ns() - t0) / len(q))
        ours = statistics.median(samples[impls[0][0]])
        print(f"{ENTRIES} entries, {rounds} rounds x {BATCH} random lookups; ns per lookup")
        print(f"{'implementation':32} {'p50':>8} {'p99':>8} {'vs seglog':>10}")
        for name, s in samples.items():
            s.sort()
            p50, p99 = statistics.median(s), s[int(0.99 * (len(s) - 1))]
            print(f"{name:32} {p50:8.0f} {p99:8.0f} {p50 / ours:9.1f}x")
        view.release()
        oi.close()
        ti.close()


if __name__ == "__main__":
    main()
