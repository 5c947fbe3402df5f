"""Queue counts from a cache that the read side refreshes, one count per queue at a time.

SQS calls the counts approximate (AWS's lag is up to a minute); a dashboard polling a queue of a
million messages must not cost a count of a million rows per request. So:

- **Exact while nothing changed.** The engine calls `changed(queue_id)` after every committed
  operation that touches a queue's messages (before its caller is answered). An entry remembers the
  queue's change number when its read began, and the instant its counts next change by time alone
  (a hidden message shows, a message expires). While neither happened it is the truth and is served
  as is, however busy other queues are: a dashboard on an idle queue of a million costs nothing.
- **A small queue is counted again after every change** (under SMALL_QUEUE messages: a few ms), and
  the caller waits for that count: exact counts, read-your-writes. Decided by size, not by a measured
  time, so that a loaded machine does not make small queues approximate.
- **A big queue is counted at most once every `max_age / 2` seconds (1 s).** Between counts a caller
  gets the last counts at once and the next count runs in the background, `max_age / 2` after the last
  began; so a queue polled at least that often is never waited for. A caller finding counts older
  than `max_age` (a queue nobody asked about for a while) waits for a count (~40 ms at a million).
- **Single flight.** One count per queue at a time; every caller meanwhile shares it.

Staleness bound: the counts a caller gets were read less than `max_age` (2 s) before the call, so
they show every change committed `max_age` before it: they converge to the truth within `max_age`.
`max_age` 0 makes every change visible to the next call.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Awaitable, Callable

from queueserver.clock import Clock
from queueserver.models import QueueCounts

MAX_AGE_SECONDS = 2.0
SMALL_QUEUE = 100_000  # messages; counting them takes ~4 ms

Count = Callable[[int, int, int], Awaitable[tuple[QueueCounts, int | None]]]


@dataclass
class _Entry:
    counts: QueueCounts
    version: int  # the queue's change number before the read began
    retention_ms: int
    changes_at_ms: int | None  # when the counts change without a write
    taken_at: float  # loop time the read began


class CountCache:
    """`counts(queue_id, retention_ms)`; `count(queue_id, now_ms, cutoff_ms)` does the reading."""

    def __init__(self, count: Count, clock: Clock, max_age: float = MAX_AGE_SECONDS,
                 small_queue: int = SMALL_QUEUE) -> None:
        self._count = count
        self._clock = clock
        self._max_age = max_age
        self._small_queue = small_queue
        self._loop = asyncio.get_running_loop()
        self._versions: dict[int, int] = {}
        self._entries: dict[int, _Entry] = {}
        self._refreshing: dict[int, asyncio.Task[_Entry]] = {}
        self.reads = 0  # counts taken, for tests

    async def counts(self, queue_id: int, retention_ms: int) -> QueueCounts:
        entry = self._entries.get(queue_id)
        if entry is not None and self._fresh(queue_id, entry, retention_ms):
            return entry.counts
        now = self._loop.time()
        wait = entry is None or self._small(entry) or now - entry.taken_at >= self._max_age
        refresh = self._refreshing.get(queue_id)
        if refresh is None:
            start_at = now if wait or entry is None else entry.taken_at + self._max_age / 2
            refresh = self._loop.create_task(self._refresh(queue_id, retention_ms, start_at))
            refresh.add_done_callback(_seen)
            self._refreshing[queue_id] = refresh
        if wait:
            return (await asyncio.shield(refresh)).counts
        assert entry is not None
        return entry.counts

    async def settled(self, queue_id: int) -> None:
        """Wait for the queue's count under way, if any (tests wait on this, not on a clock)."""
        refresh = self._refreshing.get(queue_id)
        if refresh is not None:
            await asyncio.shield(refresh)

    def changed(self, queue_id: int) -> None:
        """The queue's messages changed (committed): the next caller gets counts read after this."""
        self._versions[queue_id] = self._versions.get(queue_id, 0) + 1

    def changed_all(self, queue_ids: list[int]) -> None:
        """`changed` for each (a send's subscriptions, in one callback at COMMIT)."""
        versions = self._versions
        for queue_id in queue_ids:
            versions[queue_id] = versions.get(queue_id, 0) + 1

    def forget(self, queue_id: int) -> None:
        """A deleted queue's entry (its id is never used again)."""
        self._entries.pop(queue_id, None)
        self._versions.pop(queue_id, None)

    async def close(self) -> None:
        tasks = list(self._refreshing.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _fresh(self, queue_id: int, entry: _Entry, retention_ms: int) -> bool:
        return (entry.version == self._versions.get(queue_id, 0) and entry.retention_ms == retention_ms
                and (entry.changes_at_ms is None or self._clock.now_ms() < entry.changes_at_ms))

    def _small(self, entry: _Entry) -> bool:
        c = entry.counts
        return c.visible + c.in_flight + c.delayed < self._small_queue

    async def _refresh(self, queue_id: int, retention_ms: int, start_at: float) -> _Entry:
        try:
            delay = start_at - self._loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            version = self._versions.get(queue_id, 0)  # before the snapshot: a change meanwhile makes it stale, not wrong
            began = self._loop.time()
            now = self._clock.now_ms()
            counts, changes_at = await self._count(queue_id, now, now - retention_ms)
            self.reads += 1
            entry = _Entry(counts, version, retention_ms, changes_at, began)
            self._entries[queue_id] = entry
            return entry
        finally:
            self._refreshing.pop(queue_id, None)


def _seen(task: asyncio.Task) -> None:
    """A failed count nobody awaited: the next caller tries again (and gets the error if it waits)."""
    if not task.cancelled():
        task.exception()
