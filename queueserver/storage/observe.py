"""What the metrics and the readiness check read from the storage layer, when they are asked.

Everything here is read at scrape time and off the writer: counts come from the read side's
count cache, file sizes from `stat`, move-task progress from a read connection. The one
exception is the readiness probe, which must know whether the writer can write.
"""

from __future__ import annotations

import os
from typing import Awaitable, Callable

from queueserver import errors
from queueserver.models import Queue, QueueCounts
from queueserver.storage.database import Database, Transaction
from queueserver.storage.read_side import ReadSide
from queueserver.storage.waiters import Waiters
from queueserver.tallies import StorageTally


class Observer:
    def __init__(self, db: Database, reads: ReadSide, waiters: Waiters, queues: Callable[[], list[Queue]],
                 counts: Callable[[Queue], Awaitable[QueueCounts]]) -> None:
        self._db = db
        self._reads = reads
        self._waiters = waiters
        self.queues = queues  # every queue, committed, in all regions and accounts
        self.counts = counts  # a queue's approximate counts (the count cache)

    @property
    def storage(self) -> StorageTally:
        return self._db.tally

    def open_long_polls(self) -> int:
        return self._waiters.count()

    def file_sizes(self) -> tuple[int, int]:
        """Bytes of the database file and of its write-ahead log (0 for one that is missing)."""
        return _size(self._db.path), _size(self._db.path + "-wal")

    async def running_move_tasks(self) -> list[tuple[str, str, str, int, int]]:
        """(region, account, source queue, moved, to move) of every running move task."""
        return await self._reads.running_move_tasks()

    async def unready(self) -> list[str]:
        """Why the server cannot take writes now; empty when it can.

        A probe runs through the writer (a transaction that writes nothing, so no fsync): a
        database locked by another process fails it after the busy timeout. A full or read-only
        disk is known from the last write that failed, until a write succeeds again.
        """
        if self._db.health.stopping:
            return ["the server is shutting down"]
        try:
            await self._db.run(_nothing)
        except errors.SQSError as error:
            return [error.message] + [p for p in self.known_problems() if p != error.message]
        return self.known_problems()

    def known_problems(self) -> list[str]:
        """What is known to be wrong without asking the writer: a background task that ended, a failed
        fsync, an outage not yet over."""
        problems = [f"{name} ended ({why})" for name, why in self._db.health.problems().items()]
        reason = self._db.unready()
        if reason is not None:
            problems.append(reason)
        if self._db.health.stopping:
            problems.append("the server is shutting down")
        return problems


def _nothing(tx: Transaction) -> None:
    """The readiness probe's operation: its group still takes the write lock."""


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
