"""Spark reads and writes Kafka log directories directly: a PySpark Python data source.

Point Spark at a directory of ``topic-N`` partition dirs — written by seglog or by an Apache
Kafka broker (``log.dirs``) — and get the DataFrame Spark's own Kafka source would give, with no
broker running and no copy step::

    from seglog.bindings.spark import register
    register(spark)          # spark.dataSource.register + filter pushdown on
    df = spark.read.format("seglog").load("/var/lib/kafka/data")
    df.where("topic = 'orders' AND offset >= 1000").select("value").show()

Installed with the package, the top-level module ``pyspark_seglog`` lets PySpark find the source
by itself (``format("seglog")`` works without ``register``); ``register`` also switches on
``spark.sql.python.filterPushdown.enabled`` so ``WHERE`` clauses narrow the plan.

Schema (Spark's Kafka source): ``key binary, value binary, topic string, partition int,
offset bigint, timestamp timestamp, timestampType int``, plus ``headers
array<struct<key string, value binary>>`` with ``includeHeaders=true`` and ``leaderEpoch int``
with ``includeLeaderEpoch=true``. ``columns=value,offset`` (or ``.schema("value binary, offset
bigint")``) produces only those columns — PySpark gives a Python source no column pruning, so
leaving out ``key``/``value``/``headers`` is how a query avoids paying to copy them.

Read options (names as in Spark's Kafka source where one exists; case-insensitive):

==================================  ========================================================
``path`` / ``load(p)``              a log dir, a partition dir, several (``load([a, b])``) or a glob
``topics`` (alias ``subscribe``)    comma-separated topics; ``subscribePattern`` a regex;
                                    ``assign`` JSON ``{"t": [0, 1]}``; default: every topic.
                                    Internal topics (``__consumer_offsets``,
                                    ``__transaction_state``) only when named in topics or
                                    assign, or loaded by their partition dir's path
``startingOffsets``                 ``earliest`` (batch default), ``latest`` (stream default) or
                                    JSON ``{"t": {"0": 23, "1": -2}}`` (-2 earliest, -1 latest);
                                    partitions left out start at the default; a batch query
                                    refuses ``latest`` and -1, as Spark's Kafka source does
``endingOffsets``                   batch only: ``latest`` (default) or JSON, exclusive
``startingTimestamp``,              ms since the epoch: the first offset whose record timestamp
``startingOffsetsByTimestamp``      is >= it (Kafka's ``offsetsForTimes``); the JSON form per
                                    partition; ``startingOffsetsByTimestampStrategy`` = ``error``
                                    (default) or ``latest`` when no record is that new
``endingTimestamp``,                batch only, same lookup, exclusive; no match = latest
``endingOffsetsByTimestamp``
``minPartitions``,                  Kafka's splitting of offset ranges into Spark tasks (applied to
``maxRecordsPerPartition``          the per-segment ranges below)
``maxBytesPerPartition``            consecutive segments of a partition are read by one task up to
                                    this many bytes of log (default 128 MiB); bigger segments are a
                                    task each
``isolation.level``                 ``read_uncommitted`` (default) or ``read_committed``
``failOnDataLoss``                  ``true`` (default): fail when asked-for offsets are gone or a
                                    segment is corrupt (a CRC mismatch, a malformed batch
                                    header); ``false``: skip them with a warning
``includeControl``                  ``false`` (default): transaction markers are left out
``readUpTo``                        ``auto`` (default), ``logEnd`` or ``highWatermark`` (below)
``includeHeaders``,                 add ``headers`` / ``leaderEpoch``
``includeLeaderEpoch``
``columns``                         the exact output columns, comma-separated
``maxRowsPerBatch``                 rows per Arrow batch handed to Spark (default 100000); each
                                    batch comes from at most 64 MiB of log (or one bigger batch)
``maxRecordsPerTrigger``            streaming: offsets per micro-batch, shared across partitions in
(alias ``maxOffsetsPerTrigger``)    proportion to their backlog (needs PySpark >= 4.2)
``pushFilters``                     ``auto`` (default) or ``false``
==================================  ========================================================

How a read runs. On the driver, planning reads no record data: it lists partition dirs and
segment files (names are base offsets, sizes come from ``stat``), opens each partition's last
segment to find the log end (a scan of the batch headers after its last offset-index entry),
and resolves timestamps through the time indexes. Each Spark task gets a small
:class:`SeglogInputPartition` — a directory, offsets, segment base offsets — and opens the
segment files itself (``mmap``), decodes whole batches (any codec, magic 0/1/2) straight into
Arrow buffers (:mod:`seglog.bindings.arrow`) and yields record batches of at most
``maxRowsPerBatch`` rows. A timestamp bound is resolved to a batch on the driver; the task
finds the exact record inside that one batch.

Pushed filters (with ``spark.sql.python.filterPushdown.enabled``): ``topic`` (=, IN, LIKE
prefix/suffix/contains), ``partition`` (=, IN, <, <=, >, >=) and ``offset`` (=, <, <=, >, >=)
are applied exactly and disappear from Spark's Filter; ``offset IN (...)`` and ``timestamp >= /
> / =`` narrow the plan (segments and batches before the first record that new are skipped,
through the time index) and Spark still checks them. Timestamps are not ordered in a Kafka log,
so an upper timestamp bound cannot skip anything and is left to Spark.

``readUpTo`` and the high watermark. A Kafka log dir keeps each partition's high watermark in
``replication-offset-checkpoint``; records past it are not committed (a broker may truncate
them). ``highWatermark`` reads only below it (the file must exist), ``logEnd`` reads everything
on disk, ``auto`` uses the high watermark when the log dir has that file and the log end
otherwise. A partition missing from an existing file has committed nothing.

``read_committed``. Batches of aborted transactions and everything from the first offset of a
transaction still open (the last stable offset) on are left out. The driver walks the batch
headers of the range (headers only: producer id, attributes, offsets) to follow each
producer's open transaction; a transaction marker closes it. Whether it aborted comes from the
segment's ``.txnindex`` when the segment has one (Kafka and seglog write one where a transaction
aborted) and otherwise from the marker's control record key (ABORT or COMMIT), the only record
bytes planning reads. The walk starts at the first offset read, so a transaction still open that
began before it is not seen.

Writing. ``df.write.format("seglog").mode("append").option("topic", "t").save(path)`` takes
``value`` (binary or string, required), and optional ``key``, ``topic`` (a column, or the
``topic`` option, which wins), ``partition`` (else Kafka's murmur2 of the key; records without
a key go to one partition per task and input batch), ``timestamp`` (else the time of writing)
and ``headers``. Each task encodes RecordBatch v2 batches (``compression`` option) and, under an
claim on each partition (:mod:`seglog.storage.logdir`: one writer per partition; tasks writing the
same partition take turns), appends them with :class:`seglog.Log` in one contiguous run per
partition, then fsyncs. A log dir owned by a store, a replica node or a Kafka broker refuses
the write (``LogDirectoryLockedError``, at ``save()`` before any task runs). Nothing moves the high watermark until the job
commits: the driver then writes the new high watermarks to ``replication-offset-checkpoint``
in one atomic rename. So a reader that honours the high watermark (``readUpTo`` ``auto`` or
``highWatermark``) sees all of a job's records or none. Records a failed task attempt left past
the high watermark are discarded at commit (the job's own runs are moved down over them if they
lie in between — a copy on the driver, only after failures) or at abort, as a Kafka leader
drops an uncommitted tail. The first write into a log dir without the file creates it, with the
current log ends as high watermarks, so records already there stay visible. One write job per
log dir at a time: a concurrent job's uncommitted records count as another job's leftovers.
``config.<kafka topic key>`` options (``config.segment.bytes`` ...) configure new and existing
logs for the write; new topics get ``numPartitions`` partitions (default 1).

Errors are one line naming the option, path or file: :class:`seglog.errors.ConfigError` for an
option of the wrong form, :class:`FileNotFoundError` for a missing path,
:class:`seglog.errors.UnknownTopicOrPartitionError`, :class:`seglog.errors.OffsetOutOfRangeError`
(data loss), :class:`seglog.errors.CorruptRecordError` (a corrupt segment).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import difflib
import glob as _glob
import json
import logging
import math
import os
import re
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from seglog._native.segment import Segment, filename_prefix
from seglog.bindings.arrow import COLUMNS, KAFKA_COLUMNS, ArrowBatchBuilder, check_columns
from seglog.storage.checkpoints import (
    CorruptCheckpointError,
    OffsetCheckpointFile,
    atomic_write,
    ensure_meta_properties,
)
from seglog.errors import (
    ConfigError,
    CorruptRecordError,
    OffsetOutOfRangeError,
    SeglogError,
    UnknownTopicOrPartitionError,
)
from seglog.storage.log import Log, parse_partition_dir
from seglog.storage.logdir import LogDir, checkpoint_update_lock, shared_claim
from seglog.storage.records import batch_headers, decode_columns, decode_records, encode_batch
from seglog.storage.txnindex import TransactionIndex

try:  # PySpark >= 4.2: admission control for stream readers.
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - PySpark 4.0 / 4.1
    ReadAllAvailable = ReadLimit = ReadMaxRows = None  # type: ignore[assignment,misc]
    SupportsTriggerAvailableNow = None  # type: ignore[assignment,misc]

__all__ = [
    "HIGH_WATERMARK_FILE",
    "SeglogDataSource",
    "SeglogInputPartition",
    "SeglogReader",
    "SeglogStreamReader",
    "SeglogWriter",
    "register",
]

log = logging.getLogger("seglog.spark")

NAME = "seglog"
HIGH_WATERMARK_FILE = "replication-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"

_SEGMENT_LOG = re.compile(r"^(\d{20})\.log$")
_EARLIEST, _LATEST = -2, -1


def register(spark: Any, *, filter_pushdown: bool = True) -> None:
    """Register the ``seglog`` source with ``spark`` and (by default) turn on
    ``spark.sql.python.filterPushdown.enabled`` so pushed filters narrow the plan."""
    if filter_pushdown:
        spark.conf.set(PUSHDOWN_CONF, "true")
    try:
        spark.dataSource.register(SeglogDataSource)
    except Exception as exc:
        # PySpark 4.0 refuses to register a name it already found through pyspark_seglog.
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(exc):
            raise


# ---------------------------------------------------------------------------------------------
# Options
# ---------------------------------------------------------------------------------------------

_READ_OPTIONS = {
    "path", "paths", "topics", "subscribe", "subscribepattern", "assign", "startingoffsets",
    "endingoffsets", "startingtimestamp", "startingoffsetsbytimestamp",
    "startingoffsetsbytimestampstrategy", "endingtimestamp", "endingoffsetsbytimestamp",
    "minpartitions", "maxrecordsperpartition", "maxbytesperpartition", "isolation.level",
    "failondataloss", "includecontrol", "readupto", "includeheaders", "includeleaderepoch",
    "columns", "maxrowsperbatch", "maxrecordspertrigger", "maxoffsetspertrigger", "pushfilters",
}
_WRITE_OPTIONS = {"path", "paths", "topic", "numpartitions", "compression", "batchbytes"}
_CANONICAL = {name.lower(): name for name in (
    "startingOffsets", "endingOffsets", "startingTimestamp", "startingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy", "endingTimestamp", "endingOffsetsByTimestamp",
    "minPartitions", "maxRecordsPerPartition", "maxBytesPerPartition", "failOnDataLoss",
    "includeControl", "readUpTo", "includeHeaders", "includeLeaderEpoch", "maxRowsPerBatch",
    "maxRecordsPerTrigger", "maxOffsetsPerTrigger", "subscribePattern", "pushFilters",
    "numPartitions", "batchBytes")}


def _display(key: str) -> str:
    return _CANONICAL.get(key, key)


def _option_error(key: str, message: str) -> ConfigError:
    return ConfigError(f"seglog option {_display(key)}: {message}", key=_display(key))


def _lower(options: Mapping[str, Any]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _check_known(opts: Mapping[str, str], known: set[str], what: str) -> None:
    for key in opts:
        if key in known or key.startswith("kafka.") or (what == "write" and key.startswith("config.")):
            continue
        close = difflib.get_close_matches(key, sorted(known), n=1)
        hint = f"; did you mean {_display(close[0])}?" if close else ""
        raise ConfigError(f"seglog: unknown {what} option {key!r}{hint}", key=key,
                          suggestion=_display(close[0]) if close else None)


def _bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    v = raw.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise _option_error(key, f"expected true or false, got {raw!r}")


def _int(opts: Mapping[str, str], key: str, default: int | None, minimum: int) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return default
    try:
        v = int(raw.strip())
    except ValueError:
        raise _option_error(key, f"expected an integer, got {raw!r}") from None
    if v < minimum:
        raise _option_error(key, f"must be >= {minimum}, got {v}")
    return v


def _json(opts: Mapping[str, str], key: str) -> Any:
    raw = opts[key]
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise _option_error(key, f"not valid JSON ({exc.msg} at character {exc.pos}): {raw!r}") from None


def _partition_map(opts: Mapping[str, str], key: str) -> dict[tuple[str, int], int]:
    """``{"topic": {"0": 23}}`` → ``{("topic", 0): 23}`` with shape checks."""
    doc = _json(opts, key)
    if not isinstance(doc, dict):
        raise _option_error(key, 'expected a JSON object like {"topic": {"0": 23}}')
    out: dict[tuple[str, int], int] = {}
    for topic, parts in doc.items():
        if not isinstance(parts, dict):
            raise _option_error(key, f'topic {topic!r} must map to an object like {{"0": 23}}, '
                                     f"got {json.dumps(parts)}")
        for p, value in parts.items():
            try:
                pi = int(p)
            except (TypeError, ValueError):
                raise _option_error(key, f"partition {p!r} of topic {topic!r} is not an integer") from None
            if not isinstance(value, int) or isinstance(value, bool):
                raise _option_error(key, f"value for {topic}-{pi} must be an integer, got {json.dumps(value)}")
            out[(topic, pi)] = value
    return out


@dataclasses.dataclass(frozen=True, slots=True)
class Bound:
    """One end of the range to read: ``kind`` is earliest / latest / offsets / timestamp."""

    kind: str
    value: int | None = None                       # a timestamp (ms) for every partition
    per_partition: tuple[tuple[tuple[str, int], int], ...] = ()

    def lookup(self, tp: tuple[str, int]) -> int | None:
        for key, v in self.per_partition:
            if key == tp:
                return v
        return None


def _parse_bound(opts: Mapping[str, str], side: str, default: str, streaming: bool) -> Bound:
    ts_key, ts_json_key, off_key = f"{side}timestamp", f"{side}offsetsbytimestamp", f"{side}offsets"
    if streaming and side == "ending":
        for key in (ts_key, ts_json_key, off_key):
            if key in opts:
                raise _option_error(key, "is for batch queries only; a stream has no end")
    if ts_key in opts:
        ts = _int(opts, ts_key, None, 0)
        return Bound("timestamp", value=ts)
    if ts_json_key in opts:
        m = _partition_map(opts, ts_json_key)
        for tp, v in m.items():
            if v < 0:
                raise _option_error(ts_json_key, f"timestamp for {tp[0]}-{tp[1]} must be >= 0, got {v}")
        return Bound("timestamp", per_partition=tuple(sorted(m.items())))
    raw = opts.get(off_key, default).strip()
    if raw.lower() == "earliest":
        if side == "ending":
            raise _option_error(off_key, "'earliest' is not a valid end; use latest or JSON offsets")
        return Bound("earliest")
    if raw.lower() == "latest":
        if side == "starting" and not streaming:
            raise _option_error(off_key, "'latest' is not a valid start for a batch query: it "
                                         "would read nothing (Spark's Kafka source refuses it "
                                         "too); use earliest, JSON offsets or a timestamp")
        return Bound("latest")
    if not raw.startswith("{"):
        raise _option_error(off_key, f"expected earliest, latest or JSON like "
                                     f'{{"topic": {{"0": 23}}}}, got {raw!r}')
    m = _partition_map({off_key: raw}, off_key)
    for tp, v in m.items():
        if side == "starting" and not streaming and v == _LATEST:
            raise _option_error(off_key, f"offset -1 (latest) for {tp[0]}-{tp[1]} is not a valid "
                                         "start for a batch query: it would read nothing; use -2 "
                                         "(earliest) or an offset >= 0")
        if v < -2 or (side == "ending" and v == _EARLIEST):
            allowed = "-1 (latest) or an offset >= 0" if side == "ending" else \
                "-2 (earliest), -1 (latest) or an offset >= 0"
            raise _option_error(off_key, f"offset {v} for {tp[0]}-{tp[1]} is not valid: use {allowed}")
    return Bound("offsets", per_partition=tuple(sorted(m.items())))


@dataclasses.dataclass(frozen=True, slots=True)
class ReadOptions:
    """Parsed, validated read options (picklable, small: shipped with every task)."""

    paths: tuple[str, ...]
    topics: tuple[str, ...] | None
    pattern: str | None
    assign: tuple[tuple[str, int], ...] | None
    starting: Bound
    ending: Bound
    timestamp_strategy: str
    min_partitions: int | None
    max_records_per_partition: int | None
    max_bytes_per_partition: int
    read_committed: bool
    fail_on_data_loss: bool
    include_control: bool
    read_up_to: str
    columns: tuple[str, ...]
    max_rows_per_batch: int
    max_records_per_trigger: int | None
    push_filters: bool
    streaming: bool


def _paths(opts: Mapping[str, str]) -> tuple[str, ...]:
    if "paths" in opts:
        doc = _json(opts, "paths")
        if not isinstance(doc, list) or not all(isinstance(p, str) for p in doc):
            raise _option_error("paths", "expected a JSON list of paths")
        paths = list(doc)
    else:
        paths = []
    if "path" in opts:
        paths.insert(0, opts["path"])
    if not paths:
        raise ConfigError("seglog: no path given; use load('/path/to/log-dir') (a directory of "
                          "topic-N partition dirs, one partition dir, several, or a glob)", key="path")
    return tuple(paths)


def _columns(opts: Mapping[str, str]) -> tuple[str, ...]:
    headers = _bool(opts, "includeheaders", False)
    epoch = _bool(opts, "includeleaderepoch", False)
    if "columns" in opts:
        for key in ("includeheaders", "includeleaderepoch"):
            if key in opts:
                raise _option_error(key, "cannot be combined with columns; list the column in "
                                         "columns instead")
        cols = tuple(c.strip() for c in opts["columns"].split(",") if c.strip())
        if not cols:
            raise _option_error("columns", "lists no column")
        try:
            check_columns(cols)
        except ValueError as exc:
            raise _option_error("columns", str(exc)) from None
        return cols
    extra: tuple[str, ...] = (("headers",) if headers else ()) + (("leaderEpoch",) if epoch else ())
    return tuple(KAFKA_COLUMNS) + extra


def parse_read_options(options: Mapping[str, Any], *, streaming: bool = False,
                       columns: Sequence[str] | None = None) -> ReadOptions:
    """Validate the reader options (see the module docs); ``columns`` overrides the
    column options (from a schema given with ``.schema(...)``)."""
    opts = _lower(options)
    _check_known(opts, _READ_OPTIONS, "read")
    selectors = [k for k in ("topics", "subscribe", "subscribepattern", "assign") if k in opts]
    if len(selectors) > 1:
        raise ConfigError(f"seglog: give at most one of topics, subscribePattern and assign "
                          f"(got {', '.join(_display(k) for k in selectors)})", key=_display(selectors[1]))
    topics = pattern = assign = None
    if "topics" in opts or "subscribe" in opts:
        key = "topics" if "topics" in opts else "subscribe"
        topics = tuple(t.strip() for t in opts[key].split(",") if t.strip())
        if not topics:
            raise _option_error(key, "lists no topic")
    elif "subscribepattern" in opts:
        pattern = opts["subscribepattern"]
        try:
            re.compile(pattern)
        except re.error as exc:
            raise _option_error("subscribepattern", f"not a valid regular expression: {exc}") from None
    elif "assign" in opts:
        doc = _json(opts, "assign")
        if not isinstance(doc, dict) or not all(
                isinstance(v, list) and all(isinstance(p, int) and not isinstance(p, bool) for p in v)
                for v in doc.values()):
            raise _option_error("assign", 'expected JSON like {"topicA": [0, 1]}')
        assign = tuple(sorted((t, p) for t, ps in doc.items() for p in ps))
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise _option_error("startingoffsetsbytimestampstrategy", f"expected error or latest, got {strategy!r}")
    isolation = opts.get("isolation.level", "read_uncommitted").strip().lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise _option_error("isolation.level", f"expected read_uncommitted or read_committed, got {isolation!r}")
    up_to = opts.get("readupto", "auto").strip()
    norm = {"auto": "auto", "logend": "logEnd", "highwatermark": "highWatermark"}.get(
        up_to.lower().replace("_", ""))
    if norm is None:
        raise _option_error("readupto", f"expected auto, logEnd or highWatermark, got {up_to!r}")
    push = opts.get("pushfilters", "auto").strip().lower()
    if push not in ("auto", "false"):
        raise _option_error("pushfilters", f"expected auto or false, got {push!r}")
    trigger_key = "maxrecordspertrigger" if "maxrecordspertrigger" in opts else "maxoffsetspertrigger"
    return ReadOptions(
        paths=_paths(opts),
        topics=topics,
        pattern=pattern,
        assign=assign,
        starting=_parse_bound(opts, "starting", "latest" if streaming else "earliest", streaming),
        ending=_parse_bound(opts, "ending", "latest", streaming),
        timestamp_strategy=strategy,
        min_partitions=_int(opts, "minpartitions", None, 1),
        max_records_per_partition=_int(opts, "maxrecordsperpartition", None, 1),
        max_bytes_per_partition=_int(opts, "maxbytesperpartition", 128 << 20, 1) or 1,
        read_committed=isolation == "read_committed",
        fail_on_data_loss=_bool(opts, "failondataloss", True),
        include_control=_bool(opts, "includecontrol", False),
        read_up_to=norm,
        columns=tuple(columns) if columns is not None else _columns(opts),
        # 100k rather than 10k rows: measured ~9 % less CPU a full-row read (Spark's Python
        # worker and the JVM pay per batch); the 64 MiB chunk cap bounds a batch's memory.
        max_rows_per_batch=_int(opts, "maxrowsperbatch", 100_000, 1) or 1,
        max_records_per_trigger=_int(opts, trigger_key, None, 1),
        push_filters=push == "auto",
        streaming=streaming,
    )


# ---------------------------------------------------------------------------------------------
# Spark schema
# ---------------------------------------------------------------------------------------------

def _spark_type(name: str) -> DataType:
    if name in ("key", "value"):
        return BinaryType()
    if name == "topic":
        return StringType()
    if name in ("partition", "timestampType", "leaderEpoch"):
        return IntegerType()
    if name == "offset":
        return LongType()
    if name == "timestamp":
        return TimestampType()
    if name == "headers":
        return ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
    raise ValueError(name)


def spark_schema(columns: Sequence[str]) -> StructType:
    """The Spark schema of ``columns`` (all nullable, as Spark's Kafka source declares them)."""
    return StructType([StructField(c, _spark_type(c), True) for c in columns])


def _columns_of(schema: StructType) -> tuple[str, ...]:
    cols = []
    for f in schema.fields:
        if f.name not in COLUMNS:
            raise ConfigError(f"seglog: the schema names column {f.name!r}; the source can produce "
                              f"{', '.join(COLUMNS)}", key="schema")
        want = _spark_type(f.name)
        got = f.dataType
        if isinstance(want, ArrayType) and isinstance(got, ArrayType):
            same = [(x.name, type(x.dataType)) for x in got.elementType.fields] == \
                [("key", StringType), ("value", BinaryType)] if isinstance(got.elementType, StructType) else False
        else:
            same = type(got) is type(want)
        if not same:
            raise ConfigError(f"seglog: column {f.name!r} must be {want.simpleString()}, the schema "
                              f"says {got.simpleString()}", key="schema")
        cols.append(f.name)
    check_columns(cols)
    return tuple(cols)


# ---------------------------------------------------------------------------------------------
# Finding partitions (driver)
# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, slots=True)
class PartitionDir:
    topic: str
    partition: int
    dir: str
    log_dir: str
    named: bool = False    # the path given was this partition dir itself (or a glob matching it)


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
        if _glob.has_magic(p):
            hits = sorted(_glob.glob(p))
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
            raise FileNotFoundError(f"seglog: path {p!r} is not a directory (expected a log dir of "
                                    "topic-N partition dirs, or one partition dir)")
        parsed = parse_partition_dir(os.path.basename(p))
        named = parsed is not None and not _has_partition_children(p)
        if named:
            candidates = [(parsed, p)]
        else:
            # A log dir: its partitions as its owner finds them (read-only: nothing locked or
            # written), hidden directories left out.
            candidates = [(tp, d) for tp, d in LogDir.open(p, read_only=True).partition_dirs().items()
                          if not os.path.basename(d).startswith(".")]
        for (topic, part), d in candidates:
            prev = found.get((topic, part))
            if prev is not None and prev.dir != d:
                raise ConfigError(f"seglog: partition {topic}-{part} is in two places: {prev.dir} and "
                                  f"{d}; give the paths of one replica only", key="path")
            found[(topic, part)] = PartitionDir(topic, part, d, os.path.dirname(d),
                                                named or (prev is not None and prev.named))
    return [found[k] for k in sorted(found)]


#: Topics a Kafka consumer leaves out unless it names them (``exclude.internal.topics``), and
#: KRaft's metadata log, which is no topic at all.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__cluster_metadata"})


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
                    f"{', '.join(topics) or 'none'})")
        return [d for d in dirs if d.topic in ro.topics]
    if ro.pattern is not None:
        rx = re.compile(ro.pattern)
        return [d for d in dirs if rx.fullmatch(d.topic) and (d.named or d.topic not in INTERNAL_TOPICS)]
    if ro.assign is not None:
        have = {(d.topic, d.partition): d for d in dirs}
        for tp in ro.assign:
            if tp not in have:
                raise UnknownTopicOrPartitionError(
                    f"seglog: option assign names {tp[0]}-{tp[1]}, which is not under {where}")
        return [have[tp] for tp in ro.assign]
    return [d for d in dirs if d.named or d.topic not in INTERNAL_TOPICS]


