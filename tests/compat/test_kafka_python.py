"""Differential tests of the record codec against kafka-python (and aiokafka), both directions.

* ours -> kafka-python / aiokafka: every batch we encode is read back by their decoders, CRC
  verified, with the same records and the same batch fields.
* kafka-python -> ours: batches (v2 and legacy v0/v1) built by kafka-python's builders decode in
  ours to the same records, fields and batch headers, through every decoder entry point.
* bytes: for uncompressed v2 our bytes equal kafka-python's and aiokafka's for the same inputs,
  whenever every timestamp delta fits an int64 (it then holds for all inputs tried; outside that
  range kafka-python computes deltas with unbounded Python ints and writes a different varlong).

Codec-dependent cases are in test_kafka_python_codecs.py.
"""
from __future__ import annotations

import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.records import (
    batch_headers,
    decode_columns,
    decode_records,
    encode_batch,
    encode_control_batch,
    iter_records,
)
from tests.compat.kafka_oracle import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    BatchInput,
    LegacyInput,
    aio_build_v2,
    aio_records,
    arrow_rows,
    kp_batches,
    kp_build_legacy,
    kp_build_v2,
    kp_records,
    kp_sequence,
    ours,
)

SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# ---------------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------------

TS_EDGES = [INT64_MIN, INT64_MIN + 1, -2, -1, 0, 1, 1700000000000, INT64_MAX - 1, INT64_MAX]


def _sized(n: int) -> st.SearchStrategy[bytes]:
    return st.integers(0, 2**32).map(lambda seed: random.Random(seed).randbytes(n))


# Lengths at the zigzag-varint size steps (1 byte up to 63, 2 up to 8191, 3 up to 1 MiB - 1).
_step_lengths = st.sampled_from([63, 64, 8191, 8192]).flatmap(_sized)
blobs = st.one_of(st.none(), st.just(b""), st.binary(max_size=48), _step_lengths)
header_values = st.one_of(st.none(), st.just(b""), st.binary(max_size=24))
# Hypothesis text excludes surrogates, so every key has a UTF-8 encoding; non-ASCII is common.
header_keys = st.one_of(st.text(max_size=12), st.sampled_from(["", "ключ", "键", "🔑", "é\u0301"]))
headers_st = st.lists(st.tuples(header_keys, header_values), max_size=4)


@st.composite
def timestamps_fitting(draw: st.DrawFn, n: int) -> list[int]:
    """n timestamps whose deltas from the first all fit an int64 (as a Kafka producer's must)."""
    base = draw(st.one_of(st.sampled_from(TS_EDGES), st.integers(INT64_MIN, INT64_MAX),
                          st.integers(0, 2**42)))
    lo, hi = max(INT64_MIN, base + INT64_MIN), min(INT64_MAX, base + INT64_MAX)
    rest = st.one_of(st.sampled_from([lo, hi, base, max(lo, base - 1), min(hi, base + 1)]),
                     st.integers(lo, hi), st.integers(max(lo, base - 10**6), min(hi, base + 10**6)))
    return [base] + draw(st.lists(rest, min_size=n - 1, max_size=n - 1))


@st.composite
def batch_inputs(draw: st.DrawFn, max_records: int = 24, min_records: int = 1,
                 value_strategy: st.SearchStrategy = blobs) -> BatchInput:
    n = draw(st.integers(min_records, max_records))
    idempotent = draw(st.booleans())
    pid = draw(st.one_of(st.just(-1), st.integers(0, INT64_MAX), st.sampled_from([INT64_MAX, 0])))
    return BatchInput(
        values=draw(st.lists(value_strategy, min_size=n, max_size=n)),
        keys=draw(st.lists(blobs, min_size=n, max_size=n)),
        timestamps=draw(timestamps_fitting(n)) if n else [],
        headers=draw(st.lists(st.one_of(st.just([]), headers_st), min_size=n, max_size=n)),
        base_offset=draw(st.one_of(st.just(0), st.integers(0, INT64_MAX - max_records),
                                   st.just(INT64_MAX - max_records))),
        partition_leader_epoch=draw(st.one_of(st.sampled_from([-1, 0, INT32_MAX, INT32_MIN]),
                                              st.integers(INT32_MIN, INT32_MAX))),
        producer_id=pid if idempotent else -1,
        producer_epoch=draw(st.one_of(st.sampled_from([-1, 0, 32767, -32768]),
                                      st.integers(-32768, 32767))) if idempotent else -1,
        base_sequence=draw(st.one_of(st.sampled_from([0, INT32_MAX, INT32_MAX - 3]),
                                     st.integers(0, INT32_MAX))) if idempotent else -1,
        is_transactional=draw(st.booleans()),
        log_append_time=draw(st.one_of(st.none(), st.sampled_from(TS_EDGES),
                                       st.integers(INT64_MIN, INT64_MAX))),
    )


