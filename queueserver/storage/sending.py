"""A send on the database thread, its fan-out to subscriptions, and the message row ids both hand out.

A subscription is a queue of its own kind: a row in `queues` named `<queue>~<name>` (no
queue name can contain "~"), so receives, deletes, visibility, redrive and retention need nothing
new. What is new is here: creating one, and fanning a send out to a queue's subscriptions.
"""

from __future__ import annotations

import random
from typing import Callable

from queueserver.models import SUBSCRIPTION_SEPARATOR, NewMessage, Queue, SentMessage, sequence_number, uuid4_string
from queueserver.storage import message_store, queue_store, subscriptions
from queueserver.storage.database import Transaction
from queueserver.storage.queue_cache import QueueCache
from queueserver.storage.receiving import DEDUPLICATION_WINDOW_MS

# What a subscription does not take from its queue when created: it gets its own dead-letter setup.
_NOT_INHERITED = frozenset({"RedrivePolicy", "RedriveAllowPolicy", "Policy"})

Stored = tuple[int, str, NewMessage]  # row id, MessageId, message


def subscription_name(queue: Queue, name: str) -> str:
    return f"{queue.name}{SUBSCRIPTION_SEPARATOR}{name}"


class Sending:
    def __init__(self, queues: QueueCache, next_row_id: int, counts_change: Callable[[Transaction, int], None],
                 wake: Callable[[Transaction, int, int], None]) -> None:
        self._queues = queues
        self._next_row_id = next_row_id  # on the database thread only
        self._counts_change = counts_change
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
        subscribers = self._queues.subscribers(current)
        if subscribers:
            self._fan_out(tx, current, subscribers, stored, now, sender_id)
        else:
            message_store.insert_messages(tx.conn, queue.id, stored, now, sender_id)
        receivers = [queue, *subscribers]
        for receiver in receivers:
            self._counts_change(tx, receiver.id)
        for receiver in receivers:
            self._wake(tx, receiver.id, len(stored))
        return sent, stored

    def _fan_out(self, tx: Transaction, queue: Queue, subscribers: list[Queue], stored: list[Stored], now: int,
                 sender_id: str) -> None:
        """Store a send on the queue and one delivery row per subscription, in send order in each."""
        deliveries = []
        for subscriber in subscribers:
            for row_id, _, _ in stored:
                deliveries.append((self._next_row_id, subscriber.id, row_id))
                self._next_row_id += 1
        subscriptions.insert_fanned_out(tx.conn, queue.id, stored, deliveries, now, sender_id)

    def create_subscription(self, tx: Transaction, queue: Queue, name: str, start_from_all: bool,
                            now: int) -> Queue:
        """Create the subscription, or return the existing one of that name (as CreateQueue does)."""
        key = (queue.region, queue.account, subscription_name(queue, name))
        current = self._queues.require(queue)
        existing = self._queues.current(key)
        if existing is not None:
            return existing
        attributes = {k: v for k, v in current.attributes.items() if k not in _NOT_INHERITED}
        created = queue_store.insert(tx.conn, key[0], key[1], key[2], current.fifo, attributes, {}, now)
        self._queues.set(tx, key, created)
        span = subscriptions.row_id_span(tx.conn, queue.id) if start_from_all else None
        if span is not None:
            offset = self._next_row_id - span[0]
            subscriptions.copy_held_messages(tx.conn, queue.id, created.id, offset, now)
            self._next_row_id = span[1] + offset + 1
        return created
