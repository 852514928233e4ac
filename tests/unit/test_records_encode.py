"""encode_batch: every accepted column form gives the same bytes; bad input is refused clearly."""

from __future__ import annotations

import array
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.storage.records import batch_headers, decode_columns, decode_records, encode_batch
from tests.conftest import T0 as T

VALUES = [b"alpha", None, b"", b"\x00\x01\x02", b"x" * 300]
KEYS = [b"k0", b"k1", None, b"", b"k4"]


def reference() -> bytes:
    return encode_batch(VALUES, keys=KEYS, timestamps=T)


@pytest.mark.parametrize(
    "values",
    [
        tuple(VALUES),
        [None if v is None else bytearray(v) for v in VALUES],
        [None if v is None else memoryview(v) for v in VALUES],
        np.array(VALUES, dtype=object),
        pa.array(VALUES, type=pa.binary()),
        pa.array(VALUES, type=pa.large_binary()),
        pa.chunked_array([pa.array(VALUES[:2], type=pa.binary()), pa.array(VALUES[2:], type=pa.binary())]),
        pa.array([b"pad"] + VALUES, type=pa.binary()).slice(1),
        iter(VALUES),
    ],
    ids=[
        "tuple",
        "bytearray",
        "memoryview",
        "numpy-object",
        "arrow",
        "arrow-large",
        "arrow-chunked",
        "arrow-sliced",
        "iterator",
    ],
)
def test_value_column_forms_agree(values):
    assert encode_batch(values, keys=KEYS, timestamps=T) == reference()


def test_arrow_string_keys():
    keys = ["k0", "k1", None, "", "k4"]
    assert encode_batch(VALUES, keys=pa.array(keys, type=pa.string()), timestamps=T) == reference()


def test_numpy_fixed_width_columns():
    rows = np.arange(4 * 8, dtype=np.uint8).reshape(4, 8)
    got = decode_records(encode_batch(rows, timestamps=T))
    assert [r.value for r in got] == [bytes(row) for row in rows]
    s = np.array([b"ab", b"abc\x00", b""], dtype="S4")  # NumPy strips trailing NULs from "S" items
    assert [r.value for r in decode_records(encode_batch(s, timestamps=T))] == [b"ab", b"abc", b""]
    v = np.zeros(2, dtype="V3")
    assert [r.value for r in decode_records(encode_batch(v, timestamps=T))] == [b"\0\0\0", b"\0\0\0"]


@pytest.mark.parametrize(
    "timestamps",
    [
        [T] * 5,
        np.full(5, T, dtype=np.int64),
        array.array("q", [T] * 5),
        pa.array([T] * 5, type=pa.int64()),
        pa.array([T] * 5, type=pa.timestamp("ms")),
        np.full(5, T, dtype="datetime64[ms]"),
    ],
    ids=["list", "numpy", "array", "arrow-int64", "arrow-ts", "numpy-datetime"],
)
def test_timestamp_forms_agree(timestamps):
    assert encode_batch(VALUES, keys=KEYS, timestamps=timestamps) == reference()


def test_timestamps_per_record_and_max_timestamp():
    ts = [T + 5, T, T + 9, -1, T + 2]
    buf = encode_batch(VALUES, timestamps=ts)
    assert [r.timestamp for r in decode_records(buf)] == ts
    (h,) = batch_headers(buf)
    assert h.base_timestamp == T + 5 and h.max_timestamp == T + 9


def test_extreme_timestamps_round_trip():
    ts = [-(2**63), 2**63 - 1, 0, -1, 2**62]
    buf = encode_batch([b"v"] * 5, timestamps=ts, allow_negative_timestamps=True)
    assert [r.timestamp for r in decode_records(buf)] == ts


@pytest.mark.parametrize("ts", [-2, -7, -(2**63)])
def test_negative_timestamps_are_refused_unless_allowed(ts):
    """Kafka's MemoryRecordsBuilder refuses a timestamp below -1; so does encode_batch."""
    for form in ([T, T, ts], (T, T, ts), np.array([T, T, ts], dtype=np.int64)):
        with pytest.raises(ValueError, match=rf"invalid timestamp {ts} of record 2: a timestamp must be >= 0"):
            encode_batch([b"a", b"b", b"c"], timestamps=form)
    with pytest.raises(ValueError, match=rf"invalid timestamp {ts}: a timestamp must be >= 0"):
        encode_batch([b"a"], timestamps=ts)
    assert decode_records(encode_batch([b"a"], timestamps=ts, allow_negative_timestamps=True))[0].timestamp == ts
    assert decode_records(encode_batch([b"a"], timestamps=-1))[0].timestamp == -1


def test_default_timestamp_is_now():
    import time

    before = time.time_ns() // 1_000_000
    (rec,) = decode_records(encode_batch([b"v"]))
    assert before <= rec.timestamp <= time.time_ns() // 1_000_000


