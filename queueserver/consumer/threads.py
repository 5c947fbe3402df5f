"""A small pool of daemon threads whose results come back to the event loop as futures.

Why not `concurrent.futures.ThreadPoolExecutor`: its threads are joined when the
interpreter exits, so one synchronous handler stuck past the shutdown grace period
would keep `queueserver worker` alive after the worker had already released that
handler's message. Daemon threads let the process exit; the result of a call that
finishes after its event loop closed is dropped (and logged), never raised in a thread.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class HandlerInterrupted(Exception):
    """A call in a pool thread raised a BaseException (SystemExit, KeyboardInterrupt…).

    It is turned into an ordinary exception so that it fails one message instead of
    tearing down the worker's event loop.
    """


class DaemonThreadPool:
    """Up to `size` daemon threads, started on demand, taking calls from one queue."""

    def __init__(self, size: int, name: str) -> None:
        if size < 1:
            raise ValueError("a thread pool needs at least one thread")
        self._size = size
        self._name = name
        self._calls: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._closed = False

    def run(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Call `fn(*args)` in a pool thread; the returned future is bound to the running loop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def deliver(ok: bool, value: Any) -> None:
            if future.done():  # the awaiting side gave up (cancelled)
                return
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

        def call() -> None:
            try:
                value: Any = fn(*args)
                ok = True
            except Exception as exc:  # noqa: BLE001 - handed to the awaiting coroutine
                value, ok = exc, False
            except BaseException as exc:  # noqa: BLE001 - never let it unwind the event loop
                value, ok = HandlerInterrupted(repr(exc)), False
            try:
                loop.call_soon_threadsafe(deliver, ok, value)
            except RuntimeError:
                log.debug("%s: a call finished after its event loop closed; result dropped", self._name)

        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self._name} is shut down")
            self._calls.put(call)
            if self._idle == 0 and len(self._threads) < self._size:
                thread = threading.Thread(target=self._serve, name=f"{self._name}-{len(self._threads)}",
                                          daemon=True)
                self._threads.append(thread)
                thread.start()
            else:
                self._idle -= 1 if self._idle else 0
        return future

    def _serve(self) -> None:
        while True:
            call = self._calls.get()
            if call is None:
                return
            call()
            with self._lock:
                self._idle += 1

    def shutdown(self, join_timeout: float | None = 5.0) -> list[str]:
        """Stop the threads once queued calls are done; returns the names of threads still busy."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._calls.put(None)
        busy = []
        for thread in threads:
            thread.join(join_timeout)
            if thread.is_alive():
                busy.append(thread.name)
        return busy
