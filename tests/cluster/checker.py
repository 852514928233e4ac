"""The safety checker of ``docs/replication.md`` §9.5 over one run: the history (see
:mod:`tests.cluster.history`) plus the final logs of every replica, read from disk with seglog's
own readers (:func:`read_replica`).

Properties and the counters they feed (every ``HARD`` counter must be zero):

1. ``lost`` — an ``ok`` send missing from the final log at its acked offset (or another value
   there); ``lost_unpolled`` — Jepsen's form: a poll saw offset b, yet an ``ok`` send at a <= b
   was never polled.
2. ``inconsistent_offsets`` — one (partition, offset) with two values across acks, polls and the
   final log.
3. ``duplicates`` — a value of an idempotent client more than once; ``nonidempotent_duplicates``
   is the same count for the other clients (allowed, reported).
4. ``poll_skip`` / ``nonmonotonic`` — a consumer's successive polls on a partition jump over an
   offset or go backwards without a seek; ``reordered`` — an idempotent client's values out of
   sequence order in the final log.
5. ``read_then_vanish`` — a polled (partition, offset, value) not in the final log;
   ``read_above_hw`` — a polled record at or above the HW the serving replica reported.
6. ``aborted_reads`` — a value whose send ``fail``ed appears in a poll or the final log.
7. ``divergent_replicas`` / ``epoch_cache_mismatch`` / ``hw_not_at_leo`` — replicas of a
   partition differ after quiescence (batches: offsets, leader epoch, producer id/epoch/seq,
   count, CRC; epoch caches), or a replica's HW is not its LEO.
8. ``split_leader_epochs`` (two leaders in one epoch), ``hw_regressions`` (a leader's HW went
   back within its epoch: in ``observe`` events carrying ``hw``, and in one consumer's
   successive polls answered by the same leader in the same epoch — a poll's ``served``),
   ``epoch_cache_violations`` (not strictly increasing in epoch and start offset),
   ``truncations_below_hw`` (a replication truncation below the replica's HW; truncations by
   recovery at startup, ``kind == "recovery"``, cut what a crash lost and are only counted) —
   from ``observe``, ``poll`` and ``truncate`` events.
9. ``unseen`` — ``ok`` sends never polled (liveness; reported, with the count over time).
10. ``control_lost`` — property 1 on the positive-control topics (expected > 0 under leader kills).
11. ``stale_changes_accepted`` — a replayed partition-state change (F8: an AlterPartition request
    older than the state, or an earlier ZooKeeper write) that was applied; from the ``nemesis``
    operations' completions (``stale_accepted``).

Values are ``"<client>:<n>:"`` padded with dots (:func:`encode_value`); the history stores the
unpadded ``"<client>:<n>"`` (:func:`value_key`).
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tests.cluster.history import Op, pairs

HARD = (
    "lost",
    "lost_unpolled",
    "inconsistent_offsets",
    "duplicates",
    "poll_skip",
    "nonmonotonic",
    "reordered",
    "read_then_vanish",
    "read_above_hw",
    "aborted_reads",
    "divergent_replicas",
    "epoch_cache_mismatch",
    "hw_not_at_leo",
    "split_leader_epochs",
    "hw_regressions",
    "epoch_cache_violations",
    "truncations_below_hw",
    "stale_changes_accepted",
)
SOFT = ("unseen", "nonidempotent_duplicates", "control_lost")
EXAMPLES = 5

TP = tuple[str, int]


def encode_value(client: str, n: int, size: int = 64) -> bytes:
    if ":" in client:
        raise ValueError(f"client name {client!r} must not contain ':'")
    return f"{client}:{n}:".encode().ljust(size, b".")


def value_key(raw: bytes | str | None) -> str:
    """``"client:n"`` of an encoded value (anything else is returned as text)."""
    if raw is None:
        return ""
    s = raw.decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray, memoryview)) else raw
    parts = s.split(":")
    return f"{parts[0]}:{parts[1]}" if len(parts) >= 3 else s.rstrip(".")


def client_of(key: str) -> str:
    return key.split(":", 1)[0]


def seq_of(key: str) -> int:
    try:
        return int(key.split(":", 2)[1])
    except (IndexError, ValueError):
        return -1


@dataclasses.dataclass(frozen=True, slots=True)
class Batch:
    base_offset: int
    last_offset: int
    leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    count: int
    crc: int


@dataclasses.dataclass(frozen=True, slots=True)
class ReplicaState:
    """What one replica's directory holds: records as (offset, value key), batch fingerprints,
    the epoch cache, LEO and the checkpointed HW (None when not checkpointed)."""

    node: int
    topic: str
    partition: int
    records: tuple[tuple[int, str], ...]
    batches: tuple[Batch, ...]
    epochs: tuple[tuple[int, int], ...]
    leo: int
    hw: int | None

    def epochs_with_data(self) -> tuple[tuple[int, int], ...]:
        """The epoch cache without a last epoch that holds no record yet (a leader records its
        epoch at election; followers learn it from the first batch)."""
        e = self.epochs
        if e and e[-1][1] >= self.leo:
            e = e[:-1]
        return e


def read_replica(partition_dir: str | os.PathLike[str], node: int) -> ReplicaState:
    """Read one partition directory with seglog's reader, changing no file. The HW comes from
    the parent's ``replication-offset-checkpoint``."""
    from seglog.storage.checkpoints import OffsetCheckpointFile
    from seglog.storage.log import Log
    from seglog.storage.records import decode_records

    d = os.fspath(partition_dir)
    name = os.path.basename(d.rstrip("/"))
    topic, _, part = name.rpartition("-")
    log = Log.open(d, read_only=True)
    try:
        records: list[tuple[int, str]] = []
        batches: list[Batch] = []
        pos = log.log_start_offset
        leo = log.log_end_offset
        while pos < leo:
            data = log.read(pos, 1 << 22, upper_bound="log_end").to_bytes()
            if not data:
                break
            i = 0
            while i + 12 <= len(data):
                length = int.from_bytes(data[i + 8 : i + 12], "big")
                b = data[i : i + 12 + length]
                if len(b) < 12 + length:
                    break
                base = int.from_bytes(b[0:8], "big")
                last = base + int.from_bytes(b[23:27], "big")
                batches.append(
                    Batch(
                        base,
                        last,
                        int.from_bytes(b[12:16], "big", signed=True),
                        int.from_bytes(b[43:51], "big", signed=True),
                        int.from_bytes(b[51:53], "big", signed=True),
                        int.from_bytes(b[53:57], "big", signed=True),
                        int.from_bytes(b[57:61], "big"),
                        int.from_bytes(b[17:21], "big"),
                    )
                )
                for r in decode_records(b):
                    records.append((r.offset, value_key(r.value)))
                pos = last + 1
                i += 12 + length
        epochs = tuple(log.epoch_cache.entries())
    finally:
        log.close()
    hw: int | None = None
    try:
        hw = (
            OffsetCheckpointFile(os.path.join(os.path.dirname(d.rstrip("/")), "replication-offset-checkpoint"))
            .read()
            .get((topic, int(part)))
        )
    except Exception:  # noqa: BLE001 - a missing or torn checkpoint leaves the HW unknown
        hw = None
    return ReplicaState(node, topic, int(part), tuple(records), tuple(batches), epochs, leo, hw)


