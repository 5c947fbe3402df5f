"""Helpers of the worker tests: a real queueserver process, its test clock, the worker's clocks, waits.

Two servers per session: one on the manual test clock (most tests move it instead of
sleeping) and one on the real clock, for the heartbeat test that runs on real time.
The worker's own clock can be a `LockstepClock`, moved together with the server's
test clock, so minutes of visibility pass in milliseconds and deterministically.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import uuid
from collections.abc import Callable
from typing import Any

from support import server
from support.server import ClockControl

from queueserver.clock import Cancellable, ManualClock

WAIT_TIMEOUT_S = 15.0  # a guard against hanging, never a claim about speed


class ThreadSafeManualClock:
    """A ManualClock for a worker whose loop runs in another thread.

    ManualClock's timers must be touched on the event loop's thread, so `advance`
    hands the move to the worker's loop (learned from its first call_at) and waits.
    """

    def __init__(self) -> None:
        self._inner = ManualClock(start_ms=1_000_000)
        self._loop: asyncio.AbstractEventLoop | None = None

    def now_ms(self) -> int:
        return self._inner.now_ms()

    def call_at(self, at_ms: int, callback: Callable[[], None]) -> Cancellable:
        self._loop = asyncio.get_running_loop()
        return self._inner.call_at(at_ms, callback)

    def advance(self, seconds: float) -> None:
        ms = round(seconds * 1000)
        if self._loop is None or self._loop.is_closed():
            self._inner.advance(ms)
            return
        done: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._loop.call_soon_threadsafe(lambda: done.set_result(self._inner.advance(ms)))
        done.result(timeout=WAIT_TIMEOUT_S)


class LockstepClock(ThreadSafeManualClock):
    """The worker's clock, moved together with the server's: server first, so an extension
    the worker sends after the move lands at the matching server time."""

    def __init__(self, server_clock: ClockControl) -> None:
        super().__init__()
        self._server_clock = server_clock

    def advance_both(self, seconds: float) -> None:
        self._server_clock.advance(seconds)
        self.advance(seconds)


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = WAIT_TIMEOUT_S) -> Any:
    return server.wait_for(predicate, what, timeout)


def receive_now(client: Any, queue_url: str, **kwargs: Any) -> list[dict[str, Any]]:
    """What a second consumer gets right now (no long poll)."""
    kwargs.setdefault("MaxNumberOfMessages", 10)
    kwargs.setdefault("MessageSystemAttributeNames", ["All"])
    return list(client.receive_message(QueueUrl=queue_url, WaitTimeSeconds=0, **kwargs).get("Messages", []))


def queue_factory(client: Any) -> Callable[..., str]:
    def make(attributes: dict[str, str] | None = None, fifo: bool = False, name: str = "q") -> str:
        queue_name = f"{name}-{uuid.uuid4().hex[:10]}" + (".fifo" if fifo else "")
        attrs = dict(attributes or {})
        if fifo:
            attrs.setdefault("FifoQueue", "true")
            attrs.setdefault("ContentBasedDeduplication", "true")
        return str(client.create_queue(QueueName=queue_name, Attributes=attrs)["QueueUrl"])

    return make
