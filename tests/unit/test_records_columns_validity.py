"""decode_columns' validity bitmaps and null counts against decode_records, for nulls at every
position (first record, byte boundaries, after many valid records, in later batches), in the
copied and the views layouts, and in header values."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from seglog.storage.records import decode_columns, decode_records, encode_batch


def _batches(rng: random.Random, null_at: set[int], n: int, per_batch: int, headers: bool) -> bytes:
    out = []
    for base in range(0, n, per_batch):
        idx = range(base, min(n, base + per_batch))
        vals = [None if i in null_at else rng.randbytes(rng.choice((0, 3, 20, 100))) for i in idx]
        keys = [None if (i * 7) in null_at else b"k%d" % i for i in idx]
        hdrs = [[("h", None if i in null_at else b"x"), ("g", b"y")] if headers else [] for i in idx]
        out.append(encode_batch(vals, keys=keys, timestamps=1_700_000_000_000, headers=hdrs, base_offset=base))
    return b"".join(out)


CASES = [set(), {0}, {7}, {8}, {9}, {63, 64}, {130}, {199}, {5, 150, 151}, set(range(0, 200, 3))]


@pytest.mark.parametrize("null_at", CASES, ids=lambda c: ",".join(map(str, sorted(c)[:4])) or "none")
@pytest.mark.parametrize("views", [False, True])
@pytest.mark.parametrize("per_batch", [200, 37])
@pytest.mark.parametrize("with_headers", [True, False], ids=["headers", "no-headers"])
def test_validity_matches_records(null_at: set[int], views: bool, per_batch: int, with_headers: bool) -> None:
    # Without the header column, records with a key and a value take the builder's short path
    # until a column's first null.
    buf = _batches(random.Random(len(null_at)), null_at, 200, per_batch, headers=True)
    want = decode_records(buf)
    cols = decode_columns(buf, views=views, headers=with_headers)
    batch = cols.to_arrow()
    assert batch.column("value").to_pylist() == [r.value for r in want]
    assert batch.column("key").to_pylist() == [r.key for r in want]
    assert cols.value_null_count == sum(r.value is None for r in want)
    assert cols.key_null_count == sum(r.key is None for r in want)
    # Arrow's own check of the layout (bitmap length, offsets, null count).
    batch.validate(full=True)
    assert (cols.value_validity is None) == (cols.value_null_count == 0)
    assert batch.column("offset").to_pylist() == [r.offset for r in want]
    assert batch.column("timestamp").to_pylist() == [r.timestamp for r in want]
    assert isinstance(batch, pa.RecordBatch)
    if with_headers:
        hv = [[v for _, v in r.headers] for r in want]
        assert [[e["value"] for e in row] for row in batch.column("headers").to_pylist()] == hv


#: Which records have no key (True: null), as producers without keys send them, and mixes.
KEY_PATTERNS = {
    "keyless": lambda i: True,
    "keyless-then-keyed": lambda i: i < 45,
    "keyed-then-keyless": lambda i: i >= 45,
    "keyless-but-one": lambda i: i != 100,
    "keyless-but-the-first": lambda i: i != 0,
}


@pytest.mark.parametrize("pattern", KEY_PATTERNS)
@pytest.mark.parametrize("views", [False, True])
@pytest.mark.parametrize("value_null_at", [None, 0, 60], ids=lambda v: f"value-null-{v}")
def test_keyless_records(pattern: str, views: bool, value_null_at: int | None) -> None:
    # Records without keys take the builder's keyless short path while every key so far was null
    # and no value was; any other record leaves it for good.
    rng = random.Random(3)
    null_key = KEY_PATTERNS[pattern]
    out = []
    for base in range(0, 200, 37):
        idx = range(base, min(200, base + 37))
        vals = [None if i == value_null_at else rng.randbytes(rng.choice((0, 5, 12, 13, 100))) for i in idx]
        keys = [None if null_key(i) else b"key-%d" % i for i in idx]
        out.append(encode_batch(vals, keys=keys, timestamps=1_700_000_000_000 + base, base_offset=base))
    buf = b"".join(out)
    want = decode_records(buf)
    cols = decode_columns(buf, views=views, headers=False)
    batch = cols.to_arrow()
    batch.validate(full=True)
    assert batch.column("key").to_pylist() == [r.key for r in want]
    assert batch.column("value").to_pylist() == [r.value for r in want]
    assert batch.column("offset").to_pylist() == list(range(200))
    assert batch.column("timestamp").to_pylist() == [r.timestamp for r in want]
    assert cols.key_null_count == sum(r.key is None for r in want)
    assert cols.value_null_count == sum(r.value is None for r in want)
