"""The read side: read-only SQLite connections, driven through aiosqlite, for everything that only looks.

Which reads go where, and why:

- **The writer thread** (`database.py`) runs every write, every claim, and every read that must see
  its own group's uncommitted changes (a claim's candidates, a delete's receipt check, CreateQueue's
  "does it exist"). One connection, one hand-off per group: grouped commits need it.
- **The read side** (this module) runs reads that change nothing and may see the last COMMIT:
  queue counts for GetQueueAttributes (through `count_cache.py`), QueueserverBrowseMessages, and
  `queueserver check`; metrics and a console belong here too. In WAL mode a reader never blocks the
  writer and never waits for it, so a count over a million rows no longer holds up every send
  behind it on the one database thread. Each connection has an aiosqlite thread of its own (so
  several readers run at once, and the event loop never blocks on SQLite).
- **Memory** (the engine's committed queue view) answers what is read on every request: queue
  URLs, attributes, ListQueues and ListDeadLetterSourceQueues. They stay there: a read connection
  would only add a hand-off, and the memory view is exact at COMMIT (read-your-writes: CreateQueue
  then GetQueueAttributes shows the attributes set).

A read that SQLite fails (the file unreadable, corrupted, replaced, locked) is answered 503
ServiceUnavailable as a failed write is, logged once until reads work again.

Read-your-writes: a read begins after the COMMIT of every change already answered (results come at
COMMIT), so it sees them; counts are approximate by SQS's definition and may be served from a
cache (see `count_cache.py`), attributes never are.

The WAL checkpoint: a reader's open transaction pins the log's frames after its snapshot, so every
read here is one statement in autocommit mode (one snapshot, released as the statement ends) and no
connection holds a transaction between reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import AsyncIterator

import aiosqlite

from queueserver.models import BrowsedMessage, QueueCounts, messages_within_answer
from queueserver.storage.rows import BODY_COLUMNS, BROWSED_COLUMNS, browsed_messages, qualified
from queueserver.storage.sqlite_file import describe, unavailable

log = logging.getLogger(__name__)

READERS = 2  # the event loop and the writer use the rest of a small machine
FILE_CHECK_SECONDS = 0.25  # as often as the writer looks whether its file was replaced
Identity = tuple[int, int] | None

# One statement, one snapshot. Counting rows one by one through the table costs ~130 ms a
# million messages; here the queue's rows are counted in messages_by_queue alone (three integers an
# entry: the enqueue time in it tells the expired apart, and gives the oldest message in the same
# pass), and only hidden (in flight, delayed) rows are read from the table: visible =
# unexpired - hidden. The hidden ones are the two visibility indexes' ranges past now: in flight
# were received, delayed never were. The next visible_at and the oldest enqueue say when the counts
# change without a write. A subscription's deliveries not yet taken from its queue's fanout_log count
# as its messages (storage/subscriptions.py); for a queue, `pending` is one probe of `subscriptions`
# that finds nothing.
_COUNTS = """
WITH hidden AS (
    SELECT 1 AS received, visible_at_ms FROM messages INDEXED BY messages_received_by_visibility
    WHERE queue_id = :queue_id AND receive_count > 0 AND visible_at_ms > :now AND enqueued_at_ms > :cutoff
    UNION ALL
    SELECT 0, visible_at_ms FROM messages INDEXED BY messages_unreceived_by_visibility
    WHERE queue_id = :queue_id AND receive_count = 0 AND visible_at_ms > :now AND enqueued_at_ms > :cutoff),
counted AS (
    SELECT count(*) AS n, coalesce(sum(received), 0) AS in_flight, coalesce(sum(1 - received), 0) AS delayed,
           min(visible_at_ms) AS next_visible
    FROM hidden),
held AS (
    SELECT count(*) AS unexpired, min(enqueued_at_ms) AS oldest_row FROM messages INDEXED BY messages_by_queue
    WHERE queue_id = :queue_id AND enqueued_at_ms > :cutoff),
pending AS (
    SELECT coalesce(sum(f.visible_at_ms <= :now), 0) AS visible, coalesce(sum(f.visible_at_ms > :now), 0) AS delayed,
           min(CASE WHEN f.visible_at_ms > :now THEN f.visible_at_ms END) AS next_visible,
           min(f.enqueued_at_ms) AS oldest
    FROM subscriptions s JOIN fanout_log f ON f.queue_id = s.queue_id AND f.id > s.delivered_up_to
    WHERE s.id = :queue_id AND f.enqueued_at_ms > :cutoff)
