"""The transport between nodes over Kafka's protocol (seglog.cluster.kafka_transport): Kafka
requests a Kafka client can send, record data from the segment files, pipelining with answers in
order, timeouts and connection loss."""

from __future__ import annotations

import asyncio
import gc
import os
import shutil
import socket
import ssl
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from seglog.cluster import kafka_messages as km
from seglog.cluster import netloop
from seglog.cluster.kafka_listener import topic_id
from seglog.cluster.kafka_transport import KafkaTransport, node_security
from seglog.cluster.messages import (
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from seglog.cluster.metadata import PartitionInfo, PartitionState
from seglog.errors import NetworkError, RequestTimedOutError
from seglog.kafka import codec
from seglog.kafka.client import BrokerConnection
from seglog.storage.log import Log
from seglog.storage.records import decode_records, encode_batch
from seglog.util.loop import drain


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    lp = asyncio.new_event_loop()
    yield lp
    drain(lp)
    lp.close()


def _fill(path: Path, batches: int, size: int) -> Log:
    log = Log.open(path)
    for _ in range(batches):
        log.append(encode_batch([b"x" * size], timestamps=1_700_000_000_000))
    return log


def test_a_kafka_client_sends_leader_and_isr_and_a_follower_fetch(
    loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    """Seglog's Kafka client (no code of the transport) speaks to the inter-broker listener:
    ApiVersions lists the node APIs; LeaderAndIsr v7 reaches the node with the controller as
    its source; a follower's Fetch v15 with the replica id as source, answered with records
    from the segment file (above SENDFILE_MIN: sent with sendfile)."""
    log = _fill(tmp_path / "t-0", 100, 1000)
    seen: list[tuple[int, Any]] = []

    def handler(src: int, msg: Any, reply: Any) -> None:
        seen.append((src, msg))
        if isinstance(msg, LeaderAndIsrRequest):
            reply(LeaderAndIsrResponse())
        else:
            res = log.read(0, 1 << 20)
            reply(FetchResponse((FetchPartitionResponse("t", 0, high_watermark=100, log_end_offset=100, records=res),)))

    async def run() -> tuple[dict[str, Any], dict[str, Any], dict[int, tuple[int, int]]]:
        t = KafkaTransport(loop)
        host, port = await t.listen(1, handler)
        conn = await BrokerConnection.open(f"{host}:{port}", client_id="broker-3")
        lai = await conn.request(
            "LeaderAndIsr",
            {
                "controller_id": 3,
                "controller_epoch": 2,
                "broker_epoch": 10,
                "topic_states": [
                    {
                        "topic_name": "t",
                        "topic_id": topic_id("t"),
                        "partition_states": [
                            {"partition_index": 0, "leader": 1, "leader_epoch": 4, "isr": [1, 2], "replicas": [1, 2]}
                        ],
                    }
                ],
                "live_leaders": [{"broker_id": 1, "host_name": "h", "port": 9092}],
            },
            version=7,
        )
        fetch = await conn.request(
            "Fetch",
            {
                "replica_state": {"replica_id": 2, "replica_epoch": 20},
                "max_wait_ms": 0,
                "min_bytes": 1,
                "max_bytes": 1 << 24,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic_id": topic_id("t"),
                        "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
                    }
                ],
                "forgotten_topics_data": [],
            },
            version=15,
        )
        versions = dict(conn.broker_versions)
        fetch["responses"][0]["partitions"][0]["records"] = bytes(fetch["responses"][0]["partitions"][0]["records"])
        await conn.close()
        await t.close()
        return lai, fetch, versions

    lai, fetch, versions = loop.run_until_complete(run())
    assert versions[4] == (7, 7) and versions[6] == (8, 8) and versions[1] == (15, 15) and versions[56] == (3, 3)
    assert lai["error_code"] == 0
    (src, msg), (fsrc, fmsg) = seen
    assert src == 3 and isinstance(msg, LeaderAndIsrRequest)
    assert msg.partitions == (PartitionInfo("t", 0, (1, 2), PartitionState(1, 4, (1, 2))),)
    assert msg.live_leaders == ((1, "h:9092"),)
    assert fsrc == 2 and isinstance(fmsg, FetchRequest) and fmsg.broker_epoch == 20
    assert fmsg.partitions == (FetchPartition("t", 0, 0, max_bytes=1 << 20),)
    part = fetch["responses"][0]["partitions"][0]
    assert part["high_watermark"] == 100 and part["log_end_offset"] == 100
    assert len(decode_records(part["records"])) == 100
    log.close()


