"""A new partition's ``partition.metadata`` (Kafka's file naming the topic's id), written by
the Spark writer as the store writes it."""

from __future__ import annotations

import base64
import json
import os
import uuid

from seglog.bindings.spark.checkpoints import log_dir_update
from seglog.bindings.spark.logdirs import find_partition_dirs
from seglog.storage.checkpoints import atomic_write
from seglog.storage.store_metadata import METADATA_FILE, PARTITION_METADATA_FILE


def _known_topic_id(log_dir: str, topic: str) -> str | None:
    """The topic id the dir already gives ``topic``: the store metadata's, else the one in a
    partition's ``partition.metadata``."""
    try:
        with open(os.path.join(log_dir, METADATA_FILE), encoding="utf-8") as f:
            tid = json.load(f).get("topics", {}).get(topic, {}).get("topic_id")
        if tid:
            return str(tid)
    except (OSError, ValueError, AttributeError):
        pass
    for pd in find_partition_dirs([log_dir]):
        if pd.topic != topic:
            continue
        try:
            with open(os.path.join(pd.dir, PARTITION_METADATA_FILE), encoding="utf-8") as f:
                for line in f.read().splitlines():
                    key, _, value = line.partition(":")
                    if key.strip() == "topic_id" and value.strip():
                        return value.strip()
        except OSError:
            continue
    return None


def ensure_partition_metadata(log_dir: str, d: str, topic: str) -> None:
    """Kafka's ``partition.metadata`` in the partition dir ``d``, with the topic's id (a new
    one for a new topic), as the store writes it. Under the log dir's lock, so the tasks that
    create partitions of one new topic agree on its id."""
    path = os.path.join(d, PARTITION_METADATA_FILE)
    if os.path.exists(path):
        return
    with log_dir_update(log_dir):
        if os.path.exists(path):
            return
        tid = _known_topic_id(log_dir, topic)
        if tid is None:
            tid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        atomic_write(path, f"version: 0\ntopic_id: {tid}".encode("utf-8"))
