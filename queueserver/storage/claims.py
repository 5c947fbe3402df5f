"""The receive: claiming messages, and dead-letter moves in the same transaction.

Standard queues claim with one `UPDATE … RETURNING` over the visibility index.
FIFO queues walk their messages in send order (SQS also scans a bounded window to
find available groups), skip every group that has a message in flight, and claim
the consecutive visible messages of the groups they reach.

A message whose receive count has reached the queue's maxReceiveCount is moved to
the dead-letter queue instead of being delivered, by the receive that would have
delivered it, in the same transaction: a crash leaves it in exactly one queue. A
move rotates the receipt token, so no handle from before the move works after it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

# FIFO: "scans the first 120,000 messages to determine available message groups".
FIFO_SCAN_LIMIT = 120_000


@dataclass(frozen=True)
class DeadLetterTarget:
    queue_id: int
    max_receive_count: int
    source_arn: str
    reset_retention: bool  # FIFO dead-letter queues count retention from the move


@dataclass(frozen=True)
class Claim:
    queue_id: int
    n: int
    now_ms: int
    visible_at_ms: int
    cutoff_ms: int  # messages enqueued at or before this have outlived retention
    dead_letter: DeadLetterTarget | None


ClaimedRow = tuple[int, int, int, int, str | None]  # id, receive_count, first_received, token, group

_RETURNING = "RETURNING id, receive_count, first_received_at_ms, receipt_token, group_id"
_SET_CLAIMED = """
SET visible_at_ms = :visible_at,
    receive_count = receive_count + 1,
    first_received_at_ms = CASE first_received_at_ms WHEN 0 THEN :now ELSE first_received_at_ms END,
    received_at_ms = :now,
    receipt_token = random()
"""
_WINDOW = """
SELECT id FROM messages
WHERE queue_id = :queue_id AND visible_at_ms <= :now AND enqueued_at_ms > :cutoff
  AND receive_count < :max_receive_count
