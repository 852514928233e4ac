"""A new partition's ``partition.metadata`` (Kafka's file naming the topic's id), written by
the Spark writer as the store writes it."""

from __future__ import annotations

import json
import os

from seglog.bindings.spark.checkpoints import log_dir_update
from seglog.bindings.spark.logdirs import find_partition_dirs
from seglog.storage.store_metadata import (
    METADATA_FILE,
    PARTITION_METADATA_FILE,
    read_partition_topic_id,
    write_partition_metadata,
)
from seglog.storage.topic import new_topic_id


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
            tid = read_partition_topic_id(pd.dir)
        except (OSError, ValueError):
            continue
        if tid is not None:
            return tid
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
        write_partition_metadata(d, _known_topic_id(log_dir, topic) or new_topic_id())
