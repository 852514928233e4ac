"""Asyncio event loops run on threads of their own and driven from the caller's threads: what
:class:`~seglog.cluster.local.LocalCluster` (its loop, and with ``node_threads`` one per node) and
:class:`~seglog.cluster.client.ClusterClient` share."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import sys
import threading
import traceback
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)


def run_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Run ``loop`` on the calling thread until it is stopped, then :func:`drain` it."""
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        drain(loop)


def drain(loop: asyncio.AbstractEventLoop, rounds: int = 10) -> None:
    """Wind down a stopped ``loop`` before it is closed: cancel the tasks still pending (requests
    queued on connections that closed with it) and run them to their end, then run the callbacks
    their last steps scheduled. A transport closes its socket in such a callback
    (``connection_lost``): a loop closed before it runs leaves the socket open until the garbage
    collector finds it. Tasks those callbacks start are drained too, up to ``rounds`` times."""
    for _ in range(rounds):
        tasks = asyncio.all_tasks(loop)
        for t in tasks:
            t.cancel()
        if tasks:
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        # Two turns of the loop: the callbacks already queued, then those they queue.
        loop.run_until_complete(asyncio.sleep(0))
        loop.run_until_complete(asyncio.sleep(0))
        if not asyncio.all_tasks(loop):
            return


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any]], what: str, timeout: float = 10.0) -> None:
    """Cancel ``tasks`` and wait for them to end (their exceptions retrieved, not raised). On
    Python 3.11 a cancellation that meets the completion of an inner ``wait_for`` is lost and
    the task runs on, so those still running are cancelled again every 0.1 s; any still
    running after ``timeout`` are logged as ``what`` with where they wait, and left."""
    tasks = list(tasks)
    pending = {t for t in tasks if not t.done()}
    done_all = [t for t in tasks if t.done()]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while pending:
        left = deadline - loop.time()
        if left <= 0:
            where = []
            for t in pending:
                stack = t.get_stack(limit=8) if isinstance(t, asyncio.Task) else []
                where.append(f"{t!r} at " + " < ".join(f"{f.f_code.co_name}:{f.f_lineno}" for f in reversed(stack)))
            log.warning(
                "%d of %s did not end within %s s of being cancelled: %s", len(pending), what, timeout, "; ".join(where)
            )
            break
        for t in pending:
            t.cancel()
        done, pending = await asyncio.wait(pending, timeout=min(0.1, left))
        done_all.extend(done)
    for t in done_all:
        if not t.cancelled():
            t.exception()


def loop_state(loop: asyncio.AbstractEventLoop, frames: int = 12) -> str:
    """Where ``loop``'s tasks wait and what every thread runs: for the error of a call on the
    loop that did not finish (a task that never ends, or a loop blocked by its own thread)."""
    lines = []
    tasks: set[asyncio.Task[Any]] = set()
    for _ in range(5):  # read from another thread: the set may change meanwhile
        try:
            tasks = asyncio.all_tasks(loop)
            break
        except RuntimeError:
            continue
    for t in sorted(tasks, key=repr):
        lines.append(f"task {t.get_name()} ({t.get_coro()!r}):")
        for f in t.get_stack(limit=frames):
            lines.append(f"    {f.f_code.co_filename}:{f.f_lineno} in {f.f_code.co_name}")
    current = sys._current_frames()
    for th in threading.enumerate():
        frame = current.get(th.ident) if th.ident is not None else None
        if frame is None:
            continue
        lines.append(f"thread {th.name}:")
        lines.extend("    " + ln.strip() for ln in traceback.format_stack(frame, limit=frames))
    return "\n".join(lines)


class LoopOwner:
    """Mixin: ``self.loop`` runs on a thread started with :meth:`_run_loop`; ``_call`` runs a
    coroutine there (or on another loop the owner runs, ``loop=``) and waits for its result.
    ``_what`` names the owner in errors."""

    loop: asyncio.AbstractEventLoop
    _closed: bool
    _what = "object"

    def _run_loop(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        run_loop(self.loop if loop is None else loop)

    def _call(self, coro: Any, timeout: float | None = 60, loop: asyncio.AbstractEventLoop | None = None) -> Any:
        if self._closed:
            coro.close()
            raise RuntimeError(f"the {self._what} is closed")
        target = self.loop if loop is None else loop
        fut = asyncio.run_coroutine_threadsafe(coro, target)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TimeoutError(
                f"a call on the {self._what}'s loop did not finish within {timeout} s\n{loop_state(target)}"
            ) from None

    def _on_loop(self, fn: Any, *args: Any, loop: asyncio.AbstractEventLoop | None = None) -> Any:
        async def run() -> Any:
            return fn(*args)

        return self._call(run(), loop=loop)
