"""The message SQL on the writer: send, claim, delete, change visibility, sweep (reads: read_side.py).

Each function is one operation on the database thread (a function of a
Transaction's connection); the engine decides when they run.
"""

from __future__ import annotations

import functools
import json
import sqlite3

from queueserver.models import NewMessage
from queueserver.storage.rows import CLAIMED_COLUMNS, ClaimedRow, VisibilityState

# Optional text columns are bound as '' and stored as NULL (`NULLIF(?, '')`; none of them is
# ever empty): sqlite3 binds a None in 0.3 µs (its adapter lookup fails with an exception),
# a string in 0.1 µs.
_INSERT_MESSAGES = "INSERT INTO messages (id, queue_id, visible_at_ms, enqueued_at_ms, group_id) VALUES "
_MESSAGE_ROW = "(?, ?, ?, ?, NULLIF(?, ''))"
_INSERT_BODIES = (
    "INSERT INTO message_bodies (id, message_id, body, md5_of_body, attributes, trace_header, "
    "sent_at_ms, sender_id, deduplication_id) VALUES "
)
_BODY_ROW = "(?, ?, ?, ?, NULLIF(?, ''), NULLIF(?, ''), ?, ?, NULLIF(?, ''))"
# A fan-out's bodies: the same rows, each with its count of deliveries (the one `?` before the VALUES).
_INSERT_SHARED_BODIES = (
    "INSERT INTO message_bodies (deliveries, id, message_id, body, md5_of_body, attributes, trace_header, "
    "sent_at_ms, sender_id, deduplication_id) SELECT ?, * FROM (VALUES "
)


@functools.cache
def rows_of(row: str, rows: int) -> str:
    """`(?, …), (?, …)`: one multi-row INSERT costs 30 % less than executemany over ten rows."""
    return ", ".join([row] * rows)


# The earlier of the two partial indexes' next instants (either may be NULL).
_NEXT_VISIBLE = """
SELECT min(coalesce(received, unreceived), coalesce(unreceived, received)) FROM (SELECT
    (SELECT min(visible_at_ms) FROM messages INDEXED BY messages_received_by_visibility
     WHERE queue_id = :queue_id AND receive_count > 0 AND visible_at_ms > :now) AS received,
    (SELECT min(visible_at_ms) FROM messages INDEXED BY messages_unreceived_by_visibility
     WHERE queue_id = :queue_id AND receive_count = 0 AND visible_at_ms > :now) AS unreceived)
"""


def highest_row_id(conn: sqlite3.Connection) -> int:
    """The highest message row id ever used (sqlite_sequence keeps it past deletes)."""
    row = conn.execute(
        "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'messages'), 0),"
        " coalesce((SELECT max(id) FROM messages), 0))"
    ).fetchone()
    return int(row[0])


def insert_messages(
    conn: sqlite3.Connection,
    queue_id: int,
    rows: list[tuple[int, str, NewMessage]],
    now_ms: int,
    sender_id: str,
) -> None:
    """Store messages given as (row id, MessageId, message)."""
    if not rows:
        return
    conn.execute(_INSERT_MESSAGES + rows_of(_MESSAGE_ROW, len(rows)), [
        value for row_id, _, m in rows
        for value in (row_id, queue_id, now_ms + m.delay_seconds * 1000, now_ms, m.group_id or "")
    ])
    insert_bodies(conn, rows, now_ms, sender_id)


def insert_bodies(conn: sqlite3.Connection, rows: list[tuple[int, str, NewMessage]], now_ms: int,
                  sender_id: str, deliveries: int | None = None) -> None:
    """Store the bodies of messages given as (row id, MessageId, message), each under its row id;
    `deliveries`: how many messages rows share each body (a send fanned out to subscriptions), None
    for bodies of their own rows alone (the plain INSERT, unchanged)."""
    values = [
        value for row_id, message_id, m in rows
        for value in (row_id, message_id, m.body, m.md5_of_body,
                      json.dumps(m.attributes, separators=(",", ":")) if m.attributes else "",
                      m.trace_header or "", now_ms, sender_id, m.deduplication_id or "")
    ]
    if deliveries is None:
        conn.execute(_INSERT_BODIES + rows_of(_BODY_ROW, len(rows)), values)
    else:
        conn.execute(_INSERT_SHARED_BODIES + rows_of(_BODY_ROW, len(rows)) + ")", [deliveries, *values])


def find_duplicate(conn: sqlite3.Connection, queue_id: int, scope: str, deduplication_id: str,
                   now_ms: int) -> tuple[str, str] | None:
    """(MessageId, SequenceNumber) of a send with this deduplication id in the last 5 minutes."""
    return conn.execute(
        "SELECT message_id, sequence_number FROM deduplication"
        " WHERE queue_id = ? AND scope = ? AND deduplication_id = ? AND expires_at_ms > ?",
        (queue_id, scope, deduplication_id, now_ms)).fetchone()


