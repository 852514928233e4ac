"""pytest-benchmark over the registry in ``seglog.benchmarks`` (what ``seglog bench`` runs).

Collects ``bench_*.py`` when running ``pytest bench`` (the repository's pytest configuration
only names ``test_*.py``), and provides ``bench_run(name, contender)``: prepare the registry's
work for benchmark ``name`` once per session, then time one contender's call with
pytest-benchmark. Sizes are the registry's ``--quick`` sizes unless ``SEGLOG_BENCH_FULL=1``;
``SEGLOG_BENCH_RECORDS=N`` overrides the record count. Missing peers are skipped with the pip
name to install.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

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


@pytest.fixture(scope="session")
def _registry_work() -> Iterator[Callable[[str], Any]]:
    from seglog.benchmarks import Work, get, shutdown

    root = Path(tempfile.mkdtemp(prefix="seglog-bench-", dir=os.environ.get("SEGLOG_BENCH_DIR")))
    prepared: dict[str, Work] = {}
    records = os.environ.get("SEGLOG_BENCH_RECORDS")
    quick = os.environ.get("SEGLOG_BENCH_FULL", "") not in ("1", "true", "yes")

    def work(name: str) -> Work:
        if name not in prepared:
            bench = get(name)
            available = frozenset(c.name for c in bench.contenders if c.missing() is None)
            d = root / name
            d.mkdir()
            prepared[name] = bench.prepare(bench.sizes(quick, int(records) if records else None), d, available)
        return prepared[name]

    yield work
    for w in prepared.values():
        if w.close is not None:
            w.close()
    shutdown()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def bench_run(benchmark: Any, _registry_work: Callable[[str], Any]) -> Callable[[str, str], None]:
    """Time ``contender`` of registry benchmark ``name``; rates go to ``extra_info``."""
    from seglog.benchmarks import get

    def run(name: str, contender: str) -> None:
        bench = get(name)
        c = bench.contender(contender)
        why = bench.unavailable() if bench.unavailable is not None else None
        if why is not None:
            pytest.skip(why)
        mod = c.missing()
        if mod is not None:
            pytest.skip(f"{c.name}: module {mod!r} not installed (pip install {c.pip or mod})")
        if bench.self_timed:
            # Stream calls make their inputs chunk by chunk and time only their own work on each:
            # pytest-benchmark would time both.
            pytest.skip(f"{name} times itself per chunk: run `seglog bench --only {name}`")
        work = _registry_work(name)
        if contender not in work.calls:
            pytest.skip(f"{c.name} is not available for {name}")
        benchmark.group = name
        benchmark.extra_info["role"] = c.role
        benchmark.extra_info[bench.unit] = work.items
        fn = work.calls[contender]
        setup = work.setup.get(contender)
        if work.repeatable and setup is None:
            benchmark(fn)
        else:
            benchmark.pedantic(fn, setup=setup, rounds=1 if benchmark.disabled else 3, iterations=1)
        stats = getattr(benchmark, "stats", None)
        inner = getattr(stats, "stats", None) if stats is not None else None
        if inner is not None and inner.median:
            benchmark.extra_info[f"{bench.unit}_per_s"] = work.items / inner.median
            if work.nbytes:
                benchmark.extra_info["bytes_per_s"] = work.nbytes / inner.median

    return run
