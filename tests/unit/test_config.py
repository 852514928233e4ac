from __future__ import annotations

import dataclasses
import doctest
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from seglog.config import (
    CONFIG_KEYS,
    INT_MAX,
    LONG_MAX,
    LONG_MIN,
    BrokerConfig,
    ConfigKey,
    ConsumerConfig,
    LogConfig,
    ProducerConfig,
    configuration_markdown,
    format_properties,
    parse_properties,
)
from seglog.errors import ConfigError
from tests.conftest import ROOT

CLASSES: dict[str, Any] = {
    "topic": LogConfig,
    "broker": BrokerConfig,
    "producer": ProducerConfig,
    "consumer": ConsumerConfig,
}

# --------------------------------------------------------------------------------------
# Kafka's defaults (3.9), written out by hand from LogConfig, ServerLogConfigs,
# ReplicationConfigs, KafkaConfig, ProducerConfig and ConsumerConfig.
# --------------------------------------------------------------------------------------

KAFKA_DEFAULTS: dict[str, dict[str, Any]] = {
    "topic": {
        "segment.bytes": 1073741824,
        "segment.ms": 604800000,
        "segment.jitter.ms": 0,
        "segment.index.bytes": 10485760,
        "index.interval.bytes": 4096,
        "flush.messages": 9223372036854775807,
        "flush.ms": 9223372036854775807,
        "retention.ms": 604800000,
        "retention.bytes": -1,
        "file.delete.delay.ms": 60000,
        "max.message.bytes": 1048588,
        "message.timestamp.type": "CreateTime",
        "message.timestamp.before.max.ms": 9223372036854775807,
        "message.timestamp.after.max.ms": 9223372036854775807,
        "cleanup.policy": ("delete",),
        "delete.retention.ms": 86400000,
        "min.cleanable.dirty.ratio": 0.5,
        "min.compaction.lag.ms": 0,
        "max.compaction.lag.ms": 9223372036854775807,
        "compression.type": "producer",
        "compression.gzip.level": -1,
        "compression.lz4.level": 9,
        "compression.zstd.level": 3,
        "preallocate": False,
        "min.insync.replicas": 1,
        "unclean.leader.election.enable": False,
    },
    "broker": {
        "node.id": -1,
        "broker.id": -1,
        "listeners": ("PLAINTEXT://:9092",),
        "zookeeper.connect": None,
        "zookeeper.session.timeout.ms": 18000,
        "controlled.shutdown.enable": True,
        "controlled.shutdown.max.retries": 3,
        "controlled.shutdown.retry.backoff.ms": 5000,
        "log.dirs": None,
        "log.dir": "/tmp/kafka-logs",
        "num.partitions": 1,
        "default.replication.factor": 1,
        "num.recovery.threads.per.data.dir": 1,
        "log.retention.check.interval.ms": 300000,
        "log.flush.scheduler.interval.ms": 9223372036854775807,
        "log.flush.offset.checkpoint.interval.ms": 60000,
        "log.segment.bytes": 1073741824,
        "log.roll.ms": None,
        "log.roll.hours": 168,
        "log.retention.ms": None,
        "log.retention.minutes": None,
        "log.retention.hours": 168,
        "log.retention.bytes": -1,
        "log.index.size.max.bytes": 10485760,
        "log.index.interval.bytes": 4096,
        "log.flush.interval.messages": 9223372036854775807,
        "log.flush.interval.ms": None,
        "log.segment.delete.delay.ms": 60000,
        "message.max.bytes": 1048588,
        "log.cleaner.min.cleanable.ratio": 0.5,
        "compression.type": "producer",
        "min.insync.replicas": 1,
        "unclean.leader.election.enable": False,
        "replica.lag.time.max.ms": 30000,
        "replica.fetch.max.bytes": 1048576,
        "replica.fetch.response.max.bytes": 10485760,
        "replica.fetch.min.bytes": 1,
        "replica.fetch.wait.max.ms": 500,
        "replica.fetch.backoff.ms": 1000,
        "replica.socket.timeout.ms": 30000,
        "replica.socket.receive.buffer.bytes": 65536,
        "num.replica.fetchers": 1,
        "replica.high.watermark.checkpoint.interval.ms": 5000,
        "auto.leader.rebalance.enable": True,
        "leader.imbalance.check.interval.seconds": 300,
        "leader.imbalance.per.broker.percentage": 10,
        "producer.id.expiration.ms": 86400000,
        "max.incremental.fetch.session.cache.slots": 1000,
        "fetch.max.bytes": 57671680,
        "num.network.threads": 3,
        "num.io.threads": 8,
        "socket.send.buffer.bytes": 102400,
        "socket.request.max.bytes": 104857600,
        "offsets.topic.replication.factor": 3,
        "transaction.state.log.min.isr": 2,
        "group.initial.rebalance.delay.ms": 3000,
    },
    "producer": {
        "acks": "all",
        "batch.size": 16384,
        "linger.ms": 0,
        "compression.type": "none",
        "max.in.flight.requests.per.connection": 5,
        "retries": 2147483647,
        "retry.backoff.ms": 100,
        "retry.backoff.max.ms": 1000,
        "delivery.timeout.ms": 120000,
        "request.timeout.ms": 30000,
        "max.request.size": 1048576,
        "buffer.memory": 33554432,
        "max.block.ms": 60000,
    },
    "consumer": {
        "group.id": None,
        "auto.offset.reset": "latest",
        "enable.auto.commit": True,
        "auto.commit.interval.ms": 5000,
        "isolation.level": "read_uncommitted",
        "fetch.min.bytes": 1,
        "fetch.max.bytes": 52428800,
        "fetch.max.wait.ms": 500,
        "max.partition.fetch.bytes": 1048576,
        "max.poll.records": 500,
        "check.crcs": True,
        "request.timeout.ms": 30000,
        "default.api.timeout.ms": 60000,
    },
}


