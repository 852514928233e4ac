"""A producer's batches are validated as Kafka's broker validates them (LogValidator, client
origin) before anything is written: whatever is acknowledged can be served."""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence
from typing import TypeVar

import pytest

from seglog import Store
from seglog._native.crc32c import crc32c
from seglog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
)
from seglog.storage.log import Log
from seglog.storage.records import decode_records, encode_batch, encode_control_batch, validate_batches
from seglog.util.clock import ManualClock
from tests.conftest import T0
from tests.faults.record_model import ModelCorrupt
from tests.faults.record_model import decode as model_decode
from tests.logkit import zigzag_bytes as varint

# -- a hand-made encoder, so every field can be wrong ---------------------------------------------


def record(
    delta: int,
    ts_delta: int = 0,
    key: bytes | None = b"k",
    value: bytes | None = b"v",
    headers: Sequence[tuple[bytes, bytes | None]] = (),
) -> bytes:
    body = b"\x00" + varint(ts_delta) + varint(delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(-1) if value is None else varint(len(value)) + value
    body += varint(len(headers))
    for hk, hv in headers:
        body += varint(len(hk)) + hk + (varint(-1) if hv is None else varint(len(hv)) + hv)
    return varint(len(body)) + body


def raw_batch(
    records: bytes,
    *,
    count: int,
    last_delta: int | None = None,
    base_ts: int = T0,
    max_ts: int | None = None,
    attrs: int = 0,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    base_offset: int = 0,
    magic: int = 2,
) -> bytes:
    """A v2 batch around ``records`` (already encoded) with a correct CRC."""
    last_delta = count - 1 if last_delta is None else last_delta
    max_ts = base_ts if max_ts is None else max_ts
    body = struct.pack(">hiqqqhii", attrs, last_delta, base_ts, max_ts, pid, epoch, seq, count) + records
    crc = crc32c(body)
    head = struct.pack(">qiibI", base_offset, len(body) + 9, -1, magic, crc)
    return head + body


def open_log(tmp_path, config=None, name="t-0", clock=None) -> Log:
    return Log.open(str(tmp_path / name), config or {}, clock=clock or ManualClock(T0))


E = TypeVar("E", bound=BaseException)


def refused(log: Log, data: bytes, exc: type[E], match: str | None) -> E:
    end = log.log_end_offset
    size = log.size
    with pytest.raises(exc, match=match) as info:
        log.append(data)
    assert log.log_end_offset == end and log.size == size  # nothing was written
    return info.value


# -- records that cannot be parsed ------------------------------------------------------------------


def test_valid_crc_with_garbage_records_is_refused_and_the_log_stays_readable(tmp_path):
    log = open_log(tmp_path)
    log.append(encode_batch([b"before"], timestamps=T0))
    garbage = raw_batch(b"\x07" + bytes(range(40)), count=3)
    exc = refused(log, garbage, CorruptRecordError, r"record 0 of the batch at offset 0 in the append to t-0")
    assert exc.position == 0
    log.append(encode_batch([b"after"], timestamps=T0))
    assert [r.value for r in decode_records(log.read(0).to_bytes())] == [b"before", b"after"]


@pytest.mark.parametrize(
    "records,count,what",
    [
        (record(0)[:-1], 1, "record length"),  # body runs past the end
        (b"\xff\xff\xff\xff\xff\xff" + record(0), 1, "record length varint"),  # over-long varint
        (record(0) + record(1) + b"\x00" * 7, 3, "record 2"),  # fewer records than count
        (record(0) + record(1) + b"\x00", 2, "bytes left after the 2 records"),
        (record(0) + record(1), 1, "bytes left after the 1 records"),  # more records than count
        (varint(3) + b"\x00\x00\x00" + b"\x00" * 6, 1, "key length"),  # body too short
        (record(0, headers=[(b"h", b"x")])[:-2] + b"\x02", 1, "record"),
    ],
)
def test_malformed_records_are_corrupt(tmp_path, records, count, what):
    log = open_log(tmp_path)
    exc = refused(log, raw_batch(records, count=count, last_delta=count - 1), CorruptRecordError, what)
    assert "in the append to t-0" in str(exc) and exc.position == 0


def test_negative_lengths_inside_a_record_are_corrupt(tmp_path):
    log = open_log(tmp_path)
    body = b"\x00" + varint(0) + varint(0) + varint(-2) + b"\x00" * 4  # key length -2
    refused(log, raw_batch(varint(len(body)) + body, count=1), CorruptRecordError, "bad key length")
    hdr = b"\x00" + varint(0) + varint(0) + varint(-1) + varint(-1) + varint(1) + varint(-1) + b"\x00"
    refused(log, raw_batch(varint(len(hdr)) + hdr, count=1), CorruptRecordError, "header key")


# -- counts and offsets -----------------------------------------------------------------------------


def test_offset_deltas_must_number_records_from_zero(tmp_path):
    log = open_log(tmp_path)
    exc = refused(
        log,
        raw_batch(record(0) + record(5) + record(2), count=3),
        InvalidRecordError,
        r"record 1 has offsetDelta 5; a producer batch numbers its records 0..2 "
        r"\(batch at byte 0, base offset 0, in the append to t-0\)",
    )
    assert exc.code == 87
    refused(log, raw_batch(record(1) + record(2), count=2), InvalidRecordError, "record 0 has offsetDelta 1")


def test_last_offset_delta_and_count_must_agree(tmp_path):
    log = open_log(tmp_path)
    refused(
        log,
        raw_batch(record(0) + record(1), count=2, last_delta=5),
        InvalidRecordError,
        "lastOffsetDelta 5 is inconsistent with recordsCount 2",
    )
    refused(log, raw_batch(b"", count=0, last_delta=0), InvalidRecordError, "invalid recordsCount 0")


# -- batch attributes and producer fields ------------------------------------------------------------


def test_control_batches_are_refused_from_clients_but_not_from_the_coordinator(tmp_path):
    log = open_log(tmp_path)
    marker = encode_control_batch(1, timestamp=T0, producer_id=7, producer_epoch=0)
    refused(log, marker, InvalidRecordError, "clients are not allowed to write control batches")
    assert log.append(marker, origin="coordinator").first_offset == 0
    with pytest.raises(ValueError, match="origin must be one of"):
        log.append(marker, origin="admin")


def test_store_append_refuses_control_batches_from_clients(tmp_path):
    with Store.open(str(tmp_path / "s")) as store:
        store.create_topic("t", 1)
        marker = encode_control_batch(0, timestamp=T0, producer_id=7, producer_epoch=0)
        with pytest.raises(InvalidRecordError, match="control batches"):
            store.append("t", 0, marker)
        assert store.append("t", 0, marker, origin="coordinator").first_offset == 0


@pytest.mark.parametrize(
    "fields,match",
    [
        (dict(pid=5, epoch=0, seq=-1), r"invalid baseSequence -1 in a batch with producerId 5"),
        (dict(pid=5, epoch=-1, seq=0), r"invalid producerEpoch -1 in a batch with producerId 5"),
        (dict(attrs=0x10), r"a transactional batch needs a producerId, got -1"),
    ],
)
def test_producer_fields_must_be_sane(tmp_path, fields, match):
    log = open_log(tmp_path)
    refused(log, raw_batch(record(0), count=1, **fields), InvalidRecordError, match)


def test_log_append_time_set_by_the_producer_is_refused(tmp_path):
    log = open_log(tmp_path)
    data = encode_batch([b"a"], timestamps=T0, log_append_time=T0)
    exc = refused(log, data, InvalidTimestampError, "LogAppendTime")
    assert exc.code == 32


def test_legacy_magic_is_refused(tmp_path):
    log = open_log(tmp_path)
    body = struct.pack(">bbqii", 1, 0, T0, -1, 1) + b"v"
    legacy = struct.pack(">qiI", 0, len(body) + 4, crc32c(body)) + body
    refused(log, legacy, InvalidRecordError, "only RecordBatch v2 can be appended")


# -- timestamps ----------------------------------------------------------------------------------------


def test_every_record_timestamp_is_checked_not_only_the_header(tmp_path):
    clock = ManualClock(T0)
    log = open_log(
        tmp_path, {"message.timestamp.before.max.ms": 1000, "message.timestamp.after.max.ms": 1000}, clock=clock
    )
    # base and max timestamps are in range; the middle record is an hour old.
    data = raw_batch(record(0) + record(1, ts_delta=-3_600_000) + record(2, ts_delta=10), count=3, max_ts=T0 + 10)
    exc = refused(
        log,
        data,
        InvalidTimestampError,
        rf"timestamp {T0 - 3_600_000} of record 1 is out of range: it must lie within "
        rf"\[{T0 - 1000}, {T0 + 1000}\]",
    )
    assert exc.code == 32
    refused(
        log,
        encode_batch([b"a", b"b"], timestamps=[T0, T0 + 1001]),
        InvalidTimestampError,
        "of record 1 is out of range",
    )
    # -1 is "no timestamp" and is not range-checked; the bounds themselves are inclusive.
    log.append(encode_batch([b"a", b"b", b"c"], timestamps=[-1, T0 - 1000, T0 + 1000]))
    assert log.log_end_offset == 3


def test_extreme_timestamps_do_not_overflow_the_bounds(tmp_path):
    log = open_log(tmp_path, {"message.timestamp.before.max.ms": 10, "message.timestamp.after.max.ms": 10})
    for ts in (-(2**63), 2**63 - 1, -2):
        refused(log, raw_batch(record(0), count=1, base_ts=ts), InvalidTimestampError, "out of range")


def test_max_timestamp_must_be_the_largest_record_timestamp(tmp_path):
    log = open_log(tmp_path)
    data = raw_batch(record(0) + record(1, ts_delta=50), count=2, max_ts=T0)
    refused(
        log,
        data,
        InvalidRecordError,
        rf"maxTimestamp {T0} differs from the largest record "
        rf"timestamp {T0 + 50}",
    )


def test_log_append_time_topics_do_not_check_producer_timestamps(tmp_path):
    log = open_log(tmp_path, {"message.timestamp.type": "LogAppendTime", "message.timestamp.before.max.ms": 1})
    info = log.append(raw_batch(record(0, ts_delta=-(10**9)), count=1, max_ts=0))
    assert info.log_append_time == T0


# -- compacted topics, sizes, compression ------------------------------------------------------------


def test_compacted_logs_refuse_keyless_records(tmp_path):
    log = open_log(tmp_path, {"cleanup.policy": "compact"})
    refused(
        log,
        raw_batch(record(0) + record(1, key=None), count=2),
        InvalidRecordError,
        "record 1 has no key; a compacted topic cannot accept a record without a key",
    )
    refused(
        log,
        encode_batch([b"a"], keys=[None], timestamps=T0, compression="lz4"),
        InvalidRecordError,
        "record 0 has no key",
    )


def test_batch_over_max_message_bytes_is_refused_before_its_records_are_read(tmp_path):
    log = open_log(tmp_path, {"max.message.bytes": 100})
    data = raw_batch(record(0, value=b"x" * 200) + b"garbage", count=1)
    refused(log, data, RecordTooLargeError, r"is \d+ bytes, over the largest allowed")


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_are_walked_too(tmp_path, codec):
    log = open_log(tmp_path)
    good = encode_batch([b"a", b"b"], timestamps=T0, compression=codec)
    log.append(good)
    # The same batch with its compressed bytes flipped (CRC recomputed): refused, not stored.
    bad = bytearray(good)
    for i in range(61, len(bad)):
        bad[i] ^= 0x5A
    bad[17:21] = struct.pack(">I", crc32c(bytes(bad[21:])))
    refused(log, bytes(bad), CorruptRecordError, None)


def test_decompression_is_bounded():
    data = encode_batch([b"\x00" * 100_000], timestamps=T0, compression="zstd")
    with pytest.raises(CorruptRecordError):
        validate_batches(data, "t-0", now=T0, max_decompressed=10_000)
    assert len(validate_batches(data, "t-0", now=T0)) == 1


def test_followers_keep_kafkas_rules(tmp_path):
    # A follower checks structure and CRC only; it copies what its leader holds.
    log = open_log(tmp_path)
    marker = encode_control_batch(1, timestamp=T0, producer_id=7, producer_epoch=0)
    assert log.append(marker, assign_offsets=False).first_offset == 0
    with pytest.raises(CorruptRecordError, match="CRC"):
        bad = bytearray(encode_batch([b"a"], timestamps=T0, base_offset=1))
        bad[-1] ^= 1
        log.append(bytes(bad), assign_offsets=False)


# -- the property: what is acknowledged can be served --------------------------------------------------


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        kind = rng.random()
        if kind < 0.6:
            i = rng.randrange(21, len(b))
            b[i] = rng.randrange(256)
        elif kind < 0.8:
            i = rng.randrange(61, len(b))
            del b[i : i + rng.randint(1, 3)]
        else:
            i = rng.randrange(61, len(b) + 1)
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 3)))
    struct.pack_into(">i", b, 8, len(b) - 12)
    struct.pack_into(">I", b, 17, crc32c(bytes(b[21:])))
    return bytes(b)


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_fuzz_whatever_is_acknowledged_decodes(tmp_path, codec):
    rng = random.Random(20240611 + len(codec))
    log = open_log(tmp_path, {"message.timestamp.before.max.ms": 10**9, "message.timestamp.after.max.ms": 10**9})
    seed = encode_batch(
        [b"v%d" % i * 3 for i in range(4)],
        keys=[b"k", None, b"kk", b""],
        timestamps=[T0, T0 + 5, T0 - 5, T0 + 1],
        headers=[None, [("h", b"x")], None, [("a", None)]],
        compression=codec,
    )
    accepted = refused_n = 0
    for _ in range(1500):
        data = _mutate(rng, seed)
        end = log.log_end_offset
        try:
            info = log.append(data)
        except (CorruptRecordError, InvalidRecordError, InvalidTimestampError, RecordTooLargeError):
            assert log.log_end_offset == end
            refused_n += 1
            continue
        accepted += 1
        got = decode_records(log.read(info.first_offset, upper_bound="log_end").to_bytes())
        assert [r.offset for r in got] == list(range(info.first_offset, info.last_offset + 1))
    assert refused_n > 0
    # Every acknowledged batch of the whole log still decodes, record by record.
    assert len(decode_records(log.read(0, 1 << 30, upper_bound="log_end").to_bytes())) == log.log_end_offset


