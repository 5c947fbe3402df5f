"""The receive: claiming messages, and dead-letter moves in the same transaction.

Standard queues claim with one `UPDATE … RETURNING` over the two visibility indexes,
messages received before first (SQS prefers older sends); FIFO and fair queues choose
their messages group by group (group_claims.py), then claim the chosen rows with one
UPDATE in the same transaction. A standard queue is a fair one while any of its messages
has a group: the standard claim then takes nothing (its guard, tested once before the
claim reads a row), and the receive turns to the fair claim.

A message whose receive count has reached the queue's maxReceiveCount is moved to
the dead-letter queue instead of being delivered, by the receive that would have
delivered it, in the same transaction: a crash leaves it in exactly one queue. A
move rotates the receipt token, so no handle from before the move works after it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from queueserver.storage.rows import CLAIMED_COLUMNS, CLAIMED_DELIVERY_COLUMNS, ClaimedRow, claimed


@dataclass(frozen=True)
class DeadLetterTarget:
    queue_id: int
    max_receive_count: int
    source_arn: str
    reset_retention: bool  # FIFO dead-letter queues count retention from the move


@dataclass(slots=True)
class Claim:
    queue_id: int
    n: int
    now_ms: int
    visible_at_ms: int
    cutoff_ms: int  # messages enqueued at or before this have outlived retention
    dead_letter: DeadLetterTarget | None


_RETURNING = f"RETURNING {CLAIMED_COLUMNS}"
_SET_CLAIMED = """
SET visible_at_ms = :visible_at,
    receive_count = receive_count + 1,
    first_received_at_ms = CASE first_received_at_ms WHEN 0 THEN :now ELSE first_received_at_ms END,
    received_at_ms = :now,
    receipt_token = random()
"""
# The visible messages a claim takes: those received before (their visibility ended) first, then those
# never received, each in the order they became visible (SQS prefers older sends; migration 0008).
# Each range is read only as far as the claim takes, on its own partial index.
_RECEIVED_WINDOW = """
SELECT id FROM messages INDEXED BY messages_received_by_visibility
WHERE queue_id = :queue_id AND receive_count > 0 AND visible_at_ms <= :now AND enqueued_at_ms > :cutoff
  AND receive_count < :max_receive_count
ORDER BY visible_at_ms, id
LIMIT :n
"""
_UNRECEIVED_WINDOW = """
SELECT id FROM messages INDEXED BY messages_unreceived_by_visibility
WHERE queue_id = :queue_id AND receive_count = 0 AND visible_at_ms <= :now AND enqueued_at_ms > :cutoff
ORDER BY visible_at_ms, id
LIMIT :n
"""
_WINDOW = f"SELECT id FROM ({_RECEIVED_WINDOW}) UNION ALL SELECT id FROM ({_UNRECEIVED_WINDOW}) LIMIT :n"
GROUPED = ("EXISTS (SELECT 1 FROM messages INDEXED BY messages_by_group"
           " WHERE queue_id = :queue_id AND group_id IS NOT NULL)")
_UNGROUPED_WINDOW = f"NOT {GROUPED} AND id IN ({_WINDOW})"
_CLAIM_STANDARD = f"UPDATE messages {_SET_CLAIMED} WHERE {_UNGROUPED_WINDOW} {_RETURNING}"
_CLAIM_STANDARD_DELIVERIES = (f"UPDATE messages {_SET_CLAIMED} WHERE {_UNGROUPED_WINDOW}"
                              f" RETURNING {CLAIMED_DELIVERY_COLUMNS}")
_MOVE_STANDARD = f"""
UPDATE messages SET queue_id = :dead_letter_queue_id, visible_at_ms = :now, receipt_token = random()
WHERE NOT {GROUPED} AND id IN (
    {_RECEIVED_WINDOW.replace("receive_count < :max_receive_count", "receive_count >= :max_receive_count")})
