"""Collect ``bench_*.py`` when running ``pytest bench`` (the repository's pytest configuration
only names ``test_*.py``). Left to pytest when ``python_files`` already matches them or the
file was named on the command line (pytest collects those itself)."""

from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path

import pytest


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    if file_path.suffix != ".py" or not file_path.name.startswith("bench_"):
        return None
    if parent.session.isinitpath(file_path):
        return None
    patterns = parent.config.getini("python_files")
    if any(fnmatch(file_path.name, p) for p in patterns):
        return None
    return pytest.Module.from_parent(parent, path=file_path)
