"""Offline and online administration: a consistent backup, and a health check.

Both open their own connection, so they work while a server is running (WAL lets
readers in beside the writer) and when none is.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from dataclasses import dataclass

from queueserver.errors import StartupError
from queueserver.storage.sqlite_file import create_private, describe
from queueserver.storage.migrations import available_migrations, schema_version
from queueserver.storage.read_side import ReadSide


@dataclass(frozen=True)
class QueueReport:
    region: str
    account: str
    name: str
    messages: int
    in_flight: int


@dataclass(frozen=True)
class CheckReport:
    integrity: str
    schema_version: int
    latest_schema_version: int
    queues: list[QueueReport]


def _read_only(path: str) -> sqlite3.Connection:
    if not os.path.exists(path):
        raise StartupError(f"there is no database at {path}")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.execute("PRAGMA busy_timeout=5000")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        raise StartupError(f"cannot read {path}: {describe(exc)} ({exc})") from exc
    return conn


def backup(source: str, destination: str) -> int:
    """Copy the database with SQLite's online backup: a consistent snapshot, safe while serving.

    The copy is written beside the destination and renamed into place, so a half-written
    backup never looks like a whole one; like the database it holds every message and the
    receipt-handle key, so it is readable by its owner alone. Returns the copy's size in bytes.
    """
    conn = _read_only(source)
    temporary = f"{destination}.partial"
    try:
        if os.path.lexists(temporary):  # left by a backup that was interrupted
            os.remove(temporary)
        os.close(create_private(temporary))  # SQLite opens it as an empty database
        target = sqlite3.connect(temporary)
        try:
            conn.backup(target)
            target.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
        finally:
            target.close()
        os.replace(temporary, destination)
    except (sqlite3.Error, OSError) as exc:
        raise StartupError(f"backup failed: {describe(exc)} ({exc})") from exc
    finally:
        conn.close()
        if os.path.exists(temporary):
            os.remove(temporary)
    return os.path.getsize(destination)


def check(path: str, now_ms: int) -> CheckReport:
    """Integrity and schema version here; the messages per queue through the server's read side."""
    conn = _read_only(path)
    try:
        integrity = "; ".join(row[0] for row in conn.execute("PRAGMA integrity_check"))
        version = schema_version(conn)
        queues = []
        if version >= 1:
            queues = [QueueReport(*row) for row in asyncio.run(_queue_totals(path, now_ms))]
    except sqlite3.Error as exc:
        raise StartupError(f"cannot check {path}: {describe(exc)} ({exc})") from exc
    finally:
        conn.close()
    return CheckReport(integrity, version, available_migrations()[-1][0], queues)


async def _queue_totals(path: str, now_ms: int) -> list[tuple[str, str, str, int, int]]:
    reads = await ReadSide.open(path, readers=1)
    try:
        return await reads.queue_totals(now_ms)
    finally:
        await reads.close()
