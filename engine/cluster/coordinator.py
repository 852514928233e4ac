"""The coordination service interface and its in-memory implementation.

The replication layer keeps the cluster's shared state — who is controller, which nodes are
alive (and their broker epochs), topics, and each partition's leader, leader epoch and ISR —
in a small hierarchical store with ZooKeeper's semantics:

* znodes addressed by ``/``-separated paths, holding bytes, each with a ``version`` that every
  ``set`` bumps; ``set``/``delete``/``check`` with ``version >= 0`` are compare-and-set;
* *ephemeral* znodes owned by a session and deleted when it ends;
* sessions kept alive by heartbeats and expired ``session_timeout_ms`` after the last one,
  measured on the injected monotonic clock;
* one-shot watches (data and children), delivered through the scheduler;
* ``multi``: a list of operations applied atomically or not at all;
* a global transaction counter (``zxid``); a znode's ``czxid`` is the zxid that created it (a
  node registration's ``czxid`` is its *broker epoch*, as in Kafka's ZooKeeper mode);
* *sequential* znodes (``create_sequential``): the name gets the number of children ever created
  under the parent appended as ten zero-padded digits, so names under one parent
  never repeat and sort in creation order (a node's log dir failure notifications,
  ``/log_dir_event_notification/log_dir_event_NNNNNNNNNN``, as Kafka's brokers write them).

One deliberate extension: ``create(..., ephemeral=True, replace=True)`` takes over an
ephemeral znode another session owns, giving it a new ``czxid``. A node restarting within its
old session's timeout uses it to register at once with a new broker epoch (KIP-903's fencing of
the previous incarnation) instead of waiting for the old session to expire.

:class:`InMemoryCoordinator` serves one process (embedded clusters, the simulation). Every
call holds one re-entrant lock, so sessions may be used from several threads (an in-process
cluster's nodes, each on a loop of its own); a session opened with ``post`` has its watch events
handed to ``post`` (e.g. its node loop's ``call_soon_threadsafe``) instead of the scheduler. Its
sessions take a ``reachable`` predicate: while it is false every call fails with
:class:`ConnectionLossError` and heartbeats do not arrive, which is how the simulation cuts a
node off from the coordinator. Watch events for an unreachable session wait until it is
reachable again (ZooKeeper delivers them after a reconnect within the session).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TypeVar

from seglog.errors import SeglogError
from seglog.util.clock import Clock, Scheduler

log = logging.getLogger("seglog.cluster.coordinator")

_T = TypeVar("_T")


class CoordinatorError(SeglogError):
    """Base of the coordination service's errors."""


class NoNodeError(CoordinatorError):
    pass


class NodeExistsError(CoordinatorError):
    pass


class BadVersionError(CoordinatorError):
    """A compare-and-set found another version than the expected one."""


class NotEmptyError(CoordinatorError):
    pass


class SessionExpiredError(CoordinatorError):
    """The session ended (timed out or closed); its ephemeral znodes are gone."""


class ConnectionLossError(CoordinatorError):
    """The coordination service cannot be reached; the operation did not happen."""


@dataclasses.dataclass(frozen=True, slots=True)
class Stat:
    version: int
    czxid: int
    mzxid: int
    ephemeral_owner: int  # 0 for persistent znodes


@dataclasses.dataclass(frozen=True, slots=True)
class WatchEvent:
    kind: str  # "created" | "deleted" | "changed" | "children"
    path: str


WatchFn = Callable[[WatchEvent], None]


# -- multi operations -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Check:
    path: str
    version: int


@dataclasses.dataclass(frozen=True, slots=True)
class Create:
    path: str
    data: bytes
    ephemeral: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class SetData:
    path: str
    data: bytes
    version: int = -1


@dataclasses.dataclass(frozen=True, slots=True)
class Delete:
    path: str
    version: int = -1


Op = Check | Create | SetData | Delete


class CoordinatorSession(Protocol):
    """What a node holds: one session of the coordination service."""

    @property
    def session_id(self) -> int: ...

    @property
    def expired(self) -> bool: ...

    def create(
        self, path: str, data: bytes, *, ephemeral: bool = False, replace: bool = False, make_parents: bool = False
    ) -> Stat: ...

    def create_sequential(self, prefix: str, data: bytes) -> str:
        """Create the persistent znode ``prefix`` + the parent's ten-digit sequence number;
        returns its path."""
        ...

    def get(self, path: str, watch: WatchFn | None = None) -> tuple[bytes, Stat]: ...

    def exists(self, path: str, watch: WatchFn | None = None) -> Stat | None: ...

    def children(self, path: str, watch: WatchFn | None = None) -> list[str]: ...

    def set(self, path: str, data: bytes, version: int = -1) -> Stat: ...

    def delete(self, path: str, version: int = -1) -> None: ...

    def multi(self, ops: Sequence[Op]) -> list[Stat | None]: ...

    def heartbeat(self) -> None: ...

    def close(self) -> None: ...


