"""Asyncio event loops run on threads of their own and driven from the caller's threads: what
:class:`~seglog.cluster.local.LocalCluster` (its loop, and with ``node_threads`` one per node) and
:class:`~seglog.cluster.client.ClusterClient` share."""

from __future__ import annotations

import asyncio
from typing import Any


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
        return asyncio.run_coroutine_threadsafe(coro, self.loop if loop is None else loop).result(timeout)

    def _on_loop(self, fn: Any, *args: Any, loop: asyncio.AbstractEventLoop | None = None) -> Any:
        async def run() -> Any:
            return fn(*args)

        return self._call(run(), loop=loop)
