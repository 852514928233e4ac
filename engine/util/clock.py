"""Injected time: wall-clock milliseconds for timestamps and retention, monotonic milliseconds
for timers, and a scheduler whose periodic tasks run on that clock.

Nothing in seglog reads the time directly. Tests use :class:`ManualClock`, whose
:meth:`~ManualClock.advance` runs every task that falls due, in time order, on the calling
thread — so flush intervals, retention and ISR expiry are tested without sleeping.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field


class Clock:
    """The system clock."""

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def sleep_ms(self, ms: float) -> None:
        time.sleep(max(ms, 0) / 1000.0)


#: Fault injection (opt-in): when set to a file name, a node process's clock reads the wall
#: time shifted by the whole number of milliseconds that file holds (none, or an unreadable
#: file: no shift), re-read at most every 50 ms. The monotonic reading — every timer, the ISR
#: expiry, sessions — is untouched. Only seglog's own wall readings move (timestamps,
#: LogAppendTime, time-based segment rolls and retention); the process's real clock, its log
#: lines and its libraries do not.
WALL_CLOCK_OFFSET_ENV = "SEGLOG_WALL_CLOCK_OFFSET_FILE"

_log = logging.getLogger("seglog.util.clock")


class OffsetWallClock(Clock):
    """The system clock with its wall reading shifted by the offset in ``path`` (see
    :data:`WALL_CLOCK_OFFSET_ENV`)."""

    RECHECK_NS = 50_000_000

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset_ms = 0
        self._next_check = 0
        self._read()

    def _read(self) -> None:
        try:
            with open(self.path, encoding="ascii") as f:
                text = f.read().strip()
            offset = int(text) if text else 0
        except (OSError, ValueError):
            offset = 0
        if offset != self.offset_ms:
            _log.warning("wall clock offset %+d ms (was %+d ms), from %s", offset, self.offset_ms, self.path)
            self.offset_ms = offset

    def time_ms(self) -> int:
        now = time.monotonic_ns()
        if now >= self._next_check:
            self._next_check = now + self.RECHECK_NS
            self._read()
        return time.time_ns() // 1_000_000 + self.offset_ms


def clock_from_env() -> Clock:
    """The system clock, or an :class:`OffsetWallClock` when :data:`WALL_CLOCK_OFFSET_ENV` is set."""
    path = os.environ.get(WALL_CLOCK_OFFSET_ENV)
    return OffsetWallClock(path) if path else Clock()


class ManualClock(Clock):
    """A clock that moves only when told to. Both readings advance together."""

    def __init__(self, time_ms: int = 1_700_000_000_000, monotonic_ms: int = 1_000_000) -> None:
        self._time = time_ms
        self._mono = monotonic_ms
        self._schedulers: list[Scheduler] = []
        self._lock = threading.RLock()

    def time_ms(self) -> int:
        return self._time

    def monotonic_ms(self) -> int:
        return self._mono

    def sleep_ms(self, ms: float) -> None:
        self.advance(int(ms))

    def advance(self, ms: int) -> None:
        """Move time forward by ``ms``, running due tasks of every attached scheduler at the
        moment each falls due."""
        if ms < 0:
            raise ValueError(f"a clock cannot go backwards (advance by {ms} ms)")
        with self._lock:
            target = self._mono + ms
            while True:
                due = [(s.next_due(), s) for s in self._schedulers]
                ready = [(t, s) for t, s in due if t is not None and t <= target]
                if not ready:
                    break
                t, sched = min(ready, key=lambda x: x[0])
                step = max(t - self._mono, 0)
                self._mono += step
                self._time += step
                sched.run_due()
            step = target - self._mono
            self._mono += step
            self._time += step

    def _attach(self, scheduler: Scheduler) -> None:
        self._schedulers.append(scheduler)

    def _detach(self, scheduler: Scheduler) -> None:
        if scheduler in self._schedulers:
            self._schedulers.remove(scheduler)


@dataclass(order=True)
class _Task:
    due: int
    seq: int
    name: str = field(compare=False)
    fn: Callable[[], object] = field(compare=False)
    period: int = field(compare=False)
    cancelled: bool = field(default=False, compare=False)


class Scheduler:
    """Periodic and one-shot tasks on a clock.

    With a :class:`ManualClock` tasks run inside ``clock.advance``; with the system clock a
    daemon thread runs them. A task that raises is logged through ``on_error`` and stays
    scheduled (a failing flush must not stop later flushes).
    """

    def __init__(
        self,
        clock: Clock,
        *,
        on_error: Callable[[str, BaseException], None] | None = None,
        name: str = "seglog-scheduler",
    ) -> None:
        self.clock = clock
        self._heap: list[_Task] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self._on_error = on_error
        self._thread: threading.Thread | None = None
        self._name = name
        if isinstance(clock, ManualClock):
            clock._attach(self)
        else:
            self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
            self._thread.start()

    def schedule(self, name: str, fn: Callable[[], object], *, delay_ms: int = 0, period_ms: int = -1) -> _Task:
        """Run ``fn`` after ``delay_ms``, then every ``period_ms`` (if > 0)."""
        with self._cond:
            if self._stopped:
                raise RuntimeError(f"scheduler stopped; cannot schedule {name!r}")
            task = _Task(self.clock.monotonic_ms() + max(delay_ms, 0), next(self._seq), name, fn, period_ms)
            heapq.heappush(self._heap, task)
            self._cond.notify()
            return task

    def cancel(self, task: _Task) -> None:
        task.cancelled = True

    def next_due(self) -> int | None:
        with self._cond:
            while self._heap and self._heap[0].cancelled:
                heapq.heappop(self._heap)
            return self._heap[0].due if self._heap else None

    def run_due(self) -> int:
        """Run every task due now; returns how many ran."""
        ran = 0
        while True:
            with self._cond:
                now = self.clock.monotonic_ms()
                if not self._heap or self._heap[0].due > now:
                    return ran
                task = heapq.heappop(self._heap)
                if task.cancelled:
                    continue
                if task.period > 0:
                    task.due = now + task.period
                    task.seq = next(self._seq)
                    heapq.heappush(self._heap, task)
            try:
                task.fn()
            except Exception as exc:  # noqa: BLE001 - reported, the scheduler keeps going
                if self._on_error is not None:
                    self._on_error(task.name, exc)
                else:
                    import logging

                    logging.getLogger("seglog").exception("scheduled task %r failed", task.name)
            ran += 1

    def _loop(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                nxt = self.next_due()
                now = self.clock.monotonic_ms()
                if nxt is None or nxt > now:
                    self._cond.wait(timeout=None if nxt is None else (nxt - now) / 1000.0)
                    continue
            self.run_due()

    def shutdown(self, wait: bool = True) -> None:
        """Stop running tasks; with ``wait`` join the thread (a task running now finishes)."""
        with self._cond:
            self._stopped = True
            self._heap.clear()
            self._cond.notify_all()
        if isinstance(self.clock, ManualClock):
            self.clock._detach(self)
        if wait and self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
