"""The TCP transport: frames as documented, record bytes sent from the segment files, the
shared-secret handshake, TLS, timeouts and connection loss."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import shutil
import socket
import ssl
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from seglog.cluster.messages import (
    FetchPartitionResponse,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
    decode,
    encode,
)
from seglog.cluster.tcp import (
    KIND_CHALLENGE,
    KIND_HELLO,
    KIND_PROOF,
    KIND_REQUEST,
    KIND_RESPONSE,
    KIND_WELCOME,
    TcpTransport,
    proof_for,
)
from seglog.errors import NetworkError, RequestTimedOutError
from seglog.storage.log import Log
from seglog.storage.records import decode_records, encode_batch
from seglog.util.loop import drain


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    lp = asyncio.new_event_loop()
    yield lp
    drain(lp)
    lp.close()


def _frame(kind: int, corr: int, header: bytes, blobs: list[bytes]) -> bytes:
    """The documented frame, built independently of the transport."""
    body = struct.pack(">BII", kind, corr, len(header)) + header + struct.pack(">I", len(blobs))
    body += b"".join(struct.pack(">I", len(b)) + b for b in blobs)
    return struct.pack(">I", len(body)) + body


async def _read(reader: asyncio.StreamReader) -> tuple[int, int, bytes, list[bytes]]:
    (length,) = struct.unpack(">I", await reader.readexactly(4))
    body = await reader.readexactly(length)
    kind, corr, hlen = struct.unpack_from(">BII", body)
    header = body[9 : 9 + hlen]
    (count,) = struct.unpack_from(">I", body, 9 + hlen)
    pos = 13 + hlen
    blobs = []
    for _ in range(count):
        (n,) = struct.unpack_from(">I", body, pos)
        blobs.append(body[pos + 4 : pos + 4 + n])
        pos += 4 + n
    assert pos == len(body)
    return kind, corr, header, blobs


def test_a_raw_client_speaks_the_documented_protocol(loop: asyncio.AbstractEventLoop, tmp_path: Path) -> None:
    """A client written from the document alone: handshake, a request, a response whose record
    bytes come from a segment file."""
    log = Log.open(tmp_path / "t-0")
    log.append(encode_batch([b"a", b"b"], timestamps=1_700_000_000_000))

    def handler(src: int, msg: Any, reply: Any) -> None:
        assert src == 7 and isinstance(msg, MetadataRequest)
        reply(FetchResponse((FetchPartitionResponse("t", 0, high_watermark=2, records=log.read(0)),)))

    async def run() -> tuple[Any, int]:
        t = TcpTransport(loop, secret=b"s3cret")
        host, port = await t.listen(1, handler)
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(_frame(KIND_HELLO, 0, json.dumps({"node": 7}).encode(), []))
        kind, _, _, blobs = await _read(reader)
        assert kind == KIND_CHALLENGE and len(blobs[0]) == 32
        writer.write(_frame(KIND_PROOF, 0, b"{}", [proof_for(b"s3cret", blobs[0], 7)]))
        kind, _, _, _ = await _read(reader)
        assert kind == KIND_WELCOME
        header, raw = encode(MetadataRequest())
        writer.write(_frame(KIND_REQUEST, 42, header, [bytes(b) for b in raw]))
        kind, corr, header, blobs = await _read(reader)
        writer.close()
        await t.close()
        assert kind == KIND_RESPONSE
        return decode(header, blobs), corr

    resp, corr = loop.run_until_complete(run())
    assert corr == 42
    assert [r.value for r in decode_records(resp.partitions[0].records)] == [b"a", b"b"]
    log.close()


def test_requests_and_responses_between_transports(loop: asyncio.AbstractEventLoop, tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0")
    for i in range(50):
        log.append(encode_batch([b"x" * 1000], timestamps=1_700_000_000_000))

    def handler(src: int, msg: Any, reply: Any) -> None:
        if isinstance(msg, ProduceRequest):
            reply(ProduceResponse(msg.topic, msg.partition, base_offset=len(msg.records)))
        else:
            reply(FetchResponse((FetchPartitionResponse("t", 0, records=log.read(0, 1 << 20)),)))

    async def run() -> list[Any]:
        t = TcpTransport(loop)
        await t.listen(1, handler)
        t.register(2, lambda *a: None)
        results: list[Any] = []
        done = asyncio.Event()

        def cb(resp: Any, err: BaseException | None) -> None:
            results.append(resp if err is None else err)
            if len(results) == 3:
                done.set()

        t.request(2, 1, ProduceRequest("t", 0, b"\x00" * 777), cb, 2000)
        t.request(2, 1, MetadataRequest(), cb, 2000)
        t.request(2, 1, ProduceRequest("t", 0, b"\x01" * 5), cb, 2000)
        await asyncio.wait_for(done.wait(), 5)
        await t.close()
        return results

    results = loop.run_until_complete(run())
    by_type = {type(r).__name__: r for r in results}
    assert sorted(r.base_offset for r in results if isinstance(r, ProduceResponse)) == [5, 777]
    records = by_type["FetchResponse"].partitions[0].records
    assert isinstance(records, bytes) and len(decode_records(records)) == 50
    log.close()


def test_a_wrong_secret_is_refused(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> tuple[list[Any], int]:
        server = TcpTransport(loop, secret=b"right")
        host, port = await server.listen(1, lambda src, msg, reply: reply(ProduceResponse("t", 0)))
        intruder = TcpTransport(loop, secret=b"wrong")
        intruder.addresses[1] = (host, port)
        intruder.register(9, lambda *a: None)
        got: list[Any] = []
        done = asyncio.Event()

        def answered(resp: Any, err: BaseException | None) -> None:
            got.append(err or resp)
            done.set()

        intruder.request(9, 1, MetadataRequest(), answered, 2000)
        await asyncio.wait_for(done.wait(), 5)
        await intruder.close()
        await server.close()
        return got, server.refused_handshakes

    got, refused = loop.run_until_complete(run())
    assert isinstance(got[0], NetworkError) and refused == 1


def test_timeouts_and_a_vanished_server(loop: asyncio.AbstractEventLoop) -> None:
    async def run() -> list[Any]:
        t = TcpTransport(loop)
        await t.listen(1, lambda src, msg, reply: None)  # never answers
        t.register(2, lambda *a: None)
        got: list[Any] = []
        done = asyncio.Event()

        def cb(r: Any, e: BaseException | None) -> None:
            got.append(e)
            if len(got) == 2:
                done.set()

        t.request(2, 1, MetadataRequest(), cb, 100)
        await asyncio.sleep(0.3)
        t.request(2, 1, MetadataRequest(), cb, 5000)
        await asyncio.sleep(0.1)
        t.unregister(1)  # the node dies: its connections close
        await asyncio.wait_for(done.wait(), 5)
        await t.close()
        return got

    got = loop.run_until_complete(run())
    assert isinstance(got[0], RequestTimedOutError)
    assert isinstance(got[1], NetworkError)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
def test_tls(loop: asyncio.AbstractEventLoop, tmp_path: Path) -> None:
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
    log = Log.open(tmp_path / "t-0")
    log.append(encode_batch([b"secret record"], timestamps=1_700_000_000_000))

    async def run() -> Any:
        t = TcpTransport(loop, server_ssl=server_ctx, client_ssl=client_ctx, secret="both")
        await t.listen(
            1, lambda src, msg, reply: reply(FetchResponse((FetchPartitionResponse("t", 0, records=log.read(0)),)))
        )
        t.register(2, lambda *a: None)
        fut = loop.create_future()
        t.request(2, 1, MetadataRequest(), lambda r, e: fut.set_result(e or r), 5000)
        resp = await asyncio.wait_for(fut, 10)
        await t.close()
        return resp

    resp = loop.run_until_complete(run())
    assert [r.value for r in decode_records(resp.partitions[0].records)] == [b"secret record"]
    log.close()
    os.unlink(key)


def _open_fds() -> set[int]:
    return {int(name) for name in os.listdir("/proc/self/fd")}


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd")
@pytest.mark.parametrize("turns", range(12))
def test_closing_at_any_point_of_a_connection_leaves_no_socket_open(turns: int) -> None:
    """Close a transport ``turns`` loop iterations into a connection's life (connecting, the
    handshake, a request in flight, the reply), then stop the loop as a cluster does: every
    socket is closed before the loop is, none left for the garbage collector to find."""
    gc.collect()
    gc.disable()  # what the collector would close must not hide a leak
    try:
        before = _open_fds()
        lp = asyncio.new_event_loop()
        got: list[Any] = []

        async def run() -> None:
            t = TcpTransport(lp)
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


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd")
def test_a_listener_out_of_descriptors_pauses_then_accepts(
    loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``accept`` failing with EMFILE stops the listener for ACCEPT_RETRY_S instead of spinning on
    a socket that stays readable; once descriptors are free again the waiting client is served."""
    import resource

    import seglog.cluster.tcp as tcp

    monkeypatch.setattr(tcp, "ACCEPT_RETRY_S", 0.2)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    async def run() -> int:
        t = TcpTransport(loop)
        host, port = await t.listen(1, lambda src, msg, reply: None)
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
        writer.write(_frame(KIND_HELLO, 0, json.dumps({"node": 7}).encode(), []))
        kind, _, _, _ = await asyncio.wait_for(_read(reader), 5)  # served once it resumed
        writer.close()
        await t.close()
        return kind

    with caplog.at_level("ERROR", logger="seglog.cluster.tcp"):
        assert loop.run_until_complete(run()) == KIND_CHALLENGE


def test_listen_addresses(loop: asyncio.AbstractEventLoop) -> None:
    """An empty host listens on every interface (as ``listeners=PLAINTEXT://:9092`` means); a name
    that does not resolve fails naming the address."""

    async def run() -> tuple[str, int]:
        t = TcpTransport(loop)
        try:
            host, port = await t.listen(1, lambda src, msg, reply: None, host="")
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                pass
            with pytest.raises(OSError, match=r"cannot listen on no-such-host\.invalid:0"):
                await t.listen(2, lambda src, msg, reply: None, host="no-such-host.invalid")
            assert 2 not in t._handlers and 2 not in t.addresses  # nothing of the failed endpoint stays
            return host, port
        finally:
            await t.close()

    host, port = loop.run_until_complete(run())
    assert host in ("0.0.0.0", "::") and port > 0
