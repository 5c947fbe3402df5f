"""The fsync thread: makes committed groups durable, and `durable` waits for it.

The connection commits with `synchronous=NORMAL`; this thread then runs an `fdatasync` of the
write-ahead log for every group committed since its last one (see database.py for why this is
what `synchronous=FULL` gives). It alone syncs, so no fsync can succeed after one that failed
without seeing that it failed; after such a failure nothing is durable any more until a restart.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import queue
import threading
import time
from typing import Any, Callable

from queueserver import errors
from queueserver.storage.health import Health
from queueserver.storage.loop_calls import call_on_loops, resolve
from queueserver.tallies import StorageTally

log = logging.getLogger(__name__)

_STOP = object()


class Syncer:
    """Told the number of each writing group as it commits (`committed`); `durable(n)` returns once
    an fsync that began after group n's COMMIT has finished."""

    def __init__(self, log_fd: int | None, sync_log: Callable[[int], None], tally: StorageTally,
                 health: Health) -> None:
        self.log_fd = log_fd  # replaced (under a `drain`) when the database file is written back
        self._sync_log = sync_log
        self._tally = tally
        self._committed: queue.SimpleQueue[Any] = queue.SimpleQueue()  # numbers of writing groups, to sync
        self._groups_synced = 0  # how many writing groups an fsync covers
        self._barriers: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Future]] = []
        self._barrier_lock = threading.Lock()
        self.failure: errors.SQSError | None = None  # set for good by a failed fsync
        self._thread = threading.Thread(target=health.thread_target("the fsync thread", self._sync_forever),
                                        name="queueserver-fsync", daemon=True)
        self._thread.start()

    def committed(self, groups_written: int) -> None:
        self._committed.put(groups_written)

    async def durable(self, target: int) -> None:
        """Wait until the first `target` writing groups are on disk; raise ServiceUnavailable if that failed."""
        if self._groups_synced >= target and self.failure is None:
            return
        future = asyncio.get_running_loop().create_future()
        with self._barrier_lock:
            if self.failure is not None:
                raise self.failure
            if self._groups_synced >= target:
                return
            self._barriers.append((target, future.get_loop(), future))
        await future

    def drain(self) -> None:
        """Return once the thread is done with every group committed so far (and so with the log)."""
        drained = threading.Event()
        self._committed.put(drained)
        drained.wait()

    def stop(self) -> None:
        """Sync what is left, then end the thread (blocks: run it off the event loop)."""
        self._committed.put(_STOP)
        self._thread.join()
        if self.log_fd is not None:
            os.close(self.log_fd)

    def _sync_forever(self) -> None:
        while True:
            batch = [self._committed.get()]
            while True:
                try:
                    batch.append(self._committed.get_nowait())
                except queue.Empty:
                    break
            written = [item for item in batch if isinstance(item, int)]
            if written:  # a fsync that began after their COMMITs covers them
                self._sync(written[-1])
            for item in batch:
                if isinstance(item, threading.Event):  # a drain: the log before it is synced
                    item.set()
            if batch[-1] is _STOP:
                return

    def _sync(self, groups_written: int) -> None:
        if self.failure is None and self.log_fd is not None:
            began = time.perf_counter()
            try:
                self._sync_log(self.log_fd)
                self._tally.fsync_seconds.observe(time.perf_counter() - began)
            except Exception as exc:  # noqa: BLE001 - whatever the failure, nothing after it can be trusted
                self._tally.failed_fsyncs += 1
                log.critical(
                    "storage unavailable: the write-ahead log could not be synced to disk (%s); changes since the "
                    "last sync may not survive a power loss, so every request is refused until the server is "
                    "restarted", exc)
                self.failure = errors.ServiceUnavailable(
                    f"The message store could not write to disk ({getattr(exc, 'strerror', None) or exc}); the last "
                    "changes may not be durable. Restart the server.")
        with self._barrier_lock:
            if self.failure is None:
                self._groups_synced = groups_written
                released = [b for b in self._barriers if b[0] <= groups_written]
                self._barriers = [b for b in self._barriers if b[0] > groups_written]
            else:
                released, self._barriers = self._barriers, []
        if released:
            ok, value = self.failure is None, self.failure
            call_on_loops([(loop, functools.partial(resolve, future, ok, value)) for _, loop, future in released])