# -- more of the same kinds ---------------------------------------------------------------------------


def test_one_bad_batch_refuses_the_whole_append(tmp_path):
    log = open_log(tmp_path)
    good = encode_batch([b"a", b"b"], timestamps=T0)
    bad = raw_batch(record(0) + record(7), count=2)
    exc = refused(log, good + bad + good, InvalidRecordError, r"batch at byte %d" % len(good))
    assert exc.position == len(good)
    assert log.log_end_offset == 0


def test_store_append_validates_like_the_log(tmp_path):
    with Store.open(str(tmp_path / "s"), clock=ManualClock(T0)) as store:
        store.create_topic("t", 1, {"message.timestamp.after.max.ms": 10})
        with pytest.raises(CorruptRecordError, match="in the append to t-0"):
            store.append("t", 0, raw_batch(b"\x05" + bytes(30), count=2))
        with pytest.raises(InvalidTimestampError, match="of record 0 is out of range"):
            store.append("t", 0, encode_batch([b"a"], timestamps=T0 + 11))
        # An idempotent producer's batch is validated before its sequence is recorded.
        bad = raw_batch(record(0) + record(3), count=2, pid=9, epoch=0, seq=0)
        with pytest.raises(InvalidRecordError, match="record 1 has offsetDelta 3"):
            store.append("t", 0, bad)
        ok = encode_batch([b"a", b"b"], timestamps=T0, producer_id=9, producer_epoch=0, base_sequence=0)
        assert store.append("t", 0, ok).first_offset == 0
        assert store.log("t", 0).log_end_offset == 2


