"""Topic-level settings of one log: :class:`LogConfig` (Kafka's ``LogConfig``)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from seglog.config.base import AbstractConfig, bind_table
from seglog.config.keys import default_value as _default

__all__ = ["LogConfig"]


@dataclass(frozen=True, slots=True)
class LogConfig(AbstractConfig):
    """Topic-level settings of one log (Kafka's ``LogConfig``); see docs/configuration.md."""

    segment_bytes: int = _default("topic", "segment.bytes")
    segment_ms: int = _default("topic", "segment.ms")
    segment_jitter_ms: int = _default("topic", "segment.jitter.ms")
    segment_index_bytes: int = _default("topic", "segment.index.bytes")
    index_interval_bytes: int = _default("topic", "index.interval.bytes")
    flush_messages: int = _default("topic", "flush.messages")
    flush_ms: int = _default("topic", "flush.ms")
    retention_ms: int = _default("topic", "retention.ms")
    retention_bytes: int = _default("topic", "retention.bytes")
    file_delete_delay_ms: int = _default("topic", "file.delete.delay.ms")
    max_message_bytes: int = _default("topic", "max.message.bytes")
    message_timestamp_type: str = _default("topic", "message.timestamp.type")
    message_timestamp_before_max_ms: int = _default("topic", "message.timestamp.before.max.ms")
    message_timestamp_after_max_ms: int = _default("topic", "message.timestamp.after.max.ms")
    cleanup_policy: tuple[str, ...] = _default("topic", "cleanup.policy")
    delete_retention_ms: int = _default("topic", "delete.retention.ms")
    min_cleanable_dirty_ratio: float = _default("topic", "min.cleanable.dirty.ratio")
    min_compaction_lag_ms: int = _default("topic", "min.compaction.lag.ms")
    max_compaction_lag_ms: int = _default("topic", "max.compaction.lag.ms")
    compression_type: str = _default("topic", "compression.type")
    compression_gzip_level: int = _default("topic", "compression.gzip.level")
    compression_lz4_level: int = _default("topic", "compression.lz4.level")
    compression_zstd_level: int = _default("topic", "compression.zstd.level")
    preallocate: bool = _default("topic", "preallocate")
    min_insync_replicas: int = _default("topic", "min.insync.replicas")
    unclean_leader_election_enable: bool = _default("topic", "unclean.leader.election.enable")

    def _check(self) -> None:
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise self._broken_rule(
                "min.compaction.lag.ms",
                f"min.compaction.lag.ms ({self.min_compaction_lag_ms}) must not exceed "
                f"max.compaction.lag.ms ({self.max_compaction_lag_ms})",
            )

    @property
    def compact(self) -> bool:
        """Whether ``cleanup.policy`` includes ``compact``."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """Whether ``cleanup.policy`` includes ``delete``."""
        return "delete" in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """Age at which the active segment rolls: ``segment.ms``, capped by
        ``max.compaction.lag.ms`` on compacted topics (as in Kafka)."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def init_file_size(self) -> int:
        """Size a new segment file is created with (``segment.bytes`` if preallocating)."""
        return self.segment_bytes if self.preallocate else 0

    def random_segment_jitter(self, rng: random.Random) -> int:
        """A roll jitter for a new segment, uniform in ``[0, min(jitter, segment.ms))``."""
        if self.segment_jitter_ms == 0:
            return 0
        return rng.randrange(min(self.segment_jitter_ms, self.segment_ms))


bind_table(LogConfig, "topic")
