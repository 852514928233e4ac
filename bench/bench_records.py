"""Record batch encode, decode and columnar decode, side by side with aiokafka (Cython) and
kafka-python: the registry's ``encode-*``, ``decode-*`` and ``columns-*`` benchmarks
(``seglog.benchmarks.records``; ``seglog bench --only records`` runs the same work).

    pytest bench/bench_records.py --benchmark-columns=median,ops --benchmark-group-by=group

Every call handles one ~1 MiB RecordBatch v2 (uncompressed) of 100 B or 1 KiB records;
``extra_info`` carries records/s. Goals: encode >= 5x aiokafka, columnar decode >= 10x aiokafka.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from seglog.benchmarks import cases

CASES = cases("encode-100B", "encode-1KiB", "decode-100B", "decode-1KiB", "columns-100B", "columns-1KiB")


@pytest.mark.parametrize("name,contender", CASES, ids=[f"{n}-{c}" for n, c in CASES])
def test_records(bench_run: Callable[[str, str], None], name: str, contender: str) -> None:
    bench_run(name, contender)
