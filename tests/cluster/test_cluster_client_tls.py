"""The cluster's own clients (admin calls, ``ClusterProducer``, ``ClusterConsumer``) reach Kafka
listeners that speak TLS (SSL, SASL_SSL) from Kafka's client keys alone (``client_config``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from seglog.cluster.client import ClusterClient
from seglog.cluster.local import LocalCluster
from seglog.cluster.messages import UpdateMetadataRequest
from seglog.cluster.network import client_security
from seglog.errors import BrokerNotAvailableError, SslAuthenticationError
from tests.kafka.tls import TLSFiles, make_tls


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    return make_tls(tmp_path_factory.mktemp("tls"))


def _server_keys(tls: TLSFiles) -> dict[str, str]:
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(tls.server)}


def _round_trip(cluster: LocalCluster, client: ClusterClient, topic: str) -> None:
    cluster.create_topic(topic, partitions=2, replication_factor=3, config={"min.insync.replicas": 2})
    producer = cluster.producer(acks="all", enable_idempotence=True)
    futures = [producer.send(topic, b"v%02d" % i, partition=i % 2) for i in range(40)]
    producer.flush(30)
    assert sorted((f.result().partition, f.result().offset) for f in futures) == sorted(
        (p, o) for p in range(2) for o in range(20)
    )
    producer.close()
    consumer = client.consumer()  # bootstrapped from client_config alone
    consumer.assign([(topic, 0), (topic, 1)])
    got: list[Any] = []
    deadline = time.monotonic() + 20
    while len(got) < 40 and time.monotonic() < deadline:
        got.extend(consumer.poll(timeout_ms=500))
    consumer.close()
    assert sorted(r.value for r in got) == [b"v%02d" % i for i in range(40)]
    assert {(p.partition, len(p.replicas)) for p in client.describe_topics([topic])} == {(0, 3), (1, 3)}
    marks = client.watermarks(topic, 0)
    assert marks is not None and marks[1] == 20


def test_ssl_listeners_from_client_config(tmp_path: Path, tls: TLSFiles) -> None:
    options = {"security_protocol": "SSL", "ssl_context": _server_keys(tls)}
    config = {"security.protocol": "SSL", "ssl.ca.location": str(tls.ca)}
    with LocalCluster(nodes=3, dir=tmp_path / "c", kafka_options=options, client_config=config) as cluster:
        with ClusterClient(cluster.bootstrap_servers, client_config=config, metadata_timeout_s=10) as client:
            _round_trip(cluster, client, "tls")
        # Java's spelling of the CA, and no host name check.
        java = {"security.protocol": "SSL", "ssl.cafile": str(tls.ca), "ssl.endpoint.identification.algorithm": ""}
        with ClusterClient(cluster.bootstrap_servers, client_config=java, metadata_timeout_s=10) as client:
            assert client.describe_topics(["tls"])
        # A CA that did not sign the listeners' certificates: a clear error at once (asking
        # again cannot help), not at the end of metadata_timeout_s.
        (tmp_path / "other").mkdir()
        other = make_tls(tmp_path / "other")
        wrong = {"security.protocol": "SSL", "ssl.ca.location": str(other.ca)}
        start = time.monotonic()
        with pytest.raises(SslAuthenticationError, match="TLS certificate is not trusted") as refused:
            ClusterClient(cluster.bootstrap_servers, client_config=wrong, metadata_timeout_s=30)
        assert time.monotonic() - start < 10
        assert not refused.value.retriable  # a BrokerNotAvailableError that is not retried
        # Plain TCP to a TLS listener is no Kafka answer either.
        with pytest.raises(TimeoutError):
            ClusterClient(cluster.bootstrap_servers, metadata_timeout_s=1)


def test_update_metadata_names_each_listeners_security_protocol(tmp_path: Path, tls: TLSFiles) -> None:
    """Each node registers the security protocol of its two listeners with their addresses, and
    the controller's UpdateMetadata carries them on the wire: SASL_PLAINTEXT between nodes (a
    secret), SSL for clients, as the nodes decode them from Kafka's endpoint ids."""
    options = {"security_protocol": "SSL", "ssl_context": _server_keys(tls)}
    config = {"security.protocol": "SSL", "ssl.ca.location": str(tls.ca)}
    seen: list[UpdateMetadataRequest] = []
    with LocalCluster(
        nodes=3, dir=tmp_path / "c", secret="s3cret", kafka_options=options, client_config=config
    ) as cluster:
        assert {n.security_protocol for n in cluster.nodes.values() if n} == {"SASL_PLAINTEXT"}
        assert {n.kafka_security_protocol for n in cluster.nodes.values() if n} == {"SSL"}

        def tap() -> None:
            handlers = cluster.transport._handlers
            for i, handle in list(handlers.items()):

                def record(src: int, msg: Any, reply: Any, handle: Any = handle) -> None:
                    if isinstance(msg, UpdateMetadataRequest):
                        seen.append(msg)
                    handle(src, msg, reply)

                handlers[i] = record

        cluster._on_loop(tap)
        cluster.create_topic("t", partitions=1, replication_factor=3)  # UpdateMetadata to every node
        cluster.wait_for(
            lambda: sum(len(m.addresses) == 3 for m in seen) >= 3, 20, "UpdateMetadata naming every node, at each"
        )
    for msg in seen:  # (the first ones may still lack a node that was registering)
        assert dict(msg.protocols) == {b: "SASL_PLAINTEXT" for b, _ in msg.addresses}
        assert dict(msg.kafka_protocols) == {b: "SSL" for b, _ in msg.kafka_addresses}


