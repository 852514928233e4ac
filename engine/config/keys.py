"""Configuration with Apache Kafka's property names, defaults and validation rules.

One table, :data:`CONFIG_KEYS`, defines every key seglog understands: its dotted Kafka name,
type, default, validator, scope (``topic``, ``broker``, ``producer`` or ``consumer``) and
description. The frozen dataclasses :class:`LogConfig` (topic level), :class:`BrokerConfig`,
:class:`ProducerConfig` and :class:`ConsumerConfig` take their defaults and validation from
it, and :func:`configuration_markdown` renders it as ``docs/configuration.md``.

Names, defaults and validators are those of Apache Kafka 3.9 (the last release with
ZooKeeper mode), so a Kafka ``server.properties`` or a topic's config overrides mean the same
thing here. Attribute names are the keys with dots replaced by underscores::

    >>> cfg = LogConfig.from_dict({"segment.bytes": "1048576", "cleanup.policy": "compact,delete"})
    >>> cfg.segment_bytes, cfg.cleanup_policy, cfg.retention_ms
    (1048576, ('compact', 'delete'), 604800000)
    >>> cfg.with_overrides({"retention.ms": -1}).to_dict(changed_only=True)
    {'segment.bytes': 1048576, 'retention.ms': -1, 'cleanup.policy': ('compact', 'delete')}

Values may be typed (``int``, ``bool``, ``float``, ``str``, a sequence of ``str`` for lists)
or strings as they appear in a ``.properties`` file (``"true"``, ``"1073741824"``,
``"a,b"``). Unknown keys are rejected with the nearest valid key; a value of the wrong type
or outside its range is rejected with the key, the value and the valid range.

Broker keys that Kafka uses as defaults for topic keys (``log.segment.bytes`` for
``segment.bytes``, ``log.retention.hours`` / ``minutes`` / ``ms`` for ``retention.ms``, ...)
are resolved the way Kafka resolves them by :meth:`BrokerConfig.topic_config`.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import random
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from seglog.errors import ConfigError

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "CONFIG_KEYS",
    "BrokerConfig",
    "ConfigKey",
    "ConsumerConfig",
    "LogConfig",
    "ProducerConfig",
    "Range",
    "ValidList",
    "ValidString",
    "Validator",
    "configuration_markdown",
    "format_properties",
    "parse_properties",
]

ConfigType = Literal["boolean", "short", "int", "long", "double", "string", "list"]
Scope = Literal["topic", "broker", "producer", "consumer"]
Importance = Literal["high", "medium", "low"]

SHORT_MIN, SHORT_MAX = -(2**15), 2**15 - 1
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1

_INTEGER_BOUNDS = {
    "short": (SHORT_MIN, SHORT_MAX),
    "int": (INT_MIN, INT_MAX),
    "long": (LONG_MIN, LONG_MAX),
}
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_LIST_SPLIT = re.compile(r"\s*,\s*")


# --------------------------------------------------------------------------------------
# Validators (Kafka's ConfigDef.Range, ValidString, ValidList)
# --------------------------------------------------------------------------------------


class Validator:
    """Checks a parsed, non-null value."""

    __slots__ = ()

    def problem(self, value: Any) -> str | None:
        """What is wrong with ``value``, or ``None`` when it is valid."""
        raise NotImplementedError

    def describe(self) -> str:
        """The valid values, written the way Kafka's documentation writes them."""
        raise NotImplementedError


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 2**63 else repr(x)


@dataclass(frozen=True, slots=True)
class Range(Validator):
    """``low <= value <= high``; either bound may be open (``None``)."""

    low: float | None = None
    high: float | None = None

    @classmethod
    def at_least(cls, low: float) -> Range:
        return cls(low, None)

    @classmethod
    def between(cls, low: float, high: float) -> Range:
        return cls(low, high)

    def problem(self, value: Any) -> str | None:
        if self.low is not None and value < self.low:
            if self.high is None:
                return f"must be at least {_num(self.low)}"
            return f"must be between {_num(self.low)} and {_num(self.high)}"
        if self.high is not None and value > self.high:
            if self.low is None:
                return f"must be at most {_num(self.high)}"
            return f"must be between {_num(self.low)} and {_num(self.high)}"
        return None

    def describe(self) -> str:
        low = "" if self.low is None else _num(self.low) + ","
        high = "" if self.high is None else "," + _num(self.high)
        return f"[{low}...{high}]"


@dataclass(frozen=True, slots=True)
class RangeOr(Validator):
    """A range, or one extra value outside it (Kafka's gzip level: ``[1,...,9] or -1``)."""

    range: Range
    also: int

    def problem(self, value: Any) -> str | None:
        if value == self.also or self.range.problem(value) is None:
            return None
        return f"must be in {self.range.describe()} or be {self.also}"

    def describe(self) -> str:
        return f"{self.range.describe()} or {self.also}"


@dataclass(frozen=True, slots=True)
class ValidString(Validator):
    """One of a fixed set of strings (case-sensitive, as in Kafka)."""

    values: tuple[str, ...]

    def problem(self, value: Any) -> str | None:
        if value in self.values:
            return None
        return f"must be one of {self.describe()}"

    def describe(self) -> str:
        return "[" + ", ".join(self.values) + "]"


@dataclass(frozen=True, slots=True)
class ValidList(Validator):
    """Every item of a list is one of a fixed set of strings."""

    values: tuple[str, ...]

    def problem(self, value: Any) -> str | None:
        bad = [item for item in value if item not in self.values]
        if not bad:
            return None
        return f"{bad[0]!r} is not allowed; each item must be one of {self.describe()}"

    def describe(self) -> str:
        return "[" + ", ".join(self.values) + "]"


