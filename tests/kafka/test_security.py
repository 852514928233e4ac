"""Listener security: TLS and SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) against kafka-python,
confluent-kafka (librdkafka) and kcat, and byte-level for the refusals (request before
authentication, wrong password, unknown mechanism, the KIP-43 v0 flow)."""

from __future__ import annotations

import base64
import gc
import hashlib
import hmac
import logging
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import time
import uuid
from typing import Any

import pytest

from seglog import Store
from seglog.errors import ConfigError
from seglog.kafka import codec
from seglog.kafka.security import (
    ListenerSecurity,
    ScramCredential,
    _Scram,
    listener_options,
    read_users_file,
)
from seglog.storage.records import decode_records

from .conftest import RawClient, serve_process
from .tls import TLSFiles, make_tls

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


# -- certificates ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    return make_tls(tmp_path_factory.mktemp("tls"))


def _ssl_keys(tls: TLSFiles, **more: str) -> dict:
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(tls.server), **more}


def _serve_options(tls: TLSFiles, protocol: str, mechanism: str | None) -> dict:
    """``Store.serve`` keyword arguments for a listener of ``protocol``: the server's keys when it
    speaks TLS, the test users when it takes a SASL ``mechanism``."""
    opts: dict = {"security_protocol": protocol}
    if "SSL" in protocol:
        opts["ssl_context"] = _ssl_keys(tls)
    if mechanism:
        opts["users"] = USERS
    return opts


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path / "data") as s:
        yield s


def _records(store: Store, topic: str) -> list:
    return [
        r
        for p in range(store.partitions_for(topic))
        for r in decode_records(store.log(topic, p).read(0, 1 << 24).to_bytes())
    ]


# -- kafka-python -----------------------------------------------------------------------------------


def _kafka_python(
    servers: str, protocol: str, mechanism: str | None, tls: TLSFiles | None, password: str = "alice-secret", **extra
) -> dict:
    conf = {"bootstrap_servers": servers, "security_protocol": protocol, **extra}
    if mechanism:
        conf.update(sasl_mechanism=mechanism, sasl_plain_username="alice", sasl_plain_password=password)
    if tls is not None:
        conf.update(ssl_cafile=str(tls.ca), ssl_check_hostname=True)
    return conf


