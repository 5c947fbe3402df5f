"""Migrations 0007 (queue identity) and 0008 (redelivery order) on a real SQLite file: forward from a
version-4 database with queues, messages and move tasks in it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from queueserver.models import NewMessage
from queueserver.storage import claims, message_store, queue_store
from queueserver.storage.migrations import available_migrations, migrate, schema_version, split_statements
from queueserver.storage.rows import ClaimedRow


def _at_version_4(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    for version, _, script in available_migrations()[:4]:
        for statement in split_statements(script):
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {version}")
    return conn


def _old_queue(conn: sqlite3.Connection, queue_id: int, name: str, attributes: str = "{}") -> None:
    conn.execute("INSERT INTO queues VALUES (?, 'us-east-1', '000000000000', ?, 0, ?, '{}', 1, 2)",
                 (queue_id, name, attributes))


def _task(conn: sqlite3.Connection, handle: str, source_queue_id: int, name: str) -> None:
    conn.execute("INSERT INTO move_tasks (handle, source_queue_id, source_arn, status, last_row_id, to_move,"
                 " started_at_ms) VALUES (?, ?, ?, 'RUNNING', 0, 0, 0)",
                 (handle, source_queue_id, f"arn:aws:sqs:us-east-1:000000000000:{name}"))


def test_queues_keep_their_rows_and_no_id_named_anywhere_is_given_again(tmp_path: Path) -> None:
    conn = _at_version_4(tmp_path / "q.db")
    _old_queue(conn, 2, "kept", '{"DeduplicationScope":"messageGroup","VisibilityTimeout":"9"}')
    _old_queue(conn, 3, "plain")
    _task(conn, "of-a-deleted-queue", 7, "gone")  # queue 7 was deleted with its task running
    _task(conn, "of-kept", 2, "kept")
    message_store.insert_messages(conn, 3, [(1, "id-1", NewMessage("b", "m", 0))], 1_000, "s")
    assert migrate(conn) == schema_version(conn) == available_migrations()[-1][0]

    queues = {q.name: q for q in queue_store.load_all(conn)}
    assert (queues["kept"].id, queues["kept"].attributes["VisibilityTimeout"]) == (2, "9")
    assert queues["kept"].deduplication_per_group and not queues["plain"].deduplication_per_group
    assert conn.execute("SELECT count(*) FROM messages WHERE queue_id = 3").fetchone()[0] == 1
    assert conn.execute("SELECT handle, status FROM move_tasks ORDER BY handle").fetchall() == [
        ("of-a-deleted-queue", "FAILED"), ("of-kept", "RUNNING")]
    created = queue_store.insert(conn, "us-east-1", "000000000000", "new", False, {}, {}, 3)
    assert created.id == 8, "after every id a queue, a task or a message has named"
    conn.execute("DELETE FROM queues WHERE id = 8")
    again = queue_store.insert(conn, "us-east-1", "000000000000", "new", False, {}, {}, 4)
    assert again.id == 9
    conn.close()


def test_the_deduplication_scope_is_the_one_a_queue_was_created_with(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "q.db", isolation_level=None)
    migrate(conn)
    created = queue_store.insert(conn, "r", "a", "q.fifo", True, {"DeduplicationScope": "queue"}, {}, 1)
    switched = queue_store.update(conn, created.id, {"DeduplicationScope": "messageGroup"}, {}, 2)
    assert switched.attributes["DeduplicationScope"] == "messageGroup"
    assert not switched.deduplication_per_group
    conn.close()


def test_a_claim_takes_messages_received_before_ahead_of_those_never_received(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "q.db", isolation_level=None)
    migrate(conn)
    message = NewMessage("b", "m", 0)
    message_store.insert_messages(conn, 1, [(1, "first", message)], 1_000, "s")
    [row] = claims.claim_standard(conn, claims.Claim(1, 1, 1_000, 4_000, 0, None))[0]
    assert ClaimedRow._make(row).row_id == 1
    message_store.insert_messages(conn, 1, [(2, "second", message)], 2_500, "s")  # visible before the first again
    rows, _ = claims.claim_standard(conn, claims.Claim(1, 1, 5_000, 9_000, 0, None))
    assert [ClaimedRow._make(r).row_id for r in rows] == [1]
    rows, _ = claims.claim_standard(conn, claims.Claim(1, 10, 5_000, 9_000, 0, None))
    assert [ClaimedRow._make(r).row_id for r in rows] == [2]
    conn.close()
