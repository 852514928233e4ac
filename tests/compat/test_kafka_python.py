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

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.storage.records import (
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
    ours,
)
from tests.compat.record_cases import (
    aio_inputs,
    batch_inputs,
    check_kp_view_of,
    check_ours_reads,
    legacy_inputs,
    sized,
)

SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)

# ---------------------------------------------------------------------------------------------
# ours -> kafka-python, aiokafka
# ---------------------------------------------------------------------------------------------


@SETTINGS
@given(batch_inputs())
def test_our_batches_decode_in_kafka_python_and_aiokafka(inp: BatchInput) -> None:
    buf = inp.encode_ours()
    check_kp_view_of(inp, buf)
    assert aio_records(buf) == inp.expected()


# ---------------------------------------------------------------------------------------------
# kafka-python -> ours
# ---------------------------------------------------------------------------------------------


@SETTINGS
@given(batch_inputs())
def test_kafka_python_batches_decode_in_ours(inp: BatchInput) -> None:
    check_ours_reads(inp, kp_build_v2(inp))


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


@pytest.mark.parametrize(
    "timestamps",
    [
        [INT64_MIN, INT64_MAX],
        [INT64_MAX, INT64_MIN],
        [-1, INT64_MAX, INT64_MIN, 0],
        [INT64_MIN, 0, INT64_MAX],
    ],
)
def test_timestamp_deltas_beyond_int64_wrap_as_in_java(timestamps: list[int]) -> None:
    """A delta that overflows an int64 wraps (Java long arithmetic) and round-trips in ours.

    kafka-python computes the same delta with unbounded Python ints, so its bytes differ and
    its decoder gives the unwrapped sum; the two agree modulo 2**64.
    """
    inp = BatchInput([b"v"] * len(timestamps), [None] * len(timestamps), timestamps, [[] for _ in timestamps])
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

_big = st.sampled_from([2**20, 2**20 - 1, 2**16, 100_000]).flatmap(sized)


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


@SETTINGS
@given(legacy_inputs())
def test_kafka_python_legacy_messages_decode_in_ours(inp: LegacyInput) -> None:
    buf = kp_build_legacy(inp)
    expected = inp.expected()
    assert kp_records(buf) == expected  # the oracle agrees with the inputs
    recs = decode_records(buf)
    assert [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, tuple(r.headers)) for r in recs] == expected
    assert {
        (r.magic, r.leader_epoch, r.producer_id, r.producer_epoch, r.sequence, r.is_transactional, r.is_control)
        for r in recs
    } == {(inp.magic, -1, -1, -1, -1, False, False)}
    assert list(iter_records(buf)) == recs
    assert arrow_rows(decode_columns(buf)) == expected

    heads = batch_headers(buf, verify_crc=True)
    kps = kp_batches(buf)
    assert len(heads) == len(kps) == len(inp.offsets)
    for h, kb, t in zip(heads, kps, inp.timestamps):
        assert (h.magic, h.base_offset, h.last_offset, h.attributes, h.records_count) == (
            kb.magic,
            kb.base_offset,
            kb.base_offset,
            kb.attributes,
            1,
        )
        assert h.base_timestamp == h.max_timestamp == (t if inp.magic == 1 else -1)
        assert h.timestamp_type == (-1 if inp.magic == 0 else (1 if inp.log_append else 0))
        assert h.crc == struct.unpack_from(">I", buf, h.position + 12)[0]
    assert heads[-1].position + heads[-1].size == len(buf)