@pytest.mark.parametrize("codec", ["uncompressed", "gzip", "zstd"])
def test_producer_batches_get_their_timestamps_checked_record_by_record(tmp_path, codec):
    """The producer's own batches skip the CRC (and, compressed, the walk unless a timestamp
    bound is set): a too-old record that is not the batch's first is still refused."""
    clock = ManualClock(T0)
    with Store.open(str(tmp_path / "s"), clock=clock) as store:
        store.create_topic("t", 1, {"message.timestamp.before.max.ms": 1000, "compression.type": codec})
        p = store.producer(linger_ms=10)
        p.send("t", b"fine", timestamp=T0)
        f = p.send("t", b"old", timestamp=T0 - 5000)
        clock.advance(10)
        with pytest.raises(InvalidTimestampError, match=rf"timestamp {T0 - 5000} of record 1"):
            f.get()
        with pytest.raises(InvalidTimestampError, match=r"of record 2 is out of range"):
            p.send_batch("t", [b"a", b"b", b"c"], timestamps=[T0, T0, T0 - 5000])
        assert store.log("t", 0).log_end_offset == 0


def test_uncompressed_validation_allocates_nothing_per_record():
    import tracemalloc

    small = encode_batch([b"v" * 20] * 10, keys=[b"k"] * 10, timestamps=T0)
    large = encode_batch([b"v" * 20] * 10_000, keys=[b"k"] * 10_000, timestamps=T0)
    validate_batches(small, "t-0", now=T0)  # warm up
    peaks = []
    for data in (small, large):
        tracemalloc.start()
        validate_batches(data, "t-0", now=T0)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] <= peaks[0] + 256, peaks  # one header object either way


