"""The history: JSONL round trip, invoke/complete pairing, and the client-side error table of
``docs/replication.md`` §9.4 (written out here independently) against seglog's classification."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import seglog.errors as E
from tests.cluster.history import History, classify, error_name, load, pairs

# §9.4: "fail" = definitely not appended.
DEFINITE = [
    E.NotEnoughReplicasError,
    E.InvalidRecordError,
    E.InvalidRequiredAcksError,
    E.InvalidTimestampError,
    E.InvalidTopicError,
    E.RecordTooLargeError,
    E.RecordListTooLargeError,
    E.OutOfOrderSequenceError,
    E.InvalidProducerEpochError,
    E.NotLeaderOrFollowerBeforeAppendError,
]
# §9.4: "info" = everything else: timeouts, after-append errors, NOT_LEADER from purgatory, connection loss.
INDETERMINATE = [
    E.RequestTimedOutError,
    E.NotEnoughReplicasAfterAppendError,
    E.NotLeaderOrFollowerAfterAppendError,
    E.NotLeaderOrFollowerError,
    E.NetworkError,
    E.UnknownServerError,
    E.KafkaStorageError,
]


@pytest.mark.parametrize("cls", DEFINITE, ids=lambda c: c.__name__)
def test_definite_failures_are_fail(cls: type[BaseException]) -> None:
    assert classify(cls("x")) == "fail"


@pytest.mark.parametrize("cls", INDETERMINATE, ids=lambda c: c.__name__)
def test_indeterminate_failures_are_info(cls: type[BaseException]) -> None:
    assert classify(cls("x")) == "info"


@pytest.mark.parametrize(
    "exc", [ConnectionResetError("peer"), TimeoutError(), RuntimeError("?")], ids=lambda e: type(e).__name__
)
def test_errors_from_outside_seglog_are_info(exc: BaseException) -> None:
    assert classify(exc) == "info"


def test_error_names_are_kafka_protocol_names() -> None:
    assert error_name(E.NotEnoughReplicasAfterAppendError("x")) == "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    assert error_name(ConnectionResetError()) == "ConnectionResetError"


def test_jsonl_round_trip_and_pairing(tmp_path: Path) -> None:
    p = tmp_path / "h.jsonl"
    with History(p) as h:
        a = h.invoke("p0", "send", {"topic": "safe", "partition": 1, "value": "p0:0"})
        b = h.invoke("p0", "send", {"topic": "safe", "partition": 1, "value": "p0:1"})
        c = h.invoke("p0", "send", {"topic": "safe", "partition": 1, "value": "p0:2"})
        h.ok(a, {"offset": 7})
        h.error(b, E.NotEnoughReplicasError("isr"))
        h.error(c, E.RequestTimedOutError("late"))
        d = h.invoke("c0", "poll", {"topic": "safe", "partition": 1, "from": 0})
        h.event("nemesis", "nemesis", {"fault": "kill", "target": 2})
        with pytest.raises(KeyError, match="never invoked or is already complete"):
            h.ok(a)
    ops = load(p)
    assert [(o.type, o.f) for o in ops] == [("invoke", "send")] * 3 + [
        ("ok", "send"),
        ("fail", "send"),
        ("info", "send"),
        ("invoke", "poll"),
        ("info", "nemesis"),
        ("info", "poll"),
    ]  # the open poll is closed as info
    assert ops[3].value == {"topic": "safe", "partition": 1, "value": "p0:0", "offset": 7}
    assert ops[4].error == "NOT_ENOUGH_REPLICAS" and ops[5].error == "REQUEST_TIMED_OUT"
    assert ops[-1].id == d and ops[-1].error == "run ended"
    got = {inv.id: (done.type if done else None) for inv, done in pairs(ops)}
    assert got == {a: "ok", b: "fail", c: "info", d: "info"}
    for line in p.read_text().splitlines():
        assert set(json.loads(line)) >= {"time", "process", "type", "f", "value"}


def test_a_torn_last_line_is_skipped_but_a_torn_middle_is_an_error(tmp_path: Path) -> None:
    p = tmp_path / "h.jsonl"
    with History(p) as h:
        h.event("observer", "observe", {"node": 1})
        h.event("observer", "observe", {"node": 2})
    text = p.read_text()
    p.write_text(text + '{"time": 1.0, "proc')
    assert len(load(p)) == 2
    lines = text.splitlines()
    p.write_text(lines[0][:10] + "\n" + lines[1] + "\n")
    with pytest.raises(ValueError, match="line 1 is not JSON"):
        load(p)
