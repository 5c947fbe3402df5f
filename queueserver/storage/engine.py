"""QueueEngine: the storage layer's public API, the one class protocol and console call.

Every method takes already-validated input; every instant comes from the injected clock. The
engine wires its parts together and runs their work on the database thread; each part has a
module of its own: the queue catalogue's methods (queue_catalogue.py, the engine's base class:
create, find, change and delete queues, subscriptions, move tasks), the queues in memory (queue_cache.py), sends and subscriptions (sending.py),
claims (receiving.py), cooldowns, the retention sweeper, move tasks (redrive.py), long polls
(waiters.py), counts (count_cache.py) and what metrics read (observe.py).
"""

from __future__ import annotations

import asyncio
import functools
import os
from bisect import bisect_left
from typing import Awaitable, Callable, ContextManager

from queueserver import errors
from queueserver.clock import Clock, ManualClock
from queueserver.extensions import MAX_SUBSCRIPTIONS
from queueserver.limits import IN_FLIGHT_LIMIT
from queueserver.models import (
    DONE, BrowsedMessage, Caller, Delivery, EntryOutcome, NewMessage, Queue, ReceivedMessage,
    SentMessage, VisibilityChange,
)
from queueserver.storage import clock_store, message_store, queue_store
from queueserver.storage.clock_store import KeptClock
from queueserver.storage.cooldowns import Cooldowns
from queueserver.storage.count_cache import MAX_AGE_SECONDS, CountCache
from queueserver.storage.database import AUTOCHECKPOINT_PAGES, Database
from queueserver.storage.operations import Transaction
from queueserver.storage.handles import change_one_visibility, expired_handle, invalid_handle
from queueserver.storage.migrations import migrate
from queueserver.storage.observe import Observer
from queueserver.storage.queue_cache import QueueCache
from queueserver.storage.queue_catalogue import QueueCatalogue
from queueserver.storage.read_side import ReadSide
from queueserver.storage.receipts import ReceiptSigner
from queueserver.storage.receiving import Receiving, retention_cutoff
from queueserver.storage.redrive import Redriver
from queueserver.storage.sending import Sending
from queueserver.storage.sqlite_file import open_file
from queueserver.storage.sweeper import RetentionSweeper
from queueserver.storage.topics import Topics
from queueserver.storage.traffic import RECEIVED, SENT, Traffic
from queueserver.storage.waiters import Waiters
from queueserver.tallies import SIZE_BOUNDS, QueueTally


