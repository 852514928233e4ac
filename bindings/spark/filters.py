"""Filter pushdown: Spark's pushed filters on ``topic``, ``partition``, ``offset`` and
``timestamp`` as :class:`Constraints` that narrow the plan, and the filters Spark must still
evaluate itself."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from typing import Any


@dataclasses.dataclass(frozen=True, slots=True)
class Constraints:
    """What pushed filters allow (None: no limit)."""

    topic_preds: tuple[tuple[str, Any], ...] = ()
    partition_preds: tuple[tuple[str, Any], ...] = ()
    offset_lo: int | None = None  # inclusive
    offset_hi: int | None = None  # exclusive
    timestamp_lo: int | None = None  # ms; records older may exist later, Spark re-checks
    nothing: bool = False

    def topic_ok(self, topic: str) -> bool:
        return all(_test(op, topic, v) for op, v in self.topic_preds)

    def partition_ok(self, partition: int) -> bool:
        return all(_test(op, partition, v) for op, v in self.partition_preds)


def _test(op: str, x: Any, v: Any) -> bool:
    if op == "eq":
        return bool(x == v)
    if op == "in":
        return x in v
    if op == "gt":
        return bool(x > v)
    if op == "ge":
        return bool(x >= v)
    if op == "lt":
        return bool(x < v)
    if op == "le":
        return bool(x <= v)
    if op == "prefix":
        return str(x).startswith(v)
    if op == "suffix":
        return str(x).endswith(v)
    if op == "contains":
        return v in str(x)
    raise ValueError(op)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _filter_ms(value: Any) -> int | None:
    """A pushed timestamp as epoch milliseconds, rounded down (a safe lower bound)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return int((value - _EPOCH) // timedelta(milliseconds=1))
    return None


def push_filters(filters: Iterable[Any]) -> tuple[Constraints, list[Any]]:
    """Turn Spark's pushed filters into :class:`Constraints`; returns the filters Spark must
    still evaluate (the very objects it gave)."""
    topic: list[tuple[str, Any]] = []
    part: list[tuple[str, Any]] = []
    lo: int | None = None
    hi: int | None = None
    ts_lo: int | None = None
    nothing = False
    rest: list[Any] = []
    never_null = {"topic", "partition", "offset", "timestamp", "timestampType"}
    ops = {
        "EqualTo": "eq",
        "GreaterThan": "gt",
        "GreaterThanOrEqual": "ge",
        "LessThan": "lt",
        "LessThanOrEqual": "le",
        "In": "in",
        "StringStartsWith": "prefix",
        "StringEndsWith": "suffix",
        "StringContains": "contains",
    }
    for f in filters:
        kind = type(f).__name__
        attr = getattr(f, "attribute", None)
        col = attr[0] if isinstance(attr, tuple) and len(attr) == 1 else None
        value: Any = getattr(f, "value", None)
        op = ops.get(kind)
        if col in never_null and kind == "IsNotNull":
            continue
        if col in never_null and kind == "IsNull":
            nothing = True
            continue
        if col == "topic" and op is not None and (isinstance(value, str) or op == "in"):
            topic.append((op, tuple(value) if op == "in" else value))
            continue
        if col == "partition" and op in ("eq", "in", "gt", "ge", "lt", "le"):
            part.append((op, tuple(value) if op == "in" else value))
            continue
        if col == "offset" and op in ("eq", "gt", "ge", "lt", "le") and isinstance(value, int):
            if op in ("eq", "ge", "gt"):
                v = value if op != "gt" else value + 1
                lo = v if lo is None else max(lo, v)
            if op in ("eq", "le", "lt"):
                v = value + 1 if op != "lt" else value
                hi = v if hi is None else min(hi, v)
            continue
        if col == "offset" and op == "in":
            vals = [v for v in value if isinstance(v, int)]
            if vals:
                lo = min(vals) if lo is None else max(lo, min(vals))
                hi = max(vals) + 1 if hi is None else min(hi, max(vals) + 1)
            rest.append(f)
            continue
        if col == "timestamp" and op in ("eq", "ge", "gt"):
            ms = _filter_ms(value)
            if ms is not None:
                ts_lo = ms if ts_lo is None else max(ts_lo, ms)
        rest.append(f)
    return Constraints(tuple(topic), tuple(part), lo, hi, ts_lo, nothing), rest