def _segment_files(d: str) -> tuple[list[int], list[int]]:
    bases, sizes = [], []
    with os.scandir(d) as it:
        for e in it:
            m = _SEGMENT_LOG.match(e.name)
            if m:
                bases.append(int(m.group(1)))
                sizes.append(e.stat().st_size)
    order = sorted(range(len(bases)), key=bases.__getitem__)
    return [bases[i] for i in order], [sizes[i] for i in order]


class _Checkpoints:
    """Per-log-dir checkpoint files, read once per planning."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], dict[tuple[str, int], int] | None] = {}

    def get(self, log_dir: str, name: str) -> dict[tuple[str, int], int] | None:
        key = (log_dir, name)
        if key not in self._cache:
            path = os.path.join(log_dir, name)
            if not os.path.exists(path):
                self._cache[key] = None
            else:
                try:
                    self._cache[key] = OffsetCheckpointFile(path).read()
                except CorruptCheckpointError as exc:
                    raise SeglogError(f"seglog: {exc}", path=path) from None
        return self._cache[key]


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionInfo:
    """What planning knows of one partition: its segments and readable offset range."""

    topic: str
    partition: int
    dir: str
    segments: tuple[int, ...]
    sizes: tuple[int, ...]
    log_start: int
    log_end: int
    bound: int            # exclusive end of what may be read (log end or high watermark)

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    def segment_end(self, i: int) -> int:
        return self.segments[i + 1] if i + 1 < len(self.segments) else self.log_end


def _open_segment(d: str, base: int) -> Segment:
    return Segment(d, base, read_only=True)


def _walk_problem(seg: Segment, start: int) -> tuple[str, int] | None:
    """(message, byte) when the batch headers from position ``start`` of ``seg`` stop at a
    malformed header before the end of the file. None when they reach the end, or when what
    remains is a torn last batch: a broker may be writing it (Kafka's own file reader ends
    there too)."""
    end = seg.batch_end(start, 1 << 62, -1, True)
    if end >= seg.size:
        return None
    with seg.view(end, seg.size - end) as rest:
        try:
            batch_headers(rest, allow_truncated=True)
        except CorruptRecordError as exc:
            return re.sub(r" \(at byte \d+\)$", "", exc.message), end
    return None


def _corrupt(fail_on_data_loss: bool, seg: Segment, problem: tuple[str, int], what: str) -> None:
    """A malformed segment: fail the read (``failOnDataLoss=true``) naming the file and byte,
    or warn that ``what`` is skipped."""
    msg, pos = problem
    if fail_on_data_loss:
        raise CorruptRecordError(f"seglog: {msg}; set failOnDataLoss=false to skip {what}",
                                 path=seg.log_path, position=pos)
    log.warning("seglog: %s: %s at byte %d; skipping %s (failOnDataLoss=false)", seg.log_path, msg,
                pos, what)


def describe_partition(pd: PartitionDir, read_up_to: str, ckpts: _Checkpoints, *,
                       fail_on_data_loss: bool = True) -> PartitionInfo:
    bases, sizes = _segment_files(pd.dir)
    starts = ckpts.get(pd.log_dir, LOG_START_FILE) or {}
    tp = (pd.topic, pd.partition)
    if bases:
        seg = _open_segment(pd.dir, bases[-1])
        try:
            log_end = seg.next_offset
            # The log end comes from a header walk of the last segment's tail: a malformed
            # header there would hide every record after it.
            problem = _walk_problem(seg, seg.offset_index.lookup(log_end)[1])
            if problem is not None:
                _corrupt(fail_on_data_loss, seg, problem, "the rest of the segment")
        finally:
            seg.close()
        log_start = max(bases[0], min(starts.get(tp, 0), log_end))
    else:
        log_start = log_end = starts.get(tp, 0)
    hws = ckpts.get(pd.log_dir, HIGH_WATERMARK_FILE)
    if read_up_to == "highWatermark" and hws is None:
        raise FileNotFoundError(
            f"seglog: readUpTo=highWatermark, but {os.path.join(pd.log_dir, HIGH_WATERMARK_FILE)} "
            "does not exist; use readUpTo=logEnd to read everything on disk")
    if read_up_to == "logEnd" or hws is None:
        bound = log_end
    else:
        bound = min(log_end, max(hws.get(tp, log_start), log_start))
    return PartitionInfo(pd.topic, pd.partition, pd.dir, tuple(bases), tuple(sizes), log_start,
                         log_end, bound)


def _last_time_index_timestamp(path: str) -> int | None:
    """The last entry's timestamp of a trimmed ``.timeindex`` (a closed segment's largest
    timestamp); None when the file is missing, empty or untrimmed (a zero tail)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            if size < 12 or size % 12:
                return None
            f.seek(size - 12)
            raw = f.read(12)
    except OSError:
        return None
    if raw == b"\0" * 12:
        return None
    return int.from_bytes(raw[:8], "big", signed=True)


