"""SQS's 60-second cooldowns: no queue of the same name right after a delete, one purge a minute.

Off unless asked for (`--enforce-cooldowns`): a test suite that recreates its queues would wait a
minute each time; off, nothing is kept. Kept in memory, each for its minute: a restart forgets them,
which only makes the server more lenient.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from queueserver import errors, limits
from queueserver.models import Queue

QueueKey = tuple[str, str, str]


class Cooldowns:
    def __init__(self, enforce: bool) -> None:
        self._enforce = enforce
        self._deleted_at: OrderedDict[QueueKey, int] = OrderedDict()
        self._purged_at: OrderedDict[int, int] = OrderedDict()

    def check_create(self, key: QueueKey, now: int) -> None:
        deleted_at = self._deleted_at.get(key)
        if self._enforce and deleted_at is not None and now - deleted_at < limits.COOLDOWN_MS:
            raise errors.QueueDeletedRecently(
                "You must wait 60 seconds after deleting a queue before you can create another with the same name."
            )

    def check_purge(self, queue: Queue, now: int) -> None:
        purged_at = self._purged_at.get(queue.id)
        if self._enforce and purged_at is not None and now - purged_at < limits.COOLDOWN_MS:
            raise errors.PurgeQueueInProgress(
                f"Only one PurgeQueue operation on {queue.name} is allowed every 60 seconds."
            )

    def deleted(self, queue: Queue, now: int) -> None:
        self._purged_at.pop(queue.id, None)  # the id is never used again
        if self._enforce:
            _renew(self._deleted_at, queue.key, now)

    def purged(self, queue_id: int, now: int) -> None:
        if self._enforce:
            _renew(self._purged_at, queue_id, now)


def _renew(table: OrderedDict[Any, int], key: Any, now: int) -> None:
    """KEY's instant to NOW, last in TABLE; the entries whose 60 s are over dropped from its front (in
    the order of their instants, as the clock only moves forward): it holds at most a minute's worth."""
    table[key] = now
    table.move_to_end(key)
    while True:
        oldest_key, at = next(iter(table.items()))
        if now - at < limits.COOLDOWN_MS:
            return
        del table[oldest_key]
