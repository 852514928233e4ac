"""pyproject.toml ships the whole source tree: every package folder is a listed package and every
file the native modules are built from is package data, so that an sdist builds and a wheel has
every module. (.ci/run builds both and checks the installed result; these catch the same
omissions in a second, without a build.)"""

from __future__ import annotations

import fnmatch
import os
from typing import Any

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def setuptools_table() -> Any:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]


def test_every_package_folder_is_a_listed_package(setuptools_table: Any) -> None:
    folders = {name: folder for name, folder in setuptools_table["package-dir"].items() if name}
    found = set()
    for name, folder in folders.items():
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, folder)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            if "__init__.py" in filenames:
                rel = os.path.relpath(dirpath, os.path.join(ROOT, folder))
                found.add(name if rel == "." else ".".join([name, *rel.split(os.sep)]))
    missing = sorted(found - set(setuptools_table["packages"]))
    assert not missing, f"packages missing from [tool.setuptools] packages in pyproject.toml: {missing}"


def test_every_native_build_input_is_package_data(setuptools_table: Any) -> None:
    patterns = setuptools_table["package-data"]["seglog._native"]
    native = os.path.join(ROOT, "_native")
    inputs = []
    for dirpath, dirnames, filenames in os.walk(native):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in filenames:
            rel = os.path.relpath(os.path.join(dirpath, name), native).replace(os.sep, "/")
            # C sources are written by hand under include/ only (Cython's output goes to build/).
            if name.endswith((".pyx", ".pxd", ".pxi", ".pyi", ".h")) or (name.endswith(".c") and "/" in rel):
                inputs.append(rel)
    assert inputs
    unshipped = [p for p in inputs if not any(fnmatch.fnmatchcase(p, pat) for pat in patterns)]
    assert not unshipped, f"files the native modules are built from that the sdist would leave out: {unshipped}"


def test_py_typed_is_shipped(setuptools_table: Any) -> None:
    assert os.path.exists(os.path.join(ROOT, "engine", "py.typed"))
    assert "py.typed" in setuptools_table["package-data"]["seglog"]