def test_headers_round_trip():
    headers = [[("é-key", b"\xff"), ("n", None)], None, [], [(b"raw", b"")], [("a", b"1"), ("a", b"2")]]
    recs = decode_records(encode_batch(VALUES, headers=headers, timestamps=T))
    assert [r.headers for r in recs] == [
        [("é-key", b"\xff"), ("n", None)],
        [],
        [],
        [("raw", b"")],
        [("a", b"1"), ("a", b"2")],
    ]


def test_producer_fields():
    buf = encode_batch(
        [b"a", b"b"],
        timestamps=T,
        producer_id=42,
        producer_epoch=7,
        base_sequence=2**31 - 1,
        is_transactional=True,
        partition_leader_epoch=9,
        base_offset=1000,
    )
    (h,) = batch_headers(buf)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.partition_leader_epoch) == (42, 7, 2**31 - 1, 9)
    assert h.is_transactional and not h.is_control
    assert h.last_sequence == 0  # sequences wrap past INT32_MAX to 0
    assert [r.sequence for r in decode_records(buf)] == [2**31 - 1, 0]
    assert [r.offset for r in decode_records(buf)] == [1000, 1001]


def test_columns_skip_keys_and_headers():
    buf = encode_batch(VALUES, keys=KEYS, headers=[[("h", b"v")]] * 5, timestamps=T)
    cols = decode_columns(buf, keys=False, headers=False)
    assert cols.key_offsets is None and cols.header_offsets is None
    assert cols.to_arrow().column_names == ["offset", "timestamp", "timestampType", "leaderEpoch", "value"]
    assert cols.to_arrow().column("value").to_pylist() == VALUES
    full = decode_columns(buf)
    assert np.frombuffer(memoryview(full.offsets), dtype=np.int64).tolist() == [0, 1, 2, 3, 4]
    assert full.value_null_count == 1 and full.key_null_count == 1


def test_offset_range_filter():
    buf = b"".join(encode_batch([b"v"] * 4, base_offset=b, timestamps=T) for b in (0, 4, 8))
    assert [r.offset for r in decode_records(buf, min_offset=3, max_offset=9)] == [3, 4, 5, 6, 7, 8]
    cols = decode_columns(buf, min_offset=3, max_offset=9)
    assert np.frombuffer(memoryview(cols.offsets), dtype=np.int64).tolist() == [3, 4, 5, 6, 7, 8]