@pytest.mark.parametrize("scope", list(KAFKA_DEFAULTS))
def test_defaults_match_kafka(scope: str) -> None:
    config = CLASSES[scope]()
    values = config.to_dict()
    for key, expected in KAFKA_DEFAULTS[scope].items():
        assert values[key] == expected, key
        assert type(values[key]) is type(expected), key


def test_idempotence_default_is_kafkas_true() -> None:
    assert ProducerConfig().idempotent is True


# --------------------------------------------------------------------------------------
# Kafka's validators, written out by hand. Every key with a validator must appear here.
# --------------------------------------------------------------------------------------

AT_LEAST: dict[tuple[str, str], int] = {
    **{
        ("topic", k): v
        for k, v in {
            "segment.bytes": 14,
            "segment.ms": 1,
            "segment.jitter.ms": 0,
            "segment.index.bytes": 4,
            "index.interval.bytes": 0,
            "flush.messages": 1,
            "flush.ms": 0,
            "retention.ms": -1,
            "file.delete.delay.ms": 0,
            "max.message.bytes": 0,
            "message.timestamp.before.max.ms": 0,
            "message.timestamp.after.max.ms": 0,
            "delete.retention.ms": 0,
            "min.compaction.lag.ms": 0,
            "max.compaction.lag.ms": 1,
            "min.insync.replicas": 1,
        }.items()
    },
    **{
        ("broker", k): v
        for k, v in {
            "num.partitions": 1,
            "num.recovery.threads.per.data.dir": 1,
            "log.retention.check.interval.ms": 1,
            "log.flush.offset.checkpoint.interval.ms": 0,
            "log.flush.start.offset.checkpoint.interval.ms": 0,
            "log.segment.bytes": 14,
            "log.roll.hours": 1,
            "log.roll.jitter.hours": 0,
            "log.index.size.max.bytes": 4,
            "log.index.interval.bytes": 0,
            "log.flush.interval.messages": 1,
            "log.segment.delete.delay.ms": 0,
            "message.max.bytes": 0,
            "log.message.timestamp.before.max.ms": 0,
            "log.message.timestamp.after.max.ms": 0,
            "log.cleaner.backoff.ms": 0,
            "log.cleaner.delete.retention.ms": 0,
            "log.cleaner.min.compaction.lag.ms": 0,
            "log.cleaner.max.compaction.lag.ms": 1,
            "min.insync.replicas": 1,
            "replica.fetch.max.bytes": 0,
            "replica.fetch.response.max.bytes": 0,
            "replica.fetch.backoff.ms": 0,
            "leader.imbalance.check.interval.seconds": 1,
            "producer.id.expiration.ms": 1,
            "max.incremental.fetch.session.cache.slots": 0,
            "fetch.max.bytes": 1024,
            "num.network.threads": 1,
            "num.io.threads": 1,
            "socket.request.max.bytes": 1,
            "connections.max.idle.ms": 1,
            "offsets.topic.num.partitions": 1,
            "offsets.topic.segment.bytes": 1,
            "offsets.topic.replication.factor": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
        }.items()
    },
    **{
        ("producer", k): v
        for k, v in {
            "batch.size": 0,
            "linger.ms": 0,
            "max.in.flight.requests.per.connection": 1,
            "retry.backoff.ms": 0,
            "retry.backoff.max.ms": 0,
            "delivery.timeout.ms": 0,
            "request.timeout.ms": 0,
            "max.request.size": 0,
            "buffer.memory": 0,
            "max.block.ms": 0,
            "partitioner.availability.timeout.ms": 0,
        }.items()
    },
    **{
        ("consumer", k): v
        for k, v in {
            "auto.commit.interval.ms": 0,
            "fetch.min.bytes": 0,
            "fetch.max.bytes": 0,
            "fetch.max.wait.ms": 0,
            "max.partition.fetch.bytes": 0,
            "max.poll.records": 1,
            "request.timeout.ms": 0,
            "default.api.timeout.ms": 0,
            "retry.backoff.ms": 0,
        }.items()
    },
}

BETWEEN: dict[tuple[str, str], tuple[int | float, int | float]] = {
    ("topic", "min.cleanable.dirty.ratio"): (0, 1),
    ("broker", "log.cleaner.min.cleanable.ratio"): (0, 1),
    ("producer", "retries"): (0, 2147483647),
    **{
        (scope, name): bounds
        for scope in ("topic", "broker", "producer")
        for name, bounds in {
            "compression.lz4.level": (1, 17),
            "compression.zstd.level": (-131072, 22),
        }.items()
    },
}

GZIP_LEVEL = [("topic", "compression.gzip.level"), ("broker", "compression.gzip.level"),
              ("producer", "compression.gzip.level")]  # fmt: skip

ONE_OF: dict[tuple[str, str], tuple[str, ...]] = {
    ("topic", "message.timestamp.type"): ("CreateTime", "LogAppendTime"),
    ("broker", "log.message.timestamp.type"): ("CreateTime", "LogAppendTime"),
    ("topic", "compression.type"): ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    ("broker", "compression.type"): ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    ("producer", "compression.type"): ("none", "gzip", "snappy", "lz4", "zstd"),
    ("producer", "acks"): ("all", "-1", "0", "1"),
    ("consumer", "auto.offset.reset"): ("latest", "earliest", "none"),
    ("consumer", "isolation.level"): ("read_committed", "read_uncommitted"),
}

