"""A log directory of topics and partitions, laid out as a Kafka broker's ``log.dir``
(Kafka's ``LogManager``), with the embedded producer and consumer on top.

>>> import tempfile
>>> from seglog import Store
>>> with Store.open(tempfile.mkdtemp()) as store:
...     _ = store.create_topic("orders", partitions=3)
...     producer = store.producer()
...     producer.send("orders", b"hello", key=b"user-42").offset
...     consumer = store.consumer(group_id="billing", auto_offset_reset="earliest")
...     consumer.subscribe(["orders"])
...     [(r.key, r.value) for r in consumer.poll()]
...     consumer.commit()
0
[(b'user-42', b'hello')]

Layout (``docs/kafka-format.md`` §8.1)::

    <dir>/
      .lock                              fcntl-locked while a writable store is open
      .kafka_cleanshutdown               written by close(), removed once the logs are loaded
      recovery-point-offset-checkpoint   per partition: offset below which data is fsynced
      replication-offset-checkpoint      per partition: high watermark
      log-start-offset-checkpoint        partitions whose log start is past their first segment
      cleaner-offset-checkpoint          compacted partitions: first offset not yet cleaned
      seglog-metadata.json               topics, partition counts, config overrides, topic ids,
                                         the producer-id block (what a Kafka cluster keeps in
                                         ZooKeeper/KRaft; absent in a broker's dir: defaults)
      <topic>-<partition>/               one partition log each (seglog.log.Log)
      __consumer_offsets-<n>/            committed offsets (seglog.group_offsets)

The store owns the dir-level checkpoint files: it opens every log with the values read from
them and rewrites them for all partitions at once (periodically on the injected clock, and at
close). A crash between checkpoints only costs recovery time: a partition's recovery point
never runs ahead of what was fsynced.

Background tasks run on the store's scheduler (the injected clock): each log's ``flush.ms``
flusher, flushing of rolled segments and the recovery-point checkpoint
(``log.flush.offset.checkpoint.interval.ms``), the log-start checkpoint
(``log.flush.start.offset.checkpoint.interval.ms``), the high-watermark checkpoint
(``replica.high.watermark.checkpoint.interval.ms``), retention
(``log.retention.check.interval.ms``) and the cleaner (``log.cleaner.backoff.ms``).

Thread-safety: every public method may be called from any thread. Appends to one partition are
serialised by the partition's lock (which also guards its producer state); topic creation and
deletion by the store's lock.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import json
import logging
import os
import re
import shutil
import threading
import uuid
import base64
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from seglog._native.builder import Generation
from seglog.checkpoints import CorruptCheckpointError, OffsetCheckpointFile, atomic_write
from seglog.clock import Clock, ManualClock, Scheduler
from seglog.config import BrokerConfig, LogConfig
from seglog.errors import (
    InvalidPartitionsError,
    InvalidRecordError,
    InvalidTopicError,
    KafkaStorageError,
    LogDirectoryLockedError,
    StorageError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from seglog.group_offsets import OFFSETS_TOPIC, GroupOffsets, OffsetAndMetadata
from seglog.log import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_FILE,
    RECOVERY_POINT_FILE,
    Log,
    LogAppendInfo,
    parse_partition_dir,
)
from seglog.producer_state import ProducerStateManager, last_sequence
from seglog.records import batch_headers, decode_columns

if TYPE_CHECKING:
    from seglog.consumer import Consumer
    from seglog.producer import Producer

log = logging.getLogger("seglog.store")

REPLICATION_OFFSET_FILE = "replication-offset-checkpoint"
CLEANER_OFFSET_FILE = "cleaner-offset-checkpoint"
LOCK_FILE = ".lock"
METADATA_FILE = "seglog-metadata.json"
PARTITION_METADATA_FILE = "partition.metadata"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state", "__cluster_metadata"})

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
_DELETE_DIR = re.compile(r"^.+-\d+\.[0-9a-f]{32}-delete$")
_PRODUCER_ID_BLOCK = 1000

# Directories locked by a store of this process (POSIX record locks do not conflict within a
# process, so a second open in the same process is caught here).
_OPEN_DIRS: set[str] = set()
_OPEN_DIRS_LOCK = threading.Lock()


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


@dataclasses.dataclass(frozen=True, slots=True)
class AppendResult:
    """Where an append landed: ``duplicate`` when it repeated one of the producer's last five
    batches, in which case the offsets are those of the original append."""

    topic: str
    partition: int
    first_offset: int
    last_offset: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool = False


def validate_topic_name(name: object) -> str:
    """Kafka's topic-name rules (``Topic.validate``): 1-249 characters from ``[a-zA-Z0-9._-]``,
    not ``.`` or ``..``. A valid name can never reach outside the log directory."""
    if not isinstance(name, str):
        raise InvalidTopicError(f"a topic name must be a str, not {type(name).__name__}")
    if not name:
        raise InvalidTopicError("topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(f"topic name is illegal, it can't be longer than "
                                f"{MAX_TOPIC_NAME_LENGTH} characters, topic name: {name[:40]}...",
                                limit=MAX_TOPIC_NAME_LENGTH)
    if not _LEGAL_TOPIC.match(name):
        bad = sorted({c for c in name if not re.match(r"[a-zA-Z0-9._-]", c)})
        raise InvalidTopicError(f"topic name {name!r} is illegal: it contains {''.join(bad)!r}; "
                                "only ASCII alphanumerics, '.', '_' and '-' are allowed")
    return name


def _collision_name(name: str) -> str:
    # Kafka refuses topics whose names differ only by '.' vs '_' (metric names collide).
    return name.replace(".", "_")


class _Partition:
    """One partition: its log, the lock serialising appends, its producer state."""

    __slots__ = ("topic", "partition", "log", "lock", "state", "cleaner_offset", "name")

    def __init__(self, topic: str, partition: int, log_: Log, cleaner_offset: int | None) -> None:
        self.topic = topic
        self.partition = partition
        self.log = log_
        self.lock = threading.Lock()
        self.name = f"{topic}-{partition}"
        self.state = ProducerStateManager(name=self.name)
        self.cleaner_offset = cleaner_offset

    def append_batch(self, data: Any, producer_id: int, producer_epoch: int, base_sequence: int,
                     count: int, *, verify_crc: bool = True) -> tuple[int, int]:
        """The producer's append of one batch: (first offset, log-append time or -1). A repeat
        of one of the producer's last five batches returns the original first offset.
        ``verify_crc=False`` only for bytes this process encoded and nothing has touched since."""
        with self.lock:
            lg = self.log
            epoch = None if lg.epoch_cache.latest_epoch >= 0 else 0
            if producer_id >= 0 and base_sequence >= 0:
                last_seq = (base_sequence + count - 1) % (2**31)
                dup = self.state.check(producer_id, producer_epoch, base_sequence, last_seq)
                if dup is not None:
                    return dup.first_offset, -1
                info = lg.append(data, leader_epoch=epoch, verify_crc=verify_crc)
                self.state.update(producer_id, producer_epoch, base_sequence, last_seq,
                                  info.first_offset, info.last_offset, info.max_timestamp)
            else:
                info = lg.append(data, leader_epoch=epoch, verify_crc=verify_crc)
            return info.first_offset, info.log_append_time

    def last_stable_offset(self) -> int:
        """The log's last stable offset (the high watermark unless a transaction is open)."""
        return self.log.last_stable_offset


