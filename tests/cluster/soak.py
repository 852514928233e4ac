"""Long randomised runs (``docs/replication.md`` §9.7) with one report per run and an aggregate::

    python -m tests.cluster.soak --profile mixed --profile power --seeds 1,2,3 --seconds 120 \\
        --out soak/report.json

Each run writes ``<out dir>/<profile>-<seed>/`` (history.jsonl, node dirs, report.json and
report.txt); the aggregate goes to ``--out`` (JSON) and beside it as text. Exit status 1 if any
run broke a safety property. ``--profile all`` runs every profile.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from typing import Any

from tests.cluster.report import text
from tests.cluster.run import PROFILES, RunConfig, run


def aggregate(reports: list[dict[str, Any]]) -> dict[str, Any]:
    safety: Counter[str] = Counter()
    faults: Counter[str] = Counter()
    sends: Counter[str] = Counter()
    reported: Counter[str] = Counter()
    for r in reports:
        safety.update(r["safety"])
        faults.update(r["faults"]["by_type_and_role"])
        sends.update(r["operations"]["send"])
        reported.update(r["reported"])
    return {
        "runs": [
            {
                "profile": r["provenance"]["profile"],
                "seed": r["provenance"]["seed"],
                "valid": r["valid"],
                "faults": r["faults"]["total"],
                "ok": r["operations"]["send"]["ok"],
                "violations": {k: v for k, v in r["safety"].items() if v},
                "control_lost": r["reported"]["control_lost"],
                "failover_p99_s": r["availability"]["failover_s"]["p99"],
            }
            for r in reports
        ],
        "valid": all(r["valid"] for r in reports),
        "safety": dict(safety),
        "faults": dict(faults),
        "sends": dict(sends),
        "reported": dict(reported),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.cluster.soak", description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", action="append", help=f"one of {', '.join(sorted(PROFILES))} or all (repeatable)")
    ap.add_argument("--seeds", default="1", help="comma-separated seeds (default 1)")
    ap.add_argument("--seconds", type=float, default=120, help="fault phase per run (default 120)")
    ap.add_argument("--warmup", type=float, default=10)
    ap.add_argument("--mean-gap", type=float, default=5)
    ap.add_argument("--out", default="soak/report.json", help="aggregate report path (JSON; .txt beside it)")
    args = ap.parse_args(argv)
    profiles = args.profile or ["mixed"]
    if "all" in profiles:
        profiles = sorted(PROFILES)
    for p in profiles:
        if p not in PROFILES:
            ap.error(f"unknown profile {p!r}; expected one of {', '.join(sorted(PROFILES))} or all")
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    base = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(base, exist_ok=True)
    reports = []
    for profile in profiles:
        for seed in seeds:
            t0 = time.monotonic()
            cfg = RunConfig(
                profile=profile, seed=seed, warmup_s=args.warmup, fault_s=args.seconds, mean_gap_s=args.mean_gap
            )
            rep = run(os.path.join(base, f"{profile}-{seed}"), cfg, log=lambda s: print(s, flush=True))
            print(text(rep), flush=True)
            print(f"({profile} seed {seed}: {time.monotonic() - t0:.0f} s)", flush=True)
            reports.append(rep)
    agg = aggregate(reports)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(agg, f, indent=2)
    with open(os.path.splitext(args.out)[0] + ".txt", "w", encoding="utf-8") as f:
        for r in reports:
            f.write(text(r) + "\n")
        f.write(f"ALL VALID: {agg['valid']}\n")
    return 0 if agg["valid"] else 1


if __name__ == "__main__":
    sys.exit(main())
