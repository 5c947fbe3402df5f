"""The manual test clock's reading, kept in the database so that it keeps its place.

A `--test-clock` server's clock moves only when a test moves it, so its reading is a fact
about the database, like the messages whose timestamps it stamped: a restart, a clean stop
and start, or a SIGKILL resumes it at exactly the reading it had. The reading is written at
the first start and before each move (durable before the clock shows it), never read back
while serving.

While the storage refuses writes (a full disk, a lock held by another process) the clock still
moves, since tests of those very failures move it, and its reading is saved once the storage
takes writes again; a crash before that resumes at the last reading saved.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3

from queueserver import errors
from queueserver.clock import Clock, ManualClock
from queueserver.storage.database import Database
from queueserver.storage.operations import Transaction

log = logging.getLogger(__name__)

RETRY_SECONDS = 1.0  # how often a reading the storage refused is offered again


def resume(conn: sqlite3.Connection, clock: Clock) -> int | None:
    """At start, on the database thread: the reading a manual clock resumes at (None: keep its own,
    which is now saved as its first). A server on the real clock drops any saved reading: its
    timestamps are the wall clock's, and a manual clock resumed behind them would see them ahead."""
    if not isinstance(clock, ManualClock):
        conn.execute("DELETE FROM test_clock")
        return None
    row = conn.execute("SELECT now_ms FROM test_clock WHERE id = 1").fetchone()
    if row is not None:
        return int(row[0])
    _save(conn, clock.now_ms())
    return None


def _save(conn: sqlite3.Connection, now_ms: int) -> None:
    # max: a retried save that ran late must not take the reading back
    conn.execute("INSERT INTO test_clock (id, now_ms) VALUES (1, ?)"
                 " ON CONFLICT (id) DO UPDATE SET now_ms = max(now_ms, excluded.now_ms)", (now_ms,))


class KeptClock:
    """Moves a manual clock, its new reading on disk first: a crash at any instant finds the
    reading every answer was given at (a move whose answer was lost may have happened)."""

    def __init__(self, db: Database, clock: ManualClock) -> None:
        self._db = db
        self._clock = clock
        self._moving = asyncio.Lock()  # two moves at once add up: each saves the reading it makes
        self._retry: asyncio.Task[None] | None = None

    def now_ms(self) -> int:
        return self._clock.now_ms()

    def pending(self) -> int:
        """Wake-ups waiting on the clock: one per long poll waiting (what tests wait for)."""
        return self._clock.pending()

    async def advance(self, milliseconds: int) -> int:
        """Move the clock forward; its reading is durable first, or saved later if the storage refuses it."""
        if milliseconds < 0:
            raise ValueError("a clock does not go backwards")
        async with self._moving:
            target = self._clock.now_ms() + milliseconds
            if milliseconds:
                try:
                    await self._save(target)
                except errors.ServiceUnavailable as refusal:  # the storage logged why
                    self._save_later(target, refusal)
            return self._clock.advance(milliseconds)

    async def close(self) -> None:
        """Offer a refused reading one last time (a clean stop then resumes where the clock stood)."""
        if self._retry is not None:
            self._retry.cancel()
            await asyncio.gather(self._retry, return_exceptions=True)
            with contextlib.suppress(errors.ServiceUnavailable):
                await self._save(self._clock.now_ms())

    async def _save(self, reading: int) -> None:
        def save(tx: Transaction) -> None:
            _save(tx.conn, reading)

        await self._db.run(save)
        await self._db.durable()

    def _save_later(self, reading: int, refusal: errors.ServiceUnavailable) -> None:
        if self._retry is None or self._retry.done():
            log.warning("the test clock moves to %d, but the storage refused its reading (%s): it is saved once "
                        "the storage takes writes again; a crash before that resumes at the last one saved",
                        reading, refusal.message)
            self._retry = asyncio.create_task(self._save_once_taken())

    async def _save_once_taken(self) -> None:
        while True:
            await asyncio.sleep(RETRY_SECONDS)
            try:
                await self._save(self._clock.now_ms())
            except errors.ServiceUnavailable:
                continue
            log.warning("the test clock's reading is saved again")
            return
