"""One reader of a record batch header (``_native/include/batch_header.h``) serves the record
codec and the segment: the same damaged header gets the same verdict and the same message from
``batch_headers``, the decoder, ``Segment.batches`` and recovery; only what each caller forgives
differs (recovery cuts a torn tail, a header-only walk leaves codec and record-count checks to
the decoder)."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from seglog._native.crc32c import crc32c
from seglog._native.records import BatchHeader
from seglog._native.segment import BatchInfo, Segment, filename_prefix
from seglog.errors import CorruptRecordError
from seglog.storage.records import batch_headers, decode_records, encode_batch


def reseal(b: bytearray) -> bytes:
    """Recompute the CRC-32C of the v2 batch ``b``."""
    b[17:21] = struct.pack(">I", crc32c(bytes(b[21:])))
    return bytes(b)


def good() -> bytes:
    return encode_batch([b"a", b"bb", b"ccc"], base_offset=0, timestamps=1000)


def legacy_v1(offset: int, body_after_ts: bytes) -> bytes:
    """A magic 1 message: crc, magic, attributes, timestamp, then ``body_after_ts`` (key and
    value lengths and bytes, or fewer bytes than the format needs)."""
    rest = bytes([1, 0]) + struct.pack(">q", 1000) + body_after_ts
    return struct.pack(">qiI", offset, len(rest) + 4, zlib.crc32(rest)) + rest


def damage(kind: str) -> tuple[bytes, str]:
    """A good batch followed by a damaged one, and what the message says about the damage."""
    b = bytearray(good())
    if kind == "torn header":
        return good() + bytes(b[:10]), "torn batch: 10 bytes remain, a batch header needs at least 17"
    if kind == "torn body":
        return good() + bytes(b[:40]), f"torn batch: length field says {len(b)} bytes, only 40 remain"
    if kind == "length":
        b[8:12] = struct.pack(">i", 3)
        return good() + bytes(b), "batch length 3 is below the minimum 14"
    if kind == "magic":
        b[16] = 7
        return good() + bytes(b), "unknown magic byte 7 (known: 0, 1, 2)"
    if kind == "v2 length":
        b[8:12] = struct.pack(">i", 20)
        return good() + bytes(b), "v2 batch length 20 is below the minimum 49"
    if kind == "crc":
        b[-1] ^= 1
        crc = struct.unpack(">I", b[17:21])[0]
        actual = crc32c(bytes(b[21:]))
        return good() + bytes(b), f"CRC mismatch in the batch at offset 0: stored {crc:08x}, computed {actual:08x}"
    if kind == "count":
        b[57:61] = struct.pack(">i", -2)
        return good() + reseal(b), "negative record count -2 in the batch at offset 0"
    if kind == "delta":
        b[23:27] = struct.pack(">i", -5)
        return good() + reseal(b), "negative lastOffsetDelta -5 in the batch at offset 0"
    if kind == "v1 length":
        return good() + legacy_v1(3, b"\xff\xff\xff\xff"), "legacy message of 30 bytes is too short for magic 1"
    raise AssertionError(kind)


KINDS = ["torn header", "torn body", "length", "magic", "v2 length", "crc", "count", "delta", "v1 length"]


def segment_over(tmp_path: Path, data: bytes) -> Segment:
    (tmp_path / f"{filename_prefix(0)}.log").write_bytes(data)
    return Segment(tmp_path, 0, index_interval_bytes=4096, max_index_size=1024)


@pytest.mark.parametrize("kind", KINDS)
def test_codec_and_segment_say_the_same(tmp_path: Path, kind: str) -> None:
    data, says = damage(kind)
    at = len(good())
    readers: list[Callable[[], object]] = [
        lambda: batch_headers(data, verify_crc=True),
        lambda: decode_records(data, verify_crc=True),
    ]
    for read in readers:
        with pytest.raises(CorruptRecordError) as info:
            read()
        assert str(info.value).startswith(f"{says} (at byte {at})")
        assert info.value.position == at
    seg = segment_over(tmp_path, data)
    try:
        if kind.startswith("torn"):
            assert [b.position for b in seg.transaction_batches()] == []  # a torn tail ends the walk
        with pytest.raises(CorruptRecordError) as info:
            seg.batches(verify_crc=True)
        assert f": {says}" in str(info.value) and info.value.position == at
        res = seg.recover()
        assert res.reason == f"at position {at}: {says}"
        assert res.valid_bytes == at and res.batches == 1 and seg.next_offset == 3
    finally:
        seg.close()


def test_a_torn_tail_is_forgiven_only_where_asked(tmp_path: Path) -> None:
    data, _ = damage("torn body")
    assert [h.position for h in batch_headers(data, allow_truncated=True)] == [0]
    assert [r.value for r in decode_records(data, allow_truncated=True)] == [b"a", b"bb", b"ccc"]


@pytest.mark.parametrize("field", ["codec", "count"])
def test_record_level_statuses_are_the_decoders(tmp_path: Path, field: str) -> None:
    """A codec above 4 or a recordsCount the records cannot hold (CRC right) is refused by the
    codec; a segment's header walk leaves it to the decoder, as Kafka's recovery does."""
    b = bytearray(good())
    if field == "codec":
        b[22] |= 0x07
        says = "invalid compression codec 7 in the batch at offset 0"
    else:
        b[57:61] = struct.pack(">i", 1000)
        says = "record count 1000 cannot fit in"
    data = reseal(b)
    with pytest.raises(CorruptRecordError, match=says):
        batch_headers(data, verify_crc=True)
    seg = segment_over(tmp_path, data)
    try:
        assert [i.position for i in seg.batches(verify_crc=True)] == [0]
        res = seg.recover()
        assert res.reason is None and res.valid_bytes == len(data)
    finally:
        seg.close()


def test_a_v1_message_too_short_for_its_fields_is_cut_at_recovery(tmp_path: Path) -> None:
    """messageSize 18 holds a magic 1 message's CRC, magic, attributes, timestamp and key length
    but no value length (Kafka's LegacyRecord.RECORD_OVERHEAD_V1 is 22): the header reader
    refuses it, and recovery keeps what lies before it."""
    ok = legacy_v1(0, b"\xff\xff\xff\xff\xff\xff\xff\xff")
    short = legacy_v1(1, b"\xff\xff\xff\xff")
    seg = segment_over(tmp_path, ok + short)
    try:
        res = seg.recover()
        assert res.reason == f"at position {len(ok)}: legacy message of 30 bytes is too short for magic 1"
        assert res.valid_bytes == len(ok) and seg.next_offset == 1
    finally:
        seg.close()


FIELDS = (
    "position",
    "size",
    "magic",
    "base_offset",
    "last_offset",
    "partition_leader_epoch",
    "crc",
    "attributes",
    "base_timestamp",
    "max_timestamp",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "records_count",
    "next_offset",
    "compression",
    "timestamp_type",
    "is_transactional",
    "is_control",
    "last_sequence",
)


def test_segment_walks_and_batch_headers_report_the_same_header(tmp_path: Path) -> None:
    """A segment's header walks return the codec's BatchHeader (BatchInfo names the same class),
    with every field as ``batch_headers`` reads it, legacy entries included."""
    txn = encode_batch(
        [b"t"], base_offset=4, timestamps=2000, producer_id=7, producer_epoch=1, base_sequence=3, is_transactional=True
    )
    data = good() + legacy_v1(3, b"\xff\xff\xff\xff\x00\x00\x00\x01v") + txn
    seg = segment_over(tmp_path, data)
    try:
        assert BatchInfo is BatchHeader
        want = [tuple(getattr(h, f) for f in FIELDS) for h in batch_headers(data)]
        for walk in (
            seg.batches(),
            seg.transaction_batches(),
            [seg.translate_offset(4)],
            [seg.find_offset_by_timestamp(2000)],
        ):
            headers = [h for h in walk if type(h) is BatchHeader]
            assert len(headers) == len(walk)
            assert [tuple(getattr(h, f) for f in FIELDS) for h in headers] == [
                w for w in want if w[0] in {h.position for h in headers}
            ]
        assert len(seg.batches()) == 3 and seg.transaction_batches()[0].position == len(data) - len(txn)
    finally:
        seg.close()


def test_a_damaged_compressed_legacy_wrapper_is_reported_where_it_lies(tmp_path: Path) -> None:
    """Reading a compressed legacy wrapper's base offset decompresses it; when that fails, the
    segment names the wrapper's position in the file, as ``batch_headers`` does for a buffer."""
    value = b"not gzip data"
    rest = bytes([1, 1]) + struct.pack(">qii", 1000, -1, len(value)) + value
    data = good() + struct.pack(">qiI", 3, len(rest) + 4, zlib.crc32(rest)) + rest
    with pytest.raises(CorruptRecordError) as codec:
        batch_headers(data)
    seg = segment_over(tmp_path, data)
    try:
        with pytest.raises(CorruptRecordError) as walk:
            seg.batches()
        assert walk.value.position == codec.value.position == len(good())
        assert str(walk.value) == str(codec.value)
    finally:
        seg.close()
