"""Our index code against Kafka's own output: rebuilding the indexes of a broker-written segment
(LDI-POC ``__consumer_offsets-6``, Kafka 3.7.0, clean shutdown) gives Kafka's ``.index`` and
``.timeindex`` byte for byte, and the files we write for the same appends are Kafka's."""

from __future__ import annotations

import os
import re

from seglog._native.segment import Segment
from seglog.storage.log import Log
from seglog.storage.records import batch_headers
from tests.logkit import CONSUMER_OFFSETS_6, copy_partition, read_offset_index, read_time_index

LOG = "00000000000000000000.log"
INDEX = "00000000000000000000.index"
TIMEINDEX = "00000000000000000000.timeindex"


def test_recover_rebuilds_kafkas_index_files_byte_for_byte(tmp_path):
    d = copy_partition(CONSUMER_OFFSETS_6, tmp_path, "__consumer_offsets-6")
    kafka_index = (d / INDEX).read_bytes()
    kafka_timeindex = (d / TIMEINDEX).read_bytes()
    assert (len(kafka_index), len(kafka_timeindex)) == (16, 36)
    # Start from nothing: no index files at all.
    (d / INDEX).unlink()
    (d / TIMEINDEX).unlink()
    seg = Segment(d, 0, index_interval_bytes=4096)
    res = seg.recover()
    assert (res.batches, res.next_offset, res.truncated_bytes, res.reason) == (13, 13, 0, None)
    assert res.epoch_starts == [(0, 0)]
    seg.close()
    assert (d / INDEX).read_bytes() == kafka_index
    assert (d / TIMEINDEX).read_bytes() == kafka_timeindex
    assert read_offset_index(d / INDEX, 0) == [(3, 4730), (7, 9571)]
    assert read_time_index(d / TIMEINDEX, 0) == [(1769791783399, 3), (1769792518093, 7), (1769793578176, 12)]
    assert (d / LOG).read_bytes() == (CONSUMER_OFFSETS_6 / LOG).read_bytes()


def test_recover_over_kafkas_files_and_over_garbage(tmp_path):
    d = copy_partition(CONSUMER_OFFSETS_6, tmp_path, "__consumer_offsets-6")
    kafka_index = (d / INDEX).read_bytes()
    kafka_timeindex = (d / TIMEINDEX).read_bytes()
    # Over Kafka's own (trimmed) files.
    seg = Segment(d, 0)
    seg.recover()
    seg.close()
    assert (d / INDEX).read_bytes() == kafka_index
    assert (d / TIMEINDEX).read_bytes() == kafka_timeindex
    # Over scrambled, preallocated-looking files.
    (d / INDEX).write_bytes(os.urandom(8) + bytes(800))
    (d / TIMEINDEX).write_bytes(b"\xff" * 120)
    seg = Segment(d, 0)
    seg.recover()
    seg.close()
    assert (d / INDEX).read_bytes() == kafka_index
    assert (d / TIMEINDEX).read_bytes() == kafka_timeindex


def test_log_open_of_a_copy_without_checkpoints_rebuilds_the_same_files(tmp_path):
    d = copy_partition(CONSUMER_OFFSETS_6, tmp_path, "__consumer_offsets-6")
    (d / INDEX).unlink()
    (d / TIMEINDEX).unlink()
    log = Log.open(d)
    assert log.recovery_summary.segments_recovered == 1
    log.close()
    assert (d / INDEX).read_bytes() == (CONSUMER_OFFSETS_6 / INDEX).read_bytes()
    assert (d / TIMEINDEX).read_bytes() == (CONSUMER_OFFSETS_6 / TIMEINDEX).read_bytes()
    assert (d / "leader-epoch-checkpoint").read_bytes() == (CONSUMER_OFFSETS_6 / "leader-epoch-checkpoint").read_bytes()


def test_replaying_kafkas_appends_writes_kafkas_files(tmp_path):
    """Append the fixture's batches one produce request at a time (each batch was one append
    on the broker) to a fresh log: the .log, .index and .timeindex equal the broker's."""
    src = (CONSUMER_OFFSETS_6 / LOG).read_bytes()
    heads = batch_headers(src, verify_crc=True)
    d = tmp_path / "__consumer_offsets-6"
    log = Log.open(d, {"index.interval.bytes": 4096})
    for h in heads:
        info = log.append(src[h.position : h.position + h.size], leader_epoch=h.partition_leader_epoch)
        assert (info.first_offset, info.last_offset) == (h.base_offset, h.last_offset)
    log.close()
    assert (d / LOG).read_bytes() == src
    assert (d / INDEX).read_bytes() == (CONSUMER_OFFSETS_6 / INDEX).read_bytes()
    assert (d / TIMEINDEX).read_bytes() == (CONSUMER_OFFSETS_6 / TIMEINDEX).read_bytes()
    assert (d / "leader-epoch-checkpoint").read_bytes() == (CONSUMER_OFFSETS_6 / "leader-epoch-checkpoint").read_bytes()
    names = set(os.listdir(d))
    assert {LOG, INDEX, TIMEINDEX} <= names
    assert names - {LOG, INDEX, TIMEINDEX} <= {"leader-epoch-checkpoint"}


def test_one_multi_batch_append_writes_kafkas_index_files(tmp_path):
    """The broker appended these 13 batches one by one; appending them all in one call (as a
    follower, the cleaner or the Spark writer does) indexes them batch by batch all the same:
    the .index and .timeindex equal the broker's, entry for entry."""
    src = (CONSUMER_OFFSETS_6 / LOG).read_bytes()
    for assign in (False, True):
        d = tmp_path / f"{assign}" / "__consumer_offsets-6"
        log = Log.open(d, {"index.interval.bytes": 4096})
        info = log.append(src, assign_offsets=assign, leader_epoch=0)
        assert (info.first_offset, info.last_offset) == (0, 12)
        log.close()
        assert (d / LOG).read_bytes() == src
        assert read_offset_index(d / INDEX, 0) == [(3, 4730), (7, 9571)]
        assert (d / INDEX).read_bytes() == (CONSUMER_OFFSETS_6 / INDEX).read_bytes()
        assert (d / TIMEINDEX).read_bytes() == (CONSUMER_OFFSETS_6 / TIMEINDEX).read_bytes()


def test_names_after_rolls_are_kafkas(tmp_path):
    d = tmp_path / "orders.v1-12"
    src = (CONSUMER_OFFSETS_6 / LOG).read_bytes()
    heads = batch_headers(src)
    limit = max(h.size for h in heads)  # the largest batch just fits a segment
    log = Log.open(d, {"segment.bytes": limit})
    expected: list[int] = []
    size, end = 0, 0
    for h in heads:
        log.append(src[h.position : h.position + h.size])
        if not expected or size > limit - h.size:  # Kafka's roll rule
            expected.append(end)
            size = 0
        size += h.size
        end += h.last_offset - h.base_offset + 1
    bases = [s.base_offset for s in log.segments]
    log.close()
    assert bases == expected and len(bases) > 5
    pattern = re.compile(r"^\d{20}\.(log|index|timeindex)$")
    for name in os.listdir(d):
        if name != "leader-epoch-checkpoint":
            assert pattern.match(name), name
            assert int(name.split(".")[0]) in bases
    # .lock: a Log writing on its own claims its partition through the log dir's lock file.
    assert sorted(os.listdir(tmp_path)) == [
        ".lock",
        "log-start-offset-checkpoint",
        "orders.v1-12",
        "recovery-point-offset-checkpoint",
    ]
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n1\norders.v1 12 13\n"