@dataclasses.dataclass(frozen=True, slots=True)
class TsBatch:
    """The batch that holds the first record with timestamp >= ``timestamp`` (found by the
    time index and batch headers): the exact record is looked up inside it on the executor."""

    timestamp: int
    segment: int
    base_offset: int
    last_offset: int


def find_timestamp_batch(info: PartitionInfo, timestamp: int, start: int) -> TsBatch | None:
    """First batch at or after ``start`` (below the bound) whose max timestamp is >= ``timestamp``.

    Closed segments whose time index says their largest timestamp is older are skipped without
    opening them (Kafka's ``fetchOffsetByTimestamp``)."""
    last = len(info.segments) - 1
    for i, base in enumerate(info.segments):
        if info.segment_end(i) <= start:
            continue
        if base >= info.bound:
            break
        if i < last:
            largest = _last_time_index_timestamp(os.path.join(info.dir, filename_prefix(base) + ".timeindex"))
            if largest is not None and largest < timestamp:
                continue
        seg = _open_segment(info.dir, base)
        try:
            b = seg.find_offset_by_timestamp(timestamp, start)
        finally:
            seg.close()
        if b is not None and b.base_offset < info.bound:
            return TsBatch(timestamp, base, b.base_offset, b.last_offset)
        if b is not None:
            break
    return None


