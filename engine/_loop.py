"""An asyncio event loop run on a thread of its own and driven from the caller's threads: what
:class:`~seglog.cluster.LocalCluster` and :class:`~seglog.client.ClusterClient` share."""

from __future__ import annotations

import asyncio
from typing import Any


class LoopOwner:
    """Mixin: ``self.loop`` runs on a thread started with :meth:`_run_loop`; ``_call`` runs a
    coroutine there and waits for its result. ``_what`` names the owner in errors."""

    loop: asyncio.AbstractEventLoop
    _closed: bool
    _what = "object"

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def _call(self, coro: Any, timeout: float | None = 60) -> Any:
        if self._closed:
            raise RuntimeError(f"the {self._what} is closed")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def _on_loop(self, fn: Any, *args: Any) -> Any:
        async def run() -> Any:
            return fn(*args)
        return self._call(run())
