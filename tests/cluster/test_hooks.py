"""The two node-side hooks the fault harness relies on: ``SEGLOG_LINK_ADDRESSES`` sends a
node's connections to one peer through that link's proxy listener (and only that link's), and
the fsync journal names each log's recovery point (tested with power loss in test_disk)."""
from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from seglog.errors import RequestTimedOutError
from seglog.replication.messages import MetadataRequest, MetadataResponse
from seglog.replication.tcp import LINK_ADDRESSES_ENV, TcpTransport, link_addresses_from_env
from tests.cluster.proxy import ProxyHub


@pytest.fixture
def hub() -> Iterator[ProxyHub]:
    h = ProxyHub()
    yield h
    h.close()


def test_link_addresses_parse_and_reject() -> None:
    assert link_addresses_from_env("0>1=127.0.0.1:5, 1>0=[::1]:6") == {(0, 1): ("127.0.0.1", 5), (1, 0): ("::1", 6)}
    assert link_addresses_from_env("") == {}
    with pytest.raises(ValueError, match=r"'0-1=h:1' is not src>dst=host:port"):
        link_addresses_from_env("0-1=h:1")


def test_requests_follow_the_link_address_through_the_proxy(hub: ProxyHub, monkeypatch: pytest.MonkeyPatch) -> None:
    loop = asyncio.new_event_loop()
    try:
        async def run() -> list[Any]:
            server = TcpTransport(loop)
            host, port = await server.listen(1, lambda src, msg, reply: reply(MetadataResponse(1, (), ())))
            link = hub.add("2->1", (host, port))
            monkeypatch.setenv(LINK_ADDRESSES_ENV, f"2>1={link.address}")
            client = TcpTransport(loop)
            client.register(2, lambda *a: None)
            client.register(3, lambda *a: None)
            client.set_address(1, f"{host}:{port}")
            got: list[Any] = []

            async def ask(src: int) -> Any:
                fut: asyncio.Future[Any] = loop.create_future()
                client.request(src, 1, MetadataRequest(), lambda r, e: fut.set_result(e or r), 700)
                return await fut
            got.append(await ask(2))           # through the proxy
            hub.set("2->1", "blackhole")
            got.append(await ask(2))           # the proxy swallows it
            got.append(await ask(3))           # node 3 has no link entry: direct, unaffected
            hub.set("2->1", "pass")
            await asyncio.sleep(0.1)
            got.append(await ask(2))           # healed (the tainted connection was reset)
            await client.close()
            await server.close()
            return got
        got = loop.run_until_complete(run())
    finally:
        loop.close()
    assert isinstance(got[0], MetadataResponse)
    assert isinstance(got[1], RequestTimedOutError)
    assert isinstance(got[2], MetadataResponse)
    assert isinstance(got[3], MetadataResponse), got[3]
    assert hub.links["2->1"].accepted >= 2
