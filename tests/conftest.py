from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Files written by Apache Kafka (its client library and real brokers); provenance and checksums
# in tests/fixtures/README.md.
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.fail(f"the Kafka-written fixtures are missing: expected them at {FIXTURES}")
    return FIXTURES


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[Any]:
    """One ZooKeeper server (Debian's package) on a free loopback port for the whole session;
    tests that need it skip, saying why, when it is not installed."""
    from seglog.testing.zookeeper import ZooKeeperServer, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    server = ZooKeeperServer().start()
    try:
        yield server
    finally:
        server.stop()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Long tests (``@pytest.mark.slow``: simulation and fault profiles, long state machines and
    fuzz loops) run only when asked for, with ``-m slow`` or ``SEGLOG_SLOW=1``."""
    if os.environ.get("SEGLOG_SLOW") == "1" or "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="long: run with -m slow or SEGLOG_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