# ---------------------------------------------------------------------------------------------
# ours -> kafka-python, aiokafka
# ---------------------------------------------------------------------------------------------

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
    assert b.max_timestamp == (max(inp.timestamps) if inp.log_append_time is None
                               else inp.log_append_time)
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (
        inp.producer_id, inp.producer_epoch, inp.base_sequence)
    assert b.attributes == (0x10 if inp.is_transactional else 0) | (
        0x08 if inp.log_append_time is not None else 0)
    assert not b.is_control
    assert b.records == inp.expected()


@SETTINGS
@given(batch_inputs())
def test_our_batches_decode_in_kafka_python_and_aiokafka(inp: BatchInput) -> None:
    buf = inp.encode_ours()
    check_kp_view_of(inp, buf)
    assert aio_records(buf) == inp.expected()


# ---------------------------------------------------------------------------------------------
# kafka-python -> ours
# ---------------------------------------------------------------------------------------------

def check_ours_reads(inp: BatchInput, buf: bytes) -> None:
    n = len(inp.values)
    expected = inp.expected()
    recs = decode_records(buf)
    assert [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, tuple(r.headers))
            for r in recs] == expected
    for i, r in enumerate(recs):
        assert r.magic == 2
        assert r.leader_epoch == inp.partition_leader_epoch
        assert (r.producer_id, r.producer_epoch) == (inp.producer_id, inp.producer_epoch)
        assert r.sequence == (-1 if inp.base_sequence < 0 else kp_sequence(inp.base_sequence, i))
        assert r.is_transactional == inp.is_transactional
        assert not r.is_control
    assert list(iter_records(buf)) == recs
    assert arrow_rows(decode_columns(buf)) == expected

    (h,) = batch_headers(buf, verify_crc=True)
    (kb,) = kp_batches(buf)
    assert (h.magic, h.position, h.size) == (2, 0, len(buf))
    assert (h.base_offset, h.last_offset, h.records_count) == (
        kb.base_offset, kb.base_offset + kb.last_offset_delta, kb.records_count)
    assert (h.partition_leader_epoch, h.attributes, h.base_timestamp, h.max_timestamp) == (
        kb.leader_epoch, kb.attributes, kb.first_timestamp, kb.max_timestamp)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (
        kb.producer_id, kb.producer_epoch, kb.base_sequence)
    assert h.crc == struct.unpack_from(">I", buf, 17)[0]
    assert h.timestamp_type == (1 if inp.log_append_time is not None else 0)
    assert h.is_transactional == inp.is_transactional and not h.is_control
    if n:
        assert h.last_sequence == (-1 if inp.base_sequence < 0
                                   else kp_sequence(inp.base_sequence, n - 1))


@SETTINGS
@given(batch_inputs())
def test_kafka_python_batches_decode_in_ours(inp: BatchInput) -> None:
    check_ours_reads(inp, kp_build_v2(inp))


# aiokafka's builder takes a first timestamp of -1 to mean "none yet" and replaces it with the
# next record's (Kafka's producer refuses negative timestamps, so real batches never carry it).
aio_inputs = batch_inputs(max_records=8).filter(lambda i: i.timestamps[0] != -1)


@SETTINGS
@given(aio_inputs)
def test_aiokafka_batches_decode_in_ours(inp: BatchInput) -> None:
    check_ours_reads(inp, aio_build_v2(inp))


