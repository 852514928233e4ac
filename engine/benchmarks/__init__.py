"""The benchmark suite behind ``seglog bench`` and the repository's ``bench/`` pytest files.

:data:`BENCHMARKS` is the registry (see :mod:`seglog.benchmarks.registry` for its types); each
entry's ``prepare`` returns the same work for seglog and every peer. Import is cheap: peers
are imported only when a benchmark is prepared.
"""

from __future__ import annotations

from .registry import Benchmark, Contender, Goal, Summary, Work, judge, ratios, summarize
from .registry import cases as _cases
from .suite import BENCHMARKS, NOT_YET, get, shutdown

__all__ = [
    "BENCHMARKS",
    "NOT_YET",
    "Benchmark",
    "Contender",
    "Goal",
    "Summary",
    "Work",
    "cases",
    "get",
    "judge",
    "ratios",
    "shutdown",
    "summarize",
]


def cases(*names: str) -> list[tuple[str, str]]:
    """(benchmark, contender) pairs of the named registry entries, for pytest parametrisation."""
    return _cases(BENCHMARKS, *names)