LIST_OF: dict[tuple[str, str], tuple[str, ...]] = {
    ("topic", "cleanup.policy"): ("compact", "delete"),
    ("broker", "log.cleanup.policy"): ("compact", "delete"),
}

# Other keys needed so that a boundary value passes the cross-key checks.
CONTEXT: dict[tuple[str, str], dict[str, Any]] = {
    ("producer", "delivery.timeout.ms"): {"request.timeout.ms": 0},
}


def _build(scope: str, values: dict[str, Any]) -> Any:
    return CLASSES[scope].from_dict(values)


def _assert_rejected(scope: str, key: str, value: Any, *fragments: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        _build(scope, {**CONTEXT.get((scope, key), {}), key: value})
    message = str(info.value)
    assert key in message and str(value) in message, message
    for fragment in fragments:
        assert fragment in message, message
    assert info.value.key == key
    return info.value


def test_every_validator_is_covered() -> None:
    validated = {(k.scope, k.name) for k in CONFIG_KEYS if k.validator is not None}
    covered = set(AT_LEAST) | set(BETWEEN) | set(GZIP_LEVEL) | set(ONE_OF) | set(LIST_OF)
    assert validated == covered


@pytest.mark.parametrize(("scope", "key"), sorted(AT_LEAST))
def test_at_least(scope: str, key: str) -> None:
    low = AT_LEAST[(scope, key)]
    context = CONTEXT.get((scope, key), {})
    assert getattr(_build(scope, {**context, key: low}), key.replace(".", "_")) == low
    assert getattr(_build(scope, {**context, key: str(low + 5)}), key.replace(".", "_")) == low + 5
    _assert_rejected(scope, key, low - 1, f"at least {low}", f"[{low},...]")


@pytest.mark.parametrize(("scope", "key"), sorted(BETWEEN))
def test_between(scope: str, key: str) -> None:
    low, high = BETWEEN[(scope, key)]
    attr = key.replace(".", "_")
    assert getattr(_build(scope, {key: low}), attr) == low
    assert getattr(_build(scope, {key: high}), attr) == high
    step = 0.001 if isinstance(low, float) or key.endswith("ratio") else 1
    for bad in (low - step, high + step):
        if key == "retries" and bad > INT_MAX:
            continue  # beyond a Java int: rejected as out of the type's range instead
        _assert_rejected(scope, key, bad, "between", f"[{low},...,{high}]")
    if key == "retries":
        _assert_rejected(scope, key, INT_MAX + 1, "Java int")


@pytest.mark.parametrize(("scope", "key"), GZIP_LEVEL)
def test_gzip_level(scope: str, key: str) -> None:
    for good in (-1, 1, 9):
        assert _build(scope, {key: good}).compression_gzip_level == good
    for bad in (0, -2, 10):
        _assert_rejected(scope, key, bad, "[1,...,9] or -1")


@pytest.mark.parametrize(("scope", "key"), sorted(ONE_OF))
def test_one_of(scope: str, key: str) -> None:
    attr = key.replace(".", "_")
    for good in ONE_OF[(scope, key)]:
        assert getattr(_build(scope, {key: good}), attr) == good
    # Case-sensitive, like Kafka's ValidString.
    for bad in ("bogus", ONE_OF[(scope, key)][0].upper() + "X", ""):
        _assert_rejected(scope, key, bad, "one of")


@pytest.mark.parametrize(("scope", "key"), sorted(LIST_OF))
def test_list_of(scope: str, key: str) -> None:
    attr = key.replace(".", "_")
    assert getattr(_build(scope, {key: "compact, delete"}), attr) == ("compact", "delete")
    assert getattr(_build(scope, {key: ["delete"]}), attr) == ("delete",)
    assert getattr(_build(scope, {key: ""}), attr) == ()
    error = _assert_rejected(scope, key, "compact,forever", "'forever'", "[compact, delete]")
    assert error.value == "compact,forever"


def test_unvalidated_keys_take_their_whole_type() -> None:
    assert LogConfig(retention_bytes=LONG_MIN).retention_bytes == LONG_MIN
    assert LogConfig(retention_bytes=LONG_MAX).retention_bytes == LONG_MAX
    assert BrokerConfig(default_replication_factor=-7).default_replication_factor == -7


# --------------------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------------------


def test_strings_from_properties_files_are_parsed() -> None:
    cfg = LogConfig.from_dict(
        {
            "segment.bytes": " 1073741823 ",
            "retention.ms": "-1",
            "preallocate": "TRUE",
            "unclean.leader.election.enable": "false",
            "min.cleanable.dirty.ratio": "0.25",
            "cleanup.policy": " compact ,delete ",
            "message.timestamp.type": " LogAppendTime ",
        }
    )
    assert cfg.segment_bytes == 1073741823
    assert cfg.retention_ms == -1
    assert cfg.preallocate is True
    assert cfg.unclean_leader_election_enable is False
    assert cfg.min_cleanable_dirty_ratio == 0.25
    assert cfg.cleanup_policy == ("compact", "delete")
    assert cfg.message_timestamp_type == "LogAppendTime"


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("segment.bytes", "1.5", "whole number"),
        ("segment.bytes", "0x10", "whole number"),
        ("segment.bytes", "1_000_000", "whole number"),
        ("segment.bytes", "", "whole number"),
        ("segment.bytes", 1048576.0, "whole number"),
        ("segment.bytes", True, "boolean"),
        ("segment.bytes", 2**31, "Java int"),
        ("retention.ms", 2**63, "Java long"),
        ("retention.ms", "-9223372036854775809", "Java long"),
        ("preallocate", "yes", "true or false"),
        ("preallocate", 1, "true or false"),
        ("min.cleanable.dirty.ratio", "half", "number"),
        ("min.cleanable.dirty.ratio", "nan", "NaN"),
        ("min.cleanable.dirty.ratio", "0_5", "number"),
        ("min.cleanable.dirty.ratio", False, "boolean"),
        ("cleanup.policy", "compact,,delete", "empty item"),
        ("cleanup.policy", 5, "comma-separated"),
        ("cleanup.policy", ["compact", 3], "strings"),
        ("message.timestamp.type", 3.0, "string"),
        ("segment.bytes", None, "cannot be unset"),
    ],
)
def test_wrong_types_are_rejected(key: str, value: Any, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        LogConfig.from_dict({key: value})
    message = str(info.value)
    assert key in message and repr(value) in message and fragment in message, message


def test_short_range() -> None:
    assert BrokerConfig(offsets_topic_replication_factor=32767).offsets_topic_replication_factor
    with pytest.raises(ConfigError, match="Java short"):
        BrokerConfig(offsets_topic_replication_factor=32768)


def test_direct_construction_parses_and_validates() -> None:
    assert LogConfig(segment_bytes="2048").segment_bytes == 2048  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="segment.bytes"):
        LogConfig(segment_bytes=13)


