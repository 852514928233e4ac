"""Kafka's sparse offset index (``.index``) and time index (``.timeindex``) over stdlib ``mmap``.

Mirrors ``AbstractIndex``, ``OffsetIndex`` and ``TimeIndex`` (``org.apache.kafka.storage.internals.log``).

    offset index entry, 8 bytes, big-endian      time index entry, 12 bytes, big-endian
    +0  int32  relative offset                   +0  int64  timestamp (ms)
    +4  int32  position of the batch in .log     +8  int32  relative offset

    relative offset = offset - base offset of the segment (must fit an int32)

File life (as Kafka): a new file is preallocated to ``floor(max_index_size / entry size)`` zeroed
entries and mapped; the entry count lives in memory; ``close()`` and ``trim_to_valid_size()``
(segment roll) cut the file to its entries, ``resize()`` re-expands it (the active segment on load).

Opening an existing file trusts nothing. The valid entries are the longest prefix that passes:
- an entry past slot 0 with relative offset 0 starts the preallocated zero tail (what a crash leaves
  and Kafka's DumpLogSegments also stops at); every byte from there to the end must be zero;
- a file that is zero throughout holds no entries (Kafka never writes the all-zero entry:
  offset index entry (base, 0) or time index entry (0, base); this index does not either);
- relative offsets are >= 0; offset index offsets strictly increase and positions are >= 0 and never
  decrease; time index timestamps are >= 0 and strictly increase, offsets never decrease;
- the length is a multiple of the entry size.
Anything else is corruption. Opening does not raise for it: the index opens with the valid prefix
and ``sanity_check()`` raises ``corrupt_index`` naming the file, the entry and the fault, so that
segment recovery can rebuild (``truncate()``, then append again).

Crash policy: bytes past the entries of a writable index are kept zero (``truncate_to`` zeroes what
it removes), so that whatever reaches the disk reads back as a valid prefix plus a zero tail. Kafka
does not zero on truncation; after a crash it would read stale entries beyond a truncation point.

Views: ``view()`` (or ``memoryview(index)``) exports the valid entries, read-only. The index counts
live exports and refuses ``resize``, ``trim_to_valid_size``, ``close`` and ``delete`` while any is
alive, with ``BufferError`` (as CPython's ``mmap`` does). A view keeps the byte range it was created
with; entries appended later are not in it, entries truncated later read as zeros.

Thread safety: one writer. Every method runs holding the GIL, so calls from different threads are
serialised; lookups, ``entry()`` and views are therefore safe while another thread appends.
The only GIL-free sections are the validation walk (``__init__``, ``sanity_check``) and large zeroing
in ``truncate_to``; they pin the mapping (``resize``/``close`` raise ``BufferError`` meanwhile) and
touch only bytes that concurrent lookups do not read. ``sanity_check`` must not race the writer
(it would report an entry being appended as stray bytes). The file must not be truncated by
anyone else while mapped (reads past its end fault with SIGBUS).
"""
import errno as _errno
import mmap as _mmap
import os as _os

cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport INT32_MAX, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memset

from seglog._native import _errors

cdef extern from "kafka_index.h" nogil:
    int SEGLOG_OIDX_ENTRY
    int SEGLOG_TIDX_ENTRY
    int SEGLOG_IDX_OK
    int SEGLOG_IDX_TAIL
    int SEGLOG_IDX_BEFORE_BASE
    int SEGLOG_IDX_OFFSET_ORDER
    int SEGLOG_IDX_NEG_POSITION
    int SEGLOG_IDX_POSITION_ORDER
    int SEGLOG_IDX_NEG_TIMESTAMP
    int SEGLOG_IDX_TS_ORDER
    int32_t seglog_ld_i32(const uint8_t *p)
    int64_t seglog_ld_i64(const uint8_t *p)
    void seglog_put_be32(uint8_t *p, uint32_t v)
    void seglog_put_be64(uint8_t *p, uint64_t v)
    int64_t seglog_idx_floor_i32(const uint8_t *p, int64_t n, size_t stride, size_t field, int32_t t)
    int64_t seglog_idx_floor_i64(const uint8_t *p, int64_t n, size_t stride, size_t field, int64_t t)
    int64_t seglog_idx_lower_i32(const uint8_t *p, int64_t hi, size_t stride, size_t field, int32_t t)
    int seglog_oidx_walk(const uint8_t *p, int64_t n, int64_t *stop)
    int seglog_tidx_walk(const uint8_t *p, int64_t n, int64_t *stop)
    int64_t seglog_first_nonzero(const uint8_t *p, int64_t n)

DEFAULT_MAX_INDEX_SIZE = 10485760     # segment.index.bytes
_BACK_CHUNK = 65536                   # bytes of the sparse index file allocated at a time
cdef int64_t _PAGE = _mmap.PAGESIZE


