"""A send on the database thread, its fan-out to subscriptions, and the message row ids both hand out.

A subscription is a queue of its own kind: a row in `queues` named `<queue>~<name>` (no
queue name can contain "~"), so receives, deletes, visibility, redrive and retention need nothing
new. What is new is here: creating one (at most `max_subscriptions` per queue), logging a send once
for all of a queue's subscriptions, and giving a subscription its deliveries when it is read
(storage/subscriptions.py).
"""

from __future__ import annotations

import random
from typing import Callable

from queueserver import errors
from queueserver.models import SUBSCRIPTION_SEPARATOR, NewMessage, Queue, SentMessage, sequence_number, uuid4_string
from queueserver.storage import message_store, queue_store, subscriptions
from queueserver.storage.operations import Transaction
from queueserver.storage.queue_cache import QueueCache
from queueserver.storage.receiving import DEDUPLICATION_WINDOW_MS

# What a subscription does not take from its queue when created: it gets its own dead-letter setup.
_NOT_INHERITED = frozenset({"RedrivePolicy", "RedriveAllowPolicy", "Policy"})

Stored = tuple[int, str, NewMessage]  # row id, MessageId, message


def subscription_name(queue: Queue, name: str) -> str:
    return f"{queue.name}{SUBSCRIPTION_SEPARATOR}{name}"


class Sending:
    def __init__(self, queues: QueueCache, next_row_id: int, counts_change: Callable[[Transaction, int], None],
                 counts_change_all: Callable[[Transaction, list[int]], None],
                 wake: Callable[[Transaction, int, int], None], max_subscriptions: int) -> None:
        self._queues = queues
        self._next_row_id = next_row_id  # on the database thread only
        self._counts_change = counts_change
        self._counts_change_all = counts_change_all
        self._max_subscriptions = max_subscriptions
        self._wake = wake  # (tx, queue id, messages): wake its long polls at COMMIT
        self._random = random.Random()  # MessageIds: unique, not secret; os.urandom costs a syscall each

    def send(self, tx: Transaction, queue: Queue, messages: list[NewMessage], now: int,
             sender_id: str) -> tuple[list[SentMessage], list[Stored]]:
        """Store the messages; on a FIFO queue a duplicate within 5 minutes is answered, not stored."""
        current = self._queues.require(queue)
        fifo, per_group = current.fifo, current.deduplication_per_group
        stored: list[Stored] = []
        sent = []
        for m in messages:
            sequence = None
            if fifo:
                scope = (m.group_id or "") if per_group else ""
                if m.deduplication_id is not None:
                    duplicate = message_store.find_duplicate(tx.conn, queue.id, scope, m.deduplication_id, now)
                    if duplicate is not None:
                        sent.append(SentMessage(duplicate[0], m.md5_of_body, m.md5_of_attributes,
                                                m.md5_of_system_attributes, duplicate[1]))
                        continue
            row_id = self._next_row_id
            self._next_row_id += 1
            message_id = uuid4_string(self._random)
            if fifo:
                sequence = sequence_number(row_id)
                if m.deduplication_id is not None:
                    message_store.remember_deduplication(tx.conn, queue.id, scope, m.deduplication_id,
                                                         now + DEDUPLICATION_WINDOW_MS, message_id, sequence)
            stored.append((row_id, message_id, m))
            sent.append(SentMessage(message_id, m.md5_of_body, m.md5_of_attributes,
                                    m.md5_of_system_attributes, sequence))
        subscribers = self._queues.subscriber_ids(current)
        if not subscribers:
            message_store.insert_messages(tx.conn, queue.id, stored, now, sender_id)
            self._counts_change(tx, queue.id)
            self._wake(tx, queue.id, len(stored))
            return sent, stored
        # Logged once for every subscription: each takes its deliveries when it is next read (`deliver`).
        subscriptions.insert_fanned_out(tx.conn, queue.id, stored, 1 + len(subscribers), now, sender_id)
        self._counts_change(tx, queue.id)
        self._counts_change_all(tx, subscribers)
        for receiver in (queue.id, *subscribers):
            self._wake(tx, receiver, len(stored))
        return sent, stored

    def deliver(self, tx: Transaction, subscription: Queue) -> None:
        """Give the subscription the deliveries of what was sent to its queue since it last took them."""
        self._next_row_id += subscriptions.deliver(tx.conn, subscription.id, self._next_row_id)

    def create_subscription(self, tx: Transaction, queue: Queue, name: str, start_from_all: bool,
                            now: int) -> Queue:
        """Create the subscription, or return the existing one of that name (as CreateQueue does)."""
        key = (queue.region, queue.account, subscription_name(queue, name))
        current = self._queues.require(queue)
        existing = self._queues.current(key)
        if existing is not None:
            return existing
        if len(self._queues.subscriber_ids(current)) >= self._max_subscriptions:
            raise errors.OverLimit(f"The queue {queue.name} has {self._max_subscriptions} subscriptions, the most "
                                   "it may have. Delete one first.")
        attributes = {k: v for k, v in current.attributes.items() if k not in _NOT_INHERITED}
        created = queue_store.insert(tx.conn, key[0], key[1], key[2], current.fifo, attributes, {}, now)
        subscriptions.add(tx.conn, created.id, queue.id)
        span = subscriptions.row_id_span(tx.conn, queue.id) if start_from_all else None
        if span is not None:
            offset = self._next_row_id - span[0]
            subscriptions.copy_held_messages(tx.conn, queue.id, created.id, offset, now)
            self._next_row_id = span[1] + offset + 1
        self._queues.set(tx, key, created)  # last: a failure above leaves nothing in memory
        return created
