"""seglog's Kafka protocol client (seglog.kafka.client) against seglog's listener, cross-checked
with kafka-python: what one writes the other reads."""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
import time
import uuid

import pytest

from seglog import Store
from seglog.errors import (
    BrokerNotAvailableError,
    InvalidRequestError,
    KafkaError,
    UnknownTopicOrPartitionError,
)
from seglog.kafka import apis, codec
from seglog.kafka.client import EARLIEST, LATEST, BrokerConnection, KafkaClient
from seglog.storage.records import decode_records, encode_batch

from .conftest import fetch_body
from .tls import make_tls


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path / "data") as s:
        yield s


def _run(coro):
    return asyncio.run(coro)


def test_versions_are_the_highest_both_sides_know(store):
    with store.serve() as broker:

        async def go():
            conn = await BrokerConnection.open(broker.bootstrap_servers)
            try:
                return conn.versions, conn.broker_versions
            finally:
                await conn.close()

        versions, served = _run(go())
    assert served == dict(apis.API_VERSIONS)
    for key, (lo, hi) in apis.API_VERSIONS.items():
        ours = codec.message_versions(apis.API_NAMES[key] + "Request")
        assert versions[key] == min(hi, ours[1])


def test_an_api_versions_version_the_broker_does_not_know_is_asked_again_lower(store, monkeypatch):
    # The listener serves ApiVersions v0-v2 only: the client's v4 is answered in v0 with
    # UNSUPPORTED_VERSION (KIP-511) and the client asks again in v2.
    monkeypatch.setitem(apis.API_VERSIONS, 18, (0, 2))
    with store.serve() as broker:

        async def go():
            conn = await BrokerConnection.open(broker.bootstrap_servers)
            try:
                return conn.versions[18], await conn.request("Metadata", {"topics": None})
            finally:
                await conn.close()

        version, meta = _run(go())
    assert version == 2
    assert [b["node_id"] for b in meta["brokers"]] == [1]


def test_produced_batches_are_read_by_kafka_python(store):
    kafka = pytest.importorskip("kafka")
    topic = "c-" + uuid.uuid4().hex[:8]
    store.create_topic(topic, 2)
    with store.serve() as broker:

        async def go():
            async with await KafkaClient.open(broker.bootstrap_servers) as client:
                first = await client.produce(
                    topic,
                    1,
                    encode_batch(
                        [b"v0", None, b"v2"],
                        keys=[b"k0", b"k1", None],
                        headers=[[("h", b"x")], None, None],
                        compression="gzip",
                    ),
                )
                second = await client.produce(topic, 1, encode_batch([b"v3"], base_offset=0), acks=1)
                return first, second

        first, second = _run(go())
        assert (first.base_offset, second.base_offset) == (0, 3)
        consumer = kafka.KafkaConsumer(
            bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest", consumer_timeout_ms=10000
        )
        try:
            consumer.assign([kafka.TopicPartition(topic, 1)])
            got = []
            for m in consumer:  # the four records, then stop (the timeout only ends a shorter stream)
                got.append((m.offset, m.key, m.value, m.headers))
                if m.offset == 3:
                    break
        finally:
            consumer.close()
    assert got == [
        (0, b"k0", b"v0", [("h", b"x")]),
        (1, b"k1", None, []),
        (2, None, b"v2", []),
        (3, None, b"v3", []),
    ]


def test_fetch_reads_what_kafka_python_produced_and_offsets_are_listed(store):
    kafka = pytest.importorskip("kafka")
    topic = "f-" + uuid.uuid4().hex[:8]
    store.create_topic(topic, 1)
    with store.serve() as broker:
        producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap_servers, compression_type="lz4")
        try:
            for i in range(30):
                producer.send(topic, b"value-%d" % i, key=b"key-%d" % i, partition=0, timestamp_ms=1_000_000 + i)
            producer.flush(10)
        finally:
            producer.close()

        async def go():
            async with await KafkaClient.open(broker.bootstrap_servers) as client:
                got = []
                offset = 0
                while offset < 30:
                    part = await client.fetch(topic, 0, offset, max_bytes=300)
                    records = [r for r in decode_records(part.records, allow_truncated=True, min_offset=offset)]
                    got += records
                    offset = records[-1].offset + 1 if records else offset
                offsets = (
                    await client.list_offset(topic, 0, EARLIEST),
                    await client.list_offset(topic, 0, LATEST),
                    await client.list_offset(topic, 0, 1_000_012),
                    await client.list_offset(topic, 0, 2_000_000),
                )
                return got, part.high_watermark, offsets

        got, hw, offsets = _run(go())
    assert [(r.offset, r.key, r.value) for r in got] == [(i, b"key-%d" % i, b"value-%d" % i) for i in range(30)]
    assert hw == 30
    assert offsets == (0, 30, 12, -1)