def test_nullable_keys() -> None:
    assert BrokerConfig(log_roll_ms=None).log_roll_ms is None
    assert BrokerConfig.from_dict({"zookeeper.connect": "zk1:2181,zk2:2181/seglog"}).zookeeper_connect
    assert ProducerConfig(acks=1).acks == "1"  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------
# Unknown keys
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "key", "suggestion", "fragment"),
    [
        (LogConfig, "segment.byte", "segment.bytes", "did you mean 'segment.bytes'?"),
        (LogConfig, "retention.msec", "retention.ms", "did you mean"),
        (LogConfig, "min.insync.replica", "min.insync.replicas", "did you mean"),
        (LogConfig, "segment_bytes", "segment.bytes", "dotted"),
        (LogConfig, "Retention.MS", "retention.ms", "dotted"),
        (LogConfig, "log.segment.bytes", "segment.bytes", "broker key"),
        (LogConfig, "message.max.bytes", "max.message.bytes", "topic-level form"),
        (LogConfig, "log.retention.hours", "retention.ms", "broker key"),
        (BrokerConfig, "segment.bytes", "log.segment.bytes", "'log.segment.bytes'"),
        (BrokerConfig, "retention.ms", "log.retention.ms", "'log.retention.hours'"),
        (BrokerConfig, "replica.lag.time.max", "replica.lag.time.max.ms", "did you mean"),
        (BrokerConfig, "zookeeper.conect", "zookeeper.connect", "did you mean"),
        (ProducerConfig, "ack", "acks", "did you mean"),
        (ProducerConfig, "fetch.min.bytes", None, "consumer key"),
        (ConsumerConfig, "compression.type", None, "topic, broker and producer key"),
    ],
)
def test_unknown_keys_name_the_nearest(cls: Any, key: str, suggestion: str | None, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        cls.from_dict({key: "1"})
    message = str(info.value)
    assert repr(key) in message and fragment in message, message
    assert info.value.key == key
    if suggestion is not None:
        assert info.value.suggestion == suggestion
        assert suggestion in message
    else:
        assert info.value.suggestion is not None


def test_nothing_close_still_names_the_nearest() -> None:
    with pytest.raises(ConfigError, match="closest valid key") as info:
        LogConfig.from_dict({"qqqqqq": 1})
    assert info.value.suggestion in {k.name for k in LogConfig.definitions()}


def test_unknown_attribute_in_with_overrides() -> None:
    with pytest.raises(ConfigError, match="segment_bytes") as info:
        LogConfig().with_overrides(segment_byte=3)
    assert info.value.suggestion == "segment.bytes"
    with pytest.raises(ConfigError, match="did you mean 'segment.bytes'"):
        LogConfig().with_overrides({"segment.byte": 3})


def test_non_string_key() -> None:
    with pytest.raises(ConfigError, match="strings"):
        LogConfig.from_dict({3: 1})  # type: ignore[dict-item]


# --------------------------------------------------------------------------------------
# Cross-key rules
# --------------------------------------------------------------------------------------


def test_compaction_lags() -> None:
    with pytest.raises(ConfigError, match=r"min.compaction.lag.ms \(10\) must not exceed"):
        LogConfig.from_dict({"min.compaction.lag.ms": 10, "max.compaction.lag.ms": 5})
    LogConfig.from_dict({"min.compaction.lag.ms": 5, "max.compaction.lag.ms": 5})


def test_broker_cross_rules() -> None:
    with pytest.raises(ConfigError, match="replica.socket.timeout.ms"):
        BrokerConfig(replica_fetch_wait_max_ms=30_001)
    with pytest.raises(ConfigError, match="replica.lag.time.max.ms"):
        BrokerConfig(replica_fetch_wait_max_ms=20_000, replica_lag_time_max_ms=10_000)
    BrokerConfig(replica_fetch_wait_max_ms=10_000, replica_lag_time_max_ms=10_000)
    with pytest.raises(ConfigError, match="must be equal"):
        BrokerConfig(node_id=1, broker_id=2)
    assert BrokerConfig(broker_id=4).effective_node_id == 4
    assert BrokerConfig(node_id=3, broker_id=3).effective_node_id == 3
    with pytest.raises(ConfigError, match="log directory"):
        BrokerConfig(log_dirs=())
    with pytest.raises(ConfigError, match="log directory"):
        BrokerConfig(log_dir="")


def test_broker_topic_defaults_are_validated_under_the_broker_name() -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig(log_roll_ms=0)
    assert info.value.key == "log.roll.ms"
    assert "segment.ms" in str(info.value) and "at least 1" in str(info.value)
    with pytest.raises(ConfigError) as info:
        BrokerConfig(log_retention_ms=0)
    assert info.value.key == "log.retention.ms"
    with pytest.raises(ConfigError) as info:
        BrokerConfig(log_cleaner_min_compaction_lag_ms=9, log_cleaner_max_compaction_lag_ms=8)
    assert info.value.key == "log.cleaner.min.compaction.lag.ms"


def test_producer_idempotence_rules() -> None:
    # Unset: on unless something rules it out (Kafka 3.x); explicit true: conflicts fail.
    assert ProducerConfig(acks="1").idempotent is False
    assert ProducerConfig(retries=0).idempotent is False
    assert ProducerConfig(max_in_flight_requests_per_connection=6).idempotent is False
    assert ProducerConfig(enable_idempotence=False).idempotent is False
    assert ProducerConfig(acks="-1", enable_idempotence=True).idempotent is True
    for bad in ({"acks": "1"}, {"retries": 0}, {"max.in.flight.requests.per.connection": 6}):
        with pytest.raises(ConfigError, match="enable.idempotence=true needs"):
            ProducerConfig.from_dict({**bad, "enable.idempotence": "true"})
    assert ProducerConfig(acks="all").required_acks == -1
    assert ProducerConfig(acks="0").required_acks == 0


def test_producer_delivery_timeout() -> None:
    with pytest.raises(ConfigError, match="delivery.timeout.ms"):
        ProducerConfig(delivery_timeout_ms=30_000, linger_ms=5)
    ProducerConfig(delivery_timeout_ms=30_005, linger_ms=5)


def test_consumer_auto_commit_needs_a_group() -> None:
    assert ConsumerConfig().auto_commit is False
    assert ConsumerConfig(group_id="g").auto_commit is True
    assert ConsumerConfig(group_id="g", enable_auto_commit=False).auto_commit is False


# --------------------------------------------------------------------------------------
# Broker-wide defaults of topic keys (Kafka's synonym precedence)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("broker", "expected_retention_ms"),
    [
        ({}, 168 * 3_600_000),
        ({"log.retention.hours": 1}, 3_600_000),
        ({"log.retention.hours": 1, "log.retention.minutes": 3}, 180_000),
        ({"log.retention.hours": 1, "log.retention.minutes": 3, "log.retention.ms": 7}, 7),
        ({"log.retention.minutes": 3}, 180_000),
        ({"log.retention.ms": -5}, -1),
        ({"log.retention.minutes": -1}, -1),
        ({"log.retention.hours": -1}, -1),
    ],
)
def test_retention_synonyms(broker: dict[str, Any], expected_retention_ms: int) -> None:
    cfg = BrokerConfig.from_dict(broker)
    assert cfg.topic_defaults()["retention.ms"] == expected_retention_ms
    assert cfg.topic_config().retention_ms == expected_retention_ms