class QueueEngine(QueueCatalogue):
    """The queues (QueueCatalogue: create, find, change, delete, subscriptions, move tasks) and their
    messages (here: send, receive, delete, change visibility, browse), over one database."""

    def __init__(self, db: Database, reads: ReadSide, clock: Clock, signer: ReceiptSigner, queues: list[Queue],
                 next_row_id: int, *, enforce_cooldowns: bool, in_flight_limit: int, fifo_in_flight_limit: int,
                 counts_max_age: float, max_subscriptions: int) -> None:
        self._db = db
        self._reads = reads
        self._counts = CountCache(reads.counts, clock, counts_max_age)
        self._clock = clock
        self._signer = signer
        self._queues = QueueCache(queues)
        self._cooldowns = Cooldowns(enforce_cooldowns)
        self._loop = asyncio.get_running_loop()
        self._waiters = Waiters(clock, self._loop)
        self._sending = Sending(self._queues, next_row_id, self._counts_change, self._counts_change_all,
                                self._wake_at_commit, max_subscriptions)
        self._receiving = Receiving(self._queues, signer, in_flight_limit, fifo_in_flight_limit,
                                    self._counts_change, self._sending.deliver)
        self.health = db.health  # what a readiness check reports: False once a background worker ended
        self._sweeper = RetentionSweeper(db, clock, self._queues.in_transaction)
        self._traffic = Traffic()  # sent/received per minute, for the console
        self._move_tasks = Redriver(db, clock, self._queues.find_by_arn_in_transaction, self._notify,
                                    self._counts.changed)
        self.queue_tallies: dict[int, QueueTally] = {}  # by queue id: the CloudWatch counters
        self.topics = Topics(db, clock, self._queues, self._sending, self._count_sent)  # the SNS API's storage
        self.observe = Observer(db, reads, self._waiters, self._queues.first_created, self.queue_counts)
        # The test clock's moves go through here (None on the real clock), so that it keeps its place.
        self.test_clock = KeptClock(db, clock) if isinstance(clock, ManualClock) else None

    @classmethod
    async def open(cls, path: str, clock: Clock, *, enforce_cooldowns: bool = False,
                   in_flight_limit: int = IN_FLIGHT_LIMIT,
                   fifo_in_flight_limit: int = IN_FLIGHT_LIMIT,
                   counts_max_age: float = MAX_AGE_SECONDS,
                   max_subscriptions: int = MAX_SUBSCRIPTIONS,
                   sync_log: Callable[[int], None] = os.fdatasync) -> "QueueEngine":
        loop = asyncio.get_running_loop()
        path = os.path.realpath(path)  # SQLite keeps a symlinked file's -wal beside the target; so must we
        conn, lock = await loop.run_in_executor(None, open_file, path, migrate)
        db = Database(conn, path, lock, sync_log=sync_log)

        def prepare(tx: Transaction) -> tuple[bytes, list[Queue], int, int | None]:
            return (queue_store.receipt_secret(tx.conn), queue_store.load_all(tx.conn),
                    message_store.highest_row_id(tx.conn), clock_store.resume(tx.conn, clock))

        try:
            secret, queues, highest, clock_reading = await db.run(prepare)
            await db.durable()  # a reading shown once must be the one a crash resumes at
            reads = await ReadSide.open(path)
        except BaseException:
            await db.close()
            raise
        if isinstance(clock, ManualClock) and clock_reading is not None:
            clock.resume_at(clock_reading)
        engine = cls(db, reads, clock, ReceiptSigner(secret), queues, highest + 1,
                     enforce_cooldowns=enforce_cooldowns, in_flight_limit=in_flight_limit,
                     fifo_in_flight_limit=fifo_in_flight_limit, counts_max_age=counts_max_age,
                     max_subscriptions=max_subscriptions)
        try:
            await engine._move_tasks.resume()
            await engine.topics.load()  # here, not at the first request: a scrape or a request must not wait
        except BaseException:  # the readers' threads would keep the process alive
            await engine.close()
            raise
        return engine

    def durable(self) -> Awaitable[None]:
        """Wait until every change made so far is on disk (ServiceUnavailable if that failed).
        Results come back at COMMIT; nothing may be acknowledged to a client before this returns.
        (The database's coroutine itself: every request awaits this, so no frame of its own.)"""
        return self._db.durable()

    async def checkpoint_at_commit(self, on: bool) -> None:
        """Off while another process checkpoints the WAL (Litestream: see replication/supervisor.py)."""
        await self._db.set_autocheckpoint(AUTOCHECKPOINT_PAGES if on else 0)

    def guard_write_backs(self, guard: Callable[[], ContextManager[object]]) -> None:
        """Hold `guard()` around every write-back of a deleted database file (on the database thread)."""
        self._db.write_back_guard = guard

    def begin_shutdown(self) -> None:
        """Answer every long poll now and accept no new waits."""
        self._waiters.close()

    async def close(self) -> None:
        self.health.stopping = True
        self.begin_shutdown()
        if self.test_clock is not None:
            await self.test_clock.close()
        await self._sweeper.close()
        await self._move_tasks.close()
        await self._counts.close()
        await self._reads.close()
        await self._db.close()

    @property
    def clock(self) -> Clock:
        return self._clock

    # -- queues ---------------------------------------------------------------

    async def send_messages(self, queue: Queue, messages: list[NewMessage], *, sender_id: str) -> list[SentMessage]:
        """Store the messages; on a FIFO queue a duplicate within 5 minutes is answered, not stored."""
        now = self._clock.now_ms()
        sent, stored = await self._db.run(lambda tx: self._sending.send(tx, queue, messages, now, sender_id))
        self._traffic.add(queue.id, SENT, len(messages), now)
        tally = self.queue_tallies.get(queue.id) or self._tally(queue.id)
        tally.sent += len(stored)
        sizes = tally.sizes
        for _, _, message in stored:  # Histogram.observe inlined: this runs for every message
            sizes.counts[bisect_left(SIZE_BOUNDS, message.size)] += 1
            sizes.sum += message.size
        return sent

    def _count_sent(self, queue: Queue, messages: list[NewMessage], now: int) -> None:
        """A topic's delivery into the queue, in its traffic and CloudWatch counters (as a send is)."""
        self._traffic.add(queue.id, SENT, len(messages), now)
        tally = self._tally(queue.id)
        tally.sent += len(messages)
        for message in messages:
            tally.sizes.counts[bisect_left(SIZE_BOUNDS, message.size)] += 1
            tally.sizes.sum += message.size

    async def receive_messages(self, queue: Queue, *, max_messages: int, visibility_timeout: int,
                               wait_seconds: int, attempt_id: str | None = None, client: Caller | None = None,
                               with_attributes: bool = True) -> list[ReceivedMessage] | list[Delivery]:
        """Claim up to `max_messages`; with a wait, return as soon as any are available. Without
        `with_attributes` (the answer has none), Deliveries: what the answer shows and no more.

        A long poll that waited watches its `client`: it ends when the client hangs up, claims
        nothing after, and puts back at once what a claim took while the client was leaving.
        """
        loop, clock, receiving = self._loop, self._clock, self._receiving
        deadline_ms = clock.now_ms() + wait_seconds * 1000
        real_deadline = loop.time() + wait_seconds
        hangup: asyncio.Future | None = None  # the client's, watched from the first wait on
        try:
            while True:
                # Registered before the claim, so that no wake-up is missed.
                # A FIFO claim may be held back by its groups, so there a waiter counts for one message.
                appetite = 1 if queue.fifo else max_messages
                waiter = self._waiters.register(queue.id, appetite) if wait_seconds > 0 else None
                try:
                    messages, next_visible, moved_to = await self._db.run(lambda tx: receiving.claim(
                        tx, queue, clock.now_ms(), max_messages=max_messages, visibility_timeout=visibility_timeout,
                        attempt_id=attempt_id, short_poll=waiter is None, with_attributes=with_attributes))
                    if messages is None:
                        raise errors.OverLimit(f"The maximum number of in flight messages"
                                               f" ({receiving.in_flight_limit}) has been reached.")
                    if moved_to is not None:
                        self._notify(moved_to[0], moved_to[1])
                        self._tally(queue.id).dead_lettered += moved_to[1]
                    if messages and hangup is not None and await self._client_left(client, queue, messages):
                        return []
                    if messages or waiter is None:
                        self._traffic.add(queue.id, RECEIVED, len(messages), clock.now_ms())
                        return self._count_received(queue, messages)
                    if clock.now_ms() >= deadline_ms or loop.time() >= real_deadline:
                        return self._count_received(queue, messages)
                    wake_ms = deadline_ms if next_visible is None else min(deadline_ms, next_visible)
                    if client is not None and hangup is None:
                        hangup = asyncio.ensure_future(client.hung_up())
                    woken_by_hangup = await self._waiters.wait(waiter, wake_ms, real_deadline, hangup)
                    if client is not None and client.gone():  # claim nothing for nobody
                        if not woken_by_hangup:
                            self._notify(queue.id, appetite)  # the wake-up was for messages: pass it on
                        return []
                finally:
                    if waiter is not None:
                        self._waiters.discard(queue.id, waiter)
        finally:
            if hangup is not None:
                hangup.cancel()

    async def _client_left(self, client: Caller | None, queue: Queue,
                           messages: list[ReceivedMessage] | list[Delivery]) -> bool:
        """Whether the long poll's client hung up while its claim ran (or while it became durable, which
        its answer would wait for too); if so, the claim is undone before anyone else asks."""
        await self._db.durable()
        if client is None or not client.gone():
            return False
        receipts = [(r.row_id, r.token) for r in map(self._signer.decode, (m.receipt_handle for m in messages)) if r]
        now = self._clock.now_ms()
        await self._db.run(lambda tx: self._receiving.unclaim(tx, queue.id, receipts, now))
        self._notify(queue.id, len(receipts))
        return True

    async def delete_messages(self, queue: Queue, handles: list[str]) -> list[EntryOutcome]:
        """Delete by receipt handle. On a standard queue the latest handle deletes even after its
        visibility timeout and a superseded one deletes nothing, silently; on a FIFO queue a handle
        whose message is no longer in flight under it fails as expired (as SQS does)."""
        now = self._clock.now_ms()
        queue_id = queue.id
        receipts = self._signer.decode_all(handles)  # (queue id, row id, token) or None

        def delete(tx: Transaction) -> tuple[list[EntryOutcome], int]:
            current = self._queues.require(queue)
            self._counts_change(tx, queue_id)
            outcomes: list[EntryOutcome] = []
            rows = []  # (row id, token) of each handle of this queue
            for handle, receipt in zip(handles, receipts):
                if receipt is None or receipt[0] != queue_id:
                    outcomes.append(EntryOutcome(error=invalid_handle(handle)))
                elif current.fifo and not message_store.delete_in_flight(
                        tx.conn, queue_id, receipt[1], receipt[2], now):
                    outcomes.append(EntryOutcome(error=expired_handle(handle)))
                else:
                    outcomes.append(DONE)
                    rows.append((receipt[1], receipt[2]))
            if not current.fifo:
                self._receiving.deleted(tx, queue_id, message_store.delete_received(tx.conn, queue_id, rows))
            return outcomes, len(rows)

        outcomes, deleted = await self._db.run(delete)
        (self.queue_tallies.get(queue_id) or self._tally(queue_id)).deleted += deleted
        if queue.fifo or self._receiving.at_in_flight_limit(queue_id):
            self._notify(queue_id, len(handles))  # a deleted message may free its group or the in-flight limit
        return outcomes

    async def change_visibility(self, queue: Queue, changes: list[VisibilityChange]) -> list[EntryOutcome]:
        now = self._clock.now_ms()

        def change(tx: Transaction) -> list[EntryOutcome]:
            self._queues.require(queue)
            self._counts_change(tx, queue.id)
            return [change_one_visibility(tx.conn, self._signer, queue, c, now) for c in changes]

        outcomes = await self._db.run(change)
        self._notify(queue.id, len(changes))
        return outcomes

    def traffic_per_minute(self, queue: Queue, now_ms: int) -> tuple[list[int], list[int]]:
        """(sent, received) in each of the last minutes, oldest first (the console's charts)."""
        return self._traffic.per_minute(queue.id, now_ms)

    async def browse_messages(self, queue: Queue, *, after: int, limit: int) -> list[BrowsedMessage]:
        """The queue's messages in send order, read without receiving them (an extension to SQS)."""
        if queue.subscribed_to is not None:  # its deliveries not yet taken, in their place
            await self._db.run(lambda tx: self._sending.deliver(tx, queue))
        now = self._clock.now_ms()
        return await self._reads.browse(queue.id, queue.fifo, after, limit, now, retention_cutoff(queue, now))

    async def sweep_expired(self, batch: int | None = None) -> int:
        """Remove messages past their queue's retention period now, of every queue or of the next `batch`
        (the sweeper does that every few seconds); returns how many."""
        return await self._sweeper.sweep(batch)

    def _tally(self, queue_id: int) -> QueueTally:
        tally = self.queue_tallies.get(queue_id)
        if tally is None:
            tally = self.queue_tallies[queue_id] = QueueTally()
        return tally

    def _count_received(self, queue: Queue, messages: list[ReceivedMessage] | list[Delivery],
                        ) -> list[ReceivedMessage] | list[Delivery]:
        tally = self.queue_tallies.get(queue.id) or self._tally(queue.id)
        if messages:
            tally.received += len(messages)
        else:
            tally.empty_receives += 1
        return messages

    # -- on the database thread ----------------------------------------------

    def _counts_change(self, tx: Transaction, queue_id: int) -> None:
        """The queue's counts change at this operation's COMMIT, before any answer, even if its caller has gone."""
        tx.on_commit(functools.partial(self._counts.changed, queue_id))  # a partial: no frame of its own

    def _counts_change_all(self, tx: Transaction, queue_ids: list[int]) -> None:
        tx.on_commit(functools.partial(self._counts.changed_all, queue_ids))

    def _wake_at_commit(self, tx: Transaction, queue_id: int, count: int) -> None:
        """Wake the queue's long polls at COMMIT (a poll that registers later claims after this commit)."""
        if self._waiters.waiting(queue_id):
            tx.on_commit(lambda: self._notify(queue_id, count))

    def _notify(self, queue_id: int, count: int | None = None) -> None:
        self._waiters.notify(queue_id, count)

