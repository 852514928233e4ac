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

The package, one concept a module: :mod:`~seglog.bindings.spark.options` (the options above),
:mod:`~seglog.bindings.spark.schema` (Spark schemas), :mod:`~seglog.bindings.spark.logdirs`
(finding partition dirs), :mod:`~seglog.bindings.spark.partitions` (a partition's segments and
readable range), :mod:`~seglog.bindings.spark.timestamps`,
:mod:`~seglog.bindings.spark.transactions` (``read_committed``),
:mod:`~seglog.bindings.spark.filters` (pushdown), :mod:`~seglog.bindings.spark.planning` (the
tasks), :mod:`~seglog.bindings.spark.reader` (a task's Arrow batches),
:mod:`~seglog.bindings.spark.stream`, :mod:`~seglog.bindings.spark.writer` (with
:mod:`~seglog.bindings.spark.rows`, :mod:`~seglog.bindings.spark.spool` and
:mod:`~seglog.bindings.spark.partition_metadata`) and :mod:`~seglog.bindings.spark.source` (the
data source tying them).
"""

from __future__ import annotations

from seglog.bindings.spark.checkpoints import HIGH_WATERMARK_FILE, LOG_START_FILE
from seglog.bindings.spark.filters import Constraints, push_filters
from seglog.bindings.spark.logdirs import INTERNAL_TOPICS, PartitionDir, find_partition_dirs, select_partitions
from seglog.bindings.spark.options import (
    Bound,
    ReadOptions,
    WriteOptions,
    parse_read_options,
    parse_write_options,
)
from seglog.bindings.spark.partitions import ReadablePartition, describe_partition
from seglog.bindings.spark.planning import (
    SeglogInputPartition,
    load_partitions,
    plan,
    plan_batch,
    split_ranges,
)
from seglog.bindings.spark.reader import SeglogPushdownReader, SeglogReader, read_partition
from seglog.bindings.spark.schema import spark_schema
from seglog.bindings.spark.source import NAME, PUSHDOWN_CONF, SeglogDataSource, local_session, register
from seglog.bindings.spark.stream import SeglogStreamReader
from seglog.bindings.spark.timestamps import TsBatch, exact_timestamp_offset, find_timestamp_batch
from seglog.bindings.spark.transactions import transaction_state
from seglog.bindings.spark.writer import (
    PARTITION_LOCK_WAIT_S,
    SeglogCommitMessage,
    SeglogWriter,
    init_high_watermarks,
)

__all__ = [
    "HIGH_WATERMARK_FILE",
    "INTERNAL_TOPICS",
    "LOG_START_FILE",
    "NAME",
    "PARTITION_LOCK_WAIT_S",
    "PUSHDOWN_CONF",
    "Bound",
    "Constraints",
    "PartitionDir",
    "ReadOptions",
    "ReadablePartition",
    "SeglogCommitMessage",
    "SeglogDataSource",
    "SeglogInputPartition",
    "SeglogPushdownReader",
    "SeglogReader",
    "SeglogStreamReader",
    "SeglogWriter",
    "TsBatch",
    "WriteOptions",
    "describe_partition",
    "exact_timestamp_offset",
    "find_partition_dirs",
    "find_timestamp_batch",
    "init_high_watermarks",
    "load_partitions",
    "local_session",
    "parse_read_options",
    "parse_write_options",
    "plan",
    "plan_batch",
    "push_filters",
    "read_partition",
    "register",
    "select_partitions",
    "spark_schema",
    "split_ranges",
    "transaction_state",
]
