"""Settings of the embedded consumer: :class:`ConsumerConfig` (Kafka's ``ConsumerConfig``)."""

from __future__ import annotations

from dataclasses import dataclass

from seglog.config.base import AbstractConfig, bind_table
from seglog.config.keys import default_value as _default

__all__ = ["ConsumerConfig"]


@dataclass(frozen=True, slots=True)
class ConsumerConfig(AbstractConfig):
    """Settings of the embedded consumer (Kafka's ``ConsumerConfig``)."""

    group_id: str | None = _default("consumer", "group.id")
    auto_offset_reset: str = _default("consumer", "auto.offset.reset")
    enable_auto_commit: bool = _default("consumer", "enable.auto.commit")
    auto_commit_interval_ms: int = _default("consumer", "auto.commit.interval.ms")
    isolation_level: str = _default("consumer", "isolation.level")
    fetch_min_bytes: int = _default("consumer", "fetch.min.bytes")
    fetch_max_bytes: int = _default("consumer", "fetch.max.bytes")
    fetch_max_wait_ms: int = _default("consumer", "fetch.max.wait.ms")
    max_partition_fetch_bytes: int = _default("consumer", "max.partition.fetch.bytes")
    max_poll_records: int = _default("consumer", "max.poll.records")
    check_crcs: bool = _default("consumer", "check.crcs")
    request_timeout_ms: int = _default("consumer", "request.timeout.ms")
    default_api_timeout_ms: int = _default("consumer", "default.api.timeout.ms")
    retry_backoff_ms: int = _default("consumer", "retry.backoff.ms")
    client_id: str = _default("consumer", "client.id")
    bootstrap_servers: tuple[str, ...] = _default("consumer", "bootstrap.servers")

    @property
    def auto_commit(self) -> bool:
        """Whether offsets are auto-committed: ``enable.auto.commit`` and a ``group.id``."""
        return self.enable_auto_commit and self.group_id is not None


bind_table(ConsumerConfig, "consumer")
