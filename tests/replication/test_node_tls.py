"""Three ``seglog node`` processes whose listener between nodes speaks TLS (SSL, SASL_SSL) by
their properties files: a three-replica topic takes acks=all records from confluent-kafka and
gives them all back, and the inter-broker port really is TLS."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import ssl
import time
from pathlib import Path
from typing import Any

import pytest

from seglog.cluster.kafka_transport import NODE_SASL_MECHANISM, NODE_SASL_USER
from seglog.cluster.process import ProcessCluster
from seglog.errors import BrokerNotAvailableError, SaslAuthenticationError
from seglog.kafka.client import BrokerConnection
from tests.kafka.tls import make_tls

ck = pytest.importorskip("confluent_kafka")

NODES_USER, NODES_PASSWORD = "nodes", "n0des-secret"


def _properties(protocol: str, tls: Any) -> dict[str, str]:
    # ProcessCluster's listeners: PLAINTEXT (between nodes) and CLIENT (Kafka clients).
    props = {
        "listener.security.protocol.map": f"PLAINTEXT:{protocol},CLIENT:PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tls.server),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls.ca),
    }
    if protocol == "SASL_SSL":
        props |= {
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
            "listener.name.plaintext.scram-sha-256.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="{NODES_USER}" password="{NODES_PASSWORD}";'
            ),
        }
    return props


@pytest.mark.cluster
@pytest.mark.parametrize("protocol", ["SSL", "SASL_SSL"])
def test_nodes_replicate_over_tls_from_their_properties(protocol: str, zookeeper_chroot: str, tmp_path: Path) -> None:
    (tmp_path / "tls").mkdir()
    tls = make_tls(tmp_path / "tls")
    started = time.monotonic()
    with ProcessCluster(
        nodes=3, dir=tmp_path / "cluster", zookeeper=zookeeper_chroot, node_config=_properties(protocol, tls)
    ) as c:
        c.create_topic("t", 1, 3, {"min.insync.replicas": 2})
        c.wait_for(lambda: len(c.isr("t")) == 3, 20, "a full ISR")
        acked: list[bytes] = []

        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                acked.append(msg.value())

        producer = ck.Producer(
            {
                "bootstrap.servers": c.bootstrap_servers,
                "acks": "all",
                "enable.idempotence": True,
                "message.timeout.ms": 15000,
            }
        )
        for i in range(300):
            producer.produce("t", b"v%03d" % i, partition=0, on_delivery=delivered)
        assert producer.flush(20) == 0
        assert acked == [b"v%03d" % i for i in range(300)]
        consumer = ck.Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": "g", "enable.auto.commit": False})
        values: list[bytes] = []
        try:
            consumer.assign([ck.TopicPartition("t", 0, 0)])
            deadline = time.monotonic() + 15
            while len(values) < 300 and time.monotonic() < deadline:
                m = consumer.poll(0.5)
                if m is not None and m.error() is None:
                    values.append(m.value() or b"")
        finally:
            consumer.close()
        assert values == acked
        # Every follower has the records (the high watermark is the ISR's least log end), so
        # they fetched them over the TLS listener.
        c.wait_for(
            lambda: len(c.isr("t")) == 3 and (w := c.watermarks("t")) is not None and w[1] == 300,
            10,
            "a full ISR at the high watermark 300",
        )

        # Each node registered its listeners' protocols, which the controller's UpdateMetadata
        # sends on (as Kafka's endpoint security protocol ids).
        from kazoo.client import KazooClient  # type: ignore[import-untyped]  # kazoo ships no type information

        zk = KazooClient(c.zookeeper_connect)
        zk.start(10)
        try:
            for i in c.ids:
                reg = json.loads(zk.get(f"/brokers/ids/{i}")[0])
                assert (reg["security_protocol"], reg["kafka_security_protocol"]) == (protocol, "PLAINTEXT"), reg
        finally:
            zk.stop()
            zk.close()
        for i in c.ids:
            host, port = c.address(i).rsplit(":", 1)
            # A TLS handshake with the CA succeeds and shows the nodes' certificate ...
            ctx = ssl.create_default_context(cafile=str(tls.ca))
            with socket.create_connection((host, int(port)), timeout=5) as raw:
                with ctx.wrap_socket(raw, server_hostname=host) as s:
                    cert = s.getpeercert()
                    assert cert is not None and ("IP Address", "127.0.0.1") in cert.get("subjectAltName", ())
            # ... a plain Kafka client gets no Kafka answer there ...
            with pytest.raises(BrokerNotAvailableError):
                asyncio.run(_open(c.address(i), None, None))
            # ... and, with SASL_SSL, TLS alone is not enough: the nodes' SCRAM credentials are.
            if protocol == "SASL_SSL":
                with pytest.raises(SaslAuthenticationError):
                    asyncio.run(_open(c.address(i), ctx, ("SCRAM-SHA-256", NODES_USER, "wrong")))
                asyncio.run(_open(c.address(i), ctx, ("SCRAM-SHA-256", NODES_USER, NODES_PASSWORD)))
            else:
                asyncio.run(_open(c.address(i), ctx, None))
    assert time.monotonic() - started < 30


@pytest.mark.cluster
def test_process_cluster_secret_is_sasl_scram_between_nodes(zookeeper_chroot: str, tmp_path: Path) -> None:
    """``ProcessCluster(secret=...)``, as ``LocalCluster``'s: the listener between nodes takes
    SASL/SCRAM-SHA-256 as the nodes' user with the secret as password (quotes and backslashes
    kept through the properties file and JAAS), the nodes replicate, and a wrong password is
    refused there. The properties files that hold it are the owner's alone."""
    secret = 'pa"ss\\w:rd = x'
    with ProcessCluster(nodes=3, dir=tmp_path / "cluster", zookeeper=zookeeper_chroot, secret=secret) as c:
        _replicate(c, "s")
        for i in c.ids:
            assert os.stat(c.config_path(i)).st_mode & 0o777 == 0o600
            with pytest.raises(SaslAuthenticationError):
                asyncio.run(_open(c.address(i), None, (NODE_SASL_MECHANISM, NODE_SASL_USER, "wrong")))
            asyncio.run(_open(c.address(i), None, (NODE_SASL_MECHANISM, NODE_SASL_USER, secret)))
    with pytest.raises(ValueError, match="UTF-8"):
        ProcessCluster(nodes=1, dir=tmp_path / "bad", zookeeper=zookeeper_chroot, secret=b"\xff")
    with pytest.raises(ValueError, match="node_config"):
        ProcessCluster(nodes=1, dir=tmp_path / "bad", zookeeper=zookeeper_chroot, ssl=object())