def test_roll_and_flush_synonyms() -> None:
    cfg = BrokerConfig.from_dict({"log.roll.hours": 2, "log.roll.jitter.hours": 1})
    assert cfg.topic_config().segment_ms == 7_200_000
    assert cfg.topic_config().segment_jitter_ms == 3_600_000
    cfg = BrokerConfig.from_dict({"log.roll.hours": 2, "log.roll.ms": 1234})
    assert cfg.topic_config().segment_ms == 1234
    cfg = BrokerConfig.from_dict({"log.flush.scheduler.interval.ms": 2000})
    assert cfg.topic_config().flush_ms == 2000
    cfg = BrokerConfig.from_dict({"log.flush.scheduler.interval.ms": 2000, "log.flush.interval.ms": 50})
    assert cfg.topic_config().flush_ms == 50
    assert cfg.log_flush_scheduler_interval_ms == 2000


def test_every_topic_key_takes_its_broker_default() -> None:
    # Oracle: Kafka's ServerTopicConfigSynonyms, written out by hand.
    synonyms = {
        "segment.bytes": "log.segment.bytes",
        "segment.index.bytes": "log.index.size.max.bytes",
        "index.interval.bytes": "log.index.interval.bytes",
        "flush.messages": "log.flush.interval.messages",
        "retention.bytes": "log.retention.bytes",
        "file.delete.delay.ms": "log.segment.delete.delay.ms",
        "max.message.bytes": "message.max.bytes",
        "message.timestamp.type": "log.message.timestamp.type",
        "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
        "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
        "cleanup.policy": "log.cleanup.policy",
        "delete.retention.ms": "log.cleaner.delete.retention.ms",
        "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
        "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
        "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
        "compression.type": "compression.type",
        "compression.gzip.level": "compression.gzip.level",
        "compression.lz4.level": "compression.lz4.level",
        "compression.zstd.level": "compression.zstd.level",
        "preallocate": "log.preallocate",
        "min.insync.replicas": "min.insync.replicas",
        "unclean.leader.election.enable": "unclean.leader.election.enable",
    }
    changed = {
        "log.segment.bytes": 2048,
        "log.index.size.max.bytes": 4096,
        "log.index.interval.bytes": 100,
        "log.flush.interval.messages": 7,
        "log.retention.bytes": 10,
        "log.segment.delete.delay.ms": 1,
        "message.max.bytes": 99,
        "log.message.timestamp.type": "LogAppendTime",
        "log.message.timestamp.before.max.ms": 5,
        "log.message.timestamp.after.max.ms": 6,
        "log.cleanup.policy": "compact",
        "log.cleaner.delete.retention.ms": 4,
        "log.cleaner.min.cleanable.ratio": 0.75,
        "log.cleaner.min.compaction.lag.ms": 3,
        "log.cleaner.max.compaction.lag.ms": 30,
        "compression.type": "zstd",
        "compression.gzip.level": 2,
        "compression.lz4.level": 3,
        "compression.zstd.level": 4,
        "log.preallocate": True,
        "min.insync.replicas": 2,
        "unclean.leader.election.enable": True,
    }
    broker = BrokerConfig.from_dict(changed)
    topic = broker.topic_config().to_dict()
    for topic_key, broker_key in synonyms.items():
        expected = BrokerConfig.from_dict({broker_key: changed[broker_key]}).to_dict()[broker_key]
        assert topic[topic_key] == expected, topic_key
    # The time-based ones are covered above; nothing is left without a broker default.
    assert set(synonyms) | {"segment.ms", "segment.jitter.ms", "flush.ms", "retention.ms"} == {
        k.name for k in LogConfig.definitions()
    }


