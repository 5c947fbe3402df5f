"""The retention sweeper: removes messages past their queue's retention period, every few seconds.

The counts leave expired messages out already; the sweep frees their space (after a full disk,
it is what makes room again). It runs on the writer, one DELETE per queue: at 100,000 queues a
sweep of them all held every write up for 0.7 s. So a periodic sweep visits SWEEP_BATCH queues,
going on next time from where it stopped: a queue comes round again after about
queues / SWEEP_BATCH sweeps (every 5 s up to 1,000 queues, every 50 s at 10,000).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Callable

from queueserver.clock import Clock
from queueserver.models import Queue
from queueserver.storage import message_store, subscriptions
from queueserver.storage.database import Database
from queueserver.storage.operations import Transaction
from queueserver.storage.receiving import retention_cutoff

log = logging.getLogger(__name__)

SWEEP_INTERVAL_SECONDS = 5.0
SWEEP_BATCH = 1000  # queues a periodic sweep visits (~7 ms of the writer's time)


class RetentionSweeper:
    def __init__(self, db: Database, clock: Clock, queues: Callable[[], list[Queue]]) -> None:
        self._db = db
        self._clock = clock
        self._queues = queues  # the database thread's view: called there
        self._next = 0  # where in that view the next periodic sweep starts (read and set there too)
        self._task = asyncio.create_task(self._sweep_forever())
        db.health.watch_task(self._task, "the retention sweeper")

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    async def sweep(self, batch: int | None = None) -> int:
        """Remove the expired messages of every queue now, or of the next `batch` queues; returns how many."""
        now = self._clock.now_ms()

        def sweep(tx: Transaction) -> int:
            message_store.forget_expired_fifo_state(tx.conn, now)
            queues = self._queues()
            if batch is not None:
                start = self._next if self._next < len(queues) else 0
                queues = queues[start:start + batch]
                tx.on_rollback(functools.partial(setattr, self, "_next", self._next))
                self._next = start + len(queues)
            removed = 0
            for queue in queues:
                cutoff = retention_cutoff(queue, now)
                if queue.subscribed_to is not None:  # what it has not taken from its queue expires too
                    subscriptions.skip(tx.conn, queue.id, cutoff)
                removed += message_store.delete_expired(tx.conn, queue.id, cutoff)
            return removed

        return await self._db.run(sweep)

    async def _sweep_forever(self) -> None:
        """Sweep every SWEEP_INTERVAL_SECONDS, whatever fails. A failure is logged once (storage
        failures arrive as ServiceUnavailable), and so is the recovery."""
        failing = False
        while True:
            await asyncio.sleep(SWEEP_INTERVAL_SECONDS)
            try:
                removed = await self.sweep(SWEEP_BATCH)
            except Exception as exc:  # noqa: BLE001 - the sweeper must outlive any failure
                if not failing:
                    log.error("retention sweep failed, retrying every %.0f s: %s", SWEEP_INTERVAL_SECONDS,
                              getattr(exc, "message", None) or exc)
                    failing = True
                continue
            if failing:
                log.warning("retention sweep works again (%d expired messages removed)", removed)
                failing = False