cdef inline int64_t _page_up(int64_t n) noexcept:
    return (n + _PAGE - 1) // _PAGE * _PAGE


# Index mappings are searched, not streamed: a fault brings in its own page only. Without this, the
# first store into a fresh index (its sparse, preallocated file) had the kernel read ahead, zeroing
# megabytes of page cache past it: ~4 ms of CPU per index per new segment on this machine's kernel.
_MADV_RANDOM = getattr(_mmap, "MADV_RANDOM", None)
_SEEK_DATA = getattr(_os, "SEEK_DATA", None)
_SEEK_HOLE = getattr(_os, "SEEK_HOLE", None)
# Walks and zeroing over at least this many bytes release the GIL.
cdef int64_t _NOGIL_BYTES = 65536
cdef uint8_t _EMPTY[1]
cdef char *_FORMAT_B = "B"

include "export.pxi"

cdef enum:
    _KIND_OFFSET = 1
    _KIND_TIME = 2


cdef class _Index:
    """Common part of :class:`OffsetIndex` and :class:`TimeIndex` (Kafka's ``AbstractIndex``)."""

    cdef readonly object path
    cdef readonly int64_t base_offset
    cdef readonly int64_t max_index_size
    cdef readonly bint writable
    # Zero slots found past the entries of an existing file: it was not trimmed, so its writer
    # did not close it (a crash, or a running broker's active segment). 0 for new files.
    cdef readonly int64_t zero_tail_at_open
    cdef int _kind
    cdef int64_t _es          # entry size
    cdef int64_t _rel_at      # where in an entry its int32 relative offset lies
    cdef object _mm           # mmap.mmap, or None while the file is empty or the index closed
    # Our own export of _mm (_p points into it). Held through a pointer: Cython would traverse
    # and clear the `obj` of a Py_buffer stored inline, behind the buffer protocol's back.
    cdef Py_buffer *_bufp
    cdef uint8_t *_p
    cdef int64_t _length      # mapped bytes = file length
    cdef int64_t _cap         # whole entries that fit: _length // _es
    cdef int64_t _n           # valid entries
    cdef int64_t _dirty       # bytes [_dirty, _length) are known to be zero
    cdef int64_t _backed      # bytes [0, _backed) have disk blocks (see _back)
    cdef Py_ssize_t _views
    cdef Py_ssize_t _pins
    cdef bint _open
    cdef bint _inited
    cdef bint _length_changed
    cdef tuple _file_id       # (st_dev, st_ino) of the mapped file

    def __init__(self, path, int64_t base_offset, max_index_size=DEFAULT_MAX_INDEX_SIZE,
                 bint writable=True, int64_t entries=-1):
        """Open (a writable index: create) the index file at ``path``. ``entries`` >= 0 is the
        number of valid entries known from an earlier open of the same unchanged file (a
        segment opened again after its files were closed): the file is then not scanned,
        provided it holds that many entries."""
        cdef bint created = False
        if self._inited:
            raise RuntimeError(f"{type(self).__name__} is already initialised ({self.path})")
        if self._es == 0:
            raise TypeError("_Index is abstract: use OffsetIndex or TimeIndex")
        path = _os.fsdecode(_os.fspath(path))
        if base_offset < 0:
            raise ValueError(f"{path}: base offset {base_offset} is negative")
        max_index_size = int(max_index_size)
        if max_index_size < self._es or max_index_size > INT32_MAX:
            raise ValueError(f"{path}: invalid max index size {max_index_size}: must be between "
                             f"the entry size {self._es} and {INT32_MAX}")
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.writable = writable
        self._inited = True

        if writable and entries >= 0:
            fd = _os.open(path, _os.O_RDWR)   # known to exist: it held ``entries``
        elif writable:
            try:
                fd = _os.open(path, _os.O_RDWR | _os.O_CREAT | _os.O_EXCL, 0o644)
                created = True
            except FileExistsError:
                fd = _os.open(path, _os.O_RDWR)
        else:
            fd = _os.open(path, _os.O_RDONLY)
        try:
            if created:
                try:
                    _os.ftruncate(fd, (max_index_size // self._es) * self._es)
                except BaseException:
                    _os.unlink(path)
                    raise
            st = _os.fstat(fd)
            self._file_id = (st.st_dev, st.st_ino)
            self._map(fd, st.st_size)
            if created:
                valid, problem = 0, None
            elif 0 <= entries <= self._cap:
                valid, problem = entries, None
            else:
                valid, problem = self._scan(fd)
        finally:
            _os.close(fd)
        self._n = valid
        self._open = True
        self._length_changed = created
        # With junk past the valid entries, the whole file is suspect until truncate zeroes it.
        self._dirty = self._length if problem is not None else valid * self._es
        self.zero_tail_at_open = 0 if created or problem is not None else self._cap - valid

    def __dealloc__(self):
        self._p = NULL
        if self._bufp != NULL:
            PyBuffer_Release(self._bufp)
            PyMem_Free(self._bufp)
            self._bufp = NULL
        # The mmap object closes itself when its last reference goes. No trim here: a
        # collected index behaves as a crash would, which the open-time scan handles.

    # ---- mapping ---------------------------------------------------------------------------

    cdef int _map(self, fd, int64_t length) except -1:
        """Map ``length`` bytes of ``fd`` (nothing for an empty file), take our export of the
        new mapping, then drop the old one. mmap() releases the GIL, so a view may have been
        exported meanwhile: checked again right before the swap, which runs without any call
        that could let another thread in; the old mapping is released only once nothing
        points into it."""
        cdef Py_buffer *nb = NULL
        cdef Py_buffer *old = self._bufp
        mm = None
        if length > 0:
            if self.writable:
                mm = _mmap.mmap(fd, length, access=_mmap.ACCESS_WRITE)
            else:
                mm = _mmap.mmap(fd, length, access=_mmap.ACCESS_READ)
            if _MADV_RANDOM is not None:
                mm.madvise(_MADV_RANDOM)
            nb = <Py_buffer *>PyMem_Malloc(sizeof(Py_buffer))
            if nb == NULL:
                mm.close()
                raise MemoryError()
            try:
                PyObject_GetBuffer(mm, nb, PyBUF_WRITABLE if self.writable else PyBUF_SIMPLE)
            except BaseException:
                PyMem_Free(nb)
                mm.close()
                raise
        if self._views or self._pins:
            if nb != NULL:
                PyBuffer_Release(nb)
                PyMem_Free(nb)
                mm.close()
            self._check_unpinned("remap")
        old_mm = self._mm
        self._mm = mm
        self._bufp = nb
        self._p = <uint8_t *>nb.buf if nb != NULL else NULL
        self._length = length
        self._cap = length // self._es
        self._backed = 0
        if old != NULL:
            PyBuffer_Release(old)
            PyMem_Free(old)
        if old_mm is not None:
            old_mm.close()
        return 0

    cdef int _back(self, int64_t end) except -1:
        """Give bytes [0, end) disk blocks before they are written through the mapping. The
        preallocated file is sparse: on a full disk the first store to a hole page would
        raise SIGBUS and kill the process, where an append must fail with a storage error.
        Whole pages are backed: a store faults in its whole page, and where a block is smaller
        than a page (1 KiB ext4 blocks; 64 KiB pages on some arm64 kernels) the fault must find
        every block of the page allocated."""
        cdef int64_t upto
        if end <= self._backed:
            return 0
        upto = min(_page_up(max(end, self._backed + _BACK_CHUNK)), self._length)
        end = min(_page_up(end), self._length)
        fd = _os.open(self.path, _os.O_RDWR | _os.O_CLOEXEC)
        try:
            try:
                _os.posix_fallocate(fd, self._backed, upto - self._backed)
            except OSError:
                upto = end                      # a nearly full disk: just what is needed
                _os.posix_fallocate(fd, self._backed, upto - self._backed)
        except OSError as e:
            raise _errors.make("storage", f"{self.path}: cannot allocate disk space for index entries "
                               f"up to byte {end}: {e.strerror}", path=self.path) from e
        finally:
            _os.close(fd)
        self._backed = upto
        return 0

    def reserve(self, int64_t entries):
        """Make sure the next ``entries`` appends (within the file) cannot fail for lack of
        disk space; raise a storage error now if they would."""
        self._check_writable()
        self._back((self._n + entries) * self._es)

    cdef int _unmap(self) except -1:
        cdef Py_buffer *old = self._bufp
        mm = self._mm
        self._bufp = NULL
        self._p = NULL
        self._mm = None
        self._length = 0
        self._cap = 0
        if old != NULL:
            PyBuffer_Release(old)
            PyMem_Free(old)
        if mm is not None:
            mm.close()
        return 0

    # ---- validation ------------------------------------------------------------------------

    cdef int64_t _first_nonzero_from(self, int64_t start, fd) except -2:
        """First non-zero mapped byte at or after ``start``, or -1. Holes of a sparse file
        (the untouched preallocation) are skipped with SEEK_DATA instead of being read, which
        would fault in and zero a page cache page for each 4 KiB of them."""
        cdef int64_t pos = start, end = self._length, d, h, r
        cdef const uint8_t *p = self._p
        while pos < end:
            d, h = pos, end
            if fd is not None and _SEEK_DATA is not None:
                try:
                    d = _os.lseek(fd, pos, _SEEK_DATA)
                    h = _os.lseek(fd, d, _SEEK_HOLE)
                except OSError as e:
                    if e.errno == _errno.ENXIO:
                        return -1
                    fd = None        # no SEEK_DATA here: read everything
                    d, h = pos, end
                if d < pos:
                    d = pos
                if d >= end:
                    return -1
                if h > end or h <= d:
                    h = end
            if h - d >= _NOGIL_BYTES:
                self._pins += 1
                with nogil:
                    r = seglog_first_nonzero(p + d, h - d)
                self._pins -= 1
            else:
                r = seglog_first_nonzero(p + d, h - d)
            if r >= 0:
                return d + r
            pos = h
        return -1

    cdef tuple _scan(self, fd):
        """Validate the mapped bytes: return (valid entries, problem message or None)."""
        cdef int64_t n = self._cap, stop = 0, nz
        cdef int code = SEGLOG_IDX_OK
        cdef const uint8_t *p = self._p
        cdef int kind = self._kind
        if n > 0:
            if n * self._es >= _NOGIL_BYTES:
                self._pins += 1
                with nogil:
                    if kind == _KIND_OFFSET:
                        code = seglog_oidx_walk(p, n, &stop)
                    else:
                        code = seglog_tidx_walk(p, n, &stop)
                self._pins -= 1
            elif kind == _KIND_OFFSET:
                code = seglog_oidx_walk(p, n, &stop)
            else:
                code = seglog_tidx_walk(p, n, &stop)
        problem = None
        if self._length % self._es != 0:
            problem = (f"file length {self._length} is not a multiple of the entry size {self._es}",
                       None)
        elif code == SEGLOG_IDX_OK or code == SEGLOG_IDX_TAIL:
            nz = self._first_nonzero_from(stop * self._es, fd)
            if nz >= 0:
                problem = (f"byte {nz} (entry {nz // self._es}) is not zero, but the entries end "
                           f"at entry {stop} (a zero relative offset starts the preallocated tail): "
                           f"entries are missing or scrambled", nz // self._es)
            elif stop == 1 and seglog_first_nonzero(p, self._es) < 0:
                stop = 0                                  # zero throughout: no entries
        else:
            problem = (self._describe(code, stop), stop)
        if problem is None:
            return stop, None
        what = "offset index" if kind == _KIND_OFFSET else "time index"
        msg = f"{self.path}: corrupt {what}: {problem[0]}; rebuild it from the log"
        return stop, (msg, problem[1])

    cdef str _describe(self, int code, int64_t i):
        cdef const uint8_t *e = self._p + i * self._es
        cdef const uint8_t *q = e - self._es
        cdef int64_t base = self.base_offset
        if self._kind == _KIND_OFFSET:
            rel, pos = seglog_ld_i32(e), seglog_ld_i32(e + 4)
            if code == SEGLOG_IDX_BEFORE_BASE:
                return f"entry {i} has relative offset {rel} (offset {base + rel}), below the base offset {base}"
            if code == SEGLOG_IDX_OFFSET_ORDER:
                return (f"entry {i} (offset {base + rel}) is not larger than entry {i - 1} "
                        f"(offset {base + seglog_ld_i32(q)})")
            if code == SEGLOG_IDX_NEG_POSITION:
                return f"entry {i} (offset {base + rel}) has a negative position {pos}"
            return (f"entry {i} (offset {base + rel}) has position {pos}, before entry {i - 1}'s "
                    f"position {seglog_ld_i32(q + 4)}")
        ts, rel = seglog_ld_i64(e), seglog_ld_i32(e + 8)
        if code == SEGLOG_IDX_BEFORE_BASE:
            return f"entry {i} has relative offset {rel} (offset {base + rel}), below the base offset {base}"
        if code == SEGLOG_IDX_OFFSET_ORDER:
            return (f"entry {i} (offset {base + rel}) is smaller than entry {i - 1} "
                    f"(offset {base + seglog_ld_i32(q + 8)})")
        if code == SEGLOG_IDX_NEG_TIMESTAMP:
            return f"entry {i} (offset {base + rel}) has a negative timestamp {ts}"
        return (f"entry {i} (timestamp {ts}) is not larger than entry {i - 1} "
                f"(timestamp {seglog_ld_i64(q)})")

    def sanity_check(self):
        """Validate the file as a careful reader must (see the module docstring); raise
        ``corrupt_index`` (``ValueError`` unless the engine installed its class) naming the
        file, the entry and the fault. Unlike Kafka's O(1) check this walks every entry."""
        self._check_open()
        try:
            fd = _os.open(self.path, _os.O_RDONLY)
        except OSError:
            fd = None
        try:
            valid, problem = self._scan(fd)
        finally:
            if fd is not None:
                _os.close(fd)
        if problem is not None:
            raise _errors.make("corrupt_index", problem[0], path=self.path, entry=problem[1])
        if valid != self._n:
            what = "offset index" if self._kind == _KIND_OFFSET else "time index"
            raise _errors.make(
                "corrupt_index",
                f"{self.path}: corrupt {what}: the file holds {valid} valid entries but the index "
                f"has {self._n} (was the file modified by someone else?); rebuild it from the log",
                path=self.path, entry=min(valid, self._n))

    # ---- state checks ----------------------------------------------------------------------

    cdef inline int _check_open(self) except -1:
        if not self._open:
            raise ValueError(f"{type(self).__name__} {self.path} is closed")
        return 0

    cdef int _check_writable(self) except -1:
        self._check_open()
        if not self.writable:
            raise _errors.make("storage", f"{self.path}: index opened read-only", path=self.path)
        return 0

    cdef object _reopen(self, int flags):
        """A descriptor for the mapped file through its path (stdlib mmap does not expose its
        own), refused if the path now names another file: resizing that one would leave our
        mapping past the end of the real file."""
        fd = _os.open(self.path, flags)
        st = _os.fstat(fd)
        if (st.st_dev, st.st_ino) != self._file_id:
            _os.close(fd)
            raise _errors.make("storage", f"{self.path} is no longer the file this index mapped "
                               f"(renamed or replaced behind its back)", path=self.path)
        return fd

    cdef int _check_unpinned(self, str action) except -1:
        if self._views:
            raise BufferError(f"cannot {action} index {self.path}: {self._views} exported "
                              f"view{'s' if self._views != 1 else ''} still alive")
        if self._pins:
            raise BufferError(f"cannot {action} index {self.path}: a scan is running on another thread")
        return 0

    cdef int _full_error(self) except -1:
        raise _errors.make(
            "index_full",
            f"{self.path}: attempt to append to a full index ({self._n} entries, file {self._length} "
            f"bytes; max index size {self.max_index_size})", path=self.path, limit=self._cap)

    cdef int32_t _relative(self, int64_t offset) except -1:
        """Kafka's relativeOffset(): offset - base, which must fit an int32."""
        if offset < self.base_offset or offset - self.base_offset > INT32_MAX:
            raise _errors.make(
                "invalid_offset",
                f"{self.path}: offset {offset} does not fit this index: relative to the base offset "
                f"{self.base_offset} it must be between 0 and {INT32_MAX}",
                path=self.path, offset=offset, limit=INT32_MAX)
        return <int32_t>(offset - self.base_offset)

    # ---- size --------------------------------------------------------------------------------

    def resize(self, int64_t new_size):
        """Set the file length to ``new_size`` rounded down to whole entries and remap (Kafka's
        ``resize``). Return False if the length was already that. Refused while views are alive,
        and below the current entries."""
        self._check_open()
        self._check_unpinned("resize")
        if new_size < 0:
            raise ValueError(f"{self.path}: negative index size {new_size}")
        cdef int64_t rounded = (new_size // self._es) * self._es
        if rounded == self._length:
            return False
        self._check_writable()
        if rounded < self._n * self._es:
            raise ValueError(f"{self.path}: cannot resize to {rounded} bytes: the index holds "
                             f"{self._n} entries ({self._n * self._es} bytes)")
        cdef int64_t old = self._length
        fd = self._reopen(_os.O_RDWR)
        try:
            _os.ftruncate(fd, rounded)
            try:
                self._map(fd, rounded)
            except BaseException:
                _os.ftruncate(fd, old)      # our old mapping is still in place: keep it valid
                raise
        finally:
            _os.close(fd)
        if self._dirty > rounded:
            self._dirty = rounded
        self._length_changed = True
        return True

    def trim_to_valid_size(self):
        """Cut the file to its entries (segment roll, close). Return True if it changed."""
        self._check_open()
        return self.resize(self._n * self._es)

    # ---- truncation --------------------------------------------------------------------------

    cdef int _truncate_entries(self, int64_t k) except -1:
        self._check_writable()
        if k > self._n:
            k = self._n
        self._n = k                       # publish first: concurrent lookups stop reading the tail
        cdef int64_t start = k * self._es
        cdef int64_t end = self._dirty
        cdef uint8_t *p = self._p
        if end > start:
            if end - start >= _NOGIL_BYTES:
                self._pins += 1
                with nogil:
                    memset(p + start, 0, <size_t>(end - start))
                self._pins -= 1
            else:
                memset(p + start, 0, <size_t>(end - start))
        self._dirty = start
        return 0

    def truncate(self):
        """Remove every entry (the bytes are zeroed; the file keeps its length)."""
        self._truncate_entries(0)

    # ---- views -------------------------------------------------------------------------------

    def view(self):
        """A read-only ``memoryview`` of the valid entries' bytes (counted; see the module doc)."""
        return memoryview(self)

    @property
    def views(self):
        """Number of live exported views."""
        return self._views

    def __getbuffer__(self, Py_buffer *buffer, int flags):
        if flags & PyBUF_WRITABLE:
            raise BufferError(f"index {self.path}: views are read-only")
        self._check_open()
        _export_readonly(buffer, self._p if self._p != NULL else _EMPTY,
                         <Py_ssize_t>(self._n * self._es), 1, _FORMAT_B, flags)
        buffer.obj = self
        self._views += 1

    def __releasebuffer__(self, Py_buffer *buffer):
        _release_export(buffer)
        self._views -= 1

    # ---- lifecycle ---------------------------------------------------------------------------

    def flush(self):
        """msync the mapping; fsync the file too when its length changed since the last flush."""
        self._check_open()
        if not self.writable:
            return
        if self._mm is not None:
            self._mm.flush()
        if self._length_changed:
            fd = self._reopen(_os.O_RDONLY)
            try:
                _os.fsync(fd)
            finally:
                _os.close(fd)
            self._length_changed = False

    def close(self, bint trim=True):
        """Trim the file to its entries (writable indexes, unless ``trim=False``) and unmap.
        Closing a closed index does nothing."""
        if not self._open:
            return
        self._check_unpinned("close")
        if trim and self.writable:
            try:
                self.trim_to_valid_size()
            except FileNotFoundError:
                pass                          # removed by someone else: nothing left to trim
            self._check_unpinned("close")     # the trim's system calls let other threads run
        self._open = False
        self._n = 0
        self._dirty = 0
        self._unmap()

    def delete(self):
        """Close without trimming and remove the file; return False if it was already gone."""
        if self._open:
            self._check_unpinned("delete")
            self.close(trim=False)
        try:
            _os.unlink(self.path)
        except FileNotFoundError:
            return False
        return True

    def rename_to(self, new_path):
        """Rename the file (e.g. to ``.deleted``); the index stays usable under the new name."""
        new_path = _os.fsdecode(_os.fspath(new_path))
        _os.replace(self.path, new_path)
        self.path = new_path

    def __enter__(self):
        self._check_open()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # ---- sizes -------------------------------------------------------------------------------

    cdef const uint8_t *_entry_at(self, int64_t i) except NULL:
        """The bytes of entry ``i``; negative ``i`` counts from the end."""
        self._check_open()
        if i < 0:
            i += self._n
        if i < 0 or i >= self._n:
            raise IndexError(f"{self.path}: entry {i} out of range ({self._n} entries)")
        return self._p + i * self._es

    def truncate_to(self, int64_t offset):
        """Remove every entry with offset >= ``offset`` (Kafka's ``truncateTo``)."""
        self._check_writable()
        cdef int64_t k
        cdef int64_t d = offset - self.base_offset if offset >= self.base_offset else -1
        if d < 0:
            k = 0
        elif d > INT32_MAX:
            k = self._n
        else:
            k = seglog_idx_lower_i32(self._p, self._n, self._es, self._rel_at, <int32_t>d)
        self._truncate_entries(k)

    def __len__(self):
        return self._n

    @property
    def entries(self):
        """Number of valid entries."""
        return self._n

    @property
    def max_entries(self):
        """Entries the current file length holds (Kafka's maxEntries)."""
        return self._cap

    @property
    def is_full(self):
        return self._n >= self._cap

    @property
    def length(self):
        """File length in bytes."""
        return self._length

    @property
    def closed(self):
        return not self._open

    def __repr__(self):
        state = "closed" if not self._open else f"{self._n}/{self._cap} entries"
        return (f"<{type(self).__name__} {self.path!r} base_offset={self.base_offset} {state}"
                f"{'' if self.writable else ' read-only'}>")


@cython.final
cdef class OffsetIndex(_Index):
    """Kafka's ``OffsetIndex``: sparse (offset -> position in the .log) entries, 8 bytes each.

    ``OffsetIndex(path, base_offset, max_index_size=10485760, writable=True)`` creates and
    preallocates a missing file (writable only) or maps an existing one.
    """

    ENTRY_SIZE = 8

    def __cinit__(self, *args, **kwargs):
        self._kind = _KIND_OFFSET
        self._es = SEGLOG_OIDX_ENTRY
        self._rel_at = 0

    def append(self, int64_t offset, int64_t position):
        """Append (offset, position). Offsets must strictly increase (Kafka's rule), positions
        must not decrease. The pair (base_offset, 0) on an empty index is what ``lookup`` already
        answers for it and is not stored (stored, it would read back as a zero slot)."""
        self._check_writable()
        cdef int64_t n = self._n
        if n >= self._cap:
            self._full_error()
        cdef uint8_t *e = self._p + n * SEGLOG_OIDX_ENTRY
        cdef int64_t last_off, last_pos
        if n > 0:
            last_off = self.base_offset + seglog_ld_i32(e - 8)
            last_pos = seglog_ld_i32(e - 4)
            if offset <= last_off:
                raise _errors.make(
                    "invalid_offset",
                    f"{self.path}: attempt to append offset {offset} to entry {n}, no larger than "
                    f"the last offset appended ({last_off})", path=self.path, offset=offset)
            if position < last_pos:
                raise _errors.make(
                    "invalid_offset",
                    f"{self.path}: attempt to append offset {offset} at position {position}, before "
                    f"the last entry's position {last_pos}", path=self.path, offset=offset,
                    position=position)
        cdef int32_t rel = self._relative(offset)
        if position < 0 or position > INT32_MAX:
            raise _errors.make("invalid_offset",
                               f"{self.path}: position {position} for offset {offset} is outside 0..{INT32_MAX}",
                               path=self.path, offset=offset, position=position, limit=INT32_MAX)
        if n == 0 and rel == 0 and position == 0:
            return
        self._back((n + 1) * SEGLOG_OIDX_ENTRY)
        seglog_put_be32(e, <uint32_t>rel)
        seglog_put_be32(e + 4, <uint32_t>position)
        self._n = n + 1
        if self._dirty < self._n * SEGLOG_OIDX_ENTRY:
            self._dirty = self._n * SEGLOG_OIDX_ENTRY

    def lookup(self, int64_t target_offset):
        """(offset, position) of the largest entry with offset <= ``target_offset``, or
        (base_offset, 0) if there is none."""
        cdef int64_t position
        cdef int64_t offset = self._floor(target_offset, &position)
        return (offset, position)

    cdef int64_t _floor(self, int64_t target_offset, int64_t *position, int64_t *next_position=NULL) except? -1:
        """:meth:`lookup` in C: the entry's offset, its position in ``position[0]``, and the
        next entry's position in ``next_position[0]`` when asked (-1 when there is none)."""
        if not self._open:
            self._check_open()
        cdef int64_t base = self.base_offset
        cdef int64_t slot = -1
        position[0] = 0
        if target_offset >= base and self._n > 0:
            d = target_offset - base
            slot = seglog_idx_floor_i32(self._p, self._n, SEGLOG_OIDX_ENTRY, 0,
                                        <int32_t>(d if d < INT32_MAX else INT32_MAX))
        if next_position != NULL:
            next_position[0] = (seglog_ld_i32(self._p + (slot + 1) * SEGLOG_OIDX_ENTRY + 4)
                                if slot + 1 < self._n else -1)
        if slot < 0:
            return base
        cdef const uint8_t *e = self._p + slot * SEGLOG_OIDX_ENTRY
        position[0] = seglog_ld_i32(e + 4)
        return base + seglog_ld_i32(e)

    def entry(self, int64_t i):
        """Entry ``i`` as (offset, position); negative ``i`` counts from the end."""
        cdef const uint8_t *e = self._entry_at(i)
        return (self.base_offset + seglog_ld_i32(e), seglog_ld_i32(e + 4))

    @property
    def last_entry(self):
        """The last entry, or (base_offset, 0) when empty."""
        self._check_open()
        if self._n == 0:
            return (self.base_offset, 0)
        return self.entry(self._n - 1)

    @property
    def last_offset(self):
        return self.last_entry[0]


@cython.final
cdef class TimeIndex(_Index):
    """Kafka's ``TimeIndex``: sparse (timestamp -> offset) entries, 12 bytes each. An entry
    (T, o) says T is the largest timestamp at or before offset o: a record with a timestamp
    above T lies after o.

    ``TimeIndex(path, base_offset, max_index_size=10485760, writable=True)``.
    """

    ENTRY_SIZE = 12

    def __cinit__(self, *args, **kwargs):
        self._kind = _KIND_TIME
        self._es = SEGLOG_TIDX_ENTRY
        self._rel_at = 8

    def maybe_append(self, int64_t timestamp, int64_t offset, bint skip_full_check=False):
        """Append (timestamp, offset) if ``timestamp`` is larger than the last entry's (Kafka's
        ``maybeAppend``); return whether an entry was written. An equal timestamp is skipped;
        a smaller timestamp or offset is an error. ``skip_full_check`` (segment roll and close)
        lets the final max-timestamp entry in when the index is full: the file grows by one
        entry, and is trimmed right after anyway."""
        self._check_writable()
        cdef int64_t n = self._n
        if not skip_full_check and n >= self._cap:
            self._full_error()
        cdef int64_t last_ts = -1, last_off = self.base_offset
        if n > 0:
            last_ts = seglog_ld_i64(self._p + (n - 1) * SEGLOG_TIDX_ENTRY)
            last_off = self.base_offset + seglog_ld_i32(self._p + (n - 1) * SEGLOG_TIDX_ENTRY + 8)
            if offset < last_off:
                raise _errors.make(
                    "invalid_offset",
                    f"{self.path}: attempt to append offset {offset} to time index entry {n}, "
                    f"smaller than the last offset appended ({last_off})", path=self.path, offset=offset)
            if timestamp < last_ts:
                raise _errors.make(
                    "invalid_offset",
                    f"{self.path}: attempt to append timestamp {timestamp} (offset {offset}) to time "
                    f"index entry {n}, smaller than the last timestamp appended ({last_ts})",
                    path=self.path, offset=offset, timestamp=timestamp)
        if timestamp <= last_ts:
            return False
        cdef int32_t rel = self._relative(offset)
        cdef uint8_t *e
        if rel == 0:
            if n == 0 and timestamp == 0:
                # (0, base) is all zero bytes: it would read back as an empty preallocated file.
                return False
            if n > 0:
                # The last entry is for the base offset too. Kafka would add a second entry with
                # relative offset 0, where DumpLogSegments (and the open-time scan) see the zero
                # tail; raising the last entry's timestamp instead keeps every lookup's offset.
                seglog_put_be64(self._p + (n - 1) * SEGLOG_TIDX_ENTRY, <uint64_t>timestamp)
                return True
        if n >= self._cap:
            self._check_unpinned("grow")
            self.resize(self._length + SEGLOG_TIDX_ENTRY)
        self._back((n + 1) * SEGLOG_TIDX_ENTRY)
        e = self._p + n * SEGLOG_TIDX_ENTRY
        seglog_put_be64(e, <uint64_t>timestamp)
        seglog_put_be32(e + 8, <uint32_t>rel)
        self._n = n + 1
        if self._dirty < self._n * SEGLOG_TIDX_ENTRY:
            self._dirty = self._n * SEGLOG_TIDX_ENTRY
        return True

    def lookup(self, int64_t target_timestamp):
        """(timestamp, offset) of the largest entry with timestamp <= ``target_timestamp``, or
        (-1, base_offset) if there is none."""
        cdef int64_t offset
        cdef int64_t timestamp = self._floor(target_timestamp, &offset)
        return (timestamp, offset)

    cdef int64_t _floor(self, int64_t target_timestamp, int64_t *offset) except? -2:
        """:meth:`lookup` in C: the entry's timestamp, its offset in ``offset[0]``."""
        if not self._open:
            self._check_open()
        cdef int64_t slot = seglog_idx_floor_i64(self._p, self._n, SEGLOG_TIDX_ENTRY, 0,
                                                 target_timestamp)
        if slot < 0:
            offset[0] = self.base_offset
            return -1
        cdef const uint8_t *e = self._p + slot * SEGLOG_TIDX_ENTRY
        offset[0] = self.base_offset + seglog_ld_i32(e + 8)
        return seglog_ld_i64(e)

    def entry(self, int64_t i):
        """Entry ``i`` as (timestamp, offset); negative ``i`` counts from the end."""
        cdef const uint8_t *e = self._entry_at(i)
        return (seglog_ld_i64(e), self.base_offset + seglog_ld_i32(e + 8))

    @property
    def last_entry(self):
        """The last entry, or (-1, base_offset) when empty (Kafka's lastEntry)."""
        self._check_open()
        if self._n == 0:
            return (-1, self.base_offset)
        return self.entry(self._n - 1)


# -- for segment.pyx (index.pxd) ------------------------------------------------------------------

cdef int64_t offset_index_position(object index, int64_t target_offset, int64_t *next_position=NULL) except -1:
    cdef int64_t position
    if type(index) is OffsetIndex:
        (<OffsetIndex>index)._floor(target_offset, &position, next_position)
        return position
    if next_position != NULL:
        next_position[0] = -1
    return index.lookup(target_offset)[1]  # a stand-in (a read-only segment's missing file)


cdef int64_t time_index_offset(object index, int64_t target_timestamp) except -1:
    cdef int64_t offset
    if type(index) is TimeIndex:
        (<TimeIndex>index)._floor(target_timestamp, &offset)
        return offset
    return index.lookup(target_timestamp)[1]


cdef bint index_is_full(object index) except -1:
    if isinstance(index, _Index):
        return (<_Index>index)._n >= (<_Index>index)._cap
    return bool(index.is_full)
