"""The fetch loop (``seglog._native.fetch``) against a plain-Python reading of its rules: whole
batches, at least one when asked, across segments, never past the upper bound, one shared limit
for several partitions."""

from __future__ import annotations

import os
import random

import pytest

from seglog._native.fetch import fetch_many, fetch_partition
from seglog._native.segment import Segment
from seglog.storage.records import decode_records
from tests.logkit import batch


def build(tmp_path, name, spans, gap_after=(), seed=0):
    """Segments holding batches of the given record counts; a new segment starts after every
    ``spans`` group. Returns (segments, model) with model rows (segment index, base, last,
    position, size)."""
    rng = random.Random(seed)
    d = tmp_path / name
    d.mkdir()
    segments, model = [], []
    nxt = 0
    for si, group in enumerate(spans):
        if si in gap_after:
            nxt += 5
        seg = Segment(d, nxt, create=True, index_interval_bytes=64, max_index_size=4096)
        for k, n in enumerate(group):
            info = seg.append(batch(n, size=rng.randint(1, 80), tag=100 * si + k), assign_from=nxt)
            model.append((si, info.first_offset, info.last_offset, info.position, info.size))
            nxt = info.last_offset + 1
        segments.append(seg)
    # An empty active segment at the end, as after a roll.
    segments.append(Segment(d, nxt, create=True, max_index_size=4096))
    yield_ = (segments, model)
    return yield_


def expected(model, start, max_bytes, upper, min_one=True):
    """(segment index, position, length) slices the rules give."""
    rows = [m for m in model if m[2] >= start]
    taken: list[tuple[int, int, int, int, int]] = []
    total = 0
    for m in rows:
        if m[2] >= upper or m[1] >= upper:
            break
        if total + m[4] > max_bytes and not (min_one and not taken):
            break
        taken.append(m)
        total += m[4]
    out: list[tuple[int, int, int]] = []
    for m in taken:
        if out and out[-1][0] == m[0] and out[-1][1] + out[-1][2] == m[3]:
            out[-1] = (m[0], out[-1][1], out[-1][2] + m[4])
        else:
            out.append((m[0], m[3], m[4]))
    return out


def as_rows(segments, slices):
    return [(segments.index(s.segment), s.position, s.length) for s in slices]


@pytest.fixture
def log3(tmp_path):
    rng = random.Random(3)
    spans = [[rng.randint(1, 4) for _ in range(rng.randint(3, 12))] for _ in range(4)]
    segments, model = build(tmp_path, "t-0", spans, gap_after={2}, seed=3)
    yield segments, model
    for s in segments:
        s.close()


def test_fetch_matches_the_rules(log3):
    segments, model = log3
    leo = model[-1][2] + 1
    rng = random.Random(7)
    sizes = sorted({m[4] for m in model})
    for _ in range(600):
        start = rng.randint(0, leo)
        upper = rng.randint(start, leo + 2)
        max_bytes = rng.choice([0, 1, rng.choice(sizes), rng.randint(0, 400), rng.randint(0, 3000), 10**6])
        min_one = rng.random() < 0.8
        got = fetch_partition(segments, start, max_bytes, upper, min_one)
        want = expected(model, start, max_bytes, upper, min_one)
        assert as_rows(segments, got) == want, (start, max_bytes, upper, min_one)
        # The bytes are the batches, nothing past the bound.
        recs = [r for s in got for r in decode_records(s.view())]
        if recs:
            assert recs[-1].offset < upper
            assert recs[0].offset <= max(start, recs[0].offset)
            assert any(r.offset >= start for r in recs)


def test_at_least_one_batch_even_over_the_limit(log3):
    segments, model = log3
    got = fetch_partition(segments, 0, 1, 10**9, True)
    assert as_rows(segments, got) == [(0, 0, model[0][4])]
    assert fetch_partition(segments, 0, 1, 10**9, False) == []
    assert fetch_partition(segments, 0, 0, 10**9, True)[0].length == model[0][4]


def test_across_segments_and_gaps(log3):
    segments, model = log3
    everything = fetch_partition(segments, 0, 10**9, 10**9, True)
    assert [segments.index(s.segment) for s in everything] == [0, 1, 2, 3]
    offsets = [r.offset for s in everything for r in decode_records(s.view())]
    last_of = {m[0]: m[2] for m in model}
    gap_start = last_of[1] + 1  # segment 2 starts 5 offsets later
    assert offsets == [o for o in range(model[-1][2] + 1) if not gap_start <= o < gap_start + 5]
    # Starting inside the gap reads from the next segment.
    got = fetch_partition(segments, gap_start + 2, 10**9, 10**9, True)
    assert got[0].segment is segments[2] and got[0].position == 0
    # Nothing at or past the log end.
    assert fetch_partition(segments, model[-1][2] + 1, 100, 10**9, True) == []


