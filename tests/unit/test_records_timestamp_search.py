"""first_at_or_after: the record-level ListOffsets step, checked against decode_records."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.storage.records import decode_records, encode_batch, encode_control_batch, first_at_or_after
from tests.conftest import T0 as T


def oracle(buf: bytes, ts: int, lo: int | None, hi: int | None) -> tuple[int, int] | None:
    for r in decode_records(buf, min_offset=lo, max_offset=hi):
        if r.timestamp >= ts:
            return r.offset, r.timestamp
    return None


batches = st.lists(
    st.tuples(
        st.lists(st.integers(-5, 50), min_size=1, max_size=20),
        st.sampled_from(["none", "gzip", "lz4", "zstd"]),
        st.booleans(),
        st.booleans(),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=150, deadline=None)
@given(
    batches, st.integers(-10, 60), st.one_of(st.none(), st.integers(0, 60)), st.one_of(st.none(), st.integers(0, 80))
)
def test_agrees_with_decoding(spec, target, lo, hi) -> None:
    buf, base = b"", 0
    for deltas, codec, log_append, control_after in spec:
        stamps = [T + d for d in deltas]
        buf += bytes(
            encode_batch(
                [b"v"] * len(stamps),
                timestamps=stamps,
                base_offset=base,
                compression=codec,
                log_append_time=T + 25 if log_append else None,
            )
        )
        base += len(stamps)
        if control_after:  # markers are not data: never an answer
            buf += bytes(encode_control_batch(1, producer_id=7, producer_epoch=0, base_offset=base, timestamp=T + 99))
            base += 1
    assert first_at_or_after(buf, T + target, min_offset=lo, max_offset=hi) == oracle(buf, T + target, lo, hi)


def test_nothing_qualifies() -> None:
    buf = encode_batch([b"a", b"b"], timestamps=[T, T + 1])
    assert first_at_or_after(buf, T + 2) is None
    assert first_at_or_after(buf, T + 1) == (1, T + 1)
    assert first_at_or_after(b"", T) is None


# Runs of records of one size (the walk assumes the size of the record before), sizes whose
# heads take the short path (length, timestamp and offset deltas in one or two bytes) or not
# (values over 8 KiB: a three-byte length; timestamp deltas over 8,191 ms: three bytes).
runs = st.lists(
    st.tuples(st.sampled_from([0, 1, 7, 40, 100, 101, 300, 9000]), st.integers(1, 80)), min_size=1, max_size=5
)


@settings(max_examples=100, deadline=None)
@given(
    runs,
    st.lists(st.sampled_from([0, 1, 2, -3, 9000, -9000]), min_size=1, max_size=8),
    st.integers(-10_000, 12_000),
    st.one_of(st.none(), st.integers(0, 400)),
    st.one_of(st.none(), st.integers(0, 450)),
)
def test_agrees_with_decoding_over_runs_of_record_sizes(spec, steps, target, lo, hi) -> None:
    values = [b"x" * size for size, count in spec for _ in range(count)]
    stamps, t = [], T
    for i in range(len(values)):
        t += steps[i % len(steps)]
        stamps.append(t)
    buf = bytes(encode_batch(values, timestamps=stamps, base_offset=5))
    lo_, hi_ = (None if lo is None else lo + 5), (None if hi is None else hi + 5)
    for probe in (T + target, stamps[len(stamps) // 2], stamps[-1], max(stamps), min(stamps)):
        assert first_at_or_after(buf, probe, min_offset=lo_, max_offset=hi_) == oracle(buf, probe, lo_, hi_)


def test_a_record_shorter_than_its_run_is_read_at_its_own_size() -> None:
    # Forty records of one size, one shorter, forty of the first size again: the timestamps
    # after the change are found at their offsets (a walk keeping the old size would misread).
    values = [b"a" * 100] * 40 + [b"b" * 10] + [b"c" * 100] * 40
    stamps = [T + i for i in range(len(values))]
    buf = bytes(encode_batch(values, timestamps=stamps))
    for i in (0, 39, 40, 41, 60, 80):
        assert first_at_or_after(buf, T + i) == (i, T + i)
    assert first_at_or_after(buf, T + 81) is None


def _zigzag(v: int) -> bytes:
    u, out = (v << 1) ^ (v >> 63), b""
    while u >= 0x80:
        out += bytes([u & 0x7F | 0x80])
        u >>= 7
    return out + bytes([u])


def _record_starts(buf: bytes) -> list[int]:
    p, out = 61, []
    while p < len(buf):
        u, shift, q = 0, 0, p
        while True:
            x = buf[q]
            q += 1
            u |= (x & 0x7F) << shift
            shift += 7
            if not x & 0x80:
                break
        out.append(p)
        p = q + ((u >> 1) ^ -(u & 1))
    return out


def test_a_longer_record_is_not_read_at_the_size_of_the_run_before_it() -> None:
    # Inside the longer record, where the run's size would put the next record, its value holds
    # the bytes of a record with timestamp delta 5,000: a walk keeping the run's size would
    # answer with it; the records' own lengths give no answer at T + 4,000.
    values = [b"a" * 100] * 3 + [b"b" * 250] + [b"a" * 100] * 3
    stamps = [T + i for i in range(len(values))]
    starts = _record_starts(bytes(encode_batch(values, timestamps=stamps)))
    run = starts[1] - starts[0]
    at = starts[3] + run - bytes(encode_batch(values, timestamps=stamps)).index(b"b" * 250)
    fake = _zigzag(20) + b"\x00" + _zigzag(5000) + _zigzag(0) + b"\x01\x01\x00" + b"\x00" * 14
    values[3] = values[3][:at] + fake + values[3][at + len(fake) :]
    buf = bytes(encode_batch(values, timestamps=stamps))
    assert _record_starts(buf) == starts
    assert first_at_or_after(buf, T + 4000) is None
    assert first_at_or_after(buf, T + 5) == (5, T + 5)


def test_records_of_ever_changing_sizes_are_each_found() -> None:
    # Past a few changes of size in a batch, the walk follows each record's length.
    values = [b"v" * (40 + (i * 37) % 90) for i in range(60)] + [b"w" * 100] * 20
    stamps = [T + 2 * i for i in range(len(values))]
    buf = bytes(encode_batch(values, timestamps=stamps, base_offset=100))
    for i in range(len(values)):
        assert first_at_or_after(buf, T + 2 * i - 1) == (100 + i, T + 2 * i)
        assert first_at_or_after(buf, T + 2 * i, min_offset=100 + i, max_offset=101 + i) == (100 + i, T + 2 * i)
    assert first_at_or_after(buf, T + 2 * len(values)) is None
