#!/usr/bin/env python3
"""Run mypy over the package's sources under their import names.

The sources are laid out by role (``engine/`` is ``seglog``, ``_native/`` is ``seglog._native``,
``bindings/`` is ``seglog.bindings``, ``discovery/`` holds top-level modules; pyproject.toml's
``[tool.setuptools] package-dir``), which mypy cannot map by itself: it names a module after its
folder, and follows neither setuptools' editable-install import hook nor the package-dir table.
So this script lays a tree of symbolic links under ``build/typecheck/`` that has the installed
package's shape (``seglog/`` linking each entry of ``engine/``, plus ``_native`` and ``bindings``)
and points mypy at it (``mypy_path`` in pyproject.toml). Nothing is copied or built: an edit to a
source file is seen at once, and the tree is refreshed on every run so new modules are seen too.
mypy reports paths inside the link tree; they are written back as the source paths.

Usage: ``python .ci/typecheck.py [mypy options]``: unless ``-p``/``-m`` name packages or modules,
the whole Python layer is checked (``-p seglog`` and the top-level modules in ``discovery/``).

``python .ci/typecheck.py --stubtest [stubtest options]`` checks the native modules' ``.pyi`` stubs
against the built modules (mypy's stubtest; the package must be installed, e.g. ``pip install -e
.``): every ``_native/*.pyx`` that has a ``.pyi`` beside it. Its tree, ``build/stubtest/``, holds
``seglog._native`` under an empty ``seglog`` stub, so that the stubs are checked on their own and
not held up by type errors elsewhere in the package. Exits with the checker's status.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREE = os.path.join("build", "typecheck")
STUB_TREE = os.path.join("build", "stubtest")
# Link-tree folder -> source folder, most specific first (pyproject.toml's package-dir).
MAPPING = [
    ("seglog/_native/", "_native/"),
    ("seglog/bindings/", "bindings/"),
    ("seglog/", "engine/"),
]
DEFAULT_TARGETS = ["-p", "seglog", "-m", "pyspark_seglog", "-m", "_seglog_command"]


def stubbed_native_modules() -> list[str]:
    """``seglog._native.NAME`` for each ``_native/NAME.pyx`` with a ``_native/NAME.pyi``."""
    native = os.path.join(ROOT, "_native")
    return [
        f"seglog._native.{name[:-4]}"
        for name in sorted(os.listdir(native))
        if name.endswith(".pyx") and os.path.exists(os.path.join(native, name[:-4] + ".pyi"))
    ]


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


def stub_tree() -> str:
    """(Re)build ``build/stubtest``: ``seglog/_native`` linked under an empty ``seglog`` stub, and
    a mypy configuration that searches it; return the configuration's path."""
    tree = os.path.join(ROOT, STUB_TREE)
    if os.path.isdir(tree):
        shutil.rmtree(tree)
    os.makedirs(os.path.join(tree, "seglog"))
    with open(os.path.join(tree, "seglog", "__init__.pyi"), "w", encoding="utf-8"):
        pass
    os.symlink(os.path.join(ROOT, "_native"), os.path.join(tree, "seglog", "_native"))
    config = os.path.join(tree, "mypy.ini")
    with open(config, "w", encoding="utf-8") as f:
        f.write(f"[mypy]\nmypy_path = {STUB_TREE}\npython_version = 3.10\n")
    return config


def source_path(line: str) -> str:
    """``line`` with a link-tree path in it rewritten as the source file's path."""
    for prefix in (
        os.path.join(ROOT, TREE) + os.sep,
        TREE + os.sep,
        os.path.join(ROOT, STUB_TREE) + os.sep,
        STUB_TREE + os.sep,
    ):
        head, found, rest = line.partition(prefix)
        if found and not head.endswith(os.sep):
            for linked, source in MAPPING:
                if rest.startswith(linked):
                    return head + source + rest[len(linked) :]
    return line


def main(argv: list[str]) -> int:
    os.chdir(ROOT)
    if argv[:1] == ["--stubtest"]:
        allowlist = os.path.join(".ci", "stubtest-allowlist")
        command = ["mypy.stubtest", "--mypy-config-file", stub_tree(), "--allowlist", allowlist, *argv[1:]]
        command += stubbed_native_modules()
    else:
        link_tree()
        named = any(a in ("-p", "--package", "-m", "--module") for a in argv)
        command = ["mypy", *argv, *([] if named else DEFAULT_TARGETS)]
    proc = subprocess.run([sys.executable, "-m", *command], stdout=subprocess.PIPE, text=True, check=False)
    for line in proc.stdout.splitlines():
        print(source_path(line))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
