#!/usr/bin/env python3
"""Check an installed seglog distribution against the source tree it was built from.

Run by the interpreter seglog is installed in, from outside the source tree (so that nothing is
imported from it): ``python /path/to/.ci/check_install.py /path/to/source-tree``. Checks that

- every Python module of the source tree (``engine/`` as ``seglog``, ``bindings/`` as
  ``seglog.bindings``, ``_native/*.py`` as ``seglog._native``, ``bindings/toplevel/`` top-level), every
  native module (``_native/*.pyx``, built), every ``.pyi`` stub and ``py.typed`` is installed;
- every native module imports, from the installed copy;
- ``seglog`` imports and its ``__version__`` is the installed distribution's version.

Prints one line per problem and exits 1 if there is any.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys
from importlib.machinery import EXTENSION_SUFFIXES

# Source folder -> installed folder (pyproject.toml's package-dir).
FOLDERS = {"engine": "seglog", "bindings": "seglog/bindings", "_native": "seglog/_native", "bindings/toplevel": ""}


def expected_files(source: str) -> tuple[list[str], list[str]]:
    """(installed paths every distribution must have, native module names) for ``source``."""
    files = ["seglog/py.typed"]
    natives = []
    for folder, installed in FOLDERS.items():
        base = os.path.join(source, folder)
        for dirpath, dirnames, filenames in os.walk(base):
            rel = os.path.relpath(dirpath, base)
            # Skip caches, C includes, and a folder mapped on its own (bindings/toplevel/).
            dirnames[:] = [
                d
                for d in dirnames
                if d not in ("__pycache__", "include") and os.path.normpath(os.path.join(folder, rel, d)) not in FOLDERS
            ]
            target = installed if rel == "." else os.path.join(installed, rel)
            for name in filenames:
                if name.endswith((".py", ".pyi")) and ".egg-info" not in dirpath:
                    files.append(os.path.join(target, name))
                elif name.endswith(".pyx"):
                    natives.append(f"seglog._native.{name[:-4]}")
    return sorted(files), sorted(natives)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    source = os.path.realpath(argv[0])
    if os.path.realpath(os.getcwd()).startswith(source + os.sep) or os.path.realpath(os.getcwd()) == source:
        print("run this from outside the source tree (it would import the sources)", file=sys.stderr)
        return 2
    problems = []
    dist = importlib.metadata.distribution("seglog")
    installed = {str(f).replace(os.sep, "/") for f in dist.files or ()}
    files, natives = expected_files(source)
    for path in files:
        if path not in installed:
            problems.append(f"{path}: not in the installed distribution")
    for module in natives:
        stem = module.replace(".", "/")
        if not any(stem + suffix in installed for suffix in EXTENSION_SUFFIXES):
            problems.append(f"{module}: no built extension ({stem}{EXTENSION_SUFFIXES[0]}) installed")
            continue
        try:
            loaded = importlib.import_module(module)
        except ImportError as exc:
            problems.append(f"{module}: does not import: {exc}")
            continue
        if os.path.realpath(loaded.__file__ or "").startswith(source + os.sep):
            problems.append(f"{module}: imported from the source tree ({loaded.__file__}), not the installation")
    try:
        import seglog
    except ImportError as exc:
        problems.append(f"seglog: does not import: {exc}")
    else:
        if seglog.__version__ != dist.version:
            problems.append(f"seglog.__version__ is {seglog.__version__}, the distribution says {dist.version}")
    for line in problems:
        print(line)
    if not problems:
        print(
            f"seglog {dist.version}: {len(files)} modules and stubs installed, {len(natives)} native modules "
            f"import ({', '.join(m.rsplit('.', 1)[1] for m in natives)})"
        )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
