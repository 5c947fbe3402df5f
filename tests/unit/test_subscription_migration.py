"""Migrations 0003, 0004 and 0006 (subscriptions) on a real SQLite file: forward from a version-2, -3 and -4
database with messages in it, the shared-body bookkeeping (0004: a count of deliveries in the body)
that the send, StartFrom=all and the trigger do, and the fan-out log (0006) that subscriptions take
their deliveries from, or skip."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from queueserver.models import NewMessage
from queueserver.storage import message_store, subscriptions
from queueserver.storage.migrations import available_migrations, migrate, schema_version, split_statements


LATEST = available_migrations()[-1][0]


def _at_version_2(path: Path) -> sqlite3.Connection:
    return _at_version(path, 2)


def _at_version(path: Path, wanted: int) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    for version, _, script in available_migrations()[:wanted]:
        for statement in split_statements(script):
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {version}")
    return conn


def _count(conn: sqlite3.Connection, table: str) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def test_a_version_2_database_keeps_its_messages_and_their_bodies_still_go_with_them(tmp_path: Path) -> None:
    conn = _at_version_2(tmp_path / "q.db")
    old = NewMessage(body="old", md5_of_body="m", delay_seconds=0)
    message_store.insert_messages(conn, 1, [(1, "id-1", old), (2, "id-2", old)], 1_000, "s")
    assert migrate(conn) == schema_version(conn) == LATEST
    assert conn.execute("SELECT body_id FROM messages ORDER BY id").fetchall() == [(None,), (None,)]
    conn.execute("DELETE FROM messages WHERE id = 1")
    assert conn.execute("SELECT id FROM message_bodies").fetchall() == [(2,)]
    conn.close()


def test_a_fanned_out_body_is_stored_once_and_goes_with_its_last_delivery(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "q.db", isolation_level=None)
    migrate(conn)
    message = NewMessage(body="shared", md5_of_body="m", delay_seconds=0)
    # queue 1 with subscriptions 2 and 3: the queue's row 10, deliveries 11 and 12 taken from the log
    _subscribe(conn, 1, 2, 3)
    subscriptions.insert_fanned_out(conn, 1, [(10, "id-10", message)], 3, 1_000, "s")
    assert _count(conn, "messages") == 1 and _count(conn, "fanout_log") == 1
    assert subscriptions.deliver(conn, 2, 11) == subscriptions.deliver(conn, 3, 12) == 1
    assert subscriptions.deliver(conn, 2, 13) == 0  # taken once
    assert _count(conn, "messages") == 3
    assert conn.execute("SELECT id FROM message_bodies").fetchall() == [(10,)]
    assert conn.execute("SELECT body_id FROM messages").fetchall() == [(10,)] * 3
    for row_id, bodies_left in ((10, 1), (12, 1), (11, 0)):
        conn.execute("DELETE FROM messages WHERE id = ?", (row_id,))
        assert _count(conn, "message_bodies") == bodies_left
    conn.close()


def test_starting_from_all_adds_a_delivery_of_every_held_message_in_the_queues_order(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "q.db", isolation_level=None)
    migrate(conn)
    message = NewMessage(body="held", md5_of_body="m", delay_seconds=0)
    message_store.insert_messages(conn, 1, [(5, "id-5", message), (7, "id-7", message)], 1_000, "s")
    assert subscriptions.row_id_span(conn, 1) == (5, 7)
    assert subscriptions.copy_held_messages(conn, 1, 2, 100 - 5, 2_000) == 2
    assert conn.execute("SELECT id, queue_id, body_id FROM messages ORDER BY id").fetchall() == [
        (5, 1, 5), (7, 1, 7), (100, 2, 5), (102, 2, 7)]
    assert conn.execute("SELECT id FROM message_bodies ORDER BY id").fetchall() == [(5,), (7,)]
    conn.execute("DELETE FROM messages WHERE queue_id = 1")
    assert _count(conn, "message_bodies") == 2  # the subscription still holds them
    conn.execute("DELETE FROM messages")
    assert _count(conn, "message_bodies") == 0
    conn.close()


def _subscribe(conn: sqlite3.Connection, queue_id: int, *subscription_ids: int) -> None:
    for subscription_id in subscription_ids:
        subscriptions.add(conn, subscription_id, queue_id)


def _deliveries(conn: sqlite3.Connection) -> list[tuple[int, int | None]]:
    return conn.execute("SELECT id, deliveries FROM message_bodies ORDER BY id").fetchall()


def test_version_4_counts_each_shared_bodys_deliveries_and_drops_the_body_index(tmp_path: Path) -> None:
    conn = _at_version(tmp_path / "q.db", 3)
    message = NewMessage(body="shared", md5_of_body="m", delay_seconds=0)
    message_store.insert_messages(conn, 1, [(5, "id-5", message)], 1_000, "s")  # a body of its own
    # as version 3 fanned out: every delivery (the queue's own row too) with body_id, the body once
    conn.executemany("INSERT INTO messages (id, queue_id, visible_at_ms, enqueued_at_ms, body_id) VALUES (?, ?, 0, 0, ?)",
                     [(10, 1, 10), (11, 2, 10), (12, 3, 10), (20, 1, 20), (21, 2, 20)])
    message_store.insert_bodies(conn, [(10, "id-10", message), (20, "id-20", message)], 1_000, "s")
    assert migrate(conn) == schema_version(conn) == LATEST
    assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'messages_by_body'").fetchone() is None
    assert _deliveries(conn) == [(5, None), (10, 3), (20, 2)]
    for row_id, bodies_left in ((11, 3), (10, 3), (12, 2)):  # the queue's row neither first nor last
        conn.execute("DELETE FROM messages WHERE id = ?", (row_id,))
        assert _count(conn, "message_bodies") == bodies_left
    for row_id, bodies_left in ((21, 2), (20, 1), (5, 0)):  # the queue's row last
        conn.execute("DELETE FROM messages WHERE id = ?", (row_id,))
        assert _count(conn, "message_bodies") == bodies_left
    conn.close()


def test_a_fan_out_stores_its_count_of_deliveries_in_the_bodys_own_insert(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "q.db", isolation_level=None)
    migrate(conn)
    message = NewMessage(body="shared", md5_of_body="m", delay_seconds=0)
    message_store.insert_messages(conn, 1, [(1, "id-1", message)], 1_000, "s")
    rows = [(10, "id-10", message), (11, "id-11", message)]
    subscriptions.insert_fanned_out(conn, 1, rows, 3, 1_000, "s")
    assert _deliveries(conn) == [(1, None), (10, 3), (11, 3)]
    conn.close()


def test_starting_from_all_counts_the_new_delivery_on_shared_and_unshared_bodies_alike(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "q.db", isolation_level=None)
    migrate(conn)
    message = NewMessage(body="held", md5_of_body="m", delay_seconds=0)
    message_store.insert_messages(conn, 1, [(5, "id-5", message)], 1_000, "s")
    _subscribe(conn, 1, 2)
    subscriptions.insert_fanned_out(conn, 1, [(7, "id-7", message)], 2, 1_000, "s")
    assert subscriptions.deliver(conn, 2, 8) == 1
    subscriptions.copy_held_messages(conn, 1, 3, 100 - 5, 2_000)
    assert _deliveries(conn) == [(5, 2), (7, 3)]
    for queue_id, bodies_left in ((3, 2), (2, 2), (1, 0)):
        conn.execute("DELETE FROM messages WHERE queue_id = ?", (queue_id,))
        assert _count(conn, "message_bodies") == bodies_left
    conn.close()


def test_the_count_of_deliveries_may_be_null_so_that_deletes_without_subscriptions_open_no_statement_journal(
        tmp_path: Path) -> None:
    # An UPDATE in a trigger on messages that may fail NOT NULL makes SQLite open a statement journal for
    # every DELETE on messages, fired or not (docs/benchmarks.md: 3.5 -> 11.5 µs a DELETE).
    conn = sqlite3.connect(tmp_path / "q.db", isolation_level=None)
    migrate(conn)
    columns = {row[1]: row for row in conn.execute("PRAGMA table_info(message_bodies)")}
    assert columns["deliveries"][3] == 0  # notnull
    conn.close()


def test_a_subscription_takes_only_what_was_logged_after_it_and_in_the_logs_order(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "q.db", isolation_level=None)
    migrate(conn)
    message = NewMessage(body="m", md5_of_body="m", delay_seconds=0)
    _subscribe(conn, 1, 2)
    subscriptions.insert_fanned_out(conn, 1, [(10, "id-10", message), (11, "id-11", message)], 2, 1_000, "s")
    _subscribe(conn, 1, 3)  # later: takes nothing sent before it
    subscriptions.insert_fanned_out(conn, 1, [(20, "id-20", message)], 3, 2_000, "s")
    assert subscriptions.deliver(conn, 2, 100) == 3
    assert _count(conn, "fanout_log") == 1  # 3 has yet to take the last line
    assert subscriptions.deliver(conn, 3, 200) == 1
    assert conn.execute("SELECT id, queue_id, body_id, enqueued_at_ms FROM messages WHERE queue_id > 1"
                        " ORDER BY id").fetchall() == [
        (100, 2, 10, 1_000), (101, 2, 11, 1_000), (102, 2, 20, 2_000), (200, 3, 20, 2_000)]
    assert _deliveries(conn) == [(10, 2), (11, 2), (20, 3)]
    assert _count(conn, "fanout_log") == 0  # every subscription took every line


def test_skipping_what_a_subscription_has_not_taken_counts_the_bodies_down_and_the_last_takes_them(
        tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "q.db", isolation_level=None)
    migrate(conn)
    message = NewMessage(body="m", md5_of_body="m", delay_seconds=0)
    _subscribe(conn, 1, 2, 3)
    subscriptions.insert_fanned_out(conn, 1, [(10, "id-10", message), (11, "id-11", message)], 3, 1_000, "s")
    assert subscriptions.deliver(conn, 3, 100) == 2
    conn.execute("DELETE FROM messages WHERE queue_id = 1")
    subscriptions.skip(conn, 2)  # a purge: 2 never takes them
    assert _deliveries(conn) == [(10, 1), (11, 1)]  # 3's deliveries still hold them
    assert subscriptions.deliver(conn, 2, 200) == 0
    assert _count(conn, "fanout_log") == 0
    conn.execute("DELETE FROM messages WHERE id = 100")
    assert _deliveries(conn) == [(11, 1)]
    subscriptions.insert_fanned_out(conn, 1, [(20, "id-20", message)], 3, 2_000, "s")
    conn.execute("DELETE FROM messages WHERE queue_id = 1")
    for subscription_id in (2, 3):  # the queue deleted with both, neither having taken it
        subscriptions.skip(conn, subscription_id)
    assert _deliveries(conn) == [(11, 1)]
    conn.close()


def test_version_6_gives_an_older_databases_subscriptions_a_place_in_the_log_and_keeps_their_deliveries(
        tmp_path: Path) -> None:
    conn = _at_version(tmp_path / "q.db", 4)
    for queue_id, region, name in ((1, "r", "q"), (2, "r", "q~a"), (3, "r", "other"), (4, "x", "q~b"),
                                   (5, "x", "q")):
        conn.execute("INSERT INTO queues (id, region, account, name, fifo, attributes, tags, created_at_ms,"
                     " modified_at_ms) VALUES (?, ?, 'a', ?, 0, '{}', '{}', 0, 0)", (queue_id, region, name))
    message = NewMessage(body="m", md5_of_body="m", delay_seconds=0)
    conn.executemany("INSERT INTO messages (id, queue_id, visible_at_ms, enqueued_at_ms, body_id) VALUES (?, ?, 0, 0, 7)",
                     [(7, 1), (8, 2)])
    message_store.insert_bodies(conn, [(7, "id-7", message)], 0, "s", deliveries=2)
    assert migrate(conn) == schema_version(conn) == len(available_migrations())
    assert conn.execute("SELECT id, queue_id, delivered_up_to FROM subscriptions ORDER BY id").fetchall() == [
        (2, 1, 0), (4, 5, 0)]  # each with the queue of its own region
    assert _count(conn, "fanout_log") == 0 and _count(conn, "messages") == 2
    subscriptions.insert_fanned_out(conn, 1, [(9, "id-9", message)], 2, 1_000, "s")
    assert subscriptions.deliver(conn, 2, 10) == 1 and subscriptions.deliver(conn, 4, 11) == 0
    conn.close()


def test_retention_skips_only_the_expired_lines_at_the_head_and_a_removed_subscription_frees_the_rest(
        tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "q.db", isolation_level=None)
    migrate(conn)
    message = NewMessage(body="m", md5_of_body="m", delay_seconds=0)
    _subscribe(conn, 1, 2, 3)
    for row_id, at in ((10, 1_000), (11, 2_000), (12, 3_000), (13, 1_500)):  # 13: a clock set back
        subscriptions.insert_fanned_out(conn, 1, [(row_id, f"id-{row_id}", message)], 3, at, "s")
    conn.execute("DELETE FROM messages WHERE queue_id = 1")
    subscriptions.skip(conn, 2, cutoff_ms=2_000)
    assert _deliveries(conn) == [(10, 1), (11, 1), (12, 2), (13, 2)]  # 13 waits behind 12
    assert subscriptions.deliver(conn, 2, 100) == 2
    assert _count(conn, "fanout_log") == 4  # 3 has taken nothing
    subscriptions.skip(conn, 3)
    subscriptions.remove(conn, 3)
    assert _deliveries(conn) == [(12, 1), (13, 1)] and _count(conn, "fanout_log") == 0
    subscriptions.remove(conn, 2)
    assert _count(conn, "subscriptions") == 0
    conn.close()
