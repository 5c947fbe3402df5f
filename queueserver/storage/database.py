"""One SQLite connection on one thread, with group commit.

Every operation is a plain function of a `Transaction`, run on the database thread.
Operations that arrive while the thread is busy are run together in one
`BEGIN IMMEDIATE … COMMIT`, each inside its own savepoint so that one failing
operation does not roll back its neighbours. One fsync then acknowledges them all.

Why not aiosqlite: each awaited aiosqlite statement costs a thread hand-off
(100–250 µs measured here), so a writer awaiting one statement per message caps near
2,000 messages/s. Running a whole group of operations as one unit on the thread
costs one hand-off per group.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import sqlite3
import threading
from typing import Any, Callable, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
MIN_SQLITE = (3, 37, 0)  # STRICT tables
_STOP = object()


class Transaction:
    """What an operation sees: the connection, and undo hooks for in-memory state.

    An operation may change in-memory state (the queue cache) as its last step, so
    that later operations of the same group see it; it registers how to undo that
    in case the group's COMMIT fails.
    """

    __slots__ = ("conn", "_undo")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._undo: list[Callable[[], None]] = []

    def on_rollback(self, callback: Callable[[], None]) -> None:
        self._undo.append(callback)


class _Operation:
    __slots__ = ("fn", "future", "loop")

    def __init__(self, fn: Callable[[Transaction], Any], future: asyncio.Future, loop: asyncio.AbstractEventLoop):
        self.fn = fn
        self.future = future
        self.loop = loop


def connect(path: str) -> sqlite3.Connection:
    if sqlite3.sqlite_version_info < MIN_SQLITE:
        raise RuntimeError(
            f"SQLite {sqlite3.sqlite_version} is too old: queueserver needs 3.37 or newer (STRICT tables)"
        )
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=OFF")
    conn.execute("PRAGMA busy_timeout=5000")
    return conn


class Database:
    """The database thread. `run` submits an operation and awaits its durable result."""

    def __init__(self, conn: sqlite3.Connection, max_group: int = 256) -> None:
        self._conn = conn
        self._max_group = max_group
        self._inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="queueserver-sqlite", daemon=True)
        self._closed = False
        self._thread.start()

    async def run(self, fn: Callable[[Transaction], T]) -> T:
        if self._closed:
            raise RuntimeError("the database is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        self._inbox.put(_Operation(fn, future, loop))
        return await future

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._inbox.put(_STOP)
        await asyncio.get_running_loop().run_in_executor(None, self._thread.join)
        self._conn.close()

    def _serve(self) -> None:
        while True:
            first = self._inbox.get()
            if first is _STOP:
                return
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
            self._run_group(group)
            if stop:
                return

    def _run_group(self, group: list[_Operation]) -> None:
        conn = self._conn
        outcomes: list[tuple[bool, Any]] = []
        undo: list[Callable[[], None]] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            log.error("cannot begin a transaction: %s", exc)
            for op in group:
                self._resolve(op, False, exc)
            return
        for op in group:
            tx = Transaction(conn)
            conn.execute("SAVEPOINT op")
            try:
                result = op.fn(tx)
            except BaseException as exc:  # the operation's own failure: undo just it
                try:
                    conn.execute("ROLLBACK TO op")
                    conn.execute("RELEASE op")
                except sqlite3.Error:
                    pass
                outcomes.append((False, exc))
            else:
                conn.execute("RELEASE op")
                outcomes.append((True, result))
                undo.extend(tx._undo)
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            log.error("commit failed, %d operations rolled back: %s", len(group), exc)
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            outcomes = [(False, exc)] * len(group)
            for hook in reversed(undo):
                hook()
        for op, (ok, value) in zip(group, outcomes):
            self._resolve(op, ok, value)

    @staticmethod
    def _resolve(op: _Operation, ok: bool, value: Any) -> None:
        def settle() -> None:
            if op.future.done():
                return
            if ok:
                op.future.set_result(value)
            else:
                op.future.set_exception(value)

        try:
            op.loop.call_soon_threadsafe(settle)
        except RuntimeError:  # the loop is gone; nobody is waiting
            pass
