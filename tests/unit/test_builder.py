"""The record-at-a-time batch builder (and the producer batch built on it) against encode_batch and
kafka-python."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog._native.accumulator import ProducerBatch
from seglog._native.builder import BatchBuilder
from seglog._native.partition import group_by_partition
from seglog.errors import RecordTooLargeError
from seglog.storage.records import batch_headers, decode_records, encode_batch

_bytes = st.one_of(st.none(), st.binary(max_size=300))
_header = st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20)))
_record = st.tuples(st.integers(0, 2**40), _bytes, _bytes, st.lists(_header, max_size=3))


@settings(max_examples=150, deadline=None)
@given(st.lists(_record, min_size=1, max_size=40), st.integers(0, 2**40), st.integers(-1, 99))
def test_builder_bytes_equal_encode_batch(records, base_offset, epoch) -> None:
    b = ProducerBatch(1 << 30)
    for ts, k, v, h in records:
        assert b.try_append(ts, k, v, h) is not None
    built = bytes(
        b.build(base_offset=base_offset, partition_leader_epoch=epoch, producer_id=5, producer_epoch=1, base_sequence=3)
    )
    ref = encode_batch(
        [r[2] for r in records],
        keys=[r[1] for r in records],
        timestamps=[r[0] for r in records],
        headers=[r[3] or None for r in records],
        base_offset=base_offset,
        partition_leader_epoch=epoch,
        producer_id=5,
        producer_epoch=1,
        base_sequence=3,
    )
    assert built == ref


def test_kafka_python_reads_builder_output() -> None:
    from kafka.record.default_records import DefaultRecordBatch

    b = BatchBuilder()
    b.append(1_700_000_000_000, b"k", b"v", [("h", b"1")])
    b.append(1_700_000_000_007, None, b"w")
    data = bytes(b.build(base_offset=42))
    batch = DefaultRecordBatch(data)
    assert batch.validate_crc()
    recs = list(batch)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs] == [
        (42, 1_700_000_000_000, b"k", b"v", [("h", b"1")]),
        (43, 1_700_000_000_007, None, b"w", []),
    ]


def test_limit_and_try_append() -> None:
    b = ProducerBatch(200)
    futs = []
    while (f := b.try_append(0, None, b"x" * 30)) is not None:
        futs.append(f)
    assert 3 <= len(futs) <= 5 and b.size <= 200
    # An empty batch always takes a record, however large.
    big = ProducerBatch(100)
    assert big.try_append(0, None, b"y" * 1000) is not None
    with pytest.raises(RecordTooLargeError, match="500"):
        ProducerBatch(100, max_record=500).try_append(0, None, b"z" * 1000)


def test_futures_and_outcome() -> None:
    b = ProducerBatch(topic="t", partition=3)
    f1 = b.try_append(10, b"k", b"v")
    f2 = b.try_append(20, None, b"vv")
    assert f1 is not None and f2 is not None
    assert not f1.done()
    with pytest.raises(RuntimeError, match="no sender"):
        f1.get()
    b.build()
    b.complete(100)
    md = f2.get()
    assert (md.topic, md.partition, md.offset, md.timestamp) == ("t", 3, 101, 20)
    assert (md.serialized_key_size, md.serialized_value_size) == (-1, 2)
    b2 = ProducerBatch()
    f = b2.try_append(1, None, b"a")
    assert f is not None
    b2.complete(7, log_append_time=555)
    assert f.get().timestamp == 555 and f.get().offset == 7
    b3 = ProducerBatch()
    f = b3.try_append(1, None, b"a")
    assert f is not None
    b3.fail(ValueError("boom"))
    with pytest.raises(ValueError, match="boom"):
        f.get()
    assert isinstance(f.exception(), ValueError)


def test_producer_batch_for_partition_is_the_constructor() -> None:
    fast = ProducerBatch.for_partition("t", 2, 300, 1000, 128)
    slow = ProducerBatch(300, max_record=1000, initial_capacity=128, topic="t", partition=2)
    for b in (fast, slow):
        assert isinstance(b, BatchBuilder)
        assert (b.topic, b.partition, b.limit, b.max_record, len(b), b.size) == ("t", 2, 300, 1000, 0, 61)
        assert (b.base_offset, b.log_append_time, b.base_sequence, b.done, b.error) == (-1, -1, -1, False, None)
        assert b.try_append(7, b"k", b"v" * 200) is not None
        assert b.try_append(8, None, b"w" * 200) is None  # past the limit of 300
    with pytest.raises(RecordTooLargeError, match="1000"):
        ProducerBatch.for_partition("t", 0, 300, 1000).try_append(0, None, b"z" * 2000)
    assert bytes(fast.build(base_offset=3)) == bytes(slow.build(base_offset=3))
    assert repr(fast) == "ProducerBatch(topic='t', partition=2, records=1, size=271, sealed=True)"


def test_sealed_and_exported() -> None:
    b = BatchBuilder()
    b.append(1, None, b"a")
    with pytest.raises(BufferError):
        memoryview(b)  # type: ignore[arg-type]  # the stub declares __buffer__ for Python >= 3.12 only (PEP 688)
    view = b.build()
    assert isinstance(view, memoryview)  # uncompressed: a view of the builder's memory
    with pytest.raises(BufferError, match="sealed"):
        b.append(2, None, b"b")
    with pytest.raises(BufferError):
        b.discard()
    view.release()
    b.discard()
    with pytest.raises(ValueError, match="at least one record"):
        BatchBuilder().build()


def test_explicit_deltas_and_delete_horizon() -> None:
    b = BatchBuilder(base_timestamp=5_000)
    b.append_with_delta(0, 1_000, b"a", b"1")
    b.append_with_delta(4, 1_200, b"b", None)
    with pytest.raises(ValueError, match="does not follow"):
        b.append_with_delta(4, 1_300, b"c", b"3")
    data = bytes(b.build(base_offset=10, last_offset_delta=9, delete_horizon=True))
    (h,) = batch_headers(data)
    assert (h.base_offset, h.last_offset, h.records_count) == (10, 19, 2)
    assert h.attributes & 0x40 and h.base_timestamp == 5_000 and h.max_timestamp == 1_200
    recs = decode_records(data)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in recs] == [(10, 1_000, b"a", b"1"), (14, 1_200, b"b", None)]
    from kafka.record.default_records import DefaultRecordBatch

    kp = list(DefaultRecordBatch(data))
    assert [(r.offset, r.timestamp) for r in kp] == [(10, 1_000), (14, 1_200)]


def test_group_by_partition_is_a_stable_counting_sort() -> None:
    import array
    import random

    rng = random.Random(1)
    parts = array.array("i", [rng.randrange(-1, 6) for _ in range(500)])
    order, groups = group_by_partition(parts, 6, 2)
    flat = []
    for p, a, c in groups:
        idx = list(order[a:c])
        assert idx == sorted(idx)
        assert all((parts[i] if parts[i] >= 0 else 2) == p for i in idx)
        flat.extend(idx)
    assert sorted(flat) == list(range(500))
    with pytest.raises(ValueError):
        group_by_partition(array.array("i", [7]), 6, 0)
