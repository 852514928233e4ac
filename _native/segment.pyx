"""One log segment: ``<base>.log`` with its ``.index``, ``.timeindex`` (and ``.txnindex``).

Mirrors Kafka's ``LogSegment`` (storage/internals/log/LogSegment.java); spec ``docs/kafka-format.md``
§6, §7, §9. File names are the 20-digit zero-padded base offset::

    00000000000000001234.log        batches back to back, no header, no padding
    00000000000000001234.index      sparse offset index  [int32 relOffset][int32 position]
    00000000000000001234.timeindex  sparse time index    [int64 timestamp][int32 relOffset]
    00000000000000001234.txnindex   aborted transactions (34-byte entries), only if any

Append path (zero copy): the caller's already-encoded batches go to the page cache with one
``pwritev`` per append; for each batch the first 16 bytes (baseOffset, batchLength,
partitionLeaderEpoch, which lie outside the CRC) come from a small scratch buffer so offsets and
the leader epoch can be assigned without copying or re-checksumming the body. On ext4 the disk
blocks ahead of the end of file are allocated in 4 MiB steps first (``prealloc.h``),
without changing the file's length; roll, close and truncation give back the rest.

Index rule (``LogSegment.append``), per append call: when more than ``index.interval.bytes`` were
appended since the last entry, add (largest offset of this append, position before this append)
to the offset index and (max timestamp so far, its batch's last offset) to the time index. The
recovery walk applies the same rule per batch. The time index gets the segment's max-timestamp
entry when the segment becomes inactive or closes.

Read path: the ``.log`` is mapped read-only with a reservation of at least ``segment.bytes`` so
appends rarely need a new mapping; only bytes below the segment's own ``size`` are ever exposed,
so a mapping never touches pages past end of file. Slices are memoryviews of a ``Mapping``,
which counts its exports; ``truncate_to``/``close``/``delete`` refuse (``BufferError``) while
any view of this segment's data is alive, as CPython's mmap does.

Open files: an open segment holds three descriptors (the ``.log``, and the duplicate stdlib
``mmap`` keeps of each index file it maps) and three mappings. A log's active segment stays open;
its inactive segments are *evictable*: ``Segment(..., lazy=True)`` opens nothing until first use,
and a process-wide cache (``open_segment_limit()``, by default a sixteenth of ``RLIMIT_NOFILE``
in descriptors, 8 to 4096 segments) closes the files of the least recently opened idle ones
(CLOCK: a segment used since the last sweep gets a second chance) once more are open than its
bound; the next use opens them again (~50-100 us: three opens, three mappings; a cleanly closed
index is not scanned again, its entry count is kept). A segment is never closed under a reader:
one with live views, or with a method running on its files (``_enter``/``_leave``), is skipped.
Its state (size, next offset, max timestamp) stays in memory once read. A lazy segment's first
open checks its indexes (``sanity_check``) and, if writable, rebuilds them when they fail. An
open that runs out of descriptors (EMFILE/ENFILE) or mappings (ENOMEM) first closes every idle
segment of the cache and tries again, then fails naming ``RLIMIT_NOFILE`` and ``ulimit -n``.
Data written through a descriptor that was closed since is still fsynced by ``flush()`` through
the new one (``fdatasync`` acts on the file, not the descriptor).

Crash policy: an append either writes whole batches or, on a write error, truncates the file back
to its previous size before raising. A crash mid-``pwritev`` leaves a torn tail; ``recover()``
validates every batch (structure and CRC) and truncates at the first invalid byte. Index files
are never trusted after an unclean shutdown: the log layer calls ``recover()``, which rebuilds
them.

Thread-safety: one writer; readers may call ``read``/``translate_offset`` concurrently with an
append only under the log's lock (the log layer provides it). Not thread-safe on its own.
"""

import collections
import errno as _errno
import logging
import os
import resource
import threading
import weakref

from libc.errno cimport errno, EINTR
from libc.stdint cimport uint8_t, uint32_t, int32_t, int64_t, uint64_t, INT32_MAX, INT64_MAX
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, strerror
from posix.mman cimport mmap, munmap, PROT_READ, MAP_SHARED, MAP_FAILED
from posix.unistd cimport ftruncate

from seglog._native import _errors
from seglog._native.index import OffsetIndex, TimeIndex
from seglog._native.records import first_at_or_after as _records_first_at_or_after

cdef extern from "sys/uio.h" nogil:
    struct iovec:
        void *iov_base
        size_t iov_len
    ssize_t pwritev(int fd, const iovec *iov, int iovcnt, long offset)

cdef extern from "unistd.h" nogil:
    int fdatasync(int fd)
    long sysconf(int name)
    int _SC_PAGESIZE

from kbytes cimport kb_load_i32, kb_store_u32, kb_store_u64
from seglog._native.index cimport index_is_full, offset_index_position, time_index_offset
from seglog._native.records cimport BatchHeader, make_header
from batch_header cimport (seglog_batch, seglog_batch_head, batch_error, batch_is_torn, BATCH_OK, BATCH_END,
                           BATCH_BAD_CODEC, BATCH_COUNT_TOO_BIG, BATCH_CRC_V2, BATCH_CRC_ALL, LOG_OVERHEAD,
                           ATTR_TRANSACTIONAL, ATTR_CONTROL)

cdef extern from "prealloc.h" nogil:
    int seglog_prealloc_useful(int fd)
    int seglog_prealloc(int fd, long offset, long length)

cdef enum:
    IOV_BATCH = 512            # batches per pwritev call (2 iovecs each, under IOV_MAX 1024)
    IOV_SMALL = 16             # batches an append patches in stack space (more: malloc)
    ALLOCATE_STEP = 4194304     # 4 MiB of disk blocks allocated ahead of the end of file at a time
    NOGIL_WALK_BYTES = 65536    # a batch-header walk over fewer bytes keeps the GIL

include "tssearch.pxi"

NO_PARTITION_LEADER_EPOCH = -1
ALLOCATE_AHEAD = ALLOCATE_STEP    # Segment's default allocate_ahead


def filename_prefix(int64_t offset):
    """Kafka's ``LogFileUtils.filenamePrefixFromOffset``: 20 digits, zero-padded."""
    return "%020d" % offset


def allocates_ahead(path):
    """Whether segments under ``path`` (a directory or file) get disk blocks allocated ahead
    of their end of file: on ext4 only (``prealloc.h``)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return bool(seglog_prealloc_useful(fd))
    finally:
        os.close(fd)


def _storage_error(str msg, object path, **fields):
    raise _errors.make("storage", msg, path=path, **fields)


include "export.pxi"

cdef char *_FORMAT_B = b"B"


cdef class Mapping:
    """A read-only mapping of the first ``length`` bytes of a file; unmapped when unreferenced.

    Exposes the buffer protocol; ``exports`` counts live views.
    """
    cdef uint8_t *addr
    cdef size_t length
    cdef size_t reserved
    cdef readonly Py_ssize_t exports

    def __dealloc__(self):
        if self.addr != NULL:
            munmap(self.addr, self.reserved)

    def __getbuffer__(self, Py_buffer *view, int flags):
        _export_readonly(view, self.addr, self.length, 1, _FORMAT_B, flags)
        view.obj = self
        self.exports += 1

    def __releasebuffer__(self, Py_buffer *view):
        _release_export(view)
        self.exports -= 1


# A segment's header walks report batches as ``batch_headers`` does (one class, records.pyx);
# BatchInfo is the name Segment's API has used for it.
BatchInfo = BatchHeader


cdef inline int _head_at(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, seglog_batch *h,
                         int crc_flags) noexcept nogil:
    """The header of the batch at ``pos`` (batch_header.h: a v2 batch or a legacy entry), as a
    segment's header walks read it. They read headers only, as Kafka's recovery does (size and
    CRC): the record-level statuses (a codec above 4, a recordsCount the records area cannot
    hold) are the record decoder's to report, so they count as OK here."""
    cdef int status = seglog_batch_head(buf + pos, end - pos, h, crc_flags)
    if status == BATCH_BAD_CODEC or status == BATCH_COUNT_TOO_BIG:
        return BATCH_OK
    return status


cdef Py_ssize_t _walk_batches(const uint8_t *buf, Py_ssize_t start, Py_ssize_t limit, Py_ssize_t max_position,
                              bint min_one_batch) noexcept nogil:
    """End of the whole batches from ``start`` that end by ``limit`` (the first one whatever
    its size when ``min_one_batch``) and stop at ``max_position``: headers only."""
    cdef Py_ssize_t pos = start
    cdef seglog_batch h
    while pos < max_position:
        if pos >= limit and not (min_one_batch and pos == start):
            # No batch fits (a batch has a size): the next header is not read, which in a
            # random one-batch read is a page of the file no one else touches.
            break
        if _head_at(buf, pos, max_position, &h, 0) != BATCH_OK:
            break
        if pos + h.size > limit and not (min_one_batch and pos == start):
            break
        pos += h.size
    return pos


cdef Py_ssize_t _next_txn_batch(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, seglog_batch *h,
                                int *status) noexcept nogil:
    """Position of the next v2 batch at or after ``pos`` with attributes transactional or control
    and producerId >= 0 (``status`` BATCH_OK), or where the walk ended (another status)."""
    while True:
        status[0] = _head_at(buf, pos, end, h, 0)
        if status[0] != BATCH_OK:
            return pos
        if h.magic == 2 and (h.attrs & (ATTR_CONTROL | ATTR_TRANSACTIONAL)) and h.pid >= 0:
            return pos
        pos += h.size