# --------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One configuration key: name, type, default, validator, scope and description."""

    name: str
    type: ConfigType
    default: Any
    doc: str
    scope: Scope
    validator: Validator | None = None
    importance: Importance = "medium"
    #: For a broker key: the topic key it supplies the broker-wide default of.
    topic_key: str | None = None
    #: For a broker key with a ``topic_key``: converts its value to the topic key's unit.
    to_topic: Callable[[Any], Any] | None = None
    #: False for keys accepted only so that Kafka's own files load; seglog ignores them.
    used: bool = True
    #: How the docs show the default, where the stored default alone would mislead.
    default_doc: str | None = None

    @property
    def attr(self) -> str:
        """The dataclass attribute name: the key with dots replaced by underscores."""
        return self.name.replace(".", "_")

    @property
    def nullable(self) -> bool:
        """Whether the key may be unset (``None``); true exactly when its default is."""
        return self.default is None

    def valid_values(self) -> str:
        """The valid values as the docs show them."""
        if self.validator is not None:
            return self.validator.describe()
        if self.type == "boolean":
            return "true, false"
        return ""

    # -- parsing -------------------------------------------------------------------------

    def _fail(self, value: Any, problem: str) -> ConfigError:
        allowed = self.valid_values()
        hint = f" (valid values: {allowed})" if allowed and allowed not in problem else ""
        return ConfigError(
            f"Invalid value {value!r} for configuration {self.name}: {problem}{hint}",
            key=self.name,
            value=value,
        )

    def parse(self, value: Any) -> Any:
        """``value`` (typed, or a string as in a properties file) as this key's Python type.

        Raises :class:`ConfigError` for a value of the wrong type; does not apply the
        validator (see :meth:`convert`).
        """
        if value is None:
            if self.nullable:
                return None
            raise self._fail(value, "a value is required (this key cannot be unset)")
        t = self.type
        if t == "boolean":
            if isinstance(value, bool):
                return value
            if isinstance(value, str):
                word = value.strip().lower()
                if word in ("true", "false"):
                    return word == "true"
            raise self._fail(value, "expected a boolean (true or false)")
        if t in _INTEGER_BOUNDS:
            low, high = _INTEGER_BOUNDS[t]
            if isinstance(value, bool):
                raise self._fail(value, f"expected a whole number (Java {t}), not a boolean")
            if isinstance(value, str):
                text = value.strip()
                if not _JAVA_INTEGER.fullmatch(text):
                    raise self._fail(value, f"expected a whole number (Java {t})")
                number = int(text)
            elif isinstance(value, int):
                number = int(value)
            else:
                raise self._fail(value, f"expected a whole number (Java {t})")
            if not low <= number <= high:
                raise self._fail(value, f"out of range for a Java {t}, which holds [{low}, {high}]")
            return number
        if t == "double":
            if isinstance(value, bool):
                raise self._fail(value, "expected a number, not a boolean")
            if isinstance(value, (int, float)):
                number_f = float(value)
            elif isinstance(value, str):
                try:
                    if "_" in value:  # Python's float() takes "1_0"; Java's parser does not
                        raise ValueError(value)
                    number_f = float(value.strip())
                except ValueError:
                    raise self._fail(value, "expected a number") from None
            else:
                raise self._fail(value, "expected a number")
            if math.isnan(number_f):
                raise self._fail(value, "expected a number, not NaN")
            return number_f
        if t == "string":
            if isinstance(value, bool):
                raise self._fail(value, "expected a string, not a boolean")
            if isinstance(value, int):
                return str(value)
            if isinstance(value, str):
                return value.strip()
            raise self._fail(value, "expected a string")
        if t == "list":
            items: Sequence[Any]
            if isinstance(value, str):
                text = value.strip()
                items = [] if not text else _LIST_SPLIT.split(text)
            elif isinstance(value, (list, tuple)):
                items = value
            else:
                raise self._fail(value, "expected a comma-separated string or a list of strings")
            out = []
            for item in items:
                if not isinstance(item, str):
                    raise self._fail(value, f"list items must be strings, got {item!r}")
                item = item.strip()
                if not item:
                    raise self._fail(value, "the list has an empty item")
                out.append(item)
            return tuple(out)
        raise AssertionError(f"unknown config type {t!r}")  # pragma: no cover

    def problem(self, value: Any) -> str | None:
        """What the validator finds wrong with a parsed value (``None``: valid)."""
        if value is None or self.validator is None:
            return None
        return self.validator.problem(value)

    def convert(self, value: Any) -> Any:
        """Parse and validate; raise :class:`ConfigError` naming key, value and range."""
        parsed = self.parse(value)
        problem = self.problem(parsed)
        if problem is not None:
            raise self._fail(parsed if not isinstance(value, str) else value, problem)
        return parsed


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

_DAY_MS = 86_400_000
_WEEK_MS = 7 * _DAY_MS
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

_IGNORED = "Accepted so that Kafka's own properties files load; seglog does not use it."

