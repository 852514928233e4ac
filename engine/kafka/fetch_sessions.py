"""Incremental fetch sessions (Kafka's KIP-227): the broker remembers the partitions a consumer
fetches, so its later Fetch requests name only what changed and the responses carry only the
partitions that have something new.

A Fetch request carries a session id and an epoch:

- epoch 0 (``INITIAL_EPOCH``): a full fetch. It closes the session it names (if any) and asks
  for a new one over the partitions it lists; the response gives the new session's id, or 0
  when the cache has no room (the client then stays on full fetches).
- epoch -1 (``FINAL_EPOCH``): a full fetch without a session; it closes the session it names.
- epoch n > 0 with a session id: an incremental fetch. The session must exist
  (else ``FETCH_SESSION_ID_NOT_FOUND``) and be at epoch n (else
  ``INVALID_FETCH_SESSION_EPOCH``); the partitions listed are added to the session or update
  its fetch offsets and limits, ``forgotten_topics_data`` removes partitions, and the fetch
  reads every partition of the session. The response leaves out the partitions that have no
  records, no error and the same high watermark and log start offset as last sent. The
  session's epoch advances by one (wrapping from 2^31-1 to 1). A session left with no
  partitions is closed and the fetch answered without a session. Partitions that returned
  records move to the end of the session's order, so the next fetches read the others first.

The cache (``max.incremental.fetch.session.cache.slots`` sessions, 1000 by default) makes room
for a new session as Kafka's broker does: it evicts the least recently used session if that
one is unused for longer than ``eviction_ms`` (120 s); otherwise the least valuable one among
those old enough to be evicted (a consumer's before a follower's, then the fewest partitions,
then the lowest id), and only if the new session is worth at least as much. A session created
less than ``eviction_ms`` ago is evicted only by a follower's (privileged) one, and a
follower's only once it is that old.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from typing import Any

from seglog.errors import FetchSessionIdNotFoundError, FetchSessionTopicIdError, InvalidFetchSessionEpochError

__all__ = [
    "DEFAULT_EVICTION_MS",
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "INVALID_SESSION_ID",
    "FetchContext",
    "FetchSessionCache",
    "next_epoch",
]

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
#: Kafka's ``min.incremental.fetch.session.eviction.ms`` (an internal broker setting).
DEFAULT_EVICTION_MS = 120_000
_INT32_MAX = 2**31 - 1

#: A partition of a session: (topic name, partition index).
Key = tuple[str, int]


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: -1 stays -1, 2^31-1 wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _INT32_MAX else epoch + 1


class CachedPartition:
    """What a session remembers of one partition: the fetcher's last request fields, and the
    high watermark and log start offset last sent (-1: not sent, or an error was)."""

    __slots__ = ("fields", "high_watermark", "log_start_offset")

    def __init__(self, fields: dict[str, Any]) -> None:
        #: The partition's request fields (``partition``, ``fetch_offset``,
        #: ``partition_max_bytes``, ``log_start_offset``, ``current_leader_epoch``, ...).
        self.fields = fields
        self.high_watermark = -1
        self.log_start_offset = -1

    def must_respond(self, out: dict[str, Any], update: bool) -> bool:
        """Whether the partition's response ``out`` goes into an incremental response (records,
        an error, or a new high watermark or log start offset); ``update`` remembers what is
        sent."""
        respond = _has_records(out["records"])
        if self.high_watermark != out["high_watermark"]:
            respond = True
            if update:
                self.high_watermark = out["high_watermark"]
        if self.log_start_offset != out["log_start_offset"]:
            respond = True
            if update:
                self.log_start_offset = out["log_start_offset"]
        if out.get("preferred_read_replica", -1) != -1:
            respond = True
        if out["error_code"] != 0:
            # Sent again once the error is gone.
            if update:
                self.high_watermark = -1
            respond = True
        return respond


def _has_records(records: Any) -> bool:
    if records is None:
        return False
    size = getattr(records, "size", None)
    if isinstance(size, int):
        return size > 0
    return len(records) > 0


class FetchSession:
    """One session: its partitions in fetch order, epoch and times (milliseconds)."""

    __slots__ = (
        "cached_size",
        "created_ms",
        "epoch",
        "evictable_by_all",
        "evictable_by_privileged",
        "id",
        "last_used_ms",
        "partitions",
        "privileged",
        "uses_topic_ids",
    )

    def __init__(
        self, session_id: int, privileged: bool, partitions: dict[Key, CachedPartition], now: int, uses_topic_ids: bool
    ) -> None:
        self.id = session_id
        #: Made by a Fetch v13+ (topics named by id): only such requests may use it.
        self.uses_topic_ids = uses_topic_ids
        #: A follower's session (Fetch from a replica id >= 0), which consumers cannot evict.
        self.privileged = privileged
        self.partitions = partitions
        self.created_ms = now
        self.last_used_ms = now
        self.epoch = next_epoch(INITIAL_EPOCH)
        #: The partition count as of the last touch (what eviction compares).
        self.cached_size = -1
        self.evictable_by_all = False
        self.evictable_by_privileged = False

    def update(self, listed: Iterable[tuple[Key, dict[str, Any]]], forgotten: Iterable[Key]) -> None:
        """An incremental request's partitions: new ones join at the end, known ones take the
        new request fields; ``forgotten`` ones leave."""
        parts = self.partitions
        for key, fields in listed:
            cached = parts.get(key)
            if cached is None:
                parts[key] = CachedPartition(fields)
            else:
                cached.fields = fields
        for key in forgotten:
            parts.pop(key, None)

    def __repr__(self) -> str:
        return (
            f"FetchSession(id={self.id}, epoch={self.epoch}, partitions={len(self.partitions)}, "
            f"privileged={self.privileged})"
        )


class FetchSessionCache:
    """The broker's fetch sessions, at most ``max_entries`` of them (``max_entries`` 0: no
    sessions are made). ``clock`` gives milliseconds."""

    def __init__(
        self,
        max_entries: int,
        eviction_ms: int = DEFAULT_EVICTION_MS,
        clock: Callable[[], int] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if max_entries < 0:
            raise ValueError(f"max.incremental.fetch.session.cache.slots must be 0 or more, not {max_entries}")
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self._clock = clock or (lambda: int(time.monotonic() * 1000))
        self._rng = rng or random.Random()
        self.sessions: dict[int, FetchSession] = {}
        #: Sessions evicted to make room for others (Kafka's eviction meter, as a count).
        self.evictions = 0
        #: Incremental fetches served (their session found at the right epoch).
        self.incremental_fetches = 0

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)

    def touch(self, session: FetchSession, now: int) -> None:
        """Mark ``session`` used at ``now``; whether it may be evicted is decided here, by age."""
        session.last_used_ms = now
        session.cached_size = len(session.partitions)
        old = now - session.created_ms > self.eviction_ms
        session.evictable_by_privileged = (not session.privileged) or old
        session.evictable_by_all = old

    def maybe_create(
        self, privileged: bool, partitions: dict[Key, CachedPartition], uses_topic_ids: bool = False
    ) -> int:
        """A new session over ``partitions`` if there is room (or room is made): its id, else
        ``INVALID_SESSION_ID``."""
        now = self._clock()
        if len(self.sessions) >= self.max_entries and not self._try_evict(privileged, len(partitions), now):
            return INVALID_SESSION_ID
        session_id = self._new_id()
        session = FetchSession(session_id, privileged, partitions, now, uses_topic_ids)
        self.sessions[session_id] = session
        self.touch(session, now)
        return session_id

    def _new_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, _INT32_MAX - 1)
            if session_id not in self.sessions:
                return session_id

    def _try_evict(self, privileged: bool, size: int, now: int) -> bool:
        if not self.sessions:
            return False
        stale = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - stale.last_used_ms > self.eviction_ms:
            self._evict(stale)
            return True
        candidates = [
            s for s in self.sessions.values() if (s.evictable_by_privileged if privileged else s.evictable_by_all)
        ]
        if not candidates:
            return False
        least = min(candidates, key=lambda s: (s.privileged, s.cached_size, s.id))
        if (privileged, size, 0) < (least.privileged, least.cached_size, least.id):
            return False
        self._evict(least)
        return True

    def _evict(self, session: FetchSession) -> None:
        del self.sessions[session.id]
        self.evictions += 1

    # -- one Fetch request ----------------------------------------------------------------------

    def new_context(self, req: dict[str, Any], uses_topic_ids: bool = False) -> FetchContext:
        """The context of a Fetch request (decoded body; ``uses_topic_ids``: v13+, whose
        topics the caller has named from their ids): which partitions it reads, and how its
        response is made (:meth:`FetchContext.respond`)."""
        session_id = req.get("session_id", INVALID_SESSION_ID)
        epoch = req.get("session_epoch", FINAL_EPOCH)
        listed = list(_listed(req))
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)  # a full fetch closes the session it names
            return FetchContext(
                self,
                listed,
                create=epoch == INITIAL_EPOCH,
                privileged=_replica_id(req) >= 0,
                uses_topic_ids=uses_topic_ids,
            )
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext.failed(
                self, FetchSessionIdNotFoundError.code, f"fetch session {session_id} is not known to this broker"
            )
        if session.epoch != epoch:
            return FetchContext.failed(
                self,
                InvalidFetchSessionEpochError.code,
                f"fetch session {session_id} is at epoch {session.epoch}, the request has epoch {epoch}",
            )
        if session.uses_topic_ids != uses_topic_ids:
            return FetchContext.failed(
                self,
                FetchSessionTopicIdError.code,
                f"fetch session {session_id} names topics {'by id' if session.uses_topic_ids else 'by name'}, "
                f"the request {'by id' if uses_topic_ids else 'by name'}",
            )
        session.update(listed, _forgotten(req))
        if not session.partitions:
            # Every partition forgotten: the session ends, the fetch is answered without one.
            self.remove(session.id)
            return FetchContext(self, listed, create=False, privileged=False)
        self.touch(session, self._clock())
        session.epoch = next_epoch(session.epoch)
        self.incremental_fetches += 1
        return FetchContext(self, [], session=session, request_epoch=epoch)


def _replica_id(req: dict[str, Any]) -> int:
    """The fetching replica's id (-1: a consumer); v15+ carry it in ``replica_state``."""
    state = req.get("replica_state")
    if state:
        return int(state.get("replica_id", -1))
    return int(req.get("replica_id", -1))