def _open_index(cls, path, base_offset, max_index_size, read_only, entries=-1):
    if read_only and not os.path.exists(path):
        # A read-only directory (a Kafka broker's) may lack index files: lookups then scan
        # batch headers from the start of the segment.
        return _NoIndex(path, base_offset, cls is TimeIndex)
    return cls(path, base_offset, max_index_size=max_index_size, writable=not read_only,
               entries=entries)


class _NoIndex:
    """Stands in for a missing index of a read-only segment: no entries."""

    def __init__(self, path, base_offset, is_time):
        self.path = path
        self.base_offset = base_offset
        self._is_time = is_time
        self.entries = 0
        self.is_full = False
        self.closed = False

    @property
    def last_entry(self):
        return (-1, self.base_offset) if self._is_time else (self.base_offset, 0)

    def lookup(self, target):
        return self.last_entry

    def sanity_check(self):
        pass

    def flush(self):
        pass

    def close(self, trim=True):
        self.closed = True


cdef class RecoveryResult:
    cdef readonly Py_ssize_t valid_bytes
    cdef readonly Py_ssize_t truncated_bytes
    cdef readonly int64_t next_offset
    cdef readonly int64_t batches
    cdef readonly object reason
    cdef readonly list epoch_starts      # [(leader epoch, first offset)] in log order, increasing epochs
    cdef readonly list batch_infos       # per batch, when asked for (producer state rebuild)

    def __repr__(self):
        return (f"RecoveryResult(valid_bytes={self.valid_bytes}, truncated_bytes={self.truncated_bytes}, "
                f"next_offset={self.next_offset}, batches={self.batches}, reason={self.reason!r})")


cdef class AppendInfo:
    cdef readonly int64_t first_offset
    cdef readonly int64_t last_offset
    cdef readonly int64_t max_timestamp
    cdef readonly int64_t offset_of_max_timestamp
    cdef readonly Py_ssize_t position
    cdef readonly Py_ssize_t size
    cdef readonly int32_t batches
    cdef readonly int64_t records

    def __repr__(self):
        return (f"AppendInfo(first_offset={self.first_offset}, last_offset={self.last_offset}, "
                f"position={self.position}, size={self.size}, batches={self.batches})")


cdef class LogAppendInfo:
    """What a log's append wrote (``Log.append``): its offsets, largest timestamp and that
    record's offset, the LogAppendTime written (-1 when the log keeps the producers'
    timestamps), records, batches and bytes, the log start offset, and ``duplicate``: a
    client's retry of one of its producer's last five batches (``Log.append_as_leader``),
    for which nothing was written and the offsets are the original append's. Native (one is
    made per append) and read-only."""
    cdef readonly int64_t first_offset
    cdef readonly int64_t last_offset
    cdef readonly int64_t max_timestamp
    cdef readonly int64_t offset_of_max_timestamp
    cdef readonly int64_t log_append_time
    cdef readonly int64_t records
    cdef readonly int64_t batches
    cdef readonly int64_t size
    cdef readonly int64_t log_start_offset
    cdef readonly bint duplicate

    def __init__(self, int64_t first_offset, int64_t last_offset, int64_t max_timestamp,
                 int64_t offset_of_max_timestamp, int64_t log_append_time, int64_t records,
                 int64_t batches, int64_t size, int64_t log_start_offset, bint duplicate=False):
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.max_timestamp = max_timestamp
        self.offset_of_max_timestamp = offset_of_max_timestamp
        self.log_append_time = log_append_time
        self.records = records
        self.batches = batches
        self.size = size
        self.log_start_offset = log_start_offset
        self.duplicate = duplicate

    def _fields(self):
        return (self.first_offset, self.last_offset, self.max_timestamp, self.offset_of_max_timestamp,
                self.log_append_time, self.records, self.batches, self.size, self.log_start_offset,
                self.duplicate)

    def __eq__(self, other):
        if not isinstance(other, LogAppendInfo):
            return NotImplemented
        return self._fields() == (<LogAppendInfo>other)._fields()

    __hash__ = None

    def __repr__(self):
        return (f"LogAppendInfo(first_offset={self.first_offset}, last_offset={self.last_offset}, "
                f"max_timestamp={self.max_timestamp}, "
                f"offset_of_max_timestamp={self.offset_of_max_timestamp}, "
                f"log_append_time={self.log_append_time}, records={self.records}, "
                f"batches={self.batches}, size={self.size}, "
                f"log_start_offset={self.log_start_offset}, duplicate={bool(self.duplicate)})")


def log_append_info(AppendInfo info, int64_t log_append_time, int64_t log_start_offset):
    """The :class:`LogAppendInfo` of a log append that wrote ``info`` (``Segment.append``'s
    result), made without a Python-level constructor call."""
    cdef LogAppendInfo r = LogAppendInfo.__new__(LogAppendInfo)
    r.first_offset = info.first_offset
    r.last_offset = info.last_offset
    r.max_timestamp = info.max_timestamp
    r.offset_of_max_timestamp = info.offset_of_max_timestamp
    r.log_append_time = log_append_time
    r.records = info.records
    r.batches = info.batches
    r.size = info.size
    r.log_start_offset = log_start_offset
    r.duplicate = False
    return r


#: What ``Segment.append`` with rules returns instead of writing when the segment must roll
#: first (Kafka's ``shouldRoll``; the reasons the log records).
ROLL_SIZE = "size"
ROLL_INDEX_FULL = "index full"
ROLL_OFFSET_OVERFLOW = "offset overflow"
ROLL_AGE = "age"
#: The segment holds no batch timestamp yet: whether it is too old for another append depends on
#: when it was created, which the log knows (its wall-clock age against ``segment.ms``).
ROLL_CHECK_WALL_AGE = "wall-clock age"


cdef class AppendRules:
    """A log's rules for its appends (Kafka's ``UnifiedLog.append`` checks and ``shouldRoll``),
    applied by :meth:`Segment.append` in its header pass, before anything is written. Made once
    per configuration; ``where`` names the partition and ``log_dir`` the log in messages."""
    cdef readonly str where
    cdef readonly str log_dir
    cdef readonly int64_t max_message_bytes
    cdef readonly int64_t segment_bytes
    cdef readonly int64_t max_segment_ms

    def __init__(self, str where, str log_dir, int64_t max_message_bytes, int64_t segment_bytes,
                 int64_t max_segment_ms):
        self.where = where
        self.log_dir = log_dir
        self.max_message_bytes = max_message_bytes
        self.segment_bytes = segment_bytes
        self.max_segment_ms = max_segment_ms

    def __repr__(self):
        return (f"AppendRules({self.where!r}, {self.log_dir!r}, max_message_bytes="
                f"{self.max_message_bytes}, segment_bytes={self.segment_bytes}, "
                f"max_segment_ms={self.max_segment_ms})")


cdef int _apply_rules(AppendRules rules, seglog_batch *h, Py_ssize_t pos, bint assign) except -1:
    """The log's per-batch rules (the order of Kafka's ``UnifiedLog.append``): a batch no larger
    than a segment, magic 2, within ``max.message.bytes`` (+12 bytes of log overhead), and, when
    offsets are assigned, as many records as offsets."""
    cdef int64_t span
    if h.size > rules.segment_bytes:
        # Kafka's UnifiedLog.append refuses an append that cannot fit one segment (a
        # producer's append is one batch); several batches may still span segments.
        raise _errors.make("record_list_too_large",
                           f"Message batch size is {h.size} bytes in append to partition {rules.where}, "
                           f"which exceeds the maximum configured segment size of {rules.segment_bytes}",
                           position=pos, limit=rules.segment_bytes)
    if h.magic != 2:
        raise _errors.make("invalid_record",
                           f"only RecordBatch v2 can be appended; the batch at byte {pos} has magic "
                           f"{h.magic}", position=pos)
    if h.size > rules.max_message_bytes + 12:
        raise _errors.make("record_too_large",
                           f"the batch at byte {pos} is {h.size} bytes, over max.message.bytes "
                           f"{rules.max_message_bytes} (+12 bytes of log overhead) of {rules.log_dir}",
                           position=pos, limit=rules.max_message_bytes)
    span = h.last_offset - h.base_offset + 1
    if assign and h.count != span:
        raise _errors.make("invalid_record",
                           f"the batch at byte {pos} holds {h.count} records but spans {span} "
                           "offsets; a producer batch must be contiguous", position=pos)
    return 0