def test_requests_are_pipelined_on_one_connection_and_answered_in_order(store):
    store.create_topic("p", 1)
    with store.serve() as broker:

        async def go():
            async with await KafkaClient.open(broker.bootstrap_servers) as client:
                results = await asyncio.gather(
                    *[client.produce("p", 0, encode_batch([b"r%d" % i, b"s%d" % i])) for i in range(100)]
                )
                assert all(r is not None for r in results)  # acks=-1 answers every produce
                return [r.base_offset for r in results if r is not None], len(client._connections)

        offsets, connections = _run(go())
    assert offsets == list(range(0, 200, 2))
    assert connections == 1
    values = [r.value for r in decode_records(store.log("p", 0).read(0, 1 << 20).to_bytes())]
    assert values[:4] == [b"r0", b"s0", b"r1", b"s1"] and len(values) == 200


def test_acks_0_gets_no_answer_and_the_records_arrive(store):
    store.create_topic("z", 1)
    with store.serve() as broker:

        async def go():
            async with await KafkaClient.open(broker.bootstrap_servers) as client:
                assert await client.produce("z", 0, encode_batch([b"fire", b"forget"]), acks=0) is None
                part = await client.fetch("z", 0, 0, max_wait_ms=2000)
                return [r.value for r in decode_records(part.records)]

        assert _run(go()) == [b"fire", b"forget"]


def test_tls(tmp_path, store):
    (tmp_path / "tls").mkdir()
    tls = make_tls(tmp_path / "tls")
    keys = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(tls.server)}
    store.create_topic("s", 1)
    with store.serve(security_protocol="SSL", ssl_context=keys) as broker:

        async def go():
            ctx = ssl.create_default_context(cafile=str(tls.ca))
            async with await KafkaClient.open(broker.bootstrap_servers, ssl_context=ctx) as client:
                await client.produce("s", 0, encode_batch([b"secret"]))
                return (await client.fetch("s", 0, 0)).records

        assert [r.value for r in decode_records(_run(go()))] == [b"secret"]


# -- errors ---------------------------------------------------------------------------------------


def test_bad_addresses_and_refused_connections_say_where():
    with pytest.raises(ValueError, match="host:port"):
        KafkaClient(["localhost"])
    with pytest.raises(ValueError, match="no bootstrap"):
        KafkaClient([])
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(BrokerNotAvailableError, match=f"127.0.0.1:{port}"):
        _run(KafkaClient.open(f"127.0.0.1:{port}", request_timeout=2))


def test_unknown_topics_and_partitions_are_named(store):
    store.create_topic("known", 2)
    with store.serve() as broker:

        async def go(topic, partition):
            async with await KafkaClient.open(broker.bootstrap_servers) as client:
                await client.produce(topic, partition, encode_batch([b"x"]))

        with pytest.raises(UnknownTopicOrPartitionError, match=r"'missing'.*UNKNOWN_TOPIC_OR_PARTITION") as exc:
            _run(go("missing", 0))
        assert broker.bootstrap_servers in str(exc.value)
        with pytest.raises(UnknownTopicOrPartitionError, match="no partition 5 .it has 2"):
            _run(go("known", 5))
    assert "missing" not in store.topics()


def test_a_broker_error_names_the_partition_and_the_broker(store):
    store.create_topic("small", 1, config={"max.message.bytes": 1000})
    with store.serve() as broker:

        async def go():
            async with await KafkaClient.open(broker.bootstrap_servers) as client:
                await client.produce("small", 0, encode_batch([bytes(5000)]))

        with pytest.raises(KafkaError, match=r"Produce of small-0 failed at the Kafka broker .*MESSAGE_TOO_LARGE") as e:
            _run(go())
    assert e.value.code == 10


