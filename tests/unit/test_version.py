"""The version is written in one place, ``seglog.__version__`` (``engine/__init__.py``):
pyproject.toml declares it dynamic and reads it from there, so the installed metadata (what pip,
``importlib.metadata`` and the benchmark reports see) cannot say something else."""

from __future__ import annotations

import importlib.metadata
import os

import pytest
from packaging.version import Version

import seglog

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_installed_metadata_has_the_package_version() -> None:
    assert importlib.metadata.version("seglog") == seglog.__version__


def test_the_version_is_a_pep440_version() -> None:
    assert str(Version(seglog.__version__)) == seglog.__version__


def test_pyproject_reads_the_version_from_the_package() -> None:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        pyproject = tomllib.load(f)
    assert "version" not in pyproject["project"], "pyproject.toml states a version of its own"
    assert "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "seglog.__version__"}