def test_requests_and_responses_between_transports(loop: asyncio.AbstractEventLoop, tmp_path: Path) -> None:
    log = _fill(tmp_path / "t-0", 50, 1000)
    sources: list[int] = []

    def handler(src: int, msg: Any, reply: Any) -> None:
        sources.append(src)
        if isinstance(msg, ProduceRequest):
            reply(ProduceResponse(msg.topic, msg.partition, base_offset=len(msg.records)))
        elif isinstance(msg, MetadataRequest):
            reply(MetadataResponse(1, (), ((1, 5),), addresses=((1, "h:1"),)))
        else:
            reply(FetchResponse((FetchPartitionResponse("t", 0, records=log.read(0, 1 << 20)),)))

    async def run() -> list[Any]:
        t = KafkaTransport(loop)
        await t.listen(1, handler)
        t.register(2, lambda *a: None)
        results: list[Any] = []
        done = asyncio.Event()

        def cb(resp: Any, err: BaseException | None) -> None:
            results.append(resp if err is None else err)
            if len(results) == 4:
                done.set()

        t.request(2, 1, ProduceRequest("t", 0, b"\x00" * 777), cb, 2000)
        t.request(2, 1, MetadataRequest(), cb, 2000)
        t.request(2, 1, ProduceRequest("t", 0, b"\x01" * 5), cb, 2000)
        t.request(2, 1, FetchRequest(2, (FetchPartition("t", 0, 0),)), cb, 2000)
        await asyncio.wait_for(done.wait(), 5)
        await t.close()
        return results

    results = loop.run_until_complete(run())
    by_type = {type(r).__name__: r for r in results}
    assert [r.base_offset for r in results if isinstance(r, ProduceResponse)] == [777, 5]
    assert by_type["MetadataResponse"] == MetadataResponse(1, (), ((1, 5),), addresses=((1, "h:1"),))
    records = by_type["FetchResponse"].partitions[0].records
    # A view of the frame the response was read into: appended without another copy.
    assert isinstance(records, memoryview) and len(decode_records(records)) == 50
    assert sources == [2, 2, 2, 2]
    log.close()