def test_validate_batches_returns_the_headers():
    data = encode_batch([b"a"], timestamps=T0) + encode_batch([b"b", b"c"], timestamps=T0 + 1, base_offset=1)
    heads = validate_batches(data, "t-0", now=T0)
    assert [(h.position, h.base_offset, h.records_count, h.max_timestamp) for h in heads] == [
        (0, 0, 1, T0),
        (heads[1].position, 1, 2, T0 + 1),
    ]
    assert validate_batches(b"", "t-0", now=T0) == []
    with pytest.raises(ValueError, match="timestamp bounds must be >= 0"):
        validate_batches(data, "t-0", now=T0, before_max_ms=-1)


def test_produce_request_rules_for_a_future_produce_handler():
    one = encode_batch([b"a"], timestamps=T0)
    assert len(validate_batches(one, "t-0", now=T0, produce_request=True)) == 1
    with pytest.raises(InvalidRecordError, match="one record batch per partition; another starts at byte"):
        validate_batches(one + one, "t-0", now=T0, produce_request=True)
    with pytest.raises(InvalidRecordError, match="baseOffset of a produced batch must be 0, not 5"):
        validate_batches(encode_batch([b"a"], timestamps=T0, base_offset=5), "t-0", now=T0, produce_request=True)
    with pytest.raises(InvalidRecordError, match="no record batch at all"):
        validate_batches(b"", "t-0", now=T0, produce_request=True)


