"""A receive's claim on the database thread: which claim runs, the in-flight limit, retried attempts.

The SQL is in claims.py and group_claims.py; what is kept here between receives is the state
that saves a count per receive: each standard queue's in-flight estimate and each fair queue's cursor.
"""

from __future__ import annotations

import functools
from typing import Callable, Sequence

from queueserver.models import Delivery, Queue, ReceivedMessage, messages_within_answer, parse_arn
from queueserver.storage import claims, group_claims, message_store
from queueserver.storage.operations import Transaction
from queueserver.storage.queue_cache import QueueCache
from queueserver.storage.receipts import ReceiptSigner
from queueserver.storage.rows import BODY_COLUMNS, DELIVERY_COLUMNS, claimed_deliveries, deliveries, received_messages

DEDUPLICATION_WINDOW_MS = 300_000  # FIFO deduplication ids and receive attempt ids

# (messages, or None for a short poll refused at the in-flight limit; when the next hidden one shows;
# (the dead-letter queue that got messages, how many))
ClaimResult = tuple[list[ReceivedMessage] | list[Delivery] | None, int | None, tuple[int, int] | None]


class Receiving:
    def __init__(self, queues: QueueCache, signer: ReceiptSigner, in_flight_limit: int, fifo_in_flight_limit: int,
                 counts_change: Callable[[Transaction, int], None],
                 deliver: Callable[[Transaction, Queue], None]) -> None:
        self._queues = queues
        self._deliver = deliver  # a subscription's deliveries not yet taken (sending.py)
        self._signer = signer
        self.in_flight_limit = in_flight_limit
        self._fifo_in_flight_limit = fifo_in_flight_limit
        self._counts_change = counts_change
        # Per standard queue, an estimate of its in-flight messages kept without a count per receive:
        # claims add, deletes subtract, expiries are not seen (so it errs high); an exact count is
        # taken only when it reaches the limit.
        self._in_flight_estimate: dict[int, int] = {}
        self._at_in_flight_limit: set[int] = set()
        self._fair_cursors: dict[int, str] = {}  # where each fair queue's next receive starts

    def at_in_flight_limit(self, queue_id: int) -> bool:
        return queue_id in self._at_in_flight_limit

    def deleted(self, tx: Transaction, queue_id: int, count: int) -> None:
        """Messages of a standard queue were deleted: fewer are in flight (unless the deletes roll back: an
        estimate that errs low could let receives past the limit)."""
        estimate = self._in_flight_estimate.get(queue_id)
        if estimate is not None and count:
            self._in_flight_estimate[queue_id] = max(0, estimate - count)
            tx.on_rollback(functools.partial(self._in_flight_estimate.__setitem__, queue_id, estimate))

    def unclaim(self, tx: Transaction, queue_id: int, receipts: list[tuple[int, int]], now: int) -> int:
        """Messages claimed for a long poll whose client hung up meanwhile: visible again at once, their
        receive not counted (nobody got them, so it must not bring them nearer the dead-letter queue)."""
        returned = message_store.unclaim(tx.conn, queue_id, receipts, now)
        if returned:
            self.deleted(tx, queue_id, returned)  # out of flight
            self._counts_change(tx, queue_id)
        return returned

    def purged(self, queue_id: int) -> None:
        self._in_flight_estimate.pop(queue_id, None)

    def forget(self, queue_id: int) -> None:
        """A deleted queue's state (its id is never used again)."""
        self._in_flight_estimate.pop(queue_id, None)
        self._at_in_flight_limit.discard(queue_id)
        self._fair_cursors.pop(queue_id, None)

    def claim(self, tx: Transaction, queue: Queue, now: int, *, max_messages: int, visibility_timeout: int,
              attempt_id: str | None, short_poll: bool, with_attributes: bool = True) -> ClaimResult:
        """Claim up to `max_messages` (ReceivedMessages, or Deliveries without `with_attributes`)."""
        current = self._queues.require(queue)
        if current.subscribed_to is not None:
            self._deliver(tx, current)
        visible_at = now + visibility_timeout * 1000
        rows: Sequence[tuple]  # ClaimedRow, or the cursor's tuples in its order
        with_bodies = False  # the rows are CLAIMED_DELIVERY_COLUMNS
        if current.fifo and attempt_id is not None:
            receipts = message_store.find_attempt(tx.conn, queue.id, attempt_id, now)
            if receipts:
                rows = message_store.reclaim(tx.conn, receipts, visible_at)
                if rows:
                    self._counts_change(tx, queue.id)  # one whose visibility had ended is in flight again
                    return self._received(tx, queue, rows, with_attributes), None, None
        claim = claims.Claim(queue.id, max_messages, now, visible_at, retention_cutoff(current, now),
                             self._dead_letter_target(current))
        if current.fifo:
            rows, moved = group_claims.claim_fifo(tx.conn, claim, self._fifo_in_flight_limit)
        else:
            in_flight = self._in_flight_estimate.get(queue.id)
            if in_flight is None or in_flight >= self.in_flight_limit:
                in_flight = claims.in_flight(tx.conn, queue.id, now, self.in_flight_limit)
                self._in_flight_estimate[queue.id] = in_flight
                # A count inside a transaction that rolls back could err low: the next claim counts again.
                tx.on_rollback(functools.partial(self._in_flight_estimate.pop, queue.id, None))
            if in_flight >= self.in_flight_limit:
                self._at_in_flight_limit.add(queue.id)
                # A short poll is refused; returned, not raised, so that its group need not run again.
                return None if short_poll else [], message_store.next_visible_at(tx.conn, queue.id, now), None
            self._at_in_flight_limit.discard(queue.id)
            rows, moved = claims.claim_standard(tx.conn, claim, deliveries=not with_attributes)
            with_bodies = not with_attributes
            if not rows and not moved and group_claims.has_groups(tx.conn, queue.id):  # a fair queue
                cursor = self._fair_cursors.get(queue.id, "")
                rows, moved, self._fair_cursors[queue.id] = group_claims.claim_fair(tx.conn, claim, cursor)
                tx.on_rollback(functools.partial(self._fair_cursors.__setitem__, queue.id, cursor))
                with_bodies = False
            self._in_flight_estimate[queue.id] = in_flight + len(rows)
        moved_to = (claim.dead_letter.queue_id, moved) if moved and claim.dead_letter else None
        if rows or moved:
            self._counts_change(tx, queue.id)
        if moved_to is not None:
            self._counts_change(tx, moved_to[0])
        if not rows:
            return [], message_store.next_visible_at(tx.conn, queue.id, now), moved_to
        if with_bodies:
            answer = claimed_deliveries(rows, queue.id, self._signer.encode)
        else:
            answer = self._received(tx, queue, rows, with_attributes)
        whole = len(answer)
        answer = self._within_answer(tx, queue.id, answer, now)
        if current.fifo and attempt_id is not None:
            kept = [(row[0], row[3]) for row in rows] if len(answer) == whole else self._receipts(answer)
            message_store.remember_attempt(tx.conn, queue.id, attempt_id, now + DEDUPLICATION_WINDOW_MS,
                                           kept)  # (row id, receipt token)
        return answer, None, moved_to

    def _within_answer(self, tx: Transaction, queue_id: int, answer: list, now: int) -> list:
        """The messages one answer carries (models.messages_within_answer); the rest are put back as if
        this receive had not claimed them, for the next one."""
        kept = messages_within_answer(answer)
        if kept == len(answer):
            return answer
        self.unclaim(tx, queue_id, self._receipts(answer[kept:]), now)
        return answer[:kept]

    def _receipts(self, answer: list) -> list[tuple[int, int]]:
        """(row id, receipt token) of each message of ANSWER, from its receipt handle."""
        return [(r.row_id, r.token) for r in map(self._signer.decode, (m.receipt_handle for m in answer)) if r]

    def _received(self, tx: Transaction, queue: Queue, rows: Sequence[tuple],
                  with_attributes: bool) -> list[ReceivedMessage] | list[Delivery]:
        body_ids = [row[-1] for row in rows]  # the body id is the last column
        if not with_attributes:
            return deliveries(rows, message_store.bodies(tx.conn, body_ids, DELIVERY_COLUMNS), queue.id,
                              self._signer.encode)
        bodies = message_store.bodies(tx.conn, body_ids, BODY_COLUMNS)
        return received_messages(rows, bodies, queue.id, queue.fifo, self._signer.encode)

    def _dead_letter_target(self, queue: Queue) -> claims.DeadLetterTarget | None:
        policy = queue.redrive_policy
        if policy is None:
            return None
        key = parse_arn(policy[0])
        target = self._queues.current(key) if key else None
        if target is None or target.id == queue.id:  # deleted, or the queue itself (stored before that was
            return None                                  # refused): deliver as usual
        return claims.DeadLetterTarget(target.id, policy[1], queue.arn, reset_retention=target.fifo)


def retention_cutoff(queue: Queue, now: int) -> int:
    """Messages enqueued at or before this instant have outlived the queue's retention."""
    return now - queue.retention_seconds * 1000
