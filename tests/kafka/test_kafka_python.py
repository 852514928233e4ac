"""kafka-python (a client nobody here wrote) against a store served over Kafka's protocol."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from seglog.storage.records import decode_records

from .conftest import new_topic

kafka = pytest.importorskip("kafka")
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import KafkaAdminClient, NewTopic  # noqa: E402
from kafka.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError  # noqa: E402
from kafka.record import MemoryRecords  # noqa: E402


def _consume(broker, topic: str, partition: int, count: int, **config) -> list:
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False, consumer_timeout_ms=3000, **config
    )
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        out = []
        for msg in consumer:
            out.append(msg)
            if len(out) == count:
                break
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize(
    "acks,compression", [(1, None), ("all", "gzip"), (0, "snappy"), (1, "lz4"), ("all", "zstd"), (0, None)]
)
def test_produce_and_consume_every_codec_and_acks(broker, acks, compression):
    topic = new_topic(broker, partitions=2)
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap_servers, acks=acks, compression_type=compression, linger_ms=5
    )
    sent = []
    for i in range(50):
        key = b"key-%d" % (i % 7) if i % 5 else None
        value = b"value-%d-" % i + b"x" * (i * 13)
        headers = [("h1", b"one"), ("n", str(i).encode())] if i % 2 else []
        future = producer.send(topic, value, key=key, headers=headers, partition=1)
        sent.append((key, value, headers, future))
    producer.flush()
    for _, _, _, future in sent:
        meta = future.get(5)
        assert meta.partition == 1
        if acks != 0:
            assert meta.offset >= 0
    producer.close()
    got = _consume(broker, topic, 1, 50)
    assert [(m.key, m.value, list(m.headers)) for m in got] == [
        (k, v, [(hk, hv) for hk, hv in h]) for k, v, h, _ in sent
    ]
    assert [m.offset for m in got] == list(range(50))
    # The same records through seglog's own Log API.
    data = broker.store.log(topic, 1).read(0, 1 << 24).to_bytes()
    records = decode_records(data)
    assert [(r.key, r.value) for r in records] == [(k, v) for k, v, _, _ in sent]
    # ... and through kafka-python's record codec, on the bytes the store holds.
    decoded: list[tuple[Any, Any]] = []
    mem = MemoryRecords(data)
    while mem.has_next():
        batch = mem.next_batch()
        if compression is not None:
            assert batch.compression_type != 0
        decoded.extend((r.key, r.value) for r in batch)
    assert decoded == [(k, v) for k, v, _, _ in sent]


def test_offsets_by_timestamp_and_ends(broker):
    topic = new_topic(broker)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks=1)
    base = int(time.time() * 1000) - 100_000
    for i in range(10):
        producer.send(topic, b"v%d" % i, partition=0, timestamp_ms=base + i * 1000)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 10}
        found = consumer.offsets_for_times({tp: base + 3500})
        assert found[tp].offset == 4 and found[tp].timestamp == base + 4000
        assert consumer.offsets_for_times({tp: base + 10**6})[tp] is None
    finally:
        consumer.close()


def test_long_poll_returns_as_soon_as_data_arrives(broker):
    topic = new_topic(broker)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False, fetch_max_wait_ms=5000
    )
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        assert consumer.poll(timeout_ms=300) == {}
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks=1)
        producer.send(topic, b"late", partition=0)
        producer.flush()
        producer.close()
        start = time.monotonic()
        got: list[Any] = []
        while not got and time.monotonic() - start < 10:
            got = consumer.poll(timeout_ms=1000).get(tp, [])
        # Well before the 5 s max wait of the fetch that was waiting.
        assert [m.value for m in got] == [b"late"]
        assert time.monotonic() - start < 3
    finally:
        consumer.close()


def test_admin_creates_and_deletes_topics(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    name = "admin-" + uuid.uuid4().hex[:8]
    try:
        admin.create_topics([NewTopic(name, 3, 1, topic_configs={"retention.ms": "3600000"})])
        assert broker.store.partitions_for(name) == 3
        assert broker.store.topic_config(name).retention_ms == 3600000
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic(name, 1, 1)])
        assert name in admin.list_topics()
        admin.delete_topics([name])
        assert name not in broker.store.topics()
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_topics([name])
    finally:
        admin.close()


def test_produce_to_missing_partition_gets_an_error(broker):
    topic = new_topic(broker)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks=1, max_block_ms=2000)
    try:
        with pytest.raises(Exception):
            producer.send(topic, b"x", partition=5).get(5)
    finally:
        producer.close()
    assert broker.store.log(topic, 0).log_end_offset == 0


def test_admin_errors_name_the_problem(broker):
    from kafka.errors import InvalidConfigurationError, InvalidReplicationFactorError

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        with pytest.raises(InvalidReplicationFactorError):
            admin.create_topics([NewTopic("rf3-" + uuid.uuid4().hex[:6], 1, 3)])
        with pytest.raises(InvalidConfigurationError, match="retention.mss"):
            admin.create_topics([NewTopic("cfg-" + uuid.uuid4().hex[:6], 1, 1, topic_configs={"retention.mss": "1"})])
        name = "v-" + uuid.uuid4().hex[:6]
        admin.create_topics([NewTopic(name, 2, 1)], validate_only=True)
        assert name not in broker.store.topics()
    finally:
        admin.close()
