"""The producer's side of batching (Kafka's ``RecordAccumulator``, ``ProducerBatch`` and
``FutureRecordMetadata``): the per-record ``send`` path, all in C but for the callbacks.

* :class:`ProducerBatch` is a record batch builder (``builder.pyx``, Kafka's
  ``MemoryRecordsBuilder``) that also knows where it goes (topic, partition), what became of
  its append (base offset, log-append time, error) and who waits for it (callbacks).
* :class:`RecordFuture` is the pending result of one ``send``; :class:`RecordMetadata` where
  the record landed.
* :class:`Accumulator` turns ``send`` into an append to the partition's open batch;
  :class:`TopicSlots` is its state for one topic, :class:`Generation` tells it when that state is
  stale, :class:`ReentrantLock` is the producer's lock.

Thread-safety: every call into a batch holds the producer's lock (the accumulator takes it).
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_CheckExact
from cpython.pythread cimport (
    PyThread_type_lock, PyThread_allocate_lock, PyThread_free_lock, PyThread_acquire_lock,
    PyThread_release_lock, PyThread_get_thread_ident, WAIT_LOCK, NOWAIT_LOCK,
)
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t

from seglog._native.builder cimport BatchBuilder

import logging

from seglog._native import _errors

from murmur2 cimport seglog_partition_for_key

_log = logging.getLogger("seglog.producer")
# The errback slot of a waiter added by ``add_done_callback``: its callback takes the future.
cdef object _WHOLE_FUTURE = object()

cdef extern from "time.h" nogil:
    struct timespec:
        long tv_sec
        long tv_nsec
    int clock_gettime(int clk, timespec *ts)
    int CLOCK_REALTIME


@cython.final
cdef class RecordMetadata:
    """Where a produced record landed (Kafka's ``RecordMetadata``). ``offset`` is -1 when the
    producer did not wait for the append (``acks=0``)."""
    cdef readonly str topic
    cdef readonly int32_t partition
    cdef readonly int64_t offset
    cdef readonly int64_t timestamp
    cdef readonly int32_t serialized_key_size
    cdef readonly int32_t serialized_value_size

    def __init__(self, str topic, int32_t partition, int64_t offset, int64_t timestamp,
                 int32_t serialized_key_size=-1, int32_t serialized_value_size=-1):
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.serialized_key_size = serialized_key_size
        self.serialized_value_size = serialized_value_size

    def has_offset(self):
        return self.offset >= 0

    def __repr__(self):
        return (f"RecordMetadata(topic={self.topic!r}, partition={self.partition}, "
                f"offset={self.offset}, timestamp={self.timestamp})")

    def __eq__(self, other):
        if not isinstance(other, RecordMetadata):
            return NotImplemented
        o = <RecordMetadata>other
        return (self.topic, self.partition, self.offset, self.timestamp) == \
            (o.topic, o.partition, o.offset, o.timestamp)

    def __hash__(self):
        return hash((self.topic, self.partition, self.offset, self.timestamp))


@cython.final
@cython.freelist(256)
cdef class RecordFuture:
    """The pending result of one ``send`` (Kafka's ``FutureRecordMetadata``).

    ``get()`` returns the :class:`RecordMetadata`, sending the record's batch first if it is
    still lingering (in-process, waiting would only delay it), or raises the append's error.
    """
    cdef ProducerBatch batch
    cdef int32_t index
    cdef int64_t timestamp
    cdef int32_t key_size
    cdef int32_t value_size

    def done(self):
        return self.batch.done

    def get(self, timeout=None):
        """The record's :class:`RecordMetadata`, once its batch is appended (raises the append's
        error); waits up to ``timeout`` seconds (None: as long as it takes), then raises
        ``TimeoutError``."""
        cdef ProducerBatch b = self.batch
        if not b.done:
            self._wait(timeout)
        if b.error is not None:
            raise b.error
        return self._metadata()

    result = get

    def exception(self, timeout=None):
        """The append's error, or None once the record is appended; waits as :meth:`get`."""
        cdef ProducerBatch b = self.batch
        if not b.done:
            self._wait(timeout)
        return b.error

    cdef _wait(self, timeout):
        cdef ProducerBatch b = self.batch
        if b.sender is None:
            raise RuntimeError("the record's batch has no sender")
        b.sender(b, timeout)
        if not b.done:
            raise TimeoutError(f"the record to {b.topic}-{b.partition} was not acknowledged "
                               f"within {timeout} s")

    def succeeded(self):
        return self.batch.done and self.batch.error is None

    def failed(self):
        return self.batch.done and self.batch.error is not None

    def add_callback(self, fn):
        """Call ``fn(metadata)`` once the batch is appended (now, if it already is)."""
        self._add(fn, None)
        return self

    def add_errback(self, fn):
        """Call ``fn(exception)`` if the batch fails (now, if it already has)."""
        self._add(None, fn)
        return self

    def add_done_callback(self, fn):
        """Call ``fn(future)`` once the batch is appended or has failed (now, if it is done), as
        ``concurrent.futures.Future.add_done_callback`` does."""
        self._add(fn, _WHOLE_FUTURE)
        return None

    cdef _add(self, ok, err):
        cdef ProducerBatch b = self.batch
        if b.done:
            self._fire(ok, err)
        else:
            if b.waiters is None:
                b.waiters = []
            b.waiters.append((self, ok, err))

    cdef _fire(self, ok, err):
        if err is _WHOLE_FUTURE:
            ok(self)
        elif self.batch.error is None:
            if ok is not None:
                ok(self._metadata())
        elif err is not None:
            err(self.batch.error)

    cdef RecordMetadata _metadata(self):
        cdef ProducerBatch b = self.batch
        cdef RecordMetadata md = RecordMetadata.__new__(RecordMetadata)
        md.topic = b.topic
        md.partition = b.partition
        # A producer batch's offset deltas are consecutive: a record's index is its delta.
        md.offset = b.base_offset + self.index if b.base_offset >= 0 else -1
        md.timestamp = b.log_append_time if b.log_append_time >= 0 else self.timestamp
        md.serialized_key_size = self.key_size
        md.serialized_value_size = self.value_size
        return md

    @property
    def topic(self):
        return self.batch.topic

    @property
    def partition(self):
        return self.batch.partition

    def __repr__(self):
        state = "done" if self.batch.done else "pending"
        return f"RecordFuture({self.batch.topic!r}, partition={self.batch.partition}, {state})"


@cython.final
cdef class ProducerBatch(BatchBuilder):
    """A batch the producer fills for one partition (Kafka's ``ProducerBatch``): the record
    batch builder plus the batch's destination, the outcome of its append and the callbacks
    that wait for it. ``try_append`` returns each record's :class:`RecordFuture`;
    ``complete`` / ``fail`` settle them all."""
    cdef public str topic
    cdef public int32_t partition
    cdef public object sender          # sender(batch, timeout): writes or awaits the batch (RecordFuture.get)
    cdef public int64_t base_offset
    cdef public int64_t log_append_time
    cdef public object error
    cdef public bint done
    cdef public list waiters
    cdef public int64_t created_ms
    cdef public int32_t base_sequence

    def __cinit__(self):
        self.base_offset = -1
        self.log_append_time = -1
        self.base_sequence = -1
        self.partition = -1

    def __init__(self, Py_ssize_t limit=16384, *, Py_ssize_t max_record=-1, base_timestamp=None,
                 Py_ssize_t initial_capacity=-1, str topic=None, int32_t partition=-1):
        self.init_buffer(limit, max_record, base_timestamp, initial_capacity)
        self.topic = topic
        self.partition = partition

    @staticmethod
    def for_partition(str topic, int32_t partition, Py_ssize_t limit, Py_ssize_t max_record,
                      Py_ssize_t initial_capacity=-1):
        """``ProducerBatch(limit, max_record=..., initial_capacity=..., topic=...,
        partition=...)`` at a third of the cost, for the producer that opens a batch per
        send with ``linger.ms=0``: Cython gives a subclass of a type from another module no
        vectorcall constructor, so calling the class builds an argument tuple and dict
        (measured: about 260 ns with keywords, 85 ns here)."""
        cdef ProducerBatch b = ProducerBatch.__new__(ProducerBatch)
        b.init_buffer(limit, max_record, None, initial_capacity)
        b.topic = topic
        b.partition = partition
        return b

    def try_append(self, int64_t timestamp, key, value, headers=None):
        """Append a record with the next offset delta and return its :class:`RecordFuture`, or
        None when the batch is not empty and the record would take it past ``limit``."""
        return self._try_append(timestamp, key, value, headers)

    cdef object _try_append(self, int64_t timestamp, object key, object value, object headers):
        cdef int32_t klen, vlen
        cdef int32_t delta = self.count
        if self.explicit_deltas:
            raise ValueError("this batch was built with explicit offset deltas")
        if not self.append_record(delta, timestamp, key, value, headers, True, &klen, &vlen):
            return None
        cdef RecordFuture f = RecordFuture.__new__(RecordFuture)
        f.batch = self
        f.index = delta
        f.timestamp = timestamp
        f.key_size = klen
        f.value_size = vlen
        return f

    def complete(self, int64_t base_offset, int64_t log_append_time=-1):
        """Record the append's outcome and run the waiting callbacks."""
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.done = True
        self._run_waiters()

    def fail(self, error):
        """Record the append's error and run the waiting callbacks."""
        self.error = error
        self.done = True
        self._run_waiters()

    cdef _run_waiters(self):
        cdef list waiters = self.waiters
        self.waiters = None
        self.sender = None
        if waiters:
            for fut, ok, err in waiters:
                try:
                    (<RecordFuture>fut)._fire(ok, err)
                except Exception:
                    # One callback's failure is not the batch's, and the others still run (as
                    # Kafka's producer and concurrent.futures treat callbacks).
                    _log.exception("a record callback of %s-%d raised", self.topic, self.partition)

    def __repr__(self):
        return (f"ProducerBatch(topic={self.topic!r}, partition={self.partition}, "
                f"records={self.count}, size={self.length}, sealed={bool(self.sealed)})")


cdef inline int64_t _wall_ms() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


@cython.final
cdef class Generation:
    """A counter the store bumps whenever topics change; producers compare it with the value
    their cached topic state was built at."""
    cdef public long long value


@cython.final
cdef class TopicSlots:
    """The producer's state for one topic: the open batch of each partition and the sticky
    partition for keyless records."""
    cdef public str name
    cdef public int32_t num_partitions
    cdef public list batches
    cdef public int32_t sticky
    cdef public bint compact
    cdef public object codec
    cdef public object level
    cdef public Py_ssize_t max_batch
    cdef public list parts
    cdef public long long generation

    def __init__(self, str name, int32_t num_partitions, int32_t sticky, bint compact,
                 Py_ssize_t max_batch, codec=0, level=None):
        if num_partitions < 1:
            raise ValueError(f"topic {name!r} has no partitions")
        self.name = name
        self.num_partitions = num_partitions
        self.batches = [None] * num_partitions
        self.sticky = sticky
        self.compact = compact
        self.max_batch = max_batch
        self.codec = codec
        self.level = level


@cython.final
cdef class ReentrantLock:
    """A re-entrant lock whose acquire/release cost a C call from the send path (the producer's
    Python code uses it as a context manager, like ``threading.RLock``). A contended acquire
    waits with the GIL released."""
    cdef PyThread_type_lock lock
    cdef unsigned long owner
    cdef Py_ssize_t depth

    def __cinit__(self):
        self.lock = PyThread_allocate_lock()
        if self.lock == NULL:
            raise MemoryError("cannot allocate a lock")

    def __dealloc__(self):
        if self.lock != NULL:
            PyThread_free_lock(self.lock)

    cdef inline int enter(self) except -1:
        cdef unsigned long me = PyThread_get_thread_ident()
        if self.depth and self.owner == me:
            self.depth += 1
            return 0
        if not PyThread_acquire_lock(self.lock, NOWAIT_LOCK):
            with nogil:
                PyThread_acquire_lock(self.lock, WAIT_LOCK)  # waits: always acquires
        self.owner = me
        self.depth = 1
        return 0

    cdef inline int exit(self) except -1:
        if self.depth == 0 or self.owner != PyThread_get_thread_ident():
            raise RuntimeError("cannot release a lock this thread does not hold")
        self.depth -= 1
        if self.depth == 0:
            self.owner = 0
            PyThread_release_lock(self.lock)
        return 0

    def acquire(self):
        self.enter()
        return True

    def release(self):
        self.exit()

    def __enter__(self):
        self.enter()
        return self

    def __exit__(self, *exc):
        self.exit()
        return False


@cython.final
cdef class Accumulator:
    """``send`` for the producer: partition choice (murmur2 of the key, or the sticky
    partition), the timestamp (the wall clock read in C unless ``clock_ms`` is given) and the
    append into the partition's open batch happen here; creating and writing batches are
    callbacks into the producer (``new_batch(slots, partition)``, ``write(batch)``,
    ``slots_for(topic)``). Every call holds the producer's ``lock`` (re-entrant, so the callbacks
    take it again)."""
    cdef public dict topics
    cdef object new_batch
    cdef object write
    cdef object slots_for
    cdef object clock_ms
    cdef ReentrantLock lock
    cdef Generation generation
    cdef Py_ssize_t batch_size
    cdef bint linger_zero
    cdef bint ignore_keys

    def __init__(self, ReentrantLock lock, Generation generation, new_batch, write, slots_for,
                 clock_ms, Py_ssize_t batch_size, bint linger_zero, bint ignore_keys):
        self.topics = {}
        self.lock = lock
        self.generation = generation
        self.new_batch = new_batch
        self.write = write
        self.slots_for = slots_for
        self.clock_ms = clock_ms
        self.batch_size = batch_size
        self.linger_zero = linger_zero
        self.ignore_keys = ignore_keys

    def send(self, str topic, value, key=None, headers=None, timestamp=None, partition=None):
        cdef TopicSlots slots
        cdef ProducerBatch b
        cdef int32_t p
        cdef int64_t ts
        cdef object fut
        cdef Py_ssize_t kn
        cdef const uint8_t[::1] kview
        self.lock.enter()
        try:
            obj = self.topics.get(topic)
            if obj is None or (<TopicSlots>obj).generation != self.generation.value:
                obj = self.slots_for(topic)
            slots = <TopicSlots>obj
            if partition is None:
                if key is None or self.ignore_keys:
                    p = slots.sticky
                elif PyBytes_CheckExact(key):
                    p = seglog_partition_for_key(<const uint8_t *>PyBytes_AS_STRING(key),
                                                 PyBytes_GET_SIZE(key), <uint32_t>slots.num_partitions)
                else:
                    if isinstance(key, str):
                        raise TypeError("the record key is a str; Kafka records hold bytes: encode "
                                        "it first (e.g. key.encode('utf-8'))")
                    try:
                        kview = memoryview(key).cast("B")
                    except TypeError:
                        raise TypeError(f"the record key must be bytes-like or None, not "
                                        f"{type(key).__name__}") from None
                    kn = kview.shape[0]
                    p = seglog_partition_for_key(&kview[0] if kn else <const uint8_t *>b"", kn,
                                                 <uint32_t>slots.num_partitions)
            else:
                if not isinstance(partition, int) or isinstance(partition, bool):
                    raise TypeError(f"partition must be an int or None, not {type(partition).__name__}")
                p = partition
                if p < 0 or p >= slots.num_partitions:
                    raise _errors.make("unknown_topic_or_partition",
                                       f"partition {p} of topic {topic!r} does not exist (the topic "
                                       f"has {slots.num_partitions} partition(s))")
            if key is None and slots.compact:
                raise _errors.make("invalid_record", f"compacted topic {topic!r} cannot accept a "
                                   "record without a key")
            if timestamp is not None:
                if not isinstance(timestamp, int) or isinstance(timestamp, bool):
                    raise TypeError(f"timestamp must be an int (milliseconds) or None, not "
                                    f"{type(timestamp).__name__}")
                ts = timestamp
                if ts < -1:
                    # Kafka's producer refuses these (ProducerRecord); -1 is the wire's "none".
                    raise ValueError(f"timestamp: invalid timestamp {ts}: a timestamp must be >= 0 "
                                     "milliseconds (or -1 for none, or None for now)")
            elif self.clock_ms is None:
                ts = _wall_ms()
            else:
                ts = self.clock_ms()
            obj = slots.batches[p]
            if obj is None:
                obj = self.new_batch(slots, p)
            b = <ProducerBatch>obj
            fut = b._try_append(ts, key, value, headers)
            if fut is None:
                self.write(b)
                b = <ProducerBatch>self.new_batch(slots, p)
                fut = b._try_append(ts, key, value, headers)
            if self.linger_zero:
                self.write(b)
                return (<RecordFuture>fut).get()
            if b.length >= self.batch_size:
                self.write(b)
            return fut
        finally:
            self.lock.exit()
