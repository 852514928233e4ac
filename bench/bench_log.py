"""The partition log from Python, side by side with sqlite3 (WAL), LMDB, a plain length-prefixed
file and Parquet: the registry's ``append-batches``, ``append-*``, ``read-*`` and ``lookup-*``
benchmarks (``seglog.benchmarks.storage``; ``seglog bench --only log`` runs the same work).

    pytest bench/bench_log.py --benchmark-group-by=group
    SEGLOG_BENCH_RECORDS=1000000 pytest bench/bench_log.py     # bigger logs

Goals: pre-encoded append >= 0.8x plain write(); encode + append >= 15x sqlite3 and >= 10x LMDB;
columnar read >= 10x sqlite3; lookups < 2 us each.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from seglog.benchmarks import cases

CASES = cases(
    "append-batches", "append-100B", "append-1KiB", "read-100B", "read-1KiB", "lookup-offset", "lookup-timestamp"
)


@pytest.mark.parametrize("name,contender", CASES, ids=[f"{n}-{c}" for n, c in CASES])
def test_log(bench_run: Callable[[str, str], None], name: str, contender: str) -> None:
    bench_run(name, contender)
