#!/usr/bin/env python3
"""Run mypy over the package's sources under their import names.

The sources are laid out by role (``engine/`` is ``seglog``, ``_native/`` is ``seglog._native``,
``bindings/`` is ``seglog.bindings``, ``bindings/toplevel/`` holds top-level modules; pyproject.toml's
``[tool.setuptools] package-dir``), which mypy cannot map by itself: it names a module after its
folder, and follows neither setuptools' editable-install import hook nor the package-dir table.
So this script lays a tree of symbolic links under ``build/typecheck/`` that has the installed
package's shape (``seglog/`` linking each entry of ``engine/``, plus ``_native`` and ``bindings``)
and points mypy at it (``mypy_path`` in pyproject.toml). Nothing is copied or built: an edit to a
source file is seen at once, and the tree is refreshed on every run so new modules are seen too.
mypy reports paths inside the link tree; they are written back as the source paths.

Usage: ``python .ci/typecheck.py [mypy options]``: unless ``-p``/``-m`` name packages or modules,
the whole Python layer is checked (``-p seglog`` and the top-level modules in ``bindings/toplevel/``)
and, in the same run, the tests and benchmarks (``-p tests -p bench``, found from the repository
root). The package is checked with ``--strict``; the tests and benchmarks with pyproject.toml's
override for them: every function body is checked, but a test needs no annotations.

The native modules' ``.pyi`` stubs are checked against the built modules by
``tests/unit/test_native_stubs.py`` (mypy's stubtest), in the test suite.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREE = os.path.join("build", "typecheck")
# Link-tree folder -> source folder, most specific first (pyproject.toml's package-dir).
MAPPING = [
    ("seglog/_native/", "_native/"),
    ("seglog/bindings/", "bindings/"),
    ("seglog/", "engine/"),
]
DEFAULT_TARGETS = ["-p", "seglog", "-m", "pyspark_seglog", "-m", "_seglog_command", "-p", "tests", "-p", "bench"]


def link_tree() -> str:
    """(Re)build ``build/typecheck/seglog`` as links into the source folders; return its parent."""
    tree = os.path.join(ROOT, TREE)
    package = os.path.join(tree, "seglog")
    if os.path.isdir(package):
        shutil.rmtree(package)
    os.makedirs(package)
    for name in sorted(os.listdir(os.path.join(ROOT, "engine"))):
        if name == "__pycache__":
            continue
        os.symlink(os.path.join(ROOT, "engine", name), os.path.join(package, name))
    for name, source in (("_native", "_native"), ("bindings", "bindings")):
        if os.path.lexists(os.path.join(package, name)):
            raise SystemExit(f"engine/{name} would hide the {source}/ folder (seglog.{name}) from mypy")
        os.symlink(os.path.join(ROOT, source), os.path.join(package, name))
    return tree


def source_path(line: str) -> str:
    """``line`` with a link-tree path in it rewritten as the source file's path."""
    for prefix in (
        os.path.join(ROOT, TREE) + os.sep,
        TREE + os.sep,
    ):
        head, found, rest = line.partition(prefix)
        if found and not head.endswith(os.sep):
            for linked, source in MAPPING:
                if rest.startswith(linked):
                    return head + source + rest[len(linked) :]
    return line


def main(argv: list[str]) -> int:
    os.chdir(ROOT)
    link_tree()
    named = any(a in ("-p", "--package", "-m", "--module") for a in argv)
    command = ["mypy", *argv, *([] if named else DEFAULT_TARGETS)]
    proc = subprocess.run([sys.executable, "-m", *command], stdout=subprocess.PIPE, text=True, check=False)
    for line in proc.stdout.splitlines():
        print(source_path(line))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
