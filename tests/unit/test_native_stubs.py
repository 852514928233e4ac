"""The ``.pyi`` stub beside each native module matches the compiled module (mypy's stubtest):
every public name, signature, property and class is in both. Entries stubtest cannot judge are
in ``_native/stubtest-allowlist.txt``, each with its reason."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

NATIVE_DIR = Path(__file__).resolve().parents[2] / "_native"

# Every native module has a stub, and every stub is checked.
MODULES = sorted(p.stem for p in NATIVE_DIR.glob("*.pyx"))


def stub_root(tmp_path: Path) -> Path:
    """A search path where mypy finds the stubs as ``seglog._native.*`` (the package's source
    directories are not named after it, so mypy cannot find them in place)."""
    pkg = tmp_path / "seglog" / "_native"
    pkg.mkdir(parents=True)
    (tmp_path / "seglog" / "__init__.pyi").write_text("")
    (pkg / "__init__.pyi").write_text("")
    for stub in NATIVE_DIR.glob("*.pyi"):
        (pkg / stub.name).write_text(stub.read_text())
    return tmp_path


def test_stubs_match_the_compiled_modules(tmp_path: Path) -> None:
    pytest.importorskip("mypy.stubtest", reason="mypy is not installed (pip install seglog[test])")
    missing = [m for m in MODULES if not (NATIVE_DIR / f"{m}.pyi").exists()]
    assert not missing, f"native modules without a stub: {missing}"
    env = dict(os.environ, MYPYPATH=str(stub_root(tmp_path)))
    cmd = [
        sys.executable,
        "-m",
        "mypy.stubtest",
        *(f"seglog._native.{m}" for m in MODULES),
        "--allowlist",
        str(NATIVE_DIR / "stubtest-allowlist.txt"),
        "--ignore-unused-allowlist",
        "--mypy-config-file",
        str(tmp_path / "none.ini"),
    ]
    (tmp_path / "none.ini").write_text("[mypy]\n")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