class Coordinator(Protocol):
    def connect(
        self, *, reachable: Callable[[], bool] | None = None, session_timeout_ms: int | None = None
    ) -> CoordinatorSession: ...


#: Runs a callable on the thread that owns a session (``loop.call_soon_threadsafe``).
Post = Callable[[Callable[[], None]], object]


def _locked(fn: Callable[..., _T]) -> Callable[..., _T]:
    """Run a session method holding its coordinator's lock."""

    @functools.wraps(fn)
    def run(self: InMemorySession, *args: object, **kwargs: object) -> _T:
        with self._coord._lock:
            return fn(self, *args, **kwargs)

    return run


# -- in-memory implementation ---------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class _Znode:
    data: bytes
    version: int
    czxid: int
    mzxid: int
    owner: int


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


def _check_path(path: str) -> None:
    if not path.startswith("/") or (path != "/" and path.endswith("/")) or "//" in path:
        raise ValueError(f"invalid znode path {path!r}: absolute, '/'-separated, no trailing '/'")


class InMemorySession:
    def __init__(
        self,
        coord: InMemoryCoordinator,
        session_id: int,
        timeout_ms: int,
        reachable: Callable[[], bool] | None,
        post: Post | None = None,
    ) -> None:
        self._coord = coord
        self.post = post
        self._id = session_id
        self.timeout_ms = timeout_ms
        self._reachable = reachable
        self.last_heard_ms = coord.clock.monotonic_ms()
        self._expired = False
        self._pending_events: list[tuple[WatchFn, WatchEvent]] = []

    @property
    def session_id(self) -> int:
        return self._id

    @property
    def expired(self) -> bool:
        return self._expired

    def reachable(self) -> bool:
        return self._reachable is None or self._reachable()

    def _enter(self) -> None:
        if not self.reachable():
            raise ConnectionLossError(f"session 0x{self._id:x} cannot reach the coordinator")
        if self._expired:
            raise SessionExpiredError(f"session 0x{self._id:x} has expired")
        self.last_heard_ms = self._coord.clock.monotonic_ms()
        self._flush_events()

    def _flush_events(self) -> None:
        if not self._pending_events:
            return
        events, self._pending_events = self._pending_events, []
        for fn, ev in events:
            self._coord._deliver(self, fn, ev)

    @_locked
    def create(
        self, path: str, data: bytes, *, ephemeral: bool = False, replace: bool = False, make_parents: bool = False
    ) -> Stat:
        self._enter()
        if make_parents:
            parts = path.split("/")[1:-1]
            p = ""
            for part in parts:
                p += "/" + part
                if p not in self._coord._nodes:
                    self._coord._apply(self, [Create(p, b"")])
        if replace and ephemeral:
            node = self._coord._nodes.get(path)
            if node is not None and node.owner not in (0, self._id):
                res = self._coord._apply(self, [Delete(path), Create(path, data, True)])
                assert res[1] is not None
                return res[1]
        res = self._coord._apply(self, [Create(path, bytes(data), ephemeral)])
        assert res[0] is not None
        return res[0]

    @_locked
    def create_sequential(self, prefix: str, data: bytes) -> str:
        self._enter()
        _check_path(prefix)
        path = f"{prefix}{self._coord._cversion.get(_parent(prefix), 0):010d}"
        self._coord._apply(self, [Create(path, bytes(data))])
        return path

    @_locked
    def get(self, path: str, watch: WatchFn | None = None) -> tuple[bytes, Stat]:
        self._enter()
        node = self._coord._nodes.get(path)
        if node is None:
            raise NoNodeError(f"no znode {path}")
        if watch is not None:
            self._coord._add_watch(self, path, watch, children=False)
        return node.data, self._coord._stat(node)

    @_locked
    def exists(self, path: str, watch: WatchFn | None = None) -> Stat | None:
        self._enter()
        if watch is not None:
            self._coord._add_watch(self, path, watch, children=False)
        node = self._coord._nodes.get(path)
        return None if node is None else self._coord._stat(node)

    @_locked
    def children(self, path: str, watch: WatchFn | None = None) -> list[str]:
        self._enter()
        if path not in self._coord._nodes:
            raise NoNodeError(f"no znode {path}")
        if watch is not None:
            self._coord._add_watch(self, path, watch, children=True)
        return self._coord._children(path)

    @_locked
    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        self._enter()
        res = self._coord._apply(self, [SetData(path, bytes(data), version)])
        assert res[0] is not None
        return res[0]

    @_locked
    def delete(self, path: str, version: int = -1) -> None:
        self._enter()
        self._coord._apply(self, [Delete(path, version)])

    @_locked
    def multi(self, ops: Sequence[Op]) -> list[Stat | None]:
        self._enter()
        return self._coord._apply(self, list(ops))

    @_locked
    def heartbeat(self) -> None:
        """Keep the session alive; raises like any call when unreachable or expired."""
        self._enter()

    @_locked
    def close(self) -> None:
        """End the session now (its ephemeral znodes go at once), if it can be reached."""
        if self._expired:
            return
        if not self.reachable():
            return  # the session will time out instead
        self._coord._expire(self, reason="closed")


