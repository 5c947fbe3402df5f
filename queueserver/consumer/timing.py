"""The worker's sense of time: an injected `queueserver.clock.Clock`, monotonic by default.

Why an injected clock: remaining visibility and heartbeat deadlines are the worker's
own timing, and a test must be able to move them in step with the server's test
clock (a 90-second heartbeat scenario then runs in milliseconds, with no sleeps).
Why monotonic by default: they are durations measured on this machine, so a
wall-clock step (NTP, a suspended laptop) must not make the worker believe a
message expired, or has hours left.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from queueserver.clock import Clock, LoopClock

__all__ = ["Clock", "MonotonicClock", "sleep_until"]


class MonotonicClock(LoopClock):
    """`time.monotonic` in milliseconds; timers on the running event loop."""

    def now_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


async def sleep_until(clock: Clock, at_ms: int, interrupt: asyncio.Event | None = None) -> bool:
    """Wait until `clock` reaches `at_ms`; True if it did, False if `interrupt` was set first."""
    if interrupt is not None and interrupt.is_set():
        return False
    reached: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def fire() -> None:
        if not reached.done():
            reached.set_result(None)

    timer = clock.call_at(at_ms, fire)
    interrupted: asyncio.Task[bool] | None = None
    try:
        if interrupt is None:
            await reached
            return True
        interrupted = asyncio.ensure_future(interrupt.wait())
        waiters: set[asyncio.Future[Any]] = {reached, interrupted}
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        return reached.done()
    finally:
        timer.cancel()
        if interrupted is not None and not interrupted.done():
            interrupted.cancel()
            # Awaited, so no pending task outlives a loop that closes right after this returns.
            await asyncio.gather(interrupted, return_exceptions=True)