class _Topic:
    __slots__ = ("name", "partitions", "config", "overrides", "topic_id", "internal")

    def __init__(self, name: str, config: LogConfig, overrides: dict[str, Any],
                 topic_id: str | None, internal: bool) -> None:
        self.name = name
        self.partitions: list[_Partition] = []
        self.config = config
        self.overrides = overrides
        self.topic_id = topic_id
        self.internal = internal


def _new_topic_id() -> str:
    """A Kafka topic id: a random UUID in URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


class Store:
    """A Kafka-layout log directory. Create with :meth:`open`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("use Store.open(directory) to open a store")

    # ---------------------------------------------------------------------------------------------
    # Opening
    # ---------------------------------------------------------------------------------------------

    @classmethod
    def open(cls, directory: str | os.PathLike[str],
             config: BrokerConfig | Mapping[str, Any] | None = None, *,
             clock: Clock | None = None, read_only: bool = False, create: bool = True) -> Store:
        """Open the log directory ``directory`` (created unless ``create=False``).

        ``config`` holds broker keys (``log.segment.bytes``, ``log.retention.hours``, ...):
        the defaults of every topic's settings and the intervals of the background tasks.
        ``read_only`` opens a directory another program owns — a Kafka broker's ``log.dir``,
        even while the broker runs — without taking the lock or changing any file.
        A writable open takes the directory's lock: a second store on the same directory, in
        this process or another (or a Kafka broker), gets ``LogDirectoryLockedError``.
        """
        self = object.__new__(cls)
        self._init(os.fspath(directory), config, clock or Clock(), read_only, create)
        try:
            self._load()
        except BaseException:
            self._abandon()
            raise
        return self

    def _init(self, directory: str, config: BrokerConfig | Mapping[str, Any] | None, clock: Clock,
              read_only: bool, create: bool) -> None:
        if config is None:
            config = BrokerConfig()
        elif not isinstance(config, BrokerConfig):
            config = BrokerConfig.from_dict(config)
        self.config: BrokerConfig = config
        self.dir = os.path.abspath(directory)
        self.clock = clock
        self.read_only = read_only
        self._lock = threading.RLock()
        self._topics: dict[str, _Topic] = {}
        self._generation = Generation()
        self._closed = False
        self._lock_fd: int | None = None
        self._registered = False
        self._scheduler: Scheduler | None = None
        self._tasks: list[Any] = []
        self._data_cond = threading.Condition()
        self._waiters = 0
        self._clients: list[Any] = []
        self._group_members: dict[str, list[Consumer]] = {}
        self._next_producer_id = 0
        self._producer_id_block_end = 0
        self.group_offsets = GroupOffsets(self)
        if not os.path.isdir(self.dir):
            if read_only or not create:
                raise StorageError(f"log directory not found: {self.dir}", path=self.dir)
            os.makedirs(self.dir, exist_ok=True)
        self._recovery_file = OffsetCheckpointFile(os.path.join(self.dir, RECOVERY_POINT_FILE))
        self._log_start_file = OffsetCheckpointFile(os.path.join(self.dir, LOG_START_FILE))
        self._hw_file = OffsetCheckpointFile(os.path.join(self.dir, REPLICATION_OFFSET_FILE))
        self._cleaner_file = OffsetCheckpointFile(os.path.join(self.dir, CLEANER_OFFSET_FILE))

    def _acquire_lock(self) -> None:
        real = os.path.realpath(self.dir)
        with _OPEN_DIRS_LOCK:
            if real in _OPEN_DIRS:
                raise LogDirectoryLockedError(
                    "the log directory is already open in this process; close that store first "
                    "(or open this one with read_only=True)", path=self.dir)
            path = os.path.join(self.dir, LOCK_FILE)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                # A POSIX record lock, as Kafka's FileChannel.tryLock takes: a broker and a
                # store exclude each other.
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.EACCES, errno.EAGAIN):
                    raise LogDirectoryLockedError(
                        "the log directory is locked by another process (a store or a Kafka "
                        "broker holds its .lock); open it with read_only=True to read it",
                        path=self.dir) from None
                raise
            self._lock_fd = fd
            _OPEN_DIRS.add(real)
            self._registered = True

    def _release_lock(self) -> None:
        with _OPEN_DIRS_LOCK:
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None
            if self._registered:
                _OPEN_DIRS.discard(os.path.realpath(self.dir))
                self._registered = False

    def _read_offsets(self, f: OffsetCheckpointFile) -> dict[tuple[str, int], int]:
        try:
            return f.read()
        except CorruptCheckpointError as exc:
            log.warning("%s; treating it as empty", exc)
            return {}

    def _load(self) -> None:
        if not self.read_only:
            self._acquire_lock()
        meta = self._read_metadata()
        recovery = self._read_offsets(self._recovery_file)
        log_start = self._read_offsets(self._log_start_file)
        hws = self._read_offsets(self._hw_file)
        cleaner = self._read_offsets(self._cleaner_file)
        marker = os.path.join(self.dir, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        if not clean and not self.read_only and (recovery or os.listdir(self.dir)):
            log.info("%s was not shut down cleanly: recovering logs past their recovery points",
                     self.dir)
        if not self.read_only:
            self._scheduler = Scheduler(self.clock, on_error=self._task_failed,
                                        name=f"seglog-store {os.path.basename(self.dir)}")
        topics_meta: dict[str, Any] = meta.get("topics", {})
        found: dict[str, list[int]] = {}
        for name in sorted(os.listdir(self.dir)):
            path = os.path.join(self.dir, name)
            if not os.path.isdir(path):
                continue
            if _DELETE_DIR.match(name):
                if not self.read_only:
                    shutil.rmtree(path, ignore_errors=True)
                continue
            parsed = parse_partition_dir(name)
            if parsed is None:
                continue
            tname, partition = parsed
            try:
                validate_topic_name(tname)
            except InvalidTopicError:
                log.warning("ignoring %s: not a valid topic-partition directory name", path)
                continue
            found.setdefault(tname, []).append(partition)
        for name in sorted(set(found) | set(topics_meta)):
            tm = topics_meta.get(name, {})
            overrides = dict(tm.get("config", {}))
            count = int(tm.get("partitions", 0))
            present = found.get(name, [])
            if not tm and present:
                count = max(present) + 1
                if name == OFFSETS_TOPIC:
                    # A broker holds only some partitions; the group hash needs them all.
                    count = max(count, self.config.offsets_topic_num_partitions)
            topic = self._make_topic(name, overrides, tm.get("topic_id") or self._read_topic_id(name, present))
            for p in range(count):
                tp = (name, p)
                exists = p in present
                if not exists and self.read_only:
                    continue
                if not exists and tm:
                    log.warning("partition directory %s-%d is missing; creating it empty", name, p)
                lg = Log.open(os.path.join(self.dir, f"{name}-{p}"), topic.config, clock=self.clock,
                              scheduler=self._scheduler, read_only=self.read_only,
                              recovery_point=recovery.get(tp, 0), log_start_offset=log_start.get(tp, 0),
                              clean_shutdown=clean, high_watermark=hws.get(tp),
                              dir_checkpoints=False)
                topic.partitions.append(_Partition(name, p, lg, cleaner.get(tp)))
            self._topics[name] = topic
        self._next_producer_id = int(meta.get("producer_id_block_end", 0))
        self._producer_id_block_end = self._next_producer_id
        if not self.read_only:
            if clean:
                os.unlink(marker)
            for t in self._topics.values():
                for part in t.partitions:
                    self._write_partition_metadata(part, t)
            self._write_metadata()
            self.checkpoint()
            self._schedule_tasks()

    def _read_metadata(self) -> dict[str, Any]:
        path = os.path.join(self.dir, METADATA_FILE)
        try:
            with open(path, encoding="utf-8") as f:
                meta = json.load(f)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise StorageError(f"cannot read the store metadata {path}: {exc}", path=path) from None
        if not isinstance(meta, dict) or meta.get("version") != 1:
            raise StorageError(f"unsupported store metadata in {path} (expected version 1)", path=path)
        return meta

    def _write_metadata(self) -> None:
        if self.read_only:
            return
        topics = {}
        for name, t in sorted(self._topics.items()):
            topics[name] = {"partitions": len(t.partitions), "topic_id": t.topic_id,
                            "config": {k: _jsonable(v) for k, v in sorted(t.overrides.items())}}
        meta = {"version": 1, "producer_id_block_end": self._producer_id_block_end, "topics": topics}
        atomic_write(os.path.join(self.dir, METADATA_FILE),
                     (json.dumps(meta, indent=1, sort_keys=True) + "\n").encode("utf-8"))

    def _read_topic_id(self, name: str, partitions: Sequence[int]) -> str | None:
        for p in partitions:
            path = os.path.join(self.dir, f"{name}-{p}", PARTITION_METADATA_FILE)
            try:
                with open(path, encoding="utf-8") as f:
                    for line in f.read().splitlines():
                        key, _, value = line.partition(":")
                        if key.strip() == "topic_id" and value.strip():
                            return value.strip()
            except OSError:
                continue
        return None

    def _write_partition_metadata(self, part: _Partition, topic: _Topic) -> None:
        if topic.topic_id is None:
            return
        path = os.path.join(part.log.dir, PARTITION_METADATA_FILE)
        text = f"version: 0\ntopic_id: {topic.topic_id}"
        try:
            with open(path, encoding="utf-8") as f:
                if f.read() == text:
                    return
        except OSError:
            pass
        atomic_write(path, text.encode("utf-8"))

    def _make_topic(self, name: str, overrides: Mapping[str, Any], topic_id: str | None) -> _Topic:
        internal = name in INTERNAL_TOPICS
        base = dict(overrides)
        if name == OFFSETS_TOPIC:
            defaults = {"cleanup.policy": "compact", "segment.bytes": self.config.offsets_topic_segment_bytes,
                        "compression.type": "producer"}
            base = {**defaults, **base}
        config = self.config.topic_config(base)
        return _Topic(name, config, dict(overrides), topic_id, internal)

    def _schedule_tasks(self) -> None:
        assert self._scheduler is not None
        cfg = self.config

        def every(name: str, period: int, fn: Any) -> None:
            if period > 0:
                self._tasks.append(self._scheduler.schedule(  # type: ignore[union-attr]
                    name, fn, delay_ms=period, period_ms=period))

        every("recovery-point checkpoint", cfg.log_flush_offset_checkpoint_interval_ms,
              self._flush_rolled_and_checkpoint)
        every("log-start checkpoint", cfg.log_flush_start_offset_checkpoint_interval_ms,
              self.checkpoint_log_start_offsets)
        every("high-watermark checkpoint", cfg.replica_high_watermark_checkpoint_interval_ms,
              self.checkpoint_high_watermarks)
        every("retention", cfg.log_retention_check_interval_ms, self.run_retention)
        if cfg.log_cleaner_enable:
            every("cleaner", cfg.log_cleaner_backoff_ms, self.run_cleaner)

    def _task_failed(self, name: str, exc: BaseException) -> None:
        log.error("background task %r of %s failed: %s", name, self.dir, exc)

    def _abandon(self) -> None:
        """Undo a failed open."""
        if self._scheduler is not None:
            self._scheduler.shutdown()
        for topic in self._topics.values():
            for part in topic.partitions:
                try:
                    part.log.close()
                except Exception:  # noqa: BLE001 - already failing
                    pass
        self._release_lock()
        self._closed = True

    # ---------------------------------------------------------------------------------------------
    # Topics
    # ---------------------------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1,
                     config: Mapping[str, Any] | None = None, *,
                     exist_ok: bool = False) -> TopicDescription:
        """Create ``name`` with ``partitions`` partitions and topic-config overrides ``config``
        (Kafka's topic keys: ``retention.ms``, ``cleanup.policy``, ``segment.bytes``...)."""
        self._check_writable()
        validate_topic_name(name)
        if name in INTERNAL_TOPICS:
            raise InvalidTopicError(f"{name} is an internal topic; it is created by the store itself")
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise InvalidPartitionsError(f"number of partitions must be at least 1, got {partitions!r}")
        overrides = dict(config or {})
        topic_config = self.config.topic_config(overrides)  # validates the overrides
        with self._lock:
            existing = self._topics.get(name)
            if existing is not None:
                if exist_ok:
                    return self._describe_topic(existing)
                raise TopicAlreadyExistsError(f"topic {name!r} already exists")
            clash = [t for t in self._topics if _collision_name(t) == _collision_name(name)]
            if clash:
                raise InvalidTopicError(f"topic {name!r} collides with existing topic {clash[0]!r} "
                                        "(names differing only in '.' and '_' are not allowed)")
            topic = _Topic(name, topic_config, {k: v for k, v in overrides.items()}, _new_topic_id(), False)
            topic.config = topic_config
            self._add_partitions(topic, partitions)
            self._topics[name] = topic
            self._generation.value += 1
            self._write_metadata()
            self.checkpoint()
            return self._describe_topic(topic)

    def _add_partitions(self, topic: _Topic, total: int) -> None:
        for p in range(len(topic.partitions), total):
            path = os.path.join(self.dir, f"{topic.name}-{p}")
            lg = Log.open(path, topic.config, clock=self.clock, scheduler=self._scheduler,
                          recovery_point=0, log_start_offset=0, clean_shutdown=True,
                          dir_checkpoints=False)
            part = _Partition(topic.name, p, lg, None)
            topic.partitions.append(part)
            self._write_partition_metadata(part, topic)

    def create_partitions(self, name: str, total: int) -> TopicDescription:
        """Grow topic ``name`` to ``total`` partitions (Kafka's CreatePartitions; partitions
        cannot be removed, and keyed records may map to other partitions afterwards)."""
        self._check_writable()
        with self._lock:
            topic = self._topic(name)
            if total <= len(topic.partitions):
                raise InvalidPartitionsError(f"topic {name!r} has {len(topic.partitions)} partitions; "
                                             f"the new total {total} must be larger")
            self._add_partitions(topic, total)
            self._generation.value += 1
            self._write_metadata()
            self.checkpoint()
            return self._describe_topic(topic)

    def delete_topic(self, name: str) -> None:
        """Delete topic ``name`` and its data; committed offsets of it are removed too."""
        self._check_writable()
        if self._topic(name).internal:
            raise InvalidTopicError(f"{name} is an internal topic and cannot be deleted")
        # Lingering records for the topic are written first (outside the store lock: a
        # producer may hold its own lock while it waits for the store's).
        self._flush_producers()
        with self._lock:
            topic = self._topic(name)
            del self._topics[name]
            self._generation.value += 1
            doomed = []
            for part in topic.partitions:
                with part.lock:
                    part.log.close()
                target = os.path.join(self.dir, _delete_dir_name(part.topic, part.partition))
                os.rename(part.log.dir, target)
                doomed.append(target)
            self._write_metadata()
            self.checkpoint()
        for path in doomed:
            shutil.rmtree(path, ignore_errors=True)
        gone: dict[str, dict[tuple[str, int], OffsetAndMetadata | None]] = {}
        for group in self.group_offsets.groups():
            for (t, p) in self.group_offsets.group_offsets(group):
                if t == name:
                    gone.setdefault(group, {})[(t, p)] = None
        for group, offsets in gone.items():
            self.group_offsets.commit(group, offsets)

    def alter_topic_config(self, name: str, set: Mapping[str, Any] | None = None,  # noqa: A002
                           delete: Iterable[str] = ()) -> LogConfig:
        """Change topic-config overrides (Kafka's IncrementalAlterConfigs); returns the new
        effective config. Takes effect for new segments and the next background runs."""
        self._check_writable()
        with self._lock:
            topic = self._topic(name)
            overrides = dict(topic.overrides)
            for key in delete:
                overrides.pop(key, None)
            overrides.update(set or {})
            new = self._make_topic(name, overrides, topic.topic_id).config
            topic.overrides = overrides
            topic.config = new
            for part in topic.partitions:
                part.log.config = new
            self._generation.value += 1
            self._write_metadata()
            return new

    def topics(self, *, internal: bool = False) -> list[str]:
        """Names of the topics, sorted (internal ones such as __consumer_offsets only if asked)."""
        with self._lock:
            return sorted(n for n, t in self._topics.items() if internal or not t.internal)

    def partitions_for(self, topic: str) -> int:
        """Number of partitions of ``topic`` (UnknownTopicOrPartitionError if it does not exist)."""
        return len(self._topic(topic).partitions)

    def topic_config(self, topic: str) -> LogConfig:
        return self._topic(topic).config

    def describe(self, topic: str | None = None, *, internal: bool = True) -> list[TopicDescription]:
        """Topics with their partitions: offsets, segments, sizes."""
        with self._lock:
            if topic is not None:
                return [self._describe_topic(self._topic(topic))]
            return [self._describe_topic(t) for n, t in sorted(self._topics.items())
                    if internal or not t.internal]

    def _describe_topic(self, topic: _Topic) -> TopicDescription:
        parts = []
        for part in topic.partitions:
            lg = part.log
            segs = lg.segments
            parts.append(PartitionDescription(
                part.partition, lg.log_start_offset, lg.high_watermark, lg.log_end_offset,
                lg.recovery_point, len(segs), sum(s.size for s in segs), lg.dir))
        return TopicDescription(topic.name, topic.topic_id, topic.internal, tuple(parts),
                                dict(topic.overrides))

    def _topic(self, name: str) -> _Topic:
        self._check_open()
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist in {self.dir}")
        return topic

    def _partition(self, topic: str, partition: int) -> _Partition:
        t = self._topic(topic)
        if not 0 <= partition < len(t.partitions) or t.partitions[partition].partition != partition:
            for part in t.partitions:
                if part.partition == partition:
                    return part
            raise UnknownTopicOrPartitionError(
                f"partition {partition} of topic {topic!r} does not exist (the topic has "
                f"{len(t.partitions)} partition(s))")
        return t.partitions[partition]

    def log(self, topic: str, partition: int) -> Log:
        """The partition log itself (read it, but append through the store or a producer so
        producer state and waiting consumers stay informed)."""
        return self._partition(topic, partition).log

    def _existing_log(self, topic: str, partition: int) -> Log | None:
        t = self._topics.get(topic)
        if t is None:
            return None
        for part in t.partitions:
            if part.partition == partition:
                return part.log
        return None

    def _offsets_topic_partitions(self) -> int:
        t = self._topics.get(OFFSETS_TOPIC)
        if t is not None and not self.read_only and t.partitions:
            return len(t.partitions)
        return self.config.offsets_topic_num_partitions

    def _ensure_offsets_log(self, partition: int) -> Log:
        self._check_writable()
        with self._lock:
            topic = self._topics.get(OFFSETS_TOPIC)
            if topic is None:
                topic = self._make_topic(OFFSETS_TOPIC, {}, _new_topic_id())
                self._add_partitions(topic, self.config.offsets_topic_num_partitions)
                self._topics[OFFSETS_TOPIC] = topic
                self._generation.value += 1
                self._write_metadata()
                self.checkpoint()
            return self._partition(OFFSETS_TOPIC, partition).log

    def ensure_topic(self, name: str) -> _Topic:
        """The topic, created with ``num.partitions`` partitions when missing and
        ``auto.create.topics.enable`` is set (as a broker does on first produce)."""
        topic = self._topics.get(name)
        if topic is not None:
            return topic
        if self.read_only or not self.config.auto_create_topics_enable:
            return self._topic(name)
        self.create_topic(name, self.config.num_partitions, exist_ok=True)
        return self._topics[name]

    # ---------------------------------------------------------------------------------------------
    # Appends
    # ---------------------------------------------------------------------------------------------

    def append(self, topic: str, partition: int, records: Any) -> AppendResult:
        """Append already-encoded RecordBatch v2 bytes (Kafka's produce path for one partition):
        the batches are validated, idempotent producers' sequences checked (a repeat of one of a
        producer's last five batches returns the original offsets), offsets assigned."""
        self._check_writable()
        view = memoryview(records).cast("B")
        heads = batch_headers(view, verify_crc=True)
        if not heads:
            raise InvalidRecordError("nothing to append: the buffer holds no batch")
        part = self._partition(topic, partition)
        t = self._topics[topic]
        if t.config.compact:
            for h in heads:
                if h.is_control:
                    continue
                cols = decode_columns(view[h.position:h.position + h.size], keys=True, headers=False)
                if cols.key_null_count:
                    raise InvalidRecordError(
                        f"compacted topic {topic!r} cannot accept a record without a key (batch at "
                        f"byte {h.position})", position=h.position)
        if len(heads) == 1 or all(h.producer_id < 0 for h in heads):
            return self._append_part(part, view, heads)
        results = [self._append_part(part, view[h.position:h.position + h.size], [h]) for h in heads]
        return dataclasses.replace(results[-1], first_offset=results[0].first_offset,
                                   duplicate=all(r.duplicate for r in results))

    def _append_part(self, part: _Partition, view: memoryview, heads: Sequence[Any]) -> AppendResult:
        h = heads[0]
        if len(heads) == 1 and h.producer_id >= 0 and not h.is_control:
            return self._append_to(part.topic, part.partition, view, producer_id=h.producer_id,
                                   producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
                                   count=h.last_offset - h.base_offset + 1)
        with part.lock:
            info = part.log.append(view, leader_epoch=_epoch(part.log))
            first = info.first_offset
            for b in heads:
                n = b.last_offset - b.base_offset + 1
                if b.producer_id >= 0 and not b.is_control:
                    part.state.update(b.producer_id, b.producer_epoch, b.base_sequence,
                                      last_sequence(b.base_sequence, n),
                                      first, first + n - 1, b.max_timestamp)
                first += n
        self._notify()
        return AppendResult(part.topic, part.partition, info.first_offset, info.last_offset,
                            info.log_append_time, info.log_start_offset)

    def _append_to(self, topic: str, partition: int, data: Any, *, producer_id: int = -1,
                   producer_epoch: int = -1, base_sequence: int = -1, count: int = 0) -> AppendResult:
        """The producer's append: one batch whose producer fields the caller already knows."""
        part = self._partition(topic, partition)
        with part.lock:
            if producer_id >= 0 and base_sequence >= 0:
                last_seq = (base_sequence + count - 1) % (2**31)
                dup = part.state.check(producer_id, producer_epoch, base_sequence, last_seq)
                if dup is not None:
                    return AppendResult(topic, partition, dup.first_offset, dup.last_offset, -1,
                                        part.log.log_start_offset, duplicate=True)
                info = part.log.append(data, leader_epoch=_epoch(part.log))
                part.state.update(producer_id, producer_epoch, base_sequence, last_seq,
                                  info.first_offset, info.last_offset, info.max_timestamp)
            else:
                info = part.log.append(data, leader_epoch=_epoch(part.log))
        self._notify()
        return AppendResult(topic, partition, info.first_offset, info.last_offset,
                            info.log_append_time, info.log_start_offset)

    def _notify(self) -> None:
        if self._waiters:
            with self._data_cond:
                self._data_cond.notify_all()

    def _wait_for_data(self, timeout_ms: int) -> None:
        """Block until an append happens or ``timeout_ms`` passes on the store's clock. With a
        ManualClock nothing can append meanwhile unless a scheduled task does, so the clock is
        advanced instead (running due tasks such as a producer's linger timer)."""
        if timeout_ms <= 0:
            return
        if isinstance(self.clock, ManualClock):
            self.clock.advance(timeout_ms)
            return
        with self._data_cond:
            self._waiters += 1
            try:
                self._data_cond.wait(timeout_ms / 1000.0)
            finally:
                self._waiters -= 1

    def delete_records(self, topic: str, partition: int, before_offset: int) -> int:
        """Kafka's DeleteRecords: make offsets below ``before_offset`` unreadable (whole segments
        below it are removed). Returns the new log start offset."""
        self._check_writable()
        part = self._partition(topic, partition)
        with part.lock:
            start = part.log.delete_records(before_offset)
        self.checkpoint_log_start_offsets()
        return start

    # ---------------------------------------------------------------------------------------------
    # Producer / consumer
    # ---------------------------------------------------------------------------------------------

    def producer(self, config: Mapping[str, Any] | None = None, **settings: Any) -> Producer:
        """An embedded producer (see :class:`seglog.producer.Producer`); settings by Kafka key in
        ``config`` or by attribute name: ``acks``, ``linger_ms``, ``batch_size``,
        ``compression_type``, ``enable_idempotence``..."""
        from seglog.producer import Producer

        self._check_writable()
        p = Producer(self, config, **settings)
        self._clients.append(p)
        return p

    def consumer(self, group_id: str | None = None, config: Mapping[str, Any] | None = None,
                 **settings: Any) -> Consumer:
        """An embedded consumer (see :class:`seglog.consumer.Consumer`)."""
        from seglog.consumer import Consumer

        self._check_open()
        c = Consumer(self, group_id, config, **settings)
        self._clients.append(c)
        return c

    def serve(self, host: str = "127.0.0.1", port: int = 0, **options: Any) -> Any:
        """Serve this store to Kafka clients over Kafka's wire protocol, on ``host:port``
        (port 0: a free port) from a thread of its own, until the returned handle's ``close()``
        (or the end of a ``with`` block, or closing the store). ``handle.bootstrap_servers`` is
        the ``host:port`` to give clients. The listener's limits come from the store's broker
        config (``socket.request.max.bytes``, ``connections.max.idle.ms``,
        ``group.min.session.timeout.ms``, ``group.max.session.timeout.ms``,
        ``group.initial.rebalance.delay.ms``); options override them: ``node_id``,
        ``max_request_bytes``, ``idle_ms``, ``group_min_session_timeout_ms``,
        ``group_max_session_timeout_ms``, ``group_initial_rebalance_delay_ms``. See
        ``docs/kafka-protocol.md``."""
        from seglog.kafka.server import ServerHandle

        self._check_open()
        return ServerHandle(self, host, port, **options)

    def _flush_producers(self) -> None:
        for client in list(self._clients):
            flush = getattr(client, "flush", None)
            if flush is not None and not getattr(client, "_closed", True):
                flush()

    def _forget_client(self, client: Any) -> None:
        try:
            self._clients.remove(client)
        except ValueError:
            pass

    def _allocate_producer_id(self) -> int:
        with self._lock:
            if self._next_producer_id >= self._producer_id_block_end:
                self._producer_id_block_end = self._next_producer_id + _PRODUCER_ID_BLOCK
                self._write_metadata()
            pid = self._next_producer_id
            self._next_producer_id += 1
            return pid

    # ---------------------------------------------------------------------------------------------
    # Background work
    # ---------------------------------------------------------------------------------------------

    def _partitions(self) -> Iterator[_Partition]:
        with self._lock:
            parts = [p for t in self._topics.values() for p in t.partitions]
        yield from parts

    def run_retention(self) -> int:
        """Delete segments past ``retention.ms`` / ``retention.bytes`` in every log whose
        cleanup policy includes ``delete``; returns how many segments went."""
        if self.read_only or self._closed:
            return 0
        deleted = 0
        for part in self._partitions():
            with part.lock:
                if not part.log.closed:
                    deleted += part.log.delete_old_segments()
        if deleted:
            self.checkpoint_log_start_offsets()
        return deleted

    def run_cleaner(self) -> int:
        """Compact every log whose cleanup policy includes ``compact`` and that needs it;
        returns how many logs were cleaned."""
        if self.read_only or self._closed:
            return 0
        from seglog.cleaner import Cleaner

        cleaned = 0
        cleaner = Cleaner(self.clock)
        for part in self._partitions():
            if not part.log.config.compact or part.log.closed:
                continue
            with part.lock:
                if part.log.closed:
                    continue
                result = cleaner.clean(part.log, part.cleaner_offset)
            if result is not None:
                part.cleaner_offset = result.first_dirty_offset
                cleaned += 1
        if cleaned:
            self.checkpoint_cleaner_offsets()
            self.checkpoint_log_start_offsets()
        return cleaned

    def _flush_rolled_and_checkpoint(self) -> None:
        # Kafka flushes a segment once it is rolled; this moves each recovery point up to the
        # active segment's base without fsyncing the active segment more than needed.
        for part in self._partitions():
            lg = part.log
            if lg.closed:
                continue
            base = lg.active.base_offset
            if lg.recovery_point < base:
                lg.flush(base)
        self.checkpoint_recovery_points()

    def flush(self) -> None:
        """fsync every log (moves every recovery point to its log end) and checkpoint."""
        self._check_writable()
        for part in self._partitions():
            if not part.log.closed:
                part.log.flush()
        self.checkpoint()

    def checkpoint(self) -> None:
        """Write all four dir-level checkpoint files."""
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()
        self.checkpoint_cleaner_offsets()

    def _collect(self, fn: Any) -> dict[tuple[str, int], int]:
        out = {}
        for part in self._partitions():
            value = fn(part)
            if value is not None:
                out[(part.topic, part.partition)] = value
        return out

    def checkpoint_recovery_points(self) -> None:
        if not self.read_only:
            self._recovery_file.write(self._collect(lambda p: p.log.recovery_point))

    def checkpoint_log_start_offsets(self) -> None:
        def start(p: _Partition) -> int | None:
            segs = p.log.segments
            first = segs[0].base_offset if segs else 0
            return p.log.log_start_offset if p.log.log_start_offset > first else None

        if not self.read_only:
            self._log_start_file.write(self._collect(start))

    def checkpoint_high_watermarks(self) -> None:
        if not self.read_only:
            self._hw_file.write(self._collect(lambda p: p.log.high_watermark))

    def checkpoint_cleaner_offsets(self) -> None:
        if not self.read_only:
            self._cleaner_file.write(self._collect(lambda p: p.cleaner_offset))

    # ---------------------------------------------------------------------------------------------
    # Close
    # ---------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close producers (sending what they hold) and consumers (committing if auto-commit
        is on), flush and close every log, write the checkpoints and the clean-shutdown
        marker, and release the directory lock."""
        if self._closed:
            return
        # Clients first, outside the store lock (a producer may hold its own lock while it
        # waits for the store's).
        for client in list(self._clients):
            try:
                client.close()
            except Exception as exc:  # noqa: BLE001 - closing the store must go on
                log.error("closing %r failed: %s", client, exc)
        with self._lock:
            if self._closed:
                return
            self._clients.clear()
            if self._scheduler is not None:
                self._scheduler.shutdown()
            errors = []
            for part in self._partitions():
                try:
                    with part.lock:
                        part.log.close()
                except Exception as exc:  # noqa: BLE001
                    errors.append(exc)
                    log.error("closing %s failed: %s", part.log.dir, exc)
            try:
                if not self.read_only:
                    self.checkpoint()
                    if not errors:
                        atomic_write(os.path.join(self.dir, CLEAN_SHUTDOWN_FILE),
                                     b'{"version":0,"brokerEpoch":-1}')
            finally:
                self._closed = True
                self._release_lock()
            if errors:
                raise KafkaStorageError(f"{len(errors)} log(s) of {self.dir} failed to close; the "
                                        f"first error: {errors[0]}", path=self.dir) from errors[0]

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"the store at {self.dir} is closed", path=self.dir)

    def _check_writable(self) -> None:
        self._check_open()
        if self.read_only:
            raise KafkaStorageError(f"the store at {self.dir} is open read-only", path=self.dir)

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("read-only" if self.read_only else "open")
        return f"Store({self.dir!r}, topics={len(self._topics)}, {state})"


def _epoch(lg: Log) -> int | None:
    # A store's own logs are led at epoch 0 (what a single Kafka broker writes); a log that
    # already has epochs keeps its latest.
    return None if lg.epoch_cache.latest_epoch >= 0 else 0


def _delete_dir_name(topic: str, partition: int) -> str:
    suffix = f"-{partition}.{uuid.uuid4().hex}-delete"
    return topic[: 255 - len(suffix)] + suffix


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return value


__all__ = [
    "AppendResult",
    "OffsetAndMetadata",
    "PartitionDescription",
    "Store",
    "TopicDescription",
    "TopicPartition",
    "validate_topic_name",
    "LogAppendInfo",
]
