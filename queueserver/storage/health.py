"""The supervisor: notices a background task or thread that ended while the server runs.

Every background worker (the database thread, the syncer, the retention sweeper, the move
tasks) is meant to run until shutdown and to survive any storage failure by itself. If one
ends anyway, nothing else would notice: expired messages would pile up, or requests would
hang. So each is watched here; an unexpected end is logged once at CRITICAL, and `healthy`
turns False for good (what a readiness endpoint reports).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Callable

log = logging.getLogger(__name__)


class Health:
    def __init__(self) -> None:
        self._ended: dict[str, str] = {}  # worker name -> why it ended
        self._lock = threading.Lock()  # threads report here too
        self.stopping = False  # set at shutdown: workers then end on purpose

    @property
    def healthy(self) -> bool:
        """False once any supervised worker ended before shutdown."""
        return not self._ended

    def problems(self) -> dict[str, str]:
        with self._lock:
            return dict(self._ended)

    def ended(self, name: str, reason: str, exc: BaseException | None = None) -> None:
        if self.stopping:
            return
        with self._lock:
            if name in self._ended:
                return
            self._ended[name] = reason
        log.critical("%s ended while the server runs (%s); the server is degraded until it is restarted",
                     name, reason, exc_info=exc)

    def watch_task(self, task: asyncio.Task, name: str, may_return: bool = False) -> None:
        """Report `task` if it finishes before shutdown: by any end, or (`may_return`) only by an exception."""
        def done(finished: asyncio.Task) -> None:
            if may_return and not finished.cancelled() and finished.exception() is None:
                return
            exc = None if finished.cancelled() else finished.exception()
            if finished.cancelled():
                reason = "cancelled"
            elif exc is not None:
                reason = f"{type(exc).__name__}: {exc}"
            else:
                reason = "it returned"
            self.ended(name, reason, exc)

        task.add_done_callback(done)

    def thread_target(self, name: str, target: Callable[[], None]) -> Callable[[], None]:
        """Wrap a thread's target so that its end, by return or by exception, is reported."""
        def run() -> None:
            try:
                target()
            except BaseException as exc:  # noqa: BLE001 - reported with its traceback; the thread is over anyway
                self.ended(name, f"{type(exc).__name__}: {exc}", exc)
                return
            self.ended(name, "it returned")

        return run