def test_empty_kafka_python_batch_has_no_records() -> None:
    buf = kp_build_v2(BatchInput([], [], [], [], base_offset=7))
    assert decode_records(buf) == [] and list(iter_records(buf)) == []
    assert len(decode_columns(buf)) == 0
    (h,) = batch_headers(buf, verify_crc=True)
    assert h.records_count == 0 and h.base_offset == 7


# ---------------------------------------------------------------------------------------------
# Byte-for-byte
# ---------------------------------------------------------------------------------------------

@SETTINGS
@given(batch_inputs())
def test_uncompressed_bytes_equal_kafka_python(inp: BatchInput) -> None:
    assert inp.encode_ours() == kp_build_v2(inp)


@SETTINGS
@given(aio_inputs)
def test_uncompressed_bytes_equal_aiokafka(inp: BatchInput) -> None:
    assert inp.encode_ours() == aio_build_v2(inp)


@pytest.mark.parametrize("timestamps", [
    [INT64_MIN, INT64_MAX],
    [INT64_MAX, INT64_MIN],
    [-1, INT64_MAX, INT64_MIN, 0],
    [INT64_MIN, 0, INT64_MAX],
])
def test_timestamp_deltas_beyond_int64_wrap_as_in_java(timestamps: list[int]) -> None:
    """A delta that overflows an int64 wraps (Java long arithmetic) and round-trips in ours.

    kafka-python computes the same delta with unbounded Python ints, so its bytes differ and
    its decoder gives the unwrapped sum; the two agree modulo 2**64.
    """
    inp = BatchInput([b"v"] * len(timestamps), [None] * len(timestamps), timestamps,
                     [[] for _ in timestamps])
    buf = inp.encode_ours()
    assert ours(buf) == inp.expected()
    wrapped = [timestamps[0] + (t - timestamps[0] + 2**63) % 2**64 - 2**63 for t in timestamps]
    assert [r[1] for r in kp_records(buf)] == wrapped
    if wrapped != timestamps:
        assert buf != kp_build_v2(inp)
    assert [t % 2**64 for _, t, *_ in kp_records(buf)] == [t % 2**64 for t in timestamps]


# ---------------------------------------------------------------------------------------------
# Values up to 1 MiB (few examples: kafka-python is pure Python)
# ---------------------------------------------------------------------------------------------

_big = st.sampled_from([2**20, 2**20 - 1, 2**16, 100_000]).flatmap(_sized)


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(batch_inputs(max_records=3, value_strategy=_big))
def test_values_up_to_one_mib_both_directions(inp: BatchInput) -> None:
    buf = inp.encode_ours()
    assert buf == kp_build_v2(inp)
    check_kp_view_of(inp, buf)
    check_ours_reads(inp, buf)


# ---------------------------------------------------------------------------------------------
# Legacy v0/v1 (kafka-python's LegacyRecordBatchBuilder) -> ours
# ---------------------------------------------------------------------------------------------

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
        magic=magic, offsets=offsets,
        timestamps=draw(st.lists(ts, min_size=n, max_size=n)),
        keys=draw(st.lists(blobs, min_size=n, max_size=n)),
        values=draw(st.lists(blobs, min_size=n, max_size=n)),
        log_append=magic == 1 and draw(st.booleans()))


@SETTINGS
@given(legacy_inputs())
def test_kafka_python_legacy_messages_decode_in_ours(inp: LegacyInput) -> None:
    buf = kp_build_legacy(inp)
    expected = inp.expected()
    assert kp_records(buf) == expected  # the oracle agrees with the inputs
    recs = decode_records(buf)
    assert [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, tuple(r.headers))
            for r in recs] == expected
    assert {(r.magic, r.leader_epoch, r.producer_id, r.producer_epoch, r.sequence,
             r.is_transactional, r.is_control) for r in recs} == {
        (inp.magic, -1, -1, -1, -1, False, False)}
    assert list(iter_records(buf)) == recs
    assert arrow_rows(decode_columns(buf)) == expected

    heads = batch_headers(buf, verify_crc=True)
    kps = kp_batches(buf)
    assert len(heads) == len(kps) == len(inp.offsets)
    for h, kb, t in zip(heads, kps, inp.timestamps):
        assert (h.magic, h.base_offset, h.last_offset, h.attributes, h.records_count) == (
            kb.magic, kb.base_offset, kb.base_offset, kb.attributes, 1)
        assert h.base_timestamp == h.max_timestamp == (t if inp.magic == 1 else -1)
        assert h.timestamp_type == (-1 if inp.magic == 0 else (1 if inp.log_append else 0))
        assert h.crc == struct.unpack_from(">I", buf, h.position + 12)[0]
    assert heads[-1].position + heads[-1].size == len(buf)


