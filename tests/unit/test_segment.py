"""One segment (``seglog._native.segment.Segment``): append with offset and epoch assignment,
Kafka's index rule, lookups against plain-Python answers, recovery, truncation, counted views,
file life (trim on close, suffix change, delete) and read-only opening of broker-written files."""

from __future__ import annotations

import bisect
import os
import random
import struct

import pytest
from kafka.record.memory_records import MemoryRecords

from seglog._native.crc32c import crc32c
from seglog._native.segment import (
    ROLL_AGE,
    ROLL_CHECK_WALL_AGE,
    ROLL_INDEX_FULL,
    ROLL_OFFSET_OVERFLOW,
    ROLL_SIZE,
    AppendRules,
    Segment,
    filename_prefix,
)
from seglog.errors import CorruptRecordError, InvalidRecordError, RecordListTooLargeError, RecordTooLargeError
from seglog.storage.records import CODEC_NAMES as CODECS
from seglog.storage.records import batch_headers, decode_records, encode_batch
from tests.conftest import T0
from tests.logkit import (
    CONSUMER_OFFSETS_6,
    KafkaIndexRule,
    batch,
    copy_partition,
    read_offset_index,
    read_time_index,
)


def new_segment(tmp_path, base=0, **kw):
    kw.setdefault("index_interval_bytes", 4096)
    kw.setdefault("max_index_size", 1024)
    return Segment(tmp_path, base, create=True, **kw)


def file_bytes(seg: Segment) -> bytes:
    with open(seg.log_path, "rb") as f:
        return f.read()


def kafka_python_batches(buf: bytes) -> list:
    out, mr = [], MemoryRecords(buf)
    while (b := mr.next_batch()) is not None:
        out.append(b)
    return out


# -- names -------------------------------------------------------------------------------------


def test_file_names_are_kafkas(tmp_path):
    assert filename_prefix(0) == "00000000000000000000"
    assert filename_prefix(1234) == "00000000000000001234"
    assert filename_prefix(2**63 - 1) == "9223372036854775807".rjust(20, "0")
    seg = new_segment(tmp_path, 1234)
    seg.close()
    assert sorted(os.listdir(tmp_path)) == [
        "00000000000000001234.index",
        "00000000000000001234.log",
        "00000000000000001234.timeindex",
    ]


def test_create_refuses_existing_and_open_refuses_missing(tmp_path):
    new_segment(tmp_path).close()
    with pytest.raises(FileExistsError, match="00000000000000000000.log"):
        new_segment(tmp_path)
    with pytest.raises(FileNotFoundError, match="00000000000000000007.log"):
        Segment(tmp_path, 7)
    with pytest.raises(ValueError, match="base offset"):
        Segment(tmp_path, -1, create=True)


# -- append ------------------------------------------------------------------------------------


def test_append_assigns_offsets_and_epoch_in_header_crc_still_verifies(tmp_path):
    seg = new_segment(tmp_path, 100)
    src = batch(3, ts=[T0, T0 + 5, T0 + 2])
    before = bytes(src)
    info = seg.append(src, assign_from=100, leader_epoch=7)
    assert src == before, "the caller's buffer must not be modified"
    assert (info.first_offset, info.last_offset, info.batches, info.records) == (100, 102, 1, 3)
    assert (info.position, info.size) == (0, len(src))
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (T0 + 5, 102)
    info2 = seg.append(src, assign_from=103, leader_epoch=8)
    assert (info2.first_offset, info2.last_offset, info2.position) == (103, 105, len(src))
    data = file_bytes(seg)
    assert len(data) == 2 * len(src) == seg.size
    heads = batch_headers(data, verify_crc=True)
    assert [(h.base_offset, h.last_offset, h.partition_leader_epoch) for h in heads] == [(100, 102, 7), (103, 105, 8)]
    # Only baseOffset and partitionLeaderEpoch differ from what was sent; the CRC is unchanged.
    for i, h in enumerate(heads):
        on_disk = data[h.position : h.position + h.size]
        assert on_disk[16:] == src[16:]
        assert struct.unpack_from(">qii", on_disk) == (100 + 3 * i, len(src) - 12, 7 + i)
        assert struct.unpack_from(">I", on_disk, 17)[0] == crc32c(on_disk[21:])
    # An independent decoder agrees.
    kp = kafka_python_batches(data)
    assert all(b.validate_crc() for b in kp)
    assert [r.offset for b in kp for r in b] == list(range(100, 106))
    assert [(r.offset, r.timestamp) for r in decode_records(data)][:3] == [(100, T0), (101, T0 + 5), (102, T0 + 2)]
    seg.close()


