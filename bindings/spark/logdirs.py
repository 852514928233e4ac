"""Finding the partitions to read: the ``topic-N`` dirs under the paths given (seglog's log dirs
or a Kafka broker's ``log.dirs``, single partition dirs, globs), and the ones the options select."""

from __future__ import annotations

import dataclasses
import glob
import os
import re
from collections.abc import Sequence

from seglog.bindings.spark.options import ReadOptions
from seglog.errors import ConfigError, UnknownTopicOrPartitionError
from seglog.storage.logdir import LogDir, parse_partition_dir
from seglog.storage.topic import INTERNAL_TOPICS

__all__ = ["INTERNAL_TOPICS", "PartitionDir", "find_partition_dirs", "select_partitions"]


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionDir:
    """A ``topic-N`` directory found under the paths given, and the log dir holding it."""

    topic: str
    partition: int
    dir: str
    log_dir: str
    named: bool = False  # the path given was this partition dir itself (or a glob matching it)


def _has_partition_children(path: str) -> bool:
    try:
        with os.scandir(path) as it:
            return any(e.is_dir() and parse_partition_dir(e.name) for e in it)
    except OSError:
        return False


def find_partition_dirs(paths: Sequence[str]) -> list[PartitionDir]:
    """Every ``topic-N`` dir under ``paths`` (log dirs, partition dirs or globs)."""
    resolved: list[str] = []
    for p in paths:
        p = os.path.expanduser(p)
        if glob.has_magic(p):
            hits = sorted(glob.glob(p))
            if not hits:
                raise FileNotFoundError(f"seglog: path {p!r} matches no file or directory")
            resolved.extend(hits)
        elif not os.path.exists(p):
            raise FileNotFoundError(f"seglog: path {p!r} does not exist")
        else:
            resolved.append(p)
    found: dict[tuple[str, int], PartitionDir] = {}
    for p in resolved:
        p = os.path.abspath(p)
        if not os.path.isdir(p):
            raise FileNotFoundError(
                f"seglog: path {p!r} is not a directory (expected a log dir of "
                "topic-N partition dirs, or one partition dir)"
            )
        parsed = parse_partition_dir(os.path.basename(p))
        named = parsed is not None and not _has_partition_children(p)
        if parsed is not None and named:
            candidates = [(parsed, p)]
        else:
            # A log dir: its partitions as its owner finds them (read-only: nothing locked or
            # written), hidden directories left out.
            candidates = [
                (tp, d)
                for tp, d in LogDir.open(p, read_only=True).partition_dirs().items()
                if not os.path.basename(d).startswith(".")
            ]
        for (topic, part), d in candidates:
            prev = found.get((topic, part))
            if prev is not None and prev.dir != d:
                raise ConfigError(
                    f"seglog: partition {topic}-{part} is in two places: {prev.dir} and "
                    f"{d}; give the paths of one replica only",
                    key="path",
                )
            found[(topic, part)] = PartitionDir(
                topic, part, d, os.path.dirname(d), named or (prev is not None and prev.named)
            )
    return [found[k] for k in sorted(found)]


def select_partitions(dirs: list[PartitionDir], ro: ReadOptions) -> list[PartitionDir]:
    """The partitions the options select. Internal topics are read only when named in
    ``topics``/``subscribe`` or ``assign`` (or when the path is their partition dir itself);
    neither the default (every topic) nor ``subscribePattern`` matches them, as Kafka's
    consumers with ``exclude.internal.topics``."""
    where = ", ".join(ro.paths)
    topics = sorted({d.topic for d in dirs})
    if ro.topics is not None:
        for t in ro.topics:
            if t not in topics:
                raise UnknownTopicOrPartitionError(
                    f"seglog: unknown topic {t!r}: no {t}-N directory under {where} (topics there: "
                    f"{', '.join(topics) or 'none'})"
                )
        return [d for d in dirs if d.topic in ro.topics]
    if ro.pattern is not None:
        rx = re.compile(ro.pattern)
        return [d for d in dirs if rx.fullmatch(d.topic) and (d.named or d.topic not in INTERNAL_TOPICS)]
    if ro.assign is not None:
        have = {(d.topic, d.partition): d for d in dirs}
        for tp in ro.assign:
            if tp not in have:
                raise UnknownTopicOrPartitionError(
                    f"seglog: option assign names {tp[0]}-{tp[1]}, which is not under {where}"
                )
        return [have[tp] for tp in ro.assign]
    return [d for d in dirs if d.named or d.topic not in INTERNAL_TOPICS]
