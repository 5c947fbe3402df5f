"""The database's replication generation, kept in SQLite's header (`PRAGMA application_id`).

A promoted standby writes under a generation one higher than the primary it replaces
(replication/generations.py). The number lives in the database file itself, so it travels
with the file into the replica and back out of a restore, and needs no table (the schema's
migrations are untouched). 0: a database that was never promoted.
"""

from __future__ import annotations

import sqlite3

from queueserver.errors import StartupError
from queueserver.storage.sqlite_file import describe


def read_generation(path: str) -> int:
    """The file's generation (0 for a file that does not exist yet)."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return 0
    try:
        return int(conn.execute("PRAGMA application_id").fetchone()[0])
    except sqlite3.Error as exc:
        if "unable to open" in str(exc):
            return 0
        raise StartupError(f"cannot read {path}: {describe(exc)} ({exc})") from exc
    finally:
        conn.close()


def check_and_take(path: str, generation: int) -> str:
    """Before a standby's copy is written to: SQLite's quick check, then the new generation set.
    Returns the check's verdict ("ok", else what it found; the generation is then left alone)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA busy_timeout=5000")
        found = [row[0] for row in conn.execute("PRAGMA quick_check")]
        verdict = "ok" if found == ["ok"] else "; ".join(str(f) for f in found[:5])
        if verdict == "ok":
            conn.execute(f"PRAGMA application_id={int(generation)}")
        return verdict
    except sqlite3.Error as exc:
        return f"{describe(exc)} ({exc})"
    finally:
        conn.close()
