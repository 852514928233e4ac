"""Collect ``bench_*.py`` files as test modules when pytest is pointed at ``bench/``."""
from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    patterns = config.getini("python_files")
    if "bench_*.py" not in patterns:
        config.addinivalue_line("python_files", "bench_*.py")
