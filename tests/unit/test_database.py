"""The database thread and its syncer, on a real SQLite file with an injected log sync.

What the design promises: nothing is answered before an fsync of the write-ahead log that
began after its COMMIT; the next group runs while that fsync is in flight; and after an
fsync fails nothing more is acknowledged.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest

from queueserver import errors
from queueserver.storage import database
from queueserver.storage.database import Database, Transaction, open_file

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


def test_a_write_is_answered_only_after_a_log_sync_that_began_after_its_commit(tmp_path: Path) -> None:
    async def scenario(db: Database, sync: GatedSync) -> None:
        sync.go.clear()
        answer = asyncio.ensure_future(db.run(insert(1)))
        await until(sync.started.is_set)
        assert sync.seen_at_start == [{1}], "the sync began before the commit it must cover"
        await asyncio.sleep(0.05)
        assert not answer.done(), "answered while the log sync was still running"
        sync.go.set()
        assert await answer == 1

    run(tmp_path, scenario)


def test_the_next_group_commits_while_the_previous_sync_is_in_flight_and_one_sync_covers_both(
        tmp_path: Path) -> None:
    async def scenario(db: Database, sync: GatedSync) -> None:
        sync.go.clear()
        first = asyncio.ensure_future(db.run(insert(1)))
        await until(sync.started.is_set)
        second = asyncio.ensure_future(db.run(insert(2)))
        third = asyncio.ensure_future(db.run(insert(3)))
        await until(lambda: committed_items(sync.path) == {1, 2, 3})  # the database thread did not wait
        assert not (first.done() or second.done() or third.done())
        sync.go.set()
        assert await asyncio.gather(first, second, third) == [1, 2, 3]
        assert sync.seen_at_start == [{1}, {1, 2, 3}], "groups committed during a sync share the next one"

    run(tmp_path, scenario)


def test_a_group_that_changed_nothing_needs_no_sync(tmp_path: Path) -> None:
    async def scenario(db: Database, sync: GatedSync) -> None:
        assert await db.run(insert(1)) == 1
        assert len(sync.seen_at_start) == 1
        assert await db.run(count) == 1
        assert len(sync.seen_at_start) == 1, "a read synced the log"

    run(tmp_path, scenario)


def test_after_a_failed_log_sync_nothing_more_is_acknowledged(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario(db: Database, sync: GatedSync) -> None:
        assert await db.run(insert(1)) == 1
        sync.failure = OSError(5, "Input/output error")
        with caplog.at_level(logging.CRITICAL, logger="queueserver.storage.database"):
            with pytest.raises(errors.ServiceUnavailable, match="Restart the server"):
                await db.run(insert(2))
        assert "could not be synced" in caplog.text
        sync.failure = None  # the next fsync would claim success: it must not be trusted
        for op in (insert(3), count):
            with pytest.raises(errors.ServiceUnavailable, match="Restart the server"):
                await db.run(op)
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


def test_commit_hooks_run_on_the_loop_before_the_sync_and_not_for_a_failed_operation(tmp_path: Path) -> None:
    async def scenario(db: Database, sync: GatedSync) -> None:
        committed = asyncio.Event()
        called: list[str] = []

        def send(tx: Transaction) -> int:
            tx.conn.execute("INSERT INTO items (n) VALUES (1)")
            tx.on_commit(lambda: (called.append("send"), committed.set()))
            return 1

        def failing(tx: Transaction) -> None:
            tx.on_commit(lambda: called.append("failing"))
            raise errors.InvalidParameterValue("no")

        sync.go.clear()
        answer = asyncio.ensure_future(db.run(send))
        refused = asyncio.ensure_future(db.run(failing))
        await asyncio.wait_for(committed.wait(), WAIT)  # while the sync is still held back
        assert not answer.done()
        sync.go.set()
        assert await answer == 1
        with pytest.raises(errors.InvalidParameterValue):
            await refused
        assert called == ["send"]

    run(tmp_path, scenario)


def test_a_read_that_ran_while_the_failing_sync_was_in_flight_is_refused_too(tmp_path: Path) -> None:
    async def scenario(db: Database, sync: GatedSync) -> None:
        sync.go.clear()
        sync.failure = OSError(5, "Input/output error")
        write = asyncio.ensure_future(db.run(insert(1)))
        await until(sync.started.is_set)
        read = asyncio.ensure_future(db.run(count))  # sees the row whose fsync is about to fail
        await until(lambda: db._committed.qsize() == 1)  # committed, queued behind the sync
        sync.go.set()
        for answer in (write, read):
            with pytest.raises(errors.ServiceUnavailable, match="Restart the server"):
                await answer

    run(tmp_path, scenario)