def test_append_several_batches_in_one_buffer_gets_contiguous_offsets(tmp_path):
    seg = new_segment(tmp_path, 0)
    # The batches' own base offsets are ignored when assigning; only their spans count.
    buf = batch(2, base_offset=50) + batch(1, base_offset=3) + batch(4, base_offset=9)
    info = seg.append(buf, assign_from=0)
    assert (info.first_offset, info.last_offset, info.batches, info.records) == (0, 6, 3, 7)
    heads = batch_headers(file_bytes(seg), verify_crc=True)
    assert [(h.base_offset, h.last_offset) for h in heads] == [(0, 1), (2, 2), (3, 6)]
    assert seg.next_offset == 7
    seg.close()


def test_follower_append_keeps_offsets_and_epoch(tmp_path):
    seg = new_segment(tmp_path, 10)
    seg.append(batch(2, base_offset=10, epoch=3))
    seg.append(batch(1, base_offset=15, epoch=4))  # gaps are allowed (compacted leader)
    heads = batch_headers(file_bytes(seg), verify_crc=True)
    assert [(h.base_offset, h.last_offset, h.partition_leader_epoch) for h in heads] == [(10, 11, 3), (15, 15, 4)]
    assert seg.next_offset == 16
    size = seg.size
    with pytest.raises(InvalidRecordError, match="out-of-order offsets"):
        seg.append(batch(1, base_offset=15))
    with pytest.raises(InvalidRecordError, match="out-of-order offsets"):
        seg.append(batch(1, base_offset=20) + batch(1, base_offset=20))
    assert seg.size == size == os.path.getsize(seg.log_path)
    seg.close()


def test_append_validates_everything_before_writing(tmp_path):
    seg = new_segment(tmp_path)
    good = batch(2)
    bad = bytearray(batch(2))
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        seg.append(good + bytes(bad), assign_from=0)
    with pytest.raises(CorruptRecordError, match="torn batch"):
        seg.append(good + good[:30], assign_from=0)
    with pytest.raises(ValueError, match="empty"):
        seg.append(b"", assign_from=0)
    legacy = bytes.fromhex("00000000000000000000000e000000000000ffffffffffffffff")
    with pytest.raises(InvalidRecordError, match="magic 0"):
        seg.append(legacy)
    assert seg.size == 0 and os.path.getsize(seg.log_path) == 0 and seg.next_offset == 0
    # verify_crc=False lets a caller that already checked skip the second pass.
    seg.append(bytes(bad), assign_from=0, verify_crc=False)
    assert seg.size == len(bad)
    seg.close()


def test_relative_offset_overflow_is_refused(tmp_path):
    seg = new_segment(tmp_path, 0)
    seg.append(batch(1), assign_from=0)
    assert seg.can_convert_to_relative_offset(2**31 - 1)
    assert not seg.can_convert_to_relative_offset(2**31)
    with pytest.raises(InvalidRecordError, match="roll first"):
        seg.append(batch(2), assign_from=2**31 - 1)
    with pytest.raises(InvalidRecordError, match="roll first"):
        seg.append(batch(1, base_offset=2**31))
    assert seg.next_offset == 1
    seg.append(batch(1, base_offset=2**31 - 1))
    assert seg.next_offset == 2**31
    seg.close()


# -- Kafka's index rule ------------------------------------------------------------------------


@pytest.mark.parametrize("interval", [0, 1, 100, 333, 4096])
def test_index_entries_follow_kafkas_rule(tmp_path, interval):
    rng = random.Random(interval)
    seg = new_segment(tmp_path, 1000, index_interval_bytes=interval, max_index_size=1 << 16)
    rule = KafkaIndexRule(interval, 1000)
    nxt = 1000
    for k in range(120):
        batches = []
        per_batch = []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            n = rng.randint(1, 4)
            ts = [T0 + rng.randint(-50, 200) + k for _ in range(n)]
            batches.append(batch(n, ts=ts, size=rng.randint(1, 60), tag=k))
            per_batch.append((max(ts), nxt + n - 1, len(batches[-1])))
            nxt += n
        buf = b"".join(batches)
        info = seg.append(buf, assign_from=per_batch[0][1] - (len(decode_records(batches[0])) - 1))
        rule.append(per_batch)
        assert info.last_offset == nxt - 1
    assert seg.offset_index.entries == len(rule.offsets)
    assert [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)] == rule.offsets
    assert [seg.time_index.entry(i) for i in range(seg.time_index.entries)] == rule.times
    seg.close()
    rule.close()
    # On close the files are trimmed to their entries, the time index ending with the max entry.
    assert os.path.getsize(seg.offset_index.path) == 8 * len(rule.offsets)
    assert os.path.getsize(seg.time_index.path) == 12 * len(rule.times)
    assert read_offset_index(seg.offset_index.path, 1000) == rule.offsets
    assert read_time_index(seg.time_index.path, 1000) == rule.times


