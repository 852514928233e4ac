"""Collect ``bench_*.py`` files as test modules when pytest is pointed at bench/ (the
project's ``python_files`` setting names the unit-test pattern only)."""
from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest


def pytest_collect_file(file_path: Path, parent: Any) -> pytest.Module | None:
    if file_path.suffix != ".py" or not file_path.name.startswith("bench_"):
        return None
    if any(fnmatch(file_path.name, pat) for pat in parent.config.getini("python_files")):
        return None  # already collected by pytest's own python plugin
    return pytest.Module.from_parent(parent, path=file_path)
