"""Log dirs for the Spark tests, and the oracle: kafka-python decoding the same segment files."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kafka.record.memory_records import MemoryRecords

from seglog import Log
from seglog.storage.records import encode_batch
from tests.conftest import FIXTURES, KAFKA_CODECS, T0

#: partition dir name -> (path under kafka-real, needs a compression codec)
REAL = {
    "hamlet-gzip-0": ("kafkalite/hamlet-gzip-0", True),
    "hamlet-snappy-0": ("kafkalite/hamlet-snappy-0", True),
    "_confluent-command-0": ("kafka-connect-spooldir/_confluent-command-0", True),
    "_confluent-controlcenter-5-1-2-1-monitoring-message-rekey-0": (
        "kafka-connect-spooldir/_confluent-controlcenter-5-1-2-1-monitoring-message-rekey-0",
        True,
    ),
    "__consumer_offsets-6": ("LDI-POC/__consumer_offsets-6", False),
    "TestTopicPatient-0": ("LDI-POC/TestTopicPatient-0", False),
}


def copy_real(names: Sequence[str], dest: Path) -> Path:
    """Copy real broker partition dirs into ``dest`` laid out as one log dir."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copytree(FIXTURES / "kafka-real" / REAL[name][0], dest / name)
    return dest


def write_log(d: Path, batches: Sequence[dict[str, Any]], config: dict[str, Any] | None = None) -> None:
    """Append ``encode_batch(**kw)`` for each kw to the partition log in ``d``."""
    lg = Log.open(str(d), config or {})
    try:
        for kw in batches:
            if "raw" in kw:  # bytes written as given (transaction markers among them)
                lg.append(kw["raw"], origin="coordinator")
            else:
                lg.append(encode_batch(**kw))
    finally:
        lg.close()


CODECS = tuple(KAFKA_CODECS)


def sample_batches(
    partition: int, n_batches: int, per_batch: int, t0: int = T0, codecs: Sequence[str] = ("none",)
) -> list[dict[str, Any]]:
    """Batches with keys (some null), values (some null), headers (some records), and
    timestamps that go back and forth inside each batch; batch b uses codecs[b % len]."""
    out = []
    for b in range(n_batches):
        vals, keys, hdrs, ts = [], [], [], []
        for i in range(per_batch):
            n = b * per_batch + i
            vals.append(None if n % 11 == 5 else b"p%d-value-%d" % (partition, n))
            keys.append(None if n % 7 == 3 else b"k%d" % (n % 13))
            hdrs.append([("h1", b"x%d" % n), ("nil", None)] if n % 5 == 0 else None)
            ts.append(t0 + b * 1000 + (i * 37) % 500)
        out.append(dict(values=vals, keys=keys, headers=hdrs, timestamps=ts, compression=codecs[b % len(codecs)]))
    return out


def oracle(part_dir: Path, topic: str, partition: int, *, include_control: bool = False) -> list[dict[str, Any]]:
    """Every record of a partition dir as kafka-python decodes its segment files, in offset
    order, as rows of Spark's Kafka schema (timestamp in ms, headers None when empty).

    kafka-python gives magic-0 messages a timestamp and type of None; Kafka's Java consumer,
    which Spark's Kafka source uses, gives -1 (NO_TIMESTAMP) and -1 (NO_TIMESTAMP_TYPE)."""
    rows = []
    for f in sorted(p for p in os.listdir(part_dir) if p.endswith(".log")):
        mr = MemoryRecords((part_dir / f).read_bytes())
        while (batch := mr.next_batch()) is not None:
            control = getattr(batch, "is_control_batch", False)
            if control and not include_control:
                continue
            for r in batch:
                headers = [(k, v) for k, v in (getattr(r, "headers", None) or [])]
                rows.append(
                    {
                        "key": r.key,
                        "value": r.value,
                        "topic": topic,
                        "partition": partition,
                        "offset": r.offset,
                        "timestamp": -1 if r.timestamp is None else r.timestamp,
                        "timestampType": -1 if r.timestamp_type is None else r.timestamp_type,
                        "headers": headers or None,
                    }
                )
    return rows


SELECT_EXACT = (
    "key",
    "value",
    "topic",
    "partition",
    "offset",
    "unix_micros(timestamp) AS timestamp_us",
    "timestampType",
)


def spark_rows(df: Any, headers: bool = False) -> list[dict[str, Any]]:
    """Rows in offset order with the timestamp as exact microseconds."""
    cols = list(SELECT_EXACT) + (["headers"] if headers else [])
    out = []
    for r in df.selectExpr(*cols).orderBy("topic", "partition", "offset").collect():
        d = r.asDict(recursive=True)
        d["key"] = None if d["key"] is None else bytes(d["key"])
        d["value"] = None if d["value"] is None else bytes(d["value"])
        ts = d.pop("timestamp_us")
        assert ts % 1000 == 0, "a Kafka timestamp is whole milliseconds"
        d["timestamp"] = ts // 1000
        if headers:
            d["headers"] = (
                None
                if d["headers"] is None
                else [(h["key"], None if h["value"] is None else bytes(h["value"])) for h in d["headers"]]
            )
        out.append(d)
    return out


def expected_rows(rows: list[dict[str, Any]], headers: bool = False) -> list[dict[str, Any]]:
    out = []
    for r in sorted(rows, key=lambda r: (r["topic"], r["partition"], r["offset"])):
        d = dict(r)
        if not headers:
            d.pop("headers", None)
        out.append(d)
    return out


def patch_spark_modules(monkeypatch: Any, name: str, value: Any) -> int:
    """Set ``name`` to ``value`` in every module of ``seglog.bindings.spark`` that has it (each
    module binds what it imports); returns how many were patched."""
    import seglog.bindings.spark  # noqa: F401 - loads every module of the package

    patched = 0
    for mod_name, mod in list(sys.modules.items()):
        if mod_name.startswith("seglog.bindings.spark.") and hasattr(mod, name):
            monkeypatch.setattr(mod, name, value)
            patched += 1
    assert patched, f"no module of seglog.bindings.spark has {name!r}"
    return patched
