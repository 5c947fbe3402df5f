"""The queue SQL: the queues table and the per-database settings."""

from __future__ import annotations

import json
import os
import sqlite3

from queueserver.models import Queue

_COLUMNS = "id, region, account, name, fifo, attributes, tags, created_at_ms, modified_at_ms, deduplication_scope"


def _queue(row: tuple) -> Queue:
    return Queue(
        id=row[0], region=row[1], account=row[2], name=row[3], fifo=bool(row[4]),
        attributes=json.loads(row[5]), tags=json.loads(row[6]),
        created_at_ms=row[7], modified_at_ms=row[8], deduplication_scope=row[9],
    )


def _json(value: dict) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def load_all(conn: sqlite3.Connection) -> list[Queue]:
    return [_queue(row) for row in conn.execute(f"SELECT {_COLUMNS} FROM queues")]


def insert(
    conn: sqlite3.Connection, region: str, account: str, name: str, fifo: bool,
    attributes: dict[str, str], tags: dict[str, str], now_ms: int,
) -> Queue:
    """A new queue, with an id no queue has had (AUTOINCREMENT) and the deduplication scope it keeps."""
    row = conn.execute(
        f"INSERT INTO queues (region, account, name, fifo, attributes, tags, created_at_ms, modified_at_ms, "
        f"deduplication_scope) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING {_COLUMNS}",
        (region, account, name, int(fifo), _json(attributes), _json(tags), now_ms, now_ms,
         attributes.get("DeduplicationScope") or "queue"),
    ).fetchone()
    return _queue(row)


def update(conn: sqlite3.Connection, queue_id: int, attributes: dict[str, str], tags: dict[str, str],
           modified_at_ms: int) -> Queue:
    row = conn.execute(
        f"UPDATE queues SET attributes = ?, tags = ?, modified_at_ms = ? WHERE id = ? RETURNING {_COLUMNS}",
        (_json(attributes), _json(tags), modified_at_ms, queue_id),
    ).fetchone()
    return _queue(row)


def delete(conn: sqlite3.Connection, queue_id: int) -> None:
    conn.execute("DELETE FROM queues WHERE id = ?", (queue_id,))


def receipt_secret(conn: sqlite3.Connection) -> bytes:
    """The per-database MAC key for receipt handles, made on first use."""
    row = conn.execute("SELECT value FROM settings WHERE key = 'receipt_secret'").fetchone()
    if row:
        return bytes(row[0])
    secret = os.urandom(32)
    conn.execute("INSERT INTO settings (key, value) VALUES ('receipt_secret', ?)", (secret,))
    return secret
