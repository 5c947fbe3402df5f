"""A group's operations and what each sees: the `Transaction`, and running them in turn inside the
group's transaction (database.py opens and commits it).

Groups run without savepoints, since a SAVEPOINT and its RELEASE cost as much as a small
operation and operations rarely fail once they reach the database thread. When one fails,
database.py rolls the group back and runs it again `careful`: each operation in a savepoint
of its own, which undoes just the one that fails.
"""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any, Callable


class Transaction:
    """What an operation sees: the connection, and hooks around the group's COMMIT.

    An operation may change in-memory state (the queue cache) as its last step, so
    that later operations of the same group see it; it registers how to undo that
    in case the group is rolled back: its COMMIT failed, or the group runs again because
    an operation failed. So an operation may run twice: whatever it changes besides the
    database and what it undoes must stand a second run (a counter that only grows, an
    estimate that errs high). It may also ask for a callback on its event loop
    as soon as the COMMIT succeeds, before the results: waking long polls then lets their
    claims run while the disk works (their answers pass `Database.durable` too, which
    waits for this commit, so no one is handed a message before it is durable).
    """

    __slots__ = ("conn", "_undo", "_on_commit")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._undo: list[Callable[[], object]] = []
        self._on_commit: list[Callable[[], object]] = []

    def on_rollback(self, callback: Callable[[], object]) -> None:
        self._undo.append(callback)

    def on_commit(self, callback: Callable[[], object]) -> None:
        self._on_commit.append(callback)


class Operation:
    __slots__ = ("fn", "future", "loop")

    def __init__(self, fn: Callable[[Transaction], Any], future: asyncio.Future, loop: asyncio.AbstractEventLoop):
        self.fn = fn
        self.future = future
        self.loop = loop


class Ran:
    """What running a group's operations left: the outcome of each, the undo and commit hooks of those that
    succeeded, and why the group cannot commit as it is: `aborted` (it must be given up) or `failed`
    (an operation failed with no savepoint to undo just it)."""

    __slots__ = ("outcomes", "undo", "hooks", "aborted", "failed")

    def __init__(self) -> None:
        self.outcomes: list[tuple[bool, Any]] = []
        self.undo: list[Callable[[], object]] = []
        self.hooks: list[tuple[asyncio.AbstractEventLoop, Callable[[], object]]] = []
        self.aborted: BaseException | None = None
        self.failed = False


def run_operations(conn: sqlite3.Connection, group: list[Operation],
                   storage_error: Callable[[BaseException], BaseException], careful: bool) -> Ran:
    """Run each operation in turn: `careful`, each in a savepoint, so that one that fails is undone alone;
    otherwise without, stopping at the first that fails (`failed`: the group must run again, carefully)."""
    ran = Ran()
    # One cursor for the savepoints of the group: conn.execute would make one per statement.
    marks = conn.cursor() if careful else None
    for op in group:
        tx = Transaction(conn)
        try:
            if marks is not None:
                marks.execute("SAVEPOINT op")
            result = op.fn(tx)
        except BaseException as exc:
            for hook in reversed(tx._undo):  # its changes in memory: what it wrote is undone below
                hook()
            if not conn.in_transaction:  # SQLite rolled the whole group back (full, I/O …)
                ran.aborted = exc
                break
            if marks is None:
                ran.failed = True
                break
            try:  # the operation's own failure: undo just it
                conn.execute("ROLLBACK TO op")
                conn.execute("RELEASE op")
            except sqlite3.Error as rollback_failure:
                ran.aborted = rollback_failure
                break
            ran.outcomes.append((False, storage_error(exc) if isinstance(exc, sqlite3.Error) else exc))
        else:
            if marks is not None:
                try:
                    marks.execute("RELEASE op")
                except sqlite3.Error as exc:
                    for hook in reversed(tx._undo):  # the group is given up: undone with the others'
                        hook()
                    ran.aborted = exc
                    break
            ran.outcomes.append((True, result))
            ran.undo.extend(tx._undo)
            for hook in tx._on_commit:  # a loop, not extend(genexpr): no generator per operation
                ran.hooks.append((op.loop, hook))
    return ran