def test_upper_bound_high_watermark_vs_log_end(log3):
    segments, model = log3
    leo = model[-1][2] + 1
    hw = model[len(model) // 2][1]  # a batch boundary, as a high watermark is
    consumer = fetch_partition(segments, 0, 10**9, hw, True)
    follower = fetch_partition(segments, 0, 10**9, leo, True)
    assert max(r.offset for s in consumer for r in decode_records(s.view())) == hw - 1
    assert max(r.offset for s in follower for r in decode_records(s.view())) == leo - 1
    assert fetch_partition(segments, hw, 10**9, hw, True) == []
    # A bound inside a batch excludes that whole batch.
    m = next(m for m in model if m[2] > m[1] and m[1] > 0)
    got = fetch_partition(segments, 0, 10**9, m[1] + 1, True)
    assert max(r.offset for s in got for r in decode_records(s.view())) == m[1] - 1


def test_fetch_slice_can_be_sent_from_the_file(log3, tmp_path):
    segments, model = log3
    got = fetch_partition(segments, 3, 500, 10**9, True)
    out = tmp_path / "sent"
    with open(out, "wb") as f:
        for s in got:
            assert s.path == s.segment.log_path
            assert "FetchSlice(" in repr(s)
            n = os.sendfile(f.fileno(), s.fd, s.position, s.length)
            assert n == s.length
    assert out.read_bytes() == b"".join(bytes(s.view()) for s in got)


def test_negative_max_bytes(log3):
    segments, _ = log3
    with pytest.raises(ValueError, match="max_bytes"):
        fetch_partition(segments, 0, -1, 10, True)
    assert fetch_partition([], 0, 10, 10, True) == []


def fetch_many_oracle(reqs, models, max_total):
    left, min_one, out = max_total, True, []
    for (segments, start, pmax, upper), model in zip(reqs, models):
        limit = min(pmax, left) if left > 0 else 0
        rows = expected(model, start, limit, upper, min_one)
        got = sum(r[2] for r in rows)
        if got:
            min_one = False
        left -= got
        out.append(rows)
    return out


def test_fetch_many_shares_one_limit(tmp_path):
    parts = []
    for p in range(4):
        segments, model = build(tmp_path, f"t-{p}", [[2, 1, 3, 1], [2, 2]], seed=p)
        parts.append((segments, model))
    sizes = [sum(m[4] for m in model) for _, model in parts]
    rng = random.Random(1)
    for _ in range(300):
        reqs, models = [], []
        for segments, model in parts:
            leo = model[-1][2] + 1
            start = rng.choice([0, rng.randint(0, leo), leo])
            reqs.append((segments, start, rng.choice([1, 100, 400, 10**6]), leo))
            models.append(model)
        total = rng.choice([0, 1, 200, 600, sum(sizes), 10**7])
        got = fetch_many(reqs, total)
        want = fetch_many_oracle(reqs, models, total)
        assert [as_rows(r[0], g) for r, g in zip(reqs, got)] == want
        fetched = [sum(s.length for s in g) for g in got]
        # Only the first partition that returns data may exceed the limits.
        first = next((i for i, n in enumerate(fetched) if n), None)
        if first is not None:
            assert sum(fetched[first + 1 :]) <= max(total - fetched[first], 0)
    for segments, _ in parts:
        for s in segments:
            s.close()


def test_read_results_stay_out_of_the_cycle_collector(tmp_path):
    """A read's result and its slices refer only to a segment, so the collector does not track
    them: a loop of reads that keeps its results does not set off collections of the heap."""
    import gc

    from seglog import Log
    from seglog.storage.records import encode_batch

    with Log.open(tmp_path / "t-0") as log:
        for i in range(20):
            log.append(encode_batch([b"v%d-%d" % (i, k) for k in range(5)]))
        results = [log.read(o, 1) for o in range(100)]
        gc.collect()
        assert not any(gc.is_tracked(r) for r in results)
        assert not any(gc.is_tracked(s) for r in results for s in r.slices)
        assert [decode_records(r.to_bytes())[0].offset for r in results] == [o - o % 5 for o in range(100)]
        slices = fetch_partition(log.segments, 0, 10**6, 100, True)
        assert slices and not any(gc.is_tracked(s) for s in slices)
        del results
        gc.collect()
        assert [r.value for r in decode_records(log.read(97, 1).to_bytes())] == [b"v19-%d" % k for k in range(5)]