def _kafka_python_round_trip(servers: str, conf: dict, topic: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(acks="all", **conf)
    for i in range(20):
        producer.send(topic, b"v%d" % i, key=b"k")
    producer.flush(15)
    producer.close()
    consumer = KafkaConsumer(
        topic, group_id="g-" + topic, auto_offset_reset="earliest", consumer_timeout_ms=15000, **conf
    )
    got = []
    for m in consumer:  # up to the 20 records sent (the timeout only ends a shorter stream)
        got.append(m.value)
        if len(got) == 20:
            break
    consumer.commit()
    consumer.close()
    assert got == [b"v%d" % i for i in range(20)]


@pytest.mark.parametrize(
    "protocol,mechanism",
    [
        ("SSL", None),
        ("SASL_PLAINTEXT", "PLAIN"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
        ("SASL_SSL", "SCRAM-SHA-512"),
        ("SASL_SSL", "PLAIN"),
    ],
)
def test_kafka_python_produces_and_consumes(store, tls, protocol, mechanism):
    pytest.importorskip("kafka")
    opts = _serve_options(tls, protocol, mechanism)
    with store.serve(**opts) as broker:
        topic = "t-" + uuid.uuid4().hex[:8]
        conf = _kafka_python(broker.bootstrap_servers, protocol, mechanism, tls if "SSL" in protocol else None)
        _kafka_python_round_trip(broker.bootstrap_servers, conf, topic)
    assert len(_records(store, topic)) == 20


def test_kafka_python_wrong_password_sees_sasl_authentication_failed(store, caplog):
    kafka = pytest.importorskip("kafka")
    from kafka import KafkaProducer

    with store.serve(security_protocol="SASL_PLAINTEXT", users=USERS) as broker:
        conf = _kafka_python(
            broker.bootstrap_servers, "SASL_PLAINTEXT", "SCRAM-SHA-256", None, password="wrong", max_block_ms=2000
        )
        caplog.set_level(logging.WARNING)
        # api_version given: the constructor does not connect (a constructor that fails to
        # bootstrap leaves kafka-python's sockets open); the send cannot get metadata.
        producer = KafkaProducer(api_version=(4, 0), **conf)
        try:
            with pytest.raises(kafka.errors.KafkaTimeoutError):
                producer.send("refused", b"x").get(5)
        finally:
            producer.close(0)
    client_errors = [r.getMessage() for r in caplog.records if r.name.startswith("kafka")]
    assert any("SaslAuthenticationFailedError" in m and "SCRAM-SHA-256" in m for m in client_errors)
    ours = [r for r in caplog.records if r.name == "seglog.kafka"]
    assert ours and all("authentication failed" in r.getMessage() for r in ours)
    assert "refused" not in store.topics()


def test_client_certificate_required(store, tls):
    pytest.importorskip("kafka")
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    keys = _ssl_keys(tls, **{"ssl.client.auth": "required", "ssl.truststore.location": str(tls.ca)})
    with store.serve(security_protocol="SSL", ssl_context=keys) as broker:
        conf = _kafka_python(broker.bootstrap_servers, "SSL", None, tls)
        producer = KafkaProducer(max_block_ms=2000, api_version=(4, 0), **conf)
        try:
            with pytest.raises(KafkaError):  # the TLS handshake fails: no client certificate
                producer.send("nocert", b"x").get(5)
        finally:
            producer.close(0)
        conf.update(ssl_certfile=str(tls.client_cert), ssl_keyfile=str(tls.client_key))
        producer = KafkaProducer(**conf)
        producer.send("withcert", b"x").get(10)
        producer.close()
    assert "nocert" not in store.topics()
    assert [r.value for r in _records(store, "withcert")] == [b"x"]


def test_closing_a_tls_listener_ends_connections_still_in_their_handshake(store, tls):
    """A client that connected but has not finished (here: not begun) its TLS handshake is
    disconnected when the listener closes, not left open until garbage collection."""
    broker = store.serve(security_protocol="SSL", ssl_context=_ssl_keys(tls))
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    silent = socket.create_connection((host, int(port)), timeout=10)  # sends no ClientHello
    halfway = socket.create_connection((host, int(port)), timeout=10)
    # The client's first flight only: the server answers and waits for the client's next one.
    tls_client = ssl.create_default_context(cafile=str(tls.ca)).wrap_bio(
        ssl.MemoryBIO(), outgoing := ssl.MemoryBIO(), server_hostname="localhost"
    )
    with pytest.raises(ssl.SSLWantReadError):
        tls_client.do_handshake()
    halfway.sendall(outgoing.read())
    assert halfway.recv(65536)  # the ServerHello and the rest of the server's flight
    with silent, halfway:
        broker.close()
        gc.collect()  # a socket the server dropped unclosed would warn here, failing the test
        for raw in (silent, halfway):
            assert raw.recv(65536) == b""  # the server closed its end


def test_a_failed_tls_handshake_is_logged_once_and_the_listener_serves_on(store, tls, caplog):
    caplog.set_level(logging.DEBUG, logger="seglog.kafka")
    with store.serve(security_protocol="SSL", ssl_context=_ssl_keys(tls)) as broker:
        host, port = broker.bootstrap_servers.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            raw.sendall(b"\x00\x00\x00\x10not a ClientHello")  # a PLAINTEXT client on a TLS port
            while raw.recv(4096):  # a TLS alert at most, then the close
                pass
        ctx = ssl.create_default_context(cafile=str(tls.ca))
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            with ctx.wrap_socket(sock, server_hostname="localhost") as tls_sock:
                assert tls_sock.version() is not None
    failed = [r for r in caplog.records if r.name == "seglog.kafka" and "TLS handshake failed" in r.getMessage()]
    assert len(failed) == 1 and failed[0].levelno == logging.WARNING


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_aiokafka_over_sasl_ssl(store, tls, mechanism):
    aiokafka = pytest.importorskip("aiokafka")
    import asyncio

    from aiokafka.helpers import create_ssl_context

    topic = "a-" + uuid.uuid4().hex[:8]
    with store.serve(security_protocol="SASL_SSL", users=USERS, ssl_context=_ssl_keys(tls)) as broker:
        conf = {
            "bootstrap_servers": broker.bootstrap_servers,
            "security_protocol": "SASL_SSL",
            "ssl_context": create_ssl_context(cafile=str(tls.ca)),
            "sasl_mechanism": mechanism,
            "sasl_plain_username": "bob",
            "sasl_plain_password": "bob-secret",
        }

        async def run() -> list:
            producer = aiokafka.AIOKafkaProducer(acks="all", **conf)
            await producer.start()
            try:
                for i in range(10):
                    await producer.send_and_wait(topic, b"v%d" % i)
            finally:
                await producer.stop()
            consumer = aiokafka.AIOKafkaConsumer(topic, group_id="aio", auto_offset_reset="earliest", **conf)
            await consumer.start()
            got: list = []
            try:
                while len(got) < 10:
                    batch = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 20)
                    got.extend(m.value for records in batch.values() for m in records)
                await consumer.commit()
            finally:
                await consumer.stop()
            return got

        assert asyncio.run(run()) == [b"v%d" % i for i in range(10)]
    assert len(_records(store, topic)) == 10


def test_encrypted_key_with_ssl_key_password(tmp_path, tls):
    serialization = pytest.importorskip("cryptography.hazmat.primitives.serialization")
    key = serialization.load_pem_private_key(tls.server_key.read_bytes(), None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"key-pass"),
    )
    pem = tmp_path / "encrypted.pem"
    pem.write_bytes(encrypted + tls.server_cert.read_bytes())
    from seglog.kafka.security import server_ssl_context

    ctx = server_ssl_context({"ssl.keystore.location": str(pem), "ssl.key.password": "key-pass"})
    assert ctx.verify_mode == ssl.CERT_NONE
    with pytest.raises(ConfigError, match="wrong ssl.key.password"):
        server_ssl_context({"ssl.keystore.location": str(pem), "ssl.key.password": "nope"})
    with pytest.raises(ConfigError, match="ssl.enabled.protocols"):
        server_ssl_context({"ssl.keystore.location": str(tls.server), "ssl.enabled.protocols": "TLSv1"})
    ctx = server_ssl_context({"ssl.keystore.location": str(tls.server), "ssl.enabled.protocols": "TLSv1.3"})
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_3