# ---------------------------------------------------------------------------------------------
# Mixed buffers, control batches
# ---------------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(
        st.one_of(
            batch_inputs(max_records=5).map(lambda i: ("ours", i)),
            batch_inputs(max_records=5).map(lambda i: ("kp", i)),
            legacy_inputs().map(lambda i: ("legacy", i)),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_mixed_buffers_agree_with_kafka_python(parts: list) -> None:
    chunks, expected = [], []
    for kind, inp in parts:
        chunks.append(
            inp.encode_ours() if kind == "ours" else kp_build_v2(inp) if kind == "kp" else kp_build_legacy(inp)
        )
        expected.extend(inp.expected())
    buf = b"".join(chunks)
    assert kp_records(buf) == expected
    assert ours(buf) == expected
    assert [
        (r.offset, r.timestamp, r.timestamp_type, r.key, r.value, tuple(r.headers)) for r in iter_records(buf)
    ] == expected
    assert arrow_rows(decode_columns(buf)) == expected
    assert [h.size for h in batch_headers(buf, verify_crc=True)] == [s for c in chunks for s in _legacy_or_v2_sizes(c)]


def _legacy_or_v2_sizes(chunk: bytes) -> list[int]:
    sizes, pos = [], 0
    while pos < len(chunk):
        (n,) = struct.unpack_from(">i", chunk, pos + 8)
        sizes.append(n + 12)
        pos += n + 12
    return sizes


@SETTINGS
@given(
    control_type=st.sampled_from([0, 1]),
    base_offset=st.integers(0, INT64_MAX - 1),
    timestamp=st.integers(INT64_MIN, INT64_MAX),
    producer_id=st.integers(0, INT64_MAX),
    producer_epoch=st.integers(0, 32767),
    coordinator_epoch=st.integers(INT32_MIN, INT32_MAX),
    ple=st.integers(INT32_MIN, INT32_MAX),
)
def test_control_batches_decode_in_kafka_python(
    control_type: int,
    base_offset: int,
    timestamp: int,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    ple: int,
) -> None:
    buf = encode_control_batch(
        control_type,
        base_offset=base_offset,
        timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        coordinator_epoch=coordinator_epoch,
        partition_leader_epoch=ple,
    )
    (kb,) = kp_batches(buf)
    assert kb.crc_ok and kb.is_control and kb.attributes == 0x30
    assert kb.control == ((0, control_type),)
    assert (kb.base_offset, kb.leader_epoch, kb.producer_id, kb.producer_epoch, kb.base_sequence) == (
        base_offset,
        ple,
        producer_id,
        producer_epoch,
        -1,
    )
    # ControlRecord value: version int16 0, coordinator epoch int32 (EndTransactionMarker).
    assert kb.records == [
        (base_offset, timestamp, 0, struct.pack(">hh", 0, control_type), struct.pack(">hi", 0, coordinator_epoch), ())
    ]
    assert decode_records(buf) == []
    (r,) = decode_records(buf, include_control=True)
    assert r.is_control and r.control_type == control_type and r.is_transactional
    assert ours(buf, include_control=True) == kb.records


def test_kafka_python_reads_our_batch_after_a_legacy_set() -> None:
    """Magic dispatch per batch: a v2 batch right after legacy messages in one buffer."""
    legacy = LegacyInput(1, [0, 1], [5, 6], [b"a", None], [None, b"b"])
    v2 = BatchInput([b"x", b"y"], [None, b"k"], [10, 9], [[("h", None)], []], base_offset=2)
    buf = kp_build_legacy(legacy) + encode_batch(
        v2.values, keys=v2.keys, timestamps=v2.timestamps, headers=v2.headers, base_offset=2
    )
    assert kp_records(buf) == ours(buf) == legacy.expected() + v2.expected()


# ---------------------------------------------------------------------------------------------
# Legacy compressed wrappers: Kafka's base offset is the first inner record's
# ---------------------------------------------------------------------------------------------


def _broker_wrapper(magic: int, codec: int, first: int, n: int) -> bytes:
    """A compressed wrapper as a broker stores it, built by kafka-python: v0 inner offsets are
    absolute; v1 inner offsets are relative (0..n-1) and the wrapper carries the last absolute
    offset. kafka-python's builder leaves the wrapper offset 0 (the broker assigns it)."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i in range(n):
        off = first + i if magic == 0 else i
        assert b.append(off, timestamp=1_600_000_000_000 + i, key=b"k%d" % i, value=b"v%d" % i) is not None
    buf = bytearray(b.build())
    struct.pack_into(">q", buf, 0, first + n - 1)  # the offset field is outside the CRC
    return bytes(buf)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [1, 2, 3])
def test_legacy_wrapper_base_offset_is_the_first_inner_offset(magic: int, codec: int, tmp_path) -> None:
    pytest.importorskip("seglog._native.compression")
    from kafka.record.legacy_records import LegacyRecordBatch

    from seglog._native.segment import Segment

    buf = _broker_wrapper(magic, codec, 100, 5) + _broker_wrapper(magic, codec, 105, 3)
    # kafka-python's iteration gives every inner record its absolute offset.
    pos, firsts = 0, []
    while pos < len(buf):
        (size,) = struct.unpack_from(">i", buf, pos + 8)
        wrapper = LegacyRecordBatch(buf[pos : pos + 12 + size], magic)
        firsts.append(next(iter(wrapper)).offset)
        pos += 12 + size
    assert firsts == [100, 105]
    heads = batch_headers(buf, verify_crc=True)
    assert [(h.base_offset, h.last_offset, h.records_count) for h in heads] == [(100, 104, 5), (105, 107, 3)]
    assert [r.offset for r in decode_records(buf)] == list(range(100, 108))
    # A segment's scans report the same headers.
    (tmp_path / "00000000000000000100.log").write_bytes(buf)
    seg = Segment(str(tmp_path), 100)
    try:
        assert seg.recover().truncated_bytes == 0
        assert [(b.base_offset, b.last_offset, b.records_count) for b in seg.batches()] == [
            (100, 104, 5),
            (105, 107, 3),
        ]
        found = seg.translate_offset(106)
        assert found is not None and (found.base_offset, found.last_offset) == (105, 107)
    finally:
        seg.close()


def test_broker_written_v0_wrappers_report_their_first_inner_offset(fixtures_dir) -> None:
    """The magic-0 gzip partition a pre-0.10 broker wrote: each wrapper's base offset is the
    offset of its first inner message as kafka-python iterates them."""
    from kafka.record.legacy_records import LegacyRecordBatch

    buf = (fixtures_dir / "kafka-real" / "kafkalite" / "hamlet-gzip-0" / "00000000000000000000.log").read_bytes()
    heads = batch_headers(buf, verify_crc=True)
    expected = []
    for h in heads:
        inner = [r.offset for r in LegacyRecordBatch(buf[h.position : h.position + h.size], h.magic)]
        expected.append((inner[0], inner[-1], len(inner)))
    assert [(h.base_offset, h.last_offset, h.records_count) for h in heads] == expected
    assert expected[0][0] == 0 and expected[1][0] == expected[0][1] + 1
