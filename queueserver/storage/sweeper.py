"""The retention sweeper: removes messages past their queue's retention period, every few seconds.

The counts leave expired messages out already; the sweep frees their space (after a full disk,
it is what makes room again).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from queueserver.clock import Clock
from queueserver.models import Queue
from queueserver.storage import message_store, subscriptions
from queueserver.storage.database import Database, Transaction
from queueserver.storage.receiving import retention_cutoff

log = logging.getLogger(__name__)

SWEEP_INTERVAL_SECONDS = 5.0


class RetentionSweeper:
    def __init__(self, db: Database, clock: Clock, queues: Callable[[], list[Queue]]) -> None:
        self._db = db
        self._clock = clock
        self._queues = queues  # the database thread's view: called there
        self._task = asyncio.create_task(self._sweep_forever())
        db.health.watch_task(self._task, "the retention sweeper")

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    async def sweep(self) -> int:
        """Remove every expired message now; returns how many."""
        now = self._clock.now_ms()

        def sweep(tx: Transaction) -> int:
            message_store.forget_expired_fifo_state(tx.conn, now)
            removed = 0
            for queue in self._queues():
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
                removed = await self.sweep()
            except Exception as exc:  # noqa: BLE001 - the sweeper must outlive any failure
                if not failing:
                    log.error("retention sweep failed, retrying every %.0f s: %s", SWEEP_INTERVAL_SECONDS,
                              getattr(exc, "message", None) or exc)
                    failing = True
                continue
            if failing:
                log.warning("retention sweep works again (%d expired messages removed)", removed)
                failing = False