def test_recover_rebuilds_the_same_indexes_as_single_batch_appends(tmp_path):
    rng = random.Random(5)
    seg = new_segment(tmp_path, 0, index_interval_bytes=200, max_index_size=4096)
    for k in range(80):
        seg.append(
            batch(rng.randint(1, 3), ts=T0 + rng.randint(0, 1000), size=rng.randint(5, 90), tag=k),
            assign_from=seg.next_offset,
        )
    want_off = [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)]
    want_time = [seg.time_index.entry(i) for i in range(seg.time_index.entries)]
    state = (seg.next_offset, seg.max_timestamp_so_far, seg.offset_of_max_timestamp, seg.bytes_since_last_index_entry)
    res = seg.recover()
    assert (res.valid_bytes, res.truncated_bytes, res.batches, res.next_offset, res.reason) == (
        seg.size,
        0,
        80,
        seg.next_offset,
        None,
    )
    assert [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)] == want_off
    # Recovery ends with the max-timestamp entry, as close does.
    got_time = [seg.time_index.entry(i) for i in range(seg.time_index.entries)]
    assert got_time[: len(want_time)] == want_time
    assert got_time[len(want_time) :] in ([], [(seg.max_timestamp_so_far, seg.offset_of_max_timestamp)])
    assert (
        seg.next_offset,
        seg.max_timestamp_so_far,
        seg.offset_of_max_timestamp,
        seg.bytes_since_last_index_entry,
    ) == state
    # Appends after recovery continue the same rule.
    seg.append(batch(1), assign_from=seg.next_offset)
    seg.close()


# -- lookups -----------------------------------------------------------------------------------


@pytest.fixture
def filled(tmp_path):
    """A segment at base 500 with 60 batches of 1-5 records, small index interval."""
    rng = random.Random(11)
    seg = new_segment(tmp_path, 500, index_interval_bytes=150)
    model = []  # (base, last, position, size, max_ts, [record timestamps])
    for k in range(60):
        n = rng.randint(1, 5)
        ts = [T0 + rng.randint(0, 3000) for _ in range(n)]
        info = seg.append(batch(n, ts=ts, size=rng.randint(1, 40), tag=k), assign_from=seg.next_offset)
        model.append((info.first_offset, info.last_offset, info.position, info.size, max(ts), ts))
    yield seg, model
    if not seg.closed:
        seg.close()


def test_translate_offset_matches_bisect(filled):
    seg, model = filled
    lasts = [m[1] for m in model]
    for off in range(480, seg.next_offset + 3):
        got = seg.translate_offset(off)
        i = bisect.bisect_left(lasts, off)
        if i == len(model):
            assert got is None
            continue
        assert (got.position, got.base_offset, got.last_offset, got.size) == (
            model[i][2],
            model[i][0],
            model[i][1],
            model[i][3],
        )


def test_read_whole_batches_within_limits(filled):
    seg, model = filled
    lasts = [m[1] for m in model]
    for off in (500, 517, model[30][1], seg.next_offset - 1):
        i = bisect.bisect_left(lasts, off)
        for max_bytes in (0, 1, model[i][3], model[i][3] + 1, 300, 10**6):
            v = seg.read(off, max_bytes)
            j = i
            while j < len(model) and model[j][2] + model[j][3] - model[i][2] <= max_bytes:
                j += 1
            j = max(j, i + 1)  # min_one_batch
            assert v.nbytes == model[j - 1][2] + model[j - 1][3] - model[i][2]
            assert bytes(v) == file_bytes(seg)[model[i][2] : model[i][2] + v.nbytes]
            v.release()
            v = seg.read(off, max_bytes, min_one_batch=False)
            if max_bytes < model[i][3]:
                assert v is None
            else:
                v.release()
    assert seg.read(seg.next_offset, 100) is None
    # Never past max_position.
    v = seg.read(500, 10**6, max_position=model[10][2])
    assert v.nbytes == model[10][2]
    v.release()
    assert seg.read(model[10][0], 10**6, max_position=model[10][2]) is None
    with pytest.raises(ValueError, match="max_bytes"):
        seg.read(500, -1)


def test_batches_and_batch_end(filled):
    seg, model = filled
    infos = seg.batches(verify_crc=True)
    assert [(b.position, b.base_offset, b.last_offset, b.max_timestamp) for b in infos] == [
        (m[2], m[0], m[1], m[4]) for m in model
    ]
    assert seg.batches(model[5][2])[0].base_offset == model[5][0]
    assert seg.batch_end(0, 0, -1, True) == model[0][3]
    assert seg.batch_end(0, 0, -1, False) == 0
    assert seg.batch_end(model[3][2], 10**9, model[7][2], False) == model[7][2]


def test_find_offset_by_timestamp_matches_a_scan(filled):
    seg, model = filled
    for target in [0, T0, T0 + 1, T0 + 1500, T0 + 2999, T0 + 3000, T0 + 4000] + [m[4] for m in model]:
        for start in (500, model[20][0], model[20][0] + 1, model[50][1]):
            want = next((m for m in model if m[4] >= target and m[1] >= start), None)
            got = seg.find_offset_by_timestamp(target, start)
            if want is None:
                assert got is None
            else:
                assert (got.position, got.base_offset) == (want[2], want[0]), (target, start)


