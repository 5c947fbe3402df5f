"""The engine's queue catalogue: create, find, change and delete queues, subscriptions and move tasks.

A part of QueueEngine (its base class), apart from the message path in engine.py: what it reads of the
engine is declared here, and QueueEngine.__init__ sets it.
"""

from __future__ import annotations

from typing import Callable, Iterator

from queueserver import errors
from queueserver.clock import Clock
from queueserver.models import MoveTask, Queue, QueueCounts
from queueserver.storage import message_store, queue_store, subscriptions
from queueserver.storage.cooldowns import Cooldowns
from queueserver.storage.count_cache import CountCache
from queueserver.storage.database import Database
from queueserver.storage.operations import Transaction
from queueserver.storage.queue_cache import QueueCache
from queueserver.storage.receiving import Receiving
from queueserver.storage.redrive import Redriver
from queueserver.storage.sending import Sending
from queueserver.storage.traffic import Traffic
from queueserver.tallies import QueueTally


class QueueCatalogue:
    _db: Database
    _clock: Clock
    _queues: QueueCache
    _cooldowns: Cooldowns
    _counts: CountCache
    _receiving: Receiving
    _sending: Sending
    _traffic: Traffic
    _move_tasks: Redriver
    queue_tallies: dict[int, QueueTally]

    def _counts_change(self, tx: Transaction, queue_id: int) -> None:
        raise NotImplementedError  # QueueEngine's

    def _notify(self, queue_id: int, count: int | None = None) -> None:
        raise NotImplementedError  # QueueEngine's

    def get_queue(self, region: str, account: str, name: str) -> Queue:
        return self._queues.get(region, account, name)

    def find_queue_by_arn(self, arn: str) -> Queue | None:
        return self._queues.find_by_arn(arn)

    def list_queues(self, region: str, account: str, *, prefix: str = "", after: str = "",
                    limit: int | None = None) -> list[Queue]:
        """The account's queues in the region (not subscriptions) by name: those after the name `after`
        whose name starts with `prefix`, at most `limit` (a page costs its size, not the number of queues)."""
        return self._queues.listed(region, account, prefix, after, limit)

    def queues_by_name(self, start: tuple[str, str, str], *, forward: bool = True) -> Iterator[Queue]:
        """The queues (not subscriptions) of every region and account in (name, region, account) order,
        after `start` (such a triple), or before it with `forward` False (then in descending order).
        Consume it without awaiting in between."""
        return self._queues.by_name(start, forward=forward)

    def queue_count(self) -> int:
        """Queues and subscriptions, of every region and account."""
        return self._queues.count()

    def dead_letter_sources(self, queue: Queue, limit: int | None = None) -> tuple[list[Queue], int]:
        """The first `limit` queues and subscriptions whose RedrivePolicy names `queue`, by region, account
        and name; and how many there are."""
        return self._queues.dead_letter_sources(queue, limit)

    async def create_queue(self, region: str, account: str, name: str, *, fifo: bool,
                           attributes: dict[str, str], supplied: dict[str, str],
                           tags: dict[str, str]) -> Queue:
        """Create a queue, or return the existing one if every supplied attribute matches."""
        key = (region, account, name)
        now = self._clock.now_ms()

        def create(tx: Transaction) -> Queue:
            existing = self._queues.current(key)
            if existing is not None:
                for attribute, value in supplied.items():
                    if existing.attributes.get(attribute, "") != value:
                        raise errors.QueueNameExists(
                            f"A queue already exists with the same name and a different value for attribute {attribute}"
                        )
                return existing
            self._cooldowns.check_create(key, now)
            queue = queue_store.insert(tx.conn, region, account, name, fifo, attributes, tags, now)
            self._queues.set(tx, key, queue)
            return queue

        return await self._db.run(create)

    async def delete_queue(self, queue: Queue) -> None:
        def delete(tx: Transaction) -> list[Queue]:
            # A queue takes its subscriptions along.
            gone = [self._queues.require(queue)] + self._queues.subscribers(queue)
            for each in gone:  # before the queue's log goes with it
                if each.subscribed_to is not None:
                    subscriptions.skip(tx.conn, each.id)
            for each in gone:
                message_store.delete_all(tx.conn, each.id)
                message_store.forget_queue(tx.conn, each.id)
                subscriptions.remove(tx.conn, each.id)
                self._move_tasks.end_tasks_of_deleted(tx, each)
                queue_store.delete(tx.conn, each.id)
                self._queues.set(tx, each.key, None)
            return gone

        for each in await self._db.run(delete):
            self._counts.forget(each.id)
            self._traffic.forget(each.id)
            self._receiving.forget(each.id)
            self.queue_tallies.pop(each.id, None)
            self._cooldowns.deleted(each, self._clock.now_ms())
            self._notify(each.id)

    async def update_queue(self, queue: Queue,
                           change: Callable[[dict[str, str], dict[str, str]], tuple[dict[str, str], dict[str, str]]]) -> Queue:
        """Apply `change(attributes, tags) -> (attributes, tags)` atomically."""
        now = self._clock.now_ms()

        def update(tx: Transaction) -> Queue:
            current = self._queues.require(queue)
            attributes, tags = change(dict(current.attributes), dict(current.tags))
            modified_at = now if attributes != current.attributes else current.modified_at_ms  # tags are not attributes
            updated = queue_store.update(tx.conn, queue.id, attributes, tags, modified_at)
            self._counts_change(tx, queue.id)
            self._queues.set(tx, queue.key, updated)
            return updated

        updated = await self._db.run(update)
        self._notify(queue.id)  # a shorter retention or delay may change what a waiter should see
        return updated

    async def queue_counts(self, queue: Queue) -> QueueCounts:
        """Approximate, as in SQS: from the read side's cache (see count_cache.py for the staleness bound)."""
        return await self._counts.counts(queue.id, queue.retention_seconds * 1000)

    async def purge_queue(self, queue: Queue) -> None:
        now = self._clock.now_ms()
        self._cooldowns.check_purge(queue, now)

        def purge(tx: Transaction) -> None:
            # A queue's purge empties its subscriptions too.
            for each in [self._queues.require(queue)] + self._queues.subscribers(queue):
                if each.subscribed_to is not None:
                    subscriptions.skip(tx.conn, each.id)
                message_store.delete_all(tx.conn, each.id)
                message_store.forget_deduplication(tx.conn, each.id)
                self._receiving.purged(each.id)
                self._counts_change(tx, each.id)

        await self._db.run(purge)
        self._cooldowns.purged(queue.id, now)

    # -- subscriptions --------------------------------------------------------

    async def create_subscription(self, queue: Queue, name: str, *, start_from_all: bool) -> Queue:
        """Create the subscription, or return the existing one of that name (as CreateQueue does)."""
        now = self._clock.now_ms()
        created = await self._db.run(
            lambda tx: self._sending.create_subscription(tx, queue, name, start_from_all, now))
        self._counts.changed(created.id)
        return created

    def list_subscriptions(self, queue: Queue) -> list[Queue]:
        return self._queues.subscribers_committed(queue)

    # -- move tasks (dead-letter redrive) -------------------------------------

    async def start_move_task(self, source: Queue, *, destination_arn: str | None, rate: int | None,
                              authorize_origins: Callable[[list[str]], None] | None = None) -> str:
        """Start moving the dead-letter queue's messages back (or to `destination_arn`); returns the task handle.

        `authorize_origins(arns)` sees where the messages would go back to, and may refuse by raising.
        """
        return await self._move_tasks.start(source, destination_arn, rate, authorize_origins)

    async def list_move_tasks(self, source: Queue, *, max_results: int) -> list[MoveTask]:
        return await self._move_tasks.list(source, max_results)

    async def cancel_move_task(self, handle: str) -> int:
        """Stop a running task; returns how many messages it moved."""
        return await self._move_tasks.cancel(handle)

    # -- messages -------------------------------------------------------------
