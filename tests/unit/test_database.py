"""The database thread and its syncer, on a real SQLite file with an injected log sync.

What the design promises: a result comes at COMMIT, and `durable()` returns only after an
fsync of the write-ahead log that began after the latest COMMIT; the next group runs while
that fsync is in flight; and after an fsync fails nothing more is acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest

from queueserver import errors
from queueserver.storage import database
from queueserver.storage.database import Database
from queueserver.storage.operations import Transaction
from queueserver.storage.sqlite_file import open_file

WAIT = 10.0  # seconds; only a broken implementation waits this long


def prepare(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value BLOB)")
    conn.execute("CREATE TABLE IF NOT EXISTS items (n INTEGER)")


def insert(n: int) -> Callable[[Transaction], int]:
    def op(tx: Transaction) -> int:
        tx.conn.execute("INSERT INTO items (n) VALUES (?)", (n,))
        return n
    return op


def count(tx: Transaction) -> int:
    return tx.conn.execute("SELECT count(*) FROM items").fetchone()[0]


def committed_items(path: Path) -> set[int]:
    """What another connection sees: committed, whether or not it is on disk yet."""
    reader = sqlite3.connect(path)
    try:
        return {n for (n,) in reader.execute("SELECT n FROM items")}
    finally:
        reader.close()


class GatedSync:
    """A log sync that records what was committed when it began, and waits for a go when gated."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen_at_start: list[set[int]] = []
        self.started = threading.Event()
        self.go = threading.Event()
        self.go.set()
        self.failure: OSError | None = None

    def __call__(self, fd: int) -> None:
        self.seen_at_start.append(committed_items(self.path))
        self.started.set()
        assert self.go.wait(WAIT), "the test never let the sync finish"
        if self.failure is not None:
            raise self.failure


def run(tmp_path: Path, scenario: Callable[[Database, GatedSync], Awaitable[Any]]) -> Any:
    path = tmp_path / "db.sqlite"

    async def main() -> Any:
        conn, lock = open_file(str(path), prepare)
        sync = GatedSync(path)
        db = Database(conn, str(path), lock, sync_log=sync)
        try:
            return await scenario(db, sync)
        finally:
            sync.go.set()
            await db.close()

    return asyncio.run(main())


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(int(WAIT / 0.005)):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the condition never came true")


def test_a_write_is_durable_only_after_a_log_sync_that_began_after_its_commit(tmp_path: Path) -> None:
    async def scenario(db: Database, sync: GatedSync) -> None:
        sync.go.clear()
        assert await db.run(insert(1)) == 1  # the result comes at COMMIT, while the sync is held back
        durable = asyncio.ensure_future(db.durable())
        await until(sync.started.is_set)
        assert sync.seen_at_start == [{1}], "the sync began before the commit it must cover"
        await db.run(count)  # a round trip through the database thread: the loop has run all it was given
        assert not durable.done(), "durable while the log sync was still running"
        sync.go.set()
        await asyncio.wait_for(durable, WAIT)

    run(tmp_path, scenario)


def test_the_next_group_commits_while_the_previous_sync_is_in_flight_and_one_sync_covers_both(
        tmp_path: Path) -> None:
    async def scenario(db: Database, sync: GatedSync) -> None:
        sync.go.clear()
        assert await db.run(insert(1)) == 1
        first = asyncio.ensure_future(db.durable())
        await until(sync.started.is_set)
        assert await asyncio.gather(db.run(insert(2)), db.run(insert(3))) == [2, 3]  # the thread did not wait
        second = asyncio.ensure_future(db.durable())
        await db.run(count)  # a round trip through the database thread: the loop has run all it was given
        assert not (first.done() or second.done())
        sync.go.set()
        await asyncio.wait_for(asyncio.gather(first, second), WAIT)
        assert sync.seen_at_start == [{1}, {1, 2, 3}], "groups committed during a sync share the next one"

    run(tmp_path, scenario)


def test_a_group_that_changed_nothing_needs_no_sync(tmp_path: Path) -> None:
    async def scenario(db: Database, sync: GatedSync) -> None:
        assert await db.run(insert(1)) == 1
        await db.durable()
        assert len(sync.seen_at_start) == 1
        sync.go.clear()  # a read that waited for a sync would now hang
        assert await db.run(count) == 1
        await asyncio.wait_for(db.durable(), WAIT)
        assert len(sync.seen_at_start) == 1, "a read synced the log"

    run(tmp_path, scenario)