def test_a_retry_that_is_a_duplicate_is_validated_first(tmp_path):
    with Store.open(str(tmp_path / "s"), clock=ManualClock(T0)) as store:
        store.create_topic("t", 1)
        ok = encode_batch([b"a", b"b"], timestamps=T0, producer_id=9, producer_epoch=0, base_sequence=0)
        assert store.append("t", 0, ok).first_offset == 0
        assert store.append("t", 0, ok).duplicate
        # Same producer, epoch and sequences, garbage records behind a valid CRC: refused, as
        # Kafka refuses it before looking at the sequence, not acknowledged as a duplicate.
        bad = raw_batch(record(0) + record(9), count=2, pid=9, epoch=0, seq=0)
        with pytest.raises(InvalidRecordError, match="record 1 has offsetDelta 9"):
            store.append("t", 0, bad)
        assert store.log("t", 0).log_end_offset == 2


def test_log_validate_checks_without_writing(tmp_path):
    log = open_log(tmp_path, {"message.timestamp.after.max.ms": 0})
    assert [h.records_count for h in log.validate(encode_batch([b"a"], timestamps=T0))] == [1]
    with pytest.raises(InvalidTimestampError):
        log.validate(encode_batch([b"a"], timestamps=T0 + 1))
    with pytest.raises(TypeError, match="batches must be a bytes-like object"):
        log.validate("x")
    assert log.log_end_offset == 0


