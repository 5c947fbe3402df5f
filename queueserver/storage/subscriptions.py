"""The subscription SQL: a send fanned out to every subscription, with the body stored once.

A subscription is a queue row of its own (named `<queue>~<name>`, see models.SUBSCRIPTION_SEPARATOR),
so its deliveries are ordinary narrow `messages` rows and every receive, delete, visibility change,
dead-letter move and retention sweep works on them unchanged. They point at the queue's body through
`body_id` (the queue's own row too, with body_id = id). The body counts them (`deliveries`, set
here in the body's INSERT); the trigger of migration 0004 counts each delete down and takes the body
with the last one, whatever deletes it (delete, purge, retention, the queue's or subscription's delete).
"""

from __future__ import annotations

import sqlite3

from queueserver.models import NewMessage
from queueserver.storage.message_store import insert_bodies, rows_of

_INSERT_SHARED = (
    "INSERT INTO messages (id, queue_id, visible_at_ms, enqueued_at_ms, group_id, body_id) VALUES "
)
_SHARED_ROW = "(?, ?, ?, ?, NULLIF(?, ''), ?)"


def insert_fanned_out(conn: sqlite3.Connection, queue_id: int, rows: list[tuple[int, str, NewMessage]],
                      deliveries: list[tuple[int, int, int]], now_ms: int, sender_id: str) -> None:
    """Store messages given as (row id, MessageId, message) on the queue, their bodies once, and
    each subscription's delivery rows given as (row id, subscription id, the queue's row id): one of
    every message per subscription, so that every body counts 1 + len(deliveries) / len(rows) rows."""
    if not rows:
        return
    sent = {row_id: m for row_id, _, m in rows}
    values: list[object] = []
    for row_id, owner, body_id in [(row_id, queue_id, row_id) for row_id, _, _ in rows] + deliveries:
        m = sent[body_id]
        values += (row_id, owner, now_ms + m.delay_seconds * 1000, now_ms, m.group_id or "", body_id)
    conn.execute(_INSERT_SHARED + rows_of(_SHARED_ROW, len(rows) + len(deliveries)), values)
    insert_bodies(conn, rows, now_ms, sender_id, deliveries=1 + len(deliveries) // len(rows))


def row_id_span(conn: sqlite3.Connection, queue_id: int) -> tuple[int, int] | None:
    """(lowest, highest) row id of the queue's messages, None if it has none."""
    low, high = conn.execute("SELECT min(id), max(id) FROM messages INDEXED BY messages_by_queue WHERE queue_id = ?",
                             (queue_id,)).fetchone()
    return None if low is None else (int(low), int(high))


def copy_held_messages(conn: sqlite3.Connection, queue_id: int, subscription_id: int, id_offset: int,
                       now_ms: int) -> int:
    """StartFrom=all: a delivery of every message the queue holds now, in the queue's order (row id
    plus `id_offset`), visible now unless still delayed, keeping its retention; returns how many."""
    conn.execute(
        "UPDATE message_bodies SET deliveries = coalesce(deliveries, 1) + held.n"
        " FROM (SELECT coalesce(body_id, id) AS body, count(*) AS n FROM messages WHERE queue_id = ? GROUP BY 1) AS held"
        " WHERE message_bodies.id = held.body", (queue_id,))
    conn.execute("UPDATE messages SET body_id = id WHERE queue_id = ? AND body_id IS NULL", (queue_id,))
    return conn.execute(
        "INSERT INTO messages (id, queue_id, visible_at_ms, enqueued_at_ms, group_id, body_id)"
        " SELECT id + :offset, :subscription, CASE WHEN receive_count = 0 THEN max(visible_at_ms, :now) ELSE :now END,"
        " enqueued_at_ms, group_id, body_id FROM messages WHERE queue_id = :queue ORDER BY id",
        {"offset": id_offset, "subscription": subscription_id, "now": now_ms, "queue": queue_id}).rowcount