def exact_timestamp_offset(d: str, ref: TsBatch) -> int:
    """The offset of the first record of ``ref``'s batch whose timestamp is >= its timestamp
    (decodes that one batch); the batch's end when none is."""
    seg = _open_segment(d, ref.segment)
    try:
        found = seg.translate_offset(ref.base_offset)
        if found is None:
            return ref.last_offset + 1
        with seg.view(found.position, found.size) as view:
            cols = decode_columns(view, keys=False, values=False, headers=False)
    finally:
        seg.close()
    n = len(cols)
    if n == 0:
        return ref.last_offset + 1
    ts = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(cols.timestamps)])
    idx = pc.index(pc.greater_equal(ts, ref.timestamp), True).as_py()
    if idx < 0:
        return int(max(ref.last_offset, found.last_offset)) + 1
    offs = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(cols.offsets)])
    return int(offs[idx].as_py())


# ---------------------------------------------------------------------------------------------
# Transactions (read_committed, driver)
# ---------------------------------------------------------------------------------------------

def _read_txn_index(path: str, base: int) -> list[tuple[int, int, int]] | None:
    """(producer id, first offset, marker offset) of each entry of a ``.txnindex``; None when the
    segment has none."""
    index = TransactionIndex(path, base)
    if not index.exists:
        return None
    return [(t.producer_id, t.first_offset, t.last_offset) for t in index.all_entries()]


def transaction_state(info: PartitionInfo, start: int) -> tuple[list[tuple[int, int, int]], int]:
    """(aborted transactions overlapping [start, bound), last stable offset) of a partition.

    Walks the batch headers from ``start`` to the bound, tracking each producer's open
    transaction; a marker closes it. Whether a marker aborted is read from the segment's
    ``.txnindex`` when it has one, else from the marker's control record key."""
    aborted: list[tuple[int, int, int]] = []
    open_first: dict[int, int] = {}
    for i, base in enumerate(info.segments):
        if info.segment_end(i) <= start:
            continue
        if base >= info.bound:
            break
        index = _read_txn_index(os.path.join(info.dir, filename_prefix(base) + ".txnindex"), base)
        if index is not None:
            aborted.extend(e for e in index if e[2] >= start and e[1] < info.bound)
        seg = _open_segment(info.dir, base)
        try:
            pos = 0
            if start > base:
                found = seg.translate_offset(start)
                pos = found.position if found is not None else seg.size
            for b in seg.batches(pos):
                if b.base_offset >= info.bound:
                    break
                if b.is_control:
                    first = open_first.pop(b.producer_id, None)
                    if index is None and first is not None:
                        with seg.view(b.position, b.size) as view:
                            recs = decode_records(view, include_control=True)
                        if recs and recs[0].control_type == 0:
                            aborted.append((b.producer_id, first, b.last_offset))
                elif b.is_transactional:
                    open_first.setdefault(b.producer_id, b.base_offset)
        finally:
            seg.close()
    lso = min(open_first.values(), default=info.bound)
    return aborted, min(lso, info.bound)


# ---------------------------------------------------------------------------------------------
# Planning (driver)
# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, slots=True)
class Constraints:
    """What pushed filters allow (None: no limit)."""

    topic_preds: tuple[tuple[str, Any], ...] = ()
    partition_preds: tuple[tuple[str, Any], ...] = ()
    offset_lo: int | None = None         # inclusive
    offset_hi: int | None = None         # exclusive
    timestamp_lo: int | None = None      # ms; records older may exist later, Spark re-checks
    nothing: bool = False

    def topic_ok(self, topic: str) -> bool:
        return all(_test(op, topic, v) for op, v in self.topic_preds)

    def partition_ok(self, partition: int) -> bool:
        return all(_test(op, partition, v) for op, v in self.partition_preds)


def _test(op: str, x: Any, v: Any) -> bool:
    if op == "eq":
        return bool(x == v)
    if op == "in":
        return x in v
    if op == "gt":
        return bool(x > v)
    if op == "ge":
        return bool(x >= v)
    if op == "lt":
        return bool(x < v)
    if op == "le":
        return bool(x <= v)
    if op == "prefix":
        return str(x).startswith(v)
    if op == "suffix":
        return str(x).endswith(v)
    if op == "contains":
        return v in str(x)
    raise ValueError(op)


