"""__consumer_offsets keys and values, checked against a Kafka 3.7 broker's records."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from seglog.errors import CorruptRecordError
from seglog.storage.group_offsets import (
    OffsetAndMetadata,
    decode_offset_key,
    decode_offset_value,
    encode_offset_key,
    encode_offset_value,
    java_string_hash,
    partition_for_group,
)
from seglog.storage.records import decode_records


def test_java_string_hash() -> None:
    # Values of java.lang.String.hashCode.
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2147483648
    assert java_string_hash("\U0001f600") == 31 * 0xD83D + 0xDE00  # two UTF-16 units
    assert partition_for_group("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) = 0


def test_fixture_group_lives_in_partition_6() -> None:
    # LDI-POC: group DEVSmileCDR's records are in __consumer_offsets-6 of 50.
    assert partition_for_group("DEVSmileCDR", 50) == 6


def test_decode_broker_records(fixtures_dir: Path) -> None:
    data = (fixtures_dir / "kafka-real/LDI-POC/__consumer_offsets-6/00000000000000000000.log").read_bytes()
    commits = []
    for r in decode_records(data):
        assert r.key is not None and r.value is not None  # no tombstones in this segment
        k = decode_offset_key(r.key)
        if k is None:
            assert r.key[:2] == b"\x00\x02"  # group metadata
            continue
        commits.append((k, decode_offset_value(r.value)))
    assert [k for k, _ in commits][-1] == ("DEVSmileCDR", "TestTopicPatient", 0)
    assert [v.offset for k, v in commits if k[1] == "TestTopicPatient"] == [0, 1, 2, 3]
    last = commits[-1][1]
    assert last.leader_epoch == -1 and last.metadata == "" and last.commit_timestamp > 1_700_000_000_000
    # Our encoding of the same commit is byte for byte the broker's.
    recs = [r for r in decode_records(data) if r.offset == 12]
    assert encode_offset_key("DEVSmileCDR", "TestTopicPatient", 0) == recs[0].key
    assert encode_offset_value(last) == recs[0].value


def test_value_versions() -> None:
    v0 = struct.pack(">hq", 0, 11) + struct.pack(">h", 2) + b"md" + struct.pack(">q", 123)
    assert decode_offset_value(v0) == OffsetAndMetadata(11, "md", -1, 123)
    v1 = struct.pack(">hq", 1, 12) + struct.pack(">h", 0) + struct.pack(">qq", 5, 6)
    assert decode_offset_value(v1) == OffsetAndMetadata(12, "", -1, 5)
    v4 = struct.pack(">hqi", 4, 13, 7) + bytes([3]) + b"ab" + struct.pack(">q", 9) + b"\x00"
    assert decode_offset_value(v4) == OffsetAndMetadata(13, "ab", 7, 9)
    with pytest.raises(CorruptRecordError):
        decode_offset_value(struct.pack(">hq", 3, 1))
    with pytest.raises(CorruptRecordError, match="version"):
        decode_offset_value(struct.pack(">h", -5))
    assert decode_offset_key(struct.pack(">h", 2) + b"\x00\x01g") is None
    om = OffsetAndMetadata(2**40, "é", 3, 77)
    assert decode_offset_value(encode_offset_value(om)) == om
    assert decode_offset_key(encode_offset_key("g", "t.x", 9)) == ("g", "t.x", 9)