def test_requests_waiting_when_the_broker_goes_fail_at_once(store):
    store.create_topic("w", 1)
    broker = store.serve()

    async def go():
        conn = await BrokerConnection.open(broker.bootstrap_servers)
        try:
            # Fetch v13+ (which the connection picks) names the topic by its id.
            body = fetch_body("w", max_wait_ms=20000, topic_id=base64.urlsafe_b64decode(store.topic_id("w") + "=="))
            waiting = asyncio.ensure_future(conn.request("Fetch", body))  # a long poll: no records yet
            await asyncio.sleep(0.3)
            started = time.monotonic()
            await asyncio.get_running_loop().run_in_executor(None, broker.close)
            with pytest.raises(BrokerNotAvailableError, match="closed the connection"):
                await waiting
            assert time.monotonic() - started < 10
            with pytest.raises(BrokerNotAvailableError, match="is closed"):
                await conn.request("Metadata", {"topics": None})
        finally:
            await conn.close()

    _run(go())


def test_a_response_over_the_limit_closes_the_connection(store):
    for i in range(20):
        store.create_topic(f"topic-with-a-long-name-{i:03d}", 3)
    with store.serve() as broker:

        async def go():
            conn = await BrokerConnection.open(broker.bootstrap_servers, max_response_bytes=1000)
            try:
                with pytest.raises(InvalidRequestError, match=r"sent a \d+-byte response.*1000"):
                    await conn.request("Metadata", {"topics": None})
                assert conn.closed
            finally:
                await conn.close()

        _run(go())


def test_fetch_falls_back_to_names_when_the_metadata_gives_no_topic_id(store):
    store.create_topic("noid", 1)
    with store.serve() as broker:

        async def go():
            async with await KafkaClient.open(broker.bootstrap_servers) as client:
                await client.produce("noid", 0, encode_batch([b"by name"]))
                assert any(client.topic_ids["noid"])
                del client.topic_ids["noid"]  # as from a broker whose Metadata carries no ids
                return (await client.fetch("noid", 0, 0)).records

        assert [r.value for r in decode_records(_run(go()))] == [b"by name"]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_authenticates_and_a_wrong_password_is_refused(store, mechanism):
    from seglog.errors import SaslAuthenticationError

    options = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanisms": [mechanism], "users": {"alice": "s3cret"}}
    with store.serve(**options) as broker:

        async def go():
            async with KafkaClient([broker.bootstrap_servers], sasl=(mechanism, "alice", "s3cret")) as client:
                await client.refresh_metadata([])
                assert client.brokers
            with pytest.raises(SaslAuthenticationError, match="alice"):
                await BrokerConnection.open(broker.bootstrap_servers, sasl=(mechanism, "alice", "wrong"))
            other = "PLAIN" if mechanism != "PLAIN" else "SCRAM-SHA-256"
            with pytest.raises(KafkaError, match=f"{other} is not enabled"):
                await BrokerConnection.open(broker.bootstrap_servers, sasl=(other, "alice", "s3cret"))

        _run(go())


def test_a_request_that_gets_no_answer_in_time_closes_the_connection(store):
    from seglog.errors import RequestTimedOutError

    # A listener that accepts and never answers (as a frozen process would).
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    address = "127.0.0.1:%d" % server.getsockname()[1]
    with store.serve() as broker:

        async def go():
            conn = await BrokerConnection.open(broker.bootstrap_servers)
            try:
                # Fetch with a long wait, on a topic that has no records: the broker holds it.
                store.create_topic("idle", 1)
                body = fetch_body("idle", 0, max_wait_ms=5000)
                with pytest.raises(RequestTimedOutError, match="did not answer Fetch within 0.3 s"):
                    await conn.request("Fetch", body, version=12, timeout=0.3)
                assert conn.closed
                with pytest.raises(BrokerNotAvailableError):
                    await conn.request("Metadata", {"topics": []})
            finally:
                await conn.close()
            with pytest.raises(BrokerNotAvailableError, match="did not answer ApiVersions"):
                await BrokerConnection.open(address, timeout=0.3)

        try:
            _run(go())
        finally:
            server.close()
