"""F8, controller churn (``docs/replication.md`` §9.3): the controller dies or stops while an ISR
change is in flight, and stale partition-state changes are delivered again.

How an ISR change travels: the partition's leader sends an ``AlterPartitionRequest`` (its
broker epoch, leader epoch and the *partition epoch* it knows — the state znode's version) to
the controller over its link to it; the controller checks those against its state and writes
the new state with a ZooKeeper ``multi``: ``Check(/controller_epoch, its version)`` plus
``SetData(state znode, new state, partition epoch)``. So a stale change can come back two ways,
and both are replayed here:

* **the request path** — :class:`FrameTap` keeps the exact bytes of every AlterPartition request
  (Kafka's, on the listener between nodes) a node sent through the proxy; :func:`replay_frame`
  sends those bytes again, later, to the current controller on a fresh connection (as a
  duplicating network would);
* **the ZooKeeper path** — :class:`ZkWrite` is one state write as the controller made it (the
  data, the version it expected and the controller-epoch version it checked), rebuilt from the
  observer's samples; :func:`replay_zk_write` issues it again through kazoo, as a plain
  conditional ``set`` and as the controller's ``multi``.

The rules: a replayed request whose leader epoch or partition epoch is older than the state at
the time it is sent must be refused, and no replayed ZooKeeper write may land; afterwards the
leader epoch, partition epoch and ISR are where they were (or moved on by the cluster itself),
never back. (A replayed request that is still *current* — its original was never applied — may
legitimately be applied: a late delivery is indistinguishable from a slow one.)
"""

from __future__ import annotations

import dataclasses
import socket
import struct
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from seglog.cluster import kafka_messages as km
from seglog.cluster.kafka_listener import topic_id
from seglog.cluster.messages import NONE, AlterPartitionRequest, error_message
from seglog.cluster.metadata import CONTROLLER_EPOCH_PATH, PartitionState, state_path
from seglog.errors import InvalidRequestError
from seglog.kafka import codec
from seglog.kafka.connection import skip_tagged

_U32 = struct.Struct(">I")
_REQUEST_HEAD = struct.Struct(">ihhih")  # frame size, api key, api version, correlation id, client id length
_ALTER_PARTITION = next(a for a in km.NODE_APIS if a.request is AlterPartitionRequest)


def request_frame(msg: Any, corr: int = 1, src: int = -1) -> bytes:
    """``msg`` (a request of ``seglog.cluster.messages``) as the Kafka request frame a node
    ``src`` sends another (``seglog.cluster.kafka_messages``): size, header v2 with the client id
    ``broker-<src>``, body."""
    api, body = km.request_to_kafka(msg)
    payload = codec.encode_to_bytes(f"{api.name}Request", api.version, body)
    cid = f"broker-{src}".encode()
    head = struct.pack(">hhih", api.key, api.version, corr, len(cid)) + cid + b"\0"  # no tagged fields
    return struct.pack(">i", len(head) + len(payload)) + head + payload


def parse_request(raw: bytes, names: Callable[[bytes], str]) -> tuple[int, int, Any]:
    """(api key, correlation id, the seglog message or None for an API nodes do not send) of one
    whole Kafka request frame; ``names`` maps topic ids back to names."""
    (size, key, version, corr, cid_len) = _REQUEST_HEAD.unpack_from(raw, 0)
    if size + 4 != len(raw):
        raise ValueError(f"frame says {size + 4} bytes, holds {len(raw)}")
    api = km.api_for_key(key)
    if api is None:
        return key, corr, None
    pos = skip_tagged(memoryview(raw), _REQUEST_HEAD.size + max(cid_len, 0))
    body, _ = codec.decode(f"{api.name}Request", version, raw, pos)
    return key, corr, km.request_from_kafka(key, body, names)


@dataclasses.dataclass(frozen=True, slots=True)
class Captured:
    link: str  # "a->b": node a's connection to node b
    time: float  # time.monotonic() when its last byte passed the proxy
    raw: bytes  # the whole request frame, exactly as sent
    tap: FrameTap

    @property
    def src(self) -> int:
        return int(self.link.split("->")[0])

    @property
    def msg(self) -> Any:
        """The request decoded (None when it does not decode: topics by id the tap was not told of)."""
        try:
            return parse_request(self.raw, self.tap.topic_name)[2]
        except (ValueError, KeyError, struct.error, InvalidRequestError):
            return None


