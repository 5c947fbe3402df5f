"""Long-poll waiters: per-queue futures woken after a commit, or by the clock.

A receive registers its waiter before it claims, so a send committed between an
empty claim and the wait still wakes it. A waiter also wakes when the injected clock
reaches the next known `visible_at` (a delay or a visibility ending) and when its
real WaitTimeSeconds run out, and when its client hangs up. Nothing polls the database.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

from queueserver.clock import Clock

HUNG_UP = object()  # what a waiter woken by its client's hang-up holds


class Waiters:
    def __init__(self, clock: Clock, loop: asyncio.AbstractEventLoop) -> None:
        self._clock = clock
        self._loop = loop
        # Per queue, waiters in the order they began waiting, with how many messages each may take.
        self._by_queue: defaultdict[int, dict[asyncio.Future, int]] = defaultdict(dict)
        self.closed = False

    def register(self, queue_id: int, appetite: int = 1) -> asyncio.Future | None:
        """A waiter for the queue that will claim up to `appetite` messages, or None once shutdown has begun."""
        if self.closed:
            return None
        waiter = self._loop.create_future()
        self._by_queue[queue_id][waiter] = appetite
        return waiter

    def waiting(self, queue_id: int) -> bool:
        """Whether any long poll waits on the queue (safe to ask from the database thread)."""
        return queue_id in self._by_queue

    def count(self) -> int:
        """Long polls waiting now, on every queue."""
        return sum(len(waiters) for waiters in list(self._by_queue.values()))

    def discard(self, queue_id: int, waiter: asyncio.Future) -> None:
        waiters = self._by_queue.get(queue_id)
        if waiters is not None:
            waiters.pop(waiter, None)
            if not waiters:
                del self._by_queue[queue_id]

    async def wait(self, waiter: asyncio.Future, wake_ms: int, real_deadline: float,
                   hangup: asyncio.Future | None = None) -> bool:
        """Until notified, the clock reaches `wake_ms`, the loop's time reaches `real_deadline`, or
        `hangup` (the client's) is done; returns whether the hang-up woke it."""
        def wake() -> None:
            if not waiter.done():
                waiter.set_result(None)

        def hung_up(_: asyncio.Future) -> None:
            if not waiter.done():
                waiter.set_result(HUNG_UP)

        timer = self._clock.call_at(wake_ms, wake)
        real_timer = self._loop.call_at(real_deadline, wake)
        if hangup is not None:
            hangup.add_done_callback(hung_up)
        try:
            woken_by = await waiter
            return woken_by is HUNG_UP
        finally:
            timer.cancel()
            real_timer.cancel()
            if hangup is not None:
                hangup.remove_done_callback(hung_up)

    def notify(self, queue_id: int, count: int | None = None) -> None:
        """Wake the queue's longest-waiting long polls to claim again: enough of them to take
        `count` messages, plus one in case one is just leaving; all of them when count is None.

        Waking only as many polls as the messages can feed, not all, keeps a send to a queue
        with 1,000 idle polls from running 1,000 claims, and a batch of ten from waking ten
        polls that each want ten; a woken poll that finds nothing waits again.
        """
        budget = None if count is None else count
        spare = 1
        for waiter, appetite in self._by_queue.get(queue_id, {}).items():
            if waiter.done():
                continue
            if budget is not None:
                if budget > 0:
                    budget -= appetite
                elif spare:
                    spare -= 1
                else:
                    return
            waiter.set_result(None)

    def close(self) -> None:
        """Answer every long poll now and accept no new waits."""
        self.closed = True
        for waiters in self._by_queue.values():
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
