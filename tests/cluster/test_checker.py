"""The checker on crafted histories: a clean history passes, and for each property of
``docs/replication.md`` §9.5 a history that breaks it (and only it, where the properties allow) is
caught by the counter that property feeds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from seglog.storage.log import Log
from seglog.storage.records import encode_batch
from tests.cluster.checker import HARD, Batch, ReplicaState, check, encode_value, read_replica, value_key
from tests.cluster.history import History
from tests.cluster.scenario import IDEM
from tests.cluster.scenario import SAFE as SAFE_TOPIC

SAFE = (SAFE_TOPIC, 0)


class Run:
    """A hand-written run: sends, polls and replica contents."""

    def __init__(self) -> None:
        self.h = History()
        self.logs: dict[tuple[str, int], dict[int, list[tuple[int, str]]]] = {}

    def send(
        self,
        client: str,
        n: int,
        outcome: str = "ok",
        offset: int | None = None,
        tp: tuple[str, int] = SAFE,
        error: str = "X",
    ) -> str:
        key = f"{client}:{n}"
        i = self.h.invoke(client, "send", {"topic": tp[0], "partition": tp[1], "value": key})
        if outcome == "ok":
            self.h.ok(i, {"partition": tp[1], "offset": offset})
        elif outcome == "fail":
            self.h.fail(i, error)
        elif outcome == "info":
            self.h.info(i, error)
        return key

    def poll(
        self,
        consumer: str,
        start: int,
        records: list[tuple[int, str]],
        tp: tuple[str, int] = SAFE,
        hw: int | None = None,
    ) -> None:
        i = self.h.invoke(consumer, "poll", {"topic": tp[0], "partition": tp[1], "from": start})
        self.h.ok(i, {"records": [[o, v, 0, hw] for o, v in records]})

    def replica(
        self,
        node: int,
        records: list[tuple[int, str]],
        tp: tuple[str, int] = SAFE,
        *,
        epochs: tuple[tuple[int, int], ...] = ((0, 0),),
        hw: int | None = None,
        epoch_of: int = 0,
    ) -> None:
        self.logs.setdefault(tp, {})[node] = records
        self._extra = getattr(self, "_extra", {})
        self._extra[(tp, node)] = (epochs, hw, epoch_of)

    def check(self, **kw: object):
        reps = {}
        for tp, by_node in self.logs.items():
            out = []
            for node, recs in by_node.items():
                epochs, hw, e = self._extra[(tp, node)]
                leo = (max(o for o, _ in recs) + 1) if recs else 0
                batches = tuple(Batch(o, o, e, 7, 0, o, 1, hash(v) & 0xFFFFFFFF) for o, v in recs)
                out.append(
                    ReplicaState(node, tp[0], tp[1], tuple(recs), batches, epochs, leo, leo if hw is None else hw)
                )
            reps[tp] = out
        return check(self.h.ops, reps, idempotent_clients=IDEM, **kw)  # type: ignore[arg-type]


def clean_run() -> Run:
    r = Run()
    log = []
    for n in range(5):
        k = r.send("p0", n, offset=2 * n)
        k2 = r.send("p1", n, offset=2 * n + 1)
        log += [(2 * n, k), (2 * n + 1, k2)]
    r.send("p0", 99, "fail", error="NOT_ENOUGH_REPLICAS")
    r.send("p1", 99, "info", error="REQUEST_TIMED_OUT")  # indeterminate and absent: fine
    r.poll("c0", 0, log[:4], hw=10)
    r.poll("c0", 4, log[4:], hw=10)
    r.poll("c1", 0, log, hw=10)
    for node in range(3):
        r.replica(node, log)
    return r


def only(result, key: str) -> None:
    bad = result.violations()
    assert key in bad, f"{key} not detected; counts {result.counts}"
    return None


def test_clean_history_passes() -> None:
    res = clean_run().check()
    assert res.valid, res.violations()
    assert all(res.counts[k] == 0 for k in HARD)
    assert res.counts["unseen"] == 0
    assert res.stats["sends"] == {"invoke": 12, "ok": 10, "fail": 1, "info": 1}
    assert res.stats["records_read"] == 20


def test_indeterminate_send_that_landed_is_fine() -> None:
    r = Run()
    k0 = r.send("p0", 0, offset=0)
    k1 = r.send("p0", 1, "info", error="NOT_ENOUGH_REPLICAS_AFTER_APPEND")
    r.poll("c0", 0, [(0, k0), (1, k1)])
    r.replica(0, [(0, k0), (1, k1)])
    assert r.check().valid


def test_p1_lost_acked_write() -> None:
    r = Run()
    k0 = r.send("p0", 0, offset=0)
    r.send("p0", 1, offset=1)
    r.poll("c0", 0, [(0, k0)])
    r.replica(0, [(0, k0)])
    res = r.check()
    assert res.counts["lost"] == 1
    assert "p0:1 acked at ('safe', 0)@1" in res.examples["lost"][0]


def test_p1_acked_offset_holding_another_value_is_lost() -> None:
    r = Run()
    r.send("p0", 0, offset=0)
    r.replica(0, [(0, "p1:0")])
    res = r.check()
    assert res.counts["lost"] == 1 and res.counts["inconsistent_offsets"] == 1


def test_p1_jepsen_form_polled_past_an_unpolled_ack() -> None:
    r = Run()
    k0, k1, k2 = (r.send("p0", n, offset=n) for n in range(3))
    r.poll("c0", 0, [(0, k0)])
    r.poll("c1", 2, [(2, k2)])  # c1 seeked to 2; nobody polled 1
    r.replica(0, [(0, k0), (1, k1), (2, k2)])
    res = r.check()
    assert res.counts["lost_unpolled"] == 1 and res.counts["lost"] == 0


def test_p2_inconsistent_offsets_between_ack_and_poll() -> None:
    r = Run()
    k0 = r.send("p0", 0, offset=0)
    r.poll("c0", 0, [(0, "p1:5")])
    r.replica(0, [(0, k0)])
    res = r.check()
    assert res.counts["inconsistent_offsets"] == 1
    assert res.counts["read_then_vanish"] == 1


def test_p3_idempotent_duplicate_fails_non_idempotent_is_counted() -> None:
    r = Run()
    k0 = r.send("p0", 0, offset=0)
    k1 = r.send("n9", 0, offset=1)
    r.replica(0, [(0, k0), (1, k1), (2, k0), (3, k1), (4, k1)])
    res = r.check()
    assert res.counts["duplicates"] == 1
    assert res.counts["nonidempotent_duplicates"] == 2
    assert set(res.violations()) == {"duplicates"}


def test_p4_poll_skip() -> None:
    r = Run()
    ks = [r.send("p0", n, offset=n) for n in range(4)]
    r.poll("c0", 0, [(0, ks[0]), (1, ks[1])])
    r.poll("c0", 2, [(3, ks[3])])  # 2 skipped inside a poll
    r.poll("c1", 0, list(enumerate(ks)))
    r.replica(0, list(enumerate(ks)))
    res = r.check()
    assert res.counts["poll_skip"] == 1 and set(res.violations()) == {"poll_skip"}


def test_p4_nonmonotonic_poll() -> None:
    r = Run()
    ks = [r.send("p0", n, offset=n) for n in range(3)]
    r.poll("c0", 0, [(0, ks[0]), (1, ks[1]), (2, ks[2]), (1, ks[1])])
    r.replica(0, list(enumerate(ks)))
    res = r.check()
    assert res.counts["nonmonotonic"] == 1 and set(res.violations()) == {"nonmonotonic"}


def test_p4_seek_restarts_ordering_without_a_violation() -> None:
    r = Run()
    ks = [r.send("p0", n, offset=n) for n in range(3)]
    r.poll("c0", 0, list(enumerate(ks)))
    r.poll("c0", 0, list(enumerate(ks)))  # re-assigned from 0
    r.replica(0, list(enumerate(ks)))
    assert r.check().valid


def test_p4_idempotent_values_out_of_order_in_the_log() -> None:
    r = Run()
    r.send("p0", 0, offset=1)
    r.send("p0", 1, offset=0)
    r.replica(0, [(0, "p0:1"), (1, "p0:0")])
    res = r.check()
    assert res.counts["reordered"] == 1 and set(res.violations()) == {"reordered"}


def test_p5_read_then_vanish() -> None:
    r = Run()
    k0 = r.send("p0", 0, offset=0)
    k1 = r.send("p0", 1, "info", error="REQUEST_TIMED_OUT")
    r.poll("c0", 0, [(0, k0), (1, k1)])  # saw the indeterminate write...
    r.replica(0, [(0, k0)])  # ...which then vanished
    res = r.check()
    assert res.counts["read_then_vanish"] == 1 and set(res.violations()) == {"read_then_vanish"}


def test_p5_read_at_or_above_hw() -> None:
    r = Run()
    k0 = r.send("p0", 0, offset=0)
    r.poll("c0", 0, [(0, k0)], hw=0)
    r.replica(0, [(0, k0)])
    res = r.check()
    assert res.counts["read_above_hw"] == 1 and set(res.violations()) == {"read_above_hw"}


def test_p6_aborted_read() -> None:
    r = Run()
    k0 = r.send("p0", 0, offset=0)
    k1 = r.send("p0", 1, "fail", error="NOT_ENOUGH_REPLICAS")
    r.replica(0, [(0, k0), (1, k1)])
    res = r.check()
    assert res.counts["aborted_reads"] == 1 and set(res.violations()) == {"aborted_reads"}


def test_p7_divergent_replicas() -> None:
    r = Run()
    k0 = r.send("p0", 0, offset=0)
    r.replica(0, [(0, k0), (1, "p1:0")])
    r.replica(1, [(0, k0), (1, "p1:1")])
    res = r.check(final_leaders={SAFE: 0})
    assert res.counts["divergent_replicas"] == 1


def test_p7_same_records_other_epoch_is_divergence() -> None:
    r = Run()
    k0 = r.send("p0", 0, offset=0)
    r.replica(0, [(0, k0)], epoch_of=1, epochs=((1, 0),))
    r.replica(1, [(0, k0)], epoch_of=2, epochs=((2, 0),))
    res = r.check(final_leaders={SAFE: 0})
    assert res.counts["divergent_replicas"] == 1 and res.counts["epoch_cache_mismatch"] == 1


def test_p7_hw_below_leo_after_quiescence() -> None:
    r = Run()
    k0 = r.send("p0", 0, offset=0)
    r.replica(0, [(0, k0)], hw=0)
    res = r.check()
    assert set(res.violations()) == {"hw_not_at_leo"}


def test_p8_epoch_cache_not_increasing() -> None:
    r = Run()
    k0 = r.send("p0", 0, offset=0)
    bad = ((1, 0), (1, 0))
    r.replica(0, [(0, k0)], epochs=bad)
    r.replica(1, [(0, k0)], epochs=bad)
    res = r.check()
    assert res.counts["epoch_cache_violations"] == 2


def test_p8_two_leaders_in_one_epoch_and_hw_regression() -> None:
    r = clean_run()
    for node, hw in ((0, 5), (0, 4), (1, 9)):
        r.h.event(
            "observer",
            "observe",
            {"topic": "safe", "partition": 0, "node": node, "role": "leader", "epoch": 3, "hw": hw},
        )
    res = r.check()
    assert res.counts["split_leader_epochs"] == 1
    assert res.counts["hw_regressions"] == 1


def test_p8_truncation_below_hw() -> None:
    r = clean_run()
    r.h.event(
        "observer",
        "truncate",
        {"topic": "safe", "partition": 0, "node": 2, "to": 3, "hw": 4, "records": 1, "bytes": 80},
    )
    r.h.event(
        "observer",
        "truncate",
        {"topic": "safe", "partition": 0, "node": 1, "to": 4, "hw": 4, "records": 2, "bytes": 160},
    )
    # Recovery at startup may cut below the checkpointed HW (a power loss): counted, not a violation.
    r.h.event(
        "node",
        "truncate",
        {"topic": "safe", "partition": 0, "node": 0, "to": 2, "hw": 4, "records": 2, "bytes": 100, "kind": "recovery"},
    )
    res = r.check()
    assert res.counts["truncations_below_hw"] == 1
    assert res.stats["truncations"] == {
        "events": 3,
        "records": 5,
        "bytes": 340,
        "follower_events": 2,
        "recovery_events": 1,
        "recovery_below_hw": 1,
    }


def _served_poll(r: Run, consumer: str, start: int, records: list[tuple[int, str]], served: list[list[int]]) -> None:
    i = r.h.invoke(consumer, "poll", {"topic": "safe", "partition": 0, "from": start})
    r.h.ok(i, {"records": [[o, v, 0, served[-1][2]] for o, v in records], "served": served})


def test_p8_hw_regression_seen_by_one_consumer_from_one_leader_epoch() -> None:
    """The HW a leader reports to one consumer within its epoch never goes back; another epoch,
    another leader or another consumer (whose responses may be logged out of order) starts afresh."""
    log = [(o, k) for o, k in enumerate(f"p0:{n}" for n in range(6))]

    def run(second: list[list[int]], consumer2: str = "c9") -> dict[str, int]:
        r = Run()
        for o, k in log:
            r.send("p0", int(k.split(":")[1]), offset=o)
        _served_poll(r, "c9", 0, log[:3], [[1, 4, 3]])
        _served_poll(r, consumer2, 3, log[3:], second)
        for node in range(3):
            r.replica(node, log)
        res = r.check()
        assert res.stats["hw_observations"] == {"polls": 1 + len(second)}
        return res.counts

    assert run([[1, 4, 6]])["hw_regressions"] == 0
    assert run([[1, 4, 2], [1, 4, 6]])["hw_regressions"] == 1  # 3 then 2 from leader 1 in epoch 4
    assert run([[1, 5, 2], [1, 5, 6]])["hw_regressions"] == 0  # a new epoch may start lower
    assert run([[2, 4, 2], [2, 4, 6]])["hw_regressions"] == 0  # (another node: split epochs' business)
    assert run([[1, 4, 2], [1, 4, 6]], consumer2="c8")["hw_regressions"] == 0


def test_p9_unseen_is_reported_not_fatal() -> None:
    r = Run()
    k0 = r.send("p0", 0, offset=0)
    r.send("p0", 1, offset=1)
    r.poll("c0", 0, [(0, k0)])
    r.replica(0, [(0, k0), (1, "p0:1")])
    res = r.check()
    assert res.counts["unseen"] == 1 and res.valid
    assert res.stats["unseen_series"][-1][1] == 1 and res.stats["unseen_zero_at"] is None


def test_p10_control_topic_loss_is_counted_separately() -> None:
    r = clean_run()
    ctl = ("control", 0)
    r.send("p3", 0, offset=0, tp=ctl)
    r.send("p3", 1, offset=1, tp=ctl)
    r.replica(0, [(0, "p3:0")], tp=ctl)
    res = r.check()
    assert res.counts["control_lost"] == 1 and res.valid


def test_a_partition_with_no_replica_read_loses_every_ack() -> None:
    r = Run()
    r.send("p0", 0, offset=0)
    res = check(r.h.ops, {SAFE: []}, idempotent_clients=IDEM)
    assert res.counts["lost"] == 1


def test_read_replica_reads_a_real_partition_directory(tmp_path: Path) -> None:
    d = tmp_path / "n0" / "safe-0"
    log = Log.open(d)
    vals = [encode_value("p0", n) for n in range(3)]
    log.append(
        encode_batch(vals[:2], timestamps=1, partition_leader_epoch=4, producer_id=9, producer_epoch=0, base_sequence=0)
    )
    log.append(
        encode_batch(vals[2:], timestamps=2, partition_leader_epoch=4, producer_id=9, producer_epoch=0, base_sequence=2)
    )
    log.close()
    before = {p: os.path.getsize(d / p) for p in os.listdir(d)}
    rep = read_replica(d, 0)
    assert (rep.topic, rep.partition, rep.leo) == ("safe", 0, 3)
    assert rep.records == ((0, "p0:0"), (1, "p0:1"), (2, "p0:2"))
    assert [
        (b.base_offset, b.last_offset, b.leader_epoch, b.producer_id, b.base_sequence, b.count) for b in rep.batches
    ] == [(0, 1, 4, 9, 0, 2), (2, 2, 4, 9, 2, 1)]
    assert len({b.crc for b in rep.batches}) == 2
    assert {p: os.path.getsize(d / p) for p in os.listdir(d)} == before  # nothing changed


def test_value_encoding_round_trips() -> None:
    v = encode_value("p2", 1234)
    assert len(v) == 64 and value_key(v) == "p2:1234"
    with pytest.raises(ValueError, match="must not contain"):
        encode_value("a:b", 1)


def test_f8_stale_change_applied_by_a_replay_is_a_violation() -> None:
    r = clean_run()
    refused = {"stale_accepted": 0, "requests": [{"stale": True, "response": "INVALID_UPDATE_VERSION"}], "zk": []}
    i = r.h.invoke("nemesis", "nemesis", {"fault": "replay", "target": 0, "role": "controller"})
    r.h.ok(i, refused)
    assert r.check().valid
    applied = {
        "stale_accepted": 2,
        "requests": [{"stale": True, "response": "NONE", "tp": ["safe", 0]}],
        "zk": [{"path": "/x", "set": "accepted", "multi": "BadVersionError"}],
    }
    i = r.h.invoke("nemesis", "nemesis", {"fault": "replay", "target": 0, "role": "controller"})
    r.h.ok(i, applied)
    res = r.check()
    assert res.counts["stale_changes_accepted"] == 2 and not res.valid
    assert "'response': 'NONE'" in res.examples["stale_changes_accepted"][0]
