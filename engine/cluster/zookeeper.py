"""The coordination service interface (:mod:`seglog.cluster.coordinator`) over a real
ZooKeeper ensemble, through ``kazoo`` — what node processes use.

Each :meth:`ZooKeeperCoordinator.connect` opens one ZooKeeper session (one ``KazooClient``), so a
node's ephemeral registration and its ``/controller`` znode vanish when its session expires:
session expiry is node death, as in Kafka's ZooKeeper mode. The znode layout is the one in
:mod:`seglog.cluster.metadata`; a znode's ``czxid`` is ZooKeeper's own zxid, so broker
epochs are ZooKeeper's.

How the interface maps onto ZooKeeper:

* calls are synchronous with a bound: each waits at most ``operation_timeout_ms`` (default: the
  session timeout) and raises :class:`ConnectionLossError` when the service cannot be reached —
  also at once while the client is disconnected, so a node's thread never blocks on a dead
  server for longer than that;
* once ZooKeeper reports the session expired (or kazoo moved to a new session), the session
  object raises :class:`SessionExpiredError` forever and its client is stopped; the node opens a
  new one with ``connect`` (kazoo would otherwise silently continue in a fresh session without
  the ephemerals);
* watch callbacks run on kazoo's thread; they are handed to ``post`` (for a node on an asyncio
  loop: ``loop.call_soon_threadsafe``) so they run on the node's own thread. When the connection
  drops, kazoo forgets every watch; each is delivered once, as a ``"reset"`` event, after the
  client reconnects within the same session, so its owner re-reads and re-arms;
* ``multi`` is a ZooKeeper transaction. Results: the new :class:`Stat` for ``SetData``, ``None``
  for ``Check`` and ``Delete``, and for ``Create`` a stat read right after the commit;
* ``create(..., ephemeral=True, replace=True)`` on a znode another session owns is a
  transaction deleting it (at the version just read) and creating it again, so the new owner
  gets a new ``czxid``.

The ``reachable`` predicate of :meth:`connect` is honoured on the calling side only: while it
is false calls fail with :class:`ConnectionLossError`, but kazoo keeps the session alive. To
expire a session for real, stop the process (SIGSTOP/SIGKILL) or close the client's socket.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from seglog.cluster.coordinator import (
    BadVersionError,
    Check,
    ConnectionLossError,
    CoordinatorError,
    Create,
    Delete,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    SessionExpiredError,
    SetData,
    Stat,
    WatchEvent,
    WatchFn,
)

log = logging.getLogger("seglog.cluster.zookeeper")
# kazoo's own messages (connection drops are routine: a killed server, a paused process) go
# through the application's logging setup, never Python's last-resort stderr handler.
_kazoo_log = logging.getLogger("seglog.cluster.zookeeper.kazoo")
_kazoo_log.addHandler(logging.NullHandler())

Post = Callable[[Callable[[], None]], object]

_KINDS = {"CREATED": "created", "DELETED": "deleted", "CHANGED": "changed", "CHILD": "children"}


def _kazoo() -> Any:
    try:
        import kazoo.client  # type: ignore[import-untyped]
        import kazoo.exceptions  # type: ignore[import-untyped]
        import kazoo.protocol.states  # type: ignore[import-untyped]
        import kazoo.retry  # type: ignore[import-untyped]
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ImportError("the ZooKeeper coordinator needs kazoo: pip install 'seglog[zookeeper]'") from exc
    return kazoo


def _stat(zs: Any) -> Stat:
    return Stat(zs.version, zs.czxid, zs.mzxid, zs.ephemeralOwner)


class ZooKeeperSession:
    """One ZooKeeper session (the :class:`~seglog.cluster.coordinator.CoordinatorSession`
    interface); see module docs."""

    def __init__(
        self, client: Any, post: Post, reachable: Callable[[], bool] | None, operation_timeout_s: float
    ) -> None:
        self._kz = _kazoo()
        self._client = client
        self._post = post
        self._reachable = reachable
        self._timeout = operation_timeout_s
        self._id: int = client.client_id[0]
        self._expired = False
        self._lock = threading.Lock()
        self._resets: list[WatchFn] = []
        client.add_listener(self._on_state)

    # -- state ------------------------------------------------------------------------------------

    @property
    def session_id(self) -> int:
        return self._id

    @property
    def expired(self) -> bool:
        if not self._expired and self._client.client_id is not None and self._client.client_id[0] != self._id:
            self._mark_expired()
        return self._expired

    @property
    def client(self) -> Any:
        """The underlying ``KazooClient`` (tests use it to break the connection)."""
        return self._client

    def _on_state(self, state: Any) -> None:
        states = self._kz.protocol.states.KazooState
        if state == states.LOST:
            self._mark_expired()
        elif state == states.CONNECTED:
            if self._client.client_id is not None and self._client.client_id[0] != self._id:
                self._mark_expired()
                return
            with self._lock:
                resets, self._resets = self._resets, []
            for fn in resets:
                self._deliver(fn, WatchEvent("reset", ""))

    def _mark_expired(self) -> None:
        with self._lock:
            if self._expired:
                return
            self._expired = True
            self._resets.clear()
        log.info("ZooKeeper session 0x%x expired", self._id)
        # Stopping from kazoo's own threads would deadlock; kazoo would also reconnect in a new
        # session that owns none of our ephemerals.
        threading.Thread(target=self._stop_client, name="seglog-zk-stop", daemon=True).start()

    def _stop_client(self) -> None:
        try:
            self._client.stop()
            self._client.close()
        except Exception:  # best effort on a dead session
            log.debug("stopping an expired client failed", exc_info=True)

    # -- calls ------------------------------------------------------------------------------------

    @contextmanager
    def _call(self) -> Iterator[None]:
        if self._reachable is not None and not self._reachable():
            raise ConnectionLossError(f"session 0x{self._id:x} cannot reach ZooKeeper")
        if self.expired:
            raise SessionExpiredError(f"session 0x{self._id:x} has expired")
        if not self._client.connected:
            raise ConnectionLossError(f"session 0x{self._id:x} is disconnected from ZooKeeper")
        exc = self._kz.exceptions
        try:
            yield
        except exc.NoNodeError as e:
            raise NoNodeError(str(e) or "no such znode") from e
        except exc.NodeExistsError as e:
            raise NodeExistsError(str(e) or "znode exists") from e
        except exc.BadVersionError as e:
            raise BadVersionError(str(e) or "version mismatch") from e
        except exc.NotEmptyError as e:
            raise NotEmptyError(str(e) or "znode has children") from e
        except exc.SessionExpiredError as e:
            self._mark_expired()
            raise SessionExpiredError(f"session 0x{self._id:x} has expired") from e
        except (exc.ConnectionLoss, exc.ConnectionClosedError, exc.OperationTimeoutError) as e:
            if self.expired:
                raise SessionExpiredError(f"session 0x{self._id:x} has expired") from e
            raise ConnectionLossError(f"ZooKeeper unreachable: {type(e).__name__}") from e
        except self._client.handler.timeout_exception as e:
            raise ConnectionLossError(f"ZooKeeper did not answer within {self._timeout:.1f} s") from e
        except exc.ZookeeperError as e:
            raise CoordinatorError(f"{type(e).__name__}: {e}") from e

    def _wait(self, result: Any) -> Any:
        return result.get(timeout=self._timeout)

    def _watch(self, fn: WatchFn | None) -> Callable[[Any], None] | None:
        if fn is None:
            return None

        def fire(ev: Any) -> None:
            if self._expired:
                return
            kind = _KINDS.get(str(ev.type))
            if kind is None:
                # The connection dropped and kazoo dropped its watches: deliver once reconnected.
                with self._lock:
                    if not self._expired:
                        self._resets.append(fn)
                if self._client.connected and not self._expired:
                    self._on_state(self._kz.protocol.states.KazooState.CONNECTED)
                return
            self._deliver(fn, WatchEvent(kind, ev.path))

        return fire

    def _deliver(self, fn: WatchFn, ev: WatchEvent) -> None:
        def run() -> None:
            if not self._expired:
                fn(ev)

        self._post(run)

    def create(
        self, path: str, data: bytes, *, ephemeral: bool = False, replace: bool = False, make_parents: bool = False
    ) -> Stat:
        with self._call():
            try:
                _, zs = self._wait(
                    self._client.create_async(
                        path, bytes(data), ephemeral=ephemeral, makepath=make_parents, include_data=True
                    )
                )
                return _stat(zs)
            except self._kz.exceptions.NodeExistsError:
                if not (replace and ephemeral):
                    raise
                st = self._wait(self._client.exists_async(path))
                if st is None or st.ephemeralOwner in (0, self._id):
                    raise
                t = self._client.transaction()
                t.delete(path, st.version)
                t.create(path, bytes(data), ephemeral=True)
                self._raise_failed(self._wait(t.commit_async()))
                zs2 = self._wait(self._client.exists_async(path))
                if zs2 is None:
                    raise self._kz.exceptions.NoNodeError(f"{path} vanished right after its creation") from None
                return _stat(zs2)

    def create_sequential(self, prefix: str, data: bytes) -> str:
        with self._call():
            return str(self._wait(self._client.create_async(prefix, bytes(data), sequence=True)))

    def get(self, path: str, watch: WatchFn | None = None) -> tuple[bytes, Stat]:
        with self._call():
            data, zs = self._wait(self._client.get_async(path, watch=self._watch(watch)))
            return bytes(data or b""), _stat(zs)

    def exists(self, path: str, watch: WatchFn | None = None) -> Stat | None:
        with self._call():
            zs = self._wait(self._client.exists_async(path, watch=self._watch(watch)))
            return None if zs is None else _stat(zs)

    def children(self, path: str, watch: WatchFn | None = None) -> list[str]:
        with self._call():
            return sorted(self._wait(self._client.get_children_async(path, watch=self._watch(watch))))

    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        with self._call():
            return _stat(self._wait(self._client.set_async(path, bytes(data), version)))

    def delete(self, path: str, version: int = -1) -> None:
        with self._call():
            self._wait(self._client.delete_async(path, version))

    def multi(self, ops: Sequence[Op]) -> list[Stat | None]:
        with self._call():
            t = self._client.transaction()
            for op in ops:
                if isinstance(op, Check):
                    t.check(op.path, op.version)
                elif isinstance(op, Create):
                    t.create(op.path, bytes(op.data), ephemeral=op.ephemeral)
                elif isinstance(op, SetData):
                    t.set_data(op.path, bytes(op.data), op.version)
                elif isinstance(op, Delete):
                    t.delete(op.path, op.version)
                else:  # pragma: no cover - typing guards this
                    raise TypeError(f"unknown operation {op!r}")
            results = self._wait(t.commit_async())
            self._raise_failed(results)
            out: list[Stat | None] = []
            for op, r in zip(ops, results):
                if isinstance(op, SetData):
                    out.append(_stat(r))
                elif isinstance(op, Create):
                    zs = self._wait(self._client.exists_async(op.path))
                    out.append(None if zs is None else _stat(zs))
                else:
                    out.append(None)
            return out

    def _raise_failed(self, results: list[Any]) -> None:
        rolled_back = self._kz.exceptions.RolledBackError
        failures = [r for r in results if isinstance(r, Exception)]
        for r in failures:
            if not isinstance(r, rolled_back):
                raise r
        if failures:
            raise failures[0]

    def heartbeat(self) -> None:
        """kazoo pings the server itself; this only reports the session's state, raising as any
        call would."""
        with self._call():
            pass

    def close(self) -> None:
        """End the session now: its ephemeral znodes go at once."""
        with self._lock:
            was = self._expired
            self._expired = True
            self._resets.clear()
        if was:
            return
        try:
            self._client.stop()
            self._client.close()
        except Exception:  # closing a broken connection
            log.debug("closing the ZooKeeper client failed", exc_info=True)


class ZooKeeperCoordinator:
    """The :class:`~seglog.cluster.coordinator.Coordinator` interface on a ZooKeeper
    ensemble at ``hosts`` (``host:port[,host:port...][/chroot]``, ``zookeeper.connect``)."""

    def __init__(
        self,
        hosts: str,
        *,
        post: Post | None = None,
        session_timeout_ms: int = 18_000,
        connection_timeout_ms: int | None = None,
        operation_timeout_ms: int | None = None,
    ) -> None:
        _kazoo()
        if not hosts:
            raise ValueError("zookeeper.connect is empty: give host:port[,host:port...][/chroot]")
        self.hosts = hosts
        self.post: Post = post or (lambda fn: fn())
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms if connection_timeout_ms is not None else session_timeout_ms
        self.operation_timeout_ms = operation_timeout_ms
        self._reader: Any = None
        self._lock = threading.Lock()

    def _client(self, session_timeout_ms: int) -> Any:
        kz = _kazoo()
        retry = kz.retry.KazooRetry(max_tries=-1, delay=0.05, max_delay=0.5)
        return kz.client.KazooClient(
            hosts=self.hosts,
            timeout=session_timeout_ms / 1000,
            connection_retry=retry,
            randomize_hosts=False,
            logger=_kazoo_log,
        )

    def connect(
        self,
        *,
        reachable: Callable[[], bool] | None = None,
        session_timeout_ms: int | None = None,
        post: Post | None = None,
    ) -> ZooKeeperSession:
        """Open a new session (blocks up to ``connection_timeout_ms``); its watch callbacks go
        to ``post`` (default: the coordinator's)."""
        if reachable is not None and not reachable():
            raise ConnectionLossError("cannot reach ZooKeeper to open a session")
        timeout_ms = session_timeout_ms or self.session_timeout_ms
        client = self._client(timeout_ms)
        try:
            client.start(timeout=self.connection_timeout_ms / 1000)
        except Exception as exc:  # kazoo raises the handler's timeout exception
            try:
                client.stop()
                client.close()
            except Exception:  # noqa: BLE001
                pass
            raise ConnectionLossError(
                f"cannot reach ZooKeeper at {self.hosts} within {self.connection_timeout_ms} ms: {exc}"
            ) from exc
        op_ms = self.operation_timeout_ms or timeout_ms
        return ZooKeeperSession(client, post or self.post, reachable, op_ms / 1000)

    # -- inspection (tests and tools), on a session of its own -------------------------------

    def _read_client(self) -> Any:
        with self._lock:
            if self._reader is None or not self._reader.connected:
                if self._reader is not None:
                    self._reader.stop()
                    self._reader.close()
                self._reader = self._client(self.session_timeout_ms)
                self._reader.start(timeout=self.connection_timeout_ms / 1000)
            return self._reader

    def read(self, path: str) -> tuple[bytes, Stat] | None:
        """Read without a node's session (tests, tools)."""
        kz = _kazoo()
        try:
            data, zs = self._read_client().get(path)
        except kz.exceptions.NoNodeError:
            return None
        return bytes(data or b""), _stat(zs)

    def children_of(self, path: str) -> list[str]:
        kz = _kazoo()
        try:
            return sorted(self._read_client().get_children(path))
        except kz.exceptions.NoNodeError:
            return []

    def close(self) -> None:
        with self._lock:
            if self._reader is not None:
                self._reader.stop()
                self._reader.close()
                self._reader = None


def ensure_chroot(hosts: str, timeout_s: float = 10) -> None:
    """Create the chroot path of a ``zookeeper.connect`` string if it is missing (ZooKeeper
    does not create it; Kafka asks operators to)."""
    servers, slash, chroot = hosts.partition("/")
    if not slash or not chroot.strip("/"):
        return
    kz = _kazoo()
    client = kz.client.KazooClient(hosts=servers, timeout=timeout_s, logger=_kazoo_log)
    client.start(timeout=timeout_s)
    try:
        client.ensure_path("/" + chroot.strip("/"))
    finally:
        client.stop()
        client.close()