def test_pipelined_requests_reach_the_node_at_once_and_are_answered_in_order(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """The second produce reaches the node while the first waits (acks=all), and the answers
    come in request order, as Kafka's protocol wants."""
    waiting: list[Any] = []

    def handler(src: int, msg: Any, reply: Any) -> None:
        waiting.append((msg, reply))
        if len(waiting) == 2:  # answer the second first
            for m, r in reversed(waiting):
                r(ProduceResponse(m.topic, m.partition, base_offset=len(m.records)))

    async def run() -> list[int]:
        t = KafkaTransport(loop)
        await t.listen(1, handler)
        t.register(2, lambda *a: None)
        order: list[int] = []
        done = asyncio.Event()

        def cb(resp: Any, err: BaseException | None) -> None:
            assert err is None
            order.append(resp.base_offset)
            if len(order) == 2:
                done.set()

        t.request(2, 1, ProduceRequest("t", 0, b"a" * 10), cb, 2000)
        t.request(2, 1, ProduceRequest("t", 0, b"b" * 20), cb, 2000)
        await asyncio.wait_for(done.wait(), 5)
        await t.close()
        return order

    assert loop.run_until_complete(run()) == [10, 20]


def test_timeouts_and_a_vanished_server(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> list[Any]:
        t = KafkaTransport(loop)
        await t.listen(1, lambda src, msg, reply: None)  # never answers
        t.register(2, lambda *a: None)
        got: list[Any] = []
        done = asyncio.Event()

        def cb(r: Any, e: BaseException | None) -> None:
            got.append(e)
            if len(got) == 3:
                done.set()

        t.request(2, 1, MetadataRequest(), cb, 100)
        await asyncio.sleep(0.3)
        t.request(2, 1, MetadataRequest(), cb, 5000)
        await asyncio.sleep(0.1)
        t.unregister(1)  # the node dies: its connections close
        await asyncio.sleep(0.1)
        t.register(2, lambda *a: None)
        t.request(2, 1, MetadataRequest(), cb, 5000)  # nobody listens there now
        await asyncio.wait_for(done.wait(), 5)
        await t.close()
        return got

    got = loop.run_until_complete(run())
    assert isinstance(got[0], RequestTimedOutError)
    assert isinstance(got[1], NetworkError)
    assert isinstance(got[2], NetworkError)


def test_a_request_that_times_out_closes_its_connection(loop: asyncio.AbstractEventLoop) -> None:
    """A peer that takes the connection and then says nothing (a link dropping every packet, a
    frozen process): the request times out, its connection is closed, the request pipelined
    behind it fails at once, and the next request opens a new connection (Kafka's clients do
    the same). Before, every later request queued on the silent connection and timed out too."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.setblocking(False)
    accepted: list[socket.socket] = []

    async def run() -> list[Any]:
        t = KafkaTransport(loop)
        t.register(2, lambda *a: None)
        t.set_address(1, f"127.0.0.1:{server.getsockname()[1]}")
        got: list[Any] = []

        def cb(r: Any, e: BaseException | None) -> None:
            got.append(e)

        async def accept() -> None:
            while True:
                conn, _ = await loop.sock_accept(server)
                accepted.append(conn)  # read nothing, answer nothing

        acceptor = loop.create_task(accept())
        t.request(2, 1, MetadataRequest(), cb, 200)
        t.request(2, 1, MetadataRequest(), cb, 5000)
        for _ in range(100):
            if len(got) == 2:
                break
            await asyncio.sleep(0.02)
        t.request(2, 1, MetadataRequest(), cb, 200)
        for _ in range(100):
            if len(got) == 3:
                break
            await asyncio.sleep(0.02)
        acceptor.cancel()
        await t.close()
        return got

    try:
        got = loop.run_until_complete(run())
    finally:
        for c in accepted:
            c.close()
        server.close()
    assert isinstance(got[0], RequestTimedOutError)
    assert isinstance(got[1], NetworkError) and not isinstance(got[1], RequestTimedOutError)
    assert "did not answer MetadataRequest within 200 ms" in str(got[1])
    assert isinstance(got[2], RequestTimedOutError)
    assert len(accepted) == 2, "the request after the timeout did not open a new connection"


def test_a_peer_that_does_not_serve_the_version_is_refused(loop: asyncio.AbstractEventLoop) -> None:
    """A Kafka listener for clients (no LeaderAndIsr) is not a node's inter-broker listener."""
    from seglog.kafka.listener import KafkaListener

    async def run() -> BaseException | None:
        other = KafkaListener("127.0.0.1", 0)
        await other.start()
        t = KafkaTransport(loop)
        t.register(2, lambda *a: None)
        t.addresses[1] = ("127.0.0.1", other.port)
        box: list[BaseException | None] = []
        done = asyncio.Event()

        def answered(resp: Any, err: BaseException | None) -> None:
            box.append(err)
            done.set()

        t.request(2, 1, LeaderAndIsrRequest(2, 1, 1, ()), answered, 2000)
        await asyncio.wait_for(done.wait(), 5)
        await t.close()
        await other.close()
        return box[0]

    err = loop.run_until_complete(run())
    assert isinstance(err, NetworkError) and "LeaderAndIsr" in str(err) and "v7" in str(err)


def test_nodes_authenticate_with_sasl_and_a_peer_that_fails_is_refused(loop: asyncio.AbstractEventLoop) -> None:
    """The cluster's shared secret as SASL/SCRAM-SHA-256 between nodes: the right password is served;
    a wrong one, or none, is refused before any request reaches the node."""
    handled: list[Any] = []

    def handler(src: int, msg: Any, reply: Any) -> None:
        handled.append((src, msg))
        reply(MetadataResponse(1, (), ()))

    async def ask(t: KafkaTransport, address: tuple[str, int]) -> Any:
        t.register(9, lambda *a: None)
        t.addresses[1] = address
        box: list[Any] = []
        done = asyncio.Event()

        def answered(resp: Any, err: BaseException | None) -> None:
            box.append(err or resp)
            done.set()

        t.request(9, 1, MetadataRequest(), answered, 3000)
        await asyncio.wait_for(done.wait(), 5)
        await t.close()
        return box[0]

    async def run() -> list[Any]:
        server = KafkaTransport(loop, **node_security("right", None))
        address = await server.listen(1, handler)
        got = [
            await ask(KafkaTransport(loop, **node_security("right", None)), address),
            await ask(KafkaTransport(loop, **node_security("wrong", None)), address),
            await ask(KafkaTransport(loop), address),
        ]
        await server.close()
        return got

    ok, wrong, none = loop.run_until_complete(run())
    assert ok == MetadataResponse(1, (), ())
    assert isinstance(wrong, NetworkError) and "refused the authentication" in str(wrong)
    assert isinstance(none, NetworkError)
    assert handled == [(9, MetadataRequest())]


def test_stale_epochs_are_refused_over_the_wire_with_kafkas_codes(tmp_path: Path) -> None:
    """A Kafka client (not the transport) on a node's inter-broker listener of a three-node
    cluster: LeaderAndIsr, UpdateMetadata and StopReplica with a stale controller epoch
    are STALE_CONTROLLER_EPOCH (11), AlterPartition with a stale partition epoch
    INVALID_UPDATE_VERSION (95), and nothing changes."""
    from seglog.cluster.local import LocalCluster

    with LocalCluster(nodes=3, dir=tmp_path / "cluster") as cluster:
        cluster.create_topic("t", partitions=1, replication_factor=3)
        cluster.wait_for(lambda: len(cluster.isr("t", 0)) == 3, 20, "a full ISR")
        before = cluster._state("t", 0)
        assert before is not None
        controller = cluster._controller()
        assert controller is not None
        follower = next(i for i in cluster.ids if i != before.leader)
        node = cluster.nodes[follower]
        leader_node = cluster.nodes[before.leader]
        assert node is not None and leader_node is not None
        epoch_seen, broker_epoch, leader_epoch = node.controller_epoch_seen, node.broker_epoch, leader_node.broker_epoch
        addresses = dict(cluster.transport.addresses)

        async def run() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
            host, port = addresses[follower]
            conn = await BrokerConnection.open(f"{host}:{port}", client_id=f"broker-{controller}")
            lai = await conn.request(
                "LeaderAndIsr",
                {
                    "controller_id": controller,
                    "controller_epoch": epoch_seen - 1,
                    "broker_epoch": broker_epoch,
                    "topic_states": [
                        {
                            "topic_name": "t",
                            "topic_id": topic_id("t"),
                            "partition_states": [
                                {"partition_index": 0, "leader": follower, "leader_epoch": 99, "isr": [follower]}
                            ],
                        }
                    ],
                    "live_leaders": [],
                },
                version=7,
            )
            update = await conn.request(
                "UpdateMetadata",
                {
                    "controller_id": controller,
                    "controller_epoch": epoch_seen - 1,
                    "broker_epoch": broker_epoch,
                    "topic_states": [],
                    "live_brokers": [
                        {
                            "id": follower,
                            "endpoints": [{"port": 1, "host": "nowhere", "listener": "CLIENT", "security_protocol": 0}],
                        }
                    ],
                },
                version=8,
            )
            stop = await conn.request(
                "StopReplica",
                {
                    "controller_id": controller,
                    "controller_epoch": epoch_seen - 1,
                    "broker_epoch": broker_epoch,
                    "topic_states": [
                        {"topic_name": "t", "partition_states": [{"partition_index": 0, "delete_partition": True}]}
                    ],
                },
                version=4,
            )
            await conn.close()
            host, port = addresses[controller]
            conn = await BrokerConnection.open(f"{host}:{port}", client_id=f"broker-{before.leader}")
            alter = await conn.request(
                "AlterPartition",
                {
                    "broker_id": before.leader,
                    "broker_epoch": leader_epoch,
                    "topics": [
                        {
                            "topic_id": topic_id("t"),
                            "partitions": [
                                {
                                    "partition_index": 0,
                                    "leader_epoch": before.leader_epoch,
                                    "new_isr_with_epochs": [{"broker_id": before.leader, "broker_epoch": leader_epoch}],
                                    "partition_epoch": before.partition_epoch - 1,
                                }
                            ],
                        }
                    ],
                },
                version=3,
            )
            await conn.close()
            return lai, update, stop, alter

        lai, update, stop, alter = asyncio.run(run())
        assert lai["error_code"] == 11 and update["error_code"] == 11 and stop["error_code"] == 11
        assert "UpdateMetadataRequest: controller epoch" in update["error_message"]
        assert alter["error_code"] == 95
        assert cluster._state("t", 0) == before
        assert cluster._on_node(follower, lambda: ("t", 0) in node.partitions)
        assert sorted(cluster.isr("t", 0)) == sorted(before.isr)
        # The refused UpdateMetadata changed nothing: no topic went, no node, no address came.
        assert cluster._on_node(follower, lambda: ("t", 0) in node.metadata)
        assert cluster._on_node(follower, lambda: sorted(node.live_brokers)) == sorted(cluster.ids)
        assert cluster._on_node(follower, lambda: node.kafka_addresses.get(follower)) != "nowhere:1"


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
def test_tls_and_sasl_between_nodes(loop: asyncio.AbstractEventLoop, tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    client_ctx = ssl.create_default_context(cafile=str(cert))
    log = _fill(tmp_path / "t-0", 100, 1000)  # above SENDFILE_MIN: read in blocks under TLS

    async def run() -> Any:
        t = KafkaTransport(loop, client_ssl=client_ctx, **node_security("both", server_ctx))
        await t.listen(
            1,
            lambda src, msg, reply: reply(
                FetchResponse((FetchPartitionResponse("t", 0, records=log.read(0, 1 << 20)),))
            ),
        )
        t.register(2, lambda *a: None)
        fut = loop.create_future()
        t.request(2, 1, FetchRequest(2, (FetchPartition("t", 0, 0),)), lambda r, e: fut.set_result(e or r), 5000)
        resp = await asyncio.wait_for(fut, 10)
        await t.close()
        return resp

    resp = loop.run_until_complete(run())
    assert len(decode_records(resp.partitions[0].records)) == 100
    log.close()
    os.unlink(key)


def _open_fds() -> set[int]:
    return {int(name) for name in os.listdir("/proc/self/fd")}


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd")
@pytest.mark.parametrize("turns", range(12))
def test_closing_at_any_point_of_a_connection_leaves_no_socket_open(turns: int) -> None:
    """Close a transport ``turns`` loop iterations into a connection's life (connecting,
    ApiVersions, a request in flight, the reply), then stop the loop as a cluster does: every
    socket is closed before the loop is."""
    gc.collect()
    gc.disable()
    try:
        before = _open_fds()
        lp = asyncio.new_event_loop()
        got: list[Any] = []

        async def run() -> None:
            t = KafkaTransport(lp)
            await t.listen(1, lambda src, msg, reply: reply(MetadataResponse(1, (), ())))
            t.register(2, lambda *a: None)
            for _ in range(3):
                t.request(2, 1, MetadataRequest(), lambda r, e: got.append(e or r), 5000)
            for _ in range(turns):
                await asyncio.sleep(0)
            await t.close()

        lp.run_until_complete(run())
        drain(lp)
        lp.close()
        assert _open_fds() == before
        assert all(isinstance(g, (MetadataResponse, NetworkError)) for g in got)
    finally:
        gc.enable()
        gc.collect()


def test_scram_client_matches_rfc_7677() -> None:
    """The SCRAM-SHA-256 exchange of RFC 7677's example, byte for byte."""
    from seglog.kafka.security import ScramClient

    c = ScramClient("user", "pencil")
    c.nonce = "rOprNGfwEbeRWgbNEkqO"
    c.bare = "n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert c.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = c.final(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert final == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    c.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    with pytest.raises(ValueError, match="does not know the password"):
        c.verify(b"v=" + b"A" * 44)


def test_node_processes_replicate_over_kafkas_protocol(zookeeper_chroot: str, tmp_path: Path) -> None:
    """Three ``seglog node`` processes (a ``ProcessCluster``, topics created with CreateTopics on
    an inter-broker listener): confluent-kafka produces
    with acks=all, the leader is SIGKILLed, every acknowledged record is read back in order from
    the new leader, and the killed node rejoins the ISR after its restart."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from seglog.cluster.process import ProcessCluster

    with ProcessCluster(nodes=3, dir=tmp_path / "cluster", zookeeper=zookeeper_chroot) as c:
        c.create_topic("t", 1, 3, {"min.insync.replicas": 2})
        c.wait_for(lambda: len(c.isr("t")) == 3, 30, "a full ISR")
        acked: list[bytes] = []

        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                acked.append(msg.value())

        producer = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all", "enable.idempotence": True})
        for i in range(200):
            producer.produce("t", b"v%d" % i, partition=0, on_delivery=delivered)
        assert producer.flush(30) == 0
        old = c.leader("t")
        assert old is not None
        c.kill(old)
        c.wait_for(lambda: c.leader("t") not in (None, old), 30, "a new leader")
        for i in range(200, 300):
            producer.produce("t", b"v%d" % i, partition=0, on_delivery=delivered)
        assert producer.flush(60) == 0
        assert acked == [b"v%d" % i for i in range(300)]
        consumer = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": "g", "enable.auto.commit": False})
        values: list[bytes] = []
        try:
            consumer.assign([TopicPartition("t", 0, 0)])
            deadline = time.monotonic() + 30
            while len(values) < 300 and time.monotonic() < deadline:
                m = consumer.poll(1.0)
                if m is not None and m.error() is None:
                    values.append(m.value() or b"")
        finally:
            consumer.close()
        assert values == acked
        c.restart(old)
        c.wait_for(lambda: old in c.isr("t"), 30, "the restarted node back in the ISR")
        # seglog's own cluster client speaks Kafka's protocol too: it reads what confluent-kafka wrote.
        own = c.client.consumer()
        own.assign([("t", 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 300 and time.monotonic() < deadline:
            got.extend(r.value or b"" for r in own.poll(timeout_ms=500))
        own.close()
        assert got == acked


def test_a_bad_request_closes_the_connection_at_once(loop: asyncio.AbstractEventLoop) -> None:
    """A frame the listener refuses (an unknown API key) closes the connection even while an
    earlier request still waits for the node: the peer sees the close, not a long silence."""

    async def run() -> float:
        t = KafkaTransport(loop)
        host, port = await t.listen(1, lambda src, msg, reply: None)  # never answers
        reader, writer = await asyncio.open_connection(host, port)
        _, body = km.request_to_kafka(MetadataRequest())
        meta = b"".join(codec.encode("MetadataRequest", 12, body))
        head = struct.pack(">hhih", 3, 12, 1, 8) + b"broker-7" + b"\0"
        writer.write(struct.pack(">i", len(head) + len(meta)) + head + meta)
        bad = struct.pack(">hhih", 999, 0, 2, 0)
        writer.write(struct.pack(">i", len(bad)) + bad)
        start = loop.time()
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, nothing answered
        elapsed = loop.time() - start
        writer.close()
        await t.close()
        return elapsed

    assert loop.run_until_complete(run()) < 2


class _Echo(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)  # type: ignore[attr-defined]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd")
def test_a_listener_out_of_descriptors_pauses_then_accepts(
    loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``accept`` failing with EMFILE stops a :class:`~seglog.cluster.netloop.Listener` for
    ACCEPT_RETRY_S instead of spinning on a socket that stays readable; once descriptors are
    free again the waiting client is served."""
    import resource

    monkeypatch.setattr(netloop, "ACCEPT_RETRY_S", 0.2)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    async def run() -> bytes:
        listener = await netloop.Listener.open(loop, "127.0.0.1", 0, _Echo)
        host, port = listener.address
        fillers: list[int] = []
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(_open_fds()) + 1, hard))
        try:
            while True:  # take every free descriptor below the limit
                try:
                    fillers.append(os.open(os.devnull, os.O_RDONLY))
                except OSError:
                    break
            os.close(fillers.pop())  # room for the client's socket, none for the accepted one
            client = socket.create_connection((host, port))
            await asyncio.sleep(0.1)  # the listener tries to accept, fails, pauses
        finally:
            for fd in fillers:
                os.close(fd)
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        assert sum("retrying in" in r.getMessage() for r in caplog.records) == 1  # paused, not spinning
        reader, writer = await asyncio.open_connection(sock=client)
        writer.write(b"ping")
        got = await asyncio.wait_for(reader.readexactly(4), 5)  # served once it resumed
        writer.close()
        await writer.wait_closed()
        listener.close()
        await asyncio.sleep(0)
        return got

    with caplog.at_level("ERROR", logger="seglog.cluster.netloop"):
        assert loop.run_until_complete(run()) == b"ping"


def test_listen_addresses(loop: asyncio.AbstractEventLoop) -> None:
    """The wildcard host listens on every interface (what ``seglog node`` makes of
    ``listeners=PLAINTEXT://:9092``) and the address kept for it is loopback; a name that does
    not resolve fails, and nothing of the failed endpoint stays."""

    async def run() -> tuple[str, int]:
        t = KafkaTransport(loop)
        try:
            host, port = await t.listen(1, lambda src, msg, reply: None, host="0.0.0.0")
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                pass
            with pytest.raises(OSError):
                await t.listen(2, lambda src, msg, reply: None, host="no-such-host.invalid")
            assert 2 not in t._handlers and 2 not in t.addresses
            assert t.addresses[1] == (host, port)
            return host, port
        finally:
            await t.close()

    host, port = loop.run_until_complete(run())
    assert host == "127.0.0.1" and port > 0


def _scram_jaas(user: str, password: str) -> str:
    return f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" password="{password}";'


def test_a_nodes_inter_broker_security_comes_from_its_properties(loop: asyncio.AbstractEventLoop) -> None:
    """``seglog node``'s listener between nodes, SASL_PLAINTEXT by ``listener.security.protocol.map``:
    the node authenticates to its peers with the SCRAM-SHA-256 credentials of
    ``listener.name.<name>.scram-sha-256.sasl.jaas.config`` and its listener accepts them, so nodes
    configured alike talk; one with another password is refused."""
    from seglog.cluster.server import node_transport_options

    between = "BROKER://127.0.0.1:0"

    def props(password: str) -> dict[str, str]:
        return {
            "listener.security.protocol.map": "BROKER:SASL_PLAINTEXT,CLIENT:PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
            "listener.name.broker.scram-sha-256.sasl.jaas.config": _scram_jaas("nodes", password),
        }

    opts = node_transport_options(between, props("s3cret"))
    assert opts["security_protocol"] == "SASL_PLAINTEXT"
    assert (opts["sasl_user"], opts["sasl_password"]) == ("nodes", "s3cret")
    assert opts["users"] == {"nodes": "s3cret"}

    async def ask(t: KafkaTransport, address: tuple[str, int]) -> Any:
        t.register(9, lambda *a: None)
        t.addresses[1] = address
        fut: asyncio.Future[Any] = loop.create_future()
        t.request(9, 1, MetadataRequest(), lambda r, e: fut.set_result(e or r), 3000)
        got = await asyncio.wait_for(fut, 5)
        await t.close()
        return got

    async def run() -> list[Any]:
        server = KafkaTransport(loop, **node_transport_options(between, props("s3cret")))
        address = await server.listen(1, lambda src, msg, reply: reply(MetadataResponse(1, (), ())))
        got = [
            await ask(KafkaTransport(loop, **node_transport_options(between, props("s3cret"))), address),
            await ask(KafkaTransport(loop, **node_transport_options(between, props("other"))), address),
        ]
        await server.close()
        return got

    same, other = loop.run_until_complete(run())
    assert same == MetadataResponse(1, (), ())
    assert isinstance(other, NetworkError) and "refused the authentication" in str(other)


def test_bad_inter_broker_security_fails_naming_the_key(tmp_path: Path) -> None:
    from seglog.cluster.server import node_transport_options
    from seglog.errors import ConfigError

    sasl = {"listener.security.protocol.map": "BROKER:SASL_PLAINTEXT"}
    with pytest.raises(ConfigError, match=r"listener\.name\.broker\.scram-sha-256\.sasl\.jaas\.config must give"):
        node_transport_options("BROKER://:0", sasl)
    with pytest.raises(ConfigError, match=r"sasl\.mechanism\.inter\.broker\.protocol=PLAIN: nodes authenticate"):
        node_transport_options(
            "BROKER://:0",
            {
                **sasl,
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                "listener.name.broker.scram-sha-256.sasl.jaas.config": _scram_jaas("n", "p"),
            },
        )
    with pytest.raises(ConfigError, match=r"must be 'org\.apache\.kafka\.common\.security\.scram\.ScramLoginModule"):
        node_transport_options(
            "BROKER://:0", {**sasl, "listener.name.broker.scram-sha-256.sasl.jaas.config": 'x required username="n";'}
        )
    with pytest.raises(ConfigError, match=r"does not enable SCRAM-SHA-256"):
        node_transport_options(
            "BROKER://:0",
            {
                **sasl,
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.broker.scram-sha-256.sasl.jaas.config": _scram_jaas("n", "p"),
            },
        )
    # TLS to the other nodes needs their CAs.
    key = tmp_path / "missing.pem"
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location"):
        node_transport_options(
            "BROKER://:0", {"listener.security.protocol.map": "BROKER:SSL", "ssl.keystore.location": str(key)}
        )
