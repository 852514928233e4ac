"""seglog.util.ports: ports for servers chosen in advance stay out of the ephemeral range."""

from __future__ import annotations

import socket

import pytest

from seglog.util import ports


def test_ports_are_outside_the_ephemeral_range_distinct_and_bindable() -> None:
    low, high = ports.ephemeral_range()
    got = [ports.free_port() for _ in range(50)]
    assert len(set(got)) == 50
    for p in got:
        assert ports.POOL_LOW <= p <= 65535
        assert not low <= p <= high, f"port {p} is in the ephemeral range {low}-{high}"
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", got[-1]))


def test_a_port_in_use_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        # A pool of two ports, the first of them busy: the other one comes back.
        monkeypatch.setattr(ports, "_pool", lambda: [busy, busy + 1 if busy < 65535 else busy - 1])
        monkeypatch.setattr(ports, "_given", set())
        monkeypatch.setattr(ports, "_cursor", 0)
        assert ports.free_port() != busy


def test_no_room_outside_the_ephemeral_range_falls_back_to_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "ephemeral_range", lambda: (1024, 65535))
    p = ports.free_port()
    assert 1 <= p <= 65535
