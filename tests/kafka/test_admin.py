"""CreatePartitions, DeleteRecords, DescribeConfigs and IncrementalAlterConfigs through
kafka-python's admin client and librdkafka's."""

from __future__ import annotations

import uuid

import pytest

kafka = pytest.importorskip("kafka")
from kafka import KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions  # noqa: E402

from .conftest import new_topic  # noqa: E402


@pytest.fixture
def admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    yield client
    client.close()


def test_create_partitions(broker, admin):
    topic = new_topic(broker, 2)
    admin.create_partitions({topic: NewPartitions(5)})
    assert broker.store.partitions_for(topic) == 5
    with pytest.raises(kafka.errors.InvalidPartitionsError):
        admin.create_partitions({topic: NewPartitions(3)})
    admin.create_partitions({topic: NewPartitions(8)}, validate_only=True)
    assert broker.store.partitions_for(topic) == 5


def test_delete_records(broker, admin):
    topic = new_topic(broker)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    for i in range(10):
        producer.send(topic, b"%d" % i, partition=0)
    producer.flush()
    producer.close()
    result = admin.delete_records({TopicPartition(topic, 0): 4})
    assert broker.store.log(topic, 0).log_start_offset == 4
    assert list(result.values())[0]["low_watermark"] == 4


def test_describe_and_incrementally_alter_topic_configs(broker, admin):
    topic = new_topic(broker, config={"retention.ms": 1234567})
    found = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")["topic"][
        topic
    ]
    assert found["retention.ms"]["value"] == "1234567"
    assert found["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert found["segment.bytes"]["value"] == str(broker.store.topic_config(topic).segment_bytes)
    assert found["cleanup.policy"]["value"] == "delete"
    modified = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
    assert set(modified) == {"retention.ms"}

    admin.alter_configs(
        [
            ConfigResource(
                ConfigResourceType.TOPIC,
                topic,
                configs={"segment.ms": "600000", "cleanup.policy": ("APPEND", "compact")},
            )
        ],
        incremental=True,
    )
    config = broker.store.topic_config(topic)
    assert config.segment_ms == 600000 and config.compact and config.delete
    admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": ("DELETE", None)})], incremental=True
    )
    assert "retention.ms" not in broker.store.describe(topic)[0].config_overrides
    # A bad value changes nothing and names the key.
    result = admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"segment.ms": "600001", "retention.ms": "soon"})],
        incremental=True,
    )
    error = result["topic"][topic]
    assert "[Error 40]" in str(error) and "retention.ms" in str(error)  # INVALID_CONFIG
    assert broker.store.topic_config(topic).segment_ms == 600000


def test_describe_broker_configs(broker, admin):
    found = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")], config_filter="all")["broker"]["1"]
    assert found["num.partitions"]["value"] == str(broker.store.config.num_partitions)
    assert found["log.segment.bytes"]["read_only"] is True


def test_librdkafka_admin(broker):
    ck = pytest.importorskip("confluent_kafka.admin")
    topic = new_topic(broker, 1)
    client = ck.AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    client.create_partitions([ck.NewPartitions(topic, 3)])[topic].result(10)
    assert broker.store.partitions_for(topic) == 3
    resource = ck.ConfigResource(ck.ResourceType.TOPIC, topic)
    configs = client.describe_configs([resource])[resource].result(10)
    assert configs["retention.ms"].value == str(broker.store.topic_config(topic).retention_ms)
    alter = ck.ConfigResource(
        ck.ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ck.ConfigEntry("retention.ms", "86400000", incremental_operation=ck.AlterConfigOpType.SET)
        ],
    )
    client.incremental_alter_configs([alter])[alter].result(10)
    assert broker.store.topic_config(topic).retention_ms == 86400000


@pytest.mark.parametrize("validate_only", [False, True])
def test_create_topics_answers_the_new_topics_configs(broker, validate_only):
    # CreateTopics v5+ answers every config of the created topic (the Java AdminClient reads
    # them and fails on a null list).
    from .conftest import RawClient

    name = "adm-" + uuid.uuid4().hex[:10]
    client = RawClient(broker.bootstrap_servers)
    try:
        resp = client.request(
            "CreateTopics",
            19,
            7,
            {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": 2,
                        "replication_factor": -1,
                        "assignments": [],
                        "configs": [{"name": "cleanup.policy", "value": "compact"}],
                    }
                ],
                "timeout_ms": 1000,
                "validate_only": validate_only,
            },
        )
    finally:
        client.sock.close()
    topic = resp["topics"][0]
    assert topic["error_code"] == 0
    configs = {c["name"]: c for c in topic["configs"]}
    assert configs["cleanup.policy"]["value"] == "compact"
    assert configs["cleanup.policy"]["config_source"] == 1  # DYNAMIC_TOPIC_CONFIG
    assert configs["segment.bytes"]["config_source"] == 5  # DEFAULT_CONFIG
    assert (name in broker.store.topics()) is not validate_only


def test_create_and_delete_topics_answer_each_failure_with_its_code_and_message(broker, caplog):
    import logging

    from .conftest import RawClient

    caplog.set_level(logging.DEBUG, logger="seglog.kafka")
    name = new_topic(broker)
    missing = "adm-missing-" + uuid.uuid4().hex[:8]
    client = RawClient(broker.bootstrap_servers)
    try:
        created = client.request(
            "CreateTopics",
            19,
            7,
            {
                "topics": [
                    {"name": name, "num_partitions": 1, "replication_factor": -1, "assignments": [], "configs": []}
                ],
                "timeout_ms": 1000,
                "validate_only": False,
            },
        )["topics"][0]
        deleted = client.request("DeleteTopics", 20, 5, {"topic_names": [missing], "timeout_ms": 1000})["responses"][0]
    finally:
        client.sock.close()
    assert created["error_code"] == 36  # TOPIC_ALREADY_EXISTS
    assert name in created["error_message"]
    assert deleted["error_code"] == 3  # UNKNOWN_TOPIC_OR_PART
    assert missing in deleted["error_message"]
    logged = [r.getMessage() for r in caplog.records if r.name == "seglog.kafka"]
    assert any(f"CreateTopics {name} failed" in m for m in logged)
    assert any(f"DeleteTopics {missing} failed" in m for m in logged)


def test_librdkafka_admin_creates_describes_and_deletes_topics(broker):
    ck = pytest.importorskip("confluent_kafka.admin")
    name = "ck-" + uuid.uuid4().hex[:8]
    client = ck.AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    client.create_topics([ck.NewTopic(name, 4, 1, config={"cleanup.policy": "compact"})])[name].result(10)
    assert broker.store.partitions_for(name) == 4
    assert broker.store.topic_config(name).cleanup_policy == ("compact",)
    meta = client.list_topics(name, timeout=10)
    assert sorted(meta.topics[name].partitions) == [0, 1, 2, 3]
    # Every topic: librdkafka's all-topics Metadata v12 carries three bytes past its last field,
    # which Kafka's broker ignores (closing the connection on them made this call fail).
    everything = client.list_topics(timeout=10)
    assert name in everything.topics
    assert sorted(everything.topics[name].partitions) == [0, 1, 2, 3]
    with pytest.raises(ck.KafkaException, match="TOPIC_ALREADY_EXISTS"):
        client.create_topics([ck.NewTopic(name, 1, 1)])[name].result(10)
    client.delete_topics([name])[name].result(10)
    assert name not in broker.store.topics()
    with pytest.raises(ck.KafkaException, match="UNKNOWN_TOPIC_OR_PART"):
        client.delete_topics([name])[name].result(10)
