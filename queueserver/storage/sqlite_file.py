"""Opening the database file (lock, connect, migrate, probe a write), and naming storage
failures in words an operator can act on."""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import sqlite3
from typing import Any, Callable

from queueserver.errors import ServiceUnavailable, StartupError

log = logging.getLogger(__name__)

MIN_SQLITE = (3, 37, 0)  # STRICT tables


def connect(path: str) -> sqlite3.Connection:
    if sqlite3.sqlite_version_info < MIN_SQLITE:
        raise StartupError(
            f"SQLite {sqlite3.sqlite_version} is too old: queueserver needs 3.37 or newer (STRICT tables)"
        )
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA busy_timeout=5000")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")  # and Database syncs the log before any answer goes out
        conn.execute("PRAGMA foreign_keys=OFF")
    except sqlite3.Error:
        conn.close()
        raise
    return conn


_READ_ONLY = "the database file or its folder is read-only"
_ADVICE = {
    "the disk is full": "free some disk space and start again",
    _READ_ONLY: "make the file and its folder writable by this user",
    "the database is locked by another process": "stop the process that holds the lock and start again",
    "the database file is corrupted": (
        "restore it from a copy made with `queueserver backup`, or move it away to start with an empty store"),
}


def open_file(path: str, prepare: Callable[[sqlite3.Connection], object]) -> tuple[sqlite3.Connection, Any]:
    """Lock, open and prepare (migrate) the database, or raise StartupError saying what to do.

    An exclusive flock on the database file itself keeps a second queueserver off it by
    any path (a hard link, a symlink, a second mount): two servers would each believe they
    are the only writer. SQLite locks with fcntl, which on Linux is independent of flock,
    so the two never meet; `queueserver backup` and `check` open the file without it.
    """
    if not os.path.exists(path) and os.path.exists(f"{path}-wal"):
        raise StartupError(
            f"cannot open the database {path}: the file is missing but its write-ahead log {path}-wal is there, "
            f"so the database was deleted; restore it from a copy made with `queueserver backup`, or remove "
            f"{path}-wal and {path}-shm to start with an empty store")
    lock = lock_file(path)
    try:
        if os.statvfs(os.path.dirname(os.path.abspath(path))).f_flag & os.ST_RDONLY:
            raise sqlite3.OperationalError("attempt to write a readonly database (read-only file system)")
        conn = connect(path)
        try:
            prepare(conn)
            _probe_write(conn)
            # The file and its -wal now exist (the probe wrote): their names must outlive a power cut too.
            sync_folder(path)
            # A database served is never readable by others; said only once it opened (a refusal stays one line).
            make_private(path)
        except BaseException:
            conn.close()
            raise
    except sqlite3.Error as exc:
        lock.close()
        reason = describe(exc)
        advice = _ADVICE.get(reason, "check the file and start again")
        raise StartupError(f"cannot open the database {path}: {reason} ({exc}); {advice}") from exc
    except StartupError as exc:
        lock.close()
        raise StartupError(f"cannot open the database {path}: {exc}") from exc
    except BaseException:
        lock.close()
        raise
    return conn, lock


PRIVATE_MODE = 0o600  # the file holds every message and the receipt-handle key


def create_private(path: str) -> int:
    """Create PATH, which must not exist, readable and writable by this user alone; returns its descriptor.

    The mode is set with fchmod after the create, because what a create gives depends on the
    process's umask and on the folder's default ACL, neither of which is ours to trust. SQLite
    gives the -wal, -shm and -journal files it creates the mode of their database file.
    """
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE_MODE)
    try:
        os.fchmod(descriptor, PRIVATE_MODE)
    except BaseException:
        os.close(descriptor)
        os.remove(path)
        raise
    return descriptor


def sync_folder(path: str) -> None:
    """fsync the folder holding PATH, so that the files created in it (their names) are durable. The
    server syncs the log itself (fdatasync of the -wal), which never syncs the folder."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.ENOTSUP):  # a filesystem without folder syncs: nothing to make durable
            return
        raise StartupError(f"its folder {folder} could not be synced to disk ({exc.strerror})") from exc


def make_private(path: str) -> None:
    """Tighten PATH and its -wal and -shm to PRIVATE_MODE where others may read them (a file restored or
    copied under a lax umask), with a log line; one this user cannot change is logged and left."""
    for name in (path, f"{path}-wal", f"{path}-shm"):
        try:
            mode = os.stat(name).st_mode & 0o777
        except OSError:  # not there (no -shm yet), or not ours to look at: the open said what matters
            continue
        if not mode & 0o077:
            continue
        try:
            os.chmod(name, PRIVATE_MODE)
        except OSError as exc:
            log.warning("%s is readable by others (mode %o) and could not be made private: %s", name, mode,
                        exc.strerror)
            continue
        log.warning("%s was readable by others (mode %o): made private (%o), as it holds every message and "
                    "the receipt-handle key", name, mode, PRIVATE_MODE)


def lock_file(path: str) -> Any:
    """The database file, opened (created empty and private if missing) and flocked for the server's life."""
    try:
        try:
            lock = os.fdopen(create_private(path), "rb")
        except FileExistsError:  # a database already (or a link to one)
            lock = open(path, "rb")  # noqa: SIM115
    except OSError as exc:
        reason = _READ_ONLY if isinstance(exc, PermissionError) or exc.errno == errno.EROFS else exc.strerror
        advice = _ADVICE.get(str(reason), "check the path and start again")
        raise StartupError(f"cannot open the database {path}: {reason} ({exc.strerror}); {advice}") from exc
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise StartupError(f"another queueserver is already serving {path} (under this or another name: "
                           f"a link or a second path to the same file); stop it first") from None
    return lock


def _probe_write(conn: sqlite3.Connection) -> None:
    """Fail now, not on the first send, if the database cannot be written."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("INSERT OR REPLACE INTO settings (key, value) VALUES ('write_probe', x'01')")
        conn.execute("COMMIT")
    except BaseException:
        # SQLite has often rolled back already (a full disk, an I/O error): a second ROLLBACK would
        # fail with "no transaction is active" and hide the real cause.
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
        raise


def unavailable(reason: str) -> ServiceUnavailable:
    """What a request meets while the database cannot be read or written (503, in either protocol)."""
    return ServiceUnavailable(f"The message store is unavailable: {reason}. Nothing was changed; try again.")


def describe(exc: BaseException) -> str:
    """A storage failure in words an operator can act on."""
    text = str(exc).lower()
    if "full" in text:
        return "the disk is full"
    if "readonly" in text or "read-only" in text or "unable to open database file" in text:
        return _READ_ONLY
    if "locked" in text or "busy" in text:
        return "the database is locked by another process"
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return "the database file is corrupted"
    if "disk i/o" in text or "input/output error" in text:
        return "a disk I/O error"
    return str(exc)
