"""The manual test clock's reading, kept in the database so that it keeps its place.

A `--test-clock` server's clock moves only when a test moves it, so its reading is a fact
about the database, like the messages whose timestamps it stamped: a restart, a clean stop
and start, or a SIGKILL resumes it at exactly the reading it had. The reading is written at
the first start and before each move (durable before the clock shows it), never read back
while serving.
"""

from __future__ import annotations

import asyncio
import sqlite3

from queueserver.clock import Clock, ManualClock
from queueserver.storage.database import Database, Transaction


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
    conn.execute("INSERT INTO test_clock (id, now_ms) VALUES (1, ?)"
                 " ON CONFLICT (id) DO UPDATE SET now_ms = excluded.now_ms", (now_ms,))


class KeptClock:
    """Moves a manual clock, its new reading on disk first: a crash at any instant finds the
    reading every answer was given at (a move whose answer was lost may have happened)."""

    def __init__(self, db: Database, clock: ManualClock) -> None:
        self._db = db
        self._clock = clock
        self._moving = asyncio.Lock()  # two moves at once add up: each saves the reading it makes

    def now_ms(self) -> int:
        return self._clock.now_ms()

    def pending(self) -> int:
        """Wake-ups waiting on the clock: one per long poll waiting (what tests wait for)."""
        return self._clock.pending()

    async def advance(self, milliseconds: int) -> int:
        """Move the clock forward (ServiceUnavailable, and no move, if the reading cannot be saved)."""
        if milliseconds < 0:
            raise ValueError("a clock does not go backwards")
        async with self._moving:
            target = self._clock.now_ms() + milliseconds
            if milliseconds:
                def save(tx: Transaction) -> None:
                    _save(tx.conn, target)

                await self._db.run(save)
                await self._db.durable()
            return self._clock.advance(milliseconds)