class FrameTap:
    """Keeps every request frame of the given APIs (Kafka API keys; AlterPartition by default)
    that nodes send through the proxy links it is attached to (:meth:`attach`); cheap enough for
    fetch traffic (it reads each frame's size and API key only). Topic ids decode to the names
    it learned (:meth:`learn`)."""

    def __init__(self, keys: Iterable[int] = (_ALTER_PARTITION.key,), limit: int = 1000) -> None:
        self.keys = frozenset(keys)
        self.limit = limit
        self.frames: list[Captured] = []
        self._names: dict[bytes, str] = {}
        self._bufs: weakref.WeakKeyDictionary[object, bytearray] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def learn(self, topics: Iterable[str]) -> None:
        for t in topics:
            self._names[topic_id(t)] = t

    def topic_name(self, tid: bytes) -> str:
        return self._names[bytes(tid)]

    def attach(self, link: Any) -> None:
        name = link.name
        link.tap = lambda conn, data: self._feed(name, conn, data)

    def _feed(self, link: str, conn: object, data: bytes) -> None:
        buf = self._bufs.get(conn)
        if buf is None:
            buf = self._bufs[conn] = bytearray()
        buf += data
        while len(buf) >= 6:
            (size,) = _U32.unpack_from(buf, 0)
            if len(buf) < 4 + size:
                return
            (key,) = struct.unpack_from(">h", buf, 4)
            if key in self.keys:
                with self._lock:
                    if len(self.frames) < self.limit:
                        self.frames.append(Captured(link, time.monotonic(), bytes(buf[: 4 + size]), self))
            del buf[: 4 + size]

    def captured(self, pred: Callable[[Captured], bool] = lambda c: True) -> list[Captured]:
        with self._lock:
            return [c for c in self.frames if pred(c)]


def replay_frame(address: tuple[str, int], raw: bytes, request: Any, timeout_s: float = 10) -> Any:
    """Open a connection to a node's listener between nodes (a cluster without SASL), send
    ``raw`` — one captured Kafka request frame of ``request``, byte for byte — and return the
    decoded response (or raise ``OSError``/``TimeoutError``)."""
    (_, _, version, corr, _) = _REQUEST_HEAD.unpack_from(raw, 0)
    api = km.api_for(request)
    with socket.create_connection(address, timeout=timeout_s) as s:
        s.settimeout(timeout_s)
        s.sendall(raw)
        while True:
            frame = _read_frame(s)
            (got,) = struct.unpack_from(">i", frame, 4)
            if got != corr:
                continue
            pos = skip_tagged(memoryview(frame), 8)  # response header v1
            body, _ = codec.decode(f"{api.name}Response", version, frame, pos)
            return km.response_from_kafka(request, body)


def _read_frame(s: socket.socket) -> bytes:
    head = _recv(s, 4)
    (length,) = _U32.unpack(head)
    return head + _recv(s, length)