SELECT
    held.unexpired - counted.n + pending.visible,
    counted.in_flight, counted.delayed + pending.delayed,
    coalesce(min(counted.next_visible, pending.next_visible), counted.next_visible, pending.next_visible),
    coalesce(min(held.oldest_row, pending.oldest), held.oldest_row, pending.oldest)
FROM counted, held, pending
"""

# A keyset page through messages_by_queue: the same cost at any depth. Named, because the planner
# may pick a visibility index and sort the whole queue.
BROWSE_CHUNK = 16  # rows a browse reads at a time: at most 16 MiB past the answer's budget
_BROWSE = (
    f"SELECT {qualified('m', BROWSED_COLUMNS)}, {qualified('b', BODY_COLUMNS)}"
    " FROM messages m INDEXED BY messages_by_queue JOIN message_bodies b ON b.id = coalesce(m.body_id, m.id)"
    " WHERE m.queue_id = ? AND m.id > ? AND m.enqueued_at_ms > ? ORDER BY m.id LIMIT ?"
)

# The metrics list the first queues created one by one and sum the others (whose ids are higher):
# move tasks under way, with the queue they empty, of the first; the others' summed.
_RUNNING_MOVE_TASKS = (
    "SELECT q.region, q.account, q.name, t.moved, t.to_move FROM move_tasks t JOIN queues q ON q.id = t.source_queue_id"
    " WHERE t.status = 'RUNNING' AND t.source_queue_id <= ? ORDER BY t.id"
)
_RUNNING_MOVE_TASKS_AFTER = (
    "SELECT count(*), coalesce(sum(moved), 0), coalesce(sum(to_move), 0) FROM move_tasks"
    " WHERE status = 'RUNNING' AND source_queue_id > ?"
)
# The counts of every queue after one, summed in one statement: each part is one range of an index
# (~25 ms a million messages). Unlike a queue's own counts, messages past their retention period
# are still counted until the sweeper removes them (every few seconds).
_COUNTS_AFTER = """
WITH hidden AS (
    SELECT 1 AS received FROM messages INDEXED BY messages_received_by_visibility
    WHERE queue_id > :after AND receive_count > 0 AND visible_at_ms > :now
    UNION ALL
    SELECT 0 FROM messages INDEXED BY messages_unreceived_by_visibility
    WHERE queue_id > :after AND receive_count = 0 AND visible_at_ms > :now),
counted AS (SELECT count(*) AS n, coalesce(sum(received), 0) AS in_flight FROM hidden),
held AS (SELECT count(*) AS total, min(enqueued_at_ms) AS oldest_row FROM messages INDEXED BY messages_by_queue
         WHERE queue_id > :after)