@pytest.mark.parametrize(
    "values,kwargs,exc,match",
    [
        (["text"], {}, TypeError, r"values\[0\] is a str"),
        ([1], {}, TypeError, r"values\[0\] is a int"),
        (b"abc", {}, TypeError, "must be a column"),
        ([], {}, ValueError, "at least one record"),
        ([b"a"], {"keys": [b"a", b"b"]}, ValueError, "keys has 2 items, values has 1"),
        ([b"a"], {"timestamps": [1, 2]}, ValueError, "timestamps has 2 items"),
        ([b"a"], {"headers": [[("k", "str")]]}, TypeError, "header values are bytes"),
        ([b"a"], {"headers": [[("k",)]]}, TypeError, "pair"),
        ([b"a"], {"compression": "brotli"}, ValueError, "unknown compression 'brotli'"),
        ([b"a"], {"compression": 9}, ValueError, "unknown compression codec id 9"),
        (np.zeros(3, dtype=np.float64), {}, TypeError, "NumPy array must have dtype"),
    ],
)
def test_bad_input_is_refused(values, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        encode_batch(values, **kwargs)


def test_iter_records_is_lazy_and_equal():
    from seglog.storage.records import iter_records

    buf = b"".join(encode_batch([b"v%d" % i for i in range(3)], base_offset=3 * b, timestamps=T) for b in range(4))
    it = iter_records(buf)
    assert next(it).offset == 0
    assert [r.offset for r in it] == list(range(1, 12))
    assert list(iter_records(buf)) == decode_records(buf)


# Lengths and counts around every varint width change (1/2/3 bytes zigzag), and timestamps
# around the one/two/three-digit boundaries of CPython's ints, both signs.
_LENGTHS = st.sampled_from([0, 1, 7, 8, 63, 64, 65, 100, 8191, 8192, 8193])
_STAMPS = st.one_of(
    st.sampled_from(
        [0, 1, -1, T, -T, 2**30 - 1, 2**30, -(2**30), 2**60 - 1, 2**60, -(2**60), 2**62, 2**63 - 1, -(2**63)]
    ),
    st.integers(-(2**63), 2**63 - 1),
)


@st.composite
def _columns(draw):
    n = draw(st.sampled_from([1, 2, 5, 63, 64, 65, 200]))
    values = [
        None if draw(st.booleans()) and draw(st.booleans()) else bytes([i % 251]) * draw(_LENGTHS) for i in range(n)
    ]
    keys = draw(st.one_of(st.none(), st.just([None if i % 3 == 0 else b"k%d" % i for i in range(n)])))
    ts = draw(st.one_of(st.none(), _STAMPS, st.lists(_STAMPS, min_size=n, max_size=n)))
    return values, keys, T if ts is None else ts


@settings(max_examples=150, deadline=None)
@given(_columns(), st.booleans())
def test_list_fast_path_equals_general_path(cols, as_tuple):
    """Exact lists/tuples of bytes take encode_seq.h's one pass; the same items as bytearray
    take the general encoder. Both must write the same bytes, which must decode back."""
    values, keys, ts = cols
    fast_values = tuple(values) if as_tuple else values
    fast = encode_batch(fast_values, keys=keys, timestamps=ts, allow_negative_timestamps=True)
    general = encode_batch(
        [None if v is None else bytearray(v) for v in values], keys=keys, timestamps=ts, allow_negative_timestamps=True
    )
    assert fast == general
    recs = decode_records(fast)
    assert [r.value for r in recs] == values
    assert [r.key for r in recs] == (keys if keys is not None else [None] * len(values))
    assert [r.timestamp for r in recs] == (ts if isinstance(ts, list) else [ts] * len(values))


@pytest.mark.parametrize("compression", ["none", "gzip", "lz4", "zstd", "snappy"])
def test_list_fast_path_grows_its_buffer_and_compresses_like_the_general_path(compression):
    """encode_seq.h guesses the batch size from the first record (at most 16 MiB) and grows:
    a small first record then large ones, and 20 MiB of equal records, both grow it."""
    cases: list[Sequence[bytes | None]] = [
        [None, *(bytes([i % 256]) * 5000 for i in range(300))],
        [b""] * 10 + [b"x" * 70_000] * 3 + [b"y"],
        [bytes([i]) * (1 << 20) for i in range(20)],
    ]
    for values in cases:
        keys = [b"k%d" % i for i in range(len(values))]
        fast = encode_batch(values, keys=keys, timestamps=T, compression=compression)
        general = encode_batch(
            [None if v is None else bytearray(v) for v in values], keys=keys, timestamps=T, compression=compression
        )
        assert fast == general
        assert [r.value for r in decode_records(fast)] == values


def test_int_timestamps_of_every_width_and_subclass():
    class Stamp(int):
        pass

    ts = [0, 1, -1, T, -T, 2**60, -(2**60) - 5, 2**63 - 1, -(2**63), True, Stamp(T + 1)]
    got = [
        r.timestamp
        for r in decode_records(encode_batch([b"v"] * len(ts), timestamps=ts, allow_negative_timestamps=True))
    ]
    assert got == [int(t) for t in ts]
    with pytest.raises(OverflowError):
        encode_batch([b"v"], timestamps=[2**63])
    with pytest.raises(OverflowError):
        encode_batch([b"v", b"w"], timestamps=[T, -(2**63) - 1])


@pytest.mark.parametrize("compression", ["none", "gzip", "lz4", "zstd", "snappy"])
def test_encode_into_a_kept_buffer_writes_the_same_batch(compression):
    """``into``: the batch is written into the caller's bytearray, resized to it and returned,
    byte for byte what a new ``bytes`` would hold, on every path (the one-pass list encoder as
    it grows, the general encoder, Arrow columns, compression), whatever the buffer held."""
    buf = bytearray(b"stale bytes from an earlier batch" * 1000)
    big = [bytes([i % 256]) * (90 + i % 13) for i in range(20_000)]
    cases: list[tuple[Any, dict[str, Any]]] = [
        (big, {"keys": [b"k%d" % i for i in range(len(big))], "timestamps": T}),
        ([b"a"], {"timestamps": T}),  # shrinks the buffer
        ([None, *(b"x" * 70_000 for _ in range(3))], {"timestamps": [T, T + 1, T - 1, T]}),  # grows it
        ([bytearray(v) for v in big[:500]], {"timestamps": T}),  # the general encoder
        (VALUES, {"keys": KEYS, "headers": [[("h", b"v")], None, [], None, [("a", None)]], "timestamps": T}),
        (pa.array(big[:300], type=pa.binary()), {"timestamps": T}),
        (big[:64], {"producer_id": 9, "producer_epoch": 2, "base_sequence": 40, "timestamps": T}),
    ]
    for values, kwargs in cases:
        want = encode_batch(values, compression=compression, **kwargs)
        got = encode_batch(values, compression=compression, into=buf, **kwargs)
        assert got is buf
        assert bytes(buf) == want
        assert len(decode_records(buf)) == len(values)


def test_encode_into_refuses_a_buffer_it_cannot_write():
    buf = bytearray(100)
    view = memoryview(buf)
    with pytest.raises(BufferError, match="into is exported"):
        encode_batch([b"v"], into=buf)
    view.release()
    with pytest.raises(ValueError, match=r"into is values\[1\]"):
        encode_batch([bytearray(b"a"), buf], into=buf)
    with pytest.raises(ValueError, match=r"into is keys\[0\]"):
        encode_batch([bytearray(b"a")], keys=[buf], into=buf)
    with pytest.raises(TypeError, match="into"):
        encode_batch([b"v"], into=bytes(4))  # type: ignore[call-overload]
    assert bytes(encode_batch([b"v"], into=buf, timestamps=T)) == encode_batch([b"v"], timestamps=T)