# -- confluent-kafka and kcat -----------------------------------------------------------------------


def _rdkafka_conf(
    servers: str, protocol: str, mechanism: str | None, tls: TLSFiles | None, password: str = "alice-secret"
) -> dict:
    conf = {"bootstrap.servers": servers, "security.protocol": protocol.lower()}
    if mechanism:
        conf.update({"sasl.mechanism": mechanism, "sasl.username": "alice", "sasl.password": password})
    if tls is not None:
        conf["ssl.ca.location"] = str(tls.ca)
    return conf


@pytest.mark.parametrize(
    "protocol,mechanism",
    [("SSL", None), ("SASL_PLAINTEXT", "PLAIN"), ("SASL_PLAINTEXT", "SCRAM-SHA-256"), ("SASL_SSL", "SCRAM-SHA-512")],
)
def test_confluent_produces_and_consumes(store, tls, protocol, mechanism):
    ck = pytest.importorskip("confluent_kafka")
    opts = _serve_options(tls, protocol, mechanism)
    topic = "c-" + uuid.uuid4().hex[:8]
    with store.serve(**opts) as broker:
        conf = _rdkafka_conf(broker.bootstrap_servers, protocol, mechanism, tls if "SSL" in protocol else None)
        producer = ck.Producer({**conf, "enable.idempotence": True, "compression.type": "lz4"})
        for i in range(50):
            producer.produce(topic, b"v%d" % i, key=b"k", headers=[("h", b"%d" % i)])
        assert producer.flush(20) == 0
        consumer = ck.Consumer({**conf, "group.id": "g", "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        got: list[bytes | None] = []
        deadline = time.monotonic() + 25
        try:
            while len(got) < 50 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                assert msg.error() is None, msg.error()
                got.append(msg.value())
            consumer.commit(asynchronous=False)
        finally:
            consumer.close()
    assert got == [b"v%d" % i for i in range(50)]


def test_confluent_wrong_password_refused_nothing_written(store):
    ck = pytest.importorskip("confluent_kafka")
    errors: list[Any] = []
    with store.serve(security_protocol="SASL_PLAINTEXT", users=USERS) as broker:
        conf = _rdkafka_conf(broker.bootstrap_servers, "SASL_PLAINTEXT", "PLAIN", None, password="wrong")
        producer = ck.Producer({**conf, "error_cb": errors.append, "message.timeout.ms": 3000})
        producer.produce("refused", b"x")
        producer.flush(6)
    auth = [e for e in errors if e.code() == ck.KafkaError._AUTHENTICATION]
    assert auth, errors
    assert "Invalid username or password" in auth[0].str()
    assert "refused" not in store.topics()


def test_confluent_unknown_mechanism_lists_enabled(store):
    ck = pytest.importorskip("confluent_kafka")
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger("test-security-rdkafka")
    logger.addHandler(Collect())
    with store.serve(security_protocol="SASL_PLAINTEXT", users=USERS, sasl_mechanisms=["SCRAM-SHA-512"]) as broker:
        conf = _rdkafka_conf(broker.bootstrap_servers, "SASL_PLAINTEXT", "PLAIN", None)
        producer = ck.Producer({**conf, "message.timeout.ms": 3000}, logger=logger)
        producer.produce("refused", b"x")
        producer.flush(6)
    text = " ".join(lines)
    assert "Unsupported SASL mechanism" in text and "SCRAM-SHA-512" in text, text
    assert "refused" not in store.topics()


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
@pytest.mark.parametrize(
    "protocol,mechanism", [("SSL", None), ("SASL_SSL", "SCRAM-SHA-256"), ("SASL_PLAINTEXT", "PLAIN")]
)
def test_kcat_produces_and_consumes(store, tls, protocol, mechanism):
    opts = _serve_options(tls, protocol, mechanism)
    topic = "k-" + uuid.uuid4().hex[:8]
    with store.serve(**opts) as broker:
        conf = _rdkafka_conf(broker.bootstrap_servers, protocol, mechanism, tls if "SSL" in protocol else None)
        args = [a for k, v in conf.items() if k != "bootstrap.servers" for a in ("-X", f"{k}={v}")]
        base = ["kcat", "-b", broker.bootstrap_servers, "-t", topic, *args]
        subprocess.run([*base, "-P", "-K:"], input=b"a:1\nb:2\nc:3\n", check=True, timeout=30)
        out = subprocess.run(
            [*base, "-C", "-e", "-o", "beginning", "-f", "%k=%s\n"], capture_output=True, check=True, timeout=30
        )
        assert out.stdout.split() == [b"a=1", b"b=2", b"c=3"]
        bad = subprocess.run(
            [
                "kcat",
                "-b",
                broker.bootstrap_servers,
                "-L",
                "-m",
                "5",
                "-X",
                f"security.protocol={protocol.lower()}",
                *(["-X", f"ssl.ca.location={tls.ca}"] if "SSL" in protocol else []),
                *(
                    ["-X", f"sasl.mechanism={mechanism}", "-X", "sasl.username=alice", "-X", "sasl.password=nope"]
                    if mechanism
                    else ["-X", "ssl.ca.location=" + str(tls.server_key)]
                ),
            ],
            capture_output=True,
            timeout=30,
        )
        assert bad.returncode != 0


# -- byte level ---------------------------------------------------------------------------------


def _token_frame(sock: socket.socket, token: bytes) -> None:
    sock.sendall(struct.pack(">i", len(token)) + token)


def _scram_client(mechanism: str, user: str, password: str):
    """A SCRAM client (RFC 5802) written here from the RFC, for the byte-level tests."""
    name = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    nonce = base64.b64encode(uuid.uuid4().bytes).decode()
    first_bare = f"n={user},r={nonce}"
    server_first = yield ("n,," + first_bare).encode()
    fields = dict(f.split("=", 1) for f in server_first.decode().split(","))
    assert fields["r"].startswith(nonce)
    salted = hashlib.pbkdf2_hmac(name, password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", name).digest()
    stored = hashlib.new(name, client_key).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth = f"{first_bare},{server_first.decode()},{without_proof}".encode()
    sig = hmac.new(stored, auth, name).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, sig))
    server_final = yield f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
    server_key = hmac.new(salted, b"Server Key", name).digest()
    expected = base64.b64encode(hmac.new(server_key, auth, name).digest())
    assert server_final == b"v=" + expected
    yield None


def _sasl_authenticate(client: RawClient, mechanism: str, user: str, password: str, version: int = 2) -> dict:
    hs = client.request("SaslHandshake", 17, 1, {"mechanism": mechanism})
    assert hs["error_code"] == 0
    if mechanism == "PLAIN":
        return client.request("SaslAuthenticate", 36, version, {"auth_bytes": f"\0{user}\0{password}".encode()})
    steps = _scram_client(mechanism, user, password)
    token = next(steps)
    while True:
        resp = client.request("SaslAuthenticate", 36, version, {"auth_bytes": token})
        if resp["error_code"]:
            return resp
        token = steps.send(bytes(resp["auth_bytes"]))
        if token is None:
            return resp


def _closed(client: RawClient) -> bool:
    """Whether the broker closed the connection (without another answer); closes ours."""
    try:
        return client.read_frame() is None
    except (TimeoutError, ConnectionError):
        return True
    finally:
        client.sock.close()


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("version", [0, 1, 2])
def test_sasl_authenticate_versions(store, mechanism, version):
    with store.serve(security_protocol="SASL_PLAINTEXT", users=USERS) as broker:
        client = RawClient(broker.bootstrap_servers)
        resp = _sasl_authenticate(client, mechanism, "bob", "bob-secret", version)
        assert resp["error_code"] == 0
        meta = client.request(
            "Metadata",
            3,
            12,
            {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
        )
        assert meta["brokers"]
        # After authentication SaslHandshake is an illegal state, as with Kafka.
        again = client.request("SaslHandshake", 17, 1, {"mechanism": "PLAIN"})
        assert again["error_code"] == 34
        client.sock.close()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wrong_password_gets_58_then_close_logged_once(store, mechanism, caplog):
    caplog.set_level(logging.DEBUG, logger="seglog.kafka")
    with store.serve(security_protocol="SASL_PLAINTEXT", users=USERS) as broker:
        client = RawClient(broker.bootstrap_servers)
        client.request("ApiVersions", 18, 3, {"client_software_name": "raw", "client_software_version": "1"})
        resp = _sasl_authenticate(client, mechanism, "alice", "not-her-password")
        assert resp["error_code"] == 58
        assert resp["error_message"] and mechanism.split("-")[0] in resp["error_message"] + "PLAIN"
        assert _closed(client)
        # An unknown user fails the same way (and for SCRAM only at the proof).
        client = RawClient(broker.bootstrap_servers)
        resp = _sasl_authenticate(client, mechanism, "mallory", "x")
        assert resp["error_code"] == 58
        assert _closed(client)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING and r.name == "seglog.kafka"]
    assert len(warnings) == 2, [r.getMessage() for r in warnings]
    assert all("authentication failed" in r.getMessage() for r in warnings)


def test_scram_unknown_user_gets_a_salt_like_a_known_one(store):
    with store.serve(security_protocol="SASL_PLAINTEXT", users=USERS, sasl_mechanisms=["SCRAM-SHA-256"]) as broker:
        first: dict[str, list[str]] = {}
        for user in ("alice", "mallory", "mallory"):
            client = RawClient(broker.bootstrap_servers)
            client.request("SaslHandshake", 17, 1, {"mechanism": "SCRAM-SHA-256"})
            resp = client.request("SaslAuthenticate", 36, 2, {"auth_bytes": f"n,,n={user},r=abc".encode()})
            assert resp["error_code"] == 0
            fields = dict(f.split("=", 1) for f in bytes(resp["auth_bytes"]).decode().split(","))
            assert fields["r"].startswith("abc") and len(fields["r"]) > 20
            assert int(fields["i"]) >= 4096
            first.setdefault(user, []).append(fields["s"])
            client.sock.close()
        assert first["mallory"][0] == first["mallory"][1]  # stable, so it does not give itself away


def test_request_before_authentication_closes_only_that_connection(store, caplog):
    kafka = pytest.importorskip("kafka")
    from kafka import KafkaProducer

    caplog.set_level(logging.WARNING, logger="seglog.kafka")
    with store.serve(security_protocol="SASL_PLAINTEXT", users=USERS) as broker:
        producer = KafkaProducer(**_kafka_python(broker.bootstrap_servers, "SASL_PLAINTEXT", "SCRAM-SHA-256", None))
        producer.send("ok", b"before").get(10)
        for body in (
            (
                "Metadata",
                3,
                12,
                {
                    "topics": [{"topic_id": bytes(16), "name": "sneaky"}],
                    "allow_auto_topic_creation": True,
                    "include_topic_authorized_operations": False,
                },
            ),
            (
                "Produce",
                0,
                9,
                {
                    "transactional_id": None,
                    "acks": -1,
                    "timeout_ms": 1000,
                    "topic_data": [{"name": "ok", "partition_data": []}],
                },
            ),
        ):
            client = RawClient(broker.bootstrap_servers)
            name, key, version, req = body
            flexible = codec.is_flexible(name + "Request", version)
            header = struct.pack(">hhih", key, version, 7, 3) + b"raw" + (b"\0" if flexible else b"")
            client.send_frame(header + codec.encode_to_bytes(name + "Request", version, req))
            assert _closed(client)
            # After a successful ApiVersions, only SaslHandshake may follow.
            client = RawClient(broker.bootstrap_servers)
            client.request("ApiVersions", 18, 3, {"client_software_name": "raw", "client_software_version": "1"})
            client.send_frame(header + codec.encode_to_bytes(name + "Request", version, req))
            assert _closed(client)
        # A garbage frame and a frame over sasl.server.max.receive.size close too.
        client = RawClient(broker.bootstrap_servers)
        client.send_frame(b"\x60\x01garbage")
        assert _closed(client)
        client = RawClient(broker.bootstrap_servers)
        client.sock.sendall(struct.pack(">i", 10 << 20))
        assert _closed(client)
        producer.send("ok", b"after").get(10)
        producer.close()
    assert "sneaky" not in store.topics()
    assert [r.value for r in _records(store, "ok")] == [b"before", b"after"]
    msgs = [r.getMessage() for r in caplog.records]
    assert any("Metadata request before SASL authentication" in m for m in msgs), msgs
    assert any("Produce request before SASL authentication" in m for m in msgs), msgs


def test_unknown_mechanism_answers_33_with_enabled_list(store):
    with store.serve(
        security_protocol="SASL_PLAINTEXT", users=USERS, sasl_mechanisms=["SCRAM-SHA-256", "PLAIN"]
    ) as broker:
        for mech in ("GSSAPI", "SCRAM-SHA-512", "OAUTHBEARER"):
            client = RawClient(broker.bootstrap_servers)
            resp = client.request("SaslHandshake", 17, 1, {"mechanism": mech})
            assert resp["error_code"] == 33
            assert resp["mechanisms"] == ["SCRAM-SHA-256", "PLAIN"]
            assert _closed(client)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kip43_v0_handshake_then_bare_tokens(store, mechanism):
    with store.serve(security_protocol="SASL_PLAINTEXT", users=USERS) as broker:
        client = RawClient(broker.bootstrap_servers)
        assert client.request("SaslHandshake", 17, 0, {"mechanism": mechanism})["error_code"] == 0
        if mechanism == "PLAIN":
            _token_frame(client.sock, b"\0alice\0alice-secret")
            assert client.read_frame() == b""  # an empty token: done
        else:
            steps = _scram_client(mechanism, "alice", "alice-secret")
            token = next(steps)
            while token is not None:
                _token_frame(client.sock, token)
                token = steps.send(client.read_frame())
        resp = client.request(
            "CreateTopics",
            19,
            7,
            {
                "topics": [
                    {"name": "v0-topic", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
                ],
                "timeout_ms": 1000,
                "validate_only": False,
            },
        )
        assert resp["topics"][0]["error_code"] == 0
        client.sock.close()
        # A wrong password in the v0 flow closes the connection without an answer.
        client = RawClient(broker.bootstrap_servers)
        assert client.request("SaslHandshake", 17, 0, {"mechanism": "PLAIN"})["error_code"] == 0
        _token_frame(client.sock, b"\0alice\0wrong")
        assert _closed(client)
    assert "v0-topic" in store.topics()


def test_plaintext_listener_answers_sasl_with_illegal_state(store):
    with store.serve() as broker:
        client = RawClient(broker.bootstrap_servers)
        assert client.request("SaslHandshake", 17, 1, {"mechanism": "PLAIN"})["error_code"] == 34
        resp = client.request("SaslAuthenticate", 36, 2, {"auth_bytes": b"\0a\0b"})
        assert resp["error_code"] == 34 and "PLAINTEXT" in resp["error_message"]
        versions = client.request("ApiVersions", 18, 3, {"client_software_name": "raw", "client_software_version": "1"})
        keys = {k["api_key"]: (k["min_version"], k["max_version"]) for k in versions["api_keys"]}
        assert keys[17] == (0, 1) and keys[36] == (0, 2)
        client.sock.close()


def test_tls_listener_refuses_plaintext_client(store, tls):
    with store.serve(security_protocol="SSL", ssl_context=_ssl_keys(tls)) as broker:
        client = RawClient(broker.bootstrap_servers, timeout=5)
        client.send_frame(struct.pack(">hhih", 18, 0, 1, 0))
        assert _closed(client)
        ctx = ssl.create_default_context(cafile=str(tls.ca))
        host, port = broker.bootstrap_servers.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                payload = struct.pack(">hhih", 18, 0, 1, 0)
                s.sendall(struct.pack(">i", len(payload)) + payload)
                (size,) = struct.unpack(">i", s.recv(4))
                assert size > 4


# -- SCRAM against RFC 7677's example ------------------------------------------------------------


def test_scram_sha256_rfc7677_example():
    cred = ScramCredential.from_password("pencil", "SCRAM-SHA-256", 4096, base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))
    sec = ListenerSecurity("SASL_PLAINTEXT", users={"user": cred})
    scram = _Scram(sec, "SCRAM-SHA-256")
    scram.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    # Put the RFC's server nonce in place of the random one.
    scram._nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    scram._server_first = f"r={scram._nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = scram.evaluate(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert scram.user == "user"
    assert "pencil" not in str(cred) and str(ScramCredential.parse("SCRAM-SHA-256", str(cred))) == str(cred)


def test_scram_credential_bounds():
    with pytest.raises(ConfigError, match="iterations 1000"):
        ScramCredential.from_password("x", "SCRAM-SHA-256", 1000)
    with pytest.raises(ConfigError, match="SCRAM-SHA-1"):
        ScramCredential.from_password("x", "SCRAM-SHA-1")


# -- configuration --------------------------------------------------------------------------------


def test_listener_options_from_kafka_keys(tmp_path, tls):
    cred = ScramCredential.from_password("carol-secret", "SCRAM-SHA-512", 8192)
    users = tmp_path / "users"
    users.write_text(
        f"# user credentials\ncarol SCRAM-SHA-512=[{cred}]\n"
        f"dave PLAIN=[password=dave-secret],SCRAM-SHA-256=[iterations=4096,password=dave-secret]\n"
    )
    props = {
        "listener.security.protocol.map": "CLIENT:SASL_SSL",
        "listener.name.client.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,SCRAM-SHA-256",
        "listener.name.client.plain.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="x" user_alice="alice-secret" user_bob="b\\"q";',
        "sasl.users.file": str(users),
        "ssl.keystore.type": "PEM",
        "listener.name.client.ssl.keystore.certificate.chain": tls.server_cert.read_text(),
        "listener.name.client.ssl.keystore.key": tls.server_key.read_text(),
    }
    name, host, port, options = listener_options("CLIENT://127.0.0.1:0", props)
    assert (name, host, port, options["security_protocol"]) == ("CLIENT", "127.0.0.1", 0, "SASL_SSL")
    sec = ListenerSecurity(
        options["security_protocol"],
        ssl_context=options["ssl_context"],
        sasl_mechanisms=options["sasl_mechanisms"],
        users=options["users"],
    )
    assert sec.users["bob"].password == 'b"q'
    assert sec.users["carol"].password is None and sec.users["carol"].scram["SCRAM-SHA-512"] == cred
    assert sec.users["dave"].password == "dave-secret" and "SCRAM-SHA-256" in sec.users["dave"].scram
    assert set(read_users_file(str(users))) == {"carol", "dave"}
    for bad, match in (
        (dict(props, **{"ssl.keystore.type": "JKS"}), "only PEM"),
        (dict(props, **{"listener.name.client.sasl.enabled.mechanisms": "GSSAPI"}), "GSSAPI"),
        (dict(props, **{"listener.security.protocol.map": "CLIENT:TLS"}), "CLIENT:TLS"),
        (dict(props, **{"ssl.keystore.location": "/nonexistent.pem"}), "not both"),
        (dict(props, **{"ssl.client.auth": "required"}), "truststore"),
    ):
        with pytest.raises(ConfigError, match=match):
            listener_options("CLIENT://127.0.0.1:0", bad)
    with pytest.raises(ConfigError, match="not a security protocol"):
        listener_options("OTHER://127.0.0.1:0", props)
    users.write_text("eve SCRAM-SHA-256=[salt=AAAA,iterations=4096]\n")
    with pytest.raises(ConfigError, match=r"line 1: .*lacks stored_key, server_key"):
        read_users_file(str(users))


def test_serve_options_are_checked(store, tls):
    with pytest.raises(ConfigError, match="needs ssl_context"):
        store.serve(security_protocol="SSL")
    with pytest.raises(ConfigError, match="needs users"):
        store.serve(security_protocol="SASL_PLAINTEXT")
    with pytest.raises(ConfigError, match="not one of"):
        store.serve(security_protocol="SASL_TLS", users=USERS)
    with pytest.raises(ConfigError, match="no such file"):
        store.serve(security_protocol="SSL", ssl_context={"ssl.keystore.location": "/nonexistent"})
    with pytest.raises(ConfigError, match="SASL mechanisms or users given for a PLAINTEXT"):
        store.serve(users=USERS)
    with pytest.raises(ConfigError, match="'GSSAPI' is not served"):
        store.serve(security_protocol="SASL_PLAINTEXT", users=USERS, sasl_mechanisms="PLAIN,GSSAPI")
    with store.serve(security_protocol="SASL_PLAINTEXT", users=USERS, sasl_mechanisms="scram-sha-256, PLAIN") as broker:
        assert broker.server.security.mechanisms == ["SCRAM-SHA-256", "PLAIN"]


def test_cli_serve_sasl_ssl_listener(tmp_path, tls):
    pytest.importorskip("kafka")
    import signal

    from kafka import KafkaProducer

    config = tmp_path / "broker.properties"
    config.write_text(
        "num.partitions=1\n"
        "listeners=SASL_SSL://127.0.0.1:0\n"
        "sasl.enabled.mechanisms=SCRAM-SHA-256\n"
        f"ssl.keystore.location={tls.server}\n"
        "listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain."
        'PlainLoginModule required user_alice="alice-secret";\n'
    )
    with serve_process(tmp_path / "data", "--config", str(config), protocol="SASL_SSL") as (proc, address):
        producer = KafkaProducer(**_kafka_python(address, "SASL_SSL", "SCRAM-SHA-256", tls))
        producer.send("cli", b"secure").get(10)
        producer.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    with Store.open(tmp_path / "data") as s:
        assert [r.value for r in _records(s, "cli")] == [b"secure"]
    bad = subprocess.run(
        [sys.executable, "-m", "seglog.cli", "serve", str(tmp_path / "data"), "--listen", "SSL://127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode != 0 and "ssl.keystore.location" in bad.stderr
