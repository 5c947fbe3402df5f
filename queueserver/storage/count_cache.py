"""Queue counts from a cache that the read side refreshes, one count per queue at a time.

SQS calls the counts approximate (AWS's lag is up to a minute); a dashboard polling a queue of a
million messages must not cost a count of a million rows per request. So:

- **Exact while nothing changed.** The engine calls `changed(queue_id)` after every committed
  operation that touches a queue's messages (before its caller is answered). An entry remembers the
  queue's change number when its read began, and the instant its counts next change by time alone
  (a hidden message shows, a message expires). While neither happened it is the truth and is served
  as is, however busy other queues are: a dashboard on an idle queue of a million costs nothing.
- **Refreshed at most every `min(max_age, cost / COST_SHARE)` once counting is expensive.** A count
  that took 25 ms is taken at most every 0.5 s: counting a big queue costs at most COST_SHARE of a
  reader thread, however often it is polled. A count under CHEAP_SECONDS (a small queue) is taken
  whenever something changed, so small queues are exact after every change (read-your-writes).
- **Single flight.** One refresh per queue at a time; every caller meanwhile shares it.
- **Callers seldom wait for an expensive one.** A caller waits for a refresh if it will be done
  within WAIT_SECONDS, if there is nothing to serve yet, or if the last counts were read more than
  `max_age` ago (a queue nobody asked about for a while: one count, ~40 ms at a million messages);
  otherwise it gets the last counts while the refresh runs in the background.

Staleness bound: the counts a caller gets were read less than `max_age` (1 s) before the call, so
they show every change committed `max_age` before it: they converge to the truth within `max_age`.
`max_age` 0 makes every change visible to the next call.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Awaitable, Callable

from queueserver.clock import Clock
from queueserver.models import QueueCounts

MAX_AGE_SECONDS = 1.0
COST_SHARE = 0.05
CHEAP_SECONDS = 0.005
WAIT_SECONDS = 0.01

Count = Callable[[int, int, int], Awaitable[tuple[QueueCounts, int | None]]]


@dataclass
class _Entry:
    counts: QueueCounts
    version: int  # the queue's change number before the read began
    retention_ms: int
    changes_at_ms: int | None  # when the counts change without a write
    taken_at: float  # loop time the read began
    cost: float  # seconds the read took


class CountCache:
    """`counts(queue_id, retention_ms)`; `count(queue_id, now_ms, cutoff_ms)` does the reading."""

    def __init__(self, count: Count, clock: Clock,
                 max_age: float = MAX_AGE_SECONDS, cheap_seconds: float = CHEAP_SECONDS,
                 cost_share: float = COST_SHARE) -> None:
        self._count = count
        self._versions: dict[int, int] = {}
        self._clock = clock
        self._max_age = max_age
        self._cheap_seconds = cheap_seconds
        self._cost_share = cost_share
        self._loop = asyncio.get_running_loop()
        self._entries: dict[int, _Entry] = {}
        self._refreshing: dict[int, asyncio.Task[_Entry]] = {}
        self.reads = 0  # counts taken, for tests and the benchmark

    async def counts(self, queue_id: int, retention_ms: int) -> QueueCounts:
        entry = self._entries.get(queue_id)
        if entry is not None and self._fresh(queue_id, entry, retention_ms):
            return entry.counts
        refresh = self._refreshing.get(queue_id)
        if refresh is None:
            start_at = 0.0 if entry is None else self._next_start(entry)
            refresh = self._loop.create_task(self._refresh(queue_id, retention_ms, start_at))
            refresh.add_done_callback(_seen)
            self._refreshing[queue_id] = refresh
        now = self._loop.time()
        if (entry is None or now - entry.taken_at >= self._max_age
                or max(0.0, self._next_start(entry) - now) + entry.cost <= WAIT_SECONDS):
            return (await asyncio.shield(refresh)).counts
        return entry.counts

    async def settled(self, queue_id: int) -> None:
        """Wait for the queue's refresh under way, if any (tests wait on this, not on a clock)."""
        refresh = self._refreshing.get(queue_id)
        if refresh is not None:
            await asyncio.shield(refresh)

    def changed(self, queue_id: int) -> None:
        """The queue's messages changed (committed): the next caller gets counts read after this."""
        self._versions[queue_id] = self._versions.get(queue_id, 0) + 1

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

    def _next_start(self, entry: _Entry) -> float:
        """The earliest loop time the next count of this queue may begin."""
        if entry.cost < self._cheap_seconds:
            return entry.taken_at
        return entry.taken_at + min(self._max_age, entry.cost / self._cost_share)

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
            entry = _Entry(counts, version, retention_ms, changes_at, began, self._loop.time() - began)
            self._entries[queue_id] = entry
            return entry
        finally:
            self._refreshing.pop(queue_id, None)


def _seen(task: asyncio.Task) -> None:
    """A failed refresh nobody awaited: the next caller tries again (and gets the error if it waits)."""
    if not task.cancelled():
        task.exception()
