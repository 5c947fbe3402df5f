"""Time as an injected object, so a 12-hour visibility can be tested in milliseconds.

Every instant is an integer of epoch milliseconds. The engine never reads the wall
clock itself; it asks its Clock, and schedules wake-ups through it, so a ManualClock
moves long-poll waiters and timers along with it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Callable, Protocol

# The most one call may move a manual clock: far past any retention or timeout, far short of an overflow.
MAX_ADVANCE_SECONDS = 10 * 365 * 24 * 3600


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now_ms(self) -> int: ...

    def call_at(self, at_ms: int, callback: Callable[[], None]) -> Cancellable:
        """Run `callback` on the event loop once the clock reaches `at_ms`."""
        ...


class LoopClock:
    """A clock of real time whose timers run on the running event loop; subclasses say which time."""

    def now_ms(self) -> int:
        raise NotImplementedError

    def call_at(self, at_ms: int, callback: Callable[[], None]) -> Cancellable:
        delay = max(0.0, (at_ms - self.now_ms()) / 1000)
        return asyncio.get_running_loop().call_later(delay, callback)


class SystemClock(LoopClock):
    """The wall clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class _ManualTimer:
    __slots__ = ("callback", "cancelled")

    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock that only moves when told to; timers fire as `advance` passes them.

    `advance` and `call_at` must be called from the event loop's thread; `now_ms`
    may be read from any thread.
    """

    def __init__(self, start_ms: int | None = None) -> None:
        self._now_ms = SystemClock().now_ms() if start_ms is None else start_ms
        self._timers: list[tuple[int, int, _ManualTimer]] = []
        self._order = itertools.count()

    def now_ms(self) -> int:
        return self._now_ms

    def resume_at(self, now_ms: int) -> None:
        """Set the reading of a clock nothing waits on yet: a restarted server's clock resumes
        where it stood, which is usually behind the wall clock it was made with."""
        if self._timers:
            raise RuntimeError("a clock that timers wait on does not jump")
        self._now_ms = now_ms

    def call_at(self, at_ms: int, callback: Callable[[], None]) -> Cancellable:
        timer = _ManualTimer(callback)
        if at_ms <= self._now_ms:
            asyncio.get_running_loop().call_soon(self._fire, timer)
        else:
            heapq.heappush(self._timers, (at_ms, next(self._order), timer))
        return timer

    def pending(self) -> int:
        """Timers not yet fired or cancelled: one per long poll waiting (what tests wait for)."""
        return sum(1 for _, _, timer in self._timers if not timer.cancelled)

    def advance(self, milliseconds: int) -> int:
        if milliseconds < 0:
            raise ValueError("a clock does not go backwards")
        self._now_ms += milliseconds
        while self._timers and self._timers[0][0] <= self._now_ms:
            _, _, timer = heapq.heappop(self._timers)
            self._fire(timer)
        return self._now_ms

    @staticmethod
    def _fire(timer: _ManualTimer) -> None:
        if not timer.cancelled:
            timer.cancelled = True
            timer.callback()
