"""Applies the numbered `migrations/NNNN_name.sql` files, forward only.

Each file runs in one transaction together with its `PRAGMA user_version` bump, so a
crash mid-migration leaves the database at the previous version.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from importlib import resources

from queueserver.errors import SchemaTooNew

log = logging.getLogger(__name__)

_FILE_NAME = re.compile(r"(\d{4})_[a-z0-9_]+\.sql")


def available_migrations() -> list[tuple[int, str, str]]:
    """(version, file name, SQL) for every migration shipped, in order."""
    found = []
    for entry in resources.files("queueserver.migrations").iterdir():
        match = _FILE_NAME.fullmatch(entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    found.sort()
    for expected, (version, name, _) in enumerate(found, start=1):
        if version != expected:
            raise RuntimeError(f"migration {name} is out of sequence (expected {expected:04d})")
    return found


def split_statements(script: str) -> list[str]:
    """Split a script into whole statements (triggers contain semicolons)."""
    statements, current = [], ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            if current.strip():
                statements.append(current.strip())
            current = ""
    if current.strip() and not current.strip().startswith("--"):
        statements.append(current.strip())
    return statements


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the schema up to date; returns the version reached."""
    migrations = available_migrations()
    latest = migrations[-1][0] if migrations else 0
    current = schema_version(conn)
    if current > latest:
        raise SchemaTooNew(
            f"the database is at schema version {current}, newer than this queueserver "
            f"understands ({latest}); upgrade queueserver"
        )
    for version, name, script in migrations[current:]:
        log.debug("applying migration %s", name)
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in split_statements(script):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    # One line for all the migrations a start applies; none applied (the usual start) says it only in debug,
    # so that a start refused after this (a full disk, a lock) stays the one line that says why.
    log.log(logging.INFO if latest > current else logging.DEBUG, "database at version %d, applied %d migrations",
            latest, latest - current)
    return latest
