"""A log directory of topics and partitions, laid out as a Kafka broker's ``log.dir`` (Kafka's
``LogManager``). :class:`seglog.Store` (:mod:`seglog.store`) is this class with the embedded
producer, consumer and Kafka protocol server on top.

>>> import tempfile
>>> from seglog.storage.log_manager import LogManager
>>> from seglog.storage.records import encode_batch
>>> with LogManager.open(tempfile.mkdtemp()) as logs:
...     _ = logs.create_topic("orders", partitions=3)
...     logs.append("orders", 0, encode_batch([b"hello"])).last_offset
0

Layout (``docs/kafka-format.md`` §8.1)::

    <dir>/
      .lock                              fcntl-locked while a writable store is open
      .kafka_cleanshutdown               written by close(), removed once the logs are loaded
      meta.properties                    Kafka's broker metadata (version=0, broker.id when one
                                         is configured); an existing one is checked and kept
      recovery-point-offset-checkpoint   per partition: offset below which data is fsynced
      replication-offset-checkpoint      per partition: high watermark
      log-start-offset-checkpoint        partitions whose log start is past their first segment
      cleaner-offset-checkpoint          compacted partitions: first offset not yet cleaned
      seglog-metadata.json               topics, partition counts, config overrides, topic ids,
                                         the producer-id block (what a Kafka cluster keeps in
                                         ZooKeeper/KRaft; absent in a broker's dir: defaults),
                                         and a topic change under way (undone at the next open
                                         if a crash interrupted it)
      <topic>-<partition>/               one partition log each (seglog.storage.log.Log)
      __consumer_offsets-<n>/            committed offsets (seglog.storage.group_offsets); each made at
                                         the first commit of a group that maps to it

The store is its log dir's owner (:class:`seglog.storage.logdir.LogDir`: the lock, the dir-level
checkpoint files, the clean-shutdown marker, partition discovery): while a writable store is
open no other writer — another store, a :class:`seglog.Log` opened on one of its partitions,
a replica node, the Spark writer, a Kafka broker — gets in. It opens every log with the values
read from the checkpoint files and rewrites them for all partitions at once (periodically on
the injected clock, and at close). A crash between checkpoints only costs recovery time: a
partition's recovery point never runs ahead of what was fsynced.

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
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from seglog._native.accumulator import Generation
from seglog.config import BrokerConfig, LogConfig
from seglog.errors import (
    InvalidPartitionsError,
    InvalidRecordError,
    InvalidTopicError,
    KafkaStorageError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from seglog.storage.checkpoints import ensure_meta_properties, fsync_dir
from seglog.storage.cleaner import Cleaner
from seglog.storage.descriptors import check_descriptor_limit
from seglog.storage.group_offsets import OFFSETS_TOPIC, GroupOffsets, OffsetAndMetadata
from seglog.storage.log import Log
from seglog.storage.logdir import LogDir
from seglog.storage.producer_state import SNAPSHOT_SUFFIX, decode_snapshot
from seglog.storage.records import batch_headers
from seglog.storage.store_metadata import (
    read_store_metadata,
    read_topic_id,
    write_partition_metadata,
    write_store_metadata,
)
from seglog.storage.topic import (
    INTERNAL_TOPICS,
    PartitionDescription,
    StoredPartition,
    StoredTopic,
    TopicDescription,
    collision_name,
    new_topic_id,
    own_leader_epoch,
    validate_topic_name,
)
from seglog.util.args import bytes_arg, int_arg
from seglog.util.clock import Clock, ManualClock, Scheduler
from seglog.util.closing import Closeable

if TYPE_CHECKING:
    from typing_extensions import Self

log = logging.getLogger("seglog.storage.log_manager")

#: Producer ids are reserved in blocks of this many in the store metadata.
_PRODUCER_ID_BLOCK = 1000


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


class LogManager(Closeable):
    """A Kafka-layout log directory. Create with :meth:`open`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(f"use {type(self).__name__}.open(directory) to open a store")

    # ---------------------------------------------------------------------------------------------
    # Opening
    # ---------------------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        config: BrokerConfig | Mapping[str, Any] | None = None,
        *,
        clock: Clock | None = None,
        read_only: bool = False,
        create: bool = True,
    ) -> Self:
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

    def _init(
        self,
        directory: str,
        config: BrokerConfig | Mapping[str, Any] | None,
        clock: Clock,
        read_only: bool,
        create: bool,
    ) -> None:
        self.config: BrokerConfig = BrokerConfig.coerce(config)
        self.dir = os.path.abspath(directory)
        self.clock = clock
        self.read_only = read_only
        self._lock = threading.RLock()
        self._topics: dict[str, StoredTopic] = {}
        self._generation = Generation()
        self._closed = False
        self._logdir: LogDir | None = None
        self._scheduler: Scheduler | None = None
        self._tasks: list[Any] = []
        self._data_cond = threading.Condition()
        self._waiters = 0
        self._clients: list[Any] = []
        #: The embedded consumers of each group (:meth:`seglog.Store.consumer`).
        self._group_members: dict[str, list[Any]] = {}
        self._next_producer_id = 0
        self._producer_id_block_end = 0
        self._producer_ids_scanned = False
        self.group_offsets = GroupOffsets(self)
        self._create = create

    def _release_lock(self) -> None:
        if self._logdir is not None:
            self._logdir.close()

    def _load(self) -> None:
        # The log dir (its lock, checkpoint files, marker and partition discovery) belongs to
        # its LogDir; the store is that LogDir's owner.
        ld = self._logdir = LogDir.open(
            self.dir, read_only=self.read_only, create=self._create, holder=f"a store ({self.dir})"
        )
        if not self.read_only:
            ensure_meta_properties(self.dir, self.config.effective_node_id)
        self._recovery_file = ld.recovery_points
        self._log_start_file = ld.log_start_offsets
        self._hw_file = ld.high_watermarks
        self._cleaner_file = ld.cleaner_offsets
        meta = self._read_metadata()
        recovery = ld.read_offsets(self._recovery_file)
        log_start = ld.read_offsets(self._log_start_file)
        hws = ld.read_offsets(self._hw_file)
        cleaner = ld.read_offsets(self._cleaner_file)
        clean = ld.clean_shutdown
        if not clean and not self.read_only and (recovery or os.listdir(self.dir)):
            log.info("%s was not shut down cleanly: recovering logs past their recovery points", self.dir)
        if not self.read_only:
            self._scheduler = Scheduler(
                self.clock, on_error=self._task_failed, name=f"seglog-store {os.path.basename(self.dir)}"
            )
        topics_meta: dict[str, Any] = meta.get("topics", {})
        found: dict[str, list[int]] = {}
        ld.remove_deleted_dirs()
        for (tname, partition), path in ld.partition_dirs().items():
            try:
                validate_topic_name(tname)
            except InvalidTopicError:
                log.warning("ignoring %s: not a valid topic-partition directory name", path)
                continue
            found.setdefault(tname, []).append(partition)
        for name in sorted(set(found) | set(topics_meta)):
            tm = topics_meta.get(name, {})
            if "pending" in tm:
                # A create_topic / create_partitions that a crash interrupted: undo it.
                tm = self._undo_pending(name, tm, found)
                if tm is None:
                    continue
            overrides = dict(tm.get("config", {}))
            count = int(tm.get("partitions", 0))
            present = found.get(name, [])
            if not tm and present:
                count = max(present) + 1
                if name == OFFSETS_TOPIC:
                    # A broker holds only some partitions; the group hash needs them all.
                    count = max(count, self.config.offsets_topic_num_partitions)
            topic = self._make_topic(name, overrides, tm.get("topic_id") or read_topic_id(self.dir, name, present))
            topic.count = count
            for p in range(count):
                tp = (name, p)
                exists = p in present
                # __consumer_offsets partitions are created one at a time, at a group's first
                # commit; a read-only store creates nothing.
                if not exists and (self.read_only or name == OFFSETS_TOPIC):
                    continue
                if not exists and tm:
                    log.warning("partition directory %s-%d is missing; creating it empty", name, p)
                lg = self._open_log(
                    name,
                    p,
                    topic.config,
                    clock=self.clock,
                    scheduler=self._scheduler,
                    recovery_point=recovery.get(tp, 0),
                    log_start_offset=log_start.get(tp, 0),
                    clean_shutdown=clean,
                    high_watermark=hws.get(tp),
                    dir_checkpoints=False,
                )
                topic.partitions.append(StoredPartition(name, p, lg, cleaner.get(tp)))
            self._topics[name] = topic
        self._next_producer_id = int(meta.get("producer_id_block_end", 0))
        self._producer_id_block_end = self._next_producer_id
        if not self.read_only:
            ld.remove_clean_shutdown_marker()
            for t in self._topics.values():
                for part in t.partitions:
                    write_partition_metadata(part.log.dir, t.topic_id)
            self._write_metadata()
            self.checkpoint()
            self._schedule_tasks()

    def _open_log(self, topic: str, partition: int, config: LogConfig, **kwargs: Any) -> Log:
        """Open (creating it unless read-only) a partition's log as the log dir's owner hands it
        out: writable unless the store is read-only."""
        ld = self._logdir
        assert ld is not None
        return Log.open(
            ld.partition_path(topic, partition),
            config,
            read_only=ld.read_only,
            owner=None if ld.read_only else ld,
            **kwargs,
        )

    def _undo_pending(self, name: str, tm: dict[str, Any], found: dict[str, list[int]]) -> dict[str, Any] | None:
        """What to load of a topic whose change was interrupted: the partitions it was creating
        are removed (writable; a read-only store leaves them alone and skips them), and a topic
        that was being created is dropped (None). A pending partition that holds records
        (appended before the crash) is kept."""
        pending = tm["pending"]
        doomed = set(pending.get("partitions", []))
        kept = []
        for p in sorted(doomed & set(found.get(name, []))):
            path = os.path.join(self.dir, f"{name}-{p}")
            if _holds_records(path):
                log.warning("%s was being created when the store stopped, but holds records: kept", path)
                kept.append(p)
                continue
            log.warning("removing %s: its creation was interrupted", path)
            if not self.read_only:
                shutil.rmtree(path, ignore_errors=True)
            found[name].remove(p)
        if not found.get(name):
            found.pop(name, None)
        if pending.get("new_topic") and not kept:
            found.pop(name, None)
            return None
        tm = {k: v for k, v in tm.items() if k != "pending"}
        tm["partitions"] = max([int(tm.get("partitions", 0)), *(p + 1 for p in kept)])
        return tm

    def _read_metadata(self) -> dict[str, Any]:
        return read_store_metadata(self.dir)

    def _write_metadata(self, pending: tuple[StoredTopic, list[int], bool] | None = None) -> None:
        """Write ``seglog-metadata.json``. ``pending``: a topic change about to be made (the
        topic, the partitions to create, whether the topic is new), recorded first so that the
        next open removes what a crash in the middle of it left."""
        if self.read_only:
            return
        write_store_metadata(self.dir, self._topics.values(), self._producer_id_block_end, pending)

    def _make_topic(self, name: str, overrides: Mapping[str, Any], topic_id: str | None) -> StoredTopic:
        internal = name in INTERNAL_TOPICS
        base = dict(overrides)
        if name == OFFSETS_TOPIC:
            defaults = {
                "cleanup.policy": "compact",
                "segment.bytes": self.config.offsets_topic_segment_bytes,
                "compression.type": "producer",
            }
            base = {**defaults, **base}
        config = self.config.topic_config(base)
        return StoredTopic(name, config, dict(overrides), topic_id, internal)

    def _schedule_tasks(self) -> None:
        assert self._scheduler is not None
        cfg = self.config

        def every(name: str, period: int, fn: Any) -> None:
            if period > 0:
                self._tasks.append(
                    self._scheduler.schedule(  # type: ignore[union-attr]
                        name, fn, delay_ms=period, period_ms=period
                    )
                )

        every(
            "recovery-point checkpoint", cfg.log_flush_offset_checkpoint_interval_ms, self._flush_rolled_and_checkpoint
        )
        every(
            "log-start checkpoint", cfg.log_flush_start_offset_checkpoint_interval_ms, self.checkpoint_log_start_offsets
        )
        every(
            "high-watermark checkpoint",
            cfg.replica_high_watermark_checkpoint_interval_ms,
            self.checkpoint_high_watermarks,
        )
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

    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, Any] | None = None, *, exist_ok: bool = False
    ) -> TopicDescription:
        """Create ``name`` with ``partitions`` partitions and topic-config overrides ``config``
        (Kafka's topic keys: ``retention.ms``, ``cleanup.policy``, ``segment.bytes``...)."""
        self._check_writable()
        validate_topic_name(name)
        if name in INTERNAL_TOPICS:
            raise InvalidTopicError(f"{name} is an internal topic; it is created by the store itself")
        int_arg("partitions", partitions)
        if config is not None and not isinstance(config, Mapping):
            raise TypeError(f"config must be a mapping of topic config keys or None, not {type(config).__name__}")
        if partitions < 1:
            raise InvalidPartitionsError(f"number of partitions must be at least 1, got {partitions!r}")
        overrides = dict(config or {})
        topic_config = self.config.topic_config(overrides)  # validates the overrides
        with self._lock:
            existing = self._topics.get(name)
            if existing is not None:
                if exist_ok:
                    return self._describe_topic(existing)
                raise TopicAlreadyExistsError(f"topic {name!r} already exists")
            clash = [t for t in self._topics if collision_name(t) == collision_name(name)]
            if clash:
                raise InvalidTopicError(
                    f"topic {name!r} collides with existing topic {clash[0]!r} "
                    "(names differing only in '.' and '_' are not allowed)"
                )
            check_descriptor_limit(partitions, f"create topic {name!r} with {partitions} partitions")
            topic = StoredTopic(name, topic_config, {k: v for k, v in overrides.items()}, new_topic_id(), False)
            topic.config = topic_config
            self._grow(topic, range(partitions), new_topic=True)
            return self._describe_topic(topic)

    def _grow(
        self, topic: StoredTopic, numbers: Iterable[int], *, new_topic: bool = False, count: int | None = None
    ) -> None:
        """Create the partitions ``numbers`` of ``topic`` (registering a new topic) and record
        them in the metadata and checkpoints: all or nothing. If any step fails (a partition
        that cannot be created, a full disk), the partitions made are closed and their
        directories removed, the topic is unregistered if new, and the error is raised."""
        before = {q.partition for q in topic.partitions}
        old_count = topic.count
        created: list[str] = []
        numbers = list(numbers)
        try:
            self._write_metadata(pending=(topic, numbers, new_topic))
            for p in numbers:
                path = self._logdir.partition_path(topic.name, p)  # type: ignore[union-attr]
                if not os.path.exists(path):
                    created.append(path)
                lg = self._open_new_log(topic, p)
                part = StoredPartition(topic.name, p, lg, None)
                topic.partitions.append(part)
                topic.partitions.sort(key=lambda x: x.partition)
                write_partition_metadata(part.log.dir, topic.topic_id)
            topic.count = max(topic.count, count or 0, max((q.partition + 1 for q in topic.partitions), default=0))
            if new_topic:
                self._topics[topic.name] = topic
            self._generation.value += 1
            self.checkpoint()
            self._write_metadata()
        except BaseException:
            added = [q for q in topic.partitions if q.partition not in before]
            self._undo_grow(topic, added, created, new_topic, old_count)
            raise

    def _open_new_log(self, topic: StoredTopic, partition: int) -> Log:
        assert self._logdir is not None
        return self._open_log(
            topic.name,
            partition,
            topic.config,
            clock=self.clock,
            scheduler=self._scheduler,
            recovery_point=0,
            log_start_offset=0,
            clean_shutdown=True,
            dir_checkpoints=False,
        )

    def _undo_grow(
        self, topic: StoredTopic, added: list[StoredPartition], created: list[str], new_topic: bool, old_count: int
    ) -> None:
        for part in added:
            topic.partitions.remove(part)
            try:
                part.log.close()
            except Exception:  # noqa: BLE001 - already failing
                part.log.abandon()
        topic.count = old_count
        if new_topic:
            self._topics.pop(topic.name, None)
        for path in reversed(created):
            shutil.rmtree(path, ignore_errors=True)
        self._generation.value += 1
        try:
            fsync_dir(self.dir)
            self.checkpoint()
            self._write_metadata()
        except Exception as exc:  # noqa: BLE001 - the original error is the one raised
            log.error(
                "%s: could not rewrite the checkpoints and metadata after a failed topic change: %s", self.dir, exc
            )

    def create_partitions(self, name: str, total: int) -> TopicDescription:
        """Grow topic ``name`` to ``total`` partitions (Kafka's CreatePartitions; partitions
        cannot be removed, and keyed records may map to other partitions afterwards)."""
        self._check_writable()
        with self._lock:
            topic = self._topic(name)
            if total <= len(topic.partitions):
                raise InvalidPartitionsError(
                    f"topic {name!r} has {len(topic.partitions)} partitions; the new total {total} must be larger"
                )
            check_descriptor_limit(
                total - len(topic.partitions), f"grow topic {name!r} from {len(topic.partitions)} to {total} partitions"
            )
            self._grow(topic, range(len(topic.partitions), total))
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
            for t, p in self.group_offsets.group_offsets(group):
                if t == name:
                    gone.setdefault(group, {})[(t, p)] = None
        for group, offsets in gone.items():
            self.group_offsets.commit(group, offsets)

    def alter_topic_config(
        self,
        name: str,
        set: Mapping[str, Any] | None = None,  # noqa: A002
        delete: Iterable[str] = (),
    ) -> LogConfig:
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

    def topic_id(self, topic: str) -> str | None:
        """``topic``'s id (Kafka's text form; None if it has none); UnknownTopicOrPartitionError
        if it does not exist."""
        return self._topic(topic).topic_id

    def topic_ids(self) -> dict[str, str | None]:
        """Every topic's id (Kafka's text form, as in ``partition.metadata``; None where a
        topic has none), internal topics included."""
        with self._lock:
            return {n: t.topic_id for n, t in self._topics.items()}

    def partitions_for(self, topic: str) -> int:
        """Number of partitions of ``topic`` (UnknownTopicOrPartitionError if it does not exist).
        __consumer_offsets counts all its partitions, also those no group has committed to yet
        (which have no directory until then)."""
        t = self._topic(topic)
        return t.count if t.name == OFFSETS_TOPIC else len(t.partitions)

    def topic_config(self, topic: str) -> LogConfig:
        return self._topic(topic).config

    def describe(self, topic: str | None = None, *, internal: bool = True) -> list[TopicDescription]:
        """Topics with their partitions: offsets, segments, sizes."""
        with self._lock:
            if topic is not None:
                return [self._describe_topic(self._topic(topic))]
            return [self._describe_topic(t) for n, t in sorted(self._topics.items()) if internal or not t.internal]

    def _describe_topic(self, topic: StoredTopic) -> TopicDescription:
        parts = []
        for part in topic.partitions:
            lg = part.log
            segs = lg.segments
            parts.append(
                PartitionDescription(
                    part.partition,
                    lg.log_start_offset,
                    lg.high_watermark,
                    lg.log_end_offset,
                    lg.recovery_point,
                    len(segs),
                    sum(s.size for s in segs),
                    lg.dir,
                )
            )
        return TopicDescription(topic.name, topic.topic_id, topic.internal, tuple(parts), dict(topic.overrides))

    def _topic(self, name: str) -> StoredTopic:
        self._check_open()
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist in {self.dir}")
        return topic

    def _partition(self, topic: str, partition: int) -> StoredPartition:
        t = self._topic(topic)
        if not 0 <= partition < len(t.partitions) or t.partitions[partition].partition != partition:
            for part in t.partitions:
                if part.partition == partition:
                    return part
            raise UnknownTopicOrPartitionError(
                f"partition {partition} of topic {topic!r} does not exist (the topic has "
                f"{len(t.partitions)} partition(s))"
            )
        return t.partitions[partition]

    def partition(self, topic: str, partition: int) -> StoredPartition:
        """The partition's entry (its log and the lock its appends take); for the embedded
        producer and consumer. ``UnknownTopicOrPartitionError`` if it does not exist."""
        return self._partition(topic, partition)

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
        if t is not None and t.count:
            return t.count
        return self.config.offsets_topic_num_partitions

    def _ensure_offsets_log(self, partition: int) -> Log:
        """The log of __consumer_offsets partition ``partition``, created (alone: the other
        partitions wait for their own groups' first commits) if missing."""
        self._check_writable()
        with self._lock:
            topic = self._topics.get(OFFSETS_TOPIC)
            if topic is None:
                topic = self._make_topic(OFFSETS_TOPIC, {}, new_topic_id())
                self._grow(topic, [partition], new_topic=True, count=self.config.offsets_topic_num_partitions)
            elif self._existing_log(OFFSETS_TOPIC, partition) is None:
                self._grow(topic, [partition])
            return self._partition(OFFSETS_TOPIC, partition).log

    def ensure_topic(self, name: str) -> StoredTopic:
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

    def append(self, topic: str, partition: int, records: Any, *, origin: str = "client") -> AppendResult:
        """Append already-encoded RecordBatch v2 bytes (Kafka's produce path for one partition):
        the batches are validated as Kafka's broker validates a producer's (``Log.append``),
        idempotent producers' sequences checked (a repeat of one of a producer's last five
        batches returns the original offsets), offsets assigned. ``origin="coordinator"`` is for
        transaction markers written on a transaction coordinator's behalf (clients may not write
        control batches)."""
        int_arg("partition", partition)
        self._check_writable()
        view = bytes_arg("records", records)
        try:
            heads = batch_headers(view, verify_crc=True)
            if not heads:
                raise InvalidRecordError("nothing to append: the buffer holds no batch")
            part = self._partition(topic, partition)
            if len(heads) == 1 or all(h.producer_id < 0 for h in heads):
                return self._append_part(part, view, heads, origin)
            results = [self._append_part(part, view[h.position : h.position + h.size], [h], origin) for h in heads]
            return dataclasses.replace(
                results[-1], first_offset=results[0].first_offset, duplicate=all(r.duplicate for r in results)
            )
        finally:
            view.release()

    def _append_part(
        self, part: StoredPartition, view: memoryview, heads: Sequence[Any], origin: str = "client"
    ) -> AppendResult:
        h = heads[0]
        if len(heads) == 1 and h.producer_id >= 0 and not h.is_control:
            return self._append_to(part.topic, part.partition, view, origin=origin)
        with part.lock:
            info = part.log.append(view, leader_epoch=own_leader_epoch(part.log), origin=origin)
        self._notify()
        return AppendResult(
            part.topic, part.partition, info.first_offset, info.last_offset, info.log_append_time, info.log_start_offset
        )

    def _append_to(self, topic: str, partition: int, data: Any, *, origin: str = "client") -> AppendResult:
        """One batch, as its producer's leader appends it (``Log.append_as_leader``: a client's
        idempotent batch is checked against its producer's sequence)."""
        part = self._partition(topic, partition)
        with part.lock:
            info = part.log.append_as_leader(data, leader_epoch=own_leader_epoch(part.log), origin=origin)
        if not info.duplicate:
            self._notify()
        return AppendResult(
            topic,
            partition,
            info.first_offset,
            info.last_offset,
            info.log_append_time,
            info.log_start_offset,
            duplicate=info.duplicate,
        )

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
    # Clients (the producers and consumers of seglog.Store, closed with it)
    # ---------------------------------------------------------------------------------------------

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
        """The next producer id: from the block recorded in the store metadata, and above every
        id found in the logs and producer snapshots (a dir written by Kafka or another tool
        holds ids the metadata does not know), so a new producer's sequences never mix with an
        old one's. The logs are scanned once, at the first allocation."""
        with self._lock:
            if not self._producer_ids_scanned:
                floor = self._max_producer_id_in_logs() + 1
                self._producer_ids_scanned = True
                if floor > self._next_producer_id:
                    self._next_producer_id = floor
            if self._next_producer_id >= self._producer_id_block_end:
                self._producer_id_block_end = self._next_producer_id + _PRODUCER_ID_BLOCK
                self._write_metadata()
            pid = self._next_producer_id
            self._next_producer_id += 1
            return pid

    def _max_producer_id_in_logs(self) -> int:
        """The largest producer id in any batch header or producer snapshot of the store's
        partitions, -1 if none. An unreadable file is skipped with a warning naming it."""
        best = -1
        for part in self._partitions():
            lg = part.log
            for seg in lg.segments:
                try:
                    for b in seg.batches():
                        if b.producer_id > best:
                            best = b.producer_id
                except Exception as exc:  # noqa: BLE001 - recovery owns damaged segments
                    log.warning("producer ids: cannot read the batches of %s: %s", seg.log_path, exc)
            try:
                names = os.listdir(lg.dir)
            except OSError:
                continue
            for name in names:
                if not name.endswith(SNAPSHOT_SUFFIX):
                    continue
                path = os.path.join(lg.dir, name)
                try:
                    with open(path, "rb") as f:
                        entries = decode_snapshot(f.read(), path)
                except (OSError, ValueError) as exc:
                    log.warning("producer ids: skipping %s: %s", path, exc)
                    continue
                best = max([best, *(e.producer_id for e in entries)])
        return best

    # ---------------------------------------------------------------------------------------------
    # Background work
    # ---------------------------------------------------------------------------------------------

    def _partitions(self) -> Iterator[StoredPartition]:
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
        cleaned = 0
        cleaner = Cleaner(self.clock)
        for part in self._partitions():
            if not part.log.config.compact or part.log.closed:
                continue
            # Appends go on meanwhile: the cleaner reads inactive segments only, and a
            # truncation or close of the log aborts it (Log.begin_cleaning).
            if cleaner.clean(part.log, part.log.cleaner_offset) is not None:
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
        def start(p: StoredPartition) -> int | None:
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
            if self._closed:  # closed meanwhile by another thread (mypy keeps the check above)
                return  # type: ignore[unreachable]
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
                        assert self._logdir is not None
                        self._logdir.write_clean_shutdown_marker(b'{"version":0,"brokerEpoch":-1}')
            finally:
                self._closed = True
                self._release_lock()
            if errors:
                raise KafkaStorageError(
                    f"{len(errors)} log(s) of {self.dir} failed to close; the first error: {errors[0]}", path=self.dir
                ) from errors[0]

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
        return f"{type(self).__name__}({self.dir!r}, topics={len(self._topics)}, {state})"


def _holds_records(partition_dir: str) -> bool:
    try:
        return any(
            n.endswith(".log") and os.path.getsize(os.path.join(partition_dir, n)) > 0
            for n in os.listdir(partition_dir)
        )
    except OSError:
        return False


def _delete_dir_name(topic: str, partition: int) -> str:
    suffix = f"-{partition}.{uuid.uuid4().hex}-delete"
    return topic[: 255 - len(suffix)] + suffix


__all__ = ["AppendResult", "LogManager"]
