"""``seglog bench``: the benchmark suite, seglog beside its peers."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from seglog.cli.common import CliError

__all__ = ["run_bench"]


def run_bench(args: argparse.Namespace) -> int:
    """The benchmark suite: seglog beside its peers on the same work, side by side."""
    # lazy: the benchmark suite loads only for this command (keeps start-up fast)
    from seglog.benchmarks import BENCHMARKS, NOT_YET
    from seglog.benchmarks.runner import Options, SelectionError, estimate_seconds, run, select

    try:
        chosen = select(BENCHMARKS, args.only)
    except SelectionError as exc:
        raise CliError(str(exc)) from None
    if args.list:
        for b in BENCHMARKS:
            goals = "; ".join(g.text for g in b.goals)
            print(f"{b.name:18} {b.title}" + (f"  [goal {goals}]" if goals else ""))
        for name, why in NOT_YET.items():
            print(f"{name:18} not available: {why}")
        return 0
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CliError(f"--out {args.out}: exists and is not a directory")
    opts = Options(quick=args.quick, rounds=args.rounds, records=args.records, work_dir=args.work_dir)
    if args.work_dir is not None and not os.path.isdir(args.work_dir):
        raise CliError(f"--work-dir {args.work_dir}: no such directory")
    est = estimate_seconds(chosen, opts)
    if args.quick:
        mode = "--quick: small sizes, 1 M records for the streams; about ten minutes plus Spark's start-up"
    else:
        sizes = (
            f"{args.records:,} records where sized in records"
            if args.records
            else "10 M records for the streams, append/read/poll_columns and Spark"
        )
        mode = (
            f"full sizes ({sizes}): roughly {max(1, round(est / 60))} min (as measured on a "
            "shared 2-core machine); --quick runs in about ten minutes"
        )
    sys.stderr.write(f"seglog bench: {len(chosen)} benchmarks, {opts.n_rounds} rounds; {mode}\n")
    argv = ["seglog", *(args.argv or ["bench"])]
    doc = run(chosen, opts, out, argv=argv)
    broken = [
        b["name"]
        for b in doc["benchmarks"]
        if b["status"] == "error" or any(c["status"] == "error" for c in b["contenders"])
    ]
    if broken:
        raise CliError(f"{len(broken)} benchmark(s) failed: {', '.join(broken)} (see {out / 'results.json'})")
    return 0
