"""aiokafka (an asyncio client nobody here wrote) against a store served over Kafka's protocol."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

aiokafka = pytest.importorskip("aiokafka")


def test_aiokafka_produce_consume_and_group(broker):
    topic = "a-" + uuid.uuid4().hex[:10]
    broker.store.create_topic(topic, 2)

    async def run() -> tuple[list, list, dict]:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap_servers, compression_type="gzip", acks="all"
        )
        await producer.start()
        try:
            metas = [
                await producer.send_and_wait(
                    topic, b"v%d" % i, key=b"k%d" % i, partition=i % 2, headers=[("h", b"%d" % i)]
                )
                for i in range(20)
            ]
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(
            topic,
            bootstrap_servers=broker.bootstrap_servers,
            group_id="aio-" + uuid.uuid4().hex[:6],
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        got: list[tuple[Any, Any, list[Any]]] = []
        try:
            while len(got) < 20:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 20)
                for records in batch.values():
                    got.extend((m.key, m.value, list(m.headers)) for m in records)
            await consumer.commit()
            committed = {p: await consumer.committed(aiokafka.TopicPartition(topic, p)) for p in (0, 1)}
        finally:
            await consumer.stop()
        return metas, got, committed

    metas, got, committed = asyncio.run(run())
    assert sorted(m.offset for m in metas if m.partition == 0) == list(range(10))
    assert sorted(got) == sorted((b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)]) for i in range(20))
    assert committed == {0: 10, 1: 10}


def test_aiokafka_acks_offsets_by_timestamp_and_admin(broker):
    """acks 0 and 1 beside the test above's all; offsets_for_times; topics created, described
    and deleted through AIOKafkaAdminClient."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    topic = "ab-" + uuid.uuid4().hex[:10]
    made = "made-" + uuid.uuid4().hex[:8]
    base = 1_700_000_000_000

    async def run() -> tuple[list, dict, list, list, list]:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, 1, 1), NewTopic(made, 3, 1)])
            described = await admin.describe_topics([made])
            listed = await admin.list_topics()
            for acks in (0, 1):
                producer = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks=acks)
                await producer.start()
                try:
                    metas = [
                        await producer.send_and_wait(topic, b"a%d-%d" % (acks, i), timestamp_ms=base + 1000 * acks + i)
                        for i in range(5)
                    ]
                finally:
                    await producer.stop()
            consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
            await consumer.start()
            try:
                tp = aiokafka.TopicPartition(topic, 0)
                found = await consumer.offsets_for_times({tp: base + 1002})
                past_end = await consumer.offsets_for_times({tp: base + 10**6})
            finally:
                await consumer.stop()
            await admin.delete_topics([made])
            after = await admin.list_topics()
        finally:
            await admin.close()
        return metas, {"found": found[tp], "past_end": past_end[tp]}, described, listed, after

    metas, offsets, described, listed, after = asyncio.run(run())
    assert [m.offset for m in metas] == [5, 6, 7, 8, 9]  # the acks=1 sends; the acks=0 ones came first
    assert offsets["found"].offset == 7 and offsets["found"].timestamp == base + 1002
    assert offsets["past_end"] is None
    assert described[0]["error_code"] == 0 and len(described[0]["partitions"]) == 3
    assert topic in listed and made in listed and made not in after
    assert made not in broker.store.topics()
    from seglog.storage.records import decode_records

    stored = decode_records(broker.store.log(topic, 0).read(0).to_bytes())
    assert [r.value for r in stored] == [b"a%d-%d" % (acks, i) for acks in (0, 1) for i in range(5)]
