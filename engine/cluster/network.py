"""What a cluster's producers and consumers need from the object that made them
(:class:`ClientHost`: a :class:`~seglog.cluster.local.LocalCluster` in this process, or a
:class:`~seglog.cluster.client.ClusterClient` bootstrapped from the nodes' Kafka listeners),
and the spelling of their settings.

They speak Kafka's protocol through :class:`seglog.kafka.client.KafkaClient` (one each, with
its own connections and metadata cache), so they work against any Kafka broker too.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from seglog.kafka.client import KafkaClient
from seglog.util.clock import Clock

__all__ = [
    "CLIENT_KEYS",
    "ClientHost",
    "ClientSecurity",
    "client_security",
    "cluster_kafka_client",
    "kafka_keys",
    "topic_config_strings",
]

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


class ClientSecurity(NamedTuple):
    """How the cluster's clients reach listeners: a TLS context (None: plain TCP) and the SASL
    mechanism and credentials (None: no SASL)."""

    ssl: ssl.SSLContext | None
    sasl: tuple[str, str, str] | None


#: The Kafka client keys ``client_config`` takes; the TLS ones in librdkafka's spelling, with
#: the Java client's PEM spelling of the CA accepted too.
CLIENT_KEYS = frozenset(
    {
        "security.protocol",
        "sasl.mechanism",
        "sasl.username",
        "sasl.password",
        "ssl.ca.location",
        "ssl.cafile",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.key.password",
        "ssl.endpoint.identification.algorithm",
    }
)
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def client_security(config: Mapping[str, Any] | None) -> ClientSecurity:
    """The TLS context and SASL credentials of Kafka client settings:

    - ``security.protocol``: PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL;
    - ``sasl.mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), ``sasl.username``,
      ``sasl.password`` for the SASL ones;
    - for SSL and SASL_SSL: ``ssl.ca.location`` (or ``ssl.cafile``), a PEM file of the CA
      certificates the listeners' certificates must chain to (default: the system's);
      ``ssl.certificate.location`` and ``ssl.key.location`` (PEM; ``ssl.key.password`` when
      the key is encrypted) for listeners that want a client certificate;
      ``ssl.endpoint.identification.algorithm``: ``https`` (default; the certificate must name
      the host dialled) or ``none``.

    Raises ValueError naming what is not available: an unknown key, another protocol or
    mechanism, a missing setting, a file that cannot be read (naming it)."""
    cfg = {k: v for k, v in (config or {}).items()}
    unknown = sorted(set(cfg) - CLIENT_KEYS)
    if unknown:
        raise ValueError(f"client_config: {', '.join(unknown)} not available (only {', '.join(sorted(CLIENT_KEYS))})")
    protocol = str(cfg.get("security.protocol", "PLAINTEXT")).upper()
    if protocol not in _PROTOCOLS:
        raise ValueError(f"client_config: security.protocol={protocol} is not available ({', '.join(_PROTOCOLS)})")
    tls = protocol in ("SSL", "SASL_SSL")
    tls_keys = sorted(k for k in cfg if k.startswith("ssl."))
    if tls_keys and not tls:
        raise ValueError(f"client_config: {', '.join(tls_keys)} need security.protocol SSL or SASL_SSL, not {protocol}")
    sasl = None
    if protocol.startswith("SASL_"):
        mechanism = str(cfg.get("sasl.mechanism", "GSSAPI")).upper()
        if mechanism not in _MECHANISMS:
            raise ValueError(f"client_config: sasl.mechanism={mechanism} is not available ({', '.join(_MECHANISMS)})")
        if "sasl.username" not in cfg or "sasl.password" not in cfg:
            raise ValueError(f"client_config: SASL/{mechanism} needs sasl.username and sasl.password")
        sasl = (mechanism, str(cfg["sasl.username"]), str(cfg["sasl.password"]))
    else:
        sasl_keys = sorted(k for k in cfg if k.startswith("sasl."))
        if sasl_keys:
            raise ValueError(
                f"client_config: {', '.join(sasl_keys)} need security.protocol SASL_PLAINTEXT or SASL_SSL, "
                f"not {protocol}"
            )
    return ClientSecurity(_client_ssl_context(cfg) if tls else None, sasl)


def _client_ssl_context(cfg: Mapping[str, Any]) -> ssl.SSLContext:
    if "ssl.ca.location" in cfg and "ssl.cafile" in cfg and cfg["ssl.ca.location"] != cfg["ssl.cafile"]:
        raise ValueError("client_config: ssl.ca.location and ssl.cafile name different files; give one")
    ca = cfg.get("ssl.ca.location", cfg.get("ssl.cafile"))
    cert = cfg.get("ssl.certificate.location")
    key = cfg.get("ssl.key.location")
    if (cert is None) != (key is None):
        raise ValueError("client_config: ssl.certificate.location and ssl.key.location go together")
    if "ssl.key.password" in cfg and key is None:
        raise ValueError("client_config: ssl.key.password without ssl.key.location")
    algorithm = str(cfg.get("ssl.endpoint.identification.algorithm", "https")).lower()
    if algorithm not in ("https", "none", ""):
        raise ValueError(
            f"client_config: ssl.endpoint.identification.algorithm={algorithm} is not available (https or none)"
        )
    for name, path in (("ssl.ca.location", ca), ("ssl.certificate.location", cert), ("ssl.key.location", key)):
        if path is not None and not os.path.isfile(str(path)):
            raise ValueError(f"client_config: {name}: no such file {str(path)!r}")
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    if ca is not None:
        try:
            ctx.load_verify_locations(cafile=str(ca))
        except (ssl.SSLError, OSError) as exc:
            raise ValueError(f"client_config: ssl.ca.location {str(ca)!r} holds no PEM certificate ({exc})") from None
    if cert is not None:
        password = cfg.get("ssl.key.password")
        try:
            ctx.load_cert_chain(str(cert), str(key), None if password is None else str(password))
        except (ssl.SSLError, OSError) as exc:
            raise ValueError(
                f"client_config: the certificate {str(cert)!r} and key {str(key)!r} cannot be loaded "
                f"(a PEM certificate and its key; ssl.key.password for an encrypted key): {exc}"
            ) from None
    if algorithm != "https":
        ctx.check_hostname = False
    return ctx


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
