"""What a cluster's producers and consumers need from the object that made them
(:class:`ClientHost`: a :class:`~seglog.cluster.local.LocalCluster` in this process, or a
:class:`~seglog.cluster.client.ClusterClient` bootstrapped from the nodes' Kafka listeners),
and the spelling of their settings.

They speak Kafka's protocol through :class:`seglog.kafka.client.KafkaClient` (one each, with
its own connections and metadata cache), so they work against any Kafka broker too.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from seglog.kafka.client import KafkaClient
from seglog.util.clock import Clock

__all__ = ["ClientHost", "client_sasl", "cluster_kafka_client", "kafka_keys", "topic_config_strings"]

#: How long a cluster client waits for a connection or a metadata answer before it tries the
#: next node: short, so that a frozen node (its socket accepts, nothing answers) costs little.
CLIENT_REQUEST_TIMEOUT_S = 5.0


class ClientHost(Protocol):
    """What :class:`~seglog.cluster.producer.ClusterProducer` and
    :class:`~seglog.cluster.consumer.ClusterConsumer` use of the object that made them: its
    event loop (on a thread of its own), its clock, and a way to make Kafka clients of the
    cluster."""

    loop: asyncio.AbstractEventLoop
    clock: Clock
    _closed: bool

    def _call(self, coro: Any, timeout: float | None = 60, loop: asyncio.AbstractEventLoop | None = None) -> Any:
        """Run ``coro`` on the loop and wait for its result."""
        ...

    def _client(self) -> KafkaClient:
        """A new Kafka client of the cluster's listeners (it connects on first use, on the loop)."""
        ...


def cluster_kafka_client(
    bootstrap: Sequence[str], ssl_context: ssl.SSLContext | None = None, sasl: tuple[str, str, str] | None = None
) -> KafkaClient:
    """A Kafka client of the listeners ``bootstrap`` as the cluster's producers, consumers and
    admin calls use it (it connects on first use, on the caller's loop)."""
    return KafkaClient(
        bootstrap,
        client_id="seglog-cluster-client",
        ssl_context=ssl_context,
        request_timeout=CLIENT_REQUEST_TIMEOUT_S,
        retry_backoff=0.05,
        sasl=sasl,
    )


def client_sasl(config: Mapping[str, Any] | None) -> tuple[str, str, str] | None:
    """The SASL mechanism and credentials of Kafka client settings (``security.protocol``
    PLAINTEXT or SASL_PLAINTEXT, ``sasl.mechanism`` PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512,
    ``sasl.username``, ``sasl.password``), or None for PLAINTEXT. Raises ValueError naming what is not available:
    another protocol or mechanism, a missing or unknown key."""
    cfg = dict(config or {})
    known = {"security.protocol", "sasl.mechanism", "sasl.username", "sasl.password"}
    unknown = sorted(set(cfg) - known)
    if unknown:
        raise ValueError(f"client_config: {', '.join(unknown)} not available (only {', '.join(sorted(known))})")
    protocol = str(cfg.get("security.protocol", "PLAINTEXT")).upper()
    if protocol == "PLAINTEXT":
        return None
    if protocol != "SASL_PLAINTEXT":
        raise ValueError(f"client_config: security.protocol={protocol} is not available (PLAINTEXT or SASL_PLAINTEXT)")
    mechanism = str(cfg.get("sasl.mechanism", "GSSAPI")).upper()
    if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        raise ValueError(
            f"client_config: sasl.mechanism={mechanism} is not available (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"
        )
    if "sasl.username" not in cfg or "sasl.password" not in cfg:
        raise ValueError(f"client_config: SASL/{mechanism} needs sasl.username and sasl.password")
    return mechanism, str(cfg["sasl.username"]), str(cfg["sasl.password"])


def kafka_keys(config: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword settings (``linger_ms=5``) as Kafka's keys (``linger.ms``)."""
    return {k.replace("_", "."): v for k, v in config.items()}


def topic_config_strings(config: Mapping[str, Any] | None) -> dict[str, str]:
    """Topic settings as CreateTopics carries them: strings, booleans as ``true``/``false``,
    lists comma-separated."""
    out: dict[str, str] = {}
    for k, v in (config or {}).items():
        if isinstance(v, bool):
            out[k] = "true" if v else "false"
        elif isinstance(v, (list, tuple)):
            out[k] = ",".join(str(x) for x in v)
        else:
            out[k] = str(v)
    return out
