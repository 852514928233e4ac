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