def _recv(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        got = s.recv(n - len(out))
        if not got:
            raise ConnectionError(f"connection closed after {len(out)} of {n} bytes")
        out += got
    return bytes(out)


def error_name(code: int) -> str:
    return "NONE" if code == NONE else error_message(code).split(":")[0]


def stale(req: AlterPartitionRequest, st: PartitionState) -> bool:
    """Whether the request is older than the state: another leader epoch or partition epoch."""
    return bool(req.leader_epoch < st.leader_epoch or req.partition_epoch < st.partition_epoch)


@dataclasses.dataclass(frozen=True, slots=True)
class ZkWrite:
    """One write of a state znode as the controller made it: ``data`` with ``version - 1``
    expected (ZooKeeper made it ``version``), checking ``/controller_epoch`` at
    ``controller_epoch_version``."""

    path: str
    data: bytes
    version: int
    controller_epoch_version: int
    controller_epoch_path: str = CONTROLLER_EPOCH_PATH


def read_write(zk: Any, topic: str, partition: int) -> ZkWrite:
    """The last write of a partition's state znode, read through the kazoo client ``zk``."""
    data, st = zk.get(state_path(topic, partition))
    _, cst = zk.get(CONTROLLER_EPOCH_PATH)
    return ZkWrite(state_path(topic, partition), bytes(data), st.version, cst.version)


def replay_zk_write(zk: Any, w: ZkWrite, *, current_version: int | None = None) -> dict[str, str]:
    """Issue ``w`` again through kazoo: as a conditional ``set`` (a ``create`` for version 0)
    and as the controller's ``multi``; with ``current_version``, also a ``multi`` that expects the znode's current
    version but the old controller epoch (a deposed controller with fresh data). Returns each
    form's outcome: ``"accepted"`` or the error's class name."""
    from kazoo.exceptions import KazooException, RolledBackError  # type: ignore[import-untyped]

    out: dict[str, str] = {}

    def attempt(name: str, fn: Callable[[], Any]) -> None:
        try:
            r = fn()
        except KazooException as exc:
            out[name] = type(exc).__name__
            return
        if isinstance(r, list):
            errs = [e for e in r if isinstance(e, Exception)]
            real = [e for e in errs if not isinstance(e, RolledBackError)]
            if errs:
                out[name] = type((real or errs)[0]).__name__
                return
        out[name] = "accepted"

    def multi(version: int) -> Any:
        t = zk.transaction()
        t.check(w.controller_epoch_path, w.controller_epoch_version)
        if version < 0:
            t.create(w.path, w.data)
        else:
            t.set_data(w.path, w.data, version)
        return t.commit()

    # Version 0 was the znode's creation (version -1 would be kazoo's unconditional write).
    if w.version == 0:
        attempt("set", lambda: zk.create(w.path, w.data))
    else:
        attempt("set", lambda: zk.set(w.path, w.data, w.version - 1))
    attempt("multi", lambda: multi(w.version - 1))
    if current_version is not None:
        attempt("multi_current", lambda: multi(current_version))
    return out


def regressed(before: PartitionState, after: PartitionState) -> list[str]:
    """What went back between two reads of a partition's state (the leader epoch, the
    partition epoch); empty when nothing did."""
    out = []
    if after.leader_epoch < before.leader_epoch:
        out.append(f"leader epoch {before.leader_epoch} -> {after.leader_epoch}")
    if after.partition_epoch < before.partition_epoch:
        out.append(f"partition epoch {before.partition_epoch} -> {after.partition_epoch}")
    return out


def replay_all(
    cluster: Any, tap: FrameTap, zk_writes: Sequence[ZkWrite], topics: dict[str, int], *, zk: Any, frames: int = 4
) -> dict[str, Any]:
    """Replay the last ``frames`` captured AlterPartition frames (newest first: reordered) to the
    current controller and every earlier state write in ``zk_writes`` to ZooKeeper. Returns what
    happened, with ``stale_accepted``: the replays that should have been refused and were not."""
    ctl = cluster.controller()
    result: dict[str, Any] = {"controller": ctl, "requests": [], "zk": [], "stale_accepted": 0, "regressions": []}
    if ctl is None:
        return result
    tap.learn(topics)
    caps = [(c, c.msg) for c in tap.captured()]
    caps = [(c, m) for c, m in caps if isinstance(m, AlterPartitionRequest)][-frames:]
    for cap, req in reversed(caps):
        tp = (req.topic, req.partition)
        before = cluster.state(*tp)
        try:
            resp = replay_frame((cluster.host, cluster.port(ctl)), cap.raw, req)
        except (OSError, ConnectionError) as exc:
            result["requests"].append({"link": cap.link, "error": f"{type(exc).__name__}: {exc}"})
            continue
        after = cluster.state(*tp)
        was_stale = before is not None and stale(req, before)
        accepted = getattr(resp, "error", -1) == NONE
        result["requests"].append(
            {
                "link": cap.link,
                "tp": list(tp),
                "leader_epoch": req.leader_epoch,
                "partition_epoch": req.partition_epoch,
                "isr": list(req.new_isr),
                "stale": was_stale,
                "response": error_name(getattr(resp, "error", -1)),
            }
        )
        if was_stale and accepted:
            result["stale_accepted"] += 1
        if before is not None and after is not None:
            result["regressions"] += [f"{tp}: {r}" for r in regressed(before, after)]
    for w in zk_writes:
        got = zk.exists(w.path)
        _, cst = zk.get(w.controller_epoch_path)
        # The current-version form writes old data over the live state if it lands: only tried
        # once the controller that made ``w`` is deposed (it must then fail on the check).
        deposed = cst.version != w.controller_epoch_version
        data, stat = zk.get(w.path)
        before = PartitionState.from_json(bytes(data), stat.version)
        outcome = replay_zk_write(zk, w, current_version=got.version if got is not None and deposed else None)
        data, stat = zk.get(w.path)
        after = PartitionState.from_json(bytes(data), stat.version)
        result["regressions"] += [f"{w.path}: {r}" for r in regressed(before, after)]
        result["zk"].append({"path": w.path, "version": w.version, **outcome})
        result["stale_accepted"] += sum(1 for v in outcome.values() if v == "accepted")
    return result