class InMemoryCoordinator:
    """A coordination service in this process, on the injected clock (see module docs)."""

    def __init__(
        self, clock: Clock, scheduler: Scheduler, *, session_timeout_ms: int = 18_000, tick_ms: int | None = None
    ) -> None:
        self.clock = clock
        self.scheduler = scheduler
        self.session_timeout_ms = session_timeout_ms
        self._nodes: dict[str, _Znode] = {"/": _Znode(b"", 0, 0, 0, 0)}
        # How many children were ever created under a znode: the sequence number of its next
        # sequential child (ZooKeeper's server numbers them so; deletions do not count).
        self._cversion: dict[str, int] = {}
        self._zxid = 0
        self._session_ids = itertools.count(0x1000)
        self._sessions: dict[int, InMemorySession] = {}
        self._watches: dict[tuple[str, bool], list[tuple[InMemorySession, WatchFn]]] = {}
        self._lock = threading.RLock()
        self._tick_ms = tick_ms if tick_ms is not None else max(1, min(session_timeout_ms // 10, 200))
        self._task = scheduler.schedule(
            "coordinator session expiry", self._expire_sessions, delay_ms=self._tick_ms, period_ms=self._tick_ms
        )
        self.expired_sessions = 0

    def connect(
        self,
        *,
        reachable: Callable[[], bool] | None = None,
        session_timeout_ms: int | None = None,
        post: Post | None = None,
    ) -> InMemorySession:
        with self._lock:
            sid = next(self._session_ids)
            s = InMemorySession(self, sid, session_timeout_ms or self.session_timeout_ms, reachable, post)
            if not s.reachable():
                raise ConnectionLossError("cannot reach the coordinator to open a session")
            self._sessions[sid] = s
            return s

    def close(self) -> None:
        self.scheduler.cancel(self._task)

    # -- inspection (tests and tools) ---------------------------------------------------------

    def dump(self) -> dict[str, bytes]:
        with self._lock:
            return {p: n.data for p, n in sorted(self._nodes.items())}

    def read(self, path: str) -> tuple[bytes, Stat] | None:
        """Read without a session (tests, the simulation's checker)."""
        with self._lock:
            node = self._nodes.get(path)
            return None if node is None else (node.data, self._stat(node))

    def children_of(self, path: str) -> list[str]:
        with self._lock:
            return self._children(path) if path in self._nodes else []

    # -- internals ----------------------------------------------------------------------------

    @staticmethod
    def _stat(node: _Znode) -> Stat:
        return Stat(node.version, node.czxid, node.mzxid, node.owner)

    def _children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        out = []
        for p in self._nodes:
            if p.startswith(prefix) and p != "/" and "/" not in p[len(prefix) :]:
                out.append(p[len(prefix) :])
        return sorted(out)

    def _add_watch(self, s: InMemorySession, path: str, fn: WatchFn, *, children: bool) -> None:
        self._watches.setdefault((path, children), []).append((s, fn))

    def _fire(self, path: str, kind: str, children: bool) -> None:
        for s, fn in self._watches.pop((path, children), []):
            if not s._expired:
                ev = WatchEvent(kind, path)
                deliver = functools.partial(self._deliver, s, fn, ev)
                if s.post is not None:
                    try:
                        s.post(deliver)
                    except RuntimeError:
                        pass  # the session's owner (its event loop) is gone: nobody to tell
                else:
                    self.scheduler.schedule(f"watch {path}", deliver)

    def _deliver(self, s: InMemorySession, fn: WatchFn, ev: WatchEvent) -> None:
        with self._lock:
            if s._expired:
                return
            if not s.reachable():
                s._pending_events.append((fn, ev))
                return
        fn(ev)

    def _apply(self, s: InMemorySession, ops: list[Op]) -> list[Stat | None]:
        # Validate against a scratch view first: all or nothing.
        nodes = self._nodes
        created: dict[str, _Znode | None] = {}

        def lookup(p: str) -> _Znode | None:
            return created[p] if p in created else nodes.get(p)

        zxid = self._zxid + 1
        results: list[Stat | None] = []
        events: list[tuple[str, str, bool]] = []
        for op in ops:
            _check_path(op.path)
            node = lookup(op.path)
            if isinstance(op, Check):
                if node is None:
                    raise NoNodeError(f"no znode {op.path}")
                if op.version >= 0 and node.version != op.version:
                    raise BadVersionError(f"{op.path} is at version {node.version}, expected {op.version}")
                results.append(self._stat(node))
            elif isinstance(op, Create):
                if node is not None:
                    raise NodeExistsError(f"znode {op.path} exists")
                parent = lookup(_parent(op.path))
                if parent is None:
                    raise NoNodeError(f"no parent znode for {op.path}")
                if parent.owner:
                    raise CoordinatorError(f"ephemeral znode {_parent(op.path)} cannot have children")
                new = _Znode(op.data, 0, zxid, zxid, s._id if op.ephemeral else 0)
                created[op.path] = new
                results.append(self._stat(new))
                events += [(op.path, "created", False), (_parent(op.path), "children", True)]
            elif isinstance(op, SetData):
                if node is None:
                    raise NoNodeError(f"no znode {op.path}")
                if op.version >= 0 and node.version != op.version:
                    raise BadVersionError(f"{op.path} is at version {node.version}, expected {op.version}")
                new = _Znode(op.data, node.version + 1, node.czxid, zxid, node.owner)
                created[op.path] = new
                results.append(self._stat(new))
                events.append((op.path, "changed", False))
            elif isinstance(op, Delete):
                if node is None:
                    raise NoNodeError(f"no znode {op.path}")
                if op.version >= 0 and node.version != op.version:
                    raise BadVersionError(f"{op.path} is at version {node.version}, expected {op.version}")
                prefix = op.path + "/"
                if any(p.startswith(prefix) and lookup(p) is not None for p in list(nodes) + list(created)):
                    raise NotEmptyError(f"znode {op.path} has children")
                created[op.path] = None
                results.append(None)
                events += [(op.path, "deleted", False), (_parent(op.path), "children", True)]
            else:  # pragma: no cover - typing guards this
                raise TypeError(f"unknown operation {op!r}")
        self._zxid = zxid
        for p, n in created.items():
            if n is None:
                nodes.pop(p, None)
            else:
                nodes[p] = n
        for path, kind, children in events:
            if kind == "created":
                up = _parent(path)
                self._cversion[up] = self._cversion.get(up, 0) + 1
            self._fire(path, kind, children)
        return results

    def _expire(self, s: InMemorySession, *, reason: str) -> None:
        if s._expired:
            return
        s._expired = True
        self._sessions.pop(s._id, None)
        self.expired_sessions += reason != "closed"
        owned = [p for p, n in self._nodes.items() if n.owner == s._id]
        # Children first (ephemeral znodes have none, but keep the order safe).
        for p in sorted(owned, key=len, reverse=True):
            try:
                self._apply(s, [Delete(p)])
            except CoordinatorError:  # pragma: no cover - an owned znode is always deletable
                log.exception("could not delete ephemeral znode %s", p)
        for key in list(self._watches):
            kept = [(ws, fn) for ws, fn in self._watches[key] if ws is not s]
            if kept:
                self._watches[key] = kept
            else:
                del self._watches[key]
        log.debug("session 0x%x %s; removed %s", s._id, reason, owned)

    def _expire_sessions(self) -> None:
        with self._lock:
            now = self.clock.monotonic_ms()
            for s in list(self._sessions.values()):
                if now - s.last_heard_ms > s.timeout_ms:
                    self._expire(s, reason="expired")

    def sessions(self) -> Iterable[InMemorySession]:
        with self._lock:
            return list(self._sessions.values())