@dataclasses.dataclass(frozen=True, slots=True)
class SeglogInputPartition(InputPartition):
    """One Spark task: offsets [start, end) of one topic-partition, in the listed segments.

    ``start_at``/``end_at`` are timestamp bounds resolved to a batch on the driver; the task
    finds the exact record in that batch. ``aborted`` lists the aborted transactions
    (read_committed). Nothing here is record data."""

    index: int
    topic: str
    partition: int
    dir: str
    start: int
    end: int
    segments: tuple[int, ...]
    start_at: TsBatch | None = None
    end_at: TsBatch | None = None
    aborted: tuple[tuple[int, int, int], ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class _Range:
    topic: str
    partition: int
    start: int
    end: int
    info: PartitionInfo


def _data_loss(ro: ReadOptions, message: str, offset: int | None = None) -> None:
    if ro.fail_on_data_loss:
        raise OffsetOutOfRangeError(f"seglog: {message}; set failOnDataLoss=false to skip",
                                    offset=offset)
    log.warning("seglog: %s; skipping (failOnDataLoss=false)", message)


def _resolve_start(info: PartitionInfo, ro: ReadOptions, bound: Bound) -> tuple[int, TsBatch | None]:
    tp = info.tp
    name = f"{tp[0]}-{tp[1]}"
    if bound.kind == "timestamp":
        ts = bound.value if bound.value is not None else bound.lookup(tp)
        if ts is None:
            return info.log_start, None
        b = find_timestamp_batch(info, ts, info.log_start)
        if b is None:
            if ro.timestamp_strategy == "latest":
                return info.bound, None
            raise OffsetOutOfRangeError(
                f"seglog: no record of {name} has a timestamp >= {ts} (the starting timestamp); "
                "use startingOffsetsByTimestampStrategy=latest to start at the end instead")
        return b.base_offset, b
    if bound.kind == "earliest":
        return info.log_start, None
    if bound.kind == "latest":
        return info.bound, None
    v = bound.lookup(tp)
    if v is None or v == _EARLIEST:
        return info.log_start, None
    if v == _LATEST:
        return info.bound, None
    if v < info.log_start:
        _data_loss(ro, f"startingOffsets asks for offset {v} of {name}, but its log starts at "
                       f"{info.log_start} (older records were deleted)", v)
        return info.log_start, None
    if v > info.bound:
        _data_loss(ro, f"startingOffsets asks for offset {v} of {name}, beyond its readable end "
                       f"{info.bound}", v)
        return info.bound, None
    return v, None


def _resolve_end(info: PartitionInfo, ro: ReadOptions, bound: Bound, start: int) -> tuple[int, TsBatch | None]:
    tp = info.tp
    if bound.kind == "timestamp":
        ts = bound.value if bound.value is not None else bound.lookup(tp)
        if ts is None:
            return info.bound, None
        b = find_timestamp_batch(info, ts, info.log_start)
        if b is None:
            return info.bound, None
        return min(b.last_offset + 1, info.bound), b
    v = bound.lookup(tp) if bound.kind == "offsets" else _LATEST
    if v is None or v == _LATEST:
        return info.bound, None
    if v > info.bound:
        _data_loss(ro, f"endingOffsets asks for offset {v} of {tp[0]}-{tp[1]}, beyond its "
                       f"readable end {info.bound}", v)
        return info.bound, None
    return v, None


_Run = tuple[int, int, tuple[tuple[int, int], ...]]   # start, end, (segment base, segment end)*


def _split_by_segments(r: _Range, max_bytes: int) -> list[_Run]:
    """[start, end) cut at segment boundaries into runs of at most ``max_bytes`` of log
    (a single larger segment is one run)."""
    info = r.info
    runs: list[_Run] = []
    cur: list[tuple[int, int]] = []
    cur_start = r.start
    cur_bytes = 0
    for i, base in enumerate(info.segments):
        seg_end = info.segment_end(i)
        if seg_end <= r.start or seg_end <= base:
            continue  # before the range, or empty
        if base >= r.end:
            break
        size = info.sizes[i]
        if cur and cur_bytes + size > max_bytes:
            runs.append((cur_start, base, tuple(cur)))
            cur, cur_bytes, cur_start = [], 0, base
        cur.append((base, seg_end))
        cur_bytes += size
    if cur:
        runs.append((cur_start, r.end, tuple(cur)))
    return [run for run in runs if run[1] > run[0]]


def _divide(start: int, end: int, parts: int) -> list[tuple[int, int]]:
    """Kafka's ``getDividedPartition``: ``parts`` contiguous pieces, the last takes the rest."""
    out = []
    remaining = end - start
    s = start
    for i in range(parts):
        this = remaining // (parts - i)
        remaining -= this
        e = min(s + this, end)
        out.append((s, e))
        s = e
    return [(a, b) for a, b in out if b > a]


def _round_half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


def split_ranges(ranges: list[tuple[int, int]], min_partitions: int | None,
                 max_records: int | None) -> list[list[tuple[int, int]]]:
    """Kafka's ``KafkaOffsetRangeCalculator.getRanges`` over ``ranges`` (start, end): for each
    input range, the pieces it is cut into."""
    sizes = [e - s for s, e in ranges]
    out: list[list[tuple[int, int]]] = [[(s, e)] if e > s else [] for s, e in ranges]
    live = [i for i, n in enumerate(sizes) if n > 0]
    if min_partitions is not None and len(live) < min_partitions:
        total = sum(sizes[i] for i in live)

        def part_count(size: int, tot: int, parts: int) -> int:
            return max(_round_half_up(size / tot * parts), 1) if tot else 1

        unsplit = {i for i in live if part_count(sizes[i], total, min_partitions) == 1}
        split_total = total - sum(sizes[i] for i in unsplit)
        budget = max(min_partitions - len(unsplit), 1)
        for i in live:
            parts = 1 if i in unsplit else part_count(sizes[i], split_total, budget)
            out[i] = _divide(ranges[i][0], ranges[i][1], parts)
    if max_records is not None:
        for i in live:
            out[i] = [p for s, e in out[i] for p in _divide(s, e, math.ceil((e - s) / max_records))]
    return out


def plan(ro: ReadOptions, infos: list[PartitionInfo], ranges: dict[tuple[str, int], tuple[int, int]],
         start_at: Mapping[tuple[str, int], TsBatch | None] | None = None,
         end_at: Mapping[tuple[str, int], TsBatch | None] | None = None) -> list[SeglogInputPartition]:
    """Cut the per-partition offset ranges into input partitions (see the module docs)."""
    by_tp = {i.tp: i for i in infos}
    runs: list[tuple[PartitionInfo, int, int, tuple[tuple[int, int], ...]]] = []
    txn: dict[tuple[str, int], tuple[list[tuple[int, int, int]], int]] = {}
    for tp in sorted(ranges):
        info = by_tp[tp]
        start, end = ranges[tp]
        if ro.read_committed and end > start:
            aborted, lso = transaction_state(info, start)
            txn[tp] = (aborted, lso)
            end = min(end, lso)
        if end <= start:
            continue
        for s, e, segs in _split_by_segments(_Range(tp[0], tp[1], start, end, info),
                                             ro.max_bytes_per_partition):
            runs.append((info, s, e, segs))
    pieces = split_ranges([(s, e) for _, s, e, _ in runs], ro.min_partitions, ro.max_records_per_partition)
    out: list[SeglogInputPartition] = []
    for (info, _, _, segs), cut in zip(runs, pieces):
        sa = (start_at or {}).get(info.tp)
        ea = (end_at or {}).get(info.tp)
        aborted = txn.get(info.tp, ([], 0))[0]
        for s, e in cut:
            out.append(SeglogInputPartition(
                index=len(out), topic=info.topic, partition=info.partition, dir=info.dir,
                start=s, end=e, segments=tuple(b for b, be in segs if b < e and be > s),
                start_at=sa if sa is not None and s <= sa.last_offset and e > sa.base_offset else None,
                end_at=ea if ea is not None and s <= ea.last_offset and e > ea.base_offset else None,
                aborted=tuple(a for a in aborted if a[1] < e and a[2] >= s)))
    return out


def load_partitions(ro: ReadOptions, constraints: Constraints | None = None) -> list[PartitionInfo]:
    """Find, select and describe the partitions to read (driver; no record data)."""
    dirs = select_partitions(find_partition_dirs(ro.paths), ro)
    if constraints is not None:
        dirs = [d for d in dirs if constraints.topic_ok(d.topic) and constraints.partition_ok(d.partition)]
    ckpts = _Checkpoints()
    return [describe_partition(d, ro.read_up_to, ckpts, fail_on_data_loss=ro.fail_on_data_loss)
            for d in dirs]


def plan_batch(ro: ReadOptions, constraints: Constraints) -> list[SeglogInputPartition]:
    if constraints.nothing:
        return []
    infos = load_partitions(ro, constraints)
    ranges: dict[tuple[str, int], tuple[int, int]] = {}
    start_at: dict[tuple[str, int], TsBatch | None] = {}
    end_at: dict[tuple[str, int], TsBatch | None] = {}
    for info in infos:
        start, sa = _resolve_start(info, ro, ro.starting)
        end, ea = _resolve_end(info, ro, ro.ending, start)
        if constraints.offset_lo is not None:
            start = max(start, constraints.offset_lo)
        if constraints.offset_hi is not None:
            end = min(end, constraints.offset_hi)
        if constraints.timestamp_lo is not None and end > start:
            b = find_timestamp_batch(info, constraints.timestamp_lo, start)
            start = end if b is None else max(start, b.base_offset)
        ranges[info.tp] = (start, end)
        start_at[info.tp] = sa
        end_at[info.tp] = ea
    return plan(ro, infos, ranges, start_at, end_at)


# ---------------------------------------------------------------------------------------------
# Reading (executor)
# ---------------------------------------------------------------------------------------------

_MIN_CHUNK = 64 << 10
_MAX_CHUNK = 64 << 20


def _segment_range(seg: Segment, lo: int, hi: int) -> tuple[int, int] | None:
    """Byte range of the whole batches holding offsets [lo, hi) in ``seg``."""
    found = seg.translate_offset(lo)
    if found is None:
        return None
    pos = found.position
    if hi < seg.next_offset:
        e = seg.translate_offset(hi)
        if e is None:
            return None
        end = e.position if (e.magic == 2 and e.base_offset >= hi) else e.position + e.size
    else:
        # Up to the last whole batch: a broker may be writing (or have torn) the tail.
        last = seg.translate_offset(seg.next_offset - 1)
        end = pos if last is None else last.position + last.size
    return (pos, end) if end > pos else None


def _walk_error(seg: Segment, pos: int) -> str:
    try:
        seg.batches(pos)
    except SeglogError as exc:
        return str(exc.message)
    return f"{seg.log_path}: invalid batch at byte {pos}"


def read_partition(part: SeglogInputPartition, ro: ReadOptions) -> Iterator[pa.RecordBatch]:
    """Record batches (Spark's schema, at most ``maxRowsPerBatch`` rows) of one input partition."""
    builder = ArrowBatchBuilder(ro.columns, topic=part.topic, partition=part.partition)
    start, end = part.start, part.end
    if part.start_at is not None:
        start = max(start, exact_timestamp_offset(part.dir, part.start_at))
    if part.end_at is not None:
        end = min(end, exact_timestamp_offset(part.dir, part.end_at))
    if start >= end:
        return
    flags = dict(builder.decode_flags, include_control=ro.include_control,
                 aborted=part.aborted or None)
    rows = ro.max_rows_per_batch
    chunk = 1 << 20
    for i, base in enumerate(part.segments):
        nxt = part.segments[i + 1] if i + 1 < len(part.segments) else end
        lo, hi = max(start, base), min(end, nxt)
        if lo >= hi:
            continue
        try:
            seg = _open_segment(part.dir, base)
        except FileNotFoundError:
            _data_loss(ro, f"segment {os.path.join(part.dir, filename_prefix(base))}.log of "
                           f"{part.topic}-{part.partition} is gone (deleted by retention?)", base)
            continue
        try:
            span = _segment_range(seg, lo, hi)
            if span is None or hi > seg.next_offset:
                # Offsets asked for that the header walk does not reach: compaction may have
                # removed them, or a malformed header hides them.
                problem = _walk_problem(seg, seg.offset_index.lookup(lo)[1])
                if problem is not None:
                    _corrupt(ro.fail_on_data_loss, seg, problem, "the rest of the segment")
            if span is None:
                continue
            pos, stop = span
            while pos < stop:
                nxt_pos = seg.batch_end(pos, chunk, stop, True)
                if nxt_pos <= pos:
                    msg = _walk_error(seg, pos)
                    if ro.fail_on_data_loss:
                        raise CorruptRecordError(f"seglog: {msg}; set failOnDataLoss=false to skip it",
                                                 path=seg.log_path, position=pos)
                    log.warning("seglog: %s; skipping the rest of the segment (failOnDataLoss=false)", msg)
                    break
                for cols in _decode(seg, pos, nxt_pos, lo, hi, flags, ro):
                    n = len(cols)
                    if n == 0:
                        continue
                    rb = builder.build(cols)
                    if n <= rows:
                        yield rb
                    else:
                        for k in range(0, n, rows):
                            yield rb.slice(k, rows)
                    # Aim the next chunk at ``rows`` records.
                    chunk = min(max(int((nxt_pos - pos) * rows / n), _MIN_CHUNK), _MAX_CHUNK)
                pos = nxt_pos
        finally:
            seg.close()


def _decode(seg: Segment, pos: int, end: int, lo: int, hi: int, flags: dict[str, Any],
            ro: ReadOptions) -> Iterator[Any]:
    try:
        with seg.view(pos, end - pos) as view:
            cols = decode_columns(view, min_offset=lo, max_offset=hi, **flags)
        yield cols
        return
    except CorruptRecordError as exc:
        if ro.fail_on_data_loss:
            rel = exc.position
            msg = exc.message
            if rel is not None and msg.endswith(f" (at byte {rel})"):
                msg = msg[: -len(f" (at byte {rel})")]
            raise CorruptRecordError(f"seglog: {msg}; set failOnDataLoss=false to skip corrupt batches",
                                     path=seg.log_path,
                                     position=None if rel is None else pos + rel) from None
    # failOnDataLoss=false: batch by batch, skipping the ones that do not decode.
    with seg.view(pos, end - pos) as view:
        heads = [(h.position, h.size) for h in batch_headers(view)]
    for p, size in heads:
        try:
            with seg.view(pos + p, size) as view:
                cols = decode_columns(view, min_offset=lo, max_offset=hi, **flags)
        except CorruptRecordError as exc:
            log.warning("seglog: %s: skipping the corrupt batch at byte %d: %s", seg.log_path, pos + p, exc)
            continue
        yield cols


# ---------------------------------------------------------------------------------------------
# Readers
# ---------------------------------------------------------------------------------------------

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _filter_ms(value: Any) -> int | None:
    """A pushed timestamp as epoch milliseconds, rounded down (a safe lower bound)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return int((value - _EPOCH) // timedelta(milliseconds=1))
    return None


def push_filters(filters: Iterable[Any]) -> tuple[Constraints, list[Any]]:
    """Turn Spark's pushed filters into :class:`Constraints`; returns the filters Spark must
    still evaluate (the very objects it gave)."""
    topic: list[tuple[str, Any]] = []
    part: list[tuple[str, Any]] = []
    lo: int | None = None
    hi: int | None = None
    ts_lo: int | None = None
    nothing = False
    rest: list[Any] = []
    never_null = {"topic", "partition", "offset", "timestamp", "timestampType"}
    ops = {"EqualTo": "eq", "GreaterThan": "gt", "GreaterThanOrEqual": "ge", "LessThan": "lt",
           "LessThanOrEqual": "le", "In": "in", "StringStartsWith": "prefix",
           "StringEndsWith": "suffix", "StringContains": "contains"}
    for f in filters:
        kind = type(f).__name__
        attr = getattr(f, "attribute", None)
        col = attr[0] if isinstance(attr, tuple) and len(attr) == 1 else None
        value: Any = getattr(f, "value", None)
        op = ops.get(kind)
        if col in never_null and kind == "IsNotNull":
            continue
        if col in never_null and kind == "IsNull":
            nothing = True
            continue
        if col == "topic" and op is not None and (isinstance(value, str) or op == "in"):
            topic.append((op, tuple(value) if op == "in" else value))
            continue
        if col == "partition" and op in ("eq", "in", "gt", "ge", "lt", "le"):
            part.append((op, tuple(value) if op == "in" else value))
            continue
        if col == "offset" and op in ("eq", "gt", "ge", "lt", "le") and isinstance(value, int):
            if op in ("eq", "ge", "gt"):
                v = value if op != "gt" else value + 1
                lo = v if lo is None else max(lo, v)
            if op in ("eq", "le", "lt"):
                v = value + 1 if op != "lt" else value
                hi = v if hi is None else min(hi, v)
            continue
        if col == "offset" and op == "in":
            vals = [v for v in value if isinstance(v, int)]
            if vals:
                lo = min(vals) if lo is None else max(lo, min(vals))
                hi = max(vals) + 1 if hi is None else min(hi, max(vals) + 1)
            rest.append(f)
            continue
        if col == "timestamp" and op in ("eq", "ge", "gt"):
            ms = _filter_ms(value)
            if ms is not None:
                ts_lo = ms if ts_lo is None else max(ts_lo, ms)
        rest.append(f)
    return Constraints(tuple(topic), tuple(part), lo, hi, ts_lo, nothing), rest


class SeglogReader(DataSourceReader):
    """Batch reader (no filter pushdown: used when the session has it off)."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.constraints = Constraints()

    def partitions(self) -> Sequence[InputPartition]:
        return list(plan_batch(self.options, self.constraints))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SeglogInputPartition):
            return iter(())  # Spark's stand-in when the plan is empty
        return read_partition(partition, self.options)