def test_segment_bytes_limits_each_batch_not_a_multi_batch_append(tmp_path):
    from seglog.errors import RecordListTooLargeError

    one = encode_batch([b"x" * 100], timestamps=T0)
    log = open_log(tmp_path, {"segment.bytes": 3 * len(one)})
    info = log.append(one * 5)  # several batches: more than a segment, each fits
    assert (info.first_offset, info.last_offset) == (0, 4)
    big = encode_batch([b"x" * 600], timestamps=T0)
    with pytest.raises(
        RecordListTooLargeError,
        match=rf"Message batch size is {len(big)} bytes in "
        rf"append to partition t-0, which exceeds the maximum configured segment "
        rf"size of {3 * len(one)}",
    ) as exc:
        log.append(one + big)
    assert exc.value.position == len(one) and log.log_end_offset == 5
    # A follower cannot be handed one either.
    with pytest.raises(RecordListTooLargeError):
        log.append(encode_batch([b"x" * 600], timestamps=T0, base_offset=5), assign_offsets=False)


# -- the one-pass record reader against the plain-Python model of Kafka's rules ---------------------


def test_the_one_pass_record_reader_keeps_the_full_readers_rules():
    """Validation reads most records in one pass (lengths and deltas of one or two bytes, a short
    key length, no headers) and hands every other record to the full reader. Around each bound of
    that form (one-, two- and three-byte varints, non-canonical ones, key lengths up to 64, null and
    empty keys and values, a header), and with every early byte and the last ones of each such
    record changed a little, validation decides as a plain reading of Kafka's record rules does: the
    same records accepted with the same key nullity, timestamp and offset delta, the rest refused
    (tests/faults/record_model.py, the fuzz tests' model, is that reading)."""
    shapes = []
    for key in (None, b"", b"k", b"k" * 63, b"k" * 64):
        for value in (None, b"", b"v", b"v" * 63, b"v" * 64, b"v" * 8191, b"v" * 8192):
            for ts_delta in (0, -1, 63, 64, -65, 8191, 8192):
                shapes.append(record(0, ts_delta, key, value))
    shapes.append(record(0, 5, b"k", b"v", headers=[(b"h", b"x")]))
    body = b"\x00" + varint(3, pad_to=2) + varint(0, pad_to=2) + varint(1) + b"k" + varint(1, pad_to=2) + b"v\x00"
    shapes.append(varint(len(body), pad_to=2) + body)  # two-byte forms of small values
    candidates = set(shapes)
    for r in shapes[::3] + shapes[-2:]:
        for at in [*range(min(12, len(r))), len(r) - 2, len(r) - 1]:
            for delta in (-2, -1, 1, 2, 0x80):
                m = bytearray(r)
                m[at] = (m[at] + delta) & 0xFF
                candidates.add(bytes(m))
        candidates.add(r[:-1])
        candidates.add(r + b"\x00")
    accepted = refused_n = 0
    for rec in sorted(candidates):
        try:
            (got,) = model_decode(raw_batch(rec, count=1))
        except ModelCorrupt as exc:
            for compacted in (False, True):
                # A record the model reads but with bytes after it may meet a record rule first.
                refusal = (CorruptRecordError, InvalidRecordError) if "bytes left" in str(exc) else CorruptRecordError
                with pytest.raises(refusal):
                    validate_batches(raw_batch(rec, count=1), "t-0", now=T0, compacted=compacted)
            refused_n += 1
            continue
        offset, ts, _, key = got[:4]
        data = raw_batch(rec, count=1, max_ts=ts)
        for compacted in (False, True):
            if offset != 0:
                with pytest.raises(InvalidRecordError, match="offsetDelta"):
                    validate_batches(data, "t-0", now=T0, compacted=compacted)
            elif compacted and key is None:
                with pytest.raises(InvalidRecordError, match="no key"):
                    validate_batches(data, "t-0", now=T0, compacted=compacted)
            else:
                assert len(validate_batches(data, "t-0", now=T0, compacted=compacted)) == 1
        accepted += 1
    assert accepted > 300 and refused_n > 1000, (accepted, refused_n)
