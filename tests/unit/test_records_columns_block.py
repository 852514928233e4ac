"""decode_columns carves the fixed-width columns of the records the input's batch headers
announce from one allocation. A column that outgrows its part (records the headers did not
announce: legacy messages, a compressed batch counting more records than its compressed size
could hold uncompressed) moves to memory of its own, and every column outlives the others.
Small keys and values are copied as a fixed 16 bytes where the records area has them."""

from __future__ import annotations

import gc
import struct
import zlib

import pytest

from seglog.storage.records import decode_columns, decode_records, encode_batch


def legacy_v1(offset: int, key: bytes, value: bytes) -> bytes:
    """A magic 1 message (CRC-32, magic, attributes, timestamp, key, value)."""
    rest = bytes([1, 0]) + struct.pack(">q", 1000 + offset) + struct.pack(">i", len(key)) + key
    rest += struct.pack(">i", len(value)) + value
    return struct.pack(">qiI", offset, len(rest) + 4, zlib.crc32(rest)) + rest


def _check(buf: bytes, views: bool, headers: bool) -> None:
    want = decode_records(buf)
    cols = decode_columns(buf, views=views, headers=headers)
    batch = cols.to_arrow()
    assert batch.column("offset").to_pylist() == [r.offset for r in want]
    assert batch.column("timestamp").to_pylist() == [r.timestamp for r in want]
    assert batch.column("key").to_pylist() == [r.key for r in want]
    assert batch.column("value").to_pylist() == [r.value for r in want]


@pytest.mark.parametrize("views", [False, True])
@pytest.mark.parametrize("headers", [False, True])
def test_records_the_headers_did_not_announce(views: bool, headers: bool) -> None:
    # v2 batches announce 20 records; 300 legacy messages after them are not counted.
    v2 = encode_batch([b"v%d" % i for i in range(20)], keys=[b"k%d" % i for i in range(20)], timestamps=5)
    legacy = b"".join(legacy_v1(20 + i, b"key-%d" % i, b"value %d" % i * 3) for i in range(300))
    _check(v2 + legacy, views, headers)
    _check(legacy + v2, views, headers)


@pytest.mark.parametrize("views", [False, True])
def test_a_compressed_batch_of_more_records_than_its_size_holds(views: bool) -> None:
    # 20,000 records compress to fewer bytes than 20,000 minimal records (7 bytes each) take
    # uncompressed: the header's count is capped for the allocation, and the columns grow past
    # their parts.
    buf = encode_batch([b""] * 20_000, keys=[b"k"] * 20_000, timestamps=7, compression="gzip")
    assert len(buf) < 20_000 * 7 // 2
    _check(buf, views, headers=False)


def test_every_column_outlives_the_others() -> None:
    buf = b"".join(
        encode_batch([b"%d" % i] * 50, keys=[b"x"] * 50, timestamps=9, base_offset=100 * i) for i in range(4)
    )
    cols = decode_columns(buf, headers=False)
    offsets = memoryview(cols.offsets).cast("B").cast("q")
    epochs = memoryview(cols.leader_epochs).cast("B").cast("i")
    assert cols.value_offsets is not None
    value_offsets = memoryview(cols.value_offsets).cast("B").cast("i")
    del cols
    gc.collect()
    # Other allocations now reuse freed memory; the views must still see the columns.
    junk = [bytearray(4096) for _ in range(1000)]
    assert list(offsets) == [100 * i + j for i in range(4) for j in range(50)]
    assert list(epochs) == [-1] * 200
    assert list(value_offsets) == [0] + [j + 1 for j in range(200)]
    del junk


@pytest.mark.parametrize("compression", [None, "lz4"])
def test_small_keys_and_values_of_every_size_up_to_the_end_of_the_area(compression: str | None) -> None:
    # Sizes 0..17 around the fixed 16-byte copy, and batches that end with each of them (the
    # last record's key and value have fewer than 16 bytes after them).
    sizes = list(range(18))
    bufs = []
    for last in sizes:
        keys = [bytes([65 + k % 26]) * k for k in sizes] + [b"z" * last]
        vals = [bytes([97 + v % 26]) * (17 - v) for v in sizes] + [b"y" * last]
        bufs.append(encode_batch(vals, keys=keys, timestamps=3, base_offset=100 * last, compression=compression))
    buf = b"".join(bufs)
    _check(buf, views=False, headers=False)
    cols = decode_columns(buf, headers=False)
    assert cols.key_data is not None and cols.value_data is not None
    want = decode_records(buf)
    assert bytes(cols.key_data) == b"".join(r.key or b"" for r in want)
    assert bytes(cols.value_data) == b"".join(r.value or b"" for r in want)
