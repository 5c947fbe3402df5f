"""QueueEngine: the storage layer's public API.

Every method takes already-validated input; every instant comes from the injected
clock. Queues are cached in memory (they are few and read on every request) and the
cache is only changed on the database thread after a commit.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import random
from bisect import bisect_left
from typing import Awaitable, Callable

from queueserver import errors, limits
from queueserver.clock import Clock
from queueserver.models import (
    BrowsedMessage, EntryOutcome, NewMessage, Queue, QueueCounts, ReceivedMessage, SentMessage, VisibilityChange, parse_arn,
    sequence_number, uuid4_string,
)
from queueserver.storage import claims, group_claims, message_store, queue_store
from queueserver.storage.count_cache import MAX_AGE_SECONDS, CountCache
from queueserver.storage.database import Database, Transaction
from queueserver.storage.read_side import ReadSide
from queueserver.storage.sqlite_file import open_file
from queueserver.storage.traffic import Traffic
from queueserver.storage.migrations import migrate
from queueserver.storage.observe import Observer
from queueserver.storage.receipts import ReceiptSigner
from queueserver.storage.redrive import Redriver
from queueserver.storage.subscribing import Subscriptions
from queueserver.storage.waiters import Waiters
from queueserver.tallies import SIZE_BOUNDS, QueueTally

log = logging.getLogger(__name__)

SWEEP_INTERVAL_SECONDS = 5.0
DEDUPLICATION_WINDOW_MS = 300_000  # FIFO deduplication ids and receive attempt ids
IN_FLIGHT_LIMIT = 120_000


class QueueEngine(Subscriptions):
    def __init__(self, db: Database, reads: ReadSide, clock: Clock, signer: ReceiptSigner, queues: list[Queue],
                 next_row_id: int, enforce_cooldowns: bool, in_flight_limit: int,
                 fifo_in_flight_limit: int, counts_max_age: float) -> None:
        self._db = db
        self._reads = reads
        self._counts = CountCache(reads.counts, clock, counts_max_age)
        self._clock = clock
        self._signer = signer
        # Two views of the queues. The database thread's changes as its operations make them, so that
        # later operations of the same group see them; and the event loop's, changed at COMMIT, so that
        # nothing answered from memory reports a queue change before it is committed (and, behind the
        # dispatcher's `durable`, before it is on disk).
        self._queues: dict[tuple[str, str, str], Queue] = {q.key: q for q in queues}
        self._committed_queues = dict(self._queues)
        self._index_subscriptions()
        self._next_row_id = next_row_id
        self._enforce_cooldowns = enforce_cooldowns
        self._in_flight_limit = in_flight_limit
        self._fifo_in_flight_limit = fifo_in_flight_limit
        self._at_in_flight_limit: set[int] = set()
        # Per standard queue, an estimate of its in-flight messages kept without a count per receive:
        # claims add, deletes subtract, expiries are not seen (so it errs high); an exact count is
        # taken only when it reaches the limit.
        self._in_flight_estimate: dict[int, int] = {}
        self._fair_cursors: dict[int, str] = {}  # where each fair queue's next receive starts
        self._random = random.Random()  # MessageIds: unique, not secret; os.urandom costs a syscall each
        self._deleted_at: dict[tuple[str, str, str], int] = {}
        self._purged_at: dict[int, int] = {}
        self._waiters = Waiters(clock, asyncio.get_running_loop())
        self._loop = asyncio.get_running_loop()
        self.health = db.health  # what a readiness check reports: False once a background worker ended
        self._sweeper = asyncio.create_task(self._sweep_forever())
        self.health.watch_task(self._sweeper, "the retention sweeper")
        self.traffic = Traffic()  # sent/received per minute, for the console
        self.move_tasks = Redriver(db, clock, self._queue_by_arn_in_transaction, self._notify, self._counts.changed)
        self.queue_tallies: dict[int, QueueTally] = {}  # by queue id: the CloudWatch counters
        self.observe = Observer(db, reads, self._waiters, lambda: list(self._committed_queues.values()),
                                self.queue_counts)

    @classmethod
    async def open(cls, path: str, clock: Clock, *, enforce_cooldowns: bool = False,
                   in_flight_limit: int = IN_FLIGHT_LIMIT,
                   fifo_in_flight_limit: int = IN_FLIGHT_LIMIT,
                   counts_max_age: float = MAX_AGE_SECONDS,
                   sync_log: Callable[[int], None] = os.fdatasync) -> "QueueEngine":
        loop = asyncio.get_running_loop()
        path = os.path.realpath(path)  # SQLite keeps a symlinked file's -wal beside the target; so must we
        conn, lock = await loop.run_in_executor(None, open_file, path, migrate)
        db = Database(conn, path, lock, sync_log=sync_log)

        def prepare(tx: Transaction) -> tuple[bytes, list[Queue], int]:
            return queue_store.receipt_secret(tx.conn), queue_store.load_all(tx.conn), message_store.highest_row_id(tx.conn)

        try:
            secret, queues, highest = await db.run(prepare)
            reads = await ReadSide.open(path)
        except BaseException:
            await db.close()
            raise
        engine = cls(db, reads, clock, ReceiptSigner(secret), queues, highest + 1, enforce_cooldowns,
                     in_flight_limit, fifo_in_flight_limit, counts_max_age)
        try:
            await engine.move_tasks.resume()
        except BaseException:  # the readers' threads would keep the process alive
            await engine.close()
            raise
        return engine

    def durable(self) -> Awaitable[None]:
        """Wait until every change made so far is on disk (ServiceUnavailable if that failed).
        Results come back at COMMIT; nothing may be acknowledged to a client before this returns.
        (The database's coroutine itself: every request awaits this, so no frame of its own.)"""
        return self._db.durable()

    def begin_shutdown(self) -> None:
        """Answer every long poll now and accept no new waits."""
        self._waiters.close()

    async def close(self) -> None:
        self.health.stopping = True
        self.begin_shutdown()
        self._sweeper.cancel()
        await asyncio.gather(self._sweeper, return_exceptions=True)
        await self.move_tasks.close()
        await self._counts.close()
        await self._reads.close()
        await self._db.close()

    @property
    def clock(self) -> Clock:
        return self._clock

    # -- queues ---------------------------------------------------------------

    def get_queue(self, region: str, account: str, name: str) -> Queue:
        queue = self._committed_queues.get((region, account, name))
        if queue is None:
            raise errors.QueueDoesNotExist()
        return queue

    def find_queue_by_arn(self, arn: str) -> Queue | None:
        key = parse_arn(arn)
        return None if key is None else self._committed_queues.get(key)

    def list_queues(self, region: str, account: str, prefix: str = "") -> list[Queue]:
        found = [q for q in self._committed_queues.values() if q.region == region and q.account == account
                 and q.name.startswith(prefix) and q.subscribed_to is None]
        return sorted(found, key=lambda q: q.name)

    def all_queues(self) -> list[Queue]:
        """Every queue of every region and account (the console's overview), by region, account, name."""
        return sorted(self._committed_queues.values(), key=lambda q: q.key)

    def _queue_by_arn_in_transaction(self, arn: str) -> Queue | None:
        key = parse_arn(arn)
        return None if key is None else self._queues.get(key)

    def _set_queue(self, tx: Transaction, key: tuple[str, str, str], queue: Queue | None) -> None:
        """Change the database thread's view now (undone if the group rolls back), the loop's at COMMIT."""
        previous = self._queues.get(key)
        if queue is None:
            self._queues.pop(key, None)
            tx.on_commit(lambda: self._committed_queues.pop(key, None))
        else:
            self._queues[key] = queue
            tx.on_commit(lambda: self._committed_queues.__setitem__(key, queue))
        tx.on_rollback(lambda: self._queues.pop(key, None) if previous is None
                       else self._queues.__setitem__(key, previous))

    async def create_queue(self, region: str, account: str, name: str, fifo: bool,
                           attributes: dict[str, str], supplied: dict[str, str],
                           tags: dict[str, str]) -> Queue:
        """Create a queue, or return the existing one if every supplied attribute matches."""
        key = (region, account, name)
        now = self._clock.now_ms()

        def create(tx: Transaction) -> Queue:
            existing = self._queues.get(key)
            if existing is not None:
                for attribute, value in supplied.items():
                    if existing.attributes.get(attribute, "") != value:
                        raise errors.QueueNameExists(
                            f"A queue already exists with the same name and a different value for attribute {attribute}"
                        )
                return existing
            deleted_at = self._deleted_at.get(key)
            if self._enforce_cooldowns and deleted_at is not None and now - deleted_at < limits.COOLDOWN_MS:
                raise errors.QueueDeletedRecently(
                    "You must wait 60 seconds after deleting a queue before you can create another with the same name."
                )
            queue = queue_store.insert(tx.conn, region, account, name, fifo, attributes, tags, now)
            self._set_queue(tx, key, queue)
            return queue

        return await self._db.run(create)

    async def delete_queue(self, queue: Queue) -> None:
        def delete(tx: Transaction) -> list[Queue]:
            gone = [self._require(queue)] + self._subscribers(queue)  # a queue takes its subscriptions along
            for each in gone:
                message_store.delete_all(tx.conn, each.id)
                message_store.forget_queue(tx.conn, each.id)
                queue_store.delete(tx.conn, each.id)
                self._set_queue(tx, each.key, None)
            return gone

        for each in await self._db.run(delete):
            self._counts.forget(each.id)
            self.traffic.forget(each.id)
            self.queue_tallies.pop(each.id, None)
            self._deleted_at[each.key] = self._clock.now_ms()
            self._notify(each.id)

    async def update_queue(self, queue: Queue,
                           change: Callable[[dict[str, str], dict[str, str]], tuple[dict[str, str], dict[str, str]]]) -> Queue:
        """Apply `change(attributes, tags) -> (attributes, tags)` atomically."""
        now = self._clock.now_ms()

        def update(tx: Transaction) -> Queue:
            current = self._require(queue)
            attributes, tags = change(dict(current.attributes), dict(current.tags))
            modified_at = now if attributes != current.attributes else current.modified_at_ms  # tags are not attributes
            updated = queue_store.update(tx.conn, queue.id, attributes, tags, modified_at)
            self._counts_change(tx, queue.id)
            self._set_queue(tx, queue.key, updated)
            return updated

        updated = await self._db.run(update)
        self._notify(queue.id)  # a shorter retention or delay may change what a waiter should see
        return updated

    async def queue_counts(self, queue: Queue) -> QueueCounts:
        """Approximate, as in SQS: from the read side's cache (see count_cache.py for the staleness bound)."""
        return await self._counts.counts(queue.id, queue.retention_seconds * 1000)

    async def purge_queue(self, queue: Queue) -> None:
        now = self._clock.now_ms()
        purged_at = self._purged_at.get(queue.id)
        if self._enforce_cooldowns and purged_at is not None and now - purged_at < limits.COOLDOWN_MS:
            raise errors.PurgeQueueInProgress(
                f"Only one PurgeQueue operation on {queue.name} is allowed every 60 seconds."
            )

        def purge(tx: Transaction) -> None:
            for each in [self._require(queue)] + self._subscribers(queue):  # a queue's purge empties its subscriptions
                message_store.delete_all(tx.conn, each.id)
                message_store.forget_deduplication(tx.conn, each.id)
                self._in_flight_estimate.pop(each.id, None)
                self._counts_change(tx, each.id)

        await self._db.run(purge)
        self._purged_at[queue.id] = now

    # -- messages -------------------------------------------------------------

    async def send_messages(self, queue: Queue, messages: list[NewMessage], sender_id: str) -> list[SentMessage]:
        """Store the messages; on a FIFO queue a duplicate within 5 minutes is answered, not stored."""
        now = self._clock.now_ms()

        def send(tx: Transaction) -> tuple[list[SentMessage], list[tuple[int, str, NewMessage]]]:
            current = self._require(queue)
            stored: list[tuple[int, str, NewMessage]] = []
            sent = []
            for m in messages:
                scope = (m.group_id or "") if current.deduplication_per_group else ""
                if current.fifo and m.deduplication_id is not None:
                    duplicate = message_store.find_duplicate(tx.conn, queue.id, scope, m.deduplication_id, now)
                    if duplicate is not None:
                        sent.append(SentMessage(duplicate[0], m.md5_of_body, m.md5_of_attributes,
                                                m.md5_of_system_attributes, duplicate[1]))
                        continue
                row_id = self._next_row_id
                self._next_row_id += 1
                message_id = uuid4_string(self._random)
                sequence = sequence_number(row_id) if current.fifo else None
                if sequence is not None and m.deduplication_id is not None:
                    message_store.remember_deduplication(tx.conn, queue.id, scope, m.deduplication_id,
                                                         now + DEDUPLICATION_WINDOW_MS, message_id, sequence)
                stored.append((row_id, message_id, m))
                sent.append(SentMessage(message_id, m.md5_of_body, m.md5_of_attributes,
                                        m.md5_of_system_attributes, sequence))
            subscribers = self._subscribers(current)
            if subscribers:
                self._fan_out(tx, current, subscribers, stored, now, sender_id)
            else:
                message_store.insert_messages(tx.conn, queue.id, stored, now, sender_id)
            self._counts_change(tx, queue.id)
            for subscriber in subscribers:
                self._counts_change(tx, subscriber.id)
            if self._waiters.waiting(queue.id):  # a poll that registers later claims after this commit
                tx.on_commit(lambda: self._notify(queue.id, len(stored)))
            for subscriber in subscribers:
                if self._waiters.waiting(subscriber.id):
                    tx.on_commit(lambda receiver=subscriber.id: self._notify(receiver, len(stored)))
            return sent, stored

        sent, stored = await self._db.run(send)
        self.traffic.sent(queue.id, len(messages), now)
        tally = self.queue_tallies.get(queue.id) or self._tally(queue.id)
        tally.sent += len(stored)
        sizes = tally.sizes
        for _, _, message in stored:  # Histogram.observe inlined: this runs for every message
            sizes.counts[bisect_left(SIZE_BOUNDS, message.size)] += 1
            sizes.sum += message.size
        return sent

    async def receive_messages(self, queue: Queue, max_messages: int, visibility_timeout: int,
                               wait_seconds: int, attempt_id: str | None = None) -> list[ReceivedMessage]:
        """Claim up to `max_messages`; with a wait, return as soon as any are available."""
        loop = self._loop
        deadline_ms = self._clock.now_ms() + wait_seconds * 1000
        real_deadline = loop.time() + wait_seconds
        while True:
            # Registered before the claim, so that no wake-up is missed.
            # A FIFO claim may be held back by its groups, so there a waiter counts for one message.
            appetite = 1 if queue.fifo else max_messages
            waiter = self._waiters.register(queue.id, appetite) if wait_seconds > 0 else None
            try:
                messages, next_visible, moved_to = await self._db.run(
                    lambda tx: self._claim(tx, queue, max_messages, visibility_timeout, attempt_id,
                                           short_poll=waiter is None))
                if moved_to is not None:
                    self._notify(moved_to[0], moved_to[1])
                    self._tally(queue.id).dead_lettered += moved_to[1]
                if messages or waiter is None:
                    self.traffic.received(queue.id, len(messages), self._clock.now_ms())
                    return self._count_received(queue, messages)
                if self._clock.now_ms() >= deadline_ms or loop.time() >= real_deadline:
                    return self._count_received(queue, messages)
                wake_ms = deadline_ms if next_visible is None else min(deadline_ms, next_visible)
                await self._waiters.wait(waiter, wake_ms, real_deadline)
            finally:
                if waiter is not None:
                    self._waiters.discard(queue.id, waiter)

    async def delete_messages(self, queue: Queue, handles: list[str]) -> list[EntryOutcome]:
        """Delete by receipt handle. On a standard queue the latest handle deletes even after its
        visibility timeout and a superseded one deletes nothing, silently; on a FIFO queue a handle
        whose message is no longer in flight under it fails as expired (as SQS does)."""
        now = self._clock.now_ms()
        receipts = [self._signer.decode(handle) for handle in handles]

        def delete(tx: Transaction) -> list[EntryOutcome]:
            current = self._require(queue)
            self._counts_change(tx, queue.id)
            outcomes = []
            for handle, receipt in zip(handles, receipts):
                if receipt is None or receipt.queue_id != queue.id:
                    outcomes.append(EntryOutcome(error=_invalid_handle(handle)))
                elif current.fifo and not message_store.delete_in_flight(
                        tx.conn, queue.id, receipt.row_id, receipt.token, now):
                    outcomes.append(EntryOutcome(error=_expired_handle(handle)))
                else:
                    outcomes.append(EntryOutcome())
            if not current.fifo:
                deleted = message_store.delete_received(tx.conn, queue.id, [
                    (r.row_id, r.token) for r in receipts if r is not None and r.queue_id == queue.id])
                if queue.id in self._in_flight_estimate:
                    self._in_flight_estimate[queue.id] = max(0, self._in_flight_estimate[queue.id] - deleted)
            return outcomes

        outcomes = await self._db.run(delete)
        deleted = 0
        for outcome in outcomes:  # a loop, not sum(genexpr): no generator per delete
            if outcome.error is None:
                deleted += 1
        (self.queue_tallies.get(queue.id) or self._tally(queue.id)).deleted += deleted
        if queue.id in self._at_in_flight_limit or queue.fifo:
            self._notify(queue.id, len(handles))  # a deleted message may free its group or the in-flight limit
        return outcomes

    async def change_visibility(self, queue: Queue, changes: list[VisibilityChange]) -> list[EntryOutcome]:
        now = self._clock.now_ms()

        def change(tx: Transaction) -> list[EntryOutcome]:
            self._require(queue)
            self._counts_change(tx, queue.id)
            return [self._change_one(tx, queue, c, now) for c in changes]

        outcomes = await self._db.run(change)
        self._notify(queue.id, len(changes))
        return outcomes

    async def browse_messages(self, queue: Queue, after: int, limit: int) -> list[BrowsedMessage]:
        """The queue's messages in send order, read without receiving them (an extension to SQS)."""
        now = self._clock.now_ms()
        return await self._reads.browse(queue.id, queue.fifo, after, limit, now, self._cutoff(queue, now))

    def _tally(self, queue_id: int) -> QueueTally:
        tally = self.queue_tallies.get(queue_id)
        if tally is None:
            tally = self.queue_tallies[queue_id] = QueueTally()
        return tally

    def _count_received(self, queue: Queue, messages: list[ReceivedMessage]) -> list[ReceivedMessage]:
        tally = self.queue_tallies.get(queue.id) or self._tally(queue.id)
        if messages:
            tally.received += len(messages)
        else:
            tally.empty_receives += 1
        return messages

    # -- on the database thread ----------------------------------------------

    def _claim(self, tx: Transaction, queue: Queue, n: int, visibility_timeout: int, attempt_id: str | None,
               short_poll: bool) -> tuple[list[ReceivedMessage], int | None, tuple[int, int] | None]:
        """(messages, when the next hidden one shows, the dead-letter queue that got messages)."""
        current = self._require(queue)
        now = self._clock.now_ms()
        visible_at = now + visibility_timeout * 1000
        if current.fifo and attempt_id is not None:
            receipts = message_store.find_attempt(tx.conn, queue.id, attempt_id, now)
            if receipts:
                rows = message_store.reclaim(tx.conn, receipts, visible_at)
                if rows:
                    self._counts_change(tx, queue.id)  # one whose visibility had ended is in flight again
                    return self._received(tx, queue, rows), None, None
        claim = claims.Claim(queue.id, n, now, visible_at, self._cutoff(current, now),
                             self._dead_letter_target(current))
        if current.fifo:
            rows, moved = group_claims.claim_fifo(tx.conn, claim, self._fifo_in_flight_limit)
        else:
            in_flight = self._in_flight_estimate.get(queue.id)
            if in_flight is None or in_flight >= self._in_flight_limit:
                in_flight = claims.in_flight(tx.conn, queue.id, now, self._in_flight_limit)
                self._in_flight_estimate[queue.id] = in_flight
            if in_flight >= self._in_flight_limit:
                self._at_in_flight_limit.add(queue.id)
                if short_poll:
                    raise errors.OverLimit(
                        f"The maximum number of in flight messages ({self._in_flight_limit}) has been reached.")
                return [], message_store.next_visible_at(tx.conn, queue.id, now), None
            self._at_in_flight_limit.discard(queue.id)
            if group_claims.has_groups(tx.conn, queue.id):
                rows, moved, self._fair_cursors[queue.id] = group_claims.claim_fair(
                    tx.conn, claim, self._fair_cursors.get(queue.id, ""))
            else:
                rows, moved = claims.claim_standard(tx.conn, claim)
            self._in_flight_estimate[queue.id] = in_flight + len(rows)
        moved_to = (claim.dead_letter.queue_id, moved) if moved and claim.dead_letter else None
        if rows or moved:
            self._counts_change(tx, queue.id)
        if moved_to is not None:
            self._counts_change(tx, moved_to[0])
        if not rows:
            return [], message_store.next_visible_at(tx.conn, queue.id, now), moved_to
        if current.fifo and attempt_id is not None:
            message_store.remember_attempt(tx.conn, queue.id, attempt_id, now + DEDUPLICATION_WINDOW_MS,
                                           [(row[0], row[3]) for row in rows])
        return self._received(tx, queue, rows), None, moved_to

    def _received(self, tx: Transaction, queue: Queue, rows: list[tuple]) -> list[ReceivedMessage]:
        payloads = message_store.bodies(tx.conn, [row[5] for row in rows])
        encode, fifo = self._signer.encode, queue.fifo
        received = []
        for row_id, receive_count, first_received, token, group_id, body_id in rows:
            _, message_id, body, md5, attributes, trace_header, sent_at, sender, deduplication_id, source_arn = \
                payloads[body_id]
            # Positional, in the order of ReceivedMessage's fields: keywords cost 0.4 us more a message.
            received.append(ReceivedMessage(
                message_id, encode(queue.id, row_id, token), body, md5,
                None if attributes is None else json.loads(attributes), sent_at, sender, receive_count,
                first_received, trace_header, group_id, deduplication_id,
                sequence_number(row_id) if fifo else None, source_arn))
        return received

    def _dead_letter_target(self, queue: Queue) -> claims.DeadLetterTarget | None:
        policy = queue.redrive_policy
        if policy is None:
            return None
        key = parse_arn(policy[0])
        target = self._queues.get(key) if key else None
        if target is None:  # the dead-letter queue was deleted: deliver as usual
            return None
        return claims.DeadLetterTarget(target.id, policy[1], queue.arn, reset_retention=target.fifo)

    def _change_one(self, tx: Transaction, queue: Queue, change: VisibilityChange, now: int) -> EntryOutcome:
        """The latest handle changes its message's visibility, on a standard queue even after the
        visibility timeout ended (as SQS does); on a FIFO queue only while the message is in flight."""
        receipt = self._signer.decode(change.receipt_handle)
        if receipt is None or receipt.queue_id != queue.id:
            return EntryOutcome(error=_invalid_handle(change.receipt_handle))
        state = message_store.visibility_state(tx.conn, queue.id, receipt.row_id)
        latest = state is not None and state[1] == receipt.token
        if queue.fifo and (not latest or state is None or state[0] <= now):
            return EntryOutcome(error=_expired_handle(change.receipt_handle))
        if not latest or state is None:
            return EntryOutcome(error=errors.invalid_value(
                "ReceiptHandle", change.receipt_handle,
                "Message does not exist or is not available for visibility timeout change."))
        _, _, received_at = state
        new_visible_at = now + change.visibility_timeout * 1000
        if new_visible_at - received_at > limits.MAX_VISIBILITY_TIMEOUT_SECONDS * 1000:
            return EntryOutcome(error=errors.invalid_value(
                "VisibilityTimeout", change.visibility_timeout,
                f"Total VisibilityTimeout for the message is beyond the limit "
                f"[{limits.MAX_VISIBILITY_TIMEOUT_SECONDS} seconds]"))
        message_store.set_visible_at(tx.conn, receipt.row_id, new_visible_at)
        return EntryOutcome()

    def _counts_change(self, tx: Transaction, queue_id: int) -> None:
        """The queue's counts change at this operation's COMMIT, before any answer, even if its caller has gone."""
        tx.on_commit(functools.partial(self._counts.changed, queue_id))  # a partial: no frame of its own

    def _require(self, queue: Queue) -> Queue:
        """The queue's current state; fails if it was deleted since the request looked it up."""
        current = self._queues.get(queue.key)
        if current is None or current.id != queue.id:
            raise errors.QueueDoesNotExist()
        return current

    @staticmethod
    def _cutoff(queue: Queue, now: int) -> int:
        return now - queue.retention_seconds * 1000

    def _notify(self, queue_id: int, count: int | None = None) -> None:
        self._waiters.notify(queue_id, count)

    # -- retention ------------------------------------------------------------

    async def _sweep_forever(self) -> None:
        """Sweep every SWEEP_INTERVAL_SECONDS, whatever fails: after a full disk, this is what frees space.
        A failure is logged once (storage failures arrive as ServiceUnavailable), and so is the recovery."""
        failing = False
        while True:
            await asyncio.sleep(SWEEP_INTERVAL_SECONDS)
            try:
                removed = await self.sweep_expired()
            except Exception as exc:  # noqa: BLE001 - the sweeper must outlive any failure
                if not failing:
                    log.error("retention sweep failed, retrying every %.0f s: %s", SWEEP_INTERVAL_SECONDS,
                              getattr(exc, "message", None) or exc)
                    failing = True
                continue
            if failing:
                log.warning("retention sweep works again (%d expired messages removed)", removed)
                failing = False

    async def sweep_expired(self) -> int:
        """Remove messages past their queue's retention period (the counts left them out already)."""
        now = self._clock.now_ms()

        def sweep(tx: Transaction) -> int:
            message_store.forget_expired_fifo_state(tx.conn, now)
            return sum(message_store.delete_expired(tx.conn, q.id, self._cutoff(q, now))
                       for q in list(self._queues.values()))

        return await self._db.run(sweep)


def _invalid_handle(handle: str) -> errors.ReceiptHandleIsInvalid:
    return errors.ReceiptHandleIsInvalid(f'The input receipt handle "{handle}" is not a valid receipt handle.')


def _expired_handle(handle: str) -> errors.InvalidParameterValue:
    return errors.invalid_value("ReceiptHandle", handle, "The receipt handle has expired.")
