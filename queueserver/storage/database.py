"""One SQLite connection on one thread, with group commit, and the fsync on a thread of its own (syncer.py).

Every operation is a plain function of a `Transaction`, run on the database thread.
Operations that arrive while the thread is busy are run together in one
`BEGIN IMMEDIATE … COMMIT` (operations.py), and one fsync then makes them all durable.
A failing operation does not roll back its neighbours: the group is then rolled back
and run again with each operation in a savepoint of its own.

Durability is what `synchronous=FULL` gives, done by hand so that nobody idles while the
disk works: the connection commits with `synchronous=NORMAL`, and the syncer thread then
runs an `fdatasync` of the write-ahead log. In WAL mode (with SQLite's default powersafe
overwrite) FULL differs from NORMAL only by that sync at commit; NORMAL keeps the syncs of
checkpoints and of the log's header when it is restarted. Results come back at COMMIT, so
the event loop builds the answers while the fsync runs, and the database thread can run
the next group; `Database.durable` is the gate every acknowledgment passes: it returns once
an fsync has finished that began after the latest COMMIT before the call.

The one case FULL does not have: an fsync that fails after SQLite has published the
commit. Later commits could then be acknowledged behind log frames that never reached
the disk, so after such a failure every operation is refused until a restart.

Why not aiosqlite: each awaited aiosqlite statement costs a thread hand-off
(100–250 µs measured here), so a writer awaiting one statement per message caps near
2,000 messages/s. Running a whole group of operations as one unit on the thread
costs one hand-off per group.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import queue
import sqlite3
import threading
import time
from typing import Any, Awaitable, Callable, ContextManager, TypeVar

from queueserver import errors
from queueserver.storage import write_back
from queueserver.tallies import StorageTally
from queueserver.storage.health import Health
from queueserver.storage.loop_calls import call_on_loops, resolve, yield_to_the_event_loop
from queueserver.storage.operations import Operation, Ran, Transaction, run_operations
from queueserver.storage.sqlite_file import connect, describe, lock_file, unavailable
from queueserver.storage.syncer import Syncer

log = logging.getLogger(__name__)

T = TypeVar("T")
IDLE_CHECK_SECONDS = 1.0
RECOVERY_SECONDS = 0.5  # writes must succeed this long, unbroken, before an outage is logged as over
FILE_CHECK_SECONDS = 0.25
AUTOCHECKPOINT_PAGES = 1000  # SQLite's default: checkpoint at commit once the WAL holds this many pages
_STOP = object()


class Database:
    """The database thread. `run` submits an operation and awaits its result, which comes at
    COMMIT; `durable` waits until that (and every other commit so far) is on disk.

    Any failure inside a group (disk full, read-only, locked, I/O errors, a bug) fails that
    group's operations with ServiceUnavailable, nothing acknowledged; the next group tries
    again, so the server recovers by itself when the condition clears. `sync_log` makes the
    log durable (`os.fdatasync`; tests inject one); `health` hears of a thread that ends.
    """

    def __init__(self, conn: sqlite3.Connection, path: str, lock: Any = None, max_group: int = 256,
                 sync_log: Callable[[int], None] = os.fdatasync, health: Health | None = None) -> None:
        self._conn: sqlite3.Connection | None = conn  # None between a write-back and the reopening of the file
        self.health = health or Health()
        self.tally = StorageTally()
        self._lock = lock
        self._path = path
        self._identity = write_back.identity(path)
        self._checked_at = 0.0
        self._max_group = max_group
        self._inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._groups_written = 0  # writing groups committed (the database thread counts)
        self._syncer = Syncer(write_back.open_log(path), sync_log, self.tally, self.health)
        self._changes = conn.total_changes
        self._restoring: errors.SQSError | None = None  # while a deleted file is not written back: why
        self._thread = threading.Thread(target=self.health.thread_target("the database thread", self._serve),
                                        name="queueserver-sqlite", daemon=True)
        self._closed = False
        self._failing: str | None = None  # the outage logged last, until its recovery is logged
        self._recovering_since: float | None = None
        self._autocheckpoint = AUTOCHECKPOINT_PAGES  # 0 while a replicator checkpoints instead
        # Held around a write-back (on this thread): replication pauses, as it would confuse the new file.
        self.write_back_guard: Callable[[], ContextManager[object]] = contextlib.nullcontext
        self._thread.start()

    async def run(self, fn: Callable[[Transaction], T]) -> T:
        """Run `fn` in the next group; its result comes at COMMIT, before it is durable (see `durable`)."""
        if self._closed:
            raise RuntimeError("the database is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        self._inbox.put(Operation(fn, future, loop))
        return await future

    async def set_autocheckpoint(self, pages: int) -> None:
        """Let the connection checkpoint at commit once the WAL holds `pages` pages (0: never, another
        process checkpoints); kept for a connection opened again after a write-back."""
        def apply(tx: Transaction) -> None:
            tx.conn.execute(f"PRAGMA wal_autocheckpoint={int(pages)}")
            self._autocheckpoint = int(pages)

        await self.run(apply)

    def durable(self) -> Awaitable[None]:
        """Wait until every group committed so far is on disk; raise ServiceUnavailable if that failed.

        Whatever acknowledges a change (or shows data a change produced) awaits this first.
        Until then the loop can build the answer while the disk works. A group still running is
        not waited for: a group held up (by a lock, say) must not hold up everyone's answers.
        """
        return self._syncer.durable(self._groups_written)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.health.stopping = True
        self._inbox.put(_STOP)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._thread.join)
        await loop.run_in_executor(None, self._syncer.stop)
        if self._conn is not None:
            self._conn.close()
        if self._lock is not None:
            self._lock.close()

    def _serve(self) -> None:
        yield_to_the_event_loop()
        while True:
            try:
                first = self._inbox.get(timeout=RECOVERY_SECONDS if self._recovering_since else IDLE_CHECK_SECONDS)
            except queue.Empty:  # idle: still notice a deleted file soon, while it can be written back
                self._note_recovery()
                try:
                    self._check_file()
                    self._connection()
                except errors.SQSError:  # logged where it arose
                    pass
                except Exception as exc:  # noqa: BLE001 - the idle check must not end the thread
                    self._storage_error(exc)
                continue
            if first is _STOP:
                return
            self._note_recovery()
            group = [first]
            stop = False
            while len(group) < self._max_group:
                try:
                    item = self._inbox.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stop = True
                    break
                group.append(item)
            try:
                self._run_group(group)
            except BaseException as exc:  # noqa: BLE001 - whatever went wrong, this thread keeps serving
                self._fail_group(group, exc)
            if stop:
                return

    def _run_group(self, group: list[Operation]) -> None:
        self.tally.group_sizes.observe(len(group))
        conn: sqlite3.Connection | None = None
        aborted: BaseException | None = None
        try:
            if self._syncer.failure is not None:  # a failed fsync: nothing more is run
                raise self._syncer.failure
            self._check_file()
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
        except Exception as exc:  # noqa: BLE001 - SQSError: the file was replaced, or unsynced
            aborted = exc
        ran = Ran()
        if conn is not None and aborted is None:
            ran = run_operations(conn, group, self._storage_error, careful=False)
            if ran.failed:  # only a savepoint undoes the failed operation alone: again, each in its own
                for hook in reversed(ran.undo):
                    hook()
                ran = Ran()
                try:  # the write lock goes for a moment, as it does between any two groups
                    conn.execute("ROLLBACK")
                    conn.execute("BEGIN IMMEDIATE")
                except sqlite3.Error as exc:
                    ran.aborted = exc
                else:
                    ran = run_operations(conn, group, self._storage_error, careful=True)
            aborted = ran.aborted
        outcomes, undo, committed_hooks = ran.outcomes, ran.undo, ran.hooks
        if aborted is None and conn is not None:
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                aborted = exc
        if aborted is not None:
            if conn is not None and conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            for hook in reversed(undo):
                hook()
            failure = aborted if isinstance(aborted, errors.SQSError) else self._storage_error(aborted)
            outcomes = [(False, failure)] * len(group)
        wrote = False
        if conn is not None and conn is self._conn:
            changes = conn.total_changes
            wrote = changes != self._changes
            self._changes = changes
        if wrote:  # counted before the results go out, so that their `durable` waits for this group
            self._groups_written += 1
            self._syncer.committed(self._groups_written)
        if (self._failing is not None and self._recovering_since is None and aborted is None and wrote
                and not any(isinstance(value, errors.ServiceUnavailable) for _, value in outcomes)):
            self._recovering_since = time.monotonic()
        # Hooks first, then the results: one wake-up of each loop for the group.
        call_on_loops(committed_hooks + [(op.loop, functools.partial(resolve, op.future, ok, value))
                                          for op, (ok, value) in zip(group, outcomes)])

    @property
    def path(self) -> str:
        return self._path

    def unready(self) -> str | None:
        """Why writes would fail now (a failed fsync, a file being written back, an outage not
        yet over), or None."""
        failure = self._syncer.failure or self._restoring
        if failure is not None:
            return failure.message
        if self._failing is not None:  # over once writes have succeeded for RECOVERY_SECONDS
            return f"storage unavailable: {self._failing}"
        return None

    def _storage_error(self, exc: BaseException) -> errors.SQSError:
        reason = describe(exc)
        if self._failing is None:
            self.tally.outages += 1
            self.tally.last_outage = (time.time(), reason)  # shown on the console's server page
        if self._failing != reason:
            log.error("storage unavailable: %s (%s: %s); requests get 503 until it clears",
                      reason, type(exc).__name__, exc)
            self._failing = reason
        self._recovering_since = None  # a disk with room for one more small group is still full
        return unavailable(reason)

    def _note_recovery(self) -> None:
        """Log the end of an outage once writes have succeeded for RECOVERY_SECONDS without a failure."""
        if self._recovering_since is not None and time.monotonic() - self._recovering_since >= RECOVERY_SECONDS:
            log.warning("storage recovered: writes succeed again")
            self._failing = None
            self._recovering_since = None

    def _fail_group(self, group: list[Operation], exc: BaseException) -> None:
        """A failure `_run_group` did not foresee: roll back, answer 503 to the group, carry on."""
        log.exception("a commit group failed unexpectedly; its requests get 503 and the server carries on")
        try:
            if self._conn is not None and self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass
        failure = self._storage_error(exc)
        call_on_loops([(op.loop, functools.partial(resolve, op.future, False, failure)) for op in group])

    def _connection(self) -> sqlite3.Connection:
        """The open connection, or the restored file opened again (after a write-back whose reopening failed)."""
        if self._conn is not None:
            return self._conn
        conn = connect(self._path)
        try:
            conn.execute(f"PRAGMA wal_autocheckpoint={self._autocheckpoint}")
            log_fd = write_back.open_log(self._path)
        except (OSError, sqlite3.Error):
            conn.close()
            raise
        self._conn, self._changes = conn, conn.total_changes
        old_fd, self._syncer.log_fd = self._syncer.log_fd, log_fd
        if old_fd is not None:
            os.close(old_fd)
        self._restoring = None
        log.warning("the database file %s is restored", self._path)
        return conn

    def _check_file(self) -> None:
        """Put the database file back if it was deleted while we ran (our connection still has it all).

        At most every FILE_CHECK_SECONDS: a stat per commit group cost ~20 % of this thread's time
        under load, and everything written meanwhile is in the connection and is written back too.
        A failure leaves the old connection open and whole (see write_back); the next check retries.
        """
        now = time.monotonic()
        if now - self._checked_at < FILE_CHECK_SECONDS:
            if self._restoring is not None:  # nothing is acknowledged into a deleted file a crash would take along
                raise self._restoring.with_traceback(None)
            return
        self._checked_at = now
        if self._path == ":memory:" or write_back.identity(self._path) == self._identity:
            return
        if os.path.exists(self._path):
            raise self._storage_error(RuntimeError(f"{self._path} was replaced by another file while the server ran"))
        if self._restoring is None:
            log.error("the database file %s was deleted while the server ran; writing it back from the open "
                      "database", self._path)
            self._restoring = errors.ServiceUnavailable(
                f"The message store is unavailable: {self._path} was deleted and is being written back; try again.")
        assert self._conn is not None  # the identity only changes back after the old connection is closed
        with contextlib.ExitStack() as guarded:
            try:
                guarded.enter_context(self.write_back_guard())
                self._syncer.drain()  # the syncer must be done with the old log before it is closed
                write_back.restore(self._conn, self._path)
            except Exception as exc:  # noqa: BLE001 - answered as 503 until a retry succeeds
                self._restoring = self._storage_error(exc)
                raise self._restoring from exc
            self._identity = write_back.identity(self._path)
            if self._lock is not None:  # the old lock is on the deleted file; a second server would find it free
                old_lock, self._lock = self._lock, lock_file(self._path)
                old_lock.close()
            old, self._conn = self._conn, None
            old.close()  # before the restored file opens: both would use PATH-wal (emptied by restore) and PATH-shm
            self._connection()
