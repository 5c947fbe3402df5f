"""Writing back a database file that was deleted while the server ran.

The open connection still has every byte of the deleted file, so it can put the file back.
This happens in two halves, so that no failure can leave the server without its data:

1. `restore` does everything that can fail while the old connection stays open and whole:
   checkpoint its log into the deleted file (so that the -wal left at the path is empty and
   cannot be replayed onto the restored file), copy it to a temporary file, rename that into
   place, sync the folder. Any failure removes the temporary file and leaves things as they
   were; the next check tries again.
2. The caller then closes the old connection and opens the restored file. The old one must
   be closed first: both would use PATH-wal and PATH-shm (SQLite leaves them in place when it
   closes a database whose file was unlinked; the checkpoint emptied the log). If the open
   fails, the restored file already holds everything; it is opened again before the next
   group runs.
"""

from __future__ import annotations

import os
import sqlite3

from queueserver.storage.sqlite_file import create_private


def identity(path: str) -> tuple[int, int] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return (status.st_dev, status.st_ino)


def sync_directory(path: str) -> None:
    directory = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def open_log(path: str) -> int | None:
    """A descriptor of PATH-wal to fsync (None for an in-memory database, which has no log)."""
    if path == ":memory:":
        return None
    return os.open(f"{path}-wal", os.O_RDONLY | os.O_CLOEXEC)


def restore(conn: sqlite3.Connection, path: str) -> None:
    """Put a copy of `conn`'s database at `path`, durably; on failure change nothing and raise."""
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    temporary = f"{path}.restore-{os.getpid()}"
    try:
        os.close(create_private(temporary))  # SQLite opens it as an empty database
        target = sqlite3.connect(temporary)
        try:
            conn.backup(target)  # commits with a synced journal: the copy is on disk
        finally:
            target.close()
        os.replace(temporary, path)
    except BaseException:
        for leftover in (temporary, f"{temporary}-journal"):
            try:
                os.remove(leftover)
            except OSError:
                pass
        raise
    try:
        sync_directory(path)  # the rename itself must survive a power cut
    except BaseException:
        os.remove(path)  # back to "deleted", so that the next check starts again from the top
        raise
