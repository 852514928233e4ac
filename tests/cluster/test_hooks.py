"""The two node-side hooks the fault harness relies on: ``SEGLOG_LINK_ADDRESSES`` sends a
node's connections to one peer through that link's proxy listener (and only that link's), and
the fsync journal names each log's recovery point (tested with power loss in test_disk)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from seglog.cluster.kafka_transport import KafkaTransport
from seglog.cluster.messages import MetadataRequest, MetadataResponse
from seglog.cluster.netloop import LINK_ADDRESSES_ENV, link_addresses_from_env
from seglog.errors import RequestTimedOutError
from seglog.util.loop import drain
from tests.cluster.proxy import ProxyHub


def test_link_addresses_parse_and_reject() -> None:
    assert link_addresses_from_env("0>1=127.0.0.1:5, 1>0=[::1]:6") == {(0, 1): ("127.0.0.1", 5), (1, 0): ("::1", 6)}
    assert link_addresses_from_env("") == {}
    with pytest.raises(ValueError, match=r"'0-1=h:1' is not src>dst=host:port"):
        link_addresses_from_env("0-1=h:1")


def test_requests_follow_the_link_address_through_the_proxy(hub: ProxyHub, monkeypatch: pytest.MonkeyPatch) -> None:
    loop = asyncio.new_event_loop()
    try:

        async def run() -> list[Any]:
            server = KafkaTransport(loop)
            host, port = await server.listen(1, lambda src, msg, reply: reply(MetadataResponse(1, (), ())))
            link = hub.add("2->1", (host, port))
            monkeypatch.setenv(LINK_ADDRESSES_ENV, f"2>1={link.address}")
            client = KafkaTransport(loop)
            client.register(2, lambda *a: None)
            client.register(3, lambda *a: None)
            client.set_address(1, f"{host}:{port}")
            got: list[Any] = []

            async def ask(src: int) -> Any:
                fut: asyncio.Future[Any] = loop.create_future()
                client.request(src, 1, MetadataRequest(), lambda r, e: fut.set_result(e or r), 700)
                return await fut

            got.append(await ask(2))  # through the proxy
            hub.set("2->1", "blackhole")
            got.append(await ask(2))  # the proxy swallows it
            got.append(await ask(3))  # node 3 has no link entry: direct, unaffected
            hub.set("2->1", "pass")
            await asyncio.sleep(0.1)
            got.append(await ask(2))  # healed (the tainted connection was reset)
            await client.close()
            await server.close()
            return got

        got = loop.run_until_complete(run())
    finally:
        drain(loop)
        loop.close()
    assert isinstance(got[0], MetadataResponse)
    assert isinstance(got[1], RequestTimedOutError)
    assert isinstance(got[2], MetadataResponse)
    assert isinstance(got[3], MetadataResponse), got[3]
    assert hub.links["2->1"].accepted >= 2


def test_truncation_and_recovery_lines_parse_with_records_and_bytes(tmp_path: Any) -> None:
    """The node-side log lines the harness scrapes (follower truncation, one below the HW, and
    recovery of a damaged tail at startup), written by the real code paths in the node's log
    format, come back as ``truncate`` events with the records and bytes removed."""
    import logging
    import os
    from types import SimpleNamespace

    from seglog.cluster.metadata import ReplicaConfig
    from seglog.cluster.partition import Partition
    from seglog.config import LogConfig
    from seglog.storage.log import Log
    from seglog.util.clock import Clock
    from tests.cluster.harness import scrape_node_logs
    from tests.cluster.history import History
    from tests.logkit import batch

    path = tmp_path / "node-0.log"
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("seglog")
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        cfg = {"segment.bytes": 1000}
        d = tmp_path / "data" / "safe-0"
        one = batch(2, size=20)
        log = Log.open(d, cfg, replicated=True)
        for _ in range(30):
            log.append(one)  # offsets 0..59, two per batch
        host = SimpleNamespace(node_id=0, clock=Clock(), config=ReplicaConfig(), mutants=frozenset(), stats={})
        p = Partition(host, "safe", 0, log, LogConfig.from_dict(cfg), (0, 1, 2))
        p._truncate(41, reason="test")  # the batch 40-41 goes whole
        log.update_high_watermark(30)
        p._truncate(20, reason="test")  # below the HW
        log.close()
        seg = sorted(f for f in os.listdir(d) if f.endswith(".log"))[-1]
        with open(d / seg, "ab") as f:
            f.write(b"\x00garbage" * 5)  # a damaged tail, 40 bytes
        os.unlink(tmp_path / "data" / "recovery-point-offset-checkpoint")
        Log.open(d, cfg, replicated=True, high_watermark=20, clean_shutdown=False).close()
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        handler.close()
    h = History()
    counts = scrape_node_logs(h, {0: str(path)})
    events = [
        (o.value["kind"], o.value["from"], o.value["to"], o.value["hw"], o.value["records"], o.value["bytes"])
        for o in h.ops
        if o.f == "truncate"
    ]
    assert events == [
        ("follower", 60, 41, 0, 20, 10 * len(one)),
        ("follower", 40, 20, 30, 20, 10 * len(one)),
        ("recovery", None, 20, 20, 0, 40),
    ], events
    assert counts["truncations"] == 3 and counts["truncations_below_hw"] == 1
    assert counts["truncated_records"] == 40 and counts["truncated_bytes"] == 20 * len(one) + 40
