"""The benchmark registry: what each benchmark measures, defined once.

A :class:`Benchmark` names its contenders (seglog's entry points, the peers it is compared
with, and the machine's limit for the same bytes), its goals, its sizes for ``--quick`` and the
full run, and a ``prepare`` function that builds the data and returns a :class:`Work`: one
callable per contender doing the same work on identical data. Both ``seglog bench``
(:mod:`seglog.benchmarks.runner`) and the pytest-benchmark files in the repository's
``bench/`` directory time those callables; neither has a benchmark body of its own.

Arithmetic on the measurements (medians, spread, ratios, goal verdicts) is here too, as plain
functions over lists of seconds, so that it can be checked without timing anything.
"""

from __future__ import annotations

import importlib.util
import shutil
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Role = Literal["seglog", "peer", "limit"]
GoalKind = Literal["ratio", "max_seconds_per_item", "min_items_per_second"]


@dataclass(frozen=True, slots=True)
class Contender:
    """One implementation of a benchmark's work. ``modules`` are the imports it needs;
    ``pip`` is what to install when one is missing."""

    name: str
    role: Role
    modules: tuple[str, ...] = ()
    pip: str = ""
    note: str = ""

    def missing(self) -> str | None:
        """The first module this contender needs that is not installed, else None."""
        for mod in self.modules:
            try:
                if importlib.util.find_spec(mod) is None:
                    return mod
            except (ImportError, ValueError):
                return mod
        return None


@dataclass(frozen=True, slots=True)
class Goal:
    """A target from docs/performance.md (§1 lists them). ``ratio``: the subject's rate over ``versus``'s
    rate is at least ``value``; ``max_seconds_per_item``: the subject's median time per item is
    at most ``value``; ``min_items_per_second``: its rate is at least ``value``. ``subject`` ""
    means the benchmark's first seglog contender."""

    text: str
    kind: GoalKind
    value: float
    versus: str = ""
    subject: str = ""


@dataclass(slots=True)
class Work:
    """What ``prepare`` hands the timers. ``calls[name]()`` does ``items`` units of work once
    (``nbytes`` bytes of payload); ``setup[name]()``, when present, runs untimed before each
    timed call (a fresh log or database for the write benchmarks) and ``teardown[name]()``
    untimed after it (that store removed, so that no contender runs beside the page cache
    another one filled). ``repeatable`` calls may be
    run several times per sample to reach a measurable duration. ``close`` releases what
    prepare made (files, sessions).

    ``timed_inside`` calls time their own work and return its seconds (a stream's calls make
    each chunk of their inputs untimed between the timed parts); ``warmup[name]()``, when
    present, is the untimed warm-up instead of a whole call (the first chunk of a stream)."""

    items: int
    calls: dict[str, Callable[[], object]]
    setup: dict[str, Callable[[], object]] = field(default_factory=dict)
    teardown: dict[str, Callable[[], object]] = field(default_factory=dict)
    repeatable: bool = True
    nbytes: int = 0
    close: Callable[[], None] | None = None
    params: dict[str, object] = field(default_factory=dict)
    timed_inside: bool = False
    warmup: dict[str, Callable[[], object]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Benchmark:
    name: str
    title: str
    unit: str  # what ``Work.items`` counts: "records", "bytes", "lookups", "rows"
    contenders: tuple[Contender, ...]
    prepare: Callable[[Mapping[str, int], Path, frozenset[str]], Work]
    quick: Mapping[str, int]
    full: Mapping[str, int]
    goals: tuple[Goal, ...] = ()
    group: str = ""
    # Returns why the whole benchmark cannot run here (no Java for Spark...), or None.
    unavailable: Callable[[], str | None] | None = None
    # Rough seconds per round of the full run on a 2-core machine, for the time estimate.
    full_round_seconds: float = 1.0
    # "stream": millions of distinct records; "hot batch": the same input every call (hot in the
    # CPU cache); "": neither applies.
    variant: str = ""
    # Its calls time their own work (``Work.timed_inside``: a stream made chunk by chunk between
    # the timed parts), which pytest-benchmark, timing whole calls, cannot measure.
    self_timed: bool = False

    def contender(self, name: str) -> Contender:
        for c in self.contenders:
            if c.name == name:
                return c
        raise KeyError(
            f"benchmark {self.name!r} has no contender {name!r}; it has {', '.join(c.name for c in self.contenders)}"
        )

    @property
    def primary(self) -> str:
        """The seglog contender the goals speak of by default."""
        return next(c.name for c in self.contenders if c.role == "seglog")

    def sizes(self, quick: bool, records: int | None = None) -> dict[str, int]:
        out = dict(self.quick if quick else self.full)
        if records is not None and "records" in out:
            out["records"] = records
        return out


# -------------------------------------------------------------------------------------------------
# Arithmetic over measurements
# -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Summary:
    """Seconds per call over the rounds: median, quartiles, extremes; ``rate`` is items/s at
    the median."""

    median: float
    q1: float
    q3: float
    min: float
    max: float
    rate: float

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1


def summarize(samples: Sequence[float], items: int) -> Summary:
    if not samples:
        raise ValueError("no samples to summarize")
    s = sorted(samples)
    med = statistics.median(s)
    if len(s) >= 2:
        q1, _, q3 = statistics.quantiles(s, n=4, method="inclusive")
    else:
        q1 = q3 = s[0]
    return Summary(med, q1, q3, s[0], s[-1], items / med if med > 0 else float("inf"))


def ratios(rates: Mapping[str, float], roles: Mapping[str, Role]) -> dict[str, dict[str, float | str | None]]:
    """For each contender: its rate over the best peer's (``vs_best_peer``, with that peer's
    name) and over the limit's (``vs_limit``). None where there is no peer or limit measured."""
    peers = {n: r for n, r in rates.items() if roles[n] == "peer"}
    best = max(peers, key=lambda n: peers[n]) if peers else None
    limit = next((n for n in rates if roles[n] == "limit"), None)
    out: dict[str, dict[str, float | str | None]] = {}
    for name, rate in rates.items():
        out[name] = {
            "best_peer": best,
            "vs_best_peer": rate / peers[best] if best is not None and peers[best] > 0 else None,
            "limit": limit,
            "vs_limit": rate / rates[limit] if limit is not None and rates[limit] > 0 else None,
        }
    return out


def judge(goal: Goal, primary: str, rates: Mapping[str, float], items: int) -> tuple[float | None, bool | None]:
    """The measured figure a goal is stated in, and whether it is met (None: not measurable,
    e.g. the peer it compares with is not installed)."""
    subject = goal.subject or primary
    if subject not in rates:
        return None, None
    rate = rates[subject]
    if goal.kind == "ratio":
        other = rates.get(goal.versus)
        if not other:
            return None, None
        r = rate / other
        return r, r >= goal.value
    if goal.kind == "max_seconds_per_item":
        per = 1.0 / rate if rate > 0 else float("inf")
        return per, per <= goal.value
    return rate, rate >= goal.value


def java_missing() -> str | None:
    import os

    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install pyspark)"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime (PySpark needs one: install a JRE, e.g. openjdk-17-jre-headless)"
    if importlib.util.find_spec("pyarrow") is None:
        return "pyarrow is not installed (pip install pyarrow)"
    return None


def cases(benchmarks: Sequence[Benchmark], *names: str) -> list[tuple[str, str]]:
    """(benchmark, contender) pairs of the named benchmarks: pytest parametrisation."""
    by_name = {b.name: b for b in benchmarks}
    return [(n, c.name) for n in names for c in by_name[n].contenders]
