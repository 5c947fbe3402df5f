"""The engine's subscriptions: several independent receivers of one queue (issue 22).

A subscription is a queue of its own kind: a row in `queues` named `<queue>~<name>` (no queue name
can contain "~"), so receives, deletes, visibility, redrive and retention need nothing new. What is
new is here: creating one, finding a queue's subscriptions on the send path, and fanning a send out.
"""

from __future__ import annotations

from queueserver.models import SUBSCRIPTION_SEPARATOR, Queue
from queueserver.storage import queue_store, subscriptions
from queueserver.storage.database import Transaction

# What a subscription does not take from its queue when created: it gets its own dead-letter setup.
_NOT_INHERITED = frozenset({"RedrivePolicy", "RedriveAllowPolicy", "Policy"})


def subscription_name(queue: Queue, name: str) -> str:
    return f"{queue.name}{SUBSCRIPTION_SEPARATOR}{name}"


class Subscriptions:
    """Mixed into QueueEngine; uses its `_queues`, `_committed_queues`, `_db`, `_clock` and `_next_row_id`."""

    def _index_subscriptions(self) -> None:
        # Add-only: a key whose queue is gone (deleted, rolled back) is skipped when read.
        self._subscription_keys: dict[tuple[str, str, str], set[tuple[str, str, str]]] = {}
        for queue in self._queues.values():
            self._index_subscription(queue)

    def _index_subscription(self, queue: Queue) -> None:
        parent = queue.subscribed_to
        if parent is not None:
            self._subscription_keys.setdefault((queue.region, queue.account, parent), set()).add(queue.key)

    def _subscribers(self, queue: Queue, queues: dict | None = None) -> list[Queue]:
        """The queue's subscriptions (the database thread's view unless `queues` is given), by name."""
        keys = self._subscription_keys.get(queue.key)
        if not keys:
            return []
        view = self._queues if queues is None else queues
        return sorted((view[key] for key in keys if key in view), key=lambda q: q.name)

    def list_subscriptions(self, queue: Queue) -> list[Queue]:
        return self._subscribers(queue, self._committed_queues)

    async def create_subscription(self, queue: Queue, name: str, start_from_all: bool) -> Queue:
        """Create the subscription, or return the existing one of that name (as CreateQueue does)."""
        key = (queue.region, queue.account, subscription_name(queue, name))
        now = self._clock.now_ms()

        def create(tx: Transaction) -> Queue:
            current = self._require(queue)
            existing = self._queues.get(key)
            if existing is not None:
                return existing
            attributes = {k: v for k, v in current.attributes.items() if k not in _NOT_INHERITED}
            created = queue_store.insert(tx.conn, key[0], key[1], key[2], current.fifo, attributes, {}, now)
            self._set_queue(tx, key, created)
            self._index_subscription(created)
            span = subscriptions.row_id_span(tx.conn, queue.id) if start_from_all else None
            if span is not None:
                offset = self._next_row_id - span[0]
                subscriptions.copy_held_messages(tx.conn, queue.id, created.id, offset, now)
                self._next_row_id = span[1] + offset + 1
            return created

        created = await self._db.run(create)
        self._counts.changed(created.id)
        return created

    def _fan_out(self, tx: Transaction, queue: Queue, subscribers: list[Queue], stored: list, now: int,
                 sender_id: str) -> None:
        """Store a send on the queue and one delivery row per subscription, in send order in each."""
        deliveries = []
        for subscriber in subscribers:
            for row_id, _, _ in stored:
                deliveries.append((self._next_row_id, subscriber.id, row_id))
                self._next_row_id += 1
        subscriptions.insert_fanned_out(tx.conn, queue.id, stored, deliveries, now, sender_id)
