"""The per-run report of ``docs/replication.md`` §9.8, as JSON and as text.

:func:`build` takes the history, the :class:`~tests.cluster.checker.CheckResult` and the run's
provenance. Fault and latency figures come from the history's ``nemesis`` and ``observe`` events:

* a fault is a ``nemesis`` invoke with ``value = {"fault", "target", "role", "led": [[topic, p]...]}``
  (``led``: the partitions the target led when the fault began);
* ``heal`` is a ``nemesis`` invoke with ``fault == "heal"``;
* ``observe`` events from a leader carry ``"isr"`` and ``"replicas"``.

Latencies (seconds): *failover* — a fault on a leader to the first ``ok`` send on a partition it
led, invoked after the fault; *ISR shrink* — a fault on a follower to the first observation of an
ISR without it; *ISR expand* — a ``heal``, or the end of a fault (the ``ok`` of its nemesis
operation), to the first observation of a full ISR, per partition not whole at that moment.

Counts (§9.8): truncation events with records and bytes (the nodes' logs, by kind), leader
epochs and changes, ISR shrinks/expands and unavailable seconds per partition
(:func:`state_counts`), epoch-cache entries per replica at the end, HW observations, and what
the node logs say (``node_log_counts`` in the provenance: leaderships taken, ISR changes
proposed, producer-snapshot loads, controller elections).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from tests.cluster.checker import HARD, SOFT, CheckResult
from tests.cluster.history import Op, pairs


def git_revision(root: str | os.PathLike[str] | None = None) -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5
        )
        rev = out.stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
        return rev + ("-dirty" if dirty else "") if rev else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def percentile(xs: Iterable[float], q: float) -> float | None:
    s = sorted(xs)
    if not s:
        return None
    k = min(len(s) - 1, max(0, int(round(q / 100.0 * (len(s) - 1)))))
    return round(s[k], 4)


def _summary(xs: list[float]) -> dict[str, Any]:
    return {
        "n": len(xs),
        "p50": percentile(xs, 50),
        "p99": percentile(xs, 99),
        "max": round(max(xs), 4) if xs else None,
    }


def latencies(ops: list[Op]) -> dict[str, dict[str, Any]]:
    faults = [o for o in ops if o.f == "nemesis" and o.type == "invoke"]
    ok_by_tp: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
    produce: list[float] = []
    for inv, done in pairs(ops):
        if inv.f == "send" and done is not None and done.type == "ok":
            tp = (str(inv.value["topic"]), int(done.value.get("partition", inv.value.get("partition", -1))))
            ok_by_tp[tp].append((inv.time, done.time))
            produce.append(done.time - inv.time)
    isr_obs: dict[tuple[str, int], list[tuple[float, list[int], list[int]]]] = defaultdict(list)
    for o in ops:
        if o.f == "observe" and o.type == "info" and o.value.get("role") == "leader" and "isr" in o.value:
            tp = (str(o.value["topic"]), int(o.value["partition"]))
            isr_obs[tp].append((o.time, list(o.value["isr"]), list(o.value.get("replicas") or [])))
    failover: list[float] = []
    shrink: list[float] = []
    expand: list[float] = []
    ends = {o.id: o.time for o in ops if o.f == "nemesis" and o.type == "ok"}
    for f in faults:
        kind = f.value.get("fault")
        end = ends.get(f.id)
        if kind != "heal" and end is not None:
            # ISR expand after the fault was undone, for partitions not whole at that moment
            for tp, obs in isr_obs.items():
                before = [(isr, reps) for t, isr, reps in obs if t <= end]
                if not before or not before[-1][1] or sorted(before[-1][0]) == sorted(before[-1][1]):
                    continue
                for t, isr, reps in obs:
                    if t > end and reps and sorted(isr) == sorted(reps):
                        expand.append(t - end)
                        break
        if kind == "heal":
            for tp, obs in isr_obs.items():
                for t, isr, reps in obs:
                    if t >= f.time and reps and sorted(isr) == sorted(reps):
                        expand.append(t - f.time)
                        break
            continue
        for topic, p in f.value.get("led") or []:
            for inv_t, done_t in ok_by_tp.get((topic, int(p)), []):
                if inv_t >= f.time:
                    failover.append(done_t - f.time)
                    break
        target = f.value.get("target")
        if f.value.get("role") == "follower" and isinstance(target, int):
            for tp, obs in isr_obs.items():
                isrs_before = [isr for t, isr, _ in obs if t < f.time]
                if not isrs_before or target not in isrs_before[-1]:
                    continue
                for t, isr, _ in obs:
                    if t >= f.time and target not in isr:
                        shrink.append(t - f.time)
                        break
    return {
        "failover_s": _summary(failover),
        "isr_shrink_s": _summary(shrink),
        "isr_expand_s": _summary(expand),
        "produce_latency_s": _summary(produce),
    }


def state_counts(ops: list[Op], min_isr: Mapping[str, int] | None = None) -> dict[str, Any]:
    """Figures from the observer's samples of the partition states in ZooKeeper (``observe``
    events with ``"zk": True``; each is a change of leader, epoch or ISR): per partition, the
    leader epochs seen and the changes of leader among them, ISR shrinks and expands, and the
    seconds *unavailable* — with no leader, and (for topics in ``min_isr``) with an ISR below
    min.insync.replicas, so acks=all writes are refused — from the first sample to the end of
    the history. Samples are 100 ms apart: changes undone faster can be missed."""
    end = ops[-1].time if ops else 0.0
    by_tp: dict[tuple[str, int], list[tuple[float, int, int, list[int]]]] = defaultdict(list)
    for o in ops:
        if o.f == "observe" and o.type == "info" and o.value.get("zk"):
            tp = (str(o.value["topic"]), int(o.value["partition"]))
            by_tp[tp].append((o.time, int(o.value["node"]), int(o.value["epoch"]), list(o.value.get("isr") or [])))
    out: dict[str, Any] = {}
    for (t, p), obs in sorted(by_tp.items()):
        epochs = {e for _, leader, e, _ in obs if leader >= 0}
        changes = sum(1 for a, b in zip(obs, obs[1:]) if b[1] >= 0 and b[1] != a[1])
        shrinks = sum(1 for a, b in zip(obs, obs[1:]) if set(b[3]) < set(a[3]))
        expands = sum(1 for a, b in zip(obs, obs[1:]) if set(b[3]) > set(a[3]))
        no_leader = under = 0.0
        need = (min_isr or {}).get(t)
        for k, (time_k, leader, _, isr) in enumerate(obs):
            span = (obs[k + 1][0] if k + 1 < len(obs) else end) - time_k
            if leader < 0:
                no_leader += span
            if need is not None and (leader < 0 or len(isr) < need):
                under += span
        d: dict[str, Any] = {
            "leader_epochs": len(epochs),
            "leader_changes": changes,
            "isr_shrinks": shrinks,
            "isr_expands": expands,
            "no_leader_s": round(no_leader, 2),
        }
        if need is not None:
            d["under_min_isr_s"] = round(under, 2)
        out[f"{t}-{p}"] = d
    return out


def build(
    ops: Iterable[Op], result: CheckResult, provenance: Mapping[str, Any], min_isr: Mapping[str, int] | None = None
) -> dict[str, Any]:
    ops = list(ops)
    faults: Counter[str] = Counter()
    for o in ops:
        if o.f == "nemesis" and o.type == "invoke" and o.value.get("fault") != "heal":
            faults[f"{o.value.get('fault')}:{o.value.get('role', 'any')}"] += 1
    by_type: Counter[str] = Counter()
    for k, n in faults.items():
        by_type[k.split(":")[0]] += n
    sends = dict(result.stats.get("sends", {}))
    duration = float(provenance.get("duration_s") or (ops[-1].time if ops else 0.0))
    lat = latencies(ops)
    return {
        "provenance": {
            "host": platform.node(),
            "python": platform.python_version(),
            "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **dict(provenance),
        },
        "faults": {"by_type": dict(by_type), "by_type_and_role": dict(faults), "total": sum(faults.values())},
        "operations": {
            "send": {k: sends.get(k, 0) for k in ("invoke", "ok", "fail", "info")},
            "polls": result.stats.get("polls", 0),
            "records_read": result.stats.get("records_read", 0),
        },
        "safety": {k: result.counts.get(k, 0) for k in HARD},
        "valid": result.valid,
        "reported": {k: result.counts.get(k, 0) for k in SOFT},
        "examples": {k: v for k, v in result.examples.items() if v},
        "per_partition": result.per_partition,
        "availability": {
            **lat,
            "unseen_zero_at_s": result.stats.get("unseen_zero_at"),
            "unseen_series": result.stats.get("unseen_series", []),
        },
        "performance": {"acked_per_s": round(sends.get("ok", 0) / duration, 2) if duration > 0 else None},
        "counts": {
            "truncations": result.stats.get("truncations", {}),
            "final_records": result.stats.get("final_records", {}),
            "epoch_cache_entries": result.stats.get("epoch_cache_entries", {}),
            "hw_observations": result.stats.get("hw_observations", {}),
            "partitions": state_counts(ops, min_isr),
            "node_logs": dict(provenance.get("node_log_counts") or {}),
        },
    }


def text(report: Mapping[str, Any]) -> str:
    p = report["provenance"]
    lines = [
        f"seglog cluster run: profile {p.get('profile')} seed {p.get('seed')} rev {p.get('revision')} "
        f"duration {p.get('duration_s')} s",
        f"result: {'VALID' if report['valid'] else 'INVALID'}",
    ]
    f = report["faults"]
    lines.append(
        f"faults ({f['total']}): " + (", ".join(f"{k} {v}" for k, v in sorted(f["by_type_and_role"].items())) or "none")
    )
    s = report["operations"]["send"]
    lines.append(
        f"sends: invoke {s['invoke']} ok {s['ok']} fail {s['fail']} info {s['info']}; "
        f"polls {report['operations']['polls']}, records read {report['operations']['records_read']}"
    )
    lines.append("safety (all must be 0): " + ", ".join(f"{k} {v}" for k, v in report["safety"].items()))
    lines.append("reported: " + ", ".join(f"{k} {v}" for k, v in report["reported"].items()))
    a = report["availability"]
    for k in ("failover_s", "isr_shrink_s", "isr_expand_s", "produce_latency_s"):
        v = a[k]
        lines.append(f"{k}: n {v['n']} p50 {v['p50']} p99 {v['p99']} max {v['max']}")
    lines.append(f"unseen = 0 at {a['unseen_zero_at_s']} s; acked/s {report['performance']['acked_per_s']}")
    c = report["counts"]
    lines.append(f"truncations: {c['truncations']}")
    nl = c.get("node_logs") or {}
    lines.append("node logs: " + (", ".join(f"{k} {v}" for k, v in sorted(nl.items())) or "none"))
    for tp, d in sorted((c.get("partitions") or {}).items()):
        lines.append(
            f"  {tp}: "
            + ", ".join(f"{k} {v}" for k, v in d.items())
            + f", epoch-cache entries {(c.get('epoch_cache_entries') or {}).get(tp, {})}"
        )
    lines.append(f"HW observations: {c.get('hw_observations', {})}")
    for k, ex in report.get("examples", {}).items():
        for e in ex:
            lines.append(f"  {k}: {e}")
    return "\n".join(lines) + "\n"


def write(report: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    """``path`` gets the JSON; ``path`` with ``.txt`` in place of its suffix gets the text."""
    path = os.fspath(path)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=2, sort_keys=False)
        fh.write("\n")
    with open(os.path.splitext(path)[0] + ".txt", "w", encoding="utf-8") as fh:
        fh.write(text(report))
