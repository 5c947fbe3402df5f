"""What the metrics and the readiness check read from the storage layer, when they are asked.

Everything here is read at scrape time and off the writer: counts come from the read side's
count cache, file sizes from `stat`, the summed counts of the queues past the first few and
move-task progress from a read connection. The one exception is the readiness probe, which must know
whether the writer can write: it writes, at most once every READY_PROBE_SECONDS however often /ready
is asked.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Awaitable, Callable

from queueserver import errors
from queueserver.models import Queue, QueueCounts
from queueserver.storage.database import Database
from queueserver.storage.operations import Transaction
from queueserver.storage.read_side import ReadSide
from queueserver.storage.waiters import Waiters
from queueserver.tallies import StorageTally

READY_PROBE_SECONDS = 1.0  # a /ready flood must not become a flood of fsyncs


class Observer:
    def __init__(self, db: Database, reads: ReadSide, waiters: Waiters,
                 first_created: Callable[[int], list[Queue]],
                 counts: Callable[[Queue], Awaitable[QueueCounts]]) -> None:
        self._db = db
        self._reads = reads
        self._waiters = waiters
        self.first_created = first_created  # the first N queues (subscriptions too) by id: oldest first
        self.counts = counts  # a queue's approximate counts (the count cache)
        self.counts_after = reads.counts_after  # the summed counts of the queues created after one
        self._probes = 0
        self._probe: asyncio.Future[str | None] | None = None  # the latest probe: why it failed, or None
        self._probed_at = float("-inf")  # when it began (monotonic seconds)

    @property
    def storage(self) -> StorageTally:
        return self._db.tally

    def open_long_polls(self) -> int:
        return self._waiters.count()

    def file_sizes(self) -> tuple[int, int]:
        """Bytes of the database file and of its write-ahead log (0 for one that is missing)."""
        return _size(self._db.path), _size(self._db.path + "-wal")

    async def running_move_tasks(self, up_to_queue_id: int) -> tuple[list[tuple[str, str, str, int, int]],
                                                                      tuple[int, int, int]]:
        """(region, account, source queue, moved, to move) of every running move task from a queue whose
        id is at most `up_to_queue_id`, and (tasks, moved, to move) of the others summed."""
        return await self._reads.running_move_tasks(up_to_queue_id)

    async def unready(self) -> list[str]:
        """Why the server cannot take writes now; empty when it can.

        The probe is a write (one small row, committed and synced like any send): a lock held by
        another process, a read-only or full disk, or a failed fsync fail it as they fail a send,
        and its success ends an outage, so that an idle server that nobody sends to while it is
        out of rotation still comes back. One probe runs at a time and at most one begins every
        READY_PROBE_SECONDS; callers in between share its answer, and what is known without a
        write (a failed fsync, a task that ended, shutdown) is added at once.
        """
        if self._db.health.stopping:
            return ["the server is shutting down"]
        probe = self._probe
        if probe is None or (probe.done() and time.monotonic() - self._probed_at >= READY_PROBE_SECONDS):
            self._probed_at = time.monotonic()
            probe = self._probe = asyncio.ensure_future(self._write_probe())
        failure = await asyncio.shield(probe)  # a caller that goes away leaves the probe to the others
        known = self.known_problems()
        return known if failure is None else [failure] + [p for p in known if p != failure]

    async def _write_probe(self) -> str | None:
        self._probes += 1
        self._db.tally.readiness_probes += 1
        value = self._probes.to_bytes(8, "big")

        def probe(tx: Transaction) -> None:
            tx.conn.execute(_PROBE, (value,))

        try:
            await self._db.run(probe)
            await self._db.durable()
        except errors.SQSError as error:
            return error.message
        return None

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


_PROBE = ("INSERT INTO settings (key, value) VALUES ('readiness_probe', ?)"
          " ON CONFLICT (key) DO UPDATE SET value = excluded.value")


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