ORDER BY visible_at_ms, id
LIMIT :n
"""
_CLAIM_STANDARD = f"UPDATE messages {_SET_CLAIMED} WHERE id IN ({_WINDOW}) {_RETURNING}"
_MOVE_STANDARD = f"""
UPDATE messages SET queue_id = :dead_letter_queue_id, visible_at_ms = :now, receipt_token = random()
WHERE id IN ({_WINDOW.replace("receive_count < :max_receive_count", "receive_count >= :max_receive_count")})
RETURNING id
"""
_NO_LIMIT = 1 << 62


def _params(claim: Claim) -> dict[str, int]:
    dead_letter = claim.dead_letter
    return {
        "queue_id": claim.queue_id, "n": claim.n, "now": claim.now_ms, "visible_at": claim.visible_at_ms,
        "cutoff": claim.cutoff_ms,
        "max_receive_count": dead_letter.max_receive_count if dead_letter else _NO_LIMIT,
        "dead_letter_queue_id": dead_letter.queue_id if dead_letter else 0,
    }


def claim_standard(conn: sqlite3.Connection, claim: Claim) -> tuple[list[ClaimedRow], int]:
    """Claim up to n visible messages; returns the claimed rows and how many were dead-lettered."""
    params = _params(claim)
    moved = 0
    if claim.dead_letter is not None:
        moved_ids = [row[0] for row in conn.execute(_MOVE_STANDARD, params)]
        _mark_dead_lettered(conn, moved_ids, claim.dead_letter, claim.now_ms)
        moved = len(moved_ids)
    return conn.execute(_CLAIM_STANDARD, params).fetchall(), moved


def in_flight(conn: sqlite3.Connection, queue_id: int, now_ms: int, limit: int) -> int:
    """How many messages are in flight, counted up to `limit` (the count stops there)."""
    return int(conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM messages"
        " WHERE queue_id = ? AND visible_at_ms > ? AND receive_count > 0 LIMIT ?)",
        (queue_id, now_ms, limit)).fetchone()[0])


def claim_fifo(conn: sqlite3.Connection, claim: Claim, in_flight_limit: int) -> tuple[list[ClaimedRow], int]:
    """Claim the next messages of available groups, in order; none beyond the in-flight limit."""
    now, dead_letter = claim.now_ms, claim.dead_letter
    held: set[str] = set()
    in_flight_now = 0
    for group_id, count in conn.execute(
            "SELECT group_id, count(*) FROM messages"
            " WHERE queue_id = ? AND visible_at_ms > ? AND receive_count > 0 GROUP BY group_id",
            (claim.queue_id, now)):
        held.add(group_id)
        in_flight_now += count
    wanted = min(claim.n, in_flight_limit - in_flight_now)
    chosen: list[int] = []
    to_move: list[int] = []
    if wanted > 0:
        walk = conn.execute(
            "SELECT id, group_id, visible_at_ms, receive_count FROM messages INDEXED BY messages_in_send_order"
            " WHERE queue_id = ? AND group_id IS NOT NULL AND enqueued_at_ms > ? ORDER BY id LIMIT ?",
            (claim.queue_id, claim.cutoff_ms, FIFO_SCAN_LIMIT))
        for row_id, group_id, visible_at, receive_count in walk:
            if group_id in held:
                continue
            if visible_at > now:  # not yet visible: nothing after it in its group may go first
                held.add(group_id)
                continue
            if dead_letter is not None and receive_count >= dead_letter.max_receive_count:
                to_move.append(row_id)
                continue
            chosen.append(row_id)
            if len(chosen) == wanted:
                break
    if to_move:
        assert dead_letter is not None
        conn.executemany("UPDATE messages SET queue_id = ?, visible_at_ms = ?, receipt_token = random() WHERE id = ?",
                         [(dead_letter.queue_id, now, row_id) for row_id in to_move])
        _mark_dead_lettered(conn, to_move, dead_letter, now)
    return _in_group_order(_claim_ids(conn, claim, chosen)), len(to_move)


def has_groups(conn: sqlite3.Connection, queue_id: int) -> bool:
    return conn.execute("SELECT 1 FROM messages WHERE queue_id = ? AND group_id IS NOT NULL LIMIT 1",
                        (queue_id,)).fetchone() is not None


def claim_fair(conn: sqlite3.Connection, claim: Claim) -> tuple[list[ClaimedRow], int]:
    """A standard queue with message groups (a fair queue): serve the quietest groups first.

    Each group's visible messages are found through the group index, groups are ordered
    by how many messages they have in flight, and the receive takes one message from
    each in turn, so a group with a large backlog cannot starve a group with a few.
    """
    now, dead_letter = claim.now_ms, claim.dead_letter
    limit = dead_letter.max_receive_count if dead_letter else _NO_LIMIT
    in_flight = dict(conn.execute(
        "SELECT group_id, count(*) FROM messages WHERE queue_id = ? AND visible_at_ms > ? AND receive_count > 0"
        " AND group_id IS NOT NULL GROUP BY group_id", (claim.queue_id, now)).fetchall())
    groups = [row[0] for row in conn.execute(_GROUPS, {"queue_id": claim.queue_id}) if row[0] is not None]
    queues_of_candidates: list[tuple[int, int, list[tuple[int, int]]]] = []
    for group_id in groups:
        candidates = conn.execute(
            "SELECT id, receive_count FROM messages WHERE queue_id = ? AND group_id = ? AND visible_at_ms <= ?"
            " AND enqueued_at_ms > ? ORDER BY visible_at_ms, id LIMIT ?",
            (claim.queue_id, group_id, now, claim.cutoff_ms, claim.n)).fetchall()
        if candidates:
            queues_of_candidates.append((in_flight.get(group_id, 0), candidates[0][0], candidates))
    ungrouped = conn.execute(
        "SELECT id, receive_count FROM messages WHERE queue_id = ? AND visible_at_ms <= ? AND enqueued_at_ms > ?"
        " AND group_id IS NULL ORDER BY visible_at_ms, id LIMIT ?",
        (claim.queue_id, now, claim.cutoff_ms, claim.n)).fetchall()
    for row in ungrouped:  # a message without a group is a tenant of its own
        queues_of_candidates.append((0, row[0], [row]))
    queues_of_candidates.sort(key=lambda entry: (entry[0], entry[1]))
    chosen: list[int] = []
    to_move: list[int] = []
    depth = 0
    while len(chosen) < claim.n and any(depth < len(c[2]) for c in queues_of_candidates):
        for _, _, candidates in queues_of_candidates:
            if depth < len(candidates) and len(chosen) < claim.n:
                row_id, receive_count = candidates[depth]
                (to_move if receive_count >= limit else chosen).append(row_id)
        depth += 1
    if to_move:
        assert dead_letter is not None
        conn.executemany("UPDATE messages SET queue_id = ?, visible_at_ms = ?, receipt_token = random() WHERE id = ?",
                         [(dead_letter.queue_id, now, row_id) for row_id in to_move])
        _mark_dead_lettered(conn, to_move, dead_letter, now)
    return _claim_ids(conn, claim, chosen), len(to_move)


# The distinct groups of a queue, one index probe each (a loose index scan).
_GROUPS = """
WITH RECURSIVE groups(group_id) AS (
    SELECT min(group_id) FROM messages WHERE queue_id = :queue_id AND group_id IS NOT NULL
    UNION ALL
    SELECT (SELECT min(group_id) FROM messages WHERE queue_id = :queue_id AND group_id > groups.group_id)
    FROM groups WHERE groups.group_id IS NOT NULL
)
SELECT group_id FROM groups
"""


def _claim_ids(conn: sqlite3.Connection, claim: Claim, chosen: list[int]) -> list[ClaimedRow]:
    if not chosen:
        return []
    params: dict[str, int] = {"visible_at": claim.visible_at_ms, "now": claim.now_ms}
    params.update((f"id{i}", row_id) for i, row_id in enumerate(chosen))
    placeholders = ",".join(f":id{i}" for i in range(len(chosen)))
    return conn.execute(f"UPDATE messages {_SET_CLAIMED} WHERE id IN ({placeholders}) {_RETURNING}", params).fetchall()


def _in_group_order(rows: list[ClaimedRow]) -> list[ClaimedRow]:
    """Several groups in one receive: each group's messages together, groups by their oldest."""
    first_seen: dict[str | None, int] = {}
    for row in sorted(rows):
        first_seen.setdefault(row[4], row[0])
    return sorted(rows, key=lambda row: (first_seen[row[4]], row[0]))


def _mark_dead_lettered(conn: sqlite3.Connection, row_ids: list[int], target: DeadLetterTarget, now: int) -> None:
    if not row_ids:
        return
    if target.reset_retention:
        conn.executemany("UPDATE messages SET enqueued_at_ms = ? WHERE id = ?", [(now, i) for i in row_ids])
    conn.executemany("UPDATE message_bodies SET dead_letter_source_arn = ? WHERE id = ?",
                     [(target.source_arn, i) for i in row_ids])