RETURNING id
"""
NO_LIMIT = 1 << 62


def _params(claim: Claim) -> dict[str, int]:
    dead_letter = claim.dead_letter
    return {
        "queue_id": claim.queue_id, "n": claim.n, "now": claim.now_ms, "visible_at": claim.visible_at_ms,
        "cutoff": claim.cutoff_ms,
        "max_receive_count": dead_letter.max_receive_count if dead_letter else NO_LIMIT,
        "dead_letter_queue_id": dead_letter.queue_id if dead_letter else 0,
    }


def claim_standard(conn: sqlite3.Connection, claim: Claim, deliveries: bool = False) -> tuple[list[tuple], int]:
    """Claim up to n visible messages of a queue without groups (none, if it has any); returns the
    claimed rows (the cursor's tuples in ClaimedRow's order: a receive unpacks them at once, and naming
    each costs a Python call; with `deliveries`, of CLAIMED_DELIVERY_COLUMNS, bodies included) and how many
    were dead-lettered."""
    params = _params(claim)
    moved = 0
    if claim.dead_letter is not None:
        moved_ids = [row[0] for row in conn.execute(_MOVE_STANDARD, params)]
        mark_dead_lettered(conn, moved_ids, claim.dead_letter, claim.now_ms)
        moved = len(moved_ids)
    return conn.execute(_CLAIM_STANDARD_DELIVERIES if deliveries else _CLAIM_STANDARD, params).fetchall(), moved


def in_flight(conn: sqlite3.Connection, queue_id: int, now_ms: int, limit: int) -> int:
    """How many messages are in flight, counted up to `limit` (the count stops there)."""
    return int(conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM messages INDEXED BY messages_received_by_visibility"
        " WHERE queue_id = ? AND receive_count > 0 AND visible_at_ms > ? LIMIT ?)",
        (queue_id, now_ms, limit)).fetchone()[0])


def claim_ids(conn: sqlite3.Connection, claim: Claim, chosen: list[int]) -> list[ClaimedRow]:
    if not chosen:
        return []
    params: dict[str, int] = {"visible_at": claim.visible_at_ms, "now": claim.now_ms}
    params.update((f"id{i}", row_id) for i, row_id in enumerate(chosen))
    placeholders = ",".join(f":id{i}" for i in range(len(chosen)))
    return claimed(conn.execute(f"UPDATE messages {_SET_CLAIMED} WHERE id IN ({placeholders}) {_RETURNING}", params))


def in_order_taken(rows: list[ClaimedRow], chosen: list[int]) -> list[ClaimedRow]:
    """The claimed rows in the order the receive chose them (RETURNING's order is unspecified)."""
    place = {row_id: i for i, row_id in enumerate(chosen)}
    return sorted(rows, key=lambda row: place[row.row_id])


def move_to_dead_letter_queue(conn: sqlite3.Connection, row_ids: list[int], target: DeadLetterTarget,
                              now: int) -> None:
    if row_ids:
        conn.executemany("UPDATE messages SET queue_id = ?, visible_at_ms = ?, receipt_token = random() WHERE id = ?",
                         [(target.queue_id, now, row_id) for row_id in row_ids])
        mark_dead_lettered(conn, row_ids, target, now)


def mark_dead_lettered(conn: sqlite3.Connection, row_ids: list[int], target: DeadLetterTarget, now: int) -> None:
    if not row_ids:
        return
    if target.reset_retention:
        conn.executemany("UPDATE messages SET enqueued_at_ms = ? WHERE id = ?", [(now, i) for i in row_ids])
    _own_bodies_for_shared(conn, row_ids)
    conn.executemany("UPDATE message_bodies SET dead_letter_source_arn = ?"
                     " WHERE id = (SELECT coalesce(body_id, id) FROM messages WHERE id = ?)",
                     [(target.source_arn, i) for i in row_ids])


def _own_bodies_for_shared(conn: sqlite3.Connection, row_ids: list[int]) -> None:
    """A dead-lettered delivery of a shared body (a subscription's) gets a copy of its own,
    so that its DeadLetterQueueSourceArn is not the other receivers' too. The copy's id is below every
    body id (row ids are positive): it can never collide, even with an earlier copy now shared."""
    for row_id in row_ids:
        shared = conn.execute(
            "SELECT b.id FROM messages m JOIN message_bodies b ON b.id = m.body_id"
            " WHERE m.id = ? AND b.deliveries > 1", (row_id,)).fetchone()
        if shared is None:  # a body of its own (no subscriptions, or the others deleted theirs)
            continue
        lowest = conn.execute("SELECT id FROM message_bodies ORDER BY id LIMIT 1").fetchone()[0]
        copy_id = min(lowest, 0) - 1
        conn.execute(
            "INSERT INTO message_bodies (id, message_id, body, md5_of_body, attributes, trace_header, sent_at_ms,"
            " sender_id, deduplication_id, dead_letter_source_arn, deliveries)"
            " SELECT ?, message_id, body, md5_of_body, attributes, trace_header, sent_at_ms, sender_id,"
            " deduplication_id, dead_letter_source_arn, 1 FROM message_bodies WHERE id = ?", (copy_id, shared[0]))
        conn.execute("UPDATE messages SET body_id = ? WHERE id = ?", (copy_id, row_id))
        conn.execute("UPDATE message_bodies SET deliveries = deliveries - 1 WHERE id = ?", shared)
