"""The subscription SQL: a send logged once for every subscription, each taking its deliveries when read.

A subscription is a queue row of its own (named `<queue>~<name>`, see models.SUBSCRIPTION_SEPARATOR),
so its deliveries are ordinary narrow `messages` rows and every receive, delete, visibility change,
dead-letter move and retention sweep works on them unchanged. They point at the queue's body through
`body_id` (the queue's own row too, with body_id = id). The body counts its deliveries
(`deliveries`, set in the body's INSERT to one for the queue and one per subscription); the trigger
of migration 0004 counts each delete down and takes the body with the last one.

A send writes the queue's rows, the bodies and one `fanout_log` line per message: nothing per
subscription, so its cost does not grow with them (migration 0006). A subscription takes the lines
past its `delivered_up_to` as delivery rows in one sequential INSERT (`deliver`) before it is
received from or browsed; a purge or delete skips them instead, and retention skips the expired ones
(`skip`), counting their bodies down as deleting the rows would have. Its counts include the lines
it has not taken (read_side.py), so taking them changes no count. A line goes once every
subscription of its queue has taken or skipped it; one that never reads holds one line per message,
however many subscriptions share it.
"""

from __future__ import annotations

import sqlite3

from queueserver.models import NewMessage
from queueserver.storage.message_store import insert_bodies, rows_of

_INSERT_SHARED = (
    "INSERT INTO messages (id, queue_id, visible_at_ms, enqueued_at_ms, group_id, body_id) VALUES "
)
_SHARED_ROW = "(?, ?, ?, ?, NULLIF(?, ''), ?)"
_INSERT_LOG = "INSERT INTO fanout_log (queue_id, id, visible_at_ms, enqueued_at_ms, group_id) VALUES "
_LOG_ROW = "(?, ?, ?, ?, NULLIF(?, ''))"

# The lines a subscription has not taken: (its queue, where it stands, the queue's last line).
_POSITION = (
    "SELECT queue_id, delivered_up_to, (SELECT max(id) FROM fanout_log f WHERE f.queue_id = s.queue_id)"
    " FROM subscriptions s WHERE id = ?"
)
# Delivery rows in the log's order, numbered from `base`: appended at the end of the subscription's range.
_DELIVER = (
    "INSERT INTO messages (id, queue_id, visible_at_ms, enqueued_at_ms, group_id, body_id)"
    " SELECT :base + row_number() OVER (ORDER BY id) - 1, :subscription, visible_at_ms, enqueued_at_ms, group_id, id"
    " FROM fanout_log WHERE queue_id = :queue AND id > :after AND id <= :last ORDER BY id"
)
_SKIPPED_BODIES = "SELECT id FROM fanout_log WHERE queue_id = :queue AND id > :after AND id <= :last"
# The end of the expired lines at the head of what a subscription has not taken (retention).
_EXPIRED_UP_TO = (
    "SELECT coalesce((SELECT min(id) FROM fanout_log WHERE queue_id = :queue AND id > :after"
    " AND enqueued_at_ms > :cutoff) - 1, :last)"
)
_PRUNE = (
    "DELETE FROM fanout_log WHERE queue_id = :queue AND id <= coalesce("
    "(SELECT min(delivered_up_to) FROM subscriptions WHERE queue_id = :queue), 9223372036854775807)"
)


def insert_fanned_out(conn: sqlite3.Connection, queue_id: int, rows: list[tuple[int, str, NewMessage]],
                      receivers: int, now_ms: int, sender_id: str) -> None:
    """Store messages given as (row id, MessageId, message) on a queue with subscriptions: its rows,
    the bodies once (each counting `receivers` deliveries: the queue and every subscription) and a
    log line each for the subscriptions to take. The statements' size depends on the send alone."""
    if not rows:
        return
    values: list[object] = []
    log: list[object] = []
    for row_id, _, m in rows:
        visible_at = now_ms + m.delay_seconds * 1000
        group = m.group_id or ""
        values += (row_id, queue_id, visible_at, now_ms, group, row_id)
        log += (queue_id, row_id, visible_at, now_ms, group)
    conn.execute(_INSERT_SHARED + rows_of(_SHARED_ROW, len(rows)), values)
    conn.execute(_INSERT_LOG + rows_of(_LOG_ROW, len(rows)), log)
    insert_bodies(conn, rows, now_ms, sender_id, deliveries=receivers)


def add(conn: sqlite3.Connection, subscription_id: int, queue_id: int) -> None:
    """A new subscription takes what is logged from now on (StartFrom=all copies the rest: copy_held_messages)."""
    conn.execute(
        "INSERT INTO subscriptions (id, queue_id, delivered_up_to)"
        " VALUES (?, ?, coalesce((SELECT max(id) FROM fanout_log WHERE queue_id = ?), 0))",
        (subscription_id, queue_id, queue_id))


def deliver(conn: sqlite3.Connection, subscription_id: int, base: int) -> int:
    """Take every line the subscription has not taken as its delivery rows, numbered from `base`;
    returns how many (the caller's next row id moves on by as many)."""
    position = conn.execute(_POSITION, (subscription_id,)).fetchone()
    if position is None or position[2] is None or position[2] <= position[1]:
        return 0
    queue_id, after, last = position
    taken = conn.execute(_DELIVER, {"base": base, "subscription": subscription_id, "queue": queue_id,
                                    "after": after, "last": last}).rowcount
    _move_to(conn, subscription_id, queue_id, last)
    return taken


def skip(conn: sqlite3.Connection, subscription_id: int, cutoff_ms: int | None = None) -> None:
    """Drop the lines the subscription has not taken (a purge, a delete), or only those enqueued at or
    before `cutoff_ms` ahead of the rest (retention); their bodies count down as the trigger counts
    them for a deleted row: the last delivery takes the body."""
    position = conn.execute(_POSITION, (subscription_id,)).fetchone()
    if position is None or position[2] is None or position[2] <= position[1]:
        return
    lines = {"queue": position[0], "after": position[1], "last": position[2]}
    if cutoff_ms is not None:
        lines["last"] = conn.execute(_EXPIRED_UP_TO, {**lines, "cutoff": cutoff_ms}).fetchone()[0]
        if lines["last"] <= lines["after"]:
            return
    conn.execute(f"DELETE FROM message_bodies WHERE deliveries = 1 AND id IN ({_SKIPPED_BODIES})", lines)
    conn.execute(f"UPDATE message_bodies SET deliveries = deliveries - 1 WHERE id IN ({_SKIPPED_BODIES})", lines)
    _move_to(conn, subscription_id, lines["queue"], lines["last"])


def _move_to(conn: sqlite3.Connection, subscription_id: int, queue_id: int, last: int) -> None:
    """The subscription has taken or skipped the lines up to `last`; those no one needs go."""
    conn.execute("UPDATE subscriptions SET delivered_up_to = ? WHERE id = ?", (last, subscription_id))
    conn.execute(_PRUNE, {"queue": queue_id})


def remove(conn: sqlite3.Connection, queue_id: int) -> None:
    """A deleted queue's or subscription's bookkeeping (`skip` a subscription's lines first)."""
    row = conn.execute("DELETE FROM subscriptions WHERE id = ? RETURNING queue_id", (queue_id,)).fetchone()
    conn.execute("DELETE FROM fanout_log WHERE queue_id = ?", (queue_id,))
    if row is not None:
        conn.execute(_PRUNE, {"queue": row[0]})


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