@pytest.mark.parametrize("codecs", [("none",), ("none", "gzip", "lz4", "zstd")])
def test_first_at_or_after_matches_the_records(tmp_path, codecs):
    """Segment.first_at_or_after (index, batch headers, then the records, in one call) answers
    as a decode of every record does, for any target, start and bound; batches compressed with
    any codec among uncompressed ones are decoded on the way."""
    rng = random.Random(5)
    seg = new_segment(tmp_path, 500, index_interval_bytes=150)
    records: list[tuple[int, int]] = []  # (offset, timestamp) of every record
    for k in range(80):
        n = rng.randint(1, 6)
        ts = [T0 + rng.randint(0, 3000) for _ in range(n)]
        codec = CODECS[rng.choice(codecs)]
        data = encode_batch([b"v%d" % i for i in range(n)], timestamps=ts, compression=codec)
        info = seg.append(data, assign_from=seg.next_offset)
        records += zip(range(info.first_offset, info.last_offset + 1), ts)
    try:
        for target in [0, T0, T0 + 1, T0 + 1500, T0 + 2999, T0 + 3000, T0 + 3001] + [
            rng.choice(records)[1] for _ in range(20)
        ]:
            for start in (0, 500, records[100][0], records[100][0] + 1, records[-1][0], seg.next_offset):
                for bound in (seg.next_offset, records[200][0], start):
                    want = next(((o, t) for o, t in records if start <= o < bound and t >= target), None)
                    assert seg.first_at_or_after(target, start, bound) == want, (target, start, bound)
    finally:
        seg.close()
    with pytest.raises(ValueError, match="is closed"):
        seg.first_at_or_after(T0)


def test_reopen_finds_next_offset_and_max_timestamp(filled, tmp_path):
    seg, model = filled
    seg.close()
    again = Segment(tmp_path, 500, index_interval_bytes=150, max_index_size=1024)
    assert again.next_offset == model[-1][1] + 1
    mx = max(m[4] for m in model)
    assert again.max_timestamp_so_far == mx
    assert again.offset_of_max_timestamp == next(m[1] for m in model if m[4] == mx)
    assert again.rolling_based_timestamp == model[0][4]
    again.sanity_check()
    h = again.translate_offset(model[40][0])
    assert h is not None and h.position == model[40][2]
    again.close()


# -- recovery ----------------------------------------------------------------------------------


def test_recover_truncates_a_torn_tail(filled):
    seg, model = filled
    seg.flush()
    with open(seg.log_path, "ab") as f:
        f.write(batch(3)[:40])
    seg.close_without_trim()
    seg = Segment(seg.dir, 500, index_interval_bytes=150, max_index_size=1024)
    res = seg.recover()
    assert res.reason is not None
    assert res.truncated_bytes == 40 and "torn batch" in res.reason
    assert res.valid_bytes == seg.size == os.path.getsize(seg.log_path) == model[-1][2] + model[-1][3]
    assert seg.next_offset == model[-1][1] + 1
    seg.close()


def test_recover_stops_at_a_flipped_bit_and_reports_it(filled):
    seg, model = filled
    seg.close()
    with open(seg.log_path, "r+b") as f:
        f.seek(model[33][2] + 70)
        b = f.read(1)
        f.seek(model[33][2] + 70)
        f.write(bytes([b[0] ^ 0x10]))
    seg = Segment(seg.dir, 500, index_interval_bytes=150, max_index_size=1024)
    res = seg.recover()
    assert res.reason is not None
    assert "CRC mismatch" in res.reason and f"position {model[33][2]}" in res.reason
    assert res.valid_bytes == model[33][2] and res.batches == 33
    assert seg.next_offset == model[33][0]
    assert all(e[0] < model[33][0] for e in (seg.offset_index.entry(i) for i in range(seg.offset_index.entries)))
    seg.close()


def test_recover_refuses_offsets_that_go_backwards(tmp_path):
    seg = new_segment(tmp_path, 0)
    seg.append(batch(2, base_offset=0))
    seg.append(batch(2, base_offset=2))
    seg.close()
    # Append a CRC-valid batch whose offsets repeat (as a buggy writer would).
    with open(seg.log_path, "ab") as f:
        f.write(batch(1, base_offset=1))
    seg = Segment(tmp_path, 0, max_index_size=1024)
    res = seg.recover()
    assert res.reason is not None
    assert "does not follow" in res.reason and res.next_offset == 4 and res.batches == 2
    seg.close()