cdef class Segment:
    """One segment of a partition log (see module docs)."""
    cdef readonly object dir
    cdef readonly int64_t base_offset
    cdef readonly Py_ssize_t size
    cdef readonly object log_path
    cdef object _oidx
    cdef object _tidx
    cdef int64_t _next_offset
    cdef int64_t _max_ts
    cdef int64_t _off_max_ts
    cdef int64_t _rolling_ts
    cdef readonly int32_t index_interval_bytes
    cdef readonly bint read_only
    cdef readonly Py_ssize_t bytes_since_last_index_entry
    cdef int fd
    cdef Py_ssize_t reserve
    cdef Mapping mapping
    cdef list old_mappings
    cdef readonly bint closed
    cdef readonly str suffix
    cdef readonly Py_ssize_t allocated_to    # blocks are reserved up to here (>= size) ...
    cdef readonly Py_ssize_t allocate_step   # ... in steps of this many bytes (0: no reserving)
    cdef Py_ssize_t segment_bytes
    cdef Py_ssize_t max_index_size
    # Lazy files (see "Open files" in the module docs): an evictable segment may have its files
    # closed ("parked") while it stays part of its log; the next use opens them again.
    cdef bint _evictable         # may be parked by the open-segment cache (inactive segments)
    cdef bint _parked            # files closed, reopened on the next use
    cdef bint _parking           # being parked (by the thread holding the cache's lock)
    cdef bint _state_loaded      # next offset and max timestamp known (read once, then kept)
    cdef bint _referenced        # used since the cache last looked (second chance)
    cdef int _busy               # methods running on the files: never parked meanwhile
    cdef int64_t _oidx_entries   # entries of the indexes when parked (no scan on reopen)
    cdef int64_t _tidx_entries
    cdef object __weakref__

    def __cinit__(self):
        self.fd = -1
        self.old_mappings = []
        self.closed = True
        self._oidx_entries = -1
        self._tidx_entries = -1

    def __init__(self, dir, int64_t base_offset, *, int32_t index_interval_bytes=4096,
                 Py_ssize_t max_index_size=10485760, Py_ssize_t segment_bytes=1073741824,
                 bint create=False, bint read_only=False, str suffix="",
                 Py_ssize_t allocate_ahead=ALLOCATE_STEP, bint lazy=False):
        """Open (or with ``create`` make) the segment at ``base_offset`` in ``dir``.

        ``allocate_ahead``: appends reserve disk blocks past the end of file this many bytes at a
        time (never past ``segment_bytes`` unless one append needs it), on ext4 only;
        the file's length does not change, and ``on_become_inactive``/``close`` give back what
        was not written. 0 turns it off; ``segment_bytes`` reserves the whole segment at the
        first append (the log's ``preallocate``).

        Opening reads no batch data except the tail after the last offset-index entry (to find
        ``next_offset``); indexes are taken as they are, so after an unclean shutdown the
        caller must ``sanity_check()`` or ``recover()``.

        ``lazy`` (an existing inactive segment) opens nothing now: the segment is evictable and
        its files are opened on first use (then ``sanity_check()`` runs, and a writable
        segment whose indexes fail it gets them rebuilt by ``recover()``); only the file's
        length is read.
        """
        if base_offset < 0:
            raise ValueError(f"segment base offset must be >= 0, got {base_offset}")
        if index_interval_bytes < 0:
            raise ValueError(f"index.interval.bytes must be >= 0, got {index_interval_bytes}")
        if allocate_ahead < 0:
            raise ValueError(f"allocate_ahead must be >= 0, got {allocate_ahead}")
        self.dir = os.fspath(dir)
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.read_only = read_only
        self.suffix = suffix
        prefix = os.path.join(self.dir, filename_prefix(base_offset))
        self.log_path = prefix + ".log" + suffix
        exists = os.path.exists(self.log_path)
        if create and exists:
            raise FileExistsError(f"segment file already exists: {self.log_path}")
        if not create and not exists:
            raise FileNotFoundError(f"segment file not found: {self.log_path}")
        self.segment_bytes = segment_bytes
        self.max_index_size = max_index_size
        self._max_ts = -1
        self._off_max_ts = base_offset
        self._rolling_ts = -1
        self._next_offset = base_offset
        if lazy and not create:
            self.size = os.stat(self.log_path).st_size
            self.allocated_to = self.size
            self.closed = False
            self._parked = True
            self._evictable = True
            return
        self.closed = False
        try:
            self._open_files(create, allocate_ahead)
            self._load_tail_state()
        except BaseException:
            self._shut(True)
            raise

    cdef int _open_files(self, bint create, Py_ssize_t allocate_ahead) except -1:
        """Open the ``.log``, map it and open both indexes. Out of descriptors (or of
        mappings), the idle segments of the open-segment cache are closed and it is tried
        once more; then the error names the limit."""
        try:
            self._open_files_once(create, allocate_ahead)
        except OSError as exc:
            if exc.errno not in _OUT_OF_FILES:
                raise
            self._close_files(False)
            if not _cache_release_idle(self):
                raise out_of_files_error(self.log_path, exc) from None
            try:
                self._open_files_once(create, allocate_ahead)
            except OSError as exc2:
                if exc2.errno not in _OUT_OF_FILES:
                    raise
                raise out_of_files_error(self.log_path, exc2) from None
        return 0

    cdef int _open_files_once(self, bint create, Py_ssize_t allocate_ahead) except -1:
        prefix = os.path.join(self.dir, filename_prefix(self.base_offset))
        flags = os.O_RDONLY if self.read_only else (os.O_RDWR | os.O_CREAT)
        self.fd = os.open(self.log_path, flags | os.O_CLOEXEC, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.allocated_to = self.size
        if not self.read_only and allocate_ahead > 0 and seglog_prealloc_useful(self.fd):
            self.allocate_step = allocate_ahead
        page = sysconf(_SC_PAGESIZE)
        # An inactive segment does not grow: its mapping needs no room to.
        self.reserve = max(self.size if self._evictable else self.segment_bytes, self.size, 1)
        self.reserve = (self.reserve + page - 1) // page * page
        self._map(self.size)
        self._oidx = _open_index(OffsetIndex, prefix + ".index" + self.suffix, self.base_offset,
                                 self.max_index_size, self.read_only, self._oidx_entries)
        self._tidx = _open_index(TimeIndex, prefix + ".timeindex" + self.suffix, self.base_offset,
                                 self.max_index_size, self.read_only, self._tidx_entries)
        self._parked = False
        return 0

    # -- open files (lazy segments) --------------------------------------------------------------

    cdef inline int _enter(self) except -1:
        """Before a use of the files: open them if parked, and hold them open until the
        matching ``_leave()`` (the cache never parks a busy segment)."""
        self._busy += 1
        if self._parked or self._parking:
            # Parking releases the GIL (closing files): wait for it under the cache's lock.
            try:
                with _cache_lock:
                    if self._parked:
                        self._unpark()
            except BaseException:
                self._busy -= 1
                raise
        self._referenced = True
        return 0

    cdef inline int _leave(self) except -1:
        """The end of a use: an idle segment over the cache's bound is parked now."""
        self._busy -= 1
        if self._busy == 0 and self._evictable and _cache_n > _cache_bound and not self._parked:
            with _cache_lock:
                _cache_shrink(None)
        return 0

    cdef int _touch_files(self) except -1:
        """Open a parked segment's files for a moment (the cache may park it again later)."""
        if self._parked:
            self._enter()
            self._leave()
        return 0

    cdef int _unpark(self) except -1:
        cdef bint first = not self._state_loaded
        if self.closed:
            raise ValueError(f"segment {self.log_path} is closed")
        try:
            self._open_files(False, 0)
            if first:
                self._load_tail_state()
        except BaseException:
            self._close_files(False)
            self._parked = True
            raise
        _cache_add(self)
        if first and not self.read_only:
            # Opened lazily after a clean shutdown: its indexes are checked now instead of at
            # load, and rebuilt from the log if they fail.
            try:
                self._oidx.sanity_check()
                self._tidx.sanity_check()
            except Exception as exc:  # noqa: BLE001 - any index problem means rebuild
                _log.warning("rebuilding the indexes of %s: %s", self.log_path, exc)
                self.recover()
        return 0

    cdef int _park(self) except -1:
        """Close the files of an idle evictable segment; its state stays known. Called with
        the cache's lock held."""
        _cache_remove(self)
        if self.read_only:
            # Another program owns the files and may change them: read them afresh.
            self._state_loaded = False
            self._oidx_entries = self._tidx_entries = -1
        else:
            self._oidx_entries = self._oidx.entries
            self._tidx_entries = self._tidx.entries
        self._parking = True
        try:
            self._close_files(True)
        finally:
            self._parked = True
            self._parking = False
        return 0

    @property
    def evictable(self):
        """Whether the open-segment cache may close this segment's files while it is idle
        (they are opened again on the next use). True for a log's inactive segments; an
        active segment keeps its files open."""
        return self._evictable

    @evictable.setter
    def evictable(self, bint value):
        with _cache_lock:
            self._set_evictable(value)

    cdef _set_evictable(self, bint value):
        if value == self._evictable:
            return
        self._evictable = value
        if value:
            if not self.closed and not self._parked:
                _cache_add(self)
        else:
            _cache_remove(self)
            self._touch_files()

    @property
    def files_open(self):
        """Whether the ``.log`` and its indexes are open now (False when closed or parked)."""
        return not self.closed and not self._parked

    cdef int _need_state(self) except -1:
        if not self._state_loaded:
            self._touch_files()
        return 0

    @property
    def next_offset(self):
        """One past the last offset in the segment (its base offset when empty)."""
        self._need_state()
        return self._next_offset

    @property
    def max_timestamp_so_far(self):
        self._need_state()
        return self._max_ts

    @property
    def offset_of_max_timestamp(self):
        self._need_state()
        return self._off_max_ts

    @property
    def rolling_based_timestamp(self):
        self._need_state()
        return self._rolling_ts

    @property
    def offset_index(self):
        """The ``.index`` (opens a parked segment's files)."""
        self._touch_files()
        return self._oidx

    @property
    def time_index(self):
        """The ``.timeindex`` (opens a parked segment's files)."""
        self._touch_files()
        return self._tidx

    # -- mapping -------------------------------------------------------------------------------

    cdef int _map(self, Py_ssize_t length) except -1:
        """Make ``self.mapping`` cover at least ``length`` bytes (a new mapping if needed)."""
        cdef Mapping m
        cdef void *addr
        if self.mapping is not None and <size_t>length <= self.mapping.reserved:
            self.mapping.length = length
            return 0
        if <size_t>length > <size_t>self.reserve:
            self.reserve = length * 2
        addr = mmap(NULL, self.reserve, PROT_READ, MAP_SHARED, self.fd, 0)
        if addr == MAP_FAILED:
            err = errno
            exc = _errors.make("storage", f"cannot map {self.log_path}: {strerror(err).decode()}",
                               path=self.log_path)
            exc.errno = err          # ENOMEM (too many mappings): the cache may free some
            raise exc
        m = Mapping.__new__(Mapping)
        m.addr = <uint8_t *>addr
        m.reserved = self.reserve
        m.length = length
        if self.mapping is not None:
            self.old_mappings.append(self.mapping)
        self.mapping = m
        return 0

    cdef inline const uint8_t *_data(self):
        return self.mapping.addr

    def live_views(self):
        """How many exported views of this segment's data are alive."""
        self.old_mappings = [m for m in self.old_mappings if (<Mapping>m).exports > 0]
        cdef Py_ssize_t n = self.mapping.exports if self.mapping is not None else 0
        for m in self.old_mappings:
            n += (<Mapping>m).exports
        return n

    cdef int _refuse_if_viewed(self, str action) except -1:
        cdef Py_ssize_t n = self.live_views()
        if n:
            raise BufferError(f"cannot {action} {self.log_path}: {n} exported view(s) of its data "
                              "are still alive; release them first")
        return 0

    # -- state ---------------------------------------------------------------------------------

    cdef int _load_tail_state(self) except -1:
        """next_offset from the last index entry plus a header scan; max timestamp from the
        time index's last entry (Kafka's lazy ``maxTimestampAndOffsetSoFar``)."""
        cdef seglog_batch h
        cdef int st
        cdef Py_ssize_t pos = 0
        cdef const uint8_t *buf = self._data()
        self._next_offset = self.base_offset
        self._state_loaded = True
        if self._oidx.entries:
            off, p = self._oidx.last_entry
            if 0 <= p < self.size:
                pos = p
        while True:
            st = _head_at(buf, pos, self.size, &h, 0)
            if st != BATCH_OK:
                break
            if h.last_offset + 1 > self._next_offset:
                self._next_offset = h.last_offset + 1
            if pos == 0:
                self._rolling_ts = h.max_ts
            pos += h.size
        # Kafka's loadLargestTimestamp: the time index's last entry, then the batches after it
        # (a crash, or a full disk at close, can leave it without the final max entry).
        pos = 0
        if self._tidx.entries:
            ts, off = self._tidx.last_entry
            self._max_ts = ts
            self._off_max_ts = off
            _, p = self._oidx.lookup(off)
            if 0 <= p < self.size:
                pos = p
        while _head_at(buf, pos, self.size, &h, 0) == BATCH_OK:
            if h.max_ts > self._max_ts:
                self._max_ts = h.max_ts
                self._off_max_ts = h.last_offset
            pos += h.size
        if self.size and self._rolling_ts < 0:
            st = _head_at(buf, 0, self.size, &h, 0)
            if st == BATCH_OK:
                self._rolling_ts = h.max_ts
        return 0

    @property
    def largest_timestamp(self):
        """Max record timestamp in the segment (-1 if none): Kafka's ``largestTimestamp`` uses
        the time index's last entry; the file's mtime stands in when no batch has one."""
        self._need_state()
        if self._max_ts >= 0:
            return self._max_ts
        return int(os.stat(self.log_path).st_mtime * 1000)

    @property
    def index_full(self):
        self._enter()
        try:
            return self._oidx.is_full or self._tidx.is_full
        finally:
            self._leave()

    def can_convert_to_relative_offset(self, int64_t offset):
        return 0 <= offset - self.base_offset <= INT32_MAX

    def fileno(self):
        """The ``.log`` file descriptor (for ``os.pread`` of whole batches). An evictable
        segment's descriptor may be closed by the open-segment cache once the caller lets other
        threads run or opens other segments: keep one with :meth:`dup_fileno` instead."""
        if self.closed:
            raise ValueError(f"segment {self.log_path} is closed")
        self._enter()
        self._leave()
        return self.fd

    def dup_fileno(self):
        """A new descriptor of the ``.log`` (``os.dup``), the caller's to close: stays valid
        whatever happens to the segment (for ``os.sendfile`` later)."""
        if self.closed:
            raise ValueError(f"segment {self.log_path} is closed")
        self._enter()
        try:
            return os.dup(self.fd)
        finally:
            self._leave()

    def __len__(self):
        return self.size

    def __repr__(self):
        nxt = self._next_offset if self._state_loaded else "?"
        return (f"Segment({self.log_path!r}, base_offset={self.base_offset}, size={self.size}, "
                f"next_offset={nxt})")

    # -- append --------------------------------------------------------------------------------

    def append(self, const uint8_t[::1] batches, int64_t assign_from=-1,
               int32_t leader_epoch=NO_PARTITION_LEADER_EPOCH, bint verify_crc=True,
               AppendRules rules=None, int64_t roll_jitter_ms=0):
        """Append whole v2 batches from ``batches`` (any buffer) and return an AppendInfo.

        ``assign_from >= 0`` assigns offsets (leader): batch i gets base offset
        ``assign_from + records before it``, i.e. offsets are assigned contiguously from the
        batches' own offset ranges. Otherwise (follower) the batches' offsets are kept and must
        be above ``next_offset - 1``. ``leader_epoch >= 0`` is written into every batch.
        Structure and (with ``verify_crc``) CRCs are checked before anything is written.

        With ``rules`` (the log's :class:`AppendRules`) each batch must also pass the log's
        checks (``RecordListTooLargeError``, ``InvalidRecordError``, ``RecordTooLargeError``),
        and when Kafka's ``shouldRoll`` says this append belongs in a new segment (``segment.ms``
        less ``roll_jitter_ms`` for the age) nothing is written and the reason is returned
        instead (``ROLL_SIZE`` ...); ``ROLL_CHECK_WALL_AGE`` when only the segment's wall-clock
        age is left to decide, which the caller knows (append again without ``rules`` if young).
        """
        self._enter()
        try:
            return self._append_(batches, assign_from, leader_epoch, verify_crc, rules, roll_jitter_ms)
        finally:
            self._leave()

    cdef object _roll_reason(self, AppendRules rules, Py_ssize_t n, int64_t max_ts, int64_t last,
                             int64_t roll_jitter_ms):
        """Kafka's ``shouldRoll`` for an append of ``n`` bytes up to offset ``last`` whose
        largest timestamp is ``max_ts``: None, or why the segment must roll first."""
        cdef bint fits = 0 <= last - self.base_offset <= INT32_MAX
        if self.size > 0:
            if self.size > rules.segment_bytes - n:
                return ROLL_SIZE
            if index_is_full(self._oidx) or index_is_full(self._tidx):
                return ROLL_INDEX_FULL
            if not fits:
                return ROLL_OFFSET_OVERFLOW
            # Kafka's timeWaitedForRoll: the incoming batch's timestamp against the segment's
            # first batch timestamp, or wall time since creation when there is none.
            if self._rolling_ts < 0:
                return ROLL_CHECK_WALL_AGE
            if max_ts - self._rolling_ts > rules.max_segment_ms - roll_jitter_ms:
                return ROLL_AGE
        elif not fits or index_is_full(self._oidx) or index_is_full(self._tidx):
            return ROLL_OFFSET_OVERFLOW
        return None

    cdef _append_(self, const uint8_t[::1] batches, int64_t assign_from=-1,
                  int32_t leader_epoch=NO_PARTITION_LEADER_EPOCH, bint verify_crc=True,
                  AppendRules rules=None, int64_t roll_jitter_ms=0):
        if self.closed:
            raise ValueError(f"segment {self.log_path} is closed")
        if self.read_only:
            raise PermissionError(f"segment {self.log_path} is open read-only")
        cdef Py_ssize_t n = batches.shape[0]
        if n == 0:
            raise ValueError("nothing to append: the buffer is empty")
        cdef const uint8_t *src = &batches[0]
        cdef Py_ssize_t pos = 0, count = 0, bad_at = -1
        cdef seglog_batch h
        cdef int st
        cdef int64_t next_off = assign_from if assign_from >= 0 else -1
        cdef int64_t first = -1, last = -1, max_ts = -1, off_max = -1, delta
        cdef int64_t records = 0, bad_first = 0, bad_last = 0
        # Index entries this append will add: Kafka's rule applied batch by batch (an entry at a
        # batch once more than index.interval.bytes were appended since the last entry).
        cdef Py_ssize_t since = self.bytes_since_last_index_entry, entries = 0
        # Pass 1: validate everything and compute offsets; nothing is written on error.
        while pos < n:
            # The v2 checksum only: a legacy entry is refused whole just below.
            st = _head_at(src, pos, n, &h, BATCH_CRC_V2 if verify_crc else 0)
            if st != BATCH_OK:
                raise _errors.corrupt(f"cannot append to {self.log_path}: " + batch_error(st, &h), pos)
            if rules is not None:
                _apply_rules(rules, &h, pos, assign_from >= 0)
            if h.magic != 2:
                raise _errors.make("invalid_record",
                                   f"cannot append a magic {h.magic} batch to {self.log_path}: "
                                   "only RecordBatch v2 is written", position=pos)
            delta = h.last_offset - h.base_offset
            if assign_from >= 0:
                h.base_offset = next_off
                h.last_offset = next_off + delta
                next_off = h.last_offset + 1
            elif h.base_offset < self._next_offset or (last >= 0 and h.base_offset <= last):
                raise _errors.make("invalid_record",
                                   f"out-of-order offsets appending to {self.log_path}: batch at "
                                   f"position {pos} starts at offset {h.base_offset}, the log already "
                                   f"holds up to {max(last, self._next_offset - 1)}",
                                   position=pos, offset=h.base_offset)
            if bad_at < 0 and (h.base_offset - self.base_offset < 0
                               or h.last_offset - self.base_offset > INT32_MAX):
                # Refused below unless the log rolls first (its offset-overflow rule).
                bad_at = pos
                bad_first = h.base_offset
                bad_last = h.last_offset
            if first < 0:
                first = h.base_offset
            last = h.last_offset
            if h.max_ts > max_ts:
                max_ts = h.max_ts
                off_max = h.last_offset
            records += h.count
            count += 1
            if since > self.index_interval_bytes:
                entries += 1
                since = 0
            since += h.size
            pos += h.size
        if rules is not None:
            reason = self._roll_reason(rules, n, max_ts, last, roll_jitter_ms)
            if reason is not None:
                return reason
        if bad_at >= 0:
            raise _errors.make("invalid_record",
                               f"offsets {bad_first}..{bad_last} cannot be stored relative "
                               f"to the base offset {self.base_offset} of {self.log_path} (roll first)",
                               offset=bad_first)
        if entries:
            # Index entries go in after the data; a full disk must fail the append before it.
            self._oidx.reserve(entries)
            self._tidx.reserve(entries)
        self._write(src, n, count, assign_from, leader_epoch)
        cdef Py_ssize_t start_pos = self.size
        self.size += n
        if self.allocated_to < self.size:
            self.allocated_to = self.size
        self._map(self.size)
        self._next_offset = last + 1
        if self._rolling_ts < 0:
            self._rolling_ts = max_ts
        if entries:
            self._index_batches(src, n, start_pos, assign_from)
        else:
            self.bytes_since_last_index_entry = since
        if max_ts > self._max_ts:
            self._max_ts = max_ts
            self._off_max_ts = off_max
        cdef AppendInfo info = AppendInfo.__new__(AppendInfo)
        info.first_offset = first
        info.last_offset = last
        info.max_timestamp = max_ts
        info.offset_of_max_timestamp = off_max
        info.position = start_pos
        info.size = n
        info.batches = <int32_t>count
        info.records = records
        return info

    cdef int _index_batches(self, const uint8_t *src, Py_ssize_t n, Py_ssize_t start_pos,
                            int64_t assign_from) except -1:
        """Index the batches just appended at ``start_pos`` one by one, as Kafka's
        ``LogSegment.append`` indexes each batch it is given (and ``recover`` rebuilds them): when
        more than ``index_interval_bytes`` were appended since the last entry, an offset-index
        entry (the batch's last offset, its position) and a time-index entry (the largest
        timestamp so far, including this batch, and its offset). A full index takes no more
        entries: the log rolls before the next append."""
        cdef Py_ssize_t pos = 0
        cdef seglog_batch h
        cdef int64_t next_off = assign_from, delta
        cdef int64_t max_so_far = self._max_ts, off_of_max = self._off_max_ts
        while pos < n:
            _head_at(src, pos, n, &h, 0)
            if assign_from >= 0:
                delta = h.last_offset - h.base_offset
                h.last_offset = next_off + delta
                next_off = h.last_offset + 1
            if h.max_ts > max_so_far:
                max_so_far = h.max_ts
                off_of_max = h.last_offset
            if self.bytes_since_last_index_entry > self.index_interval_bytes and not (
                    self._oidx.is_full or self._tidx.is_full):
                self._oidx.append(h.last_offset, start_pos + pos)
                self._tidx.maybe_append(max_so_far, off_of_max)
                self.bytes_since_last_index_entry = 0
            self.bytes_since_last_index_entry += h.size
            pos += h.size
        return 0

    cdef int _write(self, const uint8_t *src, Py_ssize_t n, Py_ssize_t count, int64_t assign_from,
                    int32_t leader_epoch) except -1:
        """pwritev the batches at the end of the file; headers patched through scratch space."""
        # The usual append (a few batches) patches its headers on the stack: no allocation.
        cdef uint8_t small_scratch[16 * IOV_SMALL]
        cdef iovec small_iov[2 * IOV_SMALL]
        cdef uint8_t *scratch = small_scratch
        cdef iovec *iov = small_iov
        cdef Py_ssize_t pos = 0, k, want, done
        cdef int64_t next_off = assign_from, delta
        cdef int32_t length
        cdef ssize_t r
        cdef long file_pos = self.size
        cdef int err = 0
        cdef int fd = self.fd
        cdef Py_ssize_t nb = min(count, IOV_BATCH)
        if self.allocate_step and self.size + n > self.allocated_to:
            self._allocate(self.size + n)
        if nb > IOV_SMALL:
            scratch = <uint8_t *>malloc(16 * nb)
            iov = <iovec *>malloc(sizeof(iovec) * 2 * nb)
            if scratch == NULL or iov == NULL:
                free(scratch)
                free(iov)
                raise MemoryError()
        try:
            while pos < n:
                # Fill up to IOV_BATCH batches' worth of iovecs.
                k = 0
                want = 0
                while pos < n and k < nb:
                    length = kb_load_i32(src + pos + 8)
                    memcpy(scratch + 16 * k, src + pos, 16)
                    if assign_from >= 0:
                        delta = kb_load_i32(src + pos + 23)
                        kb_store_u64(scratch + 16 * k, <uint64_t>next_off)
                        next_off += delta + 1
                    if leader_epoch >= 0:
                        kb_store_u32(scratch + 16 * k + 12, <uint32_t>leader_epoch)
                    iov[2 * k].iov_base = scratch + 16 * k
                    iov[2 * k].iov_len = 16
                    iov[2 * k + 1].iov_base = <void *>(src + pos + 16)
                    iov[2 * k + 1].iov_len = length + LOG_OVERHEAD - 16
                    want += length + LOG_OVERHEAD
                    pos += length + LOG_OVERHEAD
                    k += 1
                done = 0
                with nogil:
                    while done < want:
                        r = pwritev(fd, iov, <int>(2 * k), file_pos)
                        if r < 0:
                            if errno == EINTR:
                                continue
                            err = errno
                            break
                        done += r
                        file_pos += r
                        if done < want:
                            _advance(iov, 2 * k, r)
                if err:
                    break
        finally:
            if scratch != small_scratch:
                free(scratch)
                free(iov)
        if err:
            # Leave no partial batch behind: cut the file back to where this append began.
            ftruncate(fd, self.size)
            _storage_error(f"write to {self.log_path} failed at position {file_pos}: "
                           f"{strerror(err).decode()} (append of {n} bytes rolled back)",
                           self.log_path, position=file_pos)
        return 0

    cdef int _allocate(self, Py_ssize_t need) except -1:
        """Reserve blocks from ``allocated_to`` to the next multiple of the step at or past
        ``need``, capped at the segment size. A refusal (unsupported, or a full disk) only
        stops reserving for this segment: the write itself decides whether the data fits."""
        cdef Py_ssize_t step = self.allocate_step
        cdef Py_ssize_t end = (need + step - 1) // step * step
        cdef Py_ssize_t cap = max(need, self.segment_bytes)
        cdef int err, fd = self.fd
        cdef long start = self.allocated_to
        if end > cap:
            end = cap
        with nogil:
            err = seglog_prealloc(fd, start, end - start)
        if err:
            self.allocate_step = 0
        else:
            self.allocated_to = end
        return 0

    def release_allocated(self):
        """Give back the blocks reserved past the end of file (truncate to its own length)."""
        if self.fd < 0 or self.allocated_to <= self.size:
            return
        if ftruncate(self.fd, self.size) != 0:
            _storage_error(f"cannot release the blocks reserved past the end of {self.log_path}: "
                           f"{strerror(errno).decode()}", self.log_path, position=self.size)
        self.allocated_to = self.size

    # -- read ----------------------------------------------------------------------------------

    def view(self, Py_ssize_t position=0, Py_ssize_t length=-1):
        """A zero-copy memoryview of ``[position, position + length)`` of the log data."""
        self._enter()
        try:
            return self._view_(position, length)
        finally:
            self._leave()

    cdef _view_(self, Py_ssize_t position=0, Py_ssize_t length=-1):
        if self.closed:
            raise ValueError(f"segment {self.log_path} is closed")
        if length < 0:
            length = self.size - position
        if position < 0 or length < 0 or position + length > self.size:
            raise ValueError(f"range {position}+{length} is outside {self.log_path} "
                             f"({self.size} bytes)")
        return memoryview(self.mapping)[position:position + length]

    def translate_offset(self, int64_t offset, Py_ssize_t start_position=0):
        """The BatchInfo (position included) of the first batch whose last offset is >= ``offset``, found
        through the offset index then a scan of batch headers; None if no batch holds it."""
        self._enter()
        try:
            return self._translate_offset_(offset, start_position)
        finally:
            self._leave()

    cdef _translate_offset_(self, int64_t offset, Py_ssize_t start_position=0):
        cdef seglog_batch h
        cdef Py_ssize_t pos = self._find_batch(offset, start_position, &h)
        if pos < 0:
            return None
        return make_header(self._data() + pos, pos, &h)

    cdef Py_ssize_t _find_batch(self, int64_t offset, Py_ssize_t start_position,
                                seglog_batch *h) except -2:
        """Position of the first batch whose last offset is >= ``offset`` (its header in
        ``h``), through the offset index then a header walk; -1 if no batch holds it."""
        cdef Py_ssize_t pos = start_position
        cdef int64_t after
        if self.closed:
            raise ValueError(f"segment {self.log_path} is closed")
        if offset >= self._next_offset:
            return -1
        cdef const uint8_t *buf = self._data()
        if pos == 0:
            pos = offset_index_position(self._oidx, offset, &after)
            # The next entry starts an append whose last offset is above ``offset``: when its
            # first batch starts at or below ``offset``, the batch wanted is there or after
            # it, and the walk starts there (one header read instead of two, often both outside
            # the cache, when each append is one batch larger than index.interval.bytes).
            if (after > pos and _head_at(buf, after, self.size, h, 0) == BATCH_OK
                    and h.base_offset <= offset):
                pos = after
        while True:
            if _head_at(buf, pos, self.size, h, 0) != BATCH_OK:
                return -1
            if h.last_offset >= offset:
                return pos
            pos += h.size

    def fetch_span(self, int64_t offset, Py_ssize_t max_bytes, int64_t upper_bound, bint min_one_batch):
        """The fetch loop's step in this segment: ``(start, end, stop)`` for the whole batches
        from the one holding ``offset`` that fit ``max_bytes`` (the first one whole if
        ``min_one_batch``) and hold offsets below ``upper_bound``; ``stop`` when the byte limit
        or the bound ended them here, so no later segment is read. None if no batch of this
        segment holds ``offset`` or a later one."""
        cdef Py_ssize_t end
        cdef bint stop
        cdef Py_ssize_t start = segment_fetch_span(self, offset, max_bytes, upper_bound, min_one_batch,
                                                   &end, &stop)
        if start < 0:
            return None
        return start, end, stop

    cdef Py_ssize_t _fetch_span_(self, int64_t offset, Py_ssize_t max_bytes, int64_t upper_bound,
                                 bint min_one_batch, Py_ssize_t *end, bint *stop) except -2:
        cdef seglog_batch h
        cdef Py_ssize_t start = self._find_batch(offset, 0, &h), max_position = self.size, bound
        if start < 0:
            return -1
        if upper_bound < self._next_offset:
            bound = self._find_batch(upper_bound, 0, &h)
            if bound >= 0:
                max_position = bound
        end[0] = self._batch_end_(start, max_bytes, max_position, min_one_batch)
        stop[0] = end[0] < max_position or max_position < self.size
        return start

    cdef Py_ssize_t _position_of(self, int64_t offset) except -2:
        found = self.translate_offset(offset)
        return -1 if found is None else (<BatchHeader>found).position

    def read(self, int64_t start_offset, Py_ssize_t max_bytes, Py_ssize_t max_position=-1,
             bint min_one_batch=True):
        """Whole batches from the one holding ``start_offset``: a memoryview (or None when the
        segment has nothing at or after it). At most ``max_bytes`` unless ``min_one_batch`` and
        the first batch alone is larger; never past ``max_position``."""
        self._enter()
        try:
            return self._read_(start_offset, max_bytes, max_position, min_one_batch)
        finally:
            self._leave()

    cdef _read_(self, int64_t start_offset, Py_ssize_t max_bytes, Py_ssize_t max_position=-1,
                bint min_one_batch=True):
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        if max_position < 0 or max_position > self.size:
            max_position = self.size
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        cdef BatchHeader first = <BatchHeader>found
        cdef Py_ssize_t start = first.position
        if start >= max_position:
            return None
        cdef Py_ssize_t end = self.batch_end(start, max_bytes, max_position, min_one_batch)
        if end <= start:
            return None
        return memoryview(self.mapping)[start:end]

    def batch_end(self, Py_ssize_t start, Py_ssize_t max_bytes, Py_ssize_t max_position,
                  bint min_one_batch):
        """End position of the whole batches from ``start`` that fit ``max_bytes`` and stop at
        ``max_position`` (the fetch loop's inner step; headers only)."""
        self._enter()
        try:
            return self._batch_end_(start, max_bytes, max_position, min_one_batch)
        finally:
            self._leave()

    cdef Py_ssize_t _batch_end_(self, Py_ssize_t start, Py_ssize_t max_bytes, Py_ssize_t max_position,
                                bint min_one_batch):
        cdef const uint8_t *buf = self._data()
        cdef Py_ssize_t pos, limit
        if max_position < 0 or max_position > self.size:
            max_position = self.size
        limit = start + max_bytes
        if max_bytes < NOGIL_WALK_BYTES:
            # A short walk: releasing the GIL would cost more than the walk (a random
            # one-batch read).
            return _walk_batches(buf, start, limit, max_position, min_one_batch)
        with nogil:
            pos = _walk_batches(buf, start, limit, max_position, min_one_batch)
        return pos

    def batches(self, Py_ssize_t start_position=0, bint verify_crc=False):
        """BatchInfo for every batch from ``start_position`` (headers only)."""
        self._enter()
        try:
            return self._batches_(start_position, verify_crc)
        finally:
            self._leave()

    cdef _batches_(self, Py_ssize_t start_position=0, bint verify_crc=False):
        cdef const uint8_t *buf = self._data()
        cdef Py_ssize_t pos = start_position
        cdef seglog_batch h
        cdef int st
        cdef list out = []
        while True:
            st = _head_at(buf, pos, self.size, &h, BATCH_CRC_V2 if verify_crc else 0)
            if st == BATCH_END:
                break
            if st != BATCH_OK:
                raise _errors.corrupt(f"{self.log_path}: " + batch_error(st, &h), pos, path=self.log_path)
            out.append(make_header(buf + pos, pos, &h))
            pos += h.size
        return out

    def transaction_batches(self, Py_ssize_t start_position=0):
        """BatchInfo of the v2 batches from ``start_position`` that carry a producer id and are
        transactional or control: what the transaction state is rebuilt from. A header walk
        without CRC checks; stops at a torn tail, raises on a malformed header."""
        self._enter()
        try:
            return self._transaction_batches_(start_position)
        finally:
            self._leave()

    cdef _transaction_batches_(self, Py_ssize_t start_position=0):
        cdef const uint8_t *buf = self._data()
        cdef Py_ssize_t pos = start_position, end = self.size
        cdef seglog_batch h
        cdef int st = BATCH_OK
        cdef list out = []
        if pos < 0 or pos > end:
            raise ValueError(f"start position {pos} is outside {self.log_path} ({end} bytes)")
        while True:
            with nogil:
                pos = _next_txn_batch(buf, pos, end, &h, &st)
            if st == BATCH_END or batch_is_torn(st):
                break
            if st != BATCH_OK:
                raise _errors.corrupt(f"{self.log_path}: " + batch_error(st, &h), pos, path=self.log_path)
            out.append(make_header(buf + pos, pos, &h))
            pos += h.size
        return out

    cdef Py_ssize_t _timestamp_walk_start(self, int64_t timestamp, int64_t starting_offset) except -1:
        """Where the header walk of a timestamp search starts: the time index gives an offset
        whose batch cannot be past the answer, the offset index that offset's position."""
        cdef int64_t off = time_index_offset(self._tidx, timestamp)
        return offset_index_position(self._oidx, max(off, starting_offset))

    def find_offset_by_timestamp(self, int64_t timestamp, int64_t starting_offset=0):
        """The BatchInfo (position included) of the first batch at or after ``starting_offset`` whose max
        timestamp is >= ``timestamp`` (Kafka's ``LogSegment.findOffsetByTimestamp`` before the
        record-level step, which the caller does on that one batch); None if none."""
        self._enter()
        try:
            return self._find_offset_by_timestamp_(timestamp, starting_offset)
        finally:
            self._leave()

    cdef _find_offset_by_timestamp_(self, int64_t timestamp, int64_t starting_offset=0):
        cdef Py_ssize_t p = self._timestamp_walk_start(timestamp, starting_offset)
        cdef const uint8_t *buf = self._data()
        cdef seglog_batch h
        while _head_at(buf, p, self.size, &h, 0) == BATCH_OK:
            if h.max_ts >= timestamp and h.last_offset >= starting_offset:
                return make_header(buf + p, p, &h)
            p += h.size
        return None

    def first_at_or_after(self, int64_t timestamp, int64_t starting_offset=0, int64_t bound=INT64_MAX):
        """``(offset, timestamp)`` of the first record at or after ``starting_offset`` and below
        ``bound`` whose timestamp is >= ``timestamp``, or None: Kafka's
        ``LogSegment.findOffsetByTimestamp`` whole, the index step of
        :meth:`find_offset_by_timestamp` and then the records of the batches it finds, in one
        call. Compressed and legacy batches are decoded (``records.first_at_or_after``)."""
        self._enter()
        try:
            return self._first_at_or_after_(timestamp, starting_offset, bound)
        finally:
            self._leave()

    cdef _first_at_or_after_(self, int64_t timestamp, int64_t starting_offset=0, int64_t bound=INT64_MAX):
        if self.closed:
            raise ValueError(f"segment {self.log_path} is closed")
        cdef Py_ssize_t p = self._timestamp_walk_start(timestamp, starting_offset)
        cdef const uint8_t *buf = self._data()
        cdef seglog_batch h
        cdef int64_t found_off = 0, found_ts = 0
        cdef int st
        while _head_at(buf, p, self.size, &h, 0) == BATCH_OK:
            if h.base_offset >= bound:
                return None
            if h.max_ts >= timestamp and h.last_offset >= starting_offset:
                st = _first_uncompressed(buf + p, h.size, timestamp, starting_offset, bound, True,
                                         &found_off, &found_ts)
                if st == 1:
                    return found_off, found_ts
                if st < 0:
                    with self.view(p, h.size) as v:
                        found = _records_first_at_or_after(v, timestamp, min_offset=starting_offset,
                                                           max_offset=bound)
                    if found is not None:
                        return found
            p += h.size
        return None

    # -- recovery and truncation ---------------------------------------------------------------

    def recover(self, bint collect_batches=False, Py_ssize_t max_batch_size=-1):
        """Kafka's ``LogSegment.recover``: reset the indexes, validate every batch (structure,
        CRC, relative offsets, increasing offsets), rebuild both indexes, truncate the file at
        the first invalid byte. Returns a RecoveryResult (with per-batch BatchInfo when
        ``collect_batches``, for the producer-state rebuild)."""
        self._enter()
        try:
            return self._recover_(collect_batches, max_batch_size)
        finally:
            self._leave()

    cdef _recover_(self, bint collect_batches=False, Py_ssize_t max_batch_size=-1):
        if self.read_only:
            raise PermissionError(f"cannot recover {self.log_path}: opened read-only")
        self._refuse_if_viewed("recover")
        try:
            return self._recover(collect_batches, max_batch_size)
        except OSError:
            # A storage error (full disk) mid-rebuild: leave no sparse preallocated index tail,
            # which tmpfs cannot even read back while full.
            for idx in (self._oidx, self._tidx):
                try:
                    idx.trim_to_valid_size()
                except OSError:
                    pass
            raise

    def _recover(self, bint collect_batches, Py_ssize_t max_batch_size):
        # Kafka's reset(): no entries, and room for them again (a cleanly closed segment's
        # indexes were trimmed to their entries); trimmed again at the end, as Kafka does.
        for idx in (self._oidx, self._tidx):
            idx.truncate()
            idx.resize(idx.max_index_size)
        cdef const uint8_t *buf = self._data()
        cdef Py_ssize_t pos = 0, last_index_pos = 0
        cdef seglog_batch h
        cdef int st
        cdef int64_t prev_last = self.base_offset - 1
        cdef int32_t epoch = -1
        cdef RecoveryResult res = RecoveryResult.__new__(RecoveryResult)
        res.epoch_starts = []
        res.batch_infos = [] if collect_batches else None
        res.reason = None
        self._max_ts = -1
        self._off_max_ts = self.base_offset
        self._rolling_ts = -1
        while True:
            st = _head_at(buf, pos, self.size, &h, BATCH_CRC_ALL)
            if st == BATCH_END:
                break
            if st != BATCH_OK:
                res.reason = f"at position {pos}: {batch_error(st, &h)}"
                break
            if h.base_offset <= prev_last or h.base_offset < self.base_offset:
                res.reason = (f"offset {h.base_offset} at position {pos} does not follow the previous "
                              f"batch's last offset {prev_last}")
                break
            if h.last_offset - self.base_offset > INT32_MAX:
                res.reason = f"offset {h.last_offset} at position {pos} is out of this segment's range"
                break
            if 0 <= max_batch_size < h.size:
                res.reason = f"batch of {h.size} bytes at position {pos} exceeds {max_batch_size}"
                break
            if collect_batches:
                try:
                    res.batch_infos.append(make_header(buf + pos, pos, &h))
                except Exception as exc:  # a legacy wrapper whose inner set cannot be read
                    res.reason = f"unreadable compressed message at position {pos}: {exc}"
                    break
            if pos == 0:
                self._rolling_ts = h.max_ts
            if h.max_ts > self._max_ts:
                self._max_ts = h.max_ts
                self._off_max_ts = h.last_offset
            if pos - last_index_pos > self.index_interval_bytes:
                self._oidx.append(h.last_offset, pos)
                self._tidx.maybe_append(self._max_ts, self._off_max_ts)
                last_index_pos = pos
            if h.magic == 2 and h.ple > epoch:
                epoch = h.ple
                res.epoch_starts.append((h.ple, h.base_offset))
            prev_last = h.last_offset
            res.batches += 1
            pos += h.size
        res.valid_bytes = pos
        res.truncated_bytes = self.size - pos
        if res.truncated_bytes:
            self._truncate_file(pos)
        self._next_offset = prev_last + 1
        res.next_offset = self._next_offset
        self._tidx.maybe_append(self._max_ts, self._off_max_ts, skip_full_check=True)
        self._oidx.trim_to_valid_size()
        self._tidx.trim_to_valid_size()
        self.bytes_since_last_index_entry = pos - last_index_pos
        return res

    cdef int _truncate_file(self, Py_ssize_t length) except -1:
        if ftruncate(self.fd, length) != 0:
            _storage_error(f"cannot truncate {self.log_path} to {length} bytes: "
                           f"{strerror(errno).decode()}", self.log_path, position=length)
        self.size = length
        self.allocated_to = length
        self.mapping.length = min(<size_t>length, self.mapping.length)
        return 0

    def truncate_to(self, int64_t offset):
        """Remove every batch holding an offset >= ``offset`` (Kafka: ``truncateTo``); returns
        the number of bytes removed. Batches are whole: a batch straddling ``offset`` goes too."""
        self._enter()
        try:
            return self._truncate_to_(offset)
        finally:
            self._leave()

    cdef _truncate_to_(self, int64_t offset):
        if self.read_only:
            raise PermissionError(f"cannot truncate {self.log_path}: opened read-only")
        self._refuse_if_viewed("truncate")
        found = self.translate_offset(offset)
        if found is None:
            return 0
        # As Kafka: the batch holding ``offset`` goes entirely, even if it starts below it,
        # so a truncated follower never keeps offsets >= ``offset`` the leader may not have.
        cdef Py_ssize_t pos = (<BatchHeader>found).position
        cdef Py_ssize_t removed = self.size - pos
        if removed <= 0:
            return 0
        self._oidx.truncate_to((<BatchHeader>found).base_offset)
        self._tidx.truncate_to((<BatchHeader>found).base_offset)
        self._truncate_file(pos)
        self._rescan_after_truncate()
        return removed

    cdef int _rescan_after_truncate(self) except -1:
        cdef const uint8_t *buf = self._data()
        cdef Py_ssize_t pos = 0
        cdef seglog_batch h
        self._next_offset = self.base_offset
        self._max_ts = -1
        self._off_max_ts = self.base_offset
        self._rolling_ts = -1
        while _head_at(buf, pos, self.size, &h, 0) == BATCH_OK:
            if pos == 0:
                self._rolling_ts = h.max_ts
            if h.max_ts > self._max_ts:
                self._max_ts = h.max_ts
                self._off_max_ts = h.last_offset
            self._next_offset = h.last_offset + 1
            pos += h.size
        self.bytes_since_last_index_entry = 0
        if self._oidx.entries:
            self.bytes_since_last_index_entry = self.size - self._oidx.last_entry[1]
        else:
            self.bytes_since_last_index_entry = self.size
        return 0

    def sanity_check(self):
        """Raise if the indexes are not trustworthy (then ``recover()``)."""
        self._enter()
        try:
            return self._sanity_check_()
        finally:
            self._leave()

    cdef _sanity_check_(self):
        self._oidx.sanity_check()
        self._tidx.sanity_check()

    # -- lifecycle -----------------------------------------------------------------------------

    def flush(self):
        """fdatasync the log, msync the indexes (a parked segment's files are opened for it:
        ``fdatasync`` writes back the file's dirty pages whichever descriptor wrote them)."""
        if self.closed or self.read_only:
            return
        self._enter()
        try:
            self._flush_()
        finally:
            self._leave()

    cdef _flush_(self):
        cdef int rc, fd = self.fd
        with nogil:
            rc = fdatasync(fd)
        if rc != 0:
            _storage_error(f"fdatasync of {self.log_path} failed: {strerror(errno).decode()}",
                           self.log_path)
        self._oidx.flush()
        self._tidx.flush()

    def on_become_inactive(self):
        """On roll: the max-timestamp time-index entry, then trim both indexes (Kafka's
        ``onBecomeInactiveSegment``). Nothing to do for a parked segment: it was inactive
        before its files were closed."""
        if self.read_only or self._parked:
            return
        self.release_allocated()
        self.allocate_step = 0
        self._tidx.maybe_append(self._max_ts, self._off_max_ts, skip_full_check=True)
        self._oidx.trim_to_valid_size()
        self._tidx.trim_to_valid_size()

    cdef _close_files(self, bint trim=True):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        for idx in (self._oidx, self._tidx):
            if idx is not None and not idx.closed:
                idx.close(trim=trim and not self.read_only)
        self.mapping = None
        self.old_mappings = []

    cdef _shut(self, bint trim):
        """Close for good: out of the open-segment cache, files closed."""
        _cache_remove(self)
        self._close_files(trim)
        self.closed = True
        self._parked = False

    def close(self):
        """Clean close: max-timestamp entry, trimmed indexes, files closed."""
        with _cache_lock:     # not while the cache parks it
            if self.closed:
                return
            self._refuse_if_viewed("close")
            if not self.read_only and not self._parked:
                self.release_allocated()
                self._tidx.maybe_append(self._max_ts, self._off_max_ts,
                                        skip_full_check=True)
            self._shut(True)

    def close_without_trim(self):
        """Close the files as a crash would leave them (tests; and on error paths)."""
        with _cache_lock:
            if self.closed:
                return
            self._refuse_if_viewed("close")
            self._shut(False)

    def change_suffix(self, str old, str new):
        """Rename every file of this segment from suffix ``old`` to ``new`` (e.g. ``.deleted``).
        The open files and mappings stay valid under the new names; a parked segment opens
        them under the new names."""
        with _cache_lock:
            self._change_suffix(old, new)

    cdef _change_suffix(self, str old, str new):
        prefix = os.path.join(self.dir, filename_prefix(self.base_offset))
        for ext in (".log", ".txnindex"):
            if os.path.exists(prefix + ext + old):
                os.replace(prefix + ext + old, prefix + ext + new)
        for idx, ext in ((self._oidx, ".index"), (self._tidx, ".timeindex")):
            if self._parked or idx is None or idx.closed:
                if os.path.exists(prefix + ext + old):
                    os.replace(prefix + ext + old, prefix + ext + new)
            elif not isinstance(idx, _NoIndex) and os.path.exists(idx.path):
                idx.rename_to(prefix + ext + new)
        self.log_path = prefix + ".log" + new
        self.suffix = new

    def delete(self):
        """Close and remove every file of this segment."""
        with _cache_lock:
            self._delete()

    cdef _delete(self):
        self._refuse_if_viewed("delete")
        prefix = os.path.join(self.dir, filename_prefix(self.base_offset))
        paths = [self.log_path]
        if self._oidx is not None and not self._parked:
            paths += [self._oidx.path, self._tidx.path]
        else:
            paths += [prefix + ".index" + self.suffix, prefix + ".timeindex" + self.suffix]
        paths.append(prefix + ".txnindex" + self.suffix)
        self._shut(False)
        for p in paths:
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __dealloc__(self):
        if self.fd >= 0:
            os.close(self.fd)


# -- for the fetch loop (segment.pxd) ------------------------------------------------------------

cdef int64_t segment_base_offset(object seg) except? -1:
    return (<Segment?>seg).base_offset


cdef int64_t segment_next_offset(object seg) except? -1:
    cdef Segment s = <Segment?>seg
    s._need_state()
    return s._next_offset


cdef Py_ssize_t segment_fetch_span(object seg, int64_t offset, Py_ssize_t max_bytes, int64_t upper_bound,
                                   bint min_one_batch, Py_ssize_t *end, bint *stop) except -2:
    cdef Segment s = <Segment?>seg
    s._enter()
    try:
        return s._fetch_span_(offset, max_bytes, upper_bound, min_one_batch, end, stop)
    finally:
        s._leave()


cpdef object segments_first_at_or_after(list segments, int64_t timestamp, int64_t start, int64_t bound):
    """``(offset, timestamp)`` of the first record at or after ``start`` and below ``bound``
    whose timestamp is >= ``timestamp`` across a log's ``segments`` (oldest first), or None:
    the log-level ListOffsets search in one call. The segments before the one that may hold
    ``start`` are passed over by their successors' base offsets, and those that end at or below
    ``start`` or whose largest timestamp is below ``timestamp`` by their state, without opening
    their files; :meth:`Segment.first_at_or_after` searches the others."""
    cdef Py_ssize_t i = 0
    cdef Segment seg
    while i + 1 < len(segments) and (<Segment?>segments[i + 1]).base_offset <= start:
        i += 1
    while i < len(segments):
        seg = <Segment?>segments[i]
        i += 1
        seg._need_state()
        if seg._next_offset <= start or seg._max_ts < timestamp:
            continue
        seg._enter()
        try:
            found = seg._first_at_or_after_(timestamp, start, bound)
        finally:
            seg._leave()
        if found is not None:
            return found
    return None


# -- the open-segment cache ----------------------------------------------------------------------

#: Descriptors an open segment holds: the ``.log``, and one per index mapping (stdlib ``mmap``
#: keeps a duplicate of the descriptor it mapped).
FDS_PER_SEGMENT = 3
#: Bounds of the default cache size (segments).
MIN_OPEN_SEGMENTS = 8
MAX_OPEN_SEGMENTS = 4096
#: The default cache may hold this fraction of ``RLIMIT_NOFILE`` in descriptors.
OPEN_SEGMENTS_FD_SHARE = 16

_OUT_OF_FILES = (_errno.EMFILE, _errno.ENFILE, _errno.ENOMEM)
_log = logging.getLogger("seglog.segment")
_cache = collections.OrderedDict()       # id(segment) -> weakref, least recently opened first
_cache_lock = threading.RLock()
cdef Py_ssize_t _cache_limit = -1        # -1: the default, derived from RLIMIT_NOFILE
cdef Py_ssize_t _cache_bound = -1        # the bound in force (resolved on first use)
cdef Py_ssize_t _cache_n = 0             # len(_cache)


def default_open_segment_limit():
    """How many inactive segments may keep their files open at once by default: a sixteenth
    of the soft ``RLIMIT_NOFILE`` in descriptors (3 per segment), between 8 and 4096."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return MAX_OPEN_SEGMENTS
    return max(MIN_OPEN_SEGMENTS, min(MAX_OPEN_SEGMENTS,
                                      soft // OPEN_SEGMENTS_FD_SHARE // FDS_PER_SEGMENT))


def open_segment_limit(limit=None):
    """The process-wide bound on inactive segments with open files (the open-segment cache);
    with ``limit``, set it first (``0`` keeps none open between uses; ``None`` leaves it,
    ``-1`` returns to the default derived from ``RLIMIT_NOFILE``). Active segments, one per
    partition, are not counted: they stay open. Returns the bound in force."""
    global _cache_limit, _cache_bound
    if limit is not None:
        limit = int(limit)
        if limit < -1:
            raise ValueError(f"open segment limit must be >= 0 (or -1 for the default), got {limit}")
        _cache_limit = limit
        _cache_bound = -1
        with _cache_lock:
            _cache_shrink(None)
    return _limit()


def open_segments():
    """How many inactive segments have their files open now (in the open-segment cache)."""
    with _cache_lock:
        return sum(1 for ref in _cache.values() if ref() is not None)


cdef Py_ssize_t _limit():
    global _cache_bound
    if _cache_bound < 0:
        _cache_bound = default_open_segment_limit() if _cache_limit < 0 else _cache_limit
    return _cache_bound


cdef _cache_add(Segment seg):
    if not seg._evictable:
        return
    global _cache_n
    with _cache_lock:
        _cache[id(seg)] = weakref.ref(seg)
        _cache.move_to_end(id(seg))
        _cache_n = len(_cache)
        _cache_shrink(seg)


cdef _cache_remove(Segment seg):
    global _cache_n
    with _cache_lock:
        _cache.pop(id(seg), None)
        _cache_n = len(_cache)


cdef bint _idle(Segment seg):
    return seg._busy == 0 and seg.live_views() == 0


cdef _cache_shrink(Segment keep):
    """Park segments, least recently opened first, until the cache fits its bound. A segment
    used since the last look gets a second chance; busy or viewed ones are skipped."""
    global _cache_n
    cdef Py_ssize_t limit = _limit()
    cdef Py_ssize_t looks = 2 * len(_cache) + 1
    cdef Segment seg
    while len(_cache) > limit and looks > 0:
        looks -= 1
        key, ref = _cache.popitem(last=False)
        _cache_n = len(_cache)
        obj = ref()
        if obj is None:
            continue
        seg = <Segment>obj
        if seg is keep or not _idle(seg):
            _cache[key] = ref
            _cache_n = len(_cache)
            continue
        if seg._referenced:
            seg._referenced = False
            _cache[key] = ref
            _cache_n = len(_cache)
            continue
        _park_quietly(seg)


cdef bint _cache_release_idle(Segment keep) except -1:
    """Park every idle segment of the cache (out of descriptors); True if any was."""
    global _cache_n
    cdef bint released = False
    cdef Segment seg
    with _cache_lock:
        for key, ref in list(_cache.items()):
            obj = ref()
            if obj is None:
                _cache.pop(key, None)
                _cache_n = len(_cache)
                continue
            seg = <Segment>obj
            if seg is not keep and _idle(seg):
                _park_quietly(seg)
                released = True
    return released


cdef _park_quietly(Segment seg):
    """Park ``seg`` for the cache: a failure (a storage error trimming an index) must not
    fail the unrelated call that made room; the files are closed whatever happens."""
    try:
        seg._park()
    except Exception as exc:  # noqa: BLE001 - reported, and the segment reopens on next use
        _log.warning("closing the files of %s: %s", seg.log_path, exc)
        try:
            seg._close_files(False)
        except Exception:  # noqa: BLE001
            pass


def out_of_files_error(path, exc):
    """The storage error for ``exc`` (EMFILE, ENFILE or ENOMEM) opening ``path``: names the
    descriptors open, ``RLIMIT_NOFILE`` and how to raise it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        in_use = len(os.listdir("/proc/self/fd"))
    except OSError:
        in_use = -1
    what = ("too many open files" if exc.errno in (_errno.EMFILE, _errno.ENFILE)
            else "out of memory or of memory mappings (vm.max_map_count)")
    err = _errors.make(
        "storage",
        f"cannot open {path}: {what} ({exc.strerror}): the process has about {in_use} "
        f"descriptors open, its limit RLIMIT_NOFILE is {soft} (hard {hard}); each partition "
        f"holds {FDS_PER_SEGMENT} for its active segment. Raise the limit (`ulimit -n`, "
        "LimitNOFILE= in a systemd unit) or use fewer partitions",
        path=path, limit=soft)
    err.errno = exc.errno
    return err


cdef inline void _advance(iovec *iov, Py_ssize_t cnt, ssize_t r) noexcept nogil:
    """Consume ``r`` written bytes from the front of the iovec array (partial pwritev)."""
    cdef Py_ssize_t i = 0
    while i < cnt and r > 0:
        if <size_t>r >= iov[i].iov_len:
            r -= iov[i].iov_len
            iov[i].iov_len = 0
        else:
            iov[i].iov_base = <uint8_t *>iov[i].iov_base + r
            iov[i].iov_len -= r
            r = 0
        i += 1
