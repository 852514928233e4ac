"""The ``kafka_broker`` fixture of seglog's pytest plugin (entry point ``pytest11``), used as
another project's tests would use it."""

from __future__ import annotations

import pytest

kafka = pytest.importorskip("kafka")


def test_kafka_broker_fixture_serves_a_fresh_store(kafka_broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    assert kafka_broker.store.topics() == []
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
    producer.send("created-on-first-use", b"hello").get(10)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap_servers, consumer_timeout_ms=1000)
    try:
        tp = TopicPartition("created-on-first-use", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        assert [m.value for m in consumer] == [b"hello"]
    finally:
        consumer.close()


@pytest.mark.kafka_broker_config({"num.partitions": 3})
def test_kafka_broker_config_marker(kafka_broker):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
    producer.send("three", b"x").get(10)
    producer.close()
    assert kafka_broker.store.partitions_for("three") == 3


def test_the_plugin_is_registered_by_its_entry_point(pytestconfig):
    assert pytestconfig.pluginmanager.has_plugin("seglog")