def test_recover_collects_leader_epoch_starts(tmp_path):
    seg = new_segment(tmp_path, 0)
    for epoch, n in [(0, 2), (0, 1), (2, 3), (2, 1), (5, 1)]:
        seg.append(batch(n), assign_from=seg.next_offset, leader_epoch=epoch)
    res = seg.recover(collect_batches=True)
    assert res.epoch_starts == [(0, 0), (2, 3), (5, 7)]
    assert [b.base_offset for b in res.batch_infos] == [0, 2, 3, 6, 7]
    seg.close()


# -- truncation --------------------------------------------------------------------------------


def test_truncate_to_removes_whole_batches_and_index_entries(filled):
    seg, model = filled
    k = 37
    cut = model[k][0] + 1 if model[k][1] > model[k][0] else model[k][0]  # inside batch k if possible
    removed = seg.truncate_to(cut)
    assert removed == model[-1][2] + model[-1][3] - model[k][2]
    assert seg.size == model[k][2] == os.path.getsize(seg.log_path)
    assert seg.next_offset == model[k][0]
    entries = [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)]
    assert all(off < model[k][0] for off, _ in entries)
    times = [seg.time_index.entry(i) for i in range(seg.time_index.entries)]
    assert all(off < model[k][0] for _, off in times)
    mx = max(m[4] for m in model[:k])
    assert seg.max_timestamp_so_far == mx
    assert seg.offset_of_max_timestamp == next(m[1] for m in model if m[4] == mx)
    assert seg.truncate_to(seg.next_offset) == 0
    # Appends continue at the cut; the index rule continues from the last entry.
    info = seg.append(batch(2), assign_from=seg.next_offset)
    assert (info.first_offset, info.position) == (model[k][0], model[k][2])
    assert seg.translate_offset(model[k][0]).position == model[k][2]
    size = seg.size
    assert seg.truncate_to(0) == size and seg.size == 0 and seg.next_offset == 500
    assert seg.offset_index.entries == 0 and seg.time_index.entries == 0
    assert seg.max_timestamp_so_far == -1


# -- counted views -----------------------------------------------------------------------------


def test_live_views_block_truncate_close_recover_and_delete(filled):
    seg, _ = filled
    v = seg.read(500, 100)
    w = seg.view(10, 20)
    assert seg.live_views() == 2
    for action in (lambda: seg.truncate_to(501), seg.close, seg.recover, seg.delete, seg.close_without_trim):
        with pytest.raises(BufferError, match="exported view"):
            action()
    v.release()
    assert seg.live_views() == 1
    with pytest.raises(BufferError):
        seg.truncate_to(501)
    w.release()
    assert seg.live_views() == 0
    seg.truncate_to(501)
    seg.close()


def test_views_survive_a_remap_and_still_count(tmp_path):
    seg = Segment(tmp_path, 0, create=True, segment_bytes=4096, max_index_size=1024)
    seg.append(batch(1), assign_from=0)
    v = seg.view()
    first = bytes(v)
    for k in range(100):  # grows far past the reservation: new mappings
        seg.append(batch(3, size=100, tag=k), assign_from=seg.next_offset)
    assert bytes(v) == first
    assert seg.live_views() == 1
    with pytest.raises(BufferError):
        seg.truncate_to(0)
    del v
    assert seg.live_views() == 0
    assert [r.offset for r in decode_records(seg.view())] == list(range(seg.next_offset))
    seg.close()


# -- file life ---------------------------------------------------------------------------------


def test_close_trims_and_close_without_trim_keeps_preallocation(tmp_path):
    seg = new_segment(tmp_path, 0, index_interval_bytes=0, max_index_size=800)
    for _ in range(4):
        seg.append(batch(1, ts=T0 + seg.next_offset), assign_from=seg.next_offset)
    seg.close_without_trim()
    assert os.path.getsize(tmp_path / "00000000000000000000.index") == 800
    assert os.path.getsize(tmp_path / "00000000000000000000.timeindex") == 792
    seg = Segment(tmp_path, 0, index_interval_bytes=0, max_index_size=800)
    seg.sanity_check()
    assert seg.offset_index.entries == 3 and seg.next_offset == 4
    seg.close()
    n = len(batch(1))
    assert read_offset_index(tmp_path / "00000000000000000000.index", 0) == [(1, n), (2, 2 * n), (3, 3 * n)]
    assert os.path.getsize(tmp_path / "00000000000000000000.index") == 24
    # Close appended the max-timestamp entry (T0 + 3 at offset 3).
    assert read_time_index(tmp_path / "00000000000000000000.timeindex", 0) == [(T0 + 1, 1), (T0 + 2, 2), (T0 + 3, 3)]


# -- blocks allocated ahead of the end of file (ext4) ---------------------------------------------

MIB = 1 << 20


def allocated_bytes(seg: Segment) -> int:
    return os.stat(seg.log_path).st_blocks * 512


def allocating_segment(tmp_path, **kw):
    seg = new_segment(tmp_path, 0, **kw)
    if seg.allocate_step == 0:
        seg.delete()
        pytest.skip(f"{tmp_path} is not on ext4: no blocks are allocated ahead there")
    return seg