def test_topic_overrides_win_over_broker_defaults() -> None:
    broker = BrokerConfig.from_dict({"log.segment.bytes": 4096, "log.retention.hours": 1})
    topic = broker.topic_config({"retention.ms": "-1"})
    assert (topic.segment_bytes, topic.retention_ms) == (4096, -1)
    with pytest.raises(ConfigError, match="log.segment.bytes"):
        broker.topic_config({"log.segment.bytes": 1})
    assert BrokerConfig().topic_config() == LogConfig()


def test_effective_log_dirs() -> None:
    assert BrokerConfig().effective_log_dirs == ("/tmp/kafka-logs",)
    cfg = BrokerConfig.from_dict({"log.dirs": "/a, /b", "log.dir": "/c"})
    assert cfg.effective_log_dirs == ("/a", "/b")


# --------------------------------------------------------------------------------------
# Dataclass behaviour, round trips
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("scope", list(CLASSES))
def test_classes_are_frozen_slotted_and_match_the_table(scope: str) -> None:
    cls = CLASSES[scope]
    config = cls()
    assert not hasattr(config, "__dict__")
    field = dataclasses.fields(cls)[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(config, field.name, field.default)
    keys = [k for k in CONFIG_KEYS if k.scope == scope]
    assert [f.name for f in dataclasses.fields(cls)] == [k.name.replace(".", "_") for k in keys]
    assert [f.default for f in dataclasses.fields(cls)] == [k.default for k in keys]
    assert cls.definitions() == tuple(keys)
    assert hash(config) == hash(cls())


NON_DEFAULT = {
    "topic": {
        "segment.bytes": 1048576,
        "retention.ms": -1,
        "cleanup.policy": ("compact", "delete"),
        "min.cleanable.dirty.ratio": 0.125,
        "compression.type": "lz4",
        "preallocate": True,
    },
    "broker": {
        "node.id": 3,
        "log.dirs": ("/data/a b", "/data/é#:="),
        "listeners": ("PLAINTEXT://:9092", "REPL://10.0.0.1:9093"),
        "zookeeper.connect": "zk1:2181,zk2:2181/seglog",
        "log.retention.minutes": 90,
        "log.cleanup.policy": (),
        "controlled.shutdown.enable": False,
    },
    "producer": {"acks": "1", "client.id": "  lead space \t tab", "linger.ms": 5},
    "consumer": {"group.id": "g!1", "isolation.level": "read_committed"},
}


@pytest.mark.parametrize("scope", list(CLASSES))
def test_round_trips(scope: str) -> None:
    cls = CLASSES[scope]
    config = cls.from_dict(NON_DEFAULT[scope])
    assert cls.from_dict(config.to_dict()) == config
    changed = config.to_dict(changed_only=True)
    if scope != "producer":
        assert changed == NON_DEFAULT[scope]
    assert cls.from_dict(changed) == config
    assert cls.from_properties(config.to_properties()) == config
    assert cls.from_properties(config.to_properties(changed_only=True)) == config
    assert cls().with_overrides(NON_DEFAULT[scope]) == config
    assert config.with_overrides() == config


def test_string_values_keep_inner_whitespace_but_lose_the_ends() -> None:
    # Kafka trims string values; inner whitespace stays.
    cfg = ProducerConfig.from_dict({"client.id": "  a \t b  "})
    assert cfg.client_id == "a \t b"


def test_with_overrides_mixes_keys_and_attributes() -> None:
    cfg = LogConfig().with_overrides({"segment.bytes": "4096"}, retention_ms=-1)
    assert (cfg.segment_bytes, cfg.retention_ms) == (4096, -1)
    with pytest.raises(ConfigError):
        cfg.with_overrides(segment_bytes=1)


@pytest.mark.parametrize("cls", [LogConfig, BrokerConfig, ProducerConfig, ConsumerConfig])
def test_coerce_takes_an_instance_a_mapping_or_none(cls: Any) -> None:
    built = cls()
    assert cls.coerce(built) is built
    assert cls.coerce(None) == cls() == cls.coerce({})
    key = cls.definitions()[0]
    value = getattr(built, key.attr)
    assert cls.coerce({key.name: value}) == built
    with pytest.raises(ConfigError, match="no.such.key"):
        cls.coerce({"no.such.key": 1})


def test_log_config_helpers() -> None:
    cfg = LogConfig()
    assert (cfg.compact, cfg.delete, cfg.init_file_size) == (False, True, 0)
    assert cfg.max_segment_ms == cfg.segment_ms
    cfg = LogConfig.from_dict({"cleanup.policy": "compact", "max.compaction.lag.ms": 1000, "preallocate": "true"})
    assert (cfg.compact, cfg.delete, cfg.max_segment_ms) == (True, False, 1000)
    assert cfg.init_file_size == cfg.segment_bytes
    assert cfg.random_segment_jitter(random.Random(1)) == 0
    jittery = LogConfig(segment_jitter_ms=500, segment_ms=100)
    rng = random.Random(7)
    draws = {jittery.random_segment_jitter(rng) for _ in range(2000)}
    assert min(draws) == 0 and max(draws) == 99


# --------------------------------------------------------------------------------------
# .properties files
# --------------------------------------------------------------------------------------

# A ZooKeeper-mode server.properties in the shape Kafka ships (comments are ours).
SERVER_PROPERTIES = r"""
# The id of this node.
broker.id=0

# Where clients reach the node.
#listeners=PLAINTEXT://:9092
#advertised.listeners=PLAINTEXT://your.host.name:9092

num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600

# Data directories, comma separated.
log.dirs=/tmp/kafka-logs

num.partitions=1
num.recovery.threads.per.data.dir=1

offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1

#log.flush.interval.messages=10000
#log.flush.interval.ms=1000

log.retention.hours=168
#log.retention.bytes=1073741824
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000

zookeeper.connect=localhost:2181
zookeeper.connection.timeout.ms=18000

group.initial.rebalance.delay.ms=0
"""


def test_kafka_server_properties_load(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(SERVER_PROPERTIES)
    cfg = BrokerConfig.from_properties_file(path)
    assert cfg.broker_id == 0 and cfg.effective_node_id == 0
    assert cfg.log_dirs == ("/tmp/kafka-logs",)
    assert cfg.zookeeper_connect == "localhost:2181"
    assert cfg.zookeeper_connection_timeout_ms == 18000
    assert cfg.offsets_topic_replication_factor == 1
    assert cfg.group_initial_rebalance_delay_ms == 0
    assert cfg.topic_config() == LogConfig()


def test_errors_in_files_name_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "node.properties"
    path.write_text("# header\nnum.partitions=2\n\nlog.segment.bytes = 12\n")
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_properties_file(path)
    message = str(info.value)
    assert str(path) in message and "line 4" in message and "log.segment.bytes" in message
    assert "'12'" in message and "[14,...]" in message
    path.write_text("num.partitions=2\nlog.segmnt.bytes=1048576\n")
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_properties_file(path)
    assert "line 2" in str(info.value) and info.value.suggestion == "log.segment.bytes"
    with pytest.raises(ConfigError, match="line 3"):
        LogConfig.from_properties("a\\\n=1\nsegment.bytes=\\u12\n")


def test_latin1_file_falls_back(tmp_path: Path) -> None:
    path = tmp_path / "n.properties"
    path.write_bytes("log.dir=/data/caf\xe9\n".encode("iso-8859-1"))
    assert BrokerConfig.from_properties_file(path).log_dir == "/data/café"
    path.write_bytes("log.dir=/data/caf\xe9\n".encode())
    assert BrokerConfig.from_properties_file(path).log_dir == "/data/café"


def test_missing_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        LogConfig.from_properties_file(tmp_path / "absent.properties")


# Texts with their java.util.Properties.load results (checked against Java below).
PROPERTIES_CASES: list[tuple[str, dict[str, str]]] = [
    ("", {}),
    ("# c\n! c\n\n   \nkey=value\n", {"key": "value"}),
    ("a = b\nc:d\ne f\ng   =   h  \n", {"a": "b", "c": "d", "e": "f", "g": "h  "}),
    ("key\\ with\\ spaces = v\\=w\\:x\n", {"key with spaces": "v=w:x"}),
    ("k=a\\\n   b\\\n\tc\n", {"k": "abc"}),
    ("k=a\\\\\nj=b\n", {"k": "a\\", "j": "b"}),
    ("k=a\\\\\\\n  b\n", {"k": "a\\b"}),
    ("k=\\u00e9t\\u00E9 \\t\\q\\n\n", {"k": "été \tq\n"}),
    ("k\nl=\n=v\n", {"k": "", "l": "", "": "v"}),
    ("a=1\r\nb=2\rc=3\n", {"a": "1", "b": "2", "c": "3"}),
    ("# comment \\\nk=v\n", {"k": "v"}),
    ("   # indented\nk=v # not a comment\n", {"k": "v # not a comment"}),
    ("k=1\nk=2\n", {"k": "2"}),
    ("k=v1\\\n# not a comment\n", {"k": "v1# not a comment"}),
    ("k=last line continues\\", {"k": "last line continues"}),
    ("\\#notcomment=1\n", {"#notcomment": "1"}),
    ("k==v\nk2=:v\nk3 = = v\nk4 :=v\n", {"k": "=v", "k2": ":v", "k3": "= v", "k4": "=v"}),
    ("ключ=значение\nk=😀\n", {"ключ": "значение", "k": "😀"}),
    ("k=\\uD83D\\uDE00\n", {"k": "😀"}),
    ("k\\\n  ey=v\n", {"key": "v"}),
    ("\f\tk\f=\fv\n", {"k": "v"}),
    ("k=v\\\n\nj=w\n", {"k": "v", "j": "w"}),
    ("k=a\\\r\n b\n", {"k": "ab"}),
    ("k\\=x=y\n", {"k=x": "y"}),
    ("k\\\\=y\n", {"k\\": "y"}),
]


@pytest.mark.parametrize(("text", "expected"), PROPERTIES_CASES)
def test_parse_properties(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


def test_malformed_unicode_escape() -> None:
    for text in ("k=\\u12G4\n", "k=\\u12\n", "\\uZZZZ=1\n"):
        with pytest.raises(ConfigError, match="malformed"):
            parse_properties(text)


def _random_values(rng: random.Random, count: int) -> list[dict[str, str]]:
    alphabet = " \t\n\r\f\\=:#!abcXYZ019,. é€😀\x00\x7f"
    out = []
    for _ in range(count):
        values = {}
        for _ in range(rng.randrange(1, 6)):
            key = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 8)))
            values[key] = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))
        out.append(values)
    return out


