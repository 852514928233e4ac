"""librdkafka (through confluent-kafka, and kcat) against a store served over Kafka's protocol."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from seglog.storage.records import decode_records
from tests.conftest import KAFKA_CODECS

from .conftest import new_topic


@pytest.mark.parametrize("compression", list(KAFKA_CODECS))
def test_confluent_producer_and_assigned_consumer(broker, compression):
    ck = pytest.importorskip("confluent_kafka")
    topic = new_topic(broker, partitions=3)
    producer = ck.Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "compression.type": compression,
            "enable.idempotence": True,
            "linger.ms": 5,
        }
    )
    sent: dict[bytes, list[bytes]] = {}
    for i in range(300):
        key = b"k%d" % (i % 11)
        producer.produce(topic, b"value-%d" % i, key=key, headers=[("i", str(i).encode())])
        sent.setdefault(key, []).append(b"value-%d" % i)
    assert producer.flush(15) == 0
    consumer = ck.Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        consumer.assign([ck.TopicPartition(topic, p, 0) for p in range(3)])
        got: dict[bytes, list[bytes]] = {}
        headers = set()
        deadline = time.monotonic() + 20
        n = 0
        while n < 300 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.setdefault(msg.key(), []).append(msg.value())
            headers.add(msg.headers()[0][1])
            n += 1
    finally:
        consumer.close()
    assert got == sent  # per key (one partition each), in order
    assert len(headers) == 300
    # librdkafka's idempotent batches landed with their producer id and sequence numbers.
    store = broker.store
    heads = [h for p in range(3) for h in store.log(topic, p).batches()]
    assert heads and all(h.producer_id >= 0 for h in heads)
    total = sum(len(decode_records(store.log(topic, p).read(0, 1 << 24).to_bytes())) for p in range(3))
    assert total == 300


def test_confluent_offsets_for_times_and_watermarks(broker):
    ck = pytest.importorskip("confluent_kafka")
    topic = new_topic(broker)
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap_servers})
    base = int(time.time() * 1000) - 50_000
    for i in range(5):
        producer.produce(topic, b"v", partition=0, timestamp=base + i * 100)
    assert producer.flush(10) == 0
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "unused"})
    try:
        assert consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10) == (0, 5)
        found = consumer.offsets_for_times([ck.TopicPartition(topic, 0, base + 250)], timeout=10)
        assert found[0].offset == 3
    finally:
        consumer.close()


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_produce_and_consume(broker):
    topic = new_topic(broker)
    lines = [f"line {i}" for i in range(20)]
    produced = subprocess.run(
        ["kcat", "-b", broker.bootstrap_servers, "-t", topic, "-P", "-K:"],
        input="\n".join(f"k{i}:{v}" for i, v in enumerate(lines)) + "\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        ["kcat", "-b", broker.bootstrap_servers, "-t", topic, "-C", "-o", "beginning", "-e", "-f", "%k=%s\\n"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == [f"k{i}={v}" for i, v in enumerate(lines)]
    records = decode_records(broker.store.log(topic, 0).read(0).to_bytes())
    assert [r.value for r in records] == [line.encode() for line in lines]
    listing = subprocess.run(
        ["kcat", "-b", broker.bootstrap_servers, "-L", "-t", topic], capture_output=True, text=True, timeout=30
    )
    assert listing.returncode == 0 and f'topic "{topic}" with 1 partitions' in listing.stdout


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kcat_acks_codecs_headers_idempotence_and_offsets_by_timestamp(broker, codec):
    topic = new_topic(broker)
    for acks in ("0", "1", "all"):
        extra = ["-X", "enable.idempotence=true"] if acks == "all" else []
        produced = subprocess.run(
            ["kcat", "-b", broker.bootstrap_servers, "-t", topic, "-P", "-K:", "-z", codec, "-H", f"acks={acks}"]
            + ["-X", f"acks={acks}", *extra],
            input="".join(f"k{i}:{acks}-{i}\n" for i in range(5)),
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert produced.returncode == 0, produced.stderr
    records = decode_records(broker.store.log(topic, 0).read(0).to_bytes())
    assert [r.value for r in records] == [f"{a}-{i}".encode() for a in ("0", "1", "all") for i in range(5)]
    assert {r.headers[0][1] for r in records} == {b"0", b"1", b"all"}
    ts = records[5].timestamp  # the first record produced with acks=1
    consumed = subprocess.run(
        ["kcat", "-b", broker.bootstrap_servers, "-t", topic, "-C", "-o", f"s@{ts}", "-e", "-f", "%o %s %h\\n"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert consumed.returncode == 0, consumed.stderr
    lines = consumed.stdout.splitlines()
    first = next(r.offset for r in records if r.timestamp >= ts)
    assert lines[0].startswith(f"{first} ") and len(lines) == 15 - first
    assert lines[-1] == "14 all-4 acks=all"