class SeglogPushdownReader(SeglogReader):
    """Batch reader that narrows its plan by the filters Spark pushes (PySpark >= 4.1)."""

    def pushFilters(self, filters: list[Any]) -> Iterable[Any]:
        self.constraints, rest = push_filters(filters)
        return rest


def _called_for_filter_pushdown() -> bool:
    """True when PySpark's filter-pushdown planner (``data_source_pushdown_filters``) asks for
    the reader. PySpark refuses a reader that defines ``pushFilters`` when the session has
    pushdown off, and ``reader()`` is not told which planner calls it."""
    frame = sys._getframe(1)
    while frame is not None:
        if os.path.basename(frame.f_code.co_filename) == "data_source_pushdown_filters.py":
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _to_json_offsets(m: Mapping[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (t, p) in sorted(m):
        out.setdefault(t, {})[str(p)] = int(m[(t, p)])
    return out


def _from_json_offsets(doc: Mapping[str, Any]) -> dict[tuple[str, int], int]:
    return {(t, int(p)): int(o) for t, parts in doc.items() for p, o in parts.items()}


_StreamBase: tuple[type, ...] = (DataSourceStreamReader,) if SupportsTriggerAvailableNow is None else \
    (DataSourceStreamReader, SupportsTriggerAvailableNow)


class SeglogStreamReader(*_StreamBase):  # type: ignore[misc]
    """Micro-batch reader; offsets are ``{"topic": {"partition": next offset}}`` as in Spark's
    Kafka source. New partitions start at their log start. With PySpark >= 4.2,
    ``maxRecordsPerTrigger`` caps each micro-batch and ``trigger(availableNow=True)`` stops at
    the log ends seen when the query starts."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._target: dict[tuple[str, int], int] | None = None

    def _infos(self) -> list[PartitionInfo]:
        return load_partitions(self.options)

    def initialOffset(self) -> dict[str, Any]:
        ro = self.options
        out: dict[tuple[str, int], int] = {}
        for info in self._infos():
            start, ts_batch = _resolve_start(info, ro, ro.starting)
            if ts_batch is not None:
                # A stream's offsets are exact: look the record up now (one batch decoded).
                start = min(exact_timestamp_offset(info.dir, ts_batch), info.bound)
            out[info.tp] = start
        return _to_json_offsets(out)

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:
        # PySpark >= 4.2 sees the two parameters and passes the start and a read limit; 4.0 and
        # 4.1 call it without arguments (no admission control).
        infos = self._infos()
        ends = {i.tp: i.bound for i in infos}
        if self._target is not None:  # trigger(availableNow=True): never past the target
            ends = {tp: min(v, self._target[tp]) for tp, v in ends.items() if tp in self._target}
        if start is None:
            return _to_json_offsets(ends)
        begin = _from_json_offsets(start)
        for tp, b in begin.items():
            ends[tp] = max(ends.get(tp, b), b)
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            ends = _rate_limit(begin, ends, limit.max_rows, {i.tp: i.log_start for i in infos})
        return _to_json_offsets(ends)

    def getDefaultReadLimit(self) -> Any:
        n = self.options.max_records_per_trigger
        if n is None:
            return ReadAllAvailable()
        return ReadMaxRows(n)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return _to_json_offsets({i.tp: i.bound for i in self._infos()})

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {i.tp: i.bound for i in self._infos()}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        ro = self.options
        begin = _from_json_offsets(start) if start else {}
        stop = _from_json_offsets(end)
        infos = {i.tp: i for i in self._infos()}
        ranges: dict[tuple[str, int], tuple[int, int]] = {}
        for tp, e in stop.items():
            info = infos.get(tp)
            if info is None:
                _data_loss(ro, f"partition {tp[0]}-{tp[1]} disappeared")
                continue
            b = begin.get(tp, info.log_start)
            if b < info.log_start:
                _data_loss(ro, f"offsets [{b}, {info.log_start}) of {tp[0]}-{tp[1]} were deleted "
                               "before the stream read them", b)
                b = info.log_start
            e = min(e, info.log_end)
            if e > b:
                ranges[tp] = (b, e)
        return list(plan(ro, list(infos.values()), ranges))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SeglogInputPartition):
            return iter(())  # Spark's stand-in when the plan is empty
        return read_partition(partition, self.options)

    def commit(self, end: dict[str, Any]) -> None:
        pass


def _rate_limit(begin: Mapping[tuple[str, int], int], ends: dict[tuple[str, int], int], limit: int,
                log_starts: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """Kafka's ``rateLimit``: ``limit`` offsets shared across partitions by their backlog."""
    sizes = {tp: e - begin.get(tp, log_starts.get(tp, 0)) for tp, e in ends.items()}
    total = sum(s for s in sizes.values() if s > 0)
    if total <= limit:
        return ends
    out = {}
    for tp, e in ends.items():
        b = begin.get(tp, log_starts.get(tp, 0))
        size = sizes[tp]
        if size <= 0:
            out[tp] = e
            continue
        prorate = limit * (size / total)
        step = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(e, b + step)
    return out


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, slots=True)
class SeglogCommitMessage(WriterCommitMessage):
    """What one task appended: (topic, partition, first offset, end offset) runs."""

    task: int
    attempt: int
    appended: tuple[tuple[str, int, int, int], ...]


@contextlib.contextmanager
def _hw_update(log_dir: str) -> Iterator[None]:
    """Changing the log dir's high-watermark file: a writer sharing the dir (refused while a
    store, a node or a Kafka broker owns it), one read-modify-write at a time."""
    with shared_claim(log_dir, holder="a Spark write"), checkpoint_update_lock(log_dir):
        yield


def _write_spec(options: Mapping[str, Any]) -> dict[str, Any]:
    opts = _lower(options)
    _check_known(opts, _WRITE_OPTIONS, "write")
    paths = _paths(opts)
    if len(paths) != 1 or _glob.has_magic(paths[0]):
        raise ConfigError("seglog: a write needs exactly one log directory path: save('/path')", key="path")
    config = {k[len("config."):]: v for k, v in opts.items() if k.startswith("config.")}
    if config:
        from seglog.config import LogConfig
        try:
            LogConfig.from_dict(config)
        except ConfigError as exc:
            raise ConfigError(f"seglog option config.{exc.key}: {exc.message}", key=f"config.{exc.key}") from None
    compression = opts.get("compression", "none").strip().lower()
    if compression not in ("none", "gzip", "snappy", "lz4", "zstd"):
        raise _option_error("compression", f"expected none, gzip, snappy, lz4 or zstd, got {compression!r}")
    return {
        "log_dir": os.path.abspath(os.path.expanduser(paths[0])),
        "topic": opts.get("topic"),
        "num_partitions": _int(opts, "numpartitions", 1, 1),
        "compression": compression,
        "batch_bytes": _int(opts, "batchbytes", 256 << 10, 1),
        "config": config,
    }


_WRITABLE = {"key", "value", "topic", "partition", "timestamp", "headers"}


def _check_write_schema(schema: StructType, topic_option: str | None) -> None:
    names = {f.name: f.dataType for f in schema.fields}
    if "value" not in names:
        raise ConfigError("seglog: the DataFrame to write needs a 'value' column (binary or string)",
                          key="value")
    for col in ("key", "value"):
        if col in names and not isinstance(names[col], (BinaryType, StringType)):
            raise ConfigError(f"seglog: column {col!r} must be binary or string, not "
                              f"{names[col].simpleString()}", key=col)
    if "topic" in names and not isinstance(names["topic"], StringType):
        raise ConfigError(f"seglog: column 'topic' must be string, not {names['topic'].simpleString()}", key="topic")
    if "topic" not in names and not topic_option:
        raise ConfigError("seglog: no topic to write to: set option topic or give a 'topic' column",
                          key="topic")
    if "partition" in names and not isinstance(names["partition"], (IntegerType, LongType)):
        raise ConfigError(f"seglog: column 'partition' must be int, not {names['partition'].simpleString()}",
                          key="partition")
    if "timestamp" in names and not isinstance(names["timestamp"], TimestampType):
        raise ConfigError(f"seglog: column 'timestamp' must be timestamp, not "
                          f"{names['timestamp'].simpleString()}", key="timestamp")
    if "headers" in names:
        t = names["headers"]
        ok = isinstance(t, ArrayType) and isinstance(t.elementType, StructType) and \
            [f.name for f in t.elementType.fields] == ["key", "value"]
        if not ok:
            raise ConfigError("seglog: column 'headers' must be array<struct<key: string, value: binary>>, "
                              f"not {t.simpleString()}", key="headers")


class _Spool:
    """Encoded batches of one partition, in memory up to a limit, then in a temporary file."""

    LIMIT = 64 << 20

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.file: Any = None

    def add(self, data: bytes) -> None:
        if self.file is None and self.size + len(data) > self.LIMIT:
            self.file = tempfile.TemporaryFile(prefix="seglog-spool-")
            for c in self.chunks:
                self.file.write(c)
            self.chunks = []
        if self.file is not None:
            self.file.write(data)
        else:
            self.chunks.append(data)
        self.size += len(data)

    def pieces(self, max_bytes: int) -> Iterator[bytes]:
        """The batches again, grouped into appends of about ``max_bytes``."""
        if self.file is None:
            group: list[bytes] = []
            n = 0
            for c in self.chunks:
                group.append(c)
                n += len(c)
                if n >= max_bytes:
                    yield b"".join(group)
                    group, n = [], 0
            if group:
                yield b"".join(group)
            return
        self.file.seek(0)
        buf = b""
        while True:
            data = self.file.read(max_bytes)
            if not data:
                break
            buf += data
            heads = batch_headers(buf, allow_truncated=True)
            if heads:
                cut = heads[-1].position + heads[-1].size
                yield buf[:cut]
                buf = buf[cut:]
        if buf:
            yield buf

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


#: How long a task waits for another writer of the same partition (another task of the job).
PARTITION_LOCK_WAIT_S = 600.0


def _log_open(d: str, config: Mapping[str, str]) -> Log:
    # Each partition has one writer at a time (seglog.storage.logdir): tasks of the job writing the
    # same partition take turns; a store, node or broker owning the log dir refuses them all.
    return Log.open(d, config or None, lock_wait_s=PARTITION_LOCK_WAIT_S)


def _leader_epoch(lg: Log) -> int | None:
    # As the store writes: a new log is led at epoch 0 (what a single Kafka broker writes, and
    # recorded in leader-epoch-checkpoint); a log that already has epochs keeps its latest.
    return None if lg.epoch_cache.latest_epoch >= 0 else 0


_STORE_METADATA_FILE = "seglog-metadata.json"
_PARTITION_METADATA_FILE = "partition.metadata"


def _known_topic_id(log_dir: str, topic: str) -> str | None:
    """The topic id the dir already gives ``topic``: the store metadata's, else the one in a
    partition's ``partition.metadata``."""
    try:
        with open(os.path.join(log_dir, _STORE_METADATA_FILE), encoding="utf-8") as f:
            tid = json.load(f).get("topics", {}).get(topic, {}).get("topic_id")
        if tid:
            return str(tid)
    except (OSError, ValueError, AttributeError):
        pass
    for pd in find_partition_dirs([log_dir]):
        if pd.topic != topic:
            continue
        try:
            with open(os.path.join(pd.dir, _PARTITION_METADATA_FILE), encoding="utf-8") as f:
                for line in f.read().splitlines():
                    key, _, value = line.partition(":")
                    if key.strip() == "topic_id" and value.strip():
                        return value.strip()
        except OSError:
            continue
    return None


def _ensure_partition_metadata(log_dir: str, d: str, topic: str) -> None:
    """Kafka's ``partition.metadata`` in the partition dir ``d``, with the topic's id (a new
    one for a new topic), as the store writes it. Under the log dir's lock, so the tasks that
    create partitions of one new topic agree on its id."""
    path = os.path.join(d, _PARTITION_METADATA_FILE)
    if os.path.exists(path):
        return
    with shared_claim(log_dir, holder="a Spark write"), checkpoint_update_lock(log_dir):
        if os.path.exists(path):
            return
        tid = _known_topic_id(log_dir, topic)
        if tid is None:
            tid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        atomic_write(path, f"version: 0\ntopic_id: {tid}".encode("utf-8"))


class SeglogWriter(DataSourceArrowWriter):
    """Batch writer (see the module docs for the commit protocol)."""

    def __init__(self, spec: dict[str, Any], partition_counts: dict[str, int]) -> None:
        self.spec = spec
        self.partition_counts = partition_counts

    # -- executor ------------------------------------------------------------------------------

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SeglogCommitMessage:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        task = ctx.partitionId() if ctx is not None else 0
        attempt = ctx.attemptNumber() if ctx is not None else 0
        spools: dict[tuple[str, int], _Spool] = {}
        try:
            for n, batch in enumerate(iterator):
                if batch.num_rows:
                    self._encode(batch, task + n, spools)
            appended = []
            for tp in sorted(spools):
                first, end = self._append(tp, spools[tp])
                appended.append((tp[0], tp[1], first, end))
        finally:
            for s in spools.values():
                s.close()
        return SeglogCommitMessage(task, attempt, tuple(appended))

    def _partition_count(self, topic: str) -> int:
        return int(self.partition_counts.get(topic, self.spec["num_partitions"]))

    def _encode(self, batch: pa.RecordBatch, sticky: int, spools: dict[tuple[str, int], _Spool]) -> None:
        names = batch.schema.names
        topic_opt = self.spec["topic"]
        if topic_opt:
            by_topic = [(topic_opt, batch)]
        else:
            topics = batch.column(names.index("topic")).cast(pa.string())
            if topics.null_count:
                raise ConfigError("seglog: the 'topic' column has nulls; every row needs a topic", key="topic")
            by_topic = [(t, batch.filter(pc.equal(topics, t))) for t in pc.unique(topics).to_pylist()]
        for topic, rows in by_topic:
            count = self._partition_count(topic)
            parts = _partitions(rows, count, sticky % count, topic)
            for p in sorted(pc.unique(parts).to_pylist()):
                sub = rows if len(by_topic) == 1 and pc.all(pc.equal(parts, p)).as_py() else \
                    rows.filter(pc.equal(parts, p))
                self._encode_partition(sub, spools.setdefault((topic, p), _Spool()))

    def _encode_partition(self, rows: pa.RecordBatch, spool: _Spool) -> None:
        names = rows.schema.names

        def col(name: str) -> pa.Array | None:
            return rows.column(names.index(name)) if name in names else None

        values = col("value")
        keys = col("key")
        assert values is not None
        ts = col("timestamp")
        now = int(time.time() * 1000)
        if ts is None:
            ts_ms = pa.repeat(pa.scalar(now, pa.int64()), rows.num_rows)
        else:
            ts_ms = pc.fill_null(ts.cast(pa.timestamp("ms", "UTC"), safe=False).cast(pa.int64()), now)
        headers = col("headers")
        for s, e in _batch_cuts(values, keys, self.spec["batch_bytes"]):
            spool.add(encode_batch(
                values.slice(s, e - s), keys=None if keys is None else keys.slice(s, e - s),
                timestamps=ts_ms.slice(s, e - s),
                headers=None if headers is None else _header_lists(headers.slice(s, e - s)),
                compression=self.spec["compression"]))

    def _append(self, tp: tuple[str, int], spool: _Spool) -> tuple[int, int]:
        d = os.path.join(self.spec["log_dir"], f"{tp[0]}-{tp[1]}")
        lg = _log_open(d, self.spec["config"])
        try:
            _ensure_partition_metadata(self.spec["log_dir"], d, tp[0])
            first = lg.log_end_offset
            try:
                for data in spool.pieces(16 << 20):
                    lg.append(data, leader_epoch=_leader_epoch(lg))
                lg.flush()
            except BaseException:
                lg.truncate_to(first)
                raise
            end = lg.log_end_offset
        finally:
            lg.close()
        return first, end

    # -- driver --------------------------------------------------------------------------------

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        runs: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for m in messages:
            if isinstance(m, SeglogCommitMessage):
                for t, p, s, e in m.appended:
                    if e > s:
                        runs.setdefault((t, p), []).append((s, e))
        log_dir = self.spec["log_dir"]
        hw_file = OffsetCheckpointFile(os.path.join(log_dir, HIGH_WATERMARK_FILE))
        current = _read_hws(hw_file)
        updates: dict[tuple[str, int], int | None] = {}
        for tp in sorted(runs):
            d = os.path.join(log_dir, f"{tp[0]}-{tp[1]}")
            lg = _log_open(d, self.spec["config"])
            try:
                hw = max(current.get(tp, lg.log_start_offset), lg.log_start_offset)
                updates[tp] = _settle(lg, min(hw, lg.log_end_offset), sorted(runs[tp]))
            finally:
                lg.close()
        if updates:
            with _hw_update(log_dir):
                hw_file.update(updates)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Drop what the job appended past the high watermarks. Best effort: Spark may still be
        stopping tasks, and a record appended after this is removed by the next commit."""
        log_dir = self.spec["log_dir"]
        hws = _read_hws(OffsetCheckpointFile(os.path.join(log_dir, HIGH_WATERMARK_FILE)))
        topics = {self.spec["topic"]} if self.spec["topic"] else set(self.partition_counts)
        topics |= {t for m in messages if isinstance(m, SeglogCommitMessage) for t, _, _, _ in m.appended}
        for pd in find_partition_dirs([log_dir]):
            if pd.topic not in topics:
                continue
            tp = (pd.topic, pd.partition)
            lg = _log_open(pd.dir, self.spec["config"])
            try:
                lg.truncate_to(max(hws.get(tp, lg.log_start_offset), lg.log_start_offset))
            finally:
                lg.close()


def _read_hws(f: OffsetCheckpointFile) -> dict[tuple[str, int], int]:
    try:
        hws: dict[tuple[str, int], int] = f.read()
        return hws
    except CorruptCheckpointError as exc:
        raise SeglogError(f"seglog: {exc}", path=f.path) from None


def _settle(lg: Log, hw: int, runs: list[tuple[int, int]]) -> int:
    """Make the job's ``runs`` the records right after ``hw`` and return the new high
    watermark; anything else past ``hw`` (left by failed attempts) is dropped."""
    if runs[0][0] == hw and all(a[1] == b[0] for a, b in zip(runs, runs[1:])):
        end = runs[-1][1]
        if lg.log_end_offset > end:
            lg.truncate_to(end)
        return end
    # Move the runs down over the leftovers: copy them out, cut the log, append them again.
    copies: list[bytes] = []
    for s, e in runs:
        off = s
        while off < e:
            r = lg.read(off, 16 << 20, upper_bound=e)
            data = r.to_bytes()
            if not data:
                break
            copies.append(data)
            off = batch_headers(data)[-1].last_offset + 1
    lg.truncate_to(hw)
    for data in copies:
        # Batches this log already held (transaction markers among them): not a client's.
        lg.append(data, leader_epoch=_leader_epoch(lg), origin="coordinator")
    lg.flush()
    return int(lg.log_end_offset)


def _batch_cuts(values: pa.Array, keys: pa.Array | None, target: int) -> list[tuple[int, int]]:
    """Row ranges of about ``target`` key + value bytes each (a batch ends with the row that
    crosses a multiple of ``target``, so it holds at most ``target`` plus one row)."""
    n = len(values)
    if n == 0:
        return []
    sizes = pc.fill_null(pc.binary_length(values), 0).cast(pa.int64())
    if keys is not None:
        sizes = pc.add(sizes, pc.fill_null(pc.binary_length(keys), 0).cast(pa.int64()))
    sizes = pc.add(sizes, 16)  # record framing, roughly
    ids = pc.divide(pc.subtract(pc.cumulative_sum(sizes), 1), target)
    ends = pc.run_end_encode(ids).run_ends.to_pylist()
    out, start = [], 0
    for e in ends:
        out.append((start, e))
        start = e
    return out


def _partitions(rows: pa.RecordBatch, count: int, sticky: int, topic: str) -> pa.Array:
    """The partition of every row: the ``partition`` column, else Kafka's murmur2 of the key,
    else ``sticky`` (one partition for the keyless rows of an input batch)."""
    from seglog.client.partitioner import partitions_for_keys

    names = rows.schema.names
    n = rows.num_rows
    given = rows.column(names.index("partition")).cast(pa.int32()) if "partition" in names else None
    if given is not None and given.null_count == 0:
        parts = given
    else:
        if "key" in names:
            keys = rows.column(names.index("key"))
            if pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type):
                keys = keys.cast(pa.binary())
            hashed = pa.array(partitions_for_keys(keys.to_pylist(), count), pa.int32())
            by_key = pc.if_else(pc.equal(hashed, -1), sticky, hashed)
        else:
            by_key = pa.repeat(pa.scalar(sticky, pa.int32()), n)
        parts = by_key if given is None else pc.coalesce(given, by_key)
    lo, hi = pc.min_max(parts).values()
    if lo.as_py() < 0 or hi.as_py() >= count:
        bad = lo.as_py() if lo.as_py() < 0 else hi.as_py()
        raise UnknownTopicOrPartitionError(
            f"seglog: a row asks for partition {bad} of topic {topic!r}, which has {count} "
            f"partition(s) (0..{count - 1}); set numPartitions to create a new topic with more")
    return parts


def _header_lists(arr: pa.Array) -> list[Any]:
    out: list[Any] = []
    for rec in arr.to_pylist():
        if not rec:
            out.append(None)
        else:
            out.append([(h["key"], h["value"].encode() if isinstance(h["value"], str) else h["value"])
                        for h in rec])
    return out


# ---------------------------------------------------------------------------------------------
# The data source
# ---------------------------------------------------------------------------------------------

class SeglogDataSource(DataSource):
    """``spark.read.format("seglog")`` / ``df.write.format("seglog")`` (see the module docs)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        ro = parse_read_options(self.options)
        # Fail at load() rather than at the first action: paths and topics must exist.
        select_partitions(find_partition_dirs(ro.paths), ro)
        return spark_schema(ro.columns)

    def reader(self, schema: StructType) -> DataSourceReader:
        ro = parse_read_options(self.options, columns=_columns_of(schema))
        if ro.push_filters and _called_for_filter_pushdown():
            return SeglogPushdownReader(ro)
        return SeglogReader(ro)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return SeglogStreamReader(parse_read_options(self.options, streaming=True,
                                                     columns=_columns_of(schema)))

    def writer(self, schema: StructType, overwrite: bool) -> SeglogWriter:
        if overwrite:
            raise ConfigError("seglog: a commit log cannot be overwritten; use mode('append')",
                              key="mode")
        spec = _write_spec(self.options)
        _check_write_schema(schema, spec["topic"])
        log_dir = spec["log_dir"]
        os.makedirs(log_dir, exist_ok=True)
        with shared_claim(log_dir, holder="a Spark write"), checkpoint_update_lock(log_dir):
            ensure_meta_properties(log_dir)
        counts: dict[str, int] = {}
        for pd in find_partition_dirs([log_dir]):
            counts[pd.topic] = max(counts.get(pd.topic, 0), pd.partition + 1)
        _init_high_watermarks(log_dir)
        return SeglogWriter(spec, counts)


def _init_high_watermarks(log_dir: str) -> None:
    """Create the high-watermark file of a log dir that has none, with the log ends of the
    partitions already there, so their records stay visible to readers that honour it."""
    path = os.path.join(log_dir, HIGH_WATERMARK_FILE)
    with _hw_update(log_dir):
        if os.path.exists(path):
            return
        ckpts = _Checkpoints()
        ends = {}
        for pd in find_partition_dirs([log_dir]):
            info = describe_partition(pd, "logEnd", ckpts)
            ends[info.tp] = info.log_end
        OffsetCheckpointFile(path).write(ends)