def remember_deduplication(conn: sqlite3.Connection, queue_id: int, scope: str, deduplication_id: str,
                           expires_at_ms: int, message_id: str, sequence_number: str) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO deduplication"
        " (queue_id, scope, deduplication_id, expires_at_ms, message_id, sequence_number)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (queue_id, scope, deduplication_id, expires_at_ms, message_id, sequence_number))


def find_attempt(conn: sqlite3.Connection, queue_id: int, attempt_id: str, now_ms: int) -> list[tuple[int, int]] | None:
    row = conn.execute(
        "SELECT receipts FROM receive_attempts WHERE queue_id = ? AND attempt_id = ? AND expires_at_ms > ?",
        (queue_id, attempt_id, now_ms)).fetchone()
    return None if row is None else [tuple(pair) for pair in json.loads(row[0])]


def remember_attempt(conn: sqlite3.Connection, queue_id: int, attempt_id: str, expires_at_ms: int,
                     receipts: list[tuple[int, int]]) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO receive_attempts (queue_id, attempt_id, expires_at_ms, receipts) VALUES (?, ?, ?, ?)",
        (queue_id, attempt_id, expires_at_ms, json.dumps(receipts)))


def reclaim(conn: sqlite3.Connection, receipts: list[tuple[int, int]], visible_at_ms: int) -> list[ClaimedRow]:
    """A retried receive: the same messages, if still held by that receive, hidden anew."""
    rows = []
    for row_id, token in receipts:
        row = conn.execute(
            f"UPDATE messages SET visible_at_ms = ? WHERE id = ? AND receipt_token = ? RETURNING {CLAIMED_COLUMNS}",
            (visible_at_ms, row_id, token)).fetchone()
        if row is not None:
            rows.append(ClaimedRow._make(row))
    return rows


def next_visible_at(conn: sqlite3.Connection, queue_id: int, now_ms: int) -> int | None:
    """When the next hidden message of the queue becomes visible, if any is hidden."""
    value = conn.execute(_NEXT_VISIBLE, {"queue_id": queue_id, "now": now_ms}).fetchone()[0]
    return None if value is None else int(value)


def bodies(conn: sqlite3.Connection, body_ids: list[int], columns: str) -> dict[int, tuple]:
    """Bodies by body id (a claimed row's `body_id`), as the cursor's tuples of `columns` (the id first;
    a receive unpacks them at once: naming each one first cost more than the rest of its work).

    A receive's messages were mostly sent together, so their ids are mostly consecutive: then a range
    is read (one seek), instead of an IN list (SQLite sorts it into a temporary table first)."""
    low, high = min(body_ids), max(body_ids)
    if high - low < len(body_ids):  # no id in the range that was not asked for
        return {row[0]: row for row in conn.execute(_bodies_between(columns), (low, high))}
    return {row[0]: row for row in conn.execute(_bodies_in(columns, len(body_ids)), body_ids)}


@functools.cache
def _bodies_between(columns: str) -> str:
    return f"SELECT {columns} FROM message_bodies WHERE id BETWEEN ? AND ?"


@functools.cache
def _bodies_in(columns: str, count: int) -> str:
    return f"SELECT {columns} FROM message_bodies WHERE id IN ({','.join('?' * count)})"


def delete_received(conn: sqlite3.Connection, queue_id: int, receipts: list[tuple[int, int]]) -> int:
    """Delete by (row id, token), a batch in one statement; a stale token deletes nothing. Returns how many
    were deleted."""
    if len(receipts) == 1:  # DeleteMessage
        return conn.execute(_DELETE_RECEIVED, (*receipts[0], queue_id)).rowcount
    tokens = dict(receipts)
    # None, or a row named under two tokens: row by row (so the latest of the two deletes it)
    if not tokens or len(tokens) < len(set(receipts)):
        return conn.executemany(_DELETE_RECEIVED, [(row_id, token, queue_id) for row_id, token in receipts]).rowcount
    return conn.execute(_delete_received(len(tokens)),
                        [*tokens, *[value for pair in tokens.items() for value in pair], queue_id]).rowcount


_DELETE_RECEIVED = "DELETE FROM messages WHERE id = ? AND receipt_token = ? AND queue_id = ?"


@functools.cache
def _delete_received(count: int) -> str:
    """`id IN` finds each row by its key (`+queue_id`: not through an index on the queue, which the planner
    would pick), then its token must be the one the batch names for it."""
    return (f"DELETE FROM messages WHERE id IN ({rows_of('?', count)})"
            f" AND receipt_token = CASE id {' '.join(['WHEN ? THEN ?'] * count)} END AND +queue_id = ?")


def delete_in_flight(conn: sqlite3.Connection, queue_id: int, row_id: int, token: int, now_ms: int) -> bool:
    """Delete a message only while the receive that holds this token still has it in flight;
    if it headed its group, the group's next message heads it from now on."""
    row = conn.execute(
        "DELETE FROM messages WHERE id = ? AND receipt_token = ? AND queue_id = ? AND visible_at_ms > ?"
        " RETURNING group_id", (row_id, token, queue_id, now_ms)).fetchone()
    if row is not None and row[0] is not None:
        promote_group_head(conn, queue_id, row[0], row_id, now_ms)
    return row is not None


