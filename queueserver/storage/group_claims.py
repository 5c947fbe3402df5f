"""Receives that choose messages group by group: FIFO queues and fair queues.

FIFO: a group is available while its first (oldest) message is visible, and available
groups form a queue: they are served in the order in which they became available,
which is when their first message became visible (sent, or its visibility ended) or,
after a delete, when the next message became the first (see message_store's
`promote_group_head`); ties go to the group received longest ago, then to send order.
A receive takes as many consecutive visible messages of one group as it can before it
takes the next group, and stops in a group at its first hidden message, so later
messages of a group that are still in flight stay hidden (as SQS does). To find the
groups, the receive looks at the front of the queue in send order through a covering
index; when that window is full (one group with a large backlog), it visits every group
through the group index instead, one probe each, so a receive never walks a held
group's backlog row by row.

Fair queues (standard queues whose messages carry a MessageGroupId): each receive
visits the groups in turn from where the last one stopped and takes one visible
message from each, so a group with a 10,000-message backlog gets one turn like a
group with a handful, and the cost of a receive does not grow with the backlog.
"""

from __future__ import annotations

import json
import sqlite3

from queueserver.storage.claims import GROUPED, NO_LIMIT, Claim, claim_ids, in_order_taken, move_to_dead_letter_queue
from queueserver.storage.rows import ClaimedRow

FRONT_WINDOW = 2_000  # rows at the front of a FIFO queue looked at in send order
MAX_GROUPS_VISITED = 120_000  # SQS: FIFO "scans the first 120,000 messages" for groups
MAX_FAIR_PROBES = 100  # groups without a visible message visited before a fair receive gives up

# Each group with messages in flight: how many, and whether its first message is one of them.
_IN_FLIGHT = """
SELECT in_flight.n, in_flight.group_id, (
    SELECT visible_at_ms FROM messages WHERE id = (
        SELECT min(id) FROM messages INDEXED BY messages_by_group
        WHERE queue_id = :queue_id AND group_id = in_flight.group_id)
) > :now
FROM (SELECT group_id, count(*) AS n FROM messages
      WHERE queue_id = :queue_id AND visible_at_ms > :now AND receive_count > 0 AND group_id IS NOT NULL
      GROUP BY group_id) AS in_flight
"""
# The groups at the front whose first message is visible, in the order they became available,
# each with the window's size; one row with a NULL group when none is available.
# CROSS JOIN: look up each group's head by its id, never scan the messages for heads.
_FRONT_GROUPS = """
WITH front AS (
    SELECT id, group_id FROM messages INDEXED BY messages_in_send_order
    WHERE queue_id = :queue_id AND group_id IS NOT NULL ORDER BY id LIMIT :window
), available AS (
    SELECT heads.group_id, m.visible_at_ms, m.received_at_ms, heads.head
    FROM (SELECT group_id, min(id) AS head FROM front
          WHERE group_id NOT IN (SELECT value FROM json_each(:held)) GROUP BY group_id) AS heads
    CROSS JOIN messages m ON m.id = heads.head
    WHERE m.visible_at_ms <= :now
)
SELECT available.group_id, (SELECT count(*) FROM front) FROM (SELECT 1) LEFT JOIN available
ORDER BY available.visible_at_ms, available.received_at_ms, available.head
"""
_NEXT_GROUP = ("SELECT min(group_id) FROM messages INDEXED BY messages_by_group"
               " WHERE queue_id = ? AND group_id > ?")
_HEAD = ("SELECT id, visible_at_ms, received_at_ms FROM messages WHERE id ="
         " (SELECT min(id) FROM messages INDEXED BY messages_by_group WHERE queue_id = ? AND group_id = ?)")
_GROUP_IN_ORDER = """
SELECT id, visible_at_ms, receive_count, enqueued_at_ms FROM messages INDEXED BY messages_by_group
WHERE queue_id = ? AND group_id = ? AND id > ? ORDER BY id LIMIT ?
"""
_GROUP_VISIBLE = """
SELECT id, receive_count FROM messages INDEXED BY messages_by_group_visibility
WHERE queue_id = ? AND group_id = ? AND visible_at_ms <= ? AND enqueued_at_ms > ?
ORDER BY visible_at_ms, id LIMIT ?
"""
# Near the front of the queue as a standard claim sees it (received ones first, see claims.py).
_UNGROUPED_VISIBLE = """
SELECT id, receive_count FROM (
    SELECT * FROM (
        SELECT id, receive_count, group_id FROM messages INDEXED BY messages_received_by_visibility
        WHERE queue_id = :queue_id AND receive_count > 0 AND visible_at_ms <= :now AND enqueued_at_ms > :cutoff
        ORDER BY visible_at_ms, id LIMIT :window)
    UNION ALL
    SELECT * FROM (
        SELECT id, receive_count, group_id FROM messages INDEXED BY messages_unreceived_by_visibility
        WHERE queue_id = :queue_id AND receive_count = 0 AND visible_at_ms <= :now AND enqueued_at_ms > :cutoff
        ORDER BY visible_at_ms, id LIMIT :window)
    LIMIT :window
) WHERE group_id IS NULL LIMIT :n
"""


_HAS_GROUPS = f"SELECT {GROUPED}"


def has_groups(conn: sqlite3.Connection, queue_id: int) -> bool:
    return bool(conn.execute(_HAS_GROUPS, {"queue_id": queue_id}).fetchone()[0])