def test_after_a_failed_log_sync_nothing_more_is_acknowledged(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario(db: Database, sync: GatedSync) -> None:
        assert await db.run(insert(1)) == 1
        await db.durable()
        sync.failure = OSError(5, "Input/output error")
        with caplog.at_level(logging.CRITICAL, logger="queueserver.storage.database"):
            assert await db.run(insert(2)) == 2  # committed; its sync fails
            with pytest.raises(errors.ServiceUnavailable, match="Restart the server"):
                await db.durable()
        assert "could not be synced" in caplog.text
        sync.failure = None  # the next fsync would claim success: it must not be trusted
        for op in (insert(3), count):
            with pytest.raises(errors.ServiceUnavailable, match="Restart the server"):
                await db.run(op)
        with pytest.raises(errors.ServiceUnavailable, match="Restart the server"):
            await db.durable()
        assert committed_items(sync.path) == {1, 2}, "operations ran after the failed sync"
        assert len(sync.seen_at_start) == 2

    run(tmp_path, scenario)


def test_an_outage_is_logged_once_and_its_end_only_after_writes_succeed_for_a_while(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(database, "RECOVERY_SECONDS", 0.2)

    def full(tx: Transaction) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    def lines(text: str) -> int:
        return sum(text in record.getMessage() for record in caplog.records)

    async def scenario(db: Database, sync: GatedSync) -> None:
        with caplog.at_level(logging.WARNING, logger="queueserver.storage.database"):
            for _ in range(2):
                with pytest.raises(errors.ServiceUnavailable, match="disk is full"):
                    await db.run(full)
            assert await db.run(insert(1)) == 1  # room for one more small write: the disk is still full
            with pytest.raises(errors.ServiceUnavailable):
                await db.run(full)
            assert await db.run(insert(2)) == 2
            assert lines("storage unavailable: the disk is full") == 1, caplog.text
            assert lines("storage recovered") == 0, "the end of the outage was logged before writes held up"
            await until(lambda: lines("storage recovered") == 1)  # logged by the idle thread, no request needed
            assert lines("storage unavailable") == 1

    run(tmp_path, scenario)


def test_commit_hooks_run_on_the_loop_before_the_result_and_not_for_a_failed_operation(tmp_path: Path) -> None:
    async def scenario(db: Database, sync: GatedSync) -> None:
        called: list[str] = []

        def send(tx: Transaction) -> int:
            tx.conn.execute("INSERT INTO items (n) VALUES (1)")
            tx.on_commit(lambda: called.append("send"))
            return 1

        def failing(tx: Transaction) -> None:
            tx.on_commit(lambda: called.append("failing"))
            raise errors.InvalidParameterValue("no")

        sync.go.clear()
        answer = asyncio.ensure_future(db.run(send))
        refused = asyncio.ensure_future(db.run(failing))
        answer.add_done_callback(lambda _: called.append("result"))
        assert await answer == 1  # while the sync is still held back
        with pytest.raises(errors.InvalidParameterValue):
            await refused
        assert called == ["send", "result"]
        sync.go.set()

    run(tmp_path, scenario)


async def one_group(db: Database, ops: list[Callable[[Transaction], Any]]) -> list[Any]:
    """Run `ops` as one group: they are queued while an operation holds the thread, then it lets go."""
    running, go = threading.Event(), threading.Event()

    def hold(tx: Transaction) -> None:
        running.set()
        assert go.wait(WAIT), "the test never let the group go"

    held = asyncio.ensure_future(db.run(hold))
    await until(running.is_set)
    queued = [asyncio.ensure_future(db.run(op)) for op in ops]
    await asyncio.sleep(0)  # each task runs up to its wait for the result: every operation is in the inbox
    go.set()
    await held
    return await asyncio.gather(*queued, return_exceptions=True)


def test_an_operation_that_fails_after_it_wrote_is_undone_alone_and_its_neighbours_commit_once(
        tmp_path: Path) -> None:
    """With no savepoint to undo just the failed operation, the group runs again, each in one: the
    first run's in-memory changes are undone and its commit hooks dropped, so each counts once; the
    failed operation's own changes in memory are undone with what it wrote."""
    async def scenario(db: Database, sync: GatedSync) -> None:
        memory = {"runs": 0, "kept": 0, "failed": 0}
        committed: list[str] = []

        def counted(tx: Transaction) -> int:
            tx.conn.execute("INSERT INTO items (n) VALUES (2)")
            memory["runs"] += 1
            memory["kept"] += 1
            tx.on_rollback(lambda: memory.__setitem__("kept", memory["kept"] - 1))
            tx.on_commit(lambda: committed.append("counted"))
            return 2

        def writes_then_fails(tx: Transaction) -> None:
            tx.conn.execute("INSERT INTO items (n) VALUES (3)")
            memory["failed"] += 1
            tx.on_rollback(lambda: memory.__setitem__("failed", memory["failed"] - 1))
            tx.on_commit(lambda: committed.append("failed"))
            raise errors.InvalidParameterValue("no")

        groups, operations = sum(db.tally.group_sizes.counts), db.tally.group_sizes.sum
        results = await one_group(db, [counted, writes_then_fails, insert(4)])
        # the holder's group, then the three together
        assert (sum(db.tally.group_sizes.counts) - groups, db.tally.group_sizes.sum - operations) == (2, 4)
        assert results[0] == 2 and isinstance(results[1], errors.InvalidParameterValue) and results[2] == 4
        assert committed_items(sync.path) == {2, 4}
        assert memory == {"runs": 2, "kept": 1, "failed": 0} and committed == ["counted"]

    run(tmp_path, scenario)


def test_a_group_whose_operations_all_succeed_runs_once(tmp_path: Path) -> None:
    async def scenario(db: Database, sync: GatedSync) -> None:
        runs: list[int] = []

        def counted(n: int) -> Callable[[Transaction], int]:
            def op(tx: Transaction) -> int:
                runs.append(n)
                return insert(n)(tx)
            return op

        assert await one_group(db, [counted(1), counted(2), counted(3)]) == [1, 2, 3]
        assert runs == [1, 2, 3] and committed_items(sync.path) == {1, 2, 3}

    run(tmp_path, scenario)


def test_a_read_of_a_commit_whose_sync_fails_is_not_acknowledged(tmp_path: Path) -> None:
    async def scenario(db: Database, sync: GatedSync) -> None:
        sync.go.clear()
        sync.failure = OSError(5, "Input/output error")
        assert await db.run(insert(1)) == 1
        await until(sync.started.is_set)
        assert await db.run(count) == 1  # sees the row whose fsync is about to fail
        durable = asyncio.ensure_future(db.durable())
        await db.run(count)  # a round trip through the database thread: the loop has run all it was given
        assert not durable.done()
        sync.go.set()
        with pytest.raises(errors.ServiceUnavailable, match="Restart the server"):
            await asyncio.wait_for(durable, WAIT)

    run(tmp_path, scenario)


def test_a_writing_group_is_counted_before_its_results_go_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Else an answer could pass `durable` before its own commit is counted, and leave unsynced."""
    counted_at_delivery: list[int] = []
    deliver = database.call_on_loops

    async def scenario(db: Database, sync: GatedSync) -> None:
        def spy(calls: Any) -> None:
            counted_at_delivery.append(db._groups_written)
            deliver(calls)

        monkeypatch.setattr(database, "call_on_loops", spy)
        assert await db.run(insert(1)) == 1
        assert counted_at_delivery[0] == 1

    run(tmp_path, scenario)


def test_an_unforeseen_failure_inside_a_group_answers_503_and_the_thread_serves_the_next_group(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deliver = database.call_on_loops
    failures = [RuntimeError("a bug while handing out results")]

    def fails_once(calls: Any) -> None:
        if failures:
            raise failures.pop()
        deliver(calls)

    async def scenario(db: Database, sync: GatedSync) -> None:
        monkeypatch.setattr(database, "call_on_loops", fails_once)
        with pytest.raises(errors.ServiceUnavailable):
            await asyncio.wait_for(db.run(count), WAIT)
        assert await asyncio.wait_for(db.run(insert(7)), WAIT) == 7
        assert db.health.healthy

    run(tmp_path, scenario)


def autocheckpoint(tx: Transaction) -> int:
    return tx.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]


def test_the_connections_own_checkpoints_can_be_left_to_another_process_and_stay_so_after_a_write_back(
        tmp_path: Path) -> None:
    held: list[str] = []

    @contextlib.contextmanager
    def guard() -> Iterator[None]:  # what replication holds: nothing else may touch the file meanwhile
        held.append("entered")
        yield
        held.append("left")

    async def main() -> None:
        path = tmp_path / "db.sqlite"
        conn, lock = open_file(str(path), prepare)
        db = Database(conn, str(path), lock, sync_log=lambda fd: None)  # GatedSync's reads would recreate the file
        try:
            assert await db.run(autocheckpoint) == database.AUTOCHECKPOINT_PAGES
            await db.set_autocheckpoint(0)
            assert await db.run(autocheckpoint) == 0
            db.write_back_guard = guard
            await db.run(insert(1))
            os.remove(path)
            await until(lambda: path.exists() and held == ["entered", "left"])
            assert await db.run(autocheckpoint) == 0, "the connection opened after the write-back checkpoints again"
            assert await db.run(count) == 1
            await db.set_autocheckpoint(database.AUTOCHECKPOINT_PAGES)
            assert await db.run(autocheckpoint) == database.AUTOCHECKPOINT_PAGES
        finally:
            await db.close()

    asyncio.run(main())
