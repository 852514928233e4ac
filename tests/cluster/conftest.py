"""Cluster tests (``@pytest.mark.cluster``) need ZooKeeper and a Java runtime and skip, saying
why, without them. (Long profiles, ``@pytest.mark.slow``, are skipped by tests/conftest.py.)"""

from __future__ import annotations

import os

import pytest


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