@dataclasses.dataclass
class CheckResult:
    counts: dict[str, int]
    per_partition: dict[str, dict[str, int]]
    examples: dict[str, list[str]]
    stats: dict[str, Any]

    @property
    def valid(self) -> bool:
        return all(self.counts.get(k, 0) == 0 for k in HARD)

    def violations(self) -> dict[str, int]:
        return {k: v for k, v in self.counts.items() if k in HARD and v}


class _Acc:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter(dict.fromkeys(HARD + SOFT, 0))
        self.per: dict[str, Counter[str]] = defaultdict(Counter)
        self.examples: dict[str, list[str]] = defaultdict(list)

    def add(self, key: str, tp: TP | None, what: str, n: int = 1) -> None:
        self.counts[key] += n
        if tp is not None:
            self.per[f"{tp[0]}-{tp[1]}"][key] += n
        if len(self.examples[key]) < EXAMPLES:
            self.examples[key].append(what)


def _reference(reps: Sequence[ReplicaState], leader: int | None) -> ReplicaState:
    for r in reps:
        if r.node == leader:
            return r
    return max(reps, key=lambda r: (r.leo, -r.node))


def check(
    ops: Iterable[Op],
    replicas: Mapping[TP, Sequence[ReplicaState]],
    *,
    idempotent_clients: Iterable[str],
    control_topics: Iterable[str] = ("control",),
    final_leaders: Mapping[TP, int | None] | None = None,
) -> CheckResult:
    """Check every property above. ``replicas`` holds each partition's replica states (an empty
    list for a partition means nothing was read: every ok send on it counts as lost)."""
    ops = list(ops)
    idem = set(idempotent_clients)
    control = set(control_topics)
    final_leaders = dict(final_leaders or {})
    acc = _Acc()

    # -- the history ------------------------------------------------------------------------------
    ok_sends: list[tuple[TP, int, str, float]] = []
    failed: dict[str, TP] = {}
    info_sends = 0
    send_counts = Counter[str]()
    polls: list[Op] = []
    for inv, done in pairs(ops):
        if inv.f == "send":
            send_counts["invoke"] += 1
            tp = (str(inv.value["topic"]), int(inv.value.get("partition", -1)))
            key = str(inv.value["value"])
            if done is None or done.type == "info":
                info_sends += 1
                send_counts["info"] += 1
            elif done.type == "ok":
                send_counts["ok"] += 1
                tp = (tp[0], int(done.value["partition"]))
                ok_sends.append((tp, int(done.value["offset"]), key, done.time))
            elif done.type == "fail":
                send_counts["fail"] += 1
                failed[key] = tp
        elif inv.f == "poll" and done is not None and done.type == "ok":
            polls.append(done)

    # offset -> values seen, per partition, from every source
    seen: dict[TP, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    for tp, off, key, _t in ok_sends:
        seen[tp][off].add(key)
    polled: dict[TP, dict[int, str]] = defaultdict(dict)
    polled_at: dict[TP, dict[int, float]] = defaultdict(dict)
    polled_values: set[str] = set()
    records_read = 0
    last: dict[tuple[str, TP], int] = {}
    for p in polls:
        tp = (str(p.value["topic"]), int(p.value["partition"]))
        start = p.value.get("from")
        recs = p.value.get("records") or []
        records_read += len(recs)
        ck = (p.process, tp)
        if start is not None and ck in last and int(start) != last[ck] + 1:
            del last[ck]  # a seek or re-assign: ordering restarts
        prev = last.get(ck, None if start is None else int(start) - 1)
        for rec in recs:
            off, key = int(rec[0]), str(rec[1])
            hw = rec[3] if len(rec) > 3 else None
            if prev is not None:
                if off <= prev:
                    acc.add("nonmonotonic", tp, f"{p.process} polled {tp} offset {off} after {prev}")
                elif off > prev + 1:
                    acc.add(
                        "poll_skip", tp, f"{p.process} polled {tp} offset {off} after {prev} (skipped {off - prev - 1})"
                    )
            prev = off if prev is None else max(prev, off)
            if hw is not None and off >= int(hw):
                acc.add("read_above_hw", tp, f"{p.process} got {tp}@{off} with HW {hw}")
            seen[tp][off].add(key)
            if off not in polled[tp]:
                polled[tp][off] = key
                polled_at[tp][off] = p.time
            polled_values.add(key)
        if prev is not None:
            last[ck] = prev

    # -- the final logs ---------------------------------------------------------------------------
    final: dict[TP, dict[int, str]] = {}
    for tp, reps in replicas.items():
        if not reps:
            final[tp] = {}
            continue
        ref = _reference(reps, final_leaders.get(tp))
        final[tp] = dict(ref.records)
        for off, key in ref.records:
            seen[tp][off].add(key)
        # 7: convergence
        if tp[0] not in control:
            for r in reps:
                if r is ref:
                    continue
                if r.batches != ref.batches:
                    acc.add(
                        "divergent_replicas",
                        tp,
                        f"node {r.node} differs from node {ref.node} on {tp}: "
                        f"{_first_difference(r.batches, ref.batches)}",
                    )
                if r.epochs_with_data() != ref.epochs_with_data():
                    acc.add(
                        "epoch_cache_mismatch",
                        tp,
                        f"node {r.node} epochs {list(r.epochs_with_data())} vs "
                        f"node {ref.node} {list(ref.epochs_with_data())} on {tp}",
                    )
            for r in reps:
                if r.hw is not None and r.hw != r.leo:
                    acc.add("hw_not_at_leo", tp, f"node {r.node} {tp}: HW {r.hw} != LEO {r.leo}")
        # 8: epoch cache strictly increasing
        for r in reps:
            for (e0, s0), (e1, s1) in zip(r.epochs, r.epochs[1:]):
                if not (e1 > e0 and s1 > s0):
                    acc.add("epoch_cache_violations", tp, f"node {r.node} {tp}: ({e0},{s0}) then ({e1},{s1})")

    # 1 + 10: acked writes in the final log at their offsets
    for tp, off, key, _t in ok_sends:
        if tp not in final:
            continue
        got = final[tp].get(off)
        if got != key:
            what = f"{key} acked at {tp}@{off}, final log has {got!r}"
            acc.add("control_lost" if tp[0] in control else "lost", tp, what)
    # 1, Jepsen form: polled beyond an acked offset that was never polled
    for tp, off, key, _t in ok_sends:
        if tp[0] in control:
            continue
        top = max(polled[tp], default=-1)
        if off <= top and off not in polled[tp]:
            acc.add("lost_unpolled", tp, f"{key} acked at {tp}@{off}, never polled though {top} was")
    # 2: one value per offset
    for tp, offs in seen.items():
        if tp[0] in control:
            continue
        for off, keys in offs.items():
            if len(keys) > 1:
                acc.add("inconsistent_offsets", tp, f"{tp}@{off} has {sorted(keys)}")
    # 5: polled records stay
    for tp, polled_offs in polled.items():
        if tp[0] in control or tp not in final:
            continue
        for off, key in polled_offs.items():
            if final[tp].get(off) != key:
                acc.add("read_then_vanish", tp, f"{key} polled at {tp}@{off}, final log has {final[tp].get(off)!r}")
    # 3 + 4b: duplicates and order of idempotent clients in the final logs
    where: dict[str, list[tuple[TP, int]]] = defaultdict(list)
    for tp, recs in final.items():
        if tp[0] in control:
            continue
        last_seq: dict[str, int] = {}
        for off in sorted(recs):
            key = recs[off]
            where[key].append((tp, off))
            c = client_of(key)
            if c in idem:
                n = seq_of(key)
                if c in last_seq and n < last_seq[c]:  # equal is a duplicate (property 3)
                    acc.add("reordered", tp, f"{key} at {tp}@{off} after {c}:{last_seq[c]}")
                last_seq[c] = max(n, last_seq.get(c, n))
    for key, locs in where.items():
        if len(locs) > 1:
            k = "duplicates" if client_of(key) in idem else "nonidempotent_duplicates"
            acc.add(k, locs[0][0], f"{key} at {locs}", len(locs) - 1)
    # 6: aborted reads
    for key, tp in failed.items():
        if tp[0] in control:
            continue
        if key in polled_values or key in where:
            acc.add("aborted_reads", tp, f"{key} failed definitely, yet appears at {where.get(key) or 'a poll'}")

    # 8: from the continuous observations
    leaders: dict[tuple[TP, int], set[int]] = defaultdict(set)
    hw_last: dict[tuple[TP, int, int], int] = {}
    # A consumer's polls are sequential, so the HWs one leader reports to it within an epoch
    # are in the leader's own order; across consumers, responses may be logged out of order.
    hw_polled: dict[tuple[str, TP, int, int], int] = {}
    hw_observations = Counter[str]()
    truncations = Counter[str]()
    for op in ops:
        if op.f == "nemesis" and op.type == "ok" and op.value.get("stale_accepted"):
            n = int(op.value["stale_accepted"])
            acc.add(
                "stale_changes_accepted",
                None,
                f"{n} stale change(s) applied at {op.time:.1f} s: "
                f"{[r for r in op.value.get('requests', []) if r.get('stale') and r.get('response') == 'NONE']} "
                f"{[z for z in op.value.get('zk', []) if 'accepted' in z.values()]}",
                n,
            )
        elif op.f == "poll" and op.type == "ok" and op.value.get("served"):
            v = op.value
            tp = (str(v["topic"]), int(v["partition"]))
            for node, epoch, hw in v["served"]:
                hw_observations["polls"] += 1
                k4 = (op.process, tp, int(node), int(epoch))
                if k4 in hw_polled and int(hw) < hw_polled[k4]:
                    acc.add(
                        "hw_regressions",
                        tp,
                        f"leader {node} of {tp} epoch {epoch} told {op.process} HW {hw_polled[k4]}, then {hw}",
                    )
                hw_polled[k4] = max(int(hw), hw_polled.get(k4, int(hw)))
        elif op.f == "observe" and op.type == "info":
            v = op.value
            tp = (str(v["topic"]), int(v["partition"]))
            node, epoch = int(v["node"]), int(v["epoch"])
            if v.get("role") == "leader":
                leaders[(tp, epoch)].add(node)
                if v.get("hw") is not None:
                    hw_observations["observe"] += 1
                    k3 = (tp, epoch, node)
                    hw = int(v["hw"])
                    if k3 in hw_last and hw < hw_last[k3]:
                        acc.add("hw_regressions", tp, f"leader {node} of {tp} epoch {epoch}: HW {hw_last[k3]} -> {hw}")
                    hw_last[k3] = max(hw, hw_last.get(k3, hw))
        elif op.f == "truncate" and op.type == "info":
            v = op.value
            tp = (str(v["topic"]), int(v["partition"]))
            kind = str(v.get("kind") or "follower")
            truncations["events"] += 1
            truncations["records"] += int(v.get("records") or 0)
            truncations["bytes"] += int(v.get("bytes") or 0)
            truncations[f"{kind}_events"] += 1
            below = v.get("hw") is not None and int(v["to"]) < int(v["hw"])
            if below and kind == "recovery":
                truncations["recovery_below_hw"] += 1
            elif below and tp[0] not in control:
                acc.add(
                    "truncations_below_hw", tp, f"node {v.get('node')} truncated {tp} to {v['to']} below HW {v['hw']}"
                )
    for (tp, epoch), nodes in leaders.items():
        if len(nodes) > 1 and tp[0] not in control:
            acc.add("split_leader_epochs", tp, f"{tp} epoch {epoch} led by {sorted(nodes)}")

    # 9: unseen, now and over time
    unseen_series: list[tuple[float, int]] = []
    events: list[tuple[float, int]] = []
    for tp, off, key, t in ok_sends:
        if tp[0] in control:
            continue
        events.append((t, +1))
        pt = polled_at[tp].get(off)
        if pt is None:
            acc.add("unseen", tp, f"{key} acked at {tp}@{off}, never polled")
        else:
            events.append((max(pt, t), -1))
    events.sort()
    level = 0
    for t, d in events:
        level += d
        if not unseen_series or t - unseen_series[-1][0] >= 1.0:
            unseen_series.append((round(t, 3), level))
        else:
            unseen_series[-1] = (unseen_series[-1][0], level)
    zero_at = None
    for t, lvl in unseen_series:
        if lvl == 0 and zero_at is None:
            zero_at = t
        elif lvl != 0:
            zero_at = None

    stats = {
        "sends": dict(send_counts),
        "polls": len(polls),
        "records_read": records_read,
        "truncations": dict(truncations),
        "hw_observations": dict(hw_observations),
        "unseen_series": unseen_series,
        "unseen_zero_at": zero_at,
        "final_records": {f"{t}-{p}": len(r) for (t, p), r in final.items()},
        "epoch_cache_entries": {
            f"{t}-{p}": {str(r.node): len(r.epochs) for r in reps} for (t, p), reps in replicas.items()
        },
    }
    return CheckResult(dict(acc.counts), {k: dict(v) for k, v in acc.per.items()}, dict(acc.examples), stats)


def _first_difference(a: Sequence[Batch], b: Sequence[Batch]) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"batch {i}: {x} vs {y}"
    return f"{len(a)} batches vs {len(b)}"
