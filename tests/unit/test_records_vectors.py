"""Every Kafka-generated vector: uncompressed ones encode byte-exactly, all decode to their inputs."""

from __future__ import annotations

from typing import Any

import pytest

from seglog.storage.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_TIMESTAMP_TYPE,
    batch_headers,
    decode_columns,
    decode_records,
    encode_batch,
    encode_control_batch,
)
from tests.conftest import T0
from tests.vectors import common_columns, segment_file, vector, vector_names

# name -> encode_batch keyword arguments that reproduce it (uncompressed vectors only).
ENCODE_ARGS: dict[str, dict[str, Any]] = {
    "v2_none_create_base0_ple0": dict(partition_leader_epoch=0),
    "v2_none_create_base0_ple5": dict(partition_leader_epoch=5),
    "v2_none_logappend": dict(partition_leader_epoch=0, log_append_time=1700000009999),
    "v2_none_idempotent_base100": dict(
        base_offset=100, partition_leader_epoch=2, producer_id=1000, producer_epoch=3, base_sequence=7
    ),
    "v2_none_txn_base200": dict(
        base_offset=200,
        partition_leader_epoch=2,
        producer_id=2000,
        producer_epoch=1,
        base_sequence=0,
        is_transactional=True,
    ),
}


@pytest.mark.parametrize("name", sorted(ENCODE_ARGS))
def test_encode_byte_exact(name):
    values, keys, ts, headers = common_columns()
    assert encode_batch(values, keys=keys, timestamps=ts, headers=headers, **ENCODE_ARGS[name]) == vector(name)


@pytest.mark.parametrize("control_type,name", [(1, "v2_commit_marker_off203"), (0, "v2_abort_marker_off203")])
def test_encode_control_marker_byte_exact(control_type, name):
    got = encode_control_batch(
        control_type,
        base_offset=203,
        timestamp=T0 + 1000,
        producer_id=2000,
        producer_epoch=1,
        coordinator_epoch=7,
        partition_leader_epoch=2,
    )
    assert got == vector(name)


def test_encode_empty_key_and_value_byte_exact():
    got = encode_batch([b""], keys=[b""], timestamps=[T0], partition_leader_epoch=0)
    assert got == vector("v2_empty_key_empty_value")


@pytest.mark.parametrize("name", vector_names())
def test_every_vector_decodes_to_its_inputs(name):
    values, keys, ts, headers = common_columns()
    buf = vector(name)
    if "marker" in name:
        assert decode_records(buf) == []
        (rec,) = decode_records(buf, include_control=True)
        assert rec.is_control and rec.offset == 203 and rec.control_type == (1 if "commit" in name else 0)
        assert rec.value == bytes.fromhex("000000000007")  # version 0, coordinator epoch 7
        assert rec.producer_id == 2000 and rec.producer_epoch == 1 and rec.leader_epoch == 2
        return
    if name == "v2_empty_key_empty_value":
        (rec,) = decode_records(buf)
        assert (rec.key, rec.value, rec.timestamp, rec.headers) == (b"", b"", T0, [])
        return
    recs = decode_records(buf)
    assert [r.value for r in recs] == values
    assert [r.key for r in recs] == keys
    base = {"v2_none_idempotent_base100": 100, "v2_none_txn_base200": 200}.get(name, 0)
    assert [r.offset for r in recs] == [base, base + 1, base + 2]
    if name.startswith("v2"):
        assert [r.headers for r in recs] == headers
        if name == "v2_none_logappend":
            assert [r.timestamp for r in recs] == [1700000009999] * 3
            assert {r.timestamp_type for r in recs} == {LOG_APPEND_TIME}
        else:
            assert [r.timestamp for r in recs] == ts
            assert {r.timestamp_type for r in recs} == {CREATE_TIME}
    elif name.startswith("v1"):
        assert [r.timestamp for r in recs] == ts
        assert {r.magic for r in recs} == {1}
    else:
        assert [r.timestamp for r in recs] == [-1, -1, -1]
        assert {r.timestamp_type for r in recs} == {NO_TIMESTAMP_TYPE}
    if name == "v2_none_idempotent_base100":
        assert [(r.producer_id, r.producer_epoch, r.sequence) for r in recs] == [
            (1000, 3, 7),
            (1000, 3, 8),
            (1000, 3, 9),
        ]
    if name == "v2_none_txn_base200":
        assert all(r.is_transactional for r in recs)


@pytest.mark.parametrize("name", vector_names())
def test_columns_agree_with_records(name):
    buf = vector(name)
    recs = decode_records(buf, include_control=True)
    cols = decode_columns(buf, include_control=True)
    table = cols.to_arrow().to_pylist()
    assert decode_columns(buf, include_control=True, views=True).to_arrow().to_pylist() == table
    assert len(table) == len(recs) == cols.count
    for row, rec in zip(table, recs):
        assert row["offset"] == rec.offset
        assert row["timestamp"] == rec.timestamp
        assert row["timestampType"] == rec.timestamp_type
        assert row["leaderEpoch"] == rec.leader_epoch
        assert row["key"] == rec.key
        assert row["value"] == rec.value
        assert [(h["key"], h["value"]) for h in row["headers"]] == rec.headers


def test_segment_file_decodes():
    buf = segment_file().read_bytes()
    heads = batch_headers(buf, verify_crc=True)
    assert [h.base_offset for h in heads] == [0, 3, 6, 9, 12, 15, 18]
    assert [h.compression for h in heads] == [0, 1, 2, 3, 4, 0, 0]
    assert heads[-1].is_control and heads[-2].is_transactional
    data = decode_records(buf)
    assert [r.offset for r in data] == list(range(18))
    values, _, _, _ = common_columns()
    assert [r.value for r in data[:15]] == values * 5
    assert len(decode_records(buf, include_control=True)) == 19