def test_appends_allocate_blocks_ahead_and_roll_gives_them_back(tmp_path):
    seg = allocating_segment(tmp_path, segment_bytes=1 << 30)
    assert seg.allocate_step == 4 * MIB and seg.allocated_to == 0
    big = batch(1000, size=1000)  # ~1 MiB
    seg.append(big, assign_from=0)
    assert seg.allocated_to == 4 * MIB
    assert allocated_bytes(seg) >= 4 * MIB  # the blocks exist...
    assert os.path.getsize(seg.log_path) == seg.size == len(big)  # ...past an unchanged length
    while seg.size + len(big) <= 4 * MIB:
        seg.append(big, assign_from=seg.next_offset)
    assert seg.allocated_to == 4 * MIB
    seg.append(big, assign_from=seg.next_offset)  # crosses 4 MiB: the next step
    assert seg.allocated_to == 8 * MIB and allocated_bytes(seg) >= 8 * MIB
    size = seg.size
    seg.on_become_inactive()
    assert seg.allocated_to == size and seg.allocate_step == 0
    assert size <= allocated_bytes(seg) < size + 64 * 1024
    assert os.path.getsize(seg.log_path) == size
    assert [b.base_offset for b in seg.batches()] == [1000 * i for i in range(size // len(big))]
    seg.close()


def test_allocation_stops_at_segment_bytes_and_close_gives_it_back(tmp_path):
    seg = allocating_segment(tmp_path, segment_bytes=100_000)
    seg.append(batch(10, size=100), assign_from=0)
    assert seg.allocated_to == 100_000
    one = batch(1, size=200_000)  # one batch over segment.bytes: exactly it
    seg.append(one, assign_from=seg.next_offset)
    assert seg.allocated_to == seg.size
    seg.close()
    assert os.path.getsize(tmp_path / "00000000000000000000.log") == seg.size


def test_allocated_blocks_change_no_byte_and_survive_a_crash(tmp_path):
    """The same appends with and without allocation give identical files; after a crash
    (files closed untrimmed) the log opens at its true length and goes on."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    segs = [
        allocating_segment(tmp_path / "a", max_index_size=4096),
        new_segment(tmp_path / "b", 0, max_index_size=4096, allocate_ahead=0),
    ]
    assert segs[1].allocate_step == 0
    for seg in segs:
        for k in range(20):
            seg.append(batch(50, ts=T0 + k, size=100, tag=k), assign_from=seg.next_offset)
    assert allocated_bytes(segs[0]) >= 4 * MIB > 20 * allocated_bytes(segs[1])
    for seg in segs:
        seg.close_without_trim()
    seg = Segment(tmp_path / "a", 0, max_index_size=4096)
    assert seg.size == os.path.getsize(seg.log_path) == os.path.getsize(segs[1].log_path)
    assert allocated_bytes(seg) >= 4 * MIB  # what the crash left past the end
    res = seg.recover()
    assert res.truncated_bytes == 0 and res.next_offset == 1000
    other = Segment(tmp_path / "b", 0, max_index_size=4096, allocate_ahead=0)
    other.recover()
    for s in (seg, other):
        for idx in (s.offset_index, s.time_index):  # the active segment's, as the log does
            idx.resize(4096)
        s.append(batch(1, tag=99), assign_from=1000)
        s.close()
    assert allocated_bytes(seg) < seg.size + 64 * 1024
    for ext in (".log", ".index", ".timeindex"):
        name = "00000000000000000000" + ext
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), ext


def test_truncation_gives_allocated_blocks_back(tmp_path):
    seg = allocating_segment(tmp_path)
    for k in range(10):
        seg.append(batch(100, size=100, tag=k), assign_from=seg.next_offset)
    assert seg.allocated_to == 4 * MIB
    seg.truncate_to(500)
    assert seg.allocated_to == seg.size == os.path.getsize(seg.log_path)
    assert allocated_bytes(seg) < seg.size + 64 * 1024
    seg.append(batch(1), assign_from=500)  # and allocation goes on
    assert seg.allocated_to == 4 * MIB
    seg.close()


def test_no_allocation_when_off_on_tmpfs_or_read_only(tmp_path):
    with pytest.raises(ValueError, match="allocate_ahead must be >= 0"):
        new_segment(tmp_path, 0, allocate_ahead=-1)
    seg = new_segment(tmp_path, 0, allocate_ahead=0)
    seg.append(batch(1000, size=100), assign_from=0)
    assert seg.allocate_step == 0 and seg.allocated_to == seg.size
    assert allocated_bytes(seg) < seg.size + 64 * 1024
    seg.close()
    assert Segment(tmp_path, 0, read_only=True).allocate_step == 0
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK):
        d = os.path.join(shm, f"seglog-test-{os.getpid()}")
        os.makedirs(d, exist_ok=True)
        try:
            seg = Segment(d, 0, create=True)
            assert seg.allocate_step == 0  # tmpfs: fallocate would write real pages
            seg.delete()
        finally:
            os.rmdir(d)


def test_on_become_inactive_adds_max_entry_and_trims(tmp_path):
    seg = new_segment(tmp_path, 0, index_interval_bytes=10**6)
    seg.append(batch(2, ts=[T0 + 9, T0]), assign_from=0)
    seg.append(batch(1, ts=T0 + 3), assign_from=2)
    seg.on_become_inactive()
    assert os.path.getsize(seg.offset_index.path) == 0
    assert read_time_index(seg.time_index.path, 0) == [(T0 + 9, 1)]
    seg.close()


def test_change_suffix_then_delete(filled, tmp_path):
    seg, _ = filled
    seg.change_suffix("", ".deleted")
    assert sorted(os.listdir(tmp_path)) == [
        "00000000000000000500.index.deleted",
        "00000000000000000500.log.deleted",
        "00000000000000000500.timeindex.deleted",
    ]
    v = seg.read(500, 10)  # still readable through the open files
    assert v.nbytes > 0
    with pytest.raises(BufferError):
        seg.delete()
    v.release()
    seg.delete()
    assert os.listdir(tmp_path) == []
    assert seg.closed


def test_flush_and_repr(filled):
    seg, _ = filled
    seg.flush()
    assert "base_offset=500" in repr(seg) and len(seg) == seg.size


# -- Kafka-written files -----------------------------------------------------------------------


def test_read_only_open_of_the_kafka_fixture(tmp_path):
    before = {p.name: p.read_bytes() for p in CONSUMER_OFFSETS_6.iterdir()}
    seg = Segment(CONSUMER_OFFSETS_6, 0, read_only=True)
    assert seg.next_offset == 13
    assert seg.offset_index.entries == 2 and seg.time_index.entries == 3
    assert seg.max_timestamp_so_far == 1769793578176 and seg.offset_of_max_timestamp == 12
    infos = seg.batches(verify_crc=True)
    assert len(infos) == 13 and [b.position for b in infos][:4] == [0, 1780, 1940, 4730]
    for off in range(13):
        h = seg.translate_offset(off)
        assert h is not None and h.last_offset == off
    v = seg.read(3, 10**6)
    assert v is not None
    assert [r.offset for r in decode_records(v)] == list(range(3, 13))
    v.release()
    h = seg.find_offset_by_timestamp(1769791783399)
    assert h is not None and h.last_offset == 3
    with pytest.raises(PermissionError):
        seg.append(batch(1), assign_from=13)
    with pytest.raises(PermissionError):
        seg.truncate_to(5)
    with pytest.raises(PermissionError):
        seg.recover()
    seg.close()
    assert {p.name: p.read_bytes() for p in CONSUMER_OFFSETS_6.iterdir()} == before


def test_read_only_open_without_index_files(tmp_path):
    d = copy_partition(CONSUMER_OFFSETS_6, tmp_path, "__consumer_offsets-6")
    (d / "00000000000000000000.index").unlink()
    (d / "00000000000000000000.timeindex").unlink()
    seg = Segment(d, 0, read_only=True)
    assert seg.next_offset == 13
    h = seg.translate_offset(7)
    assert h is not None and h.position == 9571
    h = seg.find_offset_by_timestamp(1769793578176)
    assert h is not None and h.last_offset == 12
    seg.close()
    assert not (d / "00000000000000000000.index").exists()


def test_writable_open_of_a_kafka_copy_continues_its_log(tmp_path):
    d = copy_partition(CONSUMER_OFFSETS_6, tmp_path, "__consumer_offsets-6")
    seg = Segment(d, 0, max_index_size=1024)
    seg.sanity_check()
    assert seg.next_offset == 13
    assert seg.index_full  # trimmed by Kafka's clean shutdown: the log re-expands the active one
    seg.offset_index.resize(1024)
    seg.time_index.resize(1024)
    info = seg.append(encode_batch([b"x"], timestamps=1769793578177), assign_from=13, leader_epoch=0)
    assert (info.first_offset, info.position) == (13, 13751)
    # As in Kafka's LogSegment, the bytes since the last entry count from 0 on a loaded segment:
    # the first append after opening adds no entry.
    assert seg.offset_index.entries == 2
    big = encode_batch([b"y" * 5000], timestamps=1769793578178)
    seg.append(big, assign_from=14, leader_epoch=0)
    assert seg.offset_index.entries == 2
    seg.append(big, assign_from=15, leader_epoch=0)
    assert seg.offset_index.entry(-1) == (15, 13751 + info.size + len(big))
    seg.close()
    assert read_time_index(d / "00000000000000000000.timeindex", 0)[-2:] == [(1769793578176, 12), (1769793578178, 14)]


def test_allocates_ahead_says_what_a_segment_there_does(tmp_path):
    from seglog._native.segment import ALLOCATE_AHEAD, allocates_ahead

    seg = new_segment(tmp_path, 0)
    assert seg.allocate_step == (ALLOCATE_AHEAD if allocates_ahead(tmp_path) else 0)
    seg.close()
    if os.path.isdir("/dev/shm"):
        assert allocates_ahead("/dev/shm") is False


# -- the log's rules in the append (AppendRules) ---------------------------------------------------


def spanning(n: int, span: int, base_offset: int = 0) -> bytes:
    """A batch of ``n`` records whose lastOffsetDelta says it spans ``span`` offsets (CRC fixed)."""
    b = bytearray(batch(n, base_offset=base_offset))
    struct.pack_into(">i", b, 23, span - 1)
    struct.pack_into(">I", b, 17, crc32c(bytes(b[21:])))
    return bytes(b)


def test_append_rules_refuse_before_writing_and_name_the_limit(tmp_path):
    seg = new_segment(tmp_path)
    ok = batch(2)
    big = batch(1, size=300)
    rules = AppendRules("u-3", "/logs/u-3", 200, 10_000, 2**62)
    with pytest.raises(RecordTooLargeError) as e:
        seg.append(ok + big, 0, -1, True, rules)
    assert str(e.value) == (
        f"the batch at byte {len(ok)} is {len(big)} bytes, over max.message.bytes 200 "
        "(+12 bytes of log overhead) of /logs/u-3 (limit 200)"
    )
    assert (e.value.position, e.value.limit) == (len(ok), 200)
    small = AppendRules("u-3", "/logs/u-3", 10_000, len(big) - 1, 2**62)
    with pytest.raises(RecordListTooLargeError) as e2:
        seg.append(ok + big, 0, -1, True, small)
    assert str(e2.value) == (
        f"Message batch size is {len(big)} bytes in append to partition u-3, which exceeds the "
        f"maximum configured segment size of {len(big) - 1} (at byte {len(ok)}, limit {len(big) - 1})"
    )
    assert (e2.value.position, e2.value.limit) == (len(ok), len(big) - 1)
    gap = spanning(2, 3)
    with pytest.raises(InvalidRecordError, match=r"the batch at byte 0 holds 2 records but spans 3 offsets") as e3:
        seg.append(gap, 0, -1, True, rules)
    assert e3.value.position == 0
    legacy = bytes.fromhex("00000000000000000000000e000000000000ffffffffffffffff")
    with pytest.raises(
        InvalidRecordError, match=r"only RecordBatch v2 can be appended; the batch at byte 0 has magic 0"
    ):
        seg.append(legacy, 0, -1, True, rules)
    assert seg.size == 0 and os.path.getsize(seg.log_path) == 0 and seg.next_offset == 0
    # Without rules these are the log's business: the segment takes them.
    seg.append(ok + big, 0)
    seg.append(spanning(2, 3, base_offset=3), -1)  # a follower keeps offsets as they come
    assert seg.next_offset == 6
    seg.close()


def test_append_rules_answer_the_roll_reason_without_writing(tmp_path):
    seg = new_segment(tmp_path, index_interval_bytes=0, max_index_size=16)  # two entries per index
    first = batch(1, ts=T0)
    rules = AppendRules("u-0", str(tmp_path), 10_000, 10_000, 1000)
    info = seg.append(first, 0, -1, True, rules)
    assert info.last_offset == 0
    later = batch(1, ts=T0 + 1000)
    size_rules = AppendRules("u-0", str(tmp_path), 10_000, len(first) + len(later) - 1, 1000)
    assert seg.append(later, 1, -1, True, size_rules) == ROLL_SIZE
    assert seg.append(batch(1, ts=T0 + 1001), 1, -1, True, rules) == ROLL_AGE
    # segment.ms less this segment's jitter
    assert seg.append(later, 1, -1, True, rules, 1) == ROLL_AGE
    assert seg.append(later, 2**31, -1, True, rules) == ROLL_OFFSET_OVERFLOW
    assert seg.size == len(first) and seg.next_offset == 1
    assert seg.append(later, 1, -1, True, rules).last_offset == 1  # exactly segment.ms: no roll
    assert seg.append(batch(1), 2, -1, True, rules) == ROLL_INDEX_FULL
    seg.close()
    untimed = new_segment(tmp_path, 100)
    untimed.append(batch(1, ts=-1), 100)
    assert untimed.append(batch(1, ts=-1), 101, -1, True, rules) == ROLL_CHECK_WALL_AGE
    untimed.close()
    empty = new_segment(tmp_path, 200)
    assert empty.append(batch(1), 200 + 2**31, -1, True, rules) == ROLL_OFFSET_OVERFLOW
    assert empty.size == 0
    empty.close()
