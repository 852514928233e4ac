"""Idempotent producer state: Kafka's sequence rules, the five-batch window, and the
``.snapshot`` file format (checked against a Kafka-written file and a struct-built oracle)."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import crc32c as crc32c_oracle
import pytest

from seglog.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from seglog.storage.log import Log
from seglog.storage.producer_state import (
    BatchMetadata,
    ProducerEntry,
    ProducerStateManager,
    decode_snapshot,
    encode_snapshot,
    last_sequence,
)
from seglog.storage.records import encode_batch
from tests.conftest import T0


def _ps() -> ProducerStateManager:
    return ProducerStateManager("/nonexistent")


def test_duplicates_of_the_last_five_batches_return_the_original_offsets() -> None:
    ps = _ps()
    for k in range(6):
        ps.update(7, 0, 2 * k, 2 * k + 1, 100 + 2 * k, 101 + 2 * k, T0)
    assert ps.check(7, 0, 10, 11) == BatchMetadata(10, 11, 110, 111, T0)
    assert ps.check(7, 0, 2, 3) == BatchMetadata(2, 3, 102, 103, T0)
    # The sixth-newest batch fell out of the window: an old duplicate is out of order.
    with pytest.raises(OutOfOrderSequenceError):
        ps.check(7, 0, 0, 1)
    assert ps.check(7, 0, 12, 12) is None


def test_sequence_gaps_epochs_and_unknown_producers() -> None:
    ps = _ps()
    assert ps.check(1, 0, 42, 42) is None  # unknown producer: any sequence
    ps.update(1, 3, 0, 4, 0, 4, T0)
    with pytest.raises(OutOfOrderSequenceError, match="expected 5"):
        ps.check(1, 3, 6, 6)
    with pytest.raises(InvalidProducerEpochError):
        ps.check(1, 2, 5, 5)
    with pytest.raises(OutOfOrderSequenceError, match="must start at sequence 0"):
        ps.check(1, 4, 5, 5)
    assert ps.check(1, 4, 0, 0) is None
    ps.update(1, 3, 2**31 - 1, 2**31 - 1, 9, 9, T0)
    assert ps.check(1, 3, 0, 0) is None  # sequences wrap to 0
    assert last_sequence(2**31 - 2, 3) == 0


def _kafka_snapshot(entries: list[tuple[int, int, int, int, int, int, int, int]]) -> bytes:
    body = struct.pack(">i", len(entries)) + b"".join(struct.pack(">qhiqiqiq", *e) for e in entries)
    return struct.pack(">hI", 1, crc32c_oracle.crc32c(body)) + body


def test_snapshot_bytes_match_kafkas_schema() -> None:
    e = ProducerEntry(9, 2)
    e.batches.append(BatchMetadata(10, 14, 200, 204, T0))
    e.batches.append(BatchMetadata(15, 19, 300, 304, T0 + 5))
    got = encode_snapshot([e, ProducerEntry(3)])  # an entry with no batch is not written
    assert got == _kafka_snapshot([(9, 2, 19, 304, 4, T0 + 5, -1, -1)])
    back = decode_snapshot(got)
    assert [(x.producer_id, x.epoch, list(x.batches)) for x in back] == [
        (9, 2, [BatchMetadata(15, 19, 300, 304, T0 + 5)])
    ]
    assert encode_snapshot([]) == bytes.fromhex("000148674bc700000000")


def test_kafka_written_snapshot_decodes(fixtures_dir: Path) -> None:
    path = fixtures_dir / "kafka-real/LDI-POC/__consumer_offsets-6/00000000000000000013.snapshot"
    assert decode_snapshot(path.read_bytes(), str(path)) == []


@pytest.mark.parametrize("damage", ["crc", "short", "version", "count"])
def test_damaged_snapshots_are_rejected_with_the_file_named(damage: str) -> None:
    data = bytearray(_kafka_snapshot([(1, 0, 5, 10, 5, T0, -1, -1)]))
    if damage == "crc":
        data[-1] ^= 1
    elif damage == "short":
        data = data[:5]
    elif damage == "version":
        data[1] = 2
    else:
        data += b"\0"
    with pytest.raises(ValueError, match="p.snapshot"):
        decode_snapshot(bytes(data), "p.snapshot")


def test_state_rebuilds_from_snapshot_and_log_after_truncation(tmp_path: Path) -> None:
    d = os.path.join(tmp_path, "t-0")
    log = Log.open(d, {"segment.bytes": 1024}, replicated=True)
    ps = ProducerStateManager(d)
    seq = 0
    for k in range(20):
        before = log.active.base_offset
        info = log.append(
            encode_batch([b"x" * 60, b"y" * 60], timestamps=T0, producer_id=5, producer_epoch=0, base_sequence=seq),
            leader_epoch=0,
        )
        if log.active.base_offset != before:
            ps.take_snapshot(log.active.base_offset)
        ps.update(5, 0, seq, seq + 1, info.first_offset, info.last_offset, T0)
        seq += 2
    snaps = ps.snapshot_offsets()
    assert len(snaps) >= 2 and all(s % 2 == 0 for s in snaps)
    fresh = ProducerStateManager(d)
    fresh.load(log)
    assert fresh.producers[5].last_seq == 39
    assert fresh.check(5, 0, 38, 39) == BatchMetadata(38, 39, 38, 39, T0)
    cut = snaps[-1] - 4
    log.truncate_to(cut)
    fresh.truncate_and_reload(log)
    assert max(fresh.snapshot_offsets()) <= cut
    assert fresh.producers[5].last_seq == cut - 1
    assert fresh.check(5, 0, cut, cut) is None
    with pytest.raises(OutOfOrderSequenceError):
        fresh.check(5, 0, 38, 39)
    log.close()
