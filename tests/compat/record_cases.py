"""Hypothesis strategies for record batches and the checks shared by the compat tests."""

from __future__ import annotations

import random
import struct

from hypothesis import strategies as st

from seglog.storage.records import batch_headers, decode_columns, decode_records, iter_records
from tests.compat.kafka_oracle import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    BatchInput,
    LegacyInput,
    arrow_rows,
    kp_batches,
    kp_sequence,
)

TS_EDGES = [INT64_MIN, INT64_MIN + 1, -2, -1, 0, 1, 1700000000000, INT64_MAX - 1, INT64_MAX]


def sized(n: int) -> st.SearchStrategy[bytes]:
    return st.integers(0, 2**32).map(lambda seed: random.Random(seed).randbytes(n))


# Lengths at the zigzag-varint size steps (1 byte up to 63, 2 up to 8191, 3 up to 1 MiB - 1).
_step_lengths = st.sampled_from([63, 64, 8191, 8192]).flatmap(sized)
blobs = st.one_of(st.none(), st.just(b""), st.binary(max_size=48), _step_lengths)
header_values = st.one_of(st.none(), st.just(b""), st.binary(max_size=24))
# Hypothesis text excludes surrogates, so every key has a UTF-8 encoding; non-ASCII is common.
header_keys = st.one_of(st.text(max_size=12), st.sampled_from(["", "ключ", "键", "🔑", "é\u0301"]))
headers_st = st.lists(st.tuples(header_keys, header_values), max_size=4)


@st.composite
def timestamps_fitting(draw: st.DrawFn, n: int) -> list[int]:
    """n timestamps whose deltas from the first all fit an int64 (as a Kafka producer's must)."""
    base = draw(st.one_of(st.sampled_from(TS_EDGES), st.integers(INT64_MIN, INT64_MAX), st.integers(0, 2**42)))
    lo, hi = max(INT64_MIN, base + INT64_MIN), min(INT64_MAX, base + INT64_MAX)
    rest = st.one_of(
        st.sampled_from([lo, hi, base, max(lo, base - 1), min(hi, base + 1)]),
        st.integers(lo, hi),
        st.integers(max(lo, base - 10**6), min(hi, base + 10**6)),
    )
    return [base] + draw(st.lists(rest, min_size=n - 1, max_size=n - 1))


@st.composite
def batch_inputs(
    draw: st.DrawFn, max_records: int = 24, min_records: int = 1, value_strategy: st.SearchStrategy = blobs
) -> BatchInput:
    n = draw(st.integers(min_records, max_records))
    idempotent = draw(st.booleans())
    pid = draw(st.one_of(st.just(-1), st.integers(0, INT64_MAX), st.sampled_from([INT64_MAX, 0])))
    return BatchInput(
        values=draw(st.lists(value_strategy, min_size=n, max_size=n)),
        keys=draw(st.lists(blobs, min_size=n, max_size=n)),
        timestamps=draw(timestamps_fitting(n)) if n else [],
        headers=draw(st.lists(st.one_of(st.just([]), headers_st), min_size=n, max_size=n)),
        base_offset=draw(
            st.one_of(st.just(0), st.integers(0, INT64_MAX - max_records), st.just(INT64_MAX - max_records))
        ),
        partition_leader_epoch=draw(
            st.one_of(st.sampled_from([-1, 0, INT32_MAX, INT32_MIN]), st.integers(INT32_MIN, INT32_MAX))
        ),
        producer_id=pid if idempotent else -1,
        producer_epoch=draw(st.one_of(st.sampled_from([-1, 0, 32767, -32768]), st.integers(-32768, 32767)))
        if idempotent
        else -1,
        base_sequence=draw(st.one_of(st.sampled_from([0, INT32_MAX, INT32_MAX - 3]), st.integers(0, INT32_MAX)))
        if idempotent
        else -1,
        is_transactional=draw(st.booleans()),
        log_append_time=draw(st.one_of(st.none(), st.sampled_from(TS_EDGES), st.integers(INT64_MIN, INT64_MAX))),
    )


