"""Node-level settings: :class:`BrokerConfig` (Kafka's ``KafkaConfig``), with the broker-wide
defaults of topic keys resolved as Kafka resolves them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from seglog.config.base import AbstractConfig, bind_table
from seglog.config.keys import TOPIC_CONFIG_SYNONYMS
from seglog.config.keys import default_value as _default
from seglog.config.topic import LogConfig
from seglog.errors import ConfigError

__all__ = ["BrokerConfig"]


@dataclass(frozen=True, slots=True)
class BrokerConfig(AbstractConfig):
    """Node-level settings (Kafka's ``KafkaConfig``), including the broker-wide defaults of
    topic settings; see docs/configuration.md."""

    node_id: int = _default("broker", "node.id")
    broker_id: int = _default("broker", "broker.id")
    listeners: tuple[str, ...] = _default("broker", "listeners")
    advertised_listeners: tuple[str, ...] | None = _default("broker", "advertised.listeners")
    inter_broker_listener_name: str | None = _default("broker", "inter.broker.listener.name")
    zookeeper_connect: str | None = _default("broker", "zookeeper.connect")
    zookeeper_session_timeout_ms: int = _default("broker", "zookeeper.session.timeout.ms")
    zookeeper_connection_timeout_ms: int | None = _default("broker", "zookeeper.connection.timeout.ms")
    controlled_shutdown_enable: bool = _default("broker", "controlled.shutdown.enable")
    controlled_shutdown_max_retries: int = _default("broker", "controlled.shutdown.max.retries")
    controlled_shutdown_retry_backoff_ms: int = _default("broker", "controlled.shutdown.retry.backoff.ms")
    log_dirs: tuple[str, ...] | None = _default("broker", "log.dirs")
    log_dir: str = _default("broker", "log.dir")
    num_partitions: int = _default("broker", "num.partitions")
    default_replication_factor: int = _default("broker", "default.replication.factor")
    auto_create_topics_enable: bool = _default("broker", "auto.create.topics.enable")
    num_recovery_threads_per_data_dir: int = _default("broker", "num.recovery.threads.per.data.dir")
    log_retention_check_interval_ms: int = _default("broker", "log.retention.check.interval.ms")
    log_flush_offset_checkpoint_interval_ms: int = _default("broker", "log.flush.offset.checkpoint.interval.ms")
    log_flush_start_offset_checkpoint_interval_ms: int = _default(
        "broker", "log.flush.start.offset.checkpoint.interval.ms"
    )
    log_segment_bytes: int = _default("broker", "log.segment.bytes")
    log_roll_ms: int | None = _default("broker", "log.roll.ms")
    log_roll_hours: int = _default("broker", "log.roll.hours")
    log_roll_jitter_ms: int | None = _default("broker", "log.roll.jitter.ms")
    log_roll_jitter_hours: int = _default("broker", "log.roll.jitter.hours")
    log_retention_ms: int | None = _default("broker", "log.retention.ms")
    log_retention_minutes: int | None = _default("broker", "log.retention.minutes")
    log_retention_hours: int = _default("broker", "log.retention.hours")
    log_retention_bytes: int = _default("broker", "log.retention.bytes")
    log_index_size_max_bytes: int = _default("broker", "log.index.size.max.bytes")
    log_index_interval_bytes: int = _default("broker", "log.index.interval.bytes")
    log_flush_interval_messages: int = _default("broker", "log.flush.interval.messages")
    log_flush_interval_ms: int | None = _default("broker", "log.flush.interval.ms")
    log_flush_scheduler_interval_ms: int = _default("broker", "log.flush.scheduler.interval.ms")
    log_segment_delete_delay_ms: int = _default("broker", "log.segment.delete.delay.ms")
    message_max_bytes: int = _default("broker", "message.max.bytes")
    log_message_timestamp_type: str = _default("broker", "log.message.timestamp.type")
    log_message_timestamp_before_max_ms: int = _default("broker", "log.message.timestamp.before.max.ms")
    log_message_timestamp_after_max_ms: int = _default("broker", "log.message.timestamp.after.max.ms")
    log_cleanup_policy: tuple[str, ...] = _default("broker", "log.cleanup.policy")
    log_cleaner_enable: bool = _default("broker", "log.cleaner.enable")
    log_cleaner_backoff_ms: int = _default("broker", "log.cleaner.backoff.ms")
    log_cleaner_delete_retention_ms: int = _default("broker", "log.cleaner.delete.retention.ms")
    log_cleaner_min_cleanable_ratio: float = _default("broker", "log.cleaner.min.cleanable.ratio")
    log_cleaner_min_compaction_lag_ms: int = _default("broker", "log.cleaner.min.compaction.lag.ms")
    log_cleaner_max_compaction_lag_ms: int = _default("broker", "log.cleaner.max.compaction.lag.ms")
    compression_type: str = _default("broker", "compression.type")
    compression_gzip_level: int = _default("broker", "compression.gzip.level")
    compression_lz4_level: int = _default("broker", "compression.lz4.level")
    compression_zstd_level: int = _default("broker", "compression.zstd.level")
    log_preallocate: bool = _default("broker", "log.preallocate")
    min_insync_replicas: int = _default("broker", "min.insync.replicas")
    unclean_leader_election_enable: bool = _default("broker", "unclean.leader.election.enable")
    replica_lag_time_max_ms: int = _default("broker", "replica.lag.time.max.ms")
    replica_fetch_max_bytes: int = _default("broker", "replica.fetch.max.bytes")
    replica_fetch_response_max_bytes: int = _default("broker", "replica.fetch.response.max.bytes")
    replica_fetch_min_bytes: int = _default("broker", "replica.fetch.min.bytes")
    replica_fetch_wait_max_ms: int = _default("broker", "replica.fetch.wait.max.ms")
    replica_fetch_backoff_ms: int = _default("broker", "replica.fetch.backoff.ms")
    replica_socket_timeout_ms: int = _default("broker", "replica.socket.timeout.ms")
    replica_socket_receive_buffer_bytes: int = _default("broker", "replica.socket.receive.buffer.bytes")
    num_replica_fetchers: int = _default("broker", "num.replica.fetchers")
    replica_high_watermark_checkpoint_interval_ms: int = _default(
        "broker", "replica.high.watermark.checkpoint.interval.ms"
    )
    controller_socket_timeout_ms: int = _default("broker", "controller.socket.timeout.ms")
    auto_leader_rebalance_enable: bool = _default("broker", "auto.leader.rebalance.enable")
    leader_imbalance_check_interval_seconds: int = _default("broker", "leader.imbalance.check.interval.seconds")
    leader_imbalance_per_broker_percentage: int = _default("broker", "leader.imbalance.per.broker.percentage")
    producer_id_expiration_ms: int = _default("broker", "producer.id.expiration.ms")
    max_incremental_fetch_session_cache_slots: int = _default("broker", "max.incremental.fetch.session.cache.slots")
    fetch_max_bytes: int = _default("broker", "fetch.max.bytes")
    socket_request_max_bytes: int = _default("broker", "socket.request.max.bytes")
    connections_max_idle_ms: int = _default("broker", "connections.max.idle.ms")
    group_min_session_timeout_ms: int = _default("broker", "group.min.session.timeout.ms")
    group_max_session_timeout_ms: int = _default("broker", "group.max.session.timeout.ms")
    group_initial_rebalance_delay_ms: int = _default("broker", "group.initial.rebalance.delay.ms")
    num_network_threads: int = _default("broker", "num.network.threads")
    num_io_threads: int = _default("broker", "num.io.threads")
    socket_send_buffer_bytes: int = _default("broker", "socket.send.buffer.bytes")
    socket_receive_buffer_bytes: int = _default("broker", "socket.receive.buffer.bytes")
    offsets_topic_num_partitions: int = _default("broker", "offsets.topic.num.partitions")
    offsets_topic_segment_bytes: int = _default("broker", "offsets.topic.segment.bytes")
    offsets_topic_replication_factor: int = _default("broker", "offsets.topic.replication.factor")
    transaction_state_log_replication_factor: int = _default("broker", "transaction.state.log.replication.factor")
    transaction_state_log_min_isr: int = _default("broker", "transaction.state.log.min.isr")

    def _check(self) -> None:
        if self.node_id >= 0 and self.broker_id >= 0 and self.node_id != self.broker_id:
            raise self._broken_rule(
                "node.id",
                f"node.id ({self.node_id}) and broker.id ({self.broker_id}) must be equal when both are set",
            )
        if self.replica_fetch_wait_max_ms > self.replica_socket_timeout_ms:
            raise self._broken_rule(
                "replica.fetch.wait.max.ms",
                f"replica.fetch.wait.max.ms ({self.replica_fetch_wait_max_ms}) must not "
                f"exceed replica.socket.timeout.ms ({self.replica_socket_timeout_ms}), or "
                "idle follower fetches time out",
            )
        if self.replica_fetch_wait_max_ms > self.replica_lag_time_max_ms:
            raise self._broken_rule(
                "replica.fetch.wait.max.ms",
                f"replica.fetch.wait.max.ms ({self.replica_fetch_wait_max_ms}) must not "
                f"exceed replica.lag.time.max.ms ({self.replica_lag_time_max_ms}), or idle "
                "followers drop out of the ISR",
            )
        if not self.effective_log_dirs or any(not d for d in self.effective_log_dirs):
            raise self._broken_rule(
                "log.dirs" if self.log_dirs is not None else "log.dir",
                "at least one log directory must be given, with log.dirs or log.dir",
            )
        if self.topic_defaults()["retention.ms"] == 0:
            source = self._topic_source("retention.ms")
            raise self._broken_rule(
                source,
                f"{source} gives a retention of 0 ms; it must be -1 (unlimited) or at least 1 ms",
            )
        self._topic_defaults_config()

    @property
    def effective_node_id(self) -> int:
        """``node.id`` if set, else ``broker.id`` (-1 if neither is set)."""
        return self.node_id if self.node_id >= 0 else self.broker_id

    @property
    def effective_log_dirs(self) -> tuple[str, ...]:
        """``log.dirs`` if set, else ``(log.dir,)``."""
        return self.log_dirs if self.log_dirs is not None else (self.log_dir,)

    def topic_defaults(self) -> dict[str, Any]:
        """The broker-wide defaults of topic keys, by topic key, resolved as Kafka does.

        For each topic key the first of its broker keys that is set wins, converted to the
        topic key's unit (``log.retention.ms``, then ``log.retention.minutes``, then
        ``log.retention.hours``; any negative retention becomes -1).
        """
        out: dict[str, Any] = {}
        for topic_key, brokers in TOPIC_CONFIG_SYNONYMS.items():
            for key in brokers:
                value = getattr(self, key.attr)
                if value is not None:
                    out[topic_key] = value if key.to_topic is None else key.to_topic(value)
                    break
        return out

    def _topic_source(self, topic_key: str) -> str:
        for key in TOPIC_CONFIG_SYNONYMS.get(topic_key, ()):
            if getattr(self, key.attr) is not None:
                return key.name
        return topic_key  # pragma: no cover - every topic key with a synonym has one set

    def _topic_defaults_config(self) -> LogConfig:
        defaults = self.topic_defaults()
        try:
            return LogConfig.from_dict(defaults)
        except ConfigError as exc:
            source = self._topic_source(exc.key) if exc.key is not None else None
            raise ConfigError(
                f"{source} gives an invalid default for topic key {exc.key}: {exc.message}",
                key=source,
                value=getattr(self, source.replace(".", "_"), None) if source else None,
            ) from exc

    def topic_config(self, overrides: Mapping[str, Any] | None = None) -> LogConfig:
        """The :class:`LogConfig` of a topic: these broker-wide defaults, then the topic's
        own ``overrides`` (dotted topic keys)."""
        base = self._topic_defaults_config()
        return base if not overrides else base.with_overrides(overrides)


bind_table(BrokerConfig, "broker")