def test_sasl_ssl_listeners_with_a_client_certificate(tmp_path: Path, tls: TLSFiles) -> None:
    options = {
        "security_protocol": "SASL_SSL",
        "ssl_context": {**_server_keys(tls), "ssl.client.auth": "required", "ssl.truststore.location": str(tls.ca)},
        "sasl_mechanisms": ["SCRAM-SHA-512"],
        "users": {"alice": "alice-secret"},
    }
    config = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
        "ssl.ca.location": str(tls.ca),
        "ssl.certificate.location": str(tls.client_cert),
        "ssl.key.location": str(tls.client_key),
        "ssl.endpoint.identification.algorithm": "https",
    }
    with LocalCluster(nodes=3, dir=tmp_path / "c", kafka_options=options, client_config=config) as cluster:
        with ClusterClient(cluster.bootstrap_servers, client_config=config, metadata_timeout_s=10) as client:
            _round_trip(cluster, client, "sasl-tls")
        # Without the client certificate the listener refuses the handshake.
        bare = {k: v for k, v in config.items() if k not in ("ssl.certificate.location", "ssl.key.location")}
        with pytest.raises((TimeoutError, BrokerNotAvailableError)):
            ClusterClient(cluster.bootstrap_servers, client_config=bare, metadata_timeout_s=1)


def test_bad_client_config_is_a_clear_value_error(tmp_path: Path, tls: TLSFiles) -> None:
    assert client_security(None) == (None, None)
    assert client_security({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"} | _user()).ssl is None
    ctx = client_security({"security.protocol": "ssl", "ssl.ca.location": str(tls.ca)}).ssl
    assert ctx is not None and ctx.check_hostname
    missing = tmp_path / "nowhere.pem"
    cases = [
        ({"ssl.keystore.location": "x"}, r"ssl\.keystore\.location not available"),
        ({"security.protocol": "TLS"}, r"security\.protocol=TLS is not available"),
        ({"security.protocol": "SSL", "ssl.ca.location": str(missing)}, "no such file '" + str(missing)),
        ({"security.protocol": "SSL", "ssl.ca.location": str(tls.client_key)}, "holds no PEM certificate"),
        ({"security.protocol": "SSL", "ssl.certificate.location": str(tls.client_cert)}, "go together"),
        ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "dns"}, "https or none"),
        ({"security.protocol": "PLAINTEXT", "ssl.ca.location": str(tls.ca)}, "need security.protocol SSL"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"} | _user(), "GSSAPI is not available"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "needs sasl.username and sasl.password"),
        ({"security.protocol": "SSL"} | _user(), "need security.protocol SASL_PLAINTEXT or SASL_SSL"),
        (
            {
                "security.protocol": "SSL",
                "ssl.certificate.location": str(tls.client_cert),
                "ssl.key.location": str(tls.ca),
            },
            "cannot be loaded",
        ),
    ]
    for config, message in cases:
        with pytest.raises(ValueError, match=message):
            client_security(config)
    with pytest.raises(ValueError, match="no such file"):
        LocalCluster(nodes=1, dir=tmp_path / "c", client_config={"security.protocol": "SSL", "ssl.cafile": "/nope"})
    with pytest.raises(ValueError, match="not both"):
        ClusterClient("127.0.0.1:1", client_config={}, sasl=("PLAIN", "a", "b"))


def _user() -> dict[str, str]:
    return {"sasl.username": "u", "sasl.password": "p"}