# fmt: off
_TOPIC_KEYS = (
    _topic("segment.bytes", "int", 1024 * 1024 * 1024,
        "Size at which the active segment is closed and a new one rolled. A batch larger than it "
        "is refused with RecordListTooLargeError, as Kafka refuses it.",
        Range.at_least(14), importance="high",
    ),
    _topic("segment.ms", "long", _WEEK_MS,
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
    _topic("retention.ms", "long", _WEEK_MS,
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
    _topic("delete.retention.ms", "long", _DAY_MS,
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
    _broker("log.cleaner.delete.retention.ms", "long", _DAY_MS,
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
    _broker("producer.id.expiration.ms", "int", _DAY_MS,
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
        _IGNORED,
        Range.at_least(1), importance="high", used=False,
    ),
    _broker("num.io.threads", "int", 8, _IGNORED, Range.at_least(1), importance="high", used=False),
    _broker("socket.send.buffer.bytes", "int", 100 * 1024, _IGNORED, importance="high", used=False),
    _broker("socket.receive.buffer.bytes", "int", 100 * 1024,
        _IGNORED,
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
        _IGNORED,
        Range.at_least(1), importance="high", used=False,
    ),
    _broker("transaction.state.log.replication.factor", "short", 3,
        _IGNORED,
        Range.at_least(1), importance="high", used=False,
    ),
    _broker("transaction.state.log.min.isr", "int", 2,
        _IGNORED,
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

_BY_SCOPE: dict[Scope, dict[str, ConfigKey]] = {}
for _k in CONFIG_KEYS:
    _scope_keys = _BY_SCOPE.setdefault(_k.scope, {})
    if _k.name in _scope_keys:  # pragma: no cover - a table error
        raise RuntimeError(f"{_k.scope} key {_k.name} is defined twice")
    _scope_keys[_k.name] = _k
    if _k.topic_key is not None and _k.topic_key not in _BY_SCOPE["topic"]:  # pragma: no cover
        raise RuntimeError(f"{_k.name} names an unknown topic key {_k.topic_key}")

#: topic key -> broker keys that supply its default, highest precedence first.
_TOPIC_SYNONYMS: dict[str, list[ConfigKey]] = {}
for _k in _BROKER_KEYS:
    if _k.topic_key is not None:
        _TOPIC_SYNONYMS.setdefault(_k.topic_key, []).append(_k)


def _default(scope: Scope, name: str) -> Any:
    return _BY_SCOPE[scope][name].default


# --------------------------------------------------------------------------------------
# Unknown keys
# --------------------------------------------------------------------------------------


def _unknown_key(scope: Scope, cls_name: str, key: Any) -> ConfigError:
    if not isinstance(key, str):
        return ConfigError(
            f"{cls_name}: configuration keys are strings, got {key!r}", key=None, value=key
        )
    valid = list(_BY_SCOPE[scope])
    normalized = {k.lower(): k for k in valid}
    exact = normalized.get(key.strip().lower().replace("_", "."))
    notes = []
    if exact is not None:
        suggestion: str | None = exact
        notes.append(f"did you mean {exact!r}? (keys are dotted and lower-case)")
    else:
        elsewhere = [s for s, keys in _BY_SCOPE.items() if s != scope and key in keys]
        synonym_target = None
        if scope == "topic" and "broker" in elsewhere:
            synonym_target = _BY_SCOPE["broker"][key].topic_key
        close = difflib.get_close_matches(key, valid, n=1, cutoff=0.0)
        suggestion = synonym_target or (close[0] if close else None)
        if elsewhere:
            names = list(elsewhere)
            where = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
            notes.append(f"{key!r} is a {where} key, not a {scope} key")
        if synonym_target is not None:
            notes.append(f"its topic-level form is {synonym_target!r}")
        elif scope == "broker" and key in _TOPIC_SYNONYMS:
            brokers = ", ".join(repr(k.name) for k in _TOPIC_SYNONYMS[key])
            suggestion = _TOPIC_SYNONYMS[key][0].name
            notes.append(f"the broker-wide default of topic key {key!r} is set with {brokers}")
        elif suggestion is not None:
            ratio = difflib.SequenceMatcher(None, key, suggestion).ratio()
            if ratio >= 0.6:
                notes.append(f"did you mean {suggestion!r}?")
            else:
                notes.append(
                    f"the closest valid key is {suggestion!r}; docs/configuration.md lists them all"
                )
    message = f"Unknown {scope} configuration key {key!r} for {cls_name}"
    if notes:
        message += ": " + "; ".join(notes)
    return ConfigError(message, key=key, value=None, suggestion=suggestion)


# --------------------------------------------------------------------------------------
# The dataclasses
# --------------------------------------------------------------------------------------


class _KafkaConfig:
    """Shared behaviour of the config dataclasses (built from :data:`CONFIG_KEYS`)."""

    __slots__ = ()

    SCOPE: ClassVar[Scope]
    _keys: ClassVar[dict[str, ConfigKey]]
    _attrs: ClassVar[dict[str, ConfigKey]]

    def __post_init__(self) -> None:
        for attr, key in self._attrs.items():
            value = getattr(self, attr)
            converted = key.convert(value)
            if converted is not value:
                object.__setattr__(self, attr, converted)
        self._check()

    def _check(self) -> None:
        """Rules that involve more than one key."""

    # -- construction ------------------------------------------------------------------

    @classmethod
    def definitions(cls) -> tuple[ConfigKey, ...]:
        """The table entries behind this class, in order."""
        return tuple(cls._keys.values())

    @classmethod
    def _kwargs(cls, mapping: Mapping[str, Any]) -> dict[str, Any]:
        kwargs = {}
        for name, value in mapping.items():
            key = cls._keys.get(name)
            if key is None:
                raise _unknown_key(cls.SCOPE, cls.__name__, name)
            kwargs[key.attr] = value
        return kwargs

    @classmethod
    def from_dict(cls, mapping: Mapping[str, Any]) -> Self:
        """Build from dotted Kafka keys; values typed or as strings; absent keys default."""
        return cls(**cls._kwargs(mapping))

    @classmethod
    def from_properties(cls, text: str, *, source: str | None = None) -> Self:
        """Build from the text of a Java ``.properties`` file (see :func:`parse_properties`).

        ``source`` (a file name) is named in errors along with the line.
        """
        entries = _parse_properties(text, source)
        values = {key: value for key, (value, _line) in entries.items()}
        try:
            return cls.from_dict(values)
        except ConfigError as exc:
            if exc.key is None or exc.key not in entries:
                raise
            line = entries[exc.key][1]
            where = f"line {line}" if source is None else f"in {source}, line {line}"
            raise ConfigError(
                f"{exc.message} ({where})",
                key=exc.key,
                value=exc.value,
                suggestion=exc.suggestion,
                path=source,
            ) from exc

    @classmethod
    def from_properties_file(cls, path: str | os.PathLike[str]) -> Self:
        """Build from a Java ``.properties`` file.

        The file is read as UTF-8, or as ISO-8859-1 (Java's encoding for properties
        streams) when it is not valid UTF-8.
        """
        with open(path, "rb") as f:
            raw = f.read()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("iso-8859-1")
        return cls.from_properties(text, source=os.fspath(path))

    def with_overrides(self, mapping: Mapping[str, Any] | None = None, /, **attrs: Any) -> Self:
        """A copy with some values replaced: dotted keys in ``mapping``, attribute names
        as keywords (``cfg.with_overrides({"segment.bytes": 1 << 20}, retention_ms=-1)``)."""
        kwargs = {attr: getattr(self, attr) for attr in self._attrs}
        if mapping is not None:
            kwargs.update(self._kwargs(mapping))
        for attr, value in attrs.items():
            if attr not in self._attrs:
                close = difflib.get_close_matches(attr, list(self._attrs), n=1, cutoff=0.0)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(
                    f"{type(self).__name__} has no setting {attr!r}{hint}",
                    key=attr.replace("_", "."),
                    suggestion=self._attrs[close[0]].name if close else None,
                )
            kwargs[attr] = value
        return type(self)(**kwargs)

    # -- output -----------------------------------------------------------------------

    def to_dict(self, *, changed_only: bool = False) -> dict[str, Any]:
        """The values by dotted key (typed); ``changed_only`` drops those at their default."""
        out = {}
        for attr, key in self._attrs.items():
            value = getattr(self, attr)
            if changed_only and value == key.default:
                continue
            out[key.name] = value
        return out

    def to_properties(self, *, changed_only: bool = False) -> str:
        """The values as ``.properties`` text that :meth:`from_properties` reads back.

        Unset (``None``) values are left out.
        """
        return format_properties(
            {k: v for k, v in self.to_dict(changed_only=changed_only).items() if v is not None}
        )


def _bind(cls: type[_KafkaConfig], scope: Scope) -> None:
    """Attach the table to a config dataclass and check that its fields match it."""
    keys = _BY_SCOPE[scope]
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    attrs = {k.attr: k for k in keys.values()}
    if list(fields) != list(attrs):  # pragma: no cover - a table/class mismatch
        raise RuntimeError(
            f"{cls.__name__} fields must be the {scope} keys in table order: "
            f"{list(fields)} != {list(attrs)}"
        )
    for attr, key in attrs.items():
        if fields[attr].default != key.default:  # pragma: no cover
            raise RuntimeError(f"{cls.__name__}.{attr} default differs from the table")
    cls.SCOPE = scope
    cls._keys = dict(keys)
    cls._attrs = {k.attr: k for k in keys.values()}


@dataclass(frozen=True, slots=True)
class LogConfig(_KafkaConfig):
    """Topic-level settings of one log (Kafka's ``LogConfig``); see docs/configuration.md."""

    segment_bytes: int = _default("topic", "segment.bytes")
    segment_ms: int = _default("topic", "segment.ms")
    segment_jitter_ms: int = _default("topic", "segment.jitter.ms")
    segment_index_bytes: int = _default("topic", "segment.index.bytes")
    index_interval_bytes: int = _default("topic", "index.interval.bytes")
    flush_messages: int = _default("topic", "flush.messages")
    flush_ms: int = _default("topic", "flush.ms")
    retention_ms: int = _default("topic", "retention.ms")
    retention_bytes: int = _default("topic", "retention.bytes")
    file_delete_delay_ms: int = _default("topic", "file.delete.delay.ms")
    max_message_bytes: int = _default("topic", "max.message.bytes")
    message_timestamp_type: str = _default("topic", "message.timestamp.type")
    message_timestamp_before_max_ms: int = _default("topic", "message.timestamp.before.max.ms")
    message_timestamp_after_max_ms: int = _default("topic", "message.timestamp.after.max.ms")
    cleanup_policy: tuple[str, ...] = _default("topic", "cleanup.policy")
    delete_retention_ms: int = _default("topic", "delete.retention.ms")
    min_cleanable_dirty_ratio: float = _default("topic", "min.cleanable.dirty.ratio")
    min_compaction_lag_ms: int = _default("topic", "min.compaction.lag.ms")
    max_compaction_lag_ms: int = _default("topic", "max.compaction.lag.ms")
    compression_type: str = _default("topic", "compression.type")
    compression_gzip_level: int = _default("topic", "compression.gzip.level")
    compression_lz4_level: int = _default("topic", "compression.lz4.level")
    compression_zstd_level: int = _default("topic", "compression.zstd.level")
    preallocate: bool = _default("topic", "preallocate")
    min_insync_replicas: int = _default("topic", "min.insync.replicas")
    unclean_leader_election_enable: bool = _default("topic", "unclean.leader.election.enable")

    def _check(self) -> None:
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise ConfigError(
                f"min.compaction.lag.ms ({self.min_compaction_lag_ms}) must not exceed "
                f"max.compaction.lag.ms ({self.max_compaction_lag_ms})",
                key="min.compaction.lag.ms",
                value=self.min_compaction_lag_ms,
            )

    @property
    def compact(self) -> bool:
        """Whether ``cleanup.policy`` includes ``compact``."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """Whether ``cleanup.policy`` includes ``delete``."""
        return "delete" in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """Age at which the active segment rolls: ``segment.ms``, capped by
        ``max.compaction.lag.ms`` on compacted topics (as in Kafka)."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def init_file_size(self) -> int:
        """Size a new segment file is created with (``segment.bytes`` if preallocating)."""
        return self.segment_bytes if self.preallocate else 0

    def random_segment_jitter(self, rng: random.Random) -> int:
        """A roll jitter for a new segment, uniform in ``[0, min(jitter, segment.ms))``."""
        if self.segment_jitter_ms == 0:
            return 0
        return rng.randrange(min(self.segment_jitter_ms, self.segment_ms))


_bind(LogConfig, "topic")


@dataclass(frozen=True, slots=True)
class BrokerConfig(_KafkaConfig):
    """Node-level settings (Kafka's ``KafkaConfig``), including the broker-wide defaults of
    topic settings; see docs/configuration.md."""

    node_id: int = _default("broker", "node.id")
    broker_id: int = _default("broker", "broker.id")
    listeners: tuple[str, ...] = _default("broker", "listeners")
    advertised_listeners: tuple[str, ...] | None = _default("broker", "advertised.listeners")
    zookeeper_connect: str | None = _default("broker", "zookeeper.connect")
    zookeeper_session_timeout_ms: int = _default("broker", "zookeeper.session.timeout.ms")
    zookeeper_connection_timeout_ms: int | None = _default(
        "broker", "zookeeper.connection.timeout.ms"
    )
    controlled_shutdown_enable: bool = _default("broker", "controlled.shutdown.enable")
    controlled_shutdown_max_retries: int = _default("broker", "controlled.shutdown.max.retries")
    controlled_shutdown_retry_backoff_ms: int = _default(
        "broker", "controlled.shutdown.retry.backoff.ms"
    )
    log_dirs: tuple[str, ...] | None = _default("broker", "log.dirs")
    log_dir: str = _default("broker", "log.dir")
    num_partitions: int = _default("broker", "num.partitions")
    default_replication_factor: int = _default("broker", "default.replication.factor")
    auto_create_topics_enable: bool = _default("broker", "auto.create.topics.enable")
    num_recovery_threads_per_data_dir: int = _default("broker", "num.recovery.threads.per.data.dir")
    log_retention_check_interval_ms: int = _default("broker", "log.retention.check.interval.ms")
    log_flush_offset_checkpoint_interval_ms: int = _default(
        "broker", "log.flush.offset.checkpoint.interval.ms"
    )
    log_flush_start_offset_checkpoint_interval_ms: int = _default(
        "broker", "log.flush.start.offset.checkpoint.interval.ms"
    )
    log_segment_bytes: int = _default("broker", "log.segment.bytes")
    log_roll_ms: int | None = _default("broker", "log.roll.ms")
    log_roll_hours: int = _default("broker", "log.roll.hours")
    log_roll_jitter_ms: int | None = _default("broker", "log.roll.jitter.ms")
    log_roll_jitter_hours: int = _default("broker", "log.roll.jitter.hours")
    log_retention_ms: int | None = _default("broker", "log.retention.ms")
    log_retention_minutes: int | None = _default("broker", "log.retention.minutes")
    log_retention_hours: int = _default("broker", "log.retention.hours")
    log_retention_bytes: int = _default("broker", "log.retention.bytes")
    log_index_size_max_bytes: int = _default("broker", "log.index.size.max.bytes")
    log_index_interval_bytes: int = _default("broker", "log.index.interval.bytes")
    log_flush_interval_messages: int = _default("broker", "log.flush.interval.messages")
    log_flush_interval_ms: int | None = _default("broker", "log.flush.interval.ms")
    log_flush_scheduler_interval_ms: int = _default("broker", "log.flush.scheduler.interval.ms")
    log_segment_delete_delay_ms: int = _default("broker", "log.segment.delete.delay.ms")
    message_max_bytes: int = _default("broker", "message.max.bytes")
    log_message_timestamp_type: str = _default("broker", "log.message.timestamp.type")
    log_message_timestamp_before_max_ms: int = _default(
        "broker", "log.message.timestamp.before.max.ms"
    )
    log_message_timestamp_after_max_ms: int = _default(
        "broker", "log.message.timestamp.after.max.ms"
    )
    log_cleanup_policy: tuple[str, ...] = _default("broker", "log.cleanup.policy")
    log_cleaner_enable: bool = _default("broker", "log.cleaner.enable")
    log_cleaner_backoff_ms: int = _default("broker", "log.cleaner.backoff.ms")
    log_cleaner_delete_retention_ms: int = _default("broker", "log.cleaner.delete.retention.ms")
    log_cleaner_min_cleanable_ratio: float = _default("broker", "log.cleaner.min.cleanable.ratio")
    log_cleaner_min_compaction_lag_ms: int = _default("broker", "log.cleaner.min.compaction.lag.ms")
    log_cleaner_max_compaction_lag_ms: int = _default("broker", "log.cleaner.max.compaction.lag.ms")
    compression_type: str = _default("broker", "compression.type")
    compression_gzip_level: int = _default("broker", "compression.gzip.level")
    compression_lz4_level: int = _default("broker", "compression.lz4.level")
    compression_zstd_level: int = _default("broker", "compression.zstd.level")
    log_preallocate: bool = _default("broker", "log.preallocate")
    min_insync_replicas: int = _default("broker", "min.insync.replicas")
    unclean_leader_election_enable: bool = _default("broker", "unclean.leader.election.enable")
    replica_lag_time_max_ms: int = _default("broker", "replica.lag.time.max.ms")
    replica_fetch_max_bytes: int = _default("broker", "replica.fetch.max.bytes")
    replica_fetch_response_max_bytes: int = _default("broker", "replica.fetch.response.max.bytes")
    replica_fetch_min_bytes: int = _default("broker", "replica.fetch.min.bytes")
    replica_fetch_wait_max_ms: int = _default("broker", "replica.fetch.wait.max.ms")
    replica_fetch_backoff_ms: int = _default("broker", "replica.fetch.backoff.ms")
    replica_socket_timeout_ms: int = _default("broker", "replica.socket.timeout.ms")
    replica_socket_receive_buffer_bytes: int = _default(
        "broker", "replica.socket.receive.buffer.bytes"
    )
    num_replica_fetchers: int = _default("broker", "num.replica.fetchers")
    replica_high_watermark_checkpoint_interval_ms: int = _default(
        "broker", "replica.high.watermark.checkpoint.interval.ms"
    )
    controller_socket_timeout_ms: int = _default("broker", "controller.socket.timeout.ms")
    auto_leader_rebalance_enable: bool = _default("broker", "auto.leader.rebalance.enable")
    leader_imbalance_check_interval_seconds: int = _default(
        "broker", "leader.imbalance.check.interval.seconds"
    )
    leader_imbalance_per_broker_percentage: int = _default(
        "broker", "leader.imbalance.per.broker.percentage"
    )
    producer_id_expiration_ms: int = _default("broker", "producer.id.expiration.ms")
    max_incremental_fetch_session_cache_slots: int = _default(
        "broker", "max.incremental.fetch.session.cache.slots"
    )
    fetch_max_bytes: int = _default("broker", "fetch.max.bytes")
    socket_request_max_bytes: int = _default("broker", "socket.request.max.bytes")
    connections_max_idle_ms: int = _default("broker", "connections.max.idle.ms")
    group_min_session_timeout_ms: int = _default("broker", "group.min.session.timeout.ms")
    group_max_session_timeout_ms: int = _default("broker", "group.max.session.timeout.ms")
    group_initial_rebalance_delay_ms: int = _default("broker", "group.initial.rebalance.delay.ms")
    num_network_threads: int = _default("broker", "num.network.threads")
    num_io_threads: int = _default("broker", "num.io.threads")
    socket_send_buffer_bytes: int = _default("broker", "socket.send.buffer.bytes")
    socket_receive_buffer_bytes: int = _default("broker", "socket.receive.buffer.bytes")
    offsets_topic_num_partitions: int = _default("broker", "offsets.topic.num.partitions")
    offsets_topic_segment_bytes: int = _default("broker", "offsets.topic.segment.bytes")
    offsets_topic_replication_factor: int = _default("broker", "offsets.topic.replication.factor")
    transaction_state_log_replication_factor: int = _default(
        "broker", "transaction.state.log.replication.factor"
    )
    transaction_state_log_min_isr: int = _default("broker", "transaction.state.log.min.isr")

    def _check(self) -> None:
        if self.node_id >= 0 and self.broker_id >= 0 and self.node_id != self.broker_id:
            raise ConfigError(
                f"node.id ({self.node_id}) and broker.id ({self.broker_id}) must be equal "
                "when both are set",
                key="node.id",
                value=self.node_id,
            )
        if self.replica_fetch_wait_max_ms > self.replica_socket_timeout_ms:
            raise ConfigError(
                f"replica.fetch.wait.max.ms ({self.replica_fetch_wait_max_ms}) must not "
                f"exceed replica.socket.timeout.ms ({self.replica_socket_timeout_ms}), or "
                "idle follower fetches time out",
                key="replica.fetch.wait.max.ms",
                value=self.replica_fetch_wait_max_ms,
            )
        if self.replica_fetch_wait_max_ms > self.replica_lag_time_max_ms:
            raise ConfigError(
                f"replica.fetch.wait.max.ms ({self.replica_fetch_wait_max_ms}) must not "
                f"exceed replica.lag.time.max.ms ({self.replica_lag_time_max_ms}), or idle "
                "followers drop out of the ISR",
                key="replica.fetch.wait.max.ms",
                value=self.replica_fetch_wait_max_ms,
            )
        if not self.effective_log_dirs or any(not d for d in self.effective_log_dirs):
            raise ConfigError(
                "at least one log directory must be given, with log.dirs or log.dir",
                key="log.dirs" if self.log_dirs is not None else "log.dir",
                value=self.log_dirs if self.log_dirs is not None else self.log_dir,
            )
        if self.topic_defaults()["retention.ms"] == 0:
            source = self._topic_source("retention.ms")
            raise ConfigError(
                f"{source} gives a retention of 0 ms; it must be -1 (unlimited) or at least 1 ms",
                key=source,
                value=getattr(self, source.replace(".", "_")),
            )
        self._topic_defaults_config()

    @property
    def effective_node_id(self) -> int:
        """``node.id`` if set, else ``broker.id`` (-1 if neither is set)."""
        return self.node_id if self.node_id >= 0 else self.broker_id

    @property
    def effective_log_dirs(self) -> tuple[str, ...]:
        """``log.dirs`` if set, else ``(log.dir,)``."""
        return self.log_dirs if self.log_dirs is not None else (self.log_dir,)

    def topic_defaults(self) -> dict[str, Any]:
        """The broker-wide defaults of topic keys, by topic key, resolved as Kafka does.

        For each topic key the first of its broker keys that is set wins, converted to the
        topic key's unit (``log.retention.ms``, then ``log.retention.minutes``, then
        ``log.retention.hours``; any negative retention becomes -1).
        """
        out: dict[str, Any] = {}
        for topic_key, brokers in _TOPIC_SYNONYMS.items():
            for key in brokers:
                value = getattr(self, key.attr)
                if value is not None:
                    out[topic_key] = value if key.to_topic is None else key.to_topic(value)
                    break
        return out

    def _topic_source(self, topic_key: str) -> str:
        for key in _TOPIC_SYNONYMS.get(topic_key, ()):
            if getattr(self, key.attr) is not None:
                return key.name
        return topic_key  # pragma: no cover - every topic key with a synonym has one set

    def _topic_defaults_config(self) -> LogConfig:
        defaults = self.topic_defaults()
        try:
            return LogConfig.from_dict(defaults)
        except ConfigError as exc:
            source = self._topic_source(exc.key) if exc.key is not None else None
            raise ConfigError(
                f"{source} gives an invalid default for topic key {exc.key}: {exc.message}",
                key=source,
                value=getattr(self, source.replace(".", "_"), None) if source else None,
            ) from exc

    def topic_config(self, overrides: Mapping[str, Any] | None = None) -> LogConfig:
        """The :class:`LogConfig` of a topic: these broker-wide defaults, then the topic's
        own ``overrides`` (dotted topic keys)."""
        base = self._topic_defaults_config()
        return base if not overrides else base.with_overrides(overrides)


_bind(BrokerConfig, "broker")


@dataclass(frozen=True, slots=True)
class ProducerConfig(_KafkaConfig):
    """Settings of the embedded producer (Kafka's ``ProducerConfig``)."""

    acks: str = _default("producer", "acks")
    enable_idempotence: bool | None = _default("producer", "enable.idempotence")
    batch_size: int = _default("producer", "batch.size")
    linger_ms: int = _default("producer", "linger.ms")
    compression_type: str = _default("producer", "compression.type")
    compression_gzip_level: int = _default("producer", "compression.gzip.level")
    compression_lz4_level: int = _default("producer", "compression.lz4.level")
    compression_zstd_level: int = _default("producer", "compression.zstd.level")
    max_in_flight_requests_per_connection: int = _default(
        "producer", "max.in.flight.requests.per.connection"
    )
    retries: int = _default("producer", "retries")
    retry_backoff_ms: int = _default("producer", "retry.backoff.ms")
    retry_backoff_max_ms: int = _default("producer", "retry.backoff.max.ms")
    delivery_timeout_ms: int = _default("producer", "delivery.timeout.ms")
    request_timeout_ms: int = _default("producer", "request.timeout.ms")
    max_request_size: int = _default("producer", "max.request.size")
    buffer_memory: int = _default("producer", "buffer.memory")
    max_block_ms: int = _default("producer", "max.block.ms")
    partitioner_ignore_keys: bool = _default("producer", "partitioner.ignore.keys")
    partitioner_adaptive_partitioning_enable: bool = _default(
        "producer", "partitioner.adaptive.partitioning.enable"
    )
    partitioner_availability_timeout_ms: int = _default(
        "producer", "partitioner.availability.timeout.ms"
    )
    client_id: str = _default("producer", "client.id")
    bootstrap_servers: tuple[str, ...] = _default("producer", "bootstrap.servers")

    def _idempotence_conflicts(self) -> list[str]:
        conflicts = []
        if self.max_in_flight_requests_per_connection > 5:
            conflicts.append(
                "max.in.flight.requests.per.connection must be at most 5 "
                f"(is {self.max_in_flight_requests_per_connection})"
            )
        if self.retries == 0:
            conflicts.append("retries must not be 0")
        if self.acks not in ("all", "-1"):
            conflicts.append(f"acks must be all (is {self.acks})")
        return conflicts

    def _check(self) -> None:
        if self.enable_idempotence:
            conflicts = self._idempotence_conflicts()
            if conflicts:
                raise ConfigError(
                    "enable.idempotence=true needs: "
                    + "; ".join(conflicts)
                    + " (or set enable.idempotence=false)",
                    key="enable.idempotence",
                    value=True,
                )
        if self.delivery_timeout_ms < self.linger_ms + self.request_timeout_ms:
            raise ConfigError(
                f"delivery.timeout.ms ({self.delivery_timeout_ms}) must be at least "
                f"linger.ms + request.timeout.ms ({self.linger_ms} + "
                f"{self.request_timeout_ms})",
                key="delivery.timeout.ms",
                value=self.delivery_timeout_ms,
            )

    @property
    def idempotent(self) -> bool:
        """Whether the producer is idempotent (``enable.idempotence`` resolved as Kafka
        resolves its default)."""
        if self.enable_idempotence is not None:
            return self.enable_idempotence
        return not self._idempotence_conflicts()

    @property
    def required_acks(self) -> int:
        """``acks`` as the protocol's number: -1 (all), 0 or 1."""
        return -1 if self.acks == "all" else int(self.acks)


_bind(ProducerConfig, "producer")


@dataclass(frozen=True, slots=True)
class ConsumerConfig(_KafkaConfig):
    """Settings of the embedded consumer (Kafka's ``ConsumerConfig``)."""

    group_id: str | None = _default("consumer", "group.id")
    auto_offset_reset: str = _default("consumer", "auto.offset.reset")
    enable_auto_commit: bool = _default("consumer", "enable.auto.commit")
    auto_commit_interval_ms: int = _default("consumer", "auto.commit.interval.ms")
    isolation_level: str = _default("consumer", "isolation.level")
    fetch_min_bytes: int = _default("consumer", "fetch.min.bytes")
    fetch_max_bytes: int = _default("consumer", "fetch.max.bytes")
    fetch_max_wait_ms: int = _default("consumer", "fetch.max.wait.ms")
    max_partition_fetch_bytes: int = _default("consumer", "max.partition.fetch.bytes")
    max_poll_records: int = _default("consumer", "max.poll.records")
    check_crcs: bool = _default("consumer", "check.crcs")
    request_timeout_ms: int = _default("consumer", "request.timeout.ms")
    default_api_timeout_ms: int = _default("consumer", "default.api.timeout.ms")
    retry_backoff_ms: int = _default("consumer", "retry.backoff.ms")
    client_id: str = _default("consumer", "client.id")
    bootstrap_servers: tuple[str, ...] = _default("consumer", "bootstrap.servers")

    @property
    def auto_commit(self) -> bool:
        """Whether offsets are auto-committed: ``enable.auto.commit`` and a ``group.id``."""
        return self.enable_auto_commit and self.group_id is not None


_bind(ConsumerConfig, "consumer")


# --------------------------------------------------------------------------------------
# Java .properties files
# --------------------------------------------------------------------------------------

_PROP_WHITESPACE = " \t\f"
_PROP_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str, source: str | None, line: int) -> str:
    out = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= n:  # a lone trailing backslash (only at end of input) is dropped
            break
        c = text[i]
        i += 1
        if c == "u":
            digits = text[i : i + 4]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                where = f"line {line}" if source is None else f"in {source}, line {line}"
                escape = "\\u" + digits
                raise ConfigError(f"malformed \\uXXXX escape {escape!r} ({where})", path=source)
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_PROP_ESCAPES.get(c, c))
    # Surrogate pairs written as two \u escapes become one character.
    joined = "".join(out)
    if any("\ud800" <= ch <= "\udfff" for ch in joined):
        joined = joined.encode("utf-16", "surrogatepass").decode("utf-16")
    return joined


def _logical_lines(text: str) -> Iterable[tuple[str, int]]:
    """Java Properties' logical lines: comments and blank lines dropped, backslash-newline
    continuations joined (the continuation's leading whitespace removed)."""
    natural = re.split(r"\r\n|\r|\n", text)
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(natural, start=1):
        line = raw.lstrip(_PROP_WHITESPACE)
        if not pending:
            if not line or line[0] in "#!":
                continue
            start = number
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending.append(line[:-1])
            continue
        pending.append(line)
        yield "".join(pending), start
        pending = []
    if pending:
        yield "".join(pending), start


def _parse_properties(text: str, source: str | None = None) -> dict[str, tuple[str, int]]:
    entries: dict[str, tuple[str, int]] = {}
    for line, number in _logical_lines(text):
        key_end = len(line)
        value_start = len(line)
        has_sep = False
        backslash = False
        for i, c in enumerate(line):
            if not backslash and c in "=:":
                key_end, value_start, has_sep = i, i + 1, True
                break
            if not backslash and c in _PROP_WHITESPACE:
                key_end, value_start = i, i + 1
                break
            backslash = (not backslash) if c == "\\" else False
        while value_start < len(line):
            c = line[value_start]
            if c not in _PROP_WHITESPACE:
                if not has_sep and c in "=:":
                    has_sep = True
                else:
                    break
            value_start += 1
        key = _unescape(line[:key_end], source, number)
        value = _unescape(line[value_start:], source, number)
        entries[key] = (value, number)  # a repeated key: the last one wins, as in Java
    return entries


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text the way ``java.util.Properties.load`` does.

    ``#`` and ``!`` start comment lines; the key ends at the first unescaped ``=``, ``:`` or
    whitespace; a line ending in an odd number of backslashes continues on the next;
    ``\\t \\n \\r \\f \\uXXXX`` are escapes and a backslash before any other character
    stands for that character. A repeated key keeps its last value.
    """
    return {key: value for key, (value, _line) in _parse_properties(text).items()}


def _escape(text: str, *, is_key: bool) -> str:
    out = []
    for i, c in enumerate(text):
        if c == " ":
            out.append("\\ " if is_key or i == 0 else " ")
        elif c in "\\=:#!":
            out.append("\\" + c)
        elif c in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[c])
        elif " " < c <= "~":
            out.append(c)
        else:
            for unit in range(0, len(c.encode("utf-16-be")), 2):
                code = int.from_bytes(c.encode("utf-16-be")[unit : unit + 2], "big")
                out.append(f"\\u{code:04X}")
    return "".join(out)


def _format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return ",".join(str(v) for v in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def format_properties(values: Mapping[str, Any]) -> str:
    """``values`` as ``.properties`` text (escaped as ``Properties.store`` escapes)."""
    return "".join(
        f"{_escape(key, is_key=True)}={_escape(_format_value(value), is_key=False)}\n"
        for key, value in values.items()
    )


# --------------------------------------------------------------------------------------
# Documentation
# --------------------------------------------------------------------------------------

_UNITS_MS = (
    (_WEEK_MS, "week"),
    (_DAY_MS, "day"),
    (3_600_000, "hour"),
    (60_000, "minute"),
    (1000, "second"),
)
_UNITS_BYTES = ((1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB"))


def _render_default(key: ConfigKey) -> str:
    if key.default_doc is not None:
        return key.default_doc
    value = key.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{'true' if value else 'false'}`"
    if isinstance(value, tuple):
        return f"`{','.join(value)}`" if value else '`""` (empty)'
    if isinstance(value, str):
        return f"`{value}`" if value else '`""` (empty)'
    text = f"`{_format_value(value)}`"
    if value == LONG_MAX:
        return text + " (Long.MAX_VALUE)"
    if value == INT_MAX:
        return text + " (Integer.MAX_VALUE)"
    if isinstance(value, int) and value > 0:
        if key.name.endswith(".ms"):
            for size, unit in _UNITS_MS:
                if value >= size and value % size == 0:
                    count = value // size
                    return f"{text} ({count} {unit}{'s' if count != 1 else ''})"
        if key.name.endswith(".bytes"):
            for size, unit in _UNITS_BYTES:
                if value >= size and value % size == 0:
                    return f"{text} ({value // size} {unit})"
    return text


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


_SECTIONS: tuple[tuple[Scope, str, str], ...] = (
    (
        "topic",
        "Topic settings — `LogConfig`",
        (
            "Per-topic settings of each partition's log. A topic without an override takes the "
            "broker-wide default named in the last column."
        ),
    ),
    (
        "broker",
        "Node settings — `BrokerConfig`",
        (
            "Settings of one node (`seglog node --config node.properties`). A key with an "
            "entry under *Topic default of* supplies the broker-wide default of that topic key; "
            "where several supply the same one, the first that is set wins, in the order listed."
        ),
    ),
    (
        "producer",
        "Producer settings — `ProducerConfig`",
        "Settings of the embedded producer.",
    ),
    (
        "consumer",
        "Consumer settings — `ConsumerConfig`",
        "Settings of the embedded consumer.",
    ),
)


def configuration_markdown() -> str:
    """The Markdown reference of every key (``docs/configuration.md``)."""
    lines = [
        "# Configuration reference",
        "",
        (
            "<!-- Generated from the table in engine/config.py by "
            "`python -m seglog.config > docs/configuration.md`; do not edit by hand. -->"
        ),
        "",
        (
            "seglog takes Apache Kafka's property names, defaults and valid ranges (as of Kafka "
            "3.9), so a Kafka `server.properties` or a topic's config overrides mean the same "
            "here. Each class below is a frozen dataclass whose attributes are the keys with "
            "dots replaced by underscores (`segment.bytes` → `segment_bytes`). Build one with "
            "`from_dict({...})`, `from_properties_file(path)` or keyword arguments; change one "
            "with `with_overrides(...)`; read it back with `to_dict()` or `to_properties()`. "
            "Unknown keys and invalid values raise `seglog.errors.ConfigError`, naming the key, "
            "the value and the valid range or the nearest valid key."
        ),
        "",
        (
            "Ranges are written as Kafka writes them: `[1,...]` means at least 1, "
            "`[0,...,1]` between 0 and 1. Types are Java's: `int` holds 32 bits, `long` 64, "
            "`short` 16; a `list` is comma-separated in a properties file and a tuple of "
            "strings in Python."
        ),
    ]
    for scope, title, intro in _SECTIONS:
        keys = [k for k in CONFIG_KEYS if k.scope == scope]
        lines += ["", f"## {title}", "", intro, ""]
        if scope == "topic":
            header = "| Key | Type | Default | Valid values | Broker default | Description |"
        elif scope == "broker":
            header = "| Key | Type | Default | Valid values | Topic default of | Description |"
        else:
            header = "| Key | Type | Default | Valid values | Description |"
        lines.append(header)
        lines.append("|" + "---|" * header.count(" | ") + "---|")
        for key in keys:
            cells = [
                f"`{key.name}`",
                key.type,
                _render_default(key),
                f"`{key.valid_values()}`" if key.valid_values() else "",
            ]
            if scope == "topic":
                cells.append(", ".join(f"`{b.name}`" for b in _TOPIC_SYNONYMS.get(key.name, [])))
            elif scope == "broker":
                cells.append(f"`{key.topic_key}`" if key.topic_key else "")
            doc = key.doc if key.used or key.doc == _IGNORED else f"{key.doc} {_IGNORED}"
            cells.append(doc)
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    sys.stdout.write(configuration_markdown())
