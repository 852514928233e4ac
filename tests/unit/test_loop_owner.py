"""LoopOwner._call: a call on the owner's loop that does not finish in time is cancelled, and
its TimeoutError says where the loop's tasks wait and what the loop's thread runs.
cancel_and_wait: a cancellation the task lost is repeated; a task that never ends is logged
and left, after the bound."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest

from seglog.util.loop import LoopOwner, cancel_and_wait


class _Owner(LoopOwner):
    _what = "test owner"

    def __init__(self) -> None:
        self._closed = False
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run_loop, name="test-owner-loop", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def owner() -> Iterator[_Owner]:
    o = _Owner()
    yield o
    o.close()


async def _waits_forever(started: asyncio.Event) -> None:
    started.set()
    await asyncio.Event().wait()


def test_a_task_that_never_ends_is_named_with_where_it_waits(owner: _Owner) -> None:
    started = asyncio.Event()
    with pytest.raises(TimeoutError) as err:
        owner._call(_waits_forever(started), timeout=0.3)
    msg = str(err.value)
    assert "a call on the test owner's loop did not finish within 0.3 s" in msg
    assert "_waits_forever" in msg
    assert "thread test-owner-loop:" in msg
    # The call was cancelled: nothing of it is left on the loop.
    deadline = time.monotonic() + 5
    while owner._call(_pending_names()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert owner._call(_pending_names()) == []


async def _pending_names() -> list[str]:
    me = asyncio.current_task()
    return [repr(t.get_coro()) for t in asyncio.all_tasks() if t is not me]


def test_a_loop_blocked_by_its_own_thread_shows_the_blocking_call(owner: _Owner) -> None:
    release = threading.Event()

    def blocks_the_loop() -> None:
        release.wait(10)

    owner.loop.call_soon_threadsafe(blocks_the_loop)
    try:
        with pytest.raises(TimeoutError) as err:
            owner._call(asyncio.sleep(0), timeout=0.3)
    finally:
        release.set()
    assert "blocks_the_loop" in str(err.value)


async def _loses_cancellations(times: int, ended: list[str]) -> None:
    # As a task whose cancellation met an inner wait_for's completion on Python 3.11: it goes on
    # (until it has lost ``times``, or ``ended`` holds "stop").
    lost = 0
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            lost += 1
            if lost > times or "stop" in ended:
                ended.append("ended")
                raise


async def _fails() -> None:
    raise ValueError("the task's own failure")


def test_cancel_and_wait_repeats_a_lost_cancellation() -> None:
    async def main() -> tuple[list[str], float]:
        ended: list[str] = []
        tasks = [asyncio.create_task(_loses_cancellations(3, ended)), asyncio.create_task(_fails())]
        await asyncio.sleep(0)
        t0 = time.monotonic()
        await cancel_and_wait(tasks, "test tasks", timeout=10)
        assert all(t.done() for t in tasks)
        return ended, time.monotonic() - t0

    ended, took = asyncio.run(main())
    assert ended == ["ended"]
    assert took < 5


def test_cancel_and_wait_logs_a_task_that_never_ends_and_returns(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> bool:
        ended: list[str] = []
        task = asyncio.create_task(_loses_cancellations(10**9, ended))
        await asyncio.sleep(0)
        await cancel_and_wait([task], "test tasks", timeout=0.5)
        still = not task.done()
        ended.append("stop")
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return still

    with caplog.at_level("WARNING", logger="seglog.util.loop"):
        assert asyncio.run(main()) is True
    assert "1 of test tasks did not end within 0.5 s of being cancelled" in caplog.text
    assert "_loses_cancellations" in caplog.text
