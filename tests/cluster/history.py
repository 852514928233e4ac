"""The operation history of a cluster run, as JSONL (``docs/replication.md`` §9.4).

Every line is one event::

    {"time": <s since start>, "process": <str>, "type": "invoke|ok|fail|info", "f": <str>,
     "id": <op id>, "value": {...}, "error": <Kafka error name, on fail/info>}

Operations (``f``):

``send``    value ``{"topic", "partition", "value"}`` (``value`` is the record value as text);
            ``ok`` adds ``"offset"`` (the acked offset). ``fail`` means *definitely not
            appended*; ``info`` means *indeterminate* (it may be in the log, now or later).
``poll``    ``invoke`` has ``{"topic", "partition", "from"}``; ``ok`` carries ``"records"``:
            ``[[offset, value, leader_epoch, hw], ...]`` (epoch and HW may be null) and, when the
            fetch named the leader epoch, ``"served": [[leader, leader_epoch, hw], ...]``.
``nemesis`` process ``"nemesis"``: ``invoke`` when a fault starts, ``info`` when it is done
            (``value`` says which fault, ``"target"`` and ``"role"``).
``observe`` process ``"observer"``, type ``info``: a state sample (leader, epoch, HW, ISR per
            partition) for the epoch/HW invariants and the latency figures.

How a failed send is classified is the client-side table of §9.4, applied through seglog's own
split: a :class:`seglog.errors.NotWrittenError` (rejected before append) is ``fail``; anything
else — timeouts, ``NOT_ENOUGH_REPLICAS_AFTER_APPEND``, ``NOT_LEADER_OR_FOLLOWER`` after the
append, connection loss, unknown errors, exceptions from outside seglog — is ``info``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from seglog.errors import KafkaError, write_outcome

TYPES = ("invoke", "ok", "fail", "info")


def classify(exc: BaseException) -> str:
    """``"fail"`` when the failed write is definitely not in the log, else ``"info"``."""
    return "fail" if write_outcome(exc) == "not_written" else "info"


def error_name(exc: BaseException) -> str:
    """Kafka's protocol name for a seglog error, else the exception's class name."""
    if isinstance(exc, KafkaError):
        return str(type(exc).name)
    return type(exc).__name__


@dataclasses.dataclass(frozen=True, slots=True)
class Op:
    """One history line."""

    time: float
    process: str
    type: str
    f: str
    id: int
    value: dict[str, Any]
    error: str | None = None

    def to_json(self) -> str:
        d: dict[str, Any] = {
            "time": round(self.time, 6),
            "process": self.process,
            "type": self.type,
            "f": self.f,
            "id": self.id,
            "value": self.value,
        }
        if self.error is not None:
            d["error"] = self.error
        return json.dumps(d, separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str) -> Op:
        d = json.loads(line)
        if d.get("type") not in TYPES:
            raise ValueError(f"history line has type {d.get('type')!r}, expected one of {TYPES}: {line[:200]}")
        return cls(
            float(d["time"]),
            str(d["process"]),
            d["type"],
            str(d["f"]),
            int(d["id"]),
            dict(d.get("value") or {}),
            d.get("error"),
        )


class History:
    """Thread-safe recorder; writes each event to ``path`` (JSONL, flushed per line) and keeps it
    in memory. ``path=None`` keeps it in memory only."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        t0: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = None if path is None else os.fspath(path)
        self._clock = clock  # a test passes its own clock to stamp events at exact times
        self.t0 = clock() if t0 is None else t0
        self.ops: list[Op] = []
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._open: dict[int, Op] = {}
        self._file: IO[str] | None = open(self.path, "a", encoding="utf-8") if self.path else None

    def now(self) -> float:
        return self._clock() - self.t0

    def _add(self, op: Op) -> Op:
        with self._lock:
            self.ops.append(op)
            if self._file is not None:
                self._file.write(op.to_json() + "\n")
                self._file.flush()
        return op

    def invoke(self, process: str, f: str, value: dict[str, Any]) -> int:
        op_id = next(self._ids)
        op = self._add(Op(self.now(), process, "invoke", f, op_id, dict(value)))
        with self._lock:
            self._open[op_id] = op
        return op_id

    def _complete(self, op_id: int, type_: str, extra: dict[str, Any] | None, error: str | None) -> Op:
        with self._lock:
            inv = self._open.pop(op_id, None)
        if inv is None:
            raise KeyError(f"operation {op_id} was never invoked or is already complete")
        value = dict(inv.value)
        if extra:
            value.update(extra)
        return self._add(Op(self.now(), inv.process, type_, inv.f, op_id, value, error))

    def ok(self, op_id: int, extra: dict[str, Any] | None = None) -> Op:
        return self._complete(op_id, "ok", extra, None)

    def fail(self, op_id: int, error: str, extra: dict[str, Any] | None = None) -> Op:
        """Definitely did not happen."""
        return self._complete(op_id, "fail", extra, error)

    def info(self, op_id: int, error: str, extra: dict[str, Any] | None = None) -> Op:
        """Outcome unknown."""
        return self._complete(op_id, "info", extra, error)

    def error(self, op_id: int, exc: BaseException, extra: dict[str, Any] | None = None) -> Op:
        """Complete with ``exc``, classified by :func:`classify`."""
        if classify(exc) == "fail":
            return self.fail(op_id, error_name(exc), extra)
        return self.info(op_id, error_name(exc), extra)

    def event(self, process: str, f: str, value: dict[str, Any]) -> Op:
        """A one-line ``info`` event (state samples, nemesis completions without an invoke)."""
        return self._add(Op(self.now(), process, "info", f, next(self._ids), dict(value)))

    def close_open(self, reason: str = "run ended") -> None:
        """Every still-open operation becomes ``info`` (its outcome was never seen)."""
        with self._lock:
            pending = list(self._open)
        for op_id in pending:
            self.info(op_id, reason)

    def close(self) -> None:
        self.close_open()
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load(path: str | os.PathLike[str]) -> list[Op]:
    """Read a JSONL history (a torn last line, as a killed harness leaves it, is skipped)."""
    out = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for k, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.append(Op.from_json(line))
        except json.JSONDecodeError:
            if k == len(lines) - 1 or all(not l.strip() for l in lines[k + 1 :]):
                break
            raise ValueError(f"{path}: line {k + 1} is not JSON: {line[:200]!r}") from None
    return out


def pairs(ops: Iterable[Op]) -> Iterator[tuple[Op, Op | None]]:
    """(invoke, completion) for every invoked operation, in invoke order; completion is None
    when the history ends first."""
    invokes: dict[int, Op] = {}
    done: dict[int, Op] = {}
    order = []
    for op in ops:
        if op.type == "invoke":
            invokes[op.id] = op
            order.append(op.id)
        elif op.id in invokes:
            done[op.id] = op
    for i in order:
        yield invokes[i], done.get(i)
