"""``seglog bench``: run the registry's benchmarks side by side and report them.

For each benchmark: prepare the work once, warm every contender up once (untimed), then
``rounds`` rounds in which every contender runs once, in the registry's order rotated by one
each round (A B C, B C A, ...), so that load from the rest of the machine falls on all of them
alike. Calls that are cheap and repeatable are looped within a sample until it lasts at least
``min_sample`` seconds. Results: a table on stdout, ``results.json`` (every sample, the
machine, the versions of every peer) and ``ratios.png`` in the output directory.
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
import functools
import importlib.metadata
import json
import os
import platform
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from . import memory, suite
from .registry import Benchmark, Work, judge, ratios, summarize

SCHEMA = "seglog-bench/1"

# Distribution names whose versions the machine description records.
PEER_DISTRIBUTIONS = (
    "seglog",
    "crc32c",
    "google-crc32c",
    "aiokafka",
    "kafka-python",
    "lmdb",
    "pyarrow",
    "pyspark",
    "numpy",
    "matplotlib",
    "pytest-benchmark",
)


class SelectionError(ValueError):
    """``--only`` named something that is not a benchmark."""


def select(benchmarks: Sequence[Benchmark], only: Sequence[str] | None) -> list[Benchmark]:
    """The benchmarks named by ``only`` (exact names, groups or shell patterns), in registry order."""
    if not only:
        return list(benchmarks)
    chosen: set[str] = set()
    unknown = []
    for pattern in only:
        hits = [b.name for b in benchmarks if fnmatch.fnmatchcase(b.name, pattern) or b.group == pattern]
        if not hits:
            unknown.append(pattern)
        chosen.update(hits)
    if unknown:
        raise SelectionError(
            f"unknown benchmark {', '.join(repr(u) for u in unknown)}; valid names: "
            f"{', '.join(b.name for b in benchmarks)} (or a group: "
            f"{', '.join(sorted({b.group for b in benchmarks if b.group}))}, or a pattern like 'encode-*')"
        )
    return [b for b in benchmarks if b.name in chosen]


# -------------------------------------------------------------------------------------------------
# The machine
# -------------------------------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "Model", "Hardware")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _mem_total() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def _java() -> str | None:
    import shutil
    import subprocess

    java = shutil.which("java")
    if java is None:
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = (out.stderr or out.stdout).strip().splitlines()
    return lines[0] if lines else None


def describe_machine() -> dict[str, Any]:
    from seglog._native import crc32c as native

    u = os.uname()
    mem = _mem_total()
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_bytes": mem,
        "memory": f"{mem / 2**30:.1f} GiB" if mem else None,
        "kernel": f"{u.sysname} {u.release} {u.machine}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "crc32c_implementation": native.implementation(),
        "java": _java(),
        "versions": {d: _version(d) for d in PEER_DISTRIBUTIONS},
        "sqlite": __import__("sqlite3").sqlite_version,
    }


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


# -------------------------------------------------------------------------------------------------
# Progress
# -------------------------------------------------------------------------------------------------


class BenchProgress:
    """A one-line bar on stderr, redrawn in place on a terminal; on a pipe (CI) one line per
    benchmark instead, so logs stay readable."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.started = time.monotonic()
        self._width = 0

    def update(self, label: str, advance: int = 0, partial: float = 0.0) -> None:
        """``advance`` whole benchmarks done; ``partial`` of the current one (0..1)."""
        self.done = min(self.total, self.done + advance)
        if not self.tty:
            return
        frac = min(1.0, (self.done + partial) / self.total)
        bar = "#" * int(frac * 30)
        elapsed = time.monotonic() - self.started
        line = f"\r[{bar:<30}] {frac * 100:5.1f}% {elapsed:6.1f}s  {label}"[:160]
        pad = max(0, self._width - len(line))
        self.stream.write(line + " " * pad)
        self.stream.flush()
        self._width = len(line)

    def note(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r" + " " * self._width + "\r")
            self._width = 0
        self.stream.write(text + "\n")
        self.stream.flush()

    def finish(self) -> None:
        if self.tty and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()


# -------------------------------------------------------------------------------------------------
# Timing
# -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Options:
    quick: bool = False
    rounds: int | None = None
    records: int | None = None
    min_sample: float | None = None
    work_dir: str | None = None

    @property
    def n_rounds(self) -> int:
        return self.rounds if self.rounds is not None else (3 if self.quick else 5)

    @property
    def sample_seconds(self) -> float:
        return self.min_sample if self.min_sample is not None else (0.02 if self.quick else 0.2)


def _loops(fn: Callable[[], object], target: float) -> int:
    """Calls per sample so that one sample lasts about ``target`` seconds (the first, cold call
    is the warm-up and is not kept)."""
    fn()
    t = time.perf_counter()
    fn()
    one = time.perf_counter() - t
    if one >= target:
        return 1
    return max(1, min(1_000_000, int(target / max(one, 1e-7))))


def measure(
    work: Work,
    order: Sequence[str],
    rounds: int,
    min_sample: float,
    tick: Callable[[str, float], None] = lambda label, frac: None,
    rss: dict[str, list[int]] | None = None,
) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Seconds per call of each contender in ``order`` (those in ``work.calls``), ``rounds``
    samples each, the order rotated each round; and the calls per sample used. With ``rss``,
    the peak resident set above its size at the start of each timed sample of a call that is
    not repeatable goes into ``rss[name]`` (bytes; none where the kernel does not say)."""
    names = [n for n in order if n in work.calls]
    steps = max(1, len(names) * (rounds + 1))
    step = 0
    loops: dict[str, int] = {}
    for name in names:  # warm-up (and calibration for repeatable calls)
        tick(f"{name}: warm-up", step / steps)
        step += 1
        if name in work.setup:
            work.setup[name]()
        if work.repeatable and not work.timed_inside:
            loops[name] = _loops(work.calls[name], min_sample)
        else:
            work.warmup.get(name, work.calls[name])()
            loops[name] = 1
        if name in work.teardown:
            work.teardown[name]()
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        k = r % len(names) if names else 0
        for name in names[k:] + names[:k]:
            tick(f"{name}: round {r + 1}/{rounds}", step / steps)
            step += 1
            fn = work.calls[name]
            if name in work.setup:
                work.setup[name]()
            n = loops[name]
            watch = rss is not None and (n == 1 or not work.repeatable)
            base = memory.start() if watch else None
            if work.timed_inside:
                seconds = fn()
                if not isinstance(seconds, float):
                    raise TypeError(f"{name}: a timed_inside call must return its seconds, got {seconds!r}")
                samples[name].append(seconds)
            else:
                t = time.perf_counter()
                for _ in range(n):
                    fn()
                samples[name].append((time.perf_counter() - t) / n)
            if rss is not None and base is not None and (top := memory.peak()) is not None:
                rss.setdefault(name, []).append(max(0, top - base))
            if name in work.teardown:
                work.teardown[name]()
    return samples, loops


def report_benchmark(
    bench: Benchmark,
    params: Mapping[str, int],
    work: Work | None,
    samples: Mapping[str, list[float]],
    loops: Mapping[str, int],
    missing: Mapping[str, str],
    errors: Mapping[str, str],
    rss: Mapping[str, list[int]] | None = None,
) -> dict[str, Any]:
    """The JSON record of one benchmark: every contender (measured, not installed or failed),
    its summary and ratios, its peak resident set above the start of its timed calls (the
    highest over the rounds, where measured), and the goals with their verdicts."""
    items = work.items if work is not None else 0
    roles = {c.name: c.role for c in bench.contenders}
    summaries = {n: summarize(s, items) for n, s in samples.items() if s}
    rates = {n: s.rate for n, s in summaries.items()}
    rel = ratios(rates, roles)
    contenders = []
    for c in bench.contenders:
        entry: dict[str, Any] = {"name": c.name, "role": c.role}
        if c.note:
            entry["note"] = c.note
        if c.name in missing:
            entry.update(status="not installed", pip=c.pip or None, reason=missing[c.name])
        elif c.name in errors:
            entry.update(status="error", reason=errors[c.name])
        elif c.name in summaries:
            s = summaries[c.name]
            entry.update(
                status="ok",
                samples_s=samples[c.name],
                calls_per_sample=loops.get(c.name, 1),
                median_s=s.median,
                q1_s=s.q1,
                q3_s=s.q3,
                iqr_s=s.iqr,
                min_s=s.min,
                max_s=s.max,
                items_per_s=s.rate,
                bytes_per_s=(work.nbytes / s.median if work is not None and work.nbytes and s.median else None),
                **rel[c.name],
            )
            if rss and rss.get(c.name):
                entry.update(peak_rss_above_start_bytes=max(rss[c.name]), peak_rss_samples_bytes=rss[c.name])
        else:
            entry.update(status="not run", reason="the work for this contender was not prepared")
        contenders.append(entry)
    goals = []
    for g in bench.goals:
        measured, met = judge(g, bench.primary, rates, items)
        goals.append(
            {
                "text": g.text,
                "kind": g.kind,
                "value": g.value,
                "versus": g.versus or None,
                "subject": g.subject or bench.primary,
                "measured": measured,
                "met": met,
            }
        )
    return {
        "name": bench.name,
        "title": bench.title,
        "group": bench.group,
        "variant": bench.variant or None,
        "unit": bench.unit,
        "params": dict(params),
        "items_per_call": items,
        "bytes_per_call": work.nbytes if work is not None else None,
        "extra": dict(work.params) if work is not None else {},
        "status": "ok" if summaries else "error",
        "contenders": contenders,
        "goals": goals,
    }


def estimate_seconds(benchmarks: Sequence[Benchmark], opts: Options) -> float:
    """Rough seconds for a full run (the registry's per-round figures, scaled to ``--records``)."""
    if opts.quick:
        return 0.0
    total = 0.0
    for b in benchmarks:
        scale = 1.0
        if opts.records is not None and b.full.get("records"):
            scale = opts.records / b.full["records"]
        total += b.full_round_seconds * scale * (opts.n_rounds + 2)
    return total


def run(
    benchmarks: Sequence[Benchmark],
    opts: Options,
    out_dir: Path,
    progress: BenchProgress | None = None,
    argv: Sequence[str] | None = None,
    stdout: TextIO | None = None,
) -> dict[str, Any]:
    """Run ``benchmarks``; write ``results.json`` (and the chart) under ``out_dir``; print the
    table on ``stdout``. Returns the JSON document."""
    out = stdout if stdout is not None else sys.stdout
    out_dir.mkdir(parents=True, exist_ok=True)
    started = _dt.datetime.now(_dt.timezone.utc)
    load_start = load_average()
    machine = describe_machine()
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "mode": "quick" if opts.quick else "full",
        "command": list(argv) if argv is not None else None,
        "started": started.isoformat(timespec="seconds"),
        "rounds": opts.n_rounds,
        "machine": machine,
        "load_average_start": load_start,
        "benchmarks": [],
    }
    prog = progress if progress is not None else BenchProgress(len(benchmarks))
    # Each benchmark's own scratch directory, removed after it.
    root = Path(tempfile.mkdtemp(prefix="seglog-bench-", dir=opts.work_dir or os.environ.get("SEGLOG_BENCH_DIR")))
    json_path = out_dir / "results.json"
    doc["complete"] = False
    try:
        for bench in benchmarks:
            doc["benchmarks"].append(_run_one(bench, opts, root, prog))
            # Written after every benchmark, so an interrupted run keeps what it measured.
            json_path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
        doc["complete"] = True
    finally:
        suite.shutdown()
        import shutil

        shutil.rmtree(root, ignore_errors=True)
        prog.finish()
    finished = _dt.datetime.now(_dt.timezone.utc)
    doc["finished"] = finished.isoformat(timespec="seconds")
    doc["duration_s"] = round((finished - started).total_seconds(), 1)
    doc["load_average_end"] = load_average()
    doc["chart"] = None
    chart_path = out_dir / "ratios.png"
    chart_note = write_chart(doc, chart_path)
    if chart_note is None:
        doc["chart"] = str(chart_path)
    else:
        doc["chart_skipped"] = chart_note
    json_path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    (out_dir / "results.md").write_text(render_markdown(doc))
    out.write(render_table(doc))
    out.write(f"\nresults: {json_path}\n")
    out.write(f"chart:   {chart_path}\n" if chart_note is None else f"chart:   skipped ({chart_note})\n")
    out.flush()
    return doc


def _run_one(bench: Benchmark, opts: Options, root: Path, prog: BenchProgress) -> dict[str, Any]:
    params = bench.sizes(opts.quick, opts.records)
    reason = bench.unavailable() if bench.unavailable is not None else None
    load = load_average()
    if reason is not None:
        prog.note(f"{bench.name}: skipped ({reason})")
        prog.update(bench.name, 1)
        return {
            "name": bench.name,
            "title": bench.title,
            "group": bench.group,
            "unit": bench.unit,
            "params": params,
            "status": "skipped",
            "reason": reason,
            "contenders": [],
            "goals": [],
            "load_average": load,
        }
    missing: dict[str, str] = {}
    for c in bench.contenders:
        mod = c.missing()
        if mod is not None:
            missing[c.name] = f"module {mod!r} not found (pip install {c.pip or mod})"
    available = frozenset(c.name for c in bench.contenders if c.name not in missing)
    work_dir = root / bench.name
    work_dir.mkdir(parents=True, exist_ok=True)
    prog.update(f"{bench.name}: preparing")
    if not opts.quick:
        prog.note(f"{bench.name}: {bench.title} ({', '.join(f'{k}={v:,}' for k, v in params.items())})")
    t0 = time.monotonic()
    work: Work | None = None
    errors: dict[str, str] = {}
    samples: dict[str, list[float]] = {}
    loops: dict[str, int] = {}
    rss: dict[str, list[int]] = {}
    try:
        work = bench.prepare(params, work_dir, available)
        if work.timed_inside != bench.self_timed:
            raise AssertionError(
                f"{bench.name}: its work is timed_inside={work.timed_inside}, its registry entry self_timed={bench.self_timed}"
            )
        order = [c.name for c in bench.contenders]
        samples, loops = measure(
            work,
            order,
            opts.n_rounds,
            opts.sample_seconds,
            lambda label, frac: prog.update(f"{bench.name}: {label}", partial=frac),
            rss,
        )
    except Exception as exc:  # noqa: BLE001 - a failing benchmark is reported, the run goes on
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        errors = {c.name: tb for c in bench.contenders if c.name not in missing}
        samples = {}
        prog.note(f"{bench.name}: error: {tb}")
    finally:
        if work is not None and work.close is not None:
            try:
                work.close()
            except Exception:  # noqa: BLE001
                pass
    entry = report_benchmark(bench, params, work, samples, loops, missing, errors, rss)
    entry["seconds"] = round(time.monotonic() - t0, 2)
    entry["load_average"] = load
    prog.update(bench.name, 1)
    if not prog.tty:
        prog.note(f"[{prog.done}/{prog.total}] {bench.name} done in {entry['seconds']:.1f} s")
    return entry


# -------------------------------------------------------------------------------------------------
# The table
# -------------------------------------------------------------------------------------------------


def _si(x: float, unit: str) -> str:
    for div, p in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= div:
            return f"{x / div:.2f} {p}{unit}"
    return f"{x:.1f} {unit}"


def _dur(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    if s >= 1e-6:
        return f"{s * 1e6:.2f} µs"
    return f"{s * 1e9:.0f} ns"


def _mb(x: int | None) -> str:
    return "–" if x is None else f"{x / 1e6:.1f} MB"


def _ratio(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:.2f}×" if x < 10 else f"{x:.1f}×"


def goal_text(g: Mapping[str, Any]) -> str:
    m = g["measured"]
    if m is None:
        return f"goal {g['text']}: not measured"
    if g["kind"] == "ratio":
        shown = _ratio(m)
    elif g["kind"] == "max_seconds_per_item":
        shown = _dur(m)
    else:
        shown = _si(m, "/s")
    return f"goal {g['text']}: {shown} ({g['subject']}) — {'met' if g['met'] else 'NOT met'}"


def render_table(doc: Mapping[str, Any]) -> str:
    m = doc["machine"]
    lines = [
        f"seglog bench ({doc['mode']}, {doc['rounds']} rounds, medians; spread = IQR / median)",
        (
            f"machine: {m['cpu']}, {m['cores']} cores, {m['memory']}, {m['kernel']}, {m['python']}, "
            f"CRC-32C {m['crc32c_implementation']}"
        ),
        (
            f"load average at start {doc['load_average_start']}, at end {doc.get('load_average_end')} "
            "(a shared machine: read the ratios, not the absolute numbers)"
        ),
        "",
    ]
    header = f"  {'contender':34} {'median/call':>12} {'spread':>7} {'rate':>16} {'vs best peer':>13} {'vs limit':>9}"
    for b in doc["benchmarks"]:
        variant = f" [{b['variant']}]" if b.get("variant") else ""
        lines.append(f"{b['name']}{variant} — {b['title']}")
        if b["status"] == "skipped":
            lines.append(f"  skipped: {b['reason']}")
            lines.append("")
            continue
        with_rss = any("peak_rss_above_start_bytes" in c for c in b["contenders"])
        lines.append(header + (f" {'peak RSS +':>10}" if with_rss else ""))
        for c in b["contenders"]:
            name = c["name"] + (" *" if c["role"] == "limit" else "")
            if c["status"] != "ok":
                why = (
                    "not installed (pip install " + c["pip"] + ")"
                    if c["status"] == "not installed" and c.get("pip")
                    else c["status"] + (f": {c.get('reason')}" if c.get("reason") else "")
                )
                lines.append(f"  {name:34} {why[:90]}")
                continue
            spread = c["iqr_s"] / c["median_s"] * 100 if c["median_s"] else 0.0
            rate = _si(c["items_per_s"], b["unit"][:-1] + "/s" if b["unit"].endswith("s") else b["unit"])
            if b["unit"] == "bytes":
                rate = _si(c["items_per_s"], "B/s")
            lines.append(
                f"  {name:34} {_dur(c['median_s']):>12} {spread:6.1f}% {rate:>16} "
                f"{_ratio(c.get('vs_best_peer')):>13} {_ratio(c.get('vs_limit')):>9}"
                + (f" {_mb(c.get('peak_rss_above_start_bytes')):>10}" if with_rss else "")
            )
        for g in b["goals"]:
            lines.append("  " + goal_text(g))
        lines.append("")
    lines.append(
        "* the machine's limit for the same work (memcpy, write(), read() of the same bytes; bisect on an "
        "in-memory list for offset lookups, a read of the bytes its record walk covers for a timestamp "
        "lookup); ratios are rates (higher is faster). peak RSS +: the most the process's resident set grew above its size at the "
        "start of one timed call (the page cache aside; a file mapped into memory counts)."
    )
    return "\n".join(lines) + "\n"


def render_markdown(doc: Mapping[str, Any]) -> str:
    """One row per benchmark: seglog's primary contender, the best peer, the ratios, the goals
    (what the README's results section shows)."""
    m = doc["machine"]
    cmd = " ".join(doc["command"]) if doc.get("command") else "seglog bench"
    out = [
        f"`{cmd}` — {doc['started']}, {doc['rounds']} rounds, medians.",
        (
            f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory']}, {m['kernel']}, {m['python']}, "
            f"CRC-32C {m['crc32c_implementation']}. Load average (1/5/15 min) {doc['load_average_start']} at "
            f"the start, {doc.get('load_average_end')} at the end."
        ),
        "",
        "| benchmark | seglog | rate | best peer | its rate | ÷ best peer | ÷ limit | peak RSS + (seglog / best peer) | goal |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    # The streams lead: they are what users run; hot-batch rows follow, then the rest.
    rank = {"stream": 0, "hot batch": 1}
    for b in sorted(doc["benchmarks"], key=lambda b: rank.get(b.get("variant") or "", 2)):
        if b["status"] != "ok":
            why = b.get("reason") or next((c.get("reason") for c in b["contenders"] if c.get("reason")), "")
            out.append(f"| {b['name']} | {b['status']}: {why} | | | | | | | |")
            continue
        by = {c["name"]: c for c in b["contenders"]}
        prim = next((c for c in b["contenders"] if c["role"] == "seglog" and c["status"] == "ok"), None)
        if prim is None:
            continue
        unit = "B/s" if b["unit"] == "bytes" else b["unit"].rstrip("s") + "/s"
        peer = prim.get("best_peer")
        peer_rate = _si(by[peer]["items_per_s"], unit) if peer else "–"
        goals = (
            "; ".join(
                f"{g['text']}: {'met' if g['met'] else 'not met' if g['met'] is False else 'n/a'}" for g in b["goals"]
            )
            or "–"
        )
        mem = "–"
        if "peak_rss_above_start_bytes" in prim:
            theirs = by[peer].get("peak_rss_above_start_bytes") if peer else None
            mem = f"{_mb(prim['peak_rss_above_start_bytes'])} / {_mb(theirs)}"
        label = f"{b['name']} ({b['variant']})" if b.get("variant") else b["name"]
        out.append(
            f"| {label} | {prim['name']} | {_si(prim['items_per_s'], unit)} | {peer or '–'} | "
            f"{peer_rate} | {_ratio(prim.get('vs_best_peer'))} | {_ratio(prim.get('vs_limit'))} | {mem} | {goals} |"
        )
    return "\n".join(out) + "\n"


# -------------------------------------------------------------------------------------------------
# The chart
# -------------------------------------------------------------------------------------------------


def write_chart(doc: Mapping[str, Any], path: Path) -> str | None:
    """A PNG of each benchmark's primary seglog contender vs its best peer and vs the limit.
    Returns why it was skipped, or None when written."""
    try:
        import matplotlib
    except ImportError:
        return "matplotlib is not installed (pip install matplotlib, or seglog[bench])"
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = []
    for b in doc["benchmarks"]:
        if b["status"] != "ok":
            continue
        prim = next((c for c in b["contenders"] if c["role"] == "seglog" and c["status"] == "ok"), None)
        if prim is None:
            continue
        roles = {c["name"]: c["role"] for c in b["contenders"]}
        # Ratio goals against a peer go on the left panel, against the limit on the right.
        ticks = {"peer": None, "limit": None}
        for g in b["goals"]:
            if g["kind"] == "ratio" and roles.get(g["versus"]) in ticks and g["subject"] == prim["name"]:
                ticks[roles[g["versus"]]] = g["value"]
        verdicts = [g["met"] for g in b["goals"] if g["met"] is not None]
        color = "#999999" if not verdicts else ("#2a7" if all(verdicts) else "#d64")
        rows.append((b["name"], prim.get("vs_best_peer"), prim.get("vs_limit"), ticks, color))
    if not rows:
        return "no benchmark produced ratios"
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.35 * len(rows) + 1.8), sharey=True)
    rows = rows[::-1]
    ys = list(range(len(rows)))
    for ax, idx, role, title in (
        (axes[0], 1, "peer", "seglog ÷ best peer (rate)"),
        (axes[1], 2, "limit", "seglog ÷ machine limit (rate)"),
    ):
        vals = [r[idx] for r in rows]
        ax.barh(ys, [v if v is not None else 0 for v in vals], color=[r[4] for r in rows])
        ax.axvline(1.0, color="black", lw=0.8)
        ax.set_xscale("log")
        ax.set_title(title, fontsize=10)
        for y, v, r in zip(ys, vals, rows):
            if v is not None:
                ax.text(v, y, f" {v:.2g}×", va="center", fontsize=7)
            if r[3][role] is not None:
                ax.plot([r[3][role]], [y], marker="|", color="blue", markersize=12)
    axes[0].set_yticks(ys)
    axes[0].set_yticklabels([r[0] for r in rows], fontsize=8)
    m = doc["machine"]
    fig.suptitle(
        f"seglog bench ({doc['mode']}) — {m['cpu']}, {m['cores']} cores; "
        f"load {doc['load_average_start']} → {doc.get('load_average_end')}\n"
        "blue tick: goal; green: goals met, red: a goal missed, grey: no goal",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None
