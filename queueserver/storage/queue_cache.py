"""The queues in memory: read on every request.

Two views. The database thread's, changed as its operations make changes, so that later
operations of the same group see them; and the event loop's, changed at COMMIT, so that nothing
answered from memory reports a queue change before it is committed (and, behind the dispatcher's
`durable`, before it is on disk).

The event loop's view keeps three indexes beside it, so that what lists queues reads a page, not
every queue: the queues (not subscriptions) by region, account and name (ListQueues), by name,
region and account (the console's overview), and the queues whose RedrivePolicy names each
dead-letter queue.
"""

from __future__ import annotations

from itertools import islice, takewhile
from typing import Iterator

from queueserver import errors
from queueserver.models import SUBSCRIPTION_SEPARATOR, Queue, parse_arn
from queueserver.storage.operations import Transaction
from queueserver.storage.sorted_keys import SortedKeys

QueueKey = tuple[str, str, str]  # region, account, name
NameKey = tuple[str, str, str]  # name, region, account


class QueueCache:
    def __init__(self, queues: list[Queue]) -> None:
        self._queues: dict[QueueKey, Queue] = {q.key: q for q in queues}  # the database thread's view
        # The event loop's. In id order: filled in that order, and every queue made later gets a higher id
        # and is committed after the ones before it (an update keeps its place).
        self._committed: dict[QueueKey, Queue] = {}
        self._listed: SortedKeys[QueueKey] = SortedKeys(q.key for q in queues if q.subscribed_to is None)
        self._by_name: SortedKeys[NameKey] = SortedKeys(_name_key(q) for q in queues if q.subscribed_to is None)
        self._sources: dict[str, SortedKeys[QueueKey]] = {}  # by dead-letter queue ARN: the queues that name it
        for queue in sorted(queues, key=lambda q: q.id):
            self._committed[queue.key] = queue
            self._index_source(queue.key, None, queue)
        # A queue's subscriptions. Changed on the database thread and read on the event loop too, so never
        # changed in place: a change puts a new frozenset (one store, whole under the GIL), and a reader
        # iterates the one it got. A key whose queue is not in the view read (not yet committed) is skipped.
        self._subscription_keys: dict[QueueKey, frozenset[QueueKey]] = {}
        for queue in queues:
            self._index_subscription(queue)

    # -- the event loop's view ------------------------------------------------

    def get(self, region: str, account: str, name: str) -> Queue:
        queue = self._committed.get((region, account, name))
        if queue is None:
            raise errors.QueueDoesNotExist()
        return queue

    def find_by_arn(self, arn: str) -> Queue | None:
        key = parse_arn(arn)
        return None if key is None else self._committed.get(key)

    def listed(self, region: str, account: str, prefix: str, after: str = "", limit: int | None = None) -> list[Queue]:
        """ListQueues: the account's queues (not subscriptions) in the region whose name starts with
        `prefix`, by name, after the name `after`; at most `limit`."""
        start = (region, account, max(prefix, after))
        keys = takewhile(lambda key: key[0] == region and key[1] == account and key[2].startswith(prefix),
                         self._listed.from_key(start, inclusive=not after or prefix > after))
        return [self._committed[key] for key in islice(keys, limit)]

    def by_name(self, start: NameKey, *, forward: bool) -> Iterator[Queue]:
        """The queues (not subscriptions) of every region and account in (name, region, account) order,
        from after `start` forwards or from before it backwards; consume without awaiting."""
        keys = self._by_name.from_key(start, inclusive=False) if forward else self._by_name.before_key(start)
        for name, region, account in keys:
            yield self._committed[(region, account, name)]

    def count(self) -> int:
        """Queues and subscriptions."""
        return len(self._committed)

    def dead_letter_sources(self, queue: Queue, limit: int | None = None) -> tuple[list[Queue], int]:
        """The first `limit` queues whose RedrivePolicy names `queue` (by region, account and name), and
        how many there are."""
        keys = self._sources.get(queue.arn)
        if keys is None:
            return [], 0
        return [self._committed[key] for key in islice(keys.from_key(("", "", "")), limit)], len(keys)

    def first_created(self, count: int) -> list[Queue]:
        """The first `count` queues and subscriptions by id, oldest first, in O(count)."""
        return list(islice(self._committed.values(), count))

    def subscribers_committed(self, queue: Queue) -> list[Queue]:
        return self._subscribers(queue, self._committed)

    # -- the database thread's view -------------------------------------------

    def current(self, key: QueueKey) -> Queue | None:
        return self._queues.get(key)

    def find_by_arn_in_transaction(self, arn: str) -> Queue | None:
        key = parse_arn(arn)
        return None if key is None else self._queues.get(key)

    def in_transaction(self) -> list[Queue]:
        return list(self._queues.values())

    def require(self, queue: Queue) -> Queue:
        """The queue's current state; fails if it was deleted since the request looked it up."""
        current = self._queues.get(queue.key)
        if current is None or current.id != queue.id:
            raise errors.QueueDoesNotExist()
        return current

    def subscribers(self, queue: Queue) -> list[Queue]:
        """The queue's subscriptions, by name."""
        return self._subscribers(queue, self._queues)

    def subscriber_ids(self, queue: Queue) -> list[int]:
        """The ids of the queue's subscriptions, in no order (asked on every send)."""
        keys = self._subscription_keys.get(queue.key)
        if not keys:
            return []
        view = self._queues
        return [view[key].id for key in keys if key in view]

    def set(self, tx: Transaction, key: QueueKey, queue: Queue | None) -> None:
        """Change the database thread's view now (undone if the group rolls back), the loop's at COMMIT."""
        previous = self._queues.get(key)
        if queue is None:
            self._queues.pop(key, None)
            if previous is not None and previous.subscribed_to is not None:
                self._unindex_subscription(previous)
                tx.on_rollback(lambda: self._index_subscription(previous))
        else:
            self._queues[key] = queue
            if previous is None and queue.subscribed_to is not None:
                self._index_subscription(queue)
                tx.on_rollback(lambda: self._unindex_subscription(queue))
        tx.on_commit(lambda: self._commit(key, queue))
        tx.on_rollback(lambda: self._queues.pop(key, None) if previous is None
                       else self._queues.__setitem__(key, previous))

    def _commit(self, key: QueueKey, queue: Queue | None) -> None:
        """The event loop's view and its indexes, at COMMIT."""
        previous = self._committed.pop(key, None) if queue is None else self._committed.get(key)
        if queue is not None:
            self._committed[key] = queue  # a new key goes last, as its id is the highest
        self._index_source(key, previous, queue)
        if SUBSCRIPTION_SEPARATOR in key[2]:  # a subscription is listed under its queue, not among them
            return
        name_key = (key[2], key[0], key[1])
        if queue is None:
            self._listed.discard(key)
            self._by_name.discard(name_key)
        elif previous is None:
            self._listed.add(key)
            self._by_name.add(name_key)

    def _index_source(self, key: QueueKey, previous: Queue | None, queue: Queue | None) -> None:
        old, new = _dead_letter_arn(previous), _dead_letter_arn(queue)
        if old == new:
            return
        if old is not None:
            sources = self._sources[old]
            sources.discard(key)
            if not len(sources):
                del self._sources[old]
        if new is not None:
            self._sources.setdefault(new, SortedKeys()).add(key)

    def _index_subscription(self, queue: Queue) -> None:
        parent = queue.subscribed_to
        if parent is not None:
            parent_key = (queue.region, queue.account, parent)
            self._subscription_keys[parent_key] = self._subscription_keys.get(parent_key, frozenset()) | {queue.key}

    def _unindex_subscription(self, queue: Queue) -> None:
        """The subscription's key out of its queue's set, and the set out of the table once empty."""
        parent_key = (queue.region, queue.account, queue.subscribed_to or "")
        left = self._subscription_keys.get(parent_key, frozenset()) - {queue.key}
        if left:
            self._subscription_keys[parent_key] = left
        else:
            self._subscription_keys.pop(parent_key, None)

    def _subscribers(self, queue: Queue, view: dict[QueueKey, Queue]) -> list[Queue]:
        keys = self._subscription_keys.get(queue.key)
        if not keys:
            return []
        return sorted((view[key] for key in keys if key in view), key=lambda q: q.name)


def _name_key(queue: Queue) -> NameKey:
    return (queue.name, queue.region, queue.account)


def _dead_letter_arn(queue: Queue | None) -> str | None:
    policy = None if queue is None else queue.redrive_policy
    return None if policy is None else policy[0]