@pytest.mark.cluster
def test_each_node_authenticates_as_its_own_user(zookeeper_chroot: str, tmp_path: Path) -> None:
    """``seglog node`` properties give every node a SCRAM user of its own (its JAAS login) and
    the listener between nodes a users file listing them all: the nodes replicate, each
    listener takes every node's credentials, and a user the file does not list is refused."""
    users = tmp_path / "node-users"
    users.write_text(
        "".join(f"node-{i} SCRAM-SHA-256=[iterations=4096,password=pw-{i}]\n" for i in range(3)), encoding="utf-8"
    )
    common = {
        "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT,CLIENT:PLAINTEXT",
        "listener.name.plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.plaintext.sasl.users.file": str(users),
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
    }
    own = {
        i: {
            "listener.name.plaintext.scram-sha-256.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="node-{i}" password="pw-{i}";'
            )
        }
        for i in range(3)
    }
    with ProcessCluster(
        nodes=3, dir=tmp_path / "cluster", zookeeper=zookeeper_chroot, node_config=common, node_configs=own
    ) as c:
        _replicate(c, "u")
        for i in c.ids:
            for j in c.ids:
                asyncio.run(_open(c.address(i), None, ("SCRAM-SHA-256", f"node-{j}", f"pw-{j}")))
            with pytest.raises(SaslAuthenticationError):
                asyncio.run(_open(c.address(i), None, ("SCRAM-SHA-256", "node-3", "pw-3")))
            with pytest.raises(SaslAuthenticationError):
                asyncio.run(_open(c.address(i), None, ("SCRAM-SHA-256", "node-0", "pw-1")))


def _replicate(c: ProcessCluster, topic: str) -> None:
    """20 records into a new three-replica topic that takes them only from all three, then a
    full ISR: every node fetched from the leader, so every link between them authenticated."""
    c.create_topic(topic, 1, 3, {"min.insync.replicas": 3})
    producer = c.producer(acks="all")
    try:
        assert [producer.send(topic, b"v%d" % i).result(30).offset for i in range(20)] == list(range(20))
    finally:
        producer.close()
    c.wait_for(lambda: len(c.isr(topic)) == 3, 20, "a full ISR")


async def _open(address: str, ctx: ssl.SSLContext | None, sasl: tuple[str, str, str] | None) -> None:
    conn = await BrokerConnection.open(address, ssl_context=ctx, sasl=sasl, timeout=2.0)
    await conn.close()
