"""The broker-written segments in tests/fixtures/kafka-real decode completely, CRCs checked,
with the counts and offsets tests/fixtures/README.md states, and agree field by field with kafka-python."""

from __future__ import annotations

import hashlib

import pytest
from kafka.record.memory_records import MemoryRecords

from seglog.storage.records import batch_headers, decode_columns, decode_records

# path -> (batches, records, first offset, last offset, magic, compression)
EXPECTED = {
    "kafkalite/hamlet-gzip-0/00000000000000000000.log": (22, 5382, 0, 5381, 0, 1),
    "kafkalite/hamlet-snappy-0/00000000000000000000.log": (22, 5382, 0, 5381, 0, 2),
    "kafka-connect-spooldir/_confluent-command-0/00000000000000000000.log": (1, 2, 0, 1, 2, 3),
    "kafka-connect-spooldir/_confluent-controlcenter-5-1-2-1-monitoring-message-rekey-0/00000000000000000000.log": (
        11,
        11,
        0,
        10,
        2,
        3,
    ),
    "LDI-POC/__consumer_offsets-6/00000000000000000000.log": (13, 13, 0, 12, 2, 0),
    "LDI-POC/TestTopicPatient-0/00000000000000000000.log": (3, 3, 0, 2, 2, 0),
}


@pytest.fixture(scope="module")
def real(fixtures_dir):
    root = fixtures_dir / "kafka-real"
    sums = {}
    for line in (fixtures_dir / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split()
        name = name.lstrip("*").removeprefix("./")
        if name.startswith("kafka-real/"):
            sums[name.removeprefix("kafka-real/")] = digest
    return root, sums


def kafka_python_records(buf: bytes) -> list:
    out, mr = [], MemoryRecords(buf)
    while (batch := mr.next_batch()) is not None:
        if hasattr(batch, "validate_crc"):
            assert batch.validate_crc()
        out.extend(batch)
    return out


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_real_segment(real, rel):
    root, sums = real
    buf = (root / rel).read_bytes()
    assert hashlib.sha256(buf).hexdigest() == sums[rel], "fixture changed on disk"
    n_batches, n_records, first, last, magic, codec = EXPECTED[rel]

    heads = batch_headers(buf, verify_crc=True)
    assert len(heads) == n_batches
    assert {h.magic for h in heads} == {magic}
    assert {h.compression for h in heads} == {codec}
    assert heads[-1].position + heads[-1].size == len(buf)

    recs = decode_records(buf, verify_crc=True, include_control=True)
    assert len(recs) == n_records
    assert [r.offset for r in recs] == list(range(first, last + 1))

    theirs = kafka_python_records(buf)
    assert len(theirs) == len(recs)
    for ours, kp in zip(recs, theirs):
        kp_ts = -1 if kp.timestamp is None else kp.timestamp  # kafka-python says None where Kafka says -1
        assert (ours.offset, ours.timestamp, ours.key, ours.value) == (kp.offset, kp_ts, kp.key, kp.value)
        if magic == 2:
            assert ours.headers == [(k, v) for k, v in kp.headers]
            assert ours.timestamp_type == kp.timestamp_type

    cols = decode_columns(buf, include_control=True).to_arrow()
    assert cols.column("offset").to_pylist() == [r.offset for r in recs]
    assert cols.column("value").to_pylist() == [r.value for r in recs]


def test_log_append_time_fixture(real):
    root, _ = real
    rel = "kafka-connect-spooldir/_confluent-controlcenter-5-1-2-1-monitoring-message-rekey-0/00000000000000000000.log"
    buf = (root / rel).read_bytes()
    heads = batch_headers(buf)
    recs = decode_records(buf)
    assert all(h.attributes == 0x0B for h in heads)  # LZ4 + LogAppendTime
    # LogAppendTime: every record reads its batch's maxTimestamp, not base + delta.
    assert [r.timestamp for r in recs] == [h.max_timestamp for h in heads]
    assert {r.timestamp_type for r in recs} == {1}


def test_idempotent_producer_fixture(real):
    root, _ = real
    buf = (root / "LDI-POC/TestTopicPatient-0/00000000000000000000.log").read_bytes()
    recs = decode_records(buf)
    assert [(r.producer_id, r.producer_epoch, r.sequence) for r in recs] == [(1, 0, 0), (2, 0, 0), (3, 0, 0)]