def promote_group_head(conn: sqlite3.Connection, queue_id: int, group_id: str, deleted_id: int, now_ms: int) -> None:
    """A group whose head was deleted becomes available now, behind the groups already waiting
    (FIFO serves groups in the order their heads became visible: see group_claims)."""
    conn.execute(
        "UPDATE messages SET visible_at_ms = :now, received_at_ms = :now WHERE id ="
        " (SELECT min(id) FROM messages INDEXED BY messages_by_group WHERE queue_id = :queue AND group_id = :group)"
        " AND id > :deleted AND visible_at_ms <= :now",
        {"now": now_ms, "queue": queue_id, "group": group_id, "deleted": deleted_id})


def visibility_state(conn: sqlite3.Connection, queue_id: int, row_id: int) -> VisibilityState | None:
    """The message's visibility, or None if it is gone."""
    row = conn.execute(
        "SELECT visible_at_ms, receipt_token, received_at_ms FROM messages WHERE id = ? AND queue_id = ?",
        (row_id, queue_id),
    ).fetchone()
    return None if row is None else VisibilityState._make(row)


def set_visible_at(conn: sqlite3.Connection, row_id: int, visible_at_ms: int) -> None:
    conn.execute("UPDATE messages SET visible_at_ms = ? WHERE id = ?", (visible_at_ms, row_id))


# A claim undone: visible now and its receive not counted (SET reads the row as it was before the UPDATE).
_UNCLAIM = """
UPDATE messages SET visible_at_ms = ?, receive_count = receive_count - 1,
    first_received_at_ms = CASE receive_count WHEN 1 THEN 0 ELSE first_received_at_ms END,
    receipt_token = random()
WHERE id = ? AND queue_id = ? AND receipt_token = ? AND receive_count > 0
"""


def unclaim(conn: sqlite3.Connection, queue_id: int, receipts: list[tuple[int, int]], now_ms: int) -> int:
    """Put back messages a receive claimed (row id, receipt token) as if it never had; returns how many."""
    before = conn.total_changes
    conn.executemany(_UNCLAIM, [(now_ms, row_id, queue_id, token) for row_id, token in receipts])
    return conn.total_changes - before


def delete_all(conn: sqlite3.Connection, queue_id: int) -> int:
    return conn.execute("DELETE FROM messages WHERE queue_id = ?", (queue_id,)).rowcount


def delete_expired(conn: sqlite3.Connection, queue_id: int, cutoff_ms: int) -> int:
    """Remove the queue's expired messages from its oldest rows on, past up to SWEEP_PASSES_OVER rows that
    have not expired.

    Rows are in the order their messages were sent, and so of their enqueue times, but for messages whose
    retention restarted where they were moved (redriven back, or into a FIFO dead-letter queue): the
    sweep passes over that many of them, and an expired row behind more waits until enough of them have
    expired or gone. Expired messages are neither delivered nor counted, so only their space waits. The
    sweep costs what it removes plus at most that many rows, not the queue's length."""
    return conn.execute(_DELETE_EXPIRED, {"queue": queue_id, "cutoff": cutoff_ms, "passes": SWEEP_PASSES_OVER - 1,
                                          "beyond": NO_ROW}).rowcount


SWEEP_PASSES_OVER = 100  # unexpired rows a sweep looks past for expired ones behind them
NO_ROW = 1 << 62  # above every row id
_DELETE_EXPIRED = """
DELETE FROM messages WHERE queue_id = :queue AND enqueued_at_ms <= :cutoff AND id <= coalesce(
    (SELECT id FROM messages INDEXED BY messages_by_queue WHERE queue_id = :queue AND enqueued_at_ms > :cutoff
     ORDER BY id LIMIT 1 OFFSET :passes), :beyond)
"""


def forget_expired_fifo_state(conn: sqlite3.Connection, now_ms: int) -> None:
    conn.execute("DELETE FROM deduplication WHERE expires_at_ms <= ?", (now_ms,))
    conn.execute("DELETE FROM receive_attempts WHERE expires_at_ms <= ?", (now_ms,))


def forget_deduplication(conn: sqlite3.Connection, queue_id: int) -> None:
    """A purge clears the queue's deduplication history (as SQS does)."""
    conn.execute("DELETE FROM deduplication WHERE queue_id = ?", (queue_id,))


def forget_queue(conn: sqlite3.Connection, queue_id: int) -> None:
    """Everything a deleted queue leaves behind besides its messages."""
    conn.execute("DELETE FROM deduplication WHERE queue_id = ?", (queue_id,))
    conn.execute("DELETE FROM receive_attempts WHERE queue_id = ?", (queue_id,))