@st.composite
def legacy_inputs(draw: st.DrawFn, magic: int | None = None) -> LegacyInput:
    magic = draw(st.sampled_from([0, 1])) if magic is None else magic
    n = draw(st.integers(1, 12))
    first = draw(st.one_of(st.just(0), st.integers(0, INT64_MAX - 10**6)))
    gaps = draw(st.lists(st.integers(1, 1000), min_size=n - 1, max_size=n - 1))
    offsets = [first]
    for g in gaps:
        offsets.append(offsets[-1] + g)
    ts = st.one_of(st.sampled_from(TS_EDGES), st.integers(INT64_MIN, INT64_MAX))
    return LegacyInput(
        magic=magic,
        offsets=offsets,
        timestamps=draw(st.lists(ts, min_size=n, max_size=n)),
        keys=draw(st.lists(blobs, min_size=n, max_size=n)),
        values=draw(st.lists(blobs, min_size=n, max_size=n)),
        log_append=magic == 1 and draw(st.booleans()),
    )


# aiokafka's builder takes a first timestamp of -1 to mean "none yet" and replaces it with the
# next record's (Kafka's producer refuses negative timestamps, so real batches never carry it).
aio_inputs = batch_inputs(max_records=8).filter(lambda i: i.timestamps[0] != -1)


def check_kp_view_of(inp: BatchInput, buf: bytes) -> None:
    (b,) = kp_batches(buf)
    n = len(inp.values)
    assert b.crc_ok
    assert b.magic == 2
    assert b.base_offset == inp.base_offset
    assert b.leader_epoch == inp.partition_leader_epoch
    assert b.last_offset_delta == n - 1
    assert b.records_count == n
    assert b.first_timestamp == inp.timestamps[0]
    assert b.max_timestamp == (max(inp.timestamps) if inp.log_append_time is None else inp.log_append_time)
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (
        inp.producer_id,
        inp.producer_epoch,
        inp.base_sequence,
    )
    assert b.attributes == (0x10 if inp.is_transactional else 0) | (0x08 if inp.log_append_time is not None else 0)
    assert not b.is_control
    assert b.records == inp.expected()


def check_ours_reads(inp: BatchInput, buf: bytes) -> None:
    n = len(inp.values)
    expected = inp.expected()
    recs = decode_records(buf)
    assert [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, tuple(r.headers)) for r in recs] == expected
    for i, r in enumerate(recs):
        assert r.magic == 2
        assert r.leader_epoch == inp.partition_leader_epoch
        assert (r.producer_id, r.producer_epoch) == (inp.producer_id, inp.producer_epoch)
        assert r.sequence == (-1 if inp.base_sequence < 0 else kp_sequence(inp.base_sequence, i))
        assert r.is_transactional == inp.is_transactional
        assert not r.is_control
    assert list(iter_records(buf)) == recs
    assert arrow_rows(decode_columns(buf)) == expected
    assert arrow_rows(decode_columns(buf, views=True)) == expected

    (h,) = batch_headers(buf, verify_crc=True)
    (kb,) = kp_batches(buf)
    assert kb.last_offset_delta is not None  # a v2 batch
    assert (h.magic, h.position, h.size) == (2, 0, len(buf))
    assert (h.base_offset, h.last_offset, h.records_count) == (
        kb.base_offset,
        kb.base_offset + kb.last_offset_delta,
        kb.records_count,
    )
    assert (h.partition_leader_epoch, h.attributes, h.base_timestamp, h.max_timestamp) == (
        kb.leader_epoch,
        kb.attributes,
        kb.first_timestamp,
        kb.max_timestamp,
    )
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (kb.producer_id, kb.producer_epoch, kb.base_sequence)
    assert h.crc == struct.unpack_from(">I", buf, 17)[0]
    assert h.timestamp_type == (1 if inp.log_append_time is not None else 0)
    assert h.is_transactional == inp.is_transactional and not h.is_control
    if n:
        assert h.last_sequence == (-1 if inp.base_sequence < 0 else kp_sequence(inp.base_sequence, n - 1))
