"""Cluster tests (``@pytest.mark.cluster``) need ZooKeeper and a Java runtime and skip, saying
why, without them. (Long profiles, ``@pytest.mark.slow``, are skipped by tests/conftest.py.)"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.proxy import ProxyHub
from tests.cluster.scenario import Scenario


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    mine = [i for i in items if str(i.path).startswith(here)]
    if not mine:
        return
    if any("cluster" in i.keywords for i in mine):
        from seglog.cluster.zkserver import unavailable_reason

        reason = unavailable_reason()
        if reason is not None:
            skip_zk = pytest.mark.skip(reason=f"no ZooKeeper for the cluster tests: {reason}")
            for item in mine:
                if "cluster" in item.keywords:
                    item.add_marker(skip_zk)


@pytest.fixture
def scenario_kw() -> dict[str, Any]:
    """The ``Scenario`` arguments of a test module's ``sc`` (a module overrides this fixture)."""
    return {}


@pytest.fixture
def sc(tmp_path: Path, request: pytest.FixtureRequest, scenario_kw: dict[str, Any]) -> Iterator[Scenario]:
    """A fault-injection scenario in the test's tmp dir, closed after the test; a test's
    ``@pytest.mark.parametrize("sc", [{...}], indirect=True)`` adds ``Scenario`` arguments."""
    s = Scenario(str(tmp_path / "s"), **{**scenario_kw, **getattr(request, "param", {})})
    yield s
    s.close()


@pytest.fixture
def hub() -> Iterator[ProxyHub]:
    """The fault proxy's listeners, closed after the test."""
    h = ProxyHub()
    yield h
    h.close()
