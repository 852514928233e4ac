"""The table of every configuration key seglog knows, with Kafka 3.9's names, defaults and ranges.

:data:`CONFIG_KEYS` holds the topic, broker, producer and consumer keys in documentation order.
:data:`KEYS_BY_SCOPE` finds a key by scope and name; :data:`TOPIC_CONFIG_SYNONYMS` names, for each
topic key, the broker keys that supply its broker-wide default. The config classes take their
fields' defaults from here (:func:`default_value`) and :mod:`seglog.config.docs` renders the table
as ``docs/configuration.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from seglog.config.definition import (
    INT_MAX,
    LONG_MAX,
    ConfigKey,
    ConfigType,
    Range,
    RangeOr,
    Scope,
    Validator,
    ValidList,
    ValidString,
)

# What ``seglog.config`` re-exports; the other public names serve the package's own modules.
__all__ = ["CONFIG_KEYS", "KEYS_BY_SCOPE", "TOPIC_CONFIG_SYNONYMS"]


def _hours_to_ms(hours: int) -> int:
    return hours * 3_600_000


def _retention_ms(ms: int) -> int:
    # Kafka: any negative retention means "unlimited" and becomes -1.
    return -1 if ms < 0 else ms


def _retention_minutes(minutes: int) -> int:
    return _retention_ms(minutes * 60_000)


def _retention_hours(hours: int) -> int:
    return _retention_ms(hours * 3_600_000)


_TOPIC_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_PRODUCER_COMPRESSION = ("none", "gzip", "snappy", "lz4", "zstd")
_GZIP_LEVEL = RangeOr(Range.between(1, 9), -1)
_LZ4_LEVEL = Range.between(1, 17)
_ZSTD_LEVEL = Range.between(-131072, 22)  # zstd's ZSTD_minCLevel() .. ZSTD_maxCLevel()
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
_CLEANUP_POLICIES = ("compact", "delete")

#: Milliseconds in a day and in a week (Kafka's defaults are often whole days or weeks).
DAY_MS = 86_400_000
WEEK_MS = 7 * DAY_MS
_MAX_MESSAGE_BYTES = 1024 * 1024 + 12  # 1 MiB plus the log overhead (offset + size)


def _key(scope: Scope) -> Callable[..., ConfigKey]:
    def make(
        name: str,
        type: ConfigType,
        default: Any,
        doc: str,
        validator: Validator | None = None,
        **extra: Any,
    ) -> ConfigKey:
        return ConfigKey(name, type, default, doc, scope, validator, **extra)

    return make


_topic = _key("topic")
_broker = _key("broker")
_producer = _key("producer")
_consumer = _key("consumer")

#: The description of a key accepted only so that Kafka's own files load.
IGNORED_DOC = "Accepted so that Kafka's own properties files load; seglog does not use it."

# fmt: off
_TOPIC_KEYS = (
    _topic("segment.bytes", "int", 1024 * 1024 * 1024,
        "Size at which the active segment is closed and a new one rolled. A batch larger than it "
        "is refused with RecordListTooLargeError, as Kafka refuses it.",
        Range.at_least(14), importance="high",
    ),
    _topic("segment.ms", "long", WEEK_MS,
        "Age of the active segment (from its first record's timestamp or its creation) at "
        "which a new segment is rolled even if it is not full, so that retention can delete "
        "or compact old data.",
        Range.at_least(1),
    ),
    _topic("segment.jitter.ms", "long", 0,
        "Largest random amount subtracted from segment.ms for each segment, to keep many "
        "partitions from rolling at the same moment.",
        Range.at_least(0),
    ),
    _topic("segment.index.bytes", "int", 10 * 1024 * 1024,
        "Size preallocated (and mapped) for each segment's offset index and time index; the "
        "segment rolls when an index is full. Rounded down to a whole number of entries.",
        Range.at_least(4),
    ),
    _topic("index.interval.bytes", "int", 4096,
        "Bytes of batches appended between two entries of the sparse offset and time "
        "indexes. Smaller values make lookups scan less and the indexes grow faster.",
        Range.at_least(0),
    ),
    _topic("flush.messages", "long", LONG_MAX,
        "Number of records appended after which the log is fsynced. The default leaves "
        "flushing to the operating system; durability comes from replication.",
        Range.at_least(1),
    ),
    _topic("flush.ms", "long", LONG_MAX,
        "Longest time appended data may stay unflushed before the log is fsynced.",
        Range.at_least(0),
    ),
    _topic("retention.ms", "long", WEEK_MS,
        "How long closed segments are kept (judged by their largest timestamp) before "
        "deletion when cleanup.policy includes delete. -1 keeps them forever.",
        Range.at_least(-1), importance="high",
    ),
    _topic("retention.bytes", "long", -1,
        "Size the partition may grow to before its oldest segments are deleted when "
        "cleanup.policy includes delete. -1 means no size limit.",
    ),
    _topic("file.delete.delay.ms", "long", 60_000,
        "How long a deleted segment's files stay renamed to .deleted before they are "
        "removed, so that readers still holding them can finish.",
        Range.at_least(0),
    ),
    _topic("max.message.bytes", "int", _MAX_MESSAGE_BYTES,
        "Largest record batch (after compression) the log accepts. Larger batches are "
        "rejected with RecordTooLargeError.",
        Range.at_least(0), importance="high",
    ),
    _topic("message.timestamp.type", "string", "CreateTime",
        "Whether batches keep the producer's timestamps (CreateTime) or are stamped with "
        "the time of the append (LogAppendTime).",
        ValidString(_TIMESTAMP_TYPES),
    ),
    _topic("message.timestamp.before.max.ms", "long", LONG_MAX,
        "With CreateTime, the furthest a record timestamp may lie in the past of the append "
        "time; older ones are rejected with InvalidTimestampError.",
        Range.at_least(0),
    ),
    _topic("message.timestamp.after.max.ms", "long", LONG_MAX,
        "With CreateTime, the furthest a record timestamp may lie in the future of the "
        "append time; later ones are rejected with InvalidTimestampError.",
        Range.at_least(0),
    ),
    _topic("cleanup.policy", "list", ("delete",),
        "What happens to closed segments: delete (by retention.ms / retention.bytes), "
        "compact (keep the latest record per key), or both.",
        ValidList(_CLEANUP_POLICIES),
    ),
    _topic("delete.retention.ms", "long", DAY_MS,
        "On compacted topics, how long tombstones (null values) are kept so that readers "
        "see the deletion.",
        Range.at_least(0),
    ),
    _topic("min.cleanable.dirty.ratio", "double", 0.5,
        "On compacted topics, the share of not-yet-compacted bytes at which a partition "
        "becomes due for compaction.",
        Range.between(0, 1),
    ),
    _topic("min.compaction.lag.ms", "long", 0,
        "On compacted topics, the least time a record stays uncompacted.",
        Range.at_least(0),
    ),
    _topic("max.compaction.lag.ms", "long", LONG_MAX,
        "On compacted topics, the most time a record may stay uncompacted; also caps the "
        "age at which the active segment rolls.",
        Range.at_least(1),
    ),
    _topic("compression.type", "string", "producer",
        "Codec of the batches as stored: producer keeps the producer's codec; uncompressed, "
        "gzip, snappy, lz4 and zstd recompress to that codec.",
        ValidString(_TOPIC_COMPRESSION),
    ),
    _topic("compression.gzip.level", "int", -1,
        "Compression level when the log recompresses to gzip (-1: zlib's default, 6).",
        _GZIP_LEVEL,
    ),
    _topic("compression.lz4.level", "int", 9,
        "Compression level when the log recompresses to lz4.",
        _LZ4_LEVEL,
    ),
    _topic("compression.zstd.level", "int", 3,
        "Compression level when the log recompresses to zstd.",
        _ZSTD_LEVEL,
    ),
    _topic("preallocate", "boolean", False,
        "Whether a segment's first append allocates disk blocks for all of segment.bytes "
        "(otherwise appends allocate 4 MiB ahead). On ext4 only, with fallocate's "
        "KEEP_SIZE: unlike Kafka, which sets the file length, the file holds only its "
        "batches; a roll or close gives back the unused blocks.",
    ),
    _topic("min.insync.replicas", "int", 1,
        "With acks=all, the fewest in-sync replicas (leader included) that must hold a "
        "write. Below it, writes fail before the append with NotEnoughReplicasError, or "
        "after it with NotEnoughReplicasAfterAppendError.",
        Range.at_least(1), importance="high",
    ),
    _topic("unclean.leader.election.enable", "boolean", False,
        "Whether a replica outside the ISR may become leader when no ISR member is alive; "
        "committed records can then be lost.",
    ),
)

_BROKER_KEYS = (
    # -- identity and membership --------------------------------------------------------
    _broker("node.id", "int", -1,
        "This node's id. -1 means unset: broker.id is used. If both are set they must "
        "agree.",
        importance="high",
    ),
    _broker("broker.id", "int", -1,
        "This node's id under its ZooKeeper-mode name; same meaning as node.id.",
        importance="high",
    ),
    _broker("listeners", "list", ("PLAINTEXT://:9092",),
        "Addresses the node listens on, as NAME://host:port (an empty host binds all "
        "interfaces).",
        importance="high",
    ),
    _broker("advertised.listeners", "list", None,
        "Addresses published for other nodes and clients to connect to, when they differ "
        "from listeners (unset: the same as listeners).",
        importance="high",
    ),
    _broker("inter.broker.listener.name", "string", None,
        "The name of the listener (in listeners) the nodes use between themselves, for Kafka's "
        "inter-broker requests, secured by the listener keys as any listener (with SASL, nodes "
        "authenticate with SCRAM-SHA-256 as the user of "
        "listener.name.<name>.scram-sha-256.sasl.jaas.config); every other listener serves Kafka "
        "clients. Unset: the first listener's name.",
        importance="medium",
    ),
    _broker("zookeeper.connect", "string", None,
        "ZooKeeper connection string, host:port[,host:port...][/chroot]. Unset: the "
        "in-process coordinator is used (one process only).",
        importance="high",
    ),
    _broker("zookeeper.session.timeout.ms", "int", 18_000,
        "ZooKeeper session timeout; a node whose session expires loses its registration and "
        "leaderships.",
        importance="high",
    ),
    _broker("zookeeper.connection.timeout.ms", "int", None,
        "How long to wait for the ZooKeeper connection (unset: "
        "zookeeper.session.timeout.ms).",
        importance="high",
    ),
    _broker("controlled.shutdown.enable", "boolean", True,
        "Whether a stopping node first moves its leaderships to other replicas.",
    ),
    _broker("controlled.shutdown.max.retries", "int", 3,
        "Attempts at a controlled shutdown before the node stops regardless.",
    ),
    _broker("controlled.shutdown.retry.backoff.ms", "long", 5000,
        "Pause between controlled-shutdown attempts.",
    ),
    # -- log directories and defaults for new topics ------------------------------------
    _broker("log.dirs", "list", None,
        "Directories holding the partition directories (comma-separated). Unset: log.dir.",
        importance="high",
    ),
    _broker("log.dir", "string", "/tmp/kafka-logs",
        "The single log directory used when log.dirs is unset.",
        importance="high",
    ),
    _broker("num.partitions", "int", 1,
        "Partitions of a topic created without an explicit count.",
        Range.at_least(1),
    ),
    _broker("default.replication.factor", "int", 1,
        "Replication factor of a topic created without an explicit one.",
    ),
    _broker("auto.create.topics.enable", "boolean", True,
        "Whether producing to or fetching from an unknown topic creates it.",
        importance="high",
    ),
    _broker("num.recovery.threads.per.data.dir", "int", 1,
        "Threads per log directory that recover logs at startup and flush them at shutdown.",
        Range.at_least(1), importance="high",
    ),
    _broker("log.retention.check.interval.ms", "long", 300_000,
        "How often the retention task looks for segments to delete.",
        Range.at_least(1),
    ),
    _broker("log.flush.offset.checkpoint.interval.ms", "int", 60_000,
        "How often the recovery point (the offset up to which each log is known flushed) is "
        "written to recovery-point-offset-checkpoint.",
        Range.at_least(0), importance="high",
    ),
    _broker("log.flush.start.offset.checkpoint.interval.ms", "int", 60_000,
        "How often each log's start offset is written to log-start-offset-checkpoint.",
        Range.at_least(0), importance="high",
    ),
    # The broker-wide defaults of topic keys, in Kafka's order of precedence.
    _broker("log.segment.bytes", "int", 1024 * 1024 * 1024,
        "Broker-wide default of segment.bytes.",
        Range.at_least(14), importance="high", topic_key="segment.bytes",
    ),
    _broker("log.roll.ms", "long", None,
        "Broker-wide default of segment.ms (unset: log.roll.hours).",
        importance="high", topic_key="segment.ms",
    ),
    _broker("log.roll.hours", "int", 168,
        "Broker-wide default of segment.ms, in hours, when log.roll.ms is unset.",
        Range.at_least(1), importance="high", topic_key="segment.ms", to_topic=_hours_to_ms,
    ),
    _broker("log.roll.jitter.ms", "long", None,
        "Broker-wide default of segment.jitter.ms (unset: log.roll.jitter.hours).",
        importance="high", topic_key="segment.jitter.ms",
    ),
    _broker("log.roll.jitter.hours", "int", 0,
        "Broker-wide default of segment.jitter.ms, in hours, when log.roll.jitter.ms is "
        "unset.",
        Range.at_least(0), importance="high", topic_key="segment.jitter.ms", to_topic=_hours_to_ms,
    ),
    _broker("log.retention.ms", "long", None,
        "Broker-wide default of retention.ms (unset: log.retention.minutes). Any negative "
        "value means unlimited (-1).",
        importance="high", topic_key="retention.ms", to_topic=_retention_ms,
    ),
    _broker("log.retention.minutes", "int", None,
        "Broker-wide default of retention.ms, in minutes, when log.retention.ms is unset "
        "(unset: log.retention.hours).",
        importance="high", topic_key="retention.ms", to_topic=_retention_minutes,
    ),
    _broker("log.retention.hours", "int", 168,
        "Broker-wide default of retention.ms, in hours, when log.retention.ms and "
        "log.retention.minutes are unset.",
        importance="high", topic_key="retention.ms", to_topic=_retention_hours,
    ),
    _broker("log.retention.bytes", "long", -1,
        "Broker-wide default of retention.bytes.",
        importance="high", topic_key="retention.bytes",
    ),
    _broker("log.index.size.max.bytes", "int", 10 * 1024 * 1024,
        "Broker-wide default of segment.index.bytes.",
        Range.at_least(4), topic_key="segment.index.bytes",
    ),
    _broker("log.index.interval.bytes", "int", 4096,
        "Broker-wide default of index.interval.bytes.",
        Range.at_least(0), topic_key="index.interval.bytes",
    ),
    _broker("log.flush.interval.messages", "long", LONG_MAX,
        "Broker-wide default of flush.messages.",
        Range.at_least(1), importance="high", topic_key="flush.messages",
    ),
    _broker("log.flush.interval.ms", "long", None,
        "Broker-wide default of flush.ms (unset: log.flush.scheduler.interval.ms).",
        importance="high", topic_key="flush.ms",
    ),
    _broker("log.flush.scheduler.interval.ms", "long", LONG_MAX,
        "How often the flusher checks whether a log is due for an fsync by flush.ms; also "
        "the default of flush.ms when log.flush.interval.ms is unset.",
        importance="high", topic_key="flush.ms",
    ),
    _broker("log.segment.delete.delay.ms", "long", 60_000,
        "Broker-wide default of file.delete.delay.ms.",
        Range.at_least(0), importance="high", topic_key="file.delete.delay.ms",
    ),
    _broker("message.max.bytes", "int", _MAX_MESSAGE_BYTES,
        "Broker-wide default of max.message.bytes.",
        Range.at_least(0), importance="high", topic_key="max.message.bytes",
    ),
    _broker("log.message.timestamp.type", "string", "CreateTime",
        "Broker-wide default of message.timestamp.type.",
        ValidString(_TIMESTAMP_TYPES), topic_key="message.timestamp.type",
    ),
    _broker("log.message.timestamp.before.max.ms", "long", LONG_MAX,
        "Broker-wide default of message.timestamp.before.max.ms.",
        Range.at_least(0), topic_key="message.timestamp.before.max.ms",
    ),
    _broker("log.message.timestamp.after.max.ms", "long", LONG_MAX,
        "Broker-wide default of message.timestamp.after.max.ms.",
        Range.at_least(0), topic_key="message.timestamp.after.max.ms",
    ),
    _broker("log.cleanup.policy", "list", ("delete",),
        "Broker-wide default of cleanup.policy.",
        ValidList(_CLEANUP_POLICIES), topic_key="cleanup.policy",
    ),
    _broker("log.cleaner.enable", "boolean", True, "Whether the log cleaner (compaction) runs."),
    _broker("log.cleaner.backoff.ms", "long", 15_000,
        "How often the cleaner looks for compacted logs that need cleaning.",
        Range.at_least(0),
    ),
    _broker("log.cleaner.delete.retention.ms", "long", DAY_MS,
        "Broker-wide default of delete.retention.ms.",
        Range.at_least(0), topic_key="delete.retention.ms",
    ),
    _broker("log.cleaner.min.cleanable.ratio", "double", 0.5,
        "Broker-wide default of min.cleanable.dirty.ratio.",
        Range.between(0, 1), topic_key="min.cleanable.dirty.ratio",
    ),
    _broker("log.cleaner.min.compaction.lag.ms", "long", 0,
        "Broker-wide default of min.compaction.lag.ms.",
        Range.at_least(0), topic_key="min.compaction.lag.ms",
    ),
    _broker("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX,
        "Broker-wide default of max.compaction.lag.ms.",
        Range.at_least(1), topic_key="max.compaction.lag.ms",
    ),
    _broker("compression.type", "string", "producer",
        "Broker-wide default of the topic key compression.type.",
        ValidString(_TOPIC_COMPRESSION), importance="high", topic_key="compression.type",
    ),
    _broker("compression.gzip.level", "int", -1,
        "Broker-wide default of the topic key compression.gzip.level.",
        _GZIP_LEVEL, topic_key="compression.gzip.level",
    ),
    _broker("compression.lz4.level", "int", 9,
        "Broker-wide default of the topic key compression.lz4.level.",
        _LZ4_LEVEL, topic_key="compression.lz4.level",
    ),
    _broker("compression.zstd.level", "int", 3,
        "Broker-wide default of the topic key compression.zstd.level.",
        _ZSTD_LEVEL, topic_key="compression.zstd.level",
    ),
    _broker("log.preallocate", "boolean", False,
        "Broker-wide default of preallocate.",
        topic_key="preallocate",
    ),
    _broker("min.insync.replicas", "int", 1,
        "Broker-wide default of the topic key min.insync.replicas.",
        Range.at_least(1), importance="high", topic_key="min.insync.replicas",
    ),
    _broker("unclean.leader.election.enable", "boolean", False,
        "Broker-wide default of the topic key unclean.leader.election.enable.",
        importance="high", topic_key="unclean.leader.election.enable",
    ),
    # -- replication ----------------------------------------------------------------------
    _broker("replica.lag.time.max.ms", "long", 30_000,
        "A follower that has not fetched up to the leader's log end offset for this long is "
        "removed from the ISR. The check runs every half of this interval.",
        importance="high",
    ),
    _broker("replica.fetch.max.bytes", "int", 1024 * 1024,
        "Bytes a follower asks for per partition in one fetch. Not a hard limit: the first "
        "batch is returned whole even when larger.",
        Range.at_least(0),
    ),
    _broker("replica.fetch.response.max.bytes", "int", 10 * 1024 * 1024,
        "Bytes a follower asks for in a whole fetch response (soft, like "
        "replica.fetch.max.bytes).",
        Range.at_least(0),
    ),
    _broker("replica.fetch.min.bytes", "int", 1,
        "Bytes a follower's fetch waits for (up to replica.fetch.wait.max.ms) before the "
        "leader answers.",
        importance="high",
    ),
    _broker("replica.fetch.wait.max.ms", "int", 500,
        "Longest time the leader holds a follower's fetch waiting for data. Must not exceed "
        "replica.lag.time.max.ms or replica.socket.timeout.ms.",
        importance="high",
    ),
    _broker("replica.fetch.backoff.ms", "int", 1000,
        "Pause before a follower retries after a failed fetch.",
        Range.at_least(0),
    ),
    _broker("replica.socket.timeout.ms", "int", 30_000,
        "Socket timeout of follower fetches; at least replica.fetch.wait.max.ms.",
        importance="high",
    ),
    _broker("replica.socket.receive.buffer.bytes", "int", 64 * 1024,
        "Socket receive buffer of follower connections.",
        importance="high",
    ),
    _broker("num.replica.fetchers", "int", 1,
        "Fetcher tasks per source node on a follower.",
        importance="high",
    ),
    _broker("replica.high.watermark.checkpoint.interval.ms", "long", 5000,
        "How often high watermarks are written to replication-offset-checkpoint.",
        importance="high",
    ),
    _broker("controller.socket.timeout.ms", "int", 30_000,
        "Socket timeout of controller-to-node requests.",
    ),
    _broker("auto.leader.rebalance.enable", "boolean", True,
        "Whether the controller periodically moves leadership back to each partition's "
        "preferred (first assigned) replica.",
        importance="high",
    ),
    _broker("leader.imbalance.check.interval.seconds", "long", 300,
        "How often the controller checks leader balance.",
        Range.at_least(1), importance="high",
    ),
    _broker("leader.imbalance.per.broker.percentage", "int", 10,
        "Share of a node's partitions led elsewhere than their preferred replica above "
        "which the controller rebalances leadership.",
        importance="high",
    ),
    _broker("producer.id.expiration.ms", "int", DAY_MS,
        "How long a producer id's state (for idempotent deduplication) is kept after its "
        "last write.",
        Range.at_least(1), importance="low",
    ),
    _broker("max.incremental.fetch.session.cache.slots", "int", 1000,
        "Incremental fetch sessions the node keeps at most.",
        Range.at_least(0),
    ),
    _broker("fetch.max.bytes", "int", 55 * 1024 * 1024,
        "Largest fetch response the node returns.",
        Range.at_least(1024),
    ),
    # -- the Kafka protocol listener (seglog serve, Store.serve) -----------------------------
    _broker("socket.request.max.bytes", "int", 100 * 1024 * 1024,
        "Largest request frame the Kafka listener reads; a larger one closes the connection.",
        Range.at_least(1), importance="high",
    ),
    _broker("connections.max.idle.ms", "long", 600000,
        "The Kafka listener closes a connection that sends no request for this long.",
        Range.at_least(1), importance="medium",
    ),
    _broker("group.min.session.timeout.ms", "int", 6000,
        "Shortest session timeout a consumer group member may ask for (else "
        "INVALID_SESSION_TIMEOUT).",
        importance="medium",
    ),
    _broker("group.max.session.timeout.ms", "int", 1800000,
        "Longest session timeout a consumer group member may ask for (else "
        "INVALID_SESSION_TIMEOUT).",
        importance="medium",
    ),
    _broker("group.initial.rebalance.delay.ms", "int", 3000,
        "How long the first rebalance of an empty consumer group waits for more members to "
        "join before it completes.",
        importance="medium",
    ),
    # -- accepted only for compatibility with Kafka's server.properties ---------------------
    _broker("num.network.threads", "int", 3,
        IGNORED_DOC,
        Range.at_least(1), importance="high", used=False,
    ),
    _broker("num.io.threads", "int", 8, IGNORED_DOC, Range.at_least(1), importance="high", used=False),
    _broker("socket.send.buffer.bytes", "int", 100 * 1024, IGNORED_DOC, importance="high", used=False),
    _broker("socket.receive.buffer.bytes", "int", 100 * 1024,
        IGNORED_DOC,
        importance="high", used=False,
    ),
    _broker("offsets.topic.num.partitions", "int", 50,
        "Partitions of the internal __consumer_offsets topic, which stores committed consumer "
        "offsets (a group's offsets live in one partition, chosen by the group id's hash). "
        "Fixed once the topic exists.",
        Range.at_least(1), importance="high",
    ),
    _broker("offsets.topic.segment.bytes", "int", 104_857_600,
        "The segment.bytes of the __consumer_offsets topic.",
        Range.at_least(1), importance="high",
    ),
    _broker("offsets.topic.replication.factor", "short", 3,
        "Replicas of each __consumer_offsets partition on a cluster node (`seglog node`); with "
        "fewer live nodes the topic is not created and FindCoordinator answers "
        "COORDINATOR_NOT_AVAILABLE. A single store has one replica.",
        Range.at_least(1), importance="high",
    ),
    _broker("transaction.state.log.replication.factor", "short", 3,
        IGNORED_DOC,
        Range.at_least(1), importance="high", used=False,
    ),
    _broker("transaction.state.log.min.isr", "int", 2,
        IGNORED_DOC,
        Range.at_least(1), importance="high", used=False,
    ),
)

_PRODUCER_KEYS = (
    _producer("acks", "string", "all",
        "Acknowledgement a send waits for: 0 none, 1 the leader's append, all (or -1) every "
        "in-sync replica (see min.insync.replicas).",
        ValidString(("all", "-1", "0", "1")), importance="low",
    ),
    _producer("enable.idempotence", "boolean", None,
        "Whether the producer numbers its batches so that retries are never written twice. "
        "Unset means Kafka's default: on, unless acks is not all, retries is 0 or "
        "max.in.flight.requests.per.connection exceeds 5, in which case it is off. Set to "
        "true, a conflicting setting is an error.",
        importance="low", default_doc="true (see description)",
    ),
    _producer("batch.size", "int", 16384,
        "Bytes of records the producer gathers per partition before a batch is sent.",
        Range.at_least(0),
    ),
    _producer("linger.ms", "long", 0,
        "How long the producer waits for more records to fill a batch before sending it.",
        Range.at_least(0),
    ),
    _producer("compression.type", "string", "none",
        "Codec the producer compresses batches with.",
        ValidString(_PRODUCER_COMPRESSION), importance="high",
    ),
    _producer("compression.gzip.level", "int", -1,
        "Compression level for gzip (-1: zlib's default, 6).",
        _GZIP_LEVEL,
    ),
    _producer("compression.lz4.level", "int", 9, "Compression level for lz4.", _LZ4_LEVEL),
    _producer("compression.zstd.level", "int", 3, "Compression level for zstd.", _ZSTD_LEVEL),
    _producer("max.in.flight.requests.per.connection", "int", 5,
        "Unacknowledged requests per connection at most. At most 5 with idempotence.",
        Range.at_least(1), importance="low",
    ),
    _producer("retries", "int", INT_MAX,
        "Times a failed retriable send is retried (within delivery.timeout.ms).",
        Range.between(0, INT_MAX), importance="high",
    ),
    _producer("retry.backoff.ms", "long", 100,
        "Pause before the first retry of a failed request.",
        Range.at_least(0), importance="low",
    ),
    _producer("retry.backoff.max.ms", "long", 1000,
        "Longest pause between retries (the pause doubles up to it).",
        Range.at_least(0), importance="low",
    ),
    _producer("delivery.timeout.ms", "int", 120_000,
        "Upper bound on reporting a send's success or failure, retries included. At least "
        "linger.ms + request.timeout.ms.",
        Range.at_least(0),
    ),
    _producer("request.timeout.ms", "int", 30_000,
        "How long the producer waits for one request's response.",
        Range.at_least(0),
    ),
    _producer("max.request.size", "int", 1024 * 1024,
        "Largest request (and so largest batch) the producer sends.",
        Range.at_least(0),
    ),
    _producer("buffer.memory", "long", 32 * 1024 * 1024,
        "Bytes of records the producer buffers while they wait to be sent.",
        Range.at_least(0), importance="high",
    ),
    _producer("max.block.ms", "long", 60_000,
        "How long send() blocks when the buffer is full or metadata is missing.",
        Range.at_least(0),
    ),
    _producer("partitioner.ignore.keys", "boolean", False,
        "Whether keyed records are spread like unkeyed ones instead of by murmur2(key).",
    ),
    _producer("partitioner.adaptive.partitioning.enable", "boolean", True,
        "Whether unkeyed records go more often to partitions whose leaders respond faster.",
        importance="low",
    ),
    _producer("partitioner.availability.timeout.ms", "long", 0,
        "Time after which a partition whose leader cannot take records is skipped by the "
        "partitioner (0: never).",
        Range.at_least(0), importance="low",
    ),
    _producer("client.id", "string", "", "Name of this client in logs and metrics."),
    _producer("bootstrap.servers", "list", (),
        "The host:port of nodes to fetch cluster metadata from; empty for an embedded producer.",
        importance="high",
    ),
)

_CONSUMER_KEYS = (
    _consumer("group.id", "string", None,
        "Consumer group whose committed offsets this consumer uses (unset: none; offsets "
        "are not committed).",
        importance="high",
    ),
    _consumer("auto.offset.reset", "string", "latest",
        "Where to start when there is no committed offset or it is out of range: earliest, "
        "latest, or none (raise OffsetOutOfRangeError).",
        ValidString(("latest", "earliest", "none")),
    ),
    _consumer("enable.auto.commit", "boolean", True,
        "Whether consumed offsets are committed periodically (only with a group.id).",
    ),
    _consumer("auto.commit.interval.ms", "int", 5000,
        "How often offsets are committed when enable.auto.commit is on.",
        Range.at_least(0), importance="low",
    ),
    _consumer("isolation.level", "string", "read_uncommitted",
        "With read_committed, records of open and aborted transactions are hidden; "
        "read_uncommitted returns everything below the high watermark.",
        ValidString(("read_committed", "read_uncommitted")),
    ),
    _consumer("fetch.min.bytes", "int", 1,
        "Bytes a fetch waits for (up to fetch.max.wait.ms) before returning.",
        Range.at_least(0), importance="high",
    ),
    _consumer("fetch.max.bytes", "int", 50 * 1024 * 1024,
        "Bytes a fetch returns at most across partitions (soft: the first batch is returned "
        "whole).",
        Range.at_least(0),
    ),
    _consumer("fetch.max.wait.ms", "int", 500,
        "Longest time a fetch waits for fetch.min.bytes.",
        Range.at_least(0), importance="low",
    ),
    _consumer("max.partition.fetch.bytes", "int", 1024 * 1024,
        "Bytes a fetch returns at most per partition (soft: the first batch is returned "
        "whole).",
        Range.at_least(0), importance="high",
    ),
    _consumer("max.poll.records", "int", 500,
        "Records one poll() returns at most.",
        Range.at_least(1),
    ),
    _consumer("check.crcs", "boolean", True,
        "Whether the CRC-32C of every fetched batch is verified.",
        importance="low",
    ),
    _consumer("request.timeout.ms", "int", 30_000,
        "How long the consumer waits for one request's response.",
        Range.at_least(0),
    ),
    _consumer("default.api.timeout.ms", "int", 60_000,
        "Timeout of consumer calls that take no explicit timeout.",
        Range.at_least(0),
    ),
    _consumer("retry.backoff.ms", "long", 100,
        "Pause before retrying a failed request.",
        Range.at_least(0), importance="low",
    ),
    _consumer("client.id", "string", "", "Name of this client in logs and metrics."),
    _consumer("bootstrap.servers", "list", (),
        "The host:port of nodes to fetch cluster metadata from; empty for an embedded consumer.",
        importance="high",
    ),
)
# fmt: on

#: Every configuration key, by scope, in documentation order.
CONFIG_KEYS: tuple[ConfigKey, ...] = _TOPIC_KEYS + _BROKER_KEYS + _PRODUCER_KEYS + _CONSUMER_KEYS

#: Every configuration key by scope, then by name.
KEYS_BY_SCOPE: dict[Scope, dict[str, ConfigKey]] = {}
for _k in CONFIG_KEYS:
    _scope_keys = KEYS_BY_SCOPE.setdefault(_k.scope, {})
    if _k.name in _scope_keys:  # pragma: no cover - a table error
        raise RuntimeError(f"{_k.scope} key {_k.name} is defined twice")
    _scope_keys[_k.name] = _k
    if _k.topic_key is not None and _k.topic_key not in KEYS_BY_SCOPE["topic"]:  # pragma: no cover
        raise RuntimeError(f"{_k.name} names an unknown topic key {_k.topic_key}")

#: Topic key -> the broker keys that supply its broker-wide default, highest precedence
#: first (Kafka's ``ServerTopicConfigSynonyms``): ``retention.ms`` -> ``log.retention.ms``,
#: ``log.retention.minutes``, ``log.retention.hours``.
TOPIC_CONFIG_SYNONYMS: dict[str, list[ConfigKey]] = {}
for _k in _BROKER_KEYS:
    if _k.topic_key is not None:
        TOPIC_CONFIG_SYNONYMS.setdefault(_k.topic_key, []).append(_k)


def default_value(scope: Scope, name: str) -> Any:
    """The default of the ``scope`` key ``name`` (a config class's field default)."""
    return KEYS_BY_SCOPE[scope][name].default
