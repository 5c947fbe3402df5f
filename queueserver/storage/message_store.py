"""The message SQL: send, claim, delete, change visibility, count, sweep.

Each function is one operation on the database thread (a function of a
Transaction's connection); the engine decides when they run.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from typing import Iterable

from queueserver.models import NewMessage, QueueCounts

_INSERT_MESSAGE = (
    "INSERT INTO messages (id, queue_id, visible_at_ms, enqueued_at_ms, group_id, sequence_number) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
_INSERT_BODY = (
    "INSERT INTO message_bodies (id, message_id, body, md5_of_body, attributes, trace_header, "
    "sent_at_ms, sender_id, deduplication_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

# One statement claims up to :n visible, unexpired messages and rotates their tokens.
_CLAIM = """
UPDATE messages
SET visible_at_ms = :visible_at,
    receive_count = receive_count + 1,
    first_received_at_ms = CASE first_received_at_ms WHEN 0 THEN :now ELSE first_received_at_ms END,
    received_at_ms = :now,
    receipt_token = random()
WHERE id IN (
    SELECT id FROM messages
    WHERE queue_id = :queue_id AND visible_at_ms <= :now AND enqueued_at_ms > :cutoff
    ORDER BY visible_at_ms, id
    LIMIT :n
)
RETURNING id, receive_count, first_received_at_ms, receipt_token, group_id, sequence_number
"""

_NEXT_VISIBLE = "SELECT min(visible_at_ms) FROM messages WHERE queue_id = ? AND visible_at_ms > ?"

_BODIES = (
    "SELECT id, message_id, body, md5_of_body, attributes, trace_header, sent_at_ms, sender_id, "
    "deduplication_id, dead_letter_source_arn FROM message_bodies WHERE id IN ({})"
)


def highest_row_id(conn: sqlite3.Connection) -> int:
    row = conn.execute(
        "SELECT max(coalesce((SELECT max(id) FROM messages), 0), coalesce((SELECT max(id) FROM message_bodies), 0))"
    ).fetchone()
    return int(row[0])


def insert_messages(
    conn: sqlite3.Connection,
    queue_id: int,
    first_row_id: int,
    messages: list[NewMessage],
    now_ms: int,
    sender_id: str,
) -> list[str]:
    """Store the messages under consecutive row ids; returns their MessageIds."""
    message_ids = [str(uuid.uuid4()) for _ in messages]
    rows, bodies = [], []
    for offset, (message, message_id) in enumerate(zip(messages, message_ids)):
        row_id = first_row_id + offset
        rows.append((row_id, queue_id, now_ms + message.delay_seconds * 1000, now_ms, message.group_id, None))
        attributes = json.dumps(message.attributes, separators=(",", ":")) if message.attributes else None
        bodies.append(
            (row_id, message_id, message.body, message.md5_of_body, attributes, message.trace_header,
             now_ms, sender_id, message.deduplication_id)
        )
    conn.executemany(_INSERT_MESSAGE, rows)
    conn.executemany(_INSERT_BODY, bodies)
    return message_ids


def claim(
    conn: sqlite3.Connection, queue_id: int, n: int, now_ms: int, visible_at_ms: int, cutoff_ms: int
) -> list[tuple]:
    """Claim up to n messages: rows of (id, receive_count, first_received, token, group, sequence)."""
    params = {"queue_id": queue_id, "n": n, "now": now_ms, "visible_at": visible_at_ms, "cutoff": cutoff_ms}
    return conn.execute(_CLAIM, params).fetchall()


def next_visible_at(conn: sqlite3.Connection, queue_id: int, now_ms: int) -> int | None:
    """When the next hidden message of the queue becomes visible, if any is hidden."""
    value = conn.execute(_NEXT_VISIBLE, (queue_id, now_ms)).fetchone()[0]
    return None if value is None else int(value)


def bodies(conn: sqlite3.Connection, row_ids: list[int]) -> dict[int, tuple]:
    query = _BODIES.format(",".join("?" * len(row_ids)))
    return {row[0]: row for row in conn.execute(query, row_ids)}


def delete_received(conn: sqlite3.Connection, queue_id: int, receipts: Iterable[tuple[int, int]]) -> None:
    """Delete by (row id, token); a stale token deletes nothing."""
    conn.executemany(
        "DELETE FROM messages WHERE id = ? AND receipt_token = ? AND queue_id = ?",
        [(row_id, token, queue_id) for row_id, token in receipts],
    )


def visibility_state(conn: sqlite3.Connection, queue_id: int, row_id: int) -> tuple[int, int, int] | None:
    """(visible_at, receipt_token, received_at) of a message, or None if it is gone."""
    return conn.execute(
        "SELECT visible_at_ms, receipt_token, received_at_ms FROM messages WHERE id = ? AND queue_id = ?",
        (row_id, queue_id),
    ).fetchone()


def set_visible_at(conn: sqlite3.Connection, row_id: int, visible_at_ms: int) -> None:
    conn.execute("UPDATE messages SET visible_at_ms = ? WHERE id = ?", (visible_at_ms, row_id))


def counts(conn: sqlite3.Connection, queue_id: int, now_ms: int, cutoff_ms: int) -> QueueCounts:
    row = conn.execute(
        "SELECT coalesce(sum(visible_at_ms <= :now), 0),"
        " coalesce(sum(visible_at_ms > :now AND receive_count > 0), 0),"
        " coalesce(sum(visible_at_ms > :now AND receive_count = 0), 0)"
        " FROM messages WHERE queue_id = :queue_id AND enqueued_at_ms > :cutoff",
        {"now": now_ms, "queue_id": queue_id, "cutoff": cutoff_ms},
    ).fetchone()
    return QueueCounts(visible=int(row[0]), in_flight=int(row[1]), delayed=int(row[2]))


def delete_all(conn: sqlite3.Connection, queue_id: int) -> int:
    return conn.execute("DELETE FROM messages WHERE queue_id = ?", (queue_id,)).rowcount


def delete_expired(conn: sqlite3.Connection, queue_id: int, cutoff_ms: int) -> int:
    return conn.execute(
        "DELETE FROM messages WHERE queue_id = ? AND enqueued_at_ms <= ?", (queue_id, cutoff_ms)
    ).rowcount
