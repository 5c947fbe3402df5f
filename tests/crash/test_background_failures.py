"""Background work outlives storage failures.

The retention sweeper is what frees space after a full disk, so it must survive the very
failures it helps recover from: storage failures reach it as ServiceUnavailable. Here the
database is held by another process long enough for a sweep to fail, then released: the
sweeper logs the failure once and, on its next round, deletes the expired messages.
"""

from __future__ import annotations

import sqlite3

import pytest
from support.faults import wait_for_log
from support.server import ClockControl, advance_clock

pytestmark = pytest.mark.server_process


def stored_messages(db) -> int:
    """Rows in the file, expired or not (a receive hides expired ones; only the sweeper deletes them)."""
    reader = sqlite3.connect(db)
    try:
        return reader.execute("SELECT count(*) FROM messages").fetchone()[0]
    finally:
        reader.close()


def test_the_retention_sweeper_survives_a_storage_failure_and_deletes_expired_messages_once_it_clears(
        servers, tmp_path, sqs_client):
    db = tmp_path / "queue.db"
    server = servers.start(db, "--test-clock")
    client = sqs_client(server.endpoint)
    url = client.create_queue(QueueName="swept", Attributes={"MessageRetentionPeriod": "60"})["QueueUrl"]
    for i in range(5):
        client.send_message(QueueUrl=url, MessageBody=f"expires-{i}")
    assert stored_messages(db) == 5

    intruder = sqlite3.connect(db, timeout=10, isolation_level=None)
    try:
        intruder.execute("BEGIN EXCLUSIVE")
        advance_clock(server.endpoint, 120)  # all five are past their retention now
        wait_for_log(server, "retention sweep failed", timeout=30)  # a sweep met the lock (5 s busy timeout)
    finally:
        intruder.execute("ROLLBACK")
        intruder.close()
    assert stored_messages(db) == 5

    wait_for_log(server, "retention sweep works again (5 expired messages removed)", timeout=30)
    assert stored_messages(db) == 0
    log = server.stderr_text()
    assert log.count("retention sweep failed") == 1, log
    assert "ended while the server runs" not in log, log
    client.send_message(QueueUrl=url, MessageBody="after")
    assert server.stop() == 0


def test_the_test_clock_moves_while_the_database_is_locked_and_its_reading_is_saved_once_it_is_not(
        servers, tmp_path, sqs_client):
    """Tests of storage failures move the clock during them; a crash afterwards still resumes where it stood."""
    db = tmp_path / "queue.db"
    server = servers.start(db, "--test-clock")
    start = ClockControl(server.endpoint).now_ms()

    intruder = sqlite3.connect(db, timeout=10, isolation_level=None)
    try:
        intruder.execute("BEGIN EXCLUSIVE")
        assert advance_clock(server.endpoint, 120) == start + 120_000  # after the 5 s busy timeout: moved anyway
        wait_for_log(server, "the storage refused its reading")
    finally:
        intruder.execute("ROLLBACK")
        intruder.close()
    wait_for_log(server, "the test clock's reading is saved again", timeout=30)
    server.kill()

    again = servers.start(db, "--test-clock")
    assert ClockControl(again.endpoint).now_ms() == start + 120_000
    assert again.stop() == 0
