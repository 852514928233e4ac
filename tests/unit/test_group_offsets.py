"""__consumer_offsets keys and values, checked against a Kafka 3.7 broker's records."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from seglog.errors import CorruptRecordError
from seglog.storage.group_offsets import (
    GroupMetadata,
    MemberMetadata,
    OffsetAndMetadata,
    decode_group_key,
    decode_group_value,
    decode_offset_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
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


def test_group_metadata_records_of_a_broker(fixtures_dir: Path) -> None:
    """The broker's group metadata records (value v3) decode, and encode back byte for byte."""
    data = (fixtures_dir / "kafka-real/LDI-POC/__consumer_offsets-6/00000000000000000000.log").read_bytes()
    seen = []
    for r in decode_records(data):
        assert r.key is not None and r.value is not None
        group = decode_group_key(r.key)
        if group is None:
            continue
        md = decode_group_value(r.value)
        seen.append((md.generation, md.protocol, len(md.members)))
        assert encode_group_key(group) == r.key and encode_group_value(md) == r.value
        assert group == "DEVSmileCDR" and md.protocol_type == "consumer"
        if md.members:
            assert md.leader in {m.member_id for m in md.members}
            assert all(m.session_timeout_ms > 0 and m.subscription and m.assignment for m in md.members)
    # Generation 3 is the group emptied: no protocol, no leader, no members.
    assert seen == [
        (1, "range", 8),
        (2, "range", 13),
        (3, None, 0),
        (4, "range", 8),
        (5, "range", 13),
        (6, "range", 17),
    ]


def test_group_metadata_value_versions() -> None:
    member = MemberMetadata("m-1", "inst", "client", "/10.0.0.1", 300, 100, b"sub", b"asg")
    md = GroupMetadata("consumer", 7, "range", "m-1", 1234, (member,))
    assert decode_group_value(encode_group_value(md)) == md
    # Version 0: no state timestamp, instance id or rebalance timeout (the session timeout then).
    s = lambda t: struct.pack(">h", len(t)) + t  # noqa: E731
    v0 = (
        struct.pack(">h", 0) + s(b"consumer") + struct.pack(">i", 2) + s(b"range") + s(b"m")
        + struct.pack(">i", 1) + s(b"m") + s(b"c") + s(b"/h") + struct.pack(">i", 50)
        + struct.pack(">i", 1) + b"S" + struct.pack(">i", 0)
    )  # fmt: skip
    assert decode_group_value(v0) == GroupMetadata(
        "consumer", 2, "range", "m", -1, (MemberMetadata("m", None, "c", "/h", 50, 50, b"S", b""),)
    )
    # Version 4 (flexible): compact strings and arrays, tagged fields.
    c = lambda t: bytes([len(t) + 1]) + t  # noqa: E731
    v4 = (
        struct.pack(">h", 4) + c(b"consumer") + struct.pack(">i", 3) + b"\x00" + b"\x00"
        + struct.pack(">q", 5) + bytes([2]) + c(b"m") + b"\x00" + c(b"c") + c(b"/h")
        + struct.pack(">ii", 60, 40) + c(b"S") + c(b"A") + b"\x00" + b"\x00"
    )  # fmt: skip
    assert decode_group_value(v4) == GroupMetadata(
        "consumer", 3, None, None, 5, (MemberMetadata("m", None, "c", "/h", 60, 40, b"S", b"A"),)
    )
    with pytest.raises(CorruptRecordError, match="version 9"):
        decode_group_value(struct.pack(">h", 9))
    with pytest.raises(CorruptRecordError):
        decode_group_value(v0[:-3])
    assert decode_group_key(encode_offset_key("g", "t", 0)) is None
