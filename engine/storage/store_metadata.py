"""The store's own metadata files: ``seglog-metadata.json`` in the log dir (topics, partition
counts, config overrides, topic ids, the producer-id block, a topic change under way: what a Kafka
cluster keeps in ZooKeeper/KRaft) and Kafka's ``partition.metadata`` beside each partition's
segments (its topic id)."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Sequence
from typing import Any

from seglog.errors import StorageError
from seglog.storage.checkpoints import atomic_write
from seglog.storage.topic import StoredTopic

log = logging.getLogger("seglog.storage.store_metadata")

METADATA_FILE = "seglog-metadata.json"
PARTITION_METADATA_FILE = "partition.metadata"


def check_store_metadata(meta: dict[str, Any], path: str) -> None:
    """The shape of ``seglog-metadata.json`` (well-formed JSON of the wrong shape is named, not
    left to fail as a KeyError or TypeError later)."""

    def bad(where: str, want: str, got: Any) -> StorageError:
        return StorageError(
            f"damaged store metadata {path}: {where} should be {want}, found {type(got).__name__} {str(got)[:40]!r}",
            path=path,
        )

    def is_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    if not is_int(meta.get("producer_id_block_end", 0)):
        raise bad("producer_id_block_end", "an integer", meta["producer_id_block_end"])
    topics = meta.get("topics", {})
    if not isinstance(topics, dict):
        raise bad("topics", "an object", topics)
    for name, tm in topics.items():
        if not isinstance(tm, dict):
            raise bad(f"topics.{name}", "an object", tm)
        if not is_int(tm.get("partitions", 0)) or tm.get("partitions", 0) < 0:
            raise bad(f"topics.{name}.partitions", "a count of partitions", tm["partitions"])
        if not isinstance(tm.get("config", {}), dict):
            raise bad(f"topics.{name}.config", "an object", tm["config"])
        if not isinstance(tm.get("topic_id") or "", str):
            raise bad(f"topics.{name}.topic_id", "a string", tm["topic_id"])


def read_store_metadata(directory: str) -> dict[str, Any]:
    """The log dir's ``seglog-metadata.json``, checked; ``{}`` when there is none."""
    path = os.path.join(directory, METADATA_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, RecursionError) as exc:
        raise StorageError(f"cannot read the store metadata {path}: {exc}", path=path) from None
    if not isinstance(meta, dict) or meta.get("version") != 1:
        raise StorageError(f"unsupported store metadata in {path} (expected version 1)", path=path)
    check_store_metadata(meta, path)
    return meta


def write_store_metadata(
    directory: str,
    topics: Iterable[StoredTopic],
    producer_id_block_end: int,
    pending: tuple[StoredTopic, list[int], bool] | None = None,
) -> None:
    """Write ``seglog-metadata.json`` (atomically). ``pending``: a topic change about to be made
    (the topic, the partitions to create, whether the topic is new), recorded first so that the
    next open removes what a crash in the middle of it left."""
    entries: dict[str, dict[str, Any]] = {}
    for t in sorted(topics, key=lambda t: t.name):
        entries[t.name] = _topic_entry(t)
    if pending is not None:
        t, numbers, new = pending
        entry = entries.setdefault(t.name, _topic_entry(t))
        entry["pending"] = {"partitions": sorted(numbers), "new_topic": new}
    meta = {"version": 1, "producer_id_block_end": producer_id_block_end, "topics": entries}
    atomic_write(
        os.path.join(directory, METADATA_FILE), (json.dumps(meta, indent=1, sort_keys=True) + "\n").encode("utf-8")
    )


def _topic_entry(t: StoredTopic) -> dict[str, Any]:
    return {
        "partitions": t.count,
        "topic_id": t.topic_id,
        "config": {k: _jsonable(v) for k, v in sorted(t.overrides.items())},
    }


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return value


def read_partition_topic_id(partition_dir: str) -> str | None:
    """The topic id a partition dir's ``partition.metadata`` names; None when it names none.
    Raises ``OSError`` (``FileNotFoundError`` when there is no file) or ``ValueError`` (not UTF-8)."""
    with open(os.path.join(partition_dir, PARTITION_METADATA_FILE), encoding="utf-8") as f:
        for line in f.read().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "topic_id" and value.strip():
                return value.strip()
    return None


def read_topic_id(directory: str, topic: str, partitions: Sequence[int]) -> str | None:
    """The topic id in the first readable ``partition.metadata`` of ``topic``'s partitions."""
    for p in partitions:
        partition_dir = os.path.join(directory, f"{topic}-{p}")
        try:
            tid = read_partition_topic_id(partition_dir)
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:
            log.warning(
                "ignoring unreadable %s (it is rewritten): %s",
                os.path.join(partition_dir, PARTITION_METADATA_FILE),
                exc,
            )
            continue
        if tid is not None:
            return tid
    return None


def write_partition_metadata(partition_dir: str, topic_id: str | None) -> None:
    """Kafka's ``partition.metadata`` (version 0) naming the partition's topic id; left alone when
    it already says so, nothing without a topic id."""
    if topic_id is None:
        return
    path = os.path.join(partition_dir, PARTITION_METADATA_FILE)
    text = f"version: 0\ntopic_id: {topic_id}"
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    except (OSError, ValueError):  # missing or damaged (not UTF-8): rewritten
        pass
    atomic_write(path, text.encode("utf-8"))


__all__ = [
    "METADATA_FILE",
    "PARTITION_METADATA_FILE",
    "check_store_metadata",
    "read_partition_topic_id",
    "read_store_metadata",
    "read_topic_id",
    "write_partition_metadata",
    "write_store_metadata",
]