# ---------------------------------------------------------------------------------------------
# Mixed buffers, control batches
# ---------------------------------------------------------------------------------------------

@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.one_of(batch_inputs(max_records=5).map(lambda i: ("ours", i)),
                          batch_inputs(max_records=5).map(lambda i: ("kp", i)),
                          legacy_inputs().map(lambda i: ("legacy", i))), min_size=1, max_size=6))
def test_mixed_buffers_agree_with_kafka_python(parts: list) -> None:
    chunks, expected = [], []
    for kind, inp in parts:
        chunks.append(inp.encode_ours() if kind == "ours" else
                      kp_build_v2(inp) if kind == "kp" else kp_build_legacy(inp))
        expected.extend(inp.expected())
    buf = b"".join(chunks)
    assert kp_records(buf) == expected
    assert ours(buf) == expected
    assert [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, tuple(r.headers))
            for r in iter_records(buf)] == expected
    assert arrow_rows(decode_columns(buf)) == expected
    assert [h.size for h in batch_headers(buf, verify_crc=True)] == [
        s for c in chunks for s in _legacy_or_v2_sizes(c)]


def _legacy_or_v2_sizes(chunk: bytes) -> list[int]:
    sizes, pos = [], 0
    while pos < len(chunk):
        (n,) = struct.unpack_from(">i", chunk, pos + 8)
        sizes.append(n + 12)
        pos += n + 12
    return sizes


@SETTINGS
@given(control_type=st.sampled_from([0, 1]), base_offset=st.integers(0, INT64_MAX),
       timestamp=st.integers(INT64_MIN, INT64_MAX), producer_id=st.integers(0, INT64_MAX),
       producer_epoch=st.integers(0, 32767), coordinator_epoch=st.integers(INT32_MIN, INT32_MAX),
       ple=st.integers(INT32_MIN, INT32_MAX))
def test_control_batches_decode_in_kafka_python(control_type: int, base_offset: int,
                                                 timestamp: int, producer_id: int,
                                                 producer_epoch: int, coordinator_epoch: int,
                                                 ple: int) -> None:
    buf = encode_control_batch(control_type, base_offset=base_offset, timestamp=timestamp,
                               producer_id=producer_id, producer_epoch=producer_epoch,
                               coordinator_epoch=coordinator_epoch, partition_leader_epoch=ple)
    (kb,) = kp_batches(buf)
    assert kb.crc_ok and kb.is_control and kb.attributes == 0x30
    assert kb.control == ((0, control_type),)
    assert (kb.base_offset, kb.leader_epoch, kb.producer_id, kb.producer_epoch, kb.base_sequence) == (
        base_offset, ple, producer_id, producer_epoch, -1)
    # ControlRecord value: version int16 0, coordinator epoch int32 (EndTransactionMarker).
    assert kb.records == [(base_offset, timestamp, 0, struct.pack(">hh", 0, control_type),
                           struct.pack(">hi", 0, coordinator_epoch), ())]
    assert decode_records(buf) == []
    (r,) = decode_records(buf, include_control=True)
    assert r.is_control and r.control_type == control_type and r.is_transactional
    assert ours(buf, include_control=True) == kb.records


def test_kafka_python_reads_our_batch_after_a_legacy_set() -> None:
    """Magic dispatch per batch: a v2 batch right after legacy messages in one buffer."""
    legacy = LegacyInput(1, [0, 1], [5, 6], [b"a", None], [None, b"b"])
    v2 = BatchInput([b"x", b"y"], [None, b"k"], [10, 9], [[("h", None)], []], base_offset=2)
    buf = kp_build_legacy(legacy) + encode_batch(
        v2.values, keys=v2.keys, timestamps=v2.timestamps, headers=v2.headers, base_offset=2)
    assert kp_records(buf) == ours(buf) == legacy.expected() + v2.expected()
