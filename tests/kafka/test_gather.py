"""write_parts: a frame's parts reach the peer whole and in order, whether the socket takes them
at once (writev), takes only some (the rest queued on the transport), or the transport is TLS
(writelines through the TLS layer)."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
from pathlib import Path
from typing import Any

from seglog.kafka.gather import write_parts
from tests.kafka.tls import make_tls


class _Pair:
    """A client's writer and the server's reader of one connection."""

    def __init__(
        self, writer: asyncio.StreamWriter, reader: asyncio.StreamReader, peer: asyncio.StreamWriter, server: Any
    ):
        self.writer = writer
        self.reader = reader
        self.peer = peer
        self.server = server

    async def close(self) -> None:
        for w in (self.writer, self.peer):
            w.close()
            try:
                await w.wait_closed()
            except (OSError, ssl.SSLError):
                pass  # a reset connection
        self.server.close()
        await self.server.wait_closed()


async def _pair(ssl_server: ssl.SSLContext | None = None, ssl_client: ssl.SSLContext | None = None) -> _Pair:
    accepted: asyncio.Future[tuple[asyncio.StreamReader, asyncio.StreamWriter]]
    accepted = asyncio.get_running_loop().create_future()

    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        accepted.set_result((r, w))

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ssl_server)
    port = server.sockets[0].getsockname()[1]
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ssl_client)
    reader, peer = await accepted
    return _Pair(writer, reader, peer, server)


def _frames(seed: int) -> list[list[Any]]:
    """Frames of mixed parts: small headers, large record batches, views, empty parts."""
    rnd = os.urandom
    big = rnd(3 << 20)
    return [
        [b"head%d" % i, rnd(1000 * i), memoryview(big)[i * 1000 : i * 1000 + 300_000], bytearray(b"tail"), b""]
        for i in range(seed, seed + 6)
    ]


def test_parts_arrive_whole_and_in_order_through_a_small_socket_buffer() -> None:
    """A send buffer far smaller than a frame: writev takes part of it, the transport queues the
    rest, and the frames written while it is queued go behind it."""

    async def main() -> None:
        c = await _pair()
        writer, reader = c.writer, c.reader
        sock = writer.transport.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
        frames = _frames(1)
        want = b"".join(bytes(p) for f in frames for p in f)
        for f in frames:
            write_parts(writer.transport, f)
        assert writer.transport.get_write_buffer_size() > 0  # the socket did not take it all
        got = await reader.readexactly(len(want))
        assert got == want
        await c.close()

    asyncio.run(main())


def test_parts_arrive_whole_over_tls(tmp_path: Path) -> None:
    """A TLS transport is not written to directly: its bytes go through the TLS layer."""
    files = make_tls(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(str(files.server_cert), str(files.server_key))
    client_ctx = ssl.create_default_context(cafile=str(files.ca))

    async def main() -> None:
        c = await _pair(server_ctx, client_ctx)
        writer, reader = c.writer, c.reader
        frames = _frames(3)
        want = b"".join(bytes(p) for f in frames for p in f)
        for f in frames:
            write_parts(writer.transport, f)
        assert await reader.readexactly(len(want)) == want
        await c.close()

    asyncio.run(main())


def test_a_closed_peer_fails_the_transport_not_the_caller() -> None:
    """writev's error on a reset connection is left to the transport, which closes as it does
    for any failed write; the caller sees the connection lost, not an exception."""

    async def main() -> None:
        c = await _pair()
        writer, reader = c.writer, c.reader
        write_parts(writer.transport, [b"x" * 10])
        assert await reader.readexactly(10) == b"x" * 10
        # Reset the server's side (SO_LINGER 0), then write until the transport notices.
        rsock = c.peer.transport.get_extra_info("socket")
        rsock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        c.peer.transport.abort()
        for _ in range(200):
            if writer.transport.is_closing():
                break
            write_parts(writer.transport, [b"y" * 65536, b"z"])
            await asyncio.sleep(0.005)
        assert writer.transport.is_closing()
        await c.close()

    asyncio.run(main())