def claim_fifo(conn: sqlite3.Connection, claim: Claim, in_flight_limit: int) -> tuple[list[ClaimedRow], int]:
    """Claim the next messages of available groups, in order; none beyond the in-flight limit."""
    in_flight_now = 0
    held: set[str] = set()  # groups whose first message is in flight: looked at no further
    for count, group_id, first_in_flight in conn.execute(_IN_FLIGHT, {"queue_id": claim.queue_id,
                                                                      "now": claim.now_ms}):
        in_flight_now += count
        if first_in_flight:
            held.add(group_id)
    wanted = min(claim.n, in_flight_limit - in_flight_now)
    if wanted <= 0:
        return [], 0
    chosen: list[int] = []
    to_move: list[int] = []
    front = conn.execute(_FRONT_GROUPS, {"queue_id": claim.queue_id, "window": FRONT_WINDOW,
                                         "now": claim.now_ms, "held": json.dumps(sorted(held))}).fetchall()
    visited = set(held)
    _take_groups(conn, claim, [row[0] for row in front if row[0] is not None], visited, wanted, chosen, to_move)
    if len(chosen) < wanted and front[0][1] >= FRONT_WINDOW:  # groups beyond the window may be available
        _take_groups(conn, claim, _available_groups(conn, claim, visited), visited, wanted, chosen, to_move)
    if to_move:
        assert claim.dead_letter is not None
        move_to_dead_letter_queue(conn, to_move, claim.dead_letter, claim.now_ms)
    return in_order_taken(claim_ids(conn, claim, chosen), chosen), len(to_move)


def _available_groups(conn: sqlite3.Connection, claim: Claim, skip: set[str]) -> list[str]:
    """Every available group not in `skip`, in the order they became available, one index probe per group."""
    heads: list[tuple[int, int, int, str]] = []
    group = conn.execute(_NEXT_GROUP, (claim.queue_id, "")).fetchone()[0]
    visited = 0
    while group is not None and visited < MAX_GROUPS_VISITED:
        visited += 1
        if group not in skip:
            head_id, visible_at, received_at = conn.execute(_HEAD, (claim.queue_id, group)).fetchone()
            if visible_at <= claim.now_ms:
                heads.append((visible_at, received_at, head_id, group))
        group = conn.execute(_NEXT_GROUP, (claim.queue_id, group)).fetchone()[0]
    return [head[3] for head in sorted(heads)]


def _take_groups(conn: sqlite3.Connection, claim: Claim, groups: list[str], visited: set[str], wanted: int,
                 chosen: list[int], to_move: list[int]) -> None:
    """Take each group's consecutive visible messages in order until `wanted` are chosen."""
    limit = claim.dead_letter.max_receive_count if claim.dead_letter else NO_LIMIT
    for group in groups:
        if len(chosen) >= wanted:
            return
        if group in visited:
            continue
        visited.add(group)
        after = 0
        blocked = False
        while not blocked and len(chosen) < wanted:
            rows = conn.execute(_GROUP_IN_ORDER, (claim.queue_id, group, after, wanted - len(chosen) + 8)).fetchall()
            if not rows:
                break
            for row_id, visible_at, receive_count, enqueued_at in rows:
                after = row_id
                if enqueued_at <= claim.cutoff_ms:
                    continue  # past retention: as good as gone
                if visible_at > claim.now_ms:
                    blocked = True  # not visible yet: nothing after it in its group may go first
                    break
                if receive_count >= limit:
                    to_move.append(row_id)
                    continue
                chosen.append(row_id)
                if len(chosen) == wanted:
                    break


def claim_fair(conn: sqlite3.Connection, claim: Claim, cursor: str) -> tuple[list[ClaimedRow], int, str]:
    """A fair queue's receive: groups in turn from `cursor`; returns the claimed rows, the
    number dead-lettered, and where the next receive should start."""
    turns: list[tuple[str | None, list[tuple[int, int]]]] = []
    probes = 0
    group, wrapped = cursor, False
    while len(turns) < claim.n and probes < MAX_FAIR_PROBES:
        following = conn.execute(_NEXT_GROUP, (claim.queue_id, group)).fetchone()[0]
        if following is None:  # the end: go round once to the groups up to the cursor
            if wrapped or cursor == "":
                break
            group, wrapped = "", True
            continue
        if wrapped and following > cursor:
            break
        group = following
        probes += 1
        visible = conn.execute(_GROUP_VISIBLE, (claim.queue_id, group, claim.now_ms, claim.cutoff_ms,
                                                claim.n)).fetchall()
        if visible:
            turns.append((group, visible))
    next_cursor = group if not turns else cursor  # nothing visible: carry on from the last group looked at
    # A message without a group is a tenant of its own (looked for near the front of the queue).
    for row in conn.execute(_UNGROUPED_VISIBLE, {"queue_id": claim.queue_id, "now": claim.now_ms,
                                                 "cutoff": claim.cutoff_ms, "window": FRONT_WINDOW, "n": claim.n}):
        turns.append((None, [row]))
    limit = claim.dead_letter.max_receive_count if claim.dead_letter else NO_LIMIT
    chosen: list[int] = []
    to_move: list[int] = []
    depth = 0
    while len(chosen) < claim.n and any(depth < len(candidates) for _, candidates in turns):
        for turn_group, candidates in turns:
            if depth < len(candidates) and len(chosen) < claim.n:
                row_id, receive_count = candidates[depth]
                (to_move if receive_count >= limit else chosen).append(row_id)
                if turn_group is not None and depth == 0:
                    next_cursor = turn_group  # the next receive starts after the last group served
        depth += 1
    if to_move:
        assert claim.dead_letter is not None
        move_to_dead_letter_queue(conn, to_move, claim.dead_letter, claim.now_ms)
    return claim_ids(conn, claim, chosen), len(to_move), next_cursor
