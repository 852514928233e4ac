"""The listener's read side (``seglog.kafka.framestream``) over real loopback sockets: frames of
every size arrive whole and in order, large ones in buffers of their own, the end of the stream
and a lost connection surface as a StreamReader's would, and a slow reader pauses the socket."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Awaitable, Callable

import pytest

from seglog.kafka.connection import CloseConnection, read_frame
from seglog.kafka.framestream import DIRECT_MIN, STAGE_BYTES, FrameConnection, FrameStream

Handler = Callable[[FrameStream, asyncio.StreamWriter], Awaitable[None]]


async def _serve(handler: Handler) -> tuple[asyncio.AbstractServer, int, list[FrameConnection]]:
    loop = asyncio.get_running_loop()
    made: list[FrameConnection] = []

    def factory() -> FrameConnection:
        conn = FrameConnection(loop, handler)  # type: ignore[arg-type]
        made.append(conn)
        return conn

    server = await loop.create_server(factory, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], made


def _frame(n: int, seed: int) -> bytes:
    body = bytes((seed + i * 7) % 251 for i in range(min(n, 4096))) * (n // 4096 + 1)
    return struct.pack(">i", n) + body[:n]


def test_frames_of_every_size_arrive_whole_and_in_order() -> None:
    sizes = [0, 1, 5, 4096, DIRECT_MIN - 1, DIRECT_MIN, DIRECT_MIN + 1, 1 << 20, 3, (1 << 20) + 17, 9, 300_000]

    async def main() -> None:
        got: list[bytes | bytearray] = []
        types: list[type] = []

        async def handler(reader: FrameStream, writer: asyncio.StreamWriter) -> None:
            while True:
                frame = await read_frame(reader, 5000, 1 << 24, "limit", body_idle=False)
                if frame is None:
                    break
                got.append(frame)
                types.append(type(frame))
            writer.write(b"done")
            await writer.drain()
            writer.close()

        server, port, _ = await _serve(handler)
        r, w = await asyncio.open_connection("127.0.0.1", port)
        # All frames in one stream, written in odd pieces so that frames straddle reads.
        data = b"".join(_frame(n, i) for i, n in enumerate(sizes))
        for k in range(0, len(data), 77_777):
            w.write(data[k : k + 77_777])
            await w.drain()
        w.write_eof()
        assert await r.read() == b"done"
        w.close()
        server.close()
        await server.wait_closed()
        assert [len(f) for f in got] == sizes
        assert [bytes(f) for f in got] == [_frame(n, i)[4:] for i, n in enumerate(sizes)]
        # Frames larger than the stage were read into buffers of their own.
        assert all(t is bytearray for t, n in zip(types, sizes) if n > STAGE_BYTES), list(zip(types, sizes))

    asyncio.run(main())


def test_the_end_of_the_stream_inside_a_frame_is_an_incomplete_read() -> None:
    async def main() -> None:
        errors: list[BaseException] = []

        async def handler(reader: FrameStream, writer: asyncio.StreamWriter) -> None:
            try:
                await read_frame(reader, 5000, 1 << 24, "limit", body_idle=False)
                await read_frame(reader, 5000, 1 << 24, "limit", body_idle=False)
            except CloseConnection as exc:
                errors.append(exc)
            writer.close()

        server, port, _ = await _serve(handler)
        for cut in (10, DIRECT_MIN + 100):
            errors.clear()
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(_frame(3, 0) + _frame(cut * 2, 1)[: 4 + cut])
            w.write_eof()
            await r.read()
            w.close()
            assert len(errors) == 1
            assert f"{cut} of {cut * 2} bytes arrived" in str(errors[0])
        server.close()
        await server.wait_closed()

    asyncio.run(main())


def test_a_reset_connection_fails_the_read_with_its_error() -> None:
    async def main() -> None:
        errors: list[BaseException] = []
        started = asyncio.Event()

        async def handler(reader: FrameStream, writer: asyncio.StreamWriter) -> None:
            started.set()
            try:
                await reader.readexactly(DIRECT_MIN * 4)
            except (ConnectionError, asyncio.IncompleteReadError) as exc:
                errors.append(exc)
            writer.close()

        server, port, _ = await _serve(handler)
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"x" * 1000)
        await started.wait()
        await asyncio.sleep(0.05)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # RST
        for _ in range(100):
            if errors:
                break
            await asyncio.sleep(0.01)
        assert len(errors) == 1 and isinstance(errors[0], ConnectionError)
        server.close()
        await server.wait_closed()

    asyncio.run(main())


def test_a_reader_that_does_not_read_pauses_the_socket_and_loses_nothing() -> None:
    async def main() -> None:
        go = asyncio.Event()
        got: list[bytes | bytearray] = []

        async def handler(reader: FrameStream, writer: asyncio.StreamWriter) -> None:
            await go.wait()
            while (frame := await read_frame(reader, 5000, 1 << 24, "limit", body_idle=False)) is not None:
                got.append(frame)
            writer.close()

        server, port, made = await _serve(handler)
        r, w = await asyncio.open_connection("127.0.0.1", port)
        small = [_frame(1000, i) for i in range(4 * STAGE_BYTES // 1000)]  # four stages' worth
        w.write(b"".join(small))
        for _ in range(200):
            if made and made[0].stream._reading_paused:
                break
            await asyncio.sleep(0.01)
        assert made[0].stream._reading_paused  # the stage filled: the socket stopped being read
        assert made[0].stream._end - made[0].stream._start <= STAGE_BYTES
        go.set()
        await w.drain()
        w.write_eof()
        await r.read()
        w.close()
        assert [bytes(f) for f in got] == [f[4:] for f in small]
        server.close()
        await server.wait_closed()

    asyncio.run(main())


def test_a_direct_read_cancelled_inside_a_frame_leaves_the_stream_broken() -> None:
    async def main() -> None:
        outcome: list[BaseException] = []

        async def handler(reader: FrameStream, writer: asyncio.StreamWriter) -> None:
            try:
                await asyncio.wait_for(reader.readexactly(DIRECT_MIN * 2), 0.1)
            except asyncio.TimeoutError:
                pass
            with pytest.raises(ConnectionAbortedError):
                await reader.readexactly(4)
            outcome.append(RuntimeError("checked"))
            writer.close()

        server, port, _ = await _serve(handler)
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"y" * 1000)  # part of the frame only
        await w.drain()
        await r.read()
        w.close()
        assert len(outcome) == 1
        server.close()
        await server.wait_closed()

    asyncio.run(main())