ROUND_TRIP_VALUES = _random_values(random.Random(20240607), 200)


def test_format_properties_round_trips() -> None:
    for values in ROUND_TRIP_VALUES:
        assert parse_properties(format_properties(values)) == values


JAVA_DUMP = r"""
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;

public class PropsDump {
    static String hex(String s) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < s.length(); i++) {
            if (i > 0) b.append(',');
            b.append(Integer.toHexString(s.charAt(i)));
        }
        return b.toString();
    }
    public static void main(String[] args) throws Exception {
        for (String name : args) {
            Properties p = new Properties();
            System.out.println("FILE");
            try (Reader r = new InputStreamReader(new FileInputStream(name), StandardCharsets.UTF_8)) {
                p.load(r);
            } catch (IllegalArgumentException e) {
                System.out.println("ERROR");
                continue;
            }
            for (String k : new TreeSet<>(p.stringPropertyNames())) {
                System.out.println(hex(k) + "\t" + hex(p.getProperty(k)));
            }
        }
    }
}
"""


def _unhex(text: str) -> str:
    if not text:
        return ""
    raw = "".join(chr(int(unit, 16)) for unit in text.split(","))
    return raw.encode("utf-16", "surrogatepass").decode("utf-16")


@pytest.fixture(scope="module")
def java_properties(tmp_path_factory: pytest.TempPathFactory) -> Any:
    java = shutil.which("java")
    if java is None:
        pytest.skip("no java to compare with java.util.Properties")
    work = tmp_path_factory.mktemp("java")
    (work / "PropsDump.java").write_text(JAVA_DUMP)

    def load(texts: list[str]) -> list[dict[str, str] | None]:
        names = []
        for i, text in enumerate(texts):
            path = work / f"{i}.properties"
            path.write_bytes(text.encode("utf-8", "surrogatepass"))
            names.append(str(path))
        out = subprocess.run(
            [java, str(work / "PropsDump.java"), *names],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
        results: list[dict[str, str] | None] = []
        for line in out.split("\n"):
            if line == "FILE":
                results.append({})
            elif line == "ERROR":
                results[-1] = None
            elif line:
                key, value = line.split("\t")
                current = results[-1]
                assert current is not None
                current[_unhex(key)] = _unhex(value)
        assert len(results) == len(texts)
        return results

    return load


def test_parser_agrees_with_java(java_properties: Any) -> None:
    malformed = ["k=\\u12G4\n", "k=\\u12\n"]
    texts = [text for text, _ in PROPERTIES_CASES] + malformed
    texts += [format_properties(values) for values in ROUND_TRIP_VALUES]
    results = java_properties(texts)
    for text, theirs in zip(texts, results):
        if theirs is None:
            with pytest.raises(ConfigError):
                parse_properties(text)
        else:
            assert parse_properties(text) == theirs, repr(text)


# --------------------------------------------------------------------------------------
# The generated docs
# --------------------------------------------------------------------------------------


def test_docs_are_current() -> None:
    path = ROOT / "docs" / "configuration.md"
    assert path.read_text(encoding="utf-8") == configuration_markdown(), (
        "docs/configuration.md is stale; regenerate it with `python -m seglog.config > docs/configuration.md`"
    )


def test_python_m_seglog_config_prints_the_docs() -> None:
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "seglog.config"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=True,
    ).stdout
    assert out == (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")


def test_the_package_exports_every_public_name() -> None:
    import seglog.config

    # What seglog.config has always exported, and the tables other layers use.
    for name in (
        "CONFIG_KEYS",
        "BrokerConfig",
        "ConfigKey",
        "ConsumerConfig",
        "LogConfig",
        "ProducerConfig",
        "Range",
        "RangeOr",
        "ValidList",
        "ValidString",
        "Validator",
        "configuration_markdown",
        "format_properties",
        "parse_properties",
        "ConfigType",
        "Scope",
        "Importance",
        "SHORT_MIN",
        "SHORT_MAX",
        "INT_MIN",
        "INT_MAX",
        "LONG_MIN",
        "LONG_MAX",
        "KEYS_BY_SCOPE",
        "TOPIC_CONFIG_SYNONYMS",
        "format_value",
        "parse_properties_entries",
        "read_properties_text",
    ):
        assert name in seglog.config.__all__ and hasattr(seglog.config, name), name
    assert len(set(seglog.config.__all__)) == len(seglog.config.__all__)
    assert seglog.config.KEYS_BY_SCOPE["broker"]["log.retention.hours"].topic_key == "retention.ms"
    assert [k.name for k in seglog.config.TOPIC_CONFIG_SYNONYMS["retention.ms"]] == [
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
    ]
    assert seglog.config.format_value(("compact", "delete")) == "compact,delete"
    assert seglog.config.format_value(False) == "false"


def test_docs_cover_every_key() -> None:
    text = configuration_markdown()
    for key in CONFIG_KEYS:
        assert f"| `{key.name}` |" in text, key.name
        assert key.doc and key.doc[0].isupper() and key.doc.endswith("."), key.name
    assert "`1073741824` (1 GiB)" in text and "`604800000` (1 week)" in text
    assert "`[1,...,9] or -1`" in text


def test_module_examples() -> None:
    import seglog.config
    import seglog.errors

    for module in (seglog.config, seglog.errors):
        failed, attempted = doctest.testmod(module)
        assert attempted > 0 and failed == 0, module.__name__


def test_key_attr_and_nullable() -> None:
    key = ConfigKey("a.b.c", "int", None, "Doc.", "topic")
    assert key.attr == "a_b_c" and key.nullable
