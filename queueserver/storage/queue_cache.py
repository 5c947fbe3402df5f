"""The queues in memory: they are few and read on every request.

Two views. The database thread's, changed as its operations make changes, so that later
operations of the same group see them; and the event loop's, changed at COMMIT, so that nothing
answered from memory reports a queue change before it is committed (and, behind the dispatcher's
`durable`, before it is on disk).
"""

from __future__ import annotations

from queueserver import errors
from queueserver.models import Queue, parse_arn
from queueserver.storage.database import Transaction

QueueKey = tuple[str, str, str]  # region, account, name


class QueueCache:
    def __init__(self, queues: list[Queue]) -> None:
        self._queues: dict[QueueKey, Queue] = {q.key: q for q in queues}  # the database thread's view
        self._committed: dict[QueueKey, Queue] = dict(self._queues)  # the event loop's
        # A queue's subscriptions, add-only: a key whose queue is gone (deleted, rolled back) is skipped when read.
        self._subscription_keys: dict[QueueKey, set[QueueKey]] = {}
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

    def listed(self, region: str, account: str, prefix: str) -> list[Queue]:
        """ListQueues: the account's queues (not subscriptions) in the region, by name."""
        found = [q for q in self._committed.values() if q.region == region and q.account == account
                 and q.name.startswith(prefix) and q.subscribed_to is None]
        return sorted(found, key=lambda q: q.name)

    def committed(self) -> list[Queue]:
        return list(self._committed.values())

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
            tx.on_commit(lambda: self._committed.pop(key, None))
        else:
            self._queues[key] = queue
            self._index_subscription(queue)
            tx.on_commit(lambda: self._committed.__setitem__(key, queue))
        tx.on_rollback(lambda: self._queues.pop(key, None) if previous is None
                       else self._queues.__setitem__(key, previous))

    def _index_subscription(self, queue: Queue) -> None:
        parent = queue.subscribed_to
        if parent is not None:
            self._subscription_keys.setdefault((queue.region, queue.account, parent), set()).add(queue.key)

    def _subscribers(self, queue: Queue, view: dict[QueueKey, Queue]) -> list[Queue]:
        keys = self._subscription_keys.get(queue.key)
        if not keys:
            return []
        return sorted((view[key] for key in keys if key in view), key=lambda q: q.name)