def _listed(req: dict[str, Any]) -> Iterable[tuple[Key, dict[str, Any]]]:
    for topic in req["topics"]:
        name = topic["topic"]
        for fields in topic["partitions"]:
            yield (name, fields["partition"]), fields


def _forgotten(req: dict[str, Any]) -> Iterable[Key]:
    for topic in req.get("forgotten_topics_data") or ():
        for p in topic["partitions"]:
            yield topic["topic"], p


class FetchContext:
    """How one Fetch request is served: :attr:`topics` is what to read (the request's
    partitions, or an incremental session's), grouped as the request's ``topics`` are;
    :meth:`respond` makes the response's ``error_code``, ``session_id`` and ``responses`` from
    what was read. :attr:`error` is set when the request's session is unusable (nothing is
    read)."""

    __slots__ = ("_cache", "_create", "_ids", "_listed", "_privileged", "_request_epoch", "error", "message", "session")

    def __init__(
        self,
        cache: FetchSessionCache,
        listed: list[tuple[Key, dict[str, Any]]],
        *,
        create: bool = False,
        privileged: bool = False,
        session: FetchSession | None = None,
        request_epoch: int = FINAL_EPOCH,
        uses_topic_ids: bool = False,
    ) -> None:
        self._cache = cache
        self._ids = uses_topic_ids
        self._listed = listed
        self._create = create
        self._privileged = privileged
        self._request_epoch = request_epoch
        self.session = session
        self.error = 0
        self.message = ""

    @classmethod
    def failed(cls, cache: FetchSessionCache, code: int, message: str) -> FetchContext:
        ctx = cls(cache, [])
        ctx.error = code
        ctx.message = message
        return ctx

    @property
    def topics(self) -> list[dict[str, Any]]:
        """The partitions to read, as a Fetch request's ``topics`` (consecutive partitions of
        one topic grouped)."""
        pairs: Iterable[tuple[Key, dict[str, Any]]]
        if self.session is not None:
            pairs = ((key, cached.fields) for key, cached in self.session.partitions.items())
        else:
            pairs = self._listed
        topics: list[dict[str, Any]] = []
        for (name, _), fields in pairs:
            if not topics or topics[-1]["topic"] != name:
                topics.append({"topic": name, "partitions": []})
            topics[-1]["partitions"].append(fields)
        return topics

    def respond(self, responses: list[dict[str, Any]]) -> tuple[int, int, list[dict[str, Any]]]:
        """(error code, session id, responses) for what was read (``responses`` as
        :attr:`topics` grouped it, each partition with ``records``, ``error_code``,
        ``high_watermark`` and ``log_start_offset``). A full fetch makes its session here; an
        incremental one leaves out the unchanged partitions (none of which has records)."""
        if self.error:
            return self.error, INVALID_SESSION_ID, []
        session = self.session
        if session is None:
            if not self._create:
                return 0, INVALID_SESSION_ID, responses
            partitions: dict[Key, CachedPartition] = {}
            listed = dict(self._listed)
            for topic in responses:
                for out in topic["partitions"]:
                    key = (topic["topic"], out["partition_index"])
                    cached = CachedPartition(listed[key])
                    cached.high_watermark = out["high_watermark"]
                    cached.log_start_offset = out["log_start_offset"]
                    partitions[key] = cached
            return 0, self._cache.maybe_create(self._privileged, partitions, self._ids), responses
        if session.epoch != next_epoch(self._request_epoch):
            # Another request used the session while this one waited (a duplicate request).
            return InvalidFetchSessionEpochError.code, session.id, []
        kept = []
        moved: list[Key] = []
        for topic in responses:
            name = topic["topic"]
            parts = []
            for out in topic["partitions"]:
                key = (name, out["partition_index"])
                cached = session.partitions[key]
                if cached.must_respond(out, True):
                    parts.append(out)
                    if _has_records(out["records"]):
                        moved.append(key)
            if parts:
                # The topic's other fields (its topic_id from v13 on) go with the partitions kept.
                kept.append({**topic, "partitions": parts})
        for key in moved:
            # Round robin: partitions that returned data are read last next time.
            session.partitions[key] = session.partitions.pop(key)
        return 0, session.id, kept
