"""aiokafka (an asyncio client nobody here wrote) against a store served over Kafka's protocol."""

from __future__ import annotations

import asyncio
import uuid

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
        got = []
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
