"""How nodes and clients exchange requests: the transport interface and the in-memory network.

A transport carries one request to one destination and brings back at most one response::

    transport.request(src, dst, message, callback, timeout_ms)
    # later, exactly once: callback(response, None) or callback(None, error)

A node registers a handler ``handler(src, message, reply)``; it may call ``reply(response)``
at once or later (long polls, ``acks=all``), or never (``acks=0``). Errors given to callbacks
are :class:`~seglog.errors.NetworkError` (connection lost, destination down) or
:class:`~seglog.errors.RequestTimedOutError`; a sender cannot tell whether a lost request was
handled, so a produce that ends this way is indeterminate.

:class:`InMemoryNetwork` is the simulation's network: every delivery is a task on the injected
scheduler, delayed by a seeded random latency, FIFO per directed link (as TCP is). Links can be
cut in one direction, delayed, or made lossy; nodes can be paused (messages wait in their
inbox, as for a SIGSTOPped process) or crashed (messages are dropped; responses to requests
made by an earlier incarnation are never delivered).
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Callable
from typing import Any, Protocol

from seglog.cluster.messages import materialize
from seglog.errors import RequestTimedOutError
from seglog.util.clock import Scheduler

Reply = Callable[[Any], None]
Handler = Callable[[int, Any, Reply], None]
Callback = Callable[[Any, BaseException | None], None]


class Transport(Protocol):
    def register(self, node_id: int, handler: Handler) -> None: ...

    def unregister(self, node_id: int) -> None: ...

    def request(self, src: int, dst: int, message: Any, callback: Callback, timeout_ms: int) -> None: ...


@dataclasses.dataclass(slots=True)
class _Endpoint:
    handler: Handler
    incarnation: int
    paused: bool = False
    inbox: list[Callable[[], None]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(slots=True)
class LinkRule:
    cut: bool = False
    drop: float = 0.0
    delay_ms: tuple[int, int] | None = None


class InMemoryNetwork:
    """A seeded, single-threaded network on the injected clock (see module docs)."""

    def __init__(self, scheduler: Scheduler, rng: random.Random, *, delay_ms: tuple[int, int] = (0, 2)) -> None:
        self.scheduler = scheduler
        self.rng = rng
        self.delay_ms = delay_ms
        self._endpoints: dict[int, _Endpoint] = {}
        self._incarnations = itertools.count(1)
        self._rules: dict[tuple[int, int], LinkRule] = {}
        self._link_free_at: dict[tuple[int, int], int] = {}
        self._coordinator_cut: set[int] = set()
        self.delivered = 0
        self.dropped = 0

    # -- the Transport interface --------------------------------------------------------------

    def register(self, node_id: int, handler: Handler) -> None:
        self._endpoints[node_id] = _Endpoint(handler, next(self._incarnations))

    def unregister(self, node_id: int) -> None:
        self._endpoints.pop(node_id, None)

    def request(self, src: int, dst: int, message: Any, callback: Callback, timeout_ms: int) -> None:
        sender = self._endpoints.get(src)
        if sender is None:
            return
        src_inc = sender.incarnation
        done = [False]

        def finish(resp: Any, err: BaseException | None) -> None:
            if done[0]:
                return
            ep = self._endpoints.get(src)
            if ep is None or ep.incarnation != src_inc:
                done[0] = True
                return
            if ep.paused:
                ep.inbox.append(lambda: finish(resp, err))
                return
            done[0] = True
            self.scheduler.cancel(timer)
            callback(resp, err)

        timer = self.scheduler.schedule(
            f"timeout {type(message).__name__} {src}->{dst}",
            lambda: finish(
                None,
                RequestTimedOutError(f"no response from node {dst} to {type(message).__name__} within {timeout_ms} ms"),
            ),
            delay_ms=timeout_ms,
        )

        def on_arrival() -> None:
            ep = self._endpoints.get(dst)
            if ep is None:
                return  # node down: the sender times out
            dst_inc = ep.incarnation
            replied = [False]

            def reply(resp: Any) -> None:
                if replied[0]:
                    return
                replied[0] = True
                cur = self._endpoints.get(dst)
                if cur is None or cur.incarnation != dst_inc:
                    return  # a crashed incarnation says nothing
                sent = materialize(resp)
                self._send(dst, src, sent, lambda: finish(sent, None))

            def handle() -> None:
                cur = self._endpoints.get(dst)
                if cur is None or cur.incarnation != dst_inc:
                    return
                cur.handler(src, message, reply)

            if ep.paused:
                ep.inbox.append(handle)
            else:
                handle()

        self._send(src, dst, message, on_arrival)

    # -- delivery -----------------------------------------------------------------------------

    def _send(self, src: int, dst: int, message: Any, deliver: Callable[[], None]) -> None:
        rule = self._rules.get((src, dst))
        if rule is not None and (rule.cut or (rule.drop and self.rng.random() < rule.drop)):
            self.dropped += 1
            return
        lo, hi = rule.delay_ms if rule is not None and rule.delay_ms is not None else self.delay_ms
        delay = self.rng.randint(lo, hi) if hi > lo else lo
        now = self.scheduler.clock.monotonic_ms()
        at = max(now + delay, self._link_free_at.get((src, dst), 0))
        self._link_free_at[(src, dst)] = at

        def arrive() -> None:
            r = self._rules.get((src, dst))
            if r is not None and r.cut:
                self.dropped += 1  # cut while in flight
                return
            self.delivered += 1
            deliver()

        self.scheduler.schedule(f"deliver {type(message).__name__} {src}->{dst}", arrive, delay_ms=at - now)

    # -- faults -------------------------------------------------------------------------------

    def rule(self, src: int, dst: int) -> LinkRule:
        return self._rules.setdefault((src, dst), LinkRule())

    def cut(self, a: int, b: int, *, both: bool = True) -> None:
        self.rule(a, b).cut = True
        if both:
            self.rule(b, a).cut = True

    def isolate(self, node: int, others: list[int], *, coordinator: bool = False) -> None:
        for o in others:
            if o != node:
                self.cut(node, o)
        if coordinator:
            self._coordinator_cut.add(node)

    def cut_coordinator(self, node: int) -> None:
        self._coordinator_cut.add(node)

    def coordinator_reachable(self, node: int) -> bool:
        return node not in self._coordinator_cut

    def heal(self) -> None:
        self._rules.clear()
        self._coordinator_cut.clear()

    def pause(self, node: int) -> None:
        ep = self._endpoints.get(node)
        if ep is not None:
            ep.paused = True

    def resume(self, node: int) -> None:
        ep = self._endpoints.get(node)
        if ep is None or not ep.paused:
            return
        ep.paused = False
        inbox, ep.inbox = ep.inbox, []
        for fn in inbox:
            fn()

    def is_paused(self, node: int) -> bool:
        ep = self._endpoints.get(node)
        return ep is not None and ep.paused


class GuardedScheduler:
    """A node's view of the shared scheduler: its tasks do not run while the node is paused
    (they run once on resume) and never after it crashed (the simulation's SIGSTOP/SIGKILL)."""

    def __init__(self, inner: Scheduler) -> None:
        self.inner = inner
        self.clock = inner.clock
        self.paused = False
        self.dead = False
        self._deferred: dict[int, Callable[[], object]] = {}
        self._tasks: list[Any] = []

    def schedule(self, name: str, fn: Callable[[], object], *, delay_ms: int = 0, period_ms: int = -1) -> Any:
        key = id(fn)

        def guarded() -> None:
            if self.dead:
                return
            if self.paused:
                self._deferred[key] = fn
                return
            fn()

        task = self.inner.schedule(name, guarded, delay_ms=delay_ms, period_ms=period_ms)
        if period_ms > 0:
            self._tasks.append(task)
        return task

    def cancel(self, task: Any) -> None:
        self.inner.cancel(task)

    def resume(self) -> None:
        self.paused = False
        deferred, self._deferred = self._deferred, {}
        for fn in deferred.values():
            if self.dead:
                return
            fn()

    def kill(self) -> None:
        self.dead = True
        for t in self._tasks:
            self.inner.cancel(t)
        self._tasks.clear()
        self._deferred.clear()