SELECT held.total - n, in_flight, n - in_flight, held.oldest_row
FROM counted, held
"""

_QUEUE_TOTALS = (
    "SELECT q.region, q.account, q.name,"
    " (SELECT count(*) FROM messages WHERE queue_id = q.id)"
    " + (SELECT count(*) FROM subscriptions s JOIN fanout_log f ON f.queue_id = s.queue_id"
    "    AND f.id > s.delivered_up_to WHERE s.id = q.id),"
    " (SELECT count(*) FROM messages INDEXED BY messages_received_by_visibility"
    "  WHERE queue_id = q.id AND receive_count > 0 AND visible_at_ms > ?)"
    " FROM queues q ORDER BY q.region, q.account, q.name"
)


class ReadSide:
    """A few read-only connections; each read takes an idle one for one statement."""

    def __init__(self, path: str, connections: list[tuple[aiosqlite.Connection, Identity]]) -> None:
        self._path = path
        self._identity = _identity(path)
        self._checked_at = time.monotonic()
        self._idle: asyncio.Queue[tuple[aiosqlite.Connection, Identity]] = asyncio.Queue()
        for item in connections:
            self._idle.put_nowait(item)
        self._count = len(connections)
        self._failing: str | None = None  # why reads failed last, until one succeeds

    @classmethod
    async def open(cls, path: str, readers: int = READERS) -> "ReadSide":
        """Open `readers` connections to an existing database (the writer created and migrated it)."""
        connections: list[tuple[aiosqlite.Connection, Identity]] = []
        try:
            for _ in range(readers):
                connections.append(await _connect(path))
        except BaseException:
            for conn, _ in connections:
                await conn.close()
            raise
        return cls(path, connections)

    async def close(self) -> None:
        for _ in range(self._count):
            conn, _ = await self._idle.get()
            await conn.close()

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[aiosqlite.Connection]:
        """An idle connection for one read; SQLite's failures leave as ServiceUnavailable."""
        conn, identity = await self._idle.get()
        try:
            if time.monotonic() - self._checked_at >= FILE_CHECK_SECONDS:
                self._checked_at = time.monotonic()
                self._identity = _identity(self._path)
            if identity != self._identity and self._identity is not None:
                # The writer put a deleted file back as a new one: read that, not the old one.
                fresh = await _connect(self._path)
                await conn.close()
                conn, identity = fresh
            yield conn
        except sqlite3.Error as exc:
            reason = describe(exc)
            if self._failing != reason:
                log.error("reads from the message store fail: %s (%s: %s); requests that read get 503 until "
                          "it clears", reason, type(exc).__name__, exc)
                self._failing = reason
            raise unavailable(reason) from None
        else:
            if self._failing is not None:
                log.warning("reads from the message store work again")
                self._failing = None
        finally:
            self._idle.put_nowait((conn, identity))

    async def counts(self, queue_id: int, now_ms: int, cutoff_ms: int) -> tuple[QueueCounts, int | None]:
        """The queue's counts at `now_ms`, and the instant they next change without a write (None: never)."""
        async with self._connection() as conn:
            rows = await conn.execute_fetchall(_COUNTS, {"queue_id": queue_id, "now": now_ms, "cutoff": cutoff_ms})
        visible, in_flight, delayed, next_visible, oldest = next(iter(rows))
        expiry = None if oldest is None else oldest + (now_ms - cutoff_ms)
        changes = [t for t in (next_visible, expiry) if t is not None]
        return QueueCounts(visible=int(visible), in_flight=int(in_flight), delayed=int(delayed),
                           oldest_enqueued_at_ms=oldest), min(changes, default=None)

    async def browse(self, queue_id: int, fifo: bool, after_row_id: int, limit: int, now_ms: int,
                     cutoff_ms: int) -> list[BrowsedMessage]:
        """Unexpired messages in send order after a row, with their payloads: read BROWSE_CHUNK rows at a
        time, and no more once they hold more than one answer carries (models.messages_within_answer), so
        that a page of large messages is never all in memory; the caller cuts the answer at the same place."""
        browsed: list[BrowsedMessage] = []
        async with self._connection() as conn:
            async with conn.execute(_BROWSE, (queue_id, after_row_id, cutoff_ms, limit)) as cursor:
                while chunk := await cursor.fetchmany(BROWSE_CHUNK):
                    browsed += browsed_messages(chunk, fifo, now_ms)
                    if messages_within_answer(browsed) < len(browsed):  # past the budget: the caller cuts here
                        break
        return browsed

    async def counts_after(self, queue_id: int, now_ms: int) -> QueueCounts:
        """The counts of every queue created after `queue_id`, summed (the oldest: of them all)."""
        async with self._connection() as conn:
            rows = await conn.execute_fetchall(_COUNTS_AFTER, {"after": queue_id, "now": now_ms})
        visible, in_flight, delayed, oldest = next(iter(rows))
        return QueueCounts(visible=int(visible), in_flight=int(in_flight), delayed=int(delayed),
                           oldest_enqueued_at_ms=oldest)

    async def running_move_tasks(self, up_to_queue_id: int) -> tuple[list[tuple[str, str, str, int, int]],
                                                                      tuple[int, int, int]]:
        """(region, account, source queue, moved, to move) of every running move task whose source queue's
        id is at most `up_to_queue_id`; and (tasks, moved, to move) of the others, summed."""
        async with self._connection() as conn:
            listed = [tuple(row) for row in await conn.execute_fetchall(_RUNNING_MOVE_TASKS, (up_to_queue_id,))]
            others = next(iter(await conn.execute_fetchall(_RUNNING_MOVE_TASKS_AFTER, (up_to_queue_id,))))
        return listed, (int(others[0]), int(others[1]), int(others[2]))

    async def queue_totals(self, now_ms: int) -> list[tuple[str, str, str, int, int]]:
        """(region, account, name, messages stored, in flight) of every queue, for `queueserver check`."""
        async with self._connection() as conn:
            return [tuple(row) for row in await conn.execute_fetchall(_QUEUE_TOTALS, (now_ms,))]


async def _connect(path: str) -> tuple[aiosqlite.Connection, Identity]:
    identity = _identity(path)
    conn = await aiosqlite.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    try:
        await conn.execute("PRAGMA busy_timeout=5000")  # only a log recovery makes a reader wait
    except BaseException:
        await conn.close()
        raise
    return conn, identity


def _identity(path: str) -> Identity:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return (status.st_dev, status.st_ino)
