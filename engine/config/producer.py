"""Settings of the embedded producer: :class:`ProducerConfig` (Kafka's ``ProducerConfig``)."""

from __future__ import annotations

from dataclasses import dataclass

from seglog.config.base import AbstractConfig, bind_table
from seglog.config.keys import default_value as _default

__all__ = ["ProducerConfig"]


@dataclass(frozen=True, slots=True)
class ProducerConfig(AbstractConfig):
    """Settings of the embedded producer (Kafka's ``ProducerConfig``)."""

    acks: str = _default("producer", "acks")
    enable_idempotence: bool | None = _default("producer", "enable.idempotence")
    batch_size: int = _default("producer", "batch.size")
    linger_ms: int = _default("producer", "linger.ms")
    compression_type: str = _default("producer", "compression.type")
    compression_gzip_level: int = _default("producer", "compression.gzip.level")
    compression_lz4_level: int = _default("producer", "compression.lz4.level")
    compression_zstd_level: int = _default("producer", "compression.zstd.level")
    max_in_flight_requests_per_connection: int = _default("producer", "max.in.flight.requests.per.connection")
    retries: int = _default("producer", "retries")
    retry_backoff_ms: int = _default("producer", "retry.backoff.ms")
    retry_backoff_max_ms: int = _default("producer", "retry.backoff.max.ms")
    delivery_timeout_ms: int = _default("producer", "delivery.timeout.ms")
    request_timeout_ms: int = _default("producer", "request.timeout.ms")
    max_request_size: int = _default("producer", "max.request.size")
    buffer_memory: int = _default("producer", "buffer.memory")
    max_block_ms: int = _default("producer", "max.block.ms")
    partitioner_ignore_keys: bool = _default("producer", "partitioner.ignore.keys")
    partitioner_adaptive_partitioning_enable: bool = _default("producer", "partitioner.adaptive.partitioning.enable")
    partitioner_availability_timeout_ms: int = _default("producer", "partitioner.availability.timeout.ms")
    client_id: str = _default("producer", "client.id")
    bootstrap_servers: tuple[str, ...] = _default("producer", "bootstrap.servers")

    def _idempotence_conflicts(self) -> list[str]:
        conflicts = []
        if self.max_in_flight_requests_per_connection > 5:
            conflicts.append(
                "max.in.flight.requests.per.connection must be at most 5 "
                f"(is {self.max_in_flight_requests_per_connection})"
            )
        if self.retries == 0:
            conflicts.append("retries must not be 0")
        if self.acks not in ("all", "-1"):
            conflicts.append(f"acks must be all (is {self.acks})")
        return conflicts

    def _check(self) -> None:
        if self.enable_idempotence:
            conflicts = self._idempotence_conflicts()
            if conflicts:
                raise self._broken_rule(
                    "enable.idempotence",
                    "enable.idempotence=true needs: " + "; ".join(conflicts) + " (or set enable.idempotence=false)",
                )
        if self.delivery_timeout_ms < self.linger_ms + self.request_timeout_ms:
            raise self._broken_rule(
                "delivery.timeout.ms",
                f"delivery.timeout.ms ({self.delivery_timeout_ms}) must be at least "
                f"linger.ms + request.timeout.ms ({self.linger_ms} + "
                f"{self.request_timeout_ms})",
            )

    @property
    def idempotent(self) -> bool:
        """Whether the producer is idempotent (``enable.idempotence`` resolved as Kafka
        resolves its default)."""
        if self.enable_idempotence is not None:
            return self.enable_idempotence
        return not self._idempotence_conflicts()

    @property
    def required_acks(self) -> int:
        """``acks`` as the protocol's number: -1 (all), 0 or 1."""
        return -1 if self.acks == "all" else int(self.acks)


bind_table(ProducerConfig, "producer")
