"""Topics and partitions of a log dir: Kafka's topic-name rules and topic ids, the entry a
:class:`~seglog.storage.log_manager.LogManager` keeps for each topic and partition it holds, and
their descriptions."""

from __future__ import annotations

import base64
import dataclasses
import re
import threading
import uuid
from collections.abc import Mapping
from typing import Any, NamedTuple

from seglog.config import LogConfig
from seglog.errors import InvalidTopicError
from seglog.storage.group_offsets import OFFSETS_TOPIC
from seglog.storage.log import Log

INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state", "__cluster_metadata"})

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+\Z")  # \Z: "$" would accept a trailing newline


class TopicPartition(NamedTuple):
    """A partition of a topic (Kafka's ``TopicPartition``)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    log_start_offset: int
    high_watermark: int
    log_end_offset: int
    recovery_point: int
    segments: int
    size_bytes: int
    path: str


@dataclasses.dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: str | None
    internal: bool
    partitions: tuple[PartitionDescription, ...]
    config_overrides: Mapping[str, Any]

    @property
    def records(self) -> int:
        """Offsets spanned by the partitions (records, where no compaction left gaps)."""
        return sum(p.log_end_offset - p.log_start_offset for p in self.partitions)

    @property
    def size_bytes(self) -> int:
        return sum(p.size_bytes for p in self.partitions)


def validate_topic_name(name: object) -> str:
    """Kafka's topic-name rules (``Topic.validate``): 1-249 characters from ``[a-zA-Z0-9._-]``,
    not ``.`` or ``..``. A valid name can never reach outside the log directory."""
    if not isinstance(name, str):
        raise TypeError(f"topic must be a str, not {type(name).__name__}")
    if not name:
        raise InvalidTopicError("topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"topic name is illegal, it can't be longer than "
            f"{MAX_TOPIC_NAME_LENGTH} characters, topic name: {name[:40]}...",
            limit=MAX_TOPIC_NAME_LENGTH,
        )
    if not _LEGAL_TOPIC.match(name):
        bad = sorted({c for c in name if not re.match(r"[a-zA-Z0-9._-]", c)})
        raise InvalidTopicError(
            f"topic name {name!r} is illegal: it contains {''.join(bad)!r}; "
            "only ASCII alphanumerics, '.', '_' and '-' are allowed"
        )
    return name


def collision_name(name: str) -> str:
    """The name as Kafka compares names for collisions: topics whose names differ only by '.'
    vs '_' are refused (their metric names collide)."""
    # Kafka refuses topics whose names differ only by '.' vs '_' (metric names collide).
    return name.replace(".", "_")


def own_leader_epoch(lg: Log) -> int | None:
    """The leader epoch a log dir's own appends write (``Log.append``'s ``leader_epoch``)."""
    # A store's own logs are led at epoch 0 (what a single Kafka broker writes); a log that
    # already has epochs keeps its latest.
    return None if lg.epoch_cache.latest_epoch >= 0 else 0


class StoredPartition:
    """One partition of a log dir: its log (which holds its producer state), the lock serialising
    appends to it, its cleaner checkpoint."""

    __slots__ = ("lock", "log", "name", "partition", "topic")

    def __init__(self, topic: str, partition: int, log_: Log, cleaner_offset: int | None) -> None:
        self.topic = topic
        self.partition = partition
        self.log = log_
        self.lock = threading.Lock()
        self.name = f"{topic}-{partition}"
        log_.cleaner_offset = cleaner_offset

    @property
    def cleaner_offset(self) -> int | None:
        """The cleaner checkpoint: the first offset not yet cleaned (the log keeps it)."""
        return self.log.cleaner_offset

    def append_batch(self, data: Any, *, verify_crc: bool = True) -> tuple[int, int]:
        """The producer's append of one batch: (first offset, log-append time or -1). A repeat
        of one of the producer's last five batches returns the original first offset.
        ``verify_crc=False`` only for bytes this process encoded and nothing has touched since."""
        with self.lock:
            lg = self.log
            info = lg.append_as_leader(data, leader_epoch=own_leader_epoch(lg), verify_crc=verify_crc)
            return info.first_offset, info.log_append_time

    def last_stable_offset(self) -> int:
        """The log's last stable offset (the high watermark unless a transaction is open)."""
        return self.log.last_stable_offset


class StoredTopic:
    """One topic of a log dir: its partitions, its config (defaults and overrides), its id."""

    __slots__ = ("config", "count", "internal", "name", "overrides", "partitions", "topic_id")

    def __init__(
        self, name: str, config: LogConfig, overrides: dict[str, Any], topic_id: str | None, internal: bool
    ) -> None:
        self.name = name
        #: The open partition logs, by partition number. All ``count`` of them, except for
        #: __consumer_offsets (each created at its first commit) and in a read-only store
        #: (only those on disk).
        self.partitions: list[StoredPartition] = []
        self.count = 0
        self.config = config
        self.overrides = overrides
        self.topic_id = topic_id
        self.internal = internal


def new_topic_id() -> str:
    """A Kafka topic id: a random UUID in URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


__all__ = [
    "INTERNAL_TOPICS",
    "MAX_TOPIC_NAME_LENGTH",
    "PartitionDescription",
    "StoredPartition",
    "StoredTopic",
    "TopicDescription",
    "TopicPartition",
    "collision_name",
    "new_topic_id",
    "own_leader_epoch",
    "validate_topic_name",
]
