"""Start-up refusals: a database that cannot be served makes `serve` exit 2 at once with
one stderr line that names the file and says what to do, prints no READY, and leaves
the file as it was: read-only, already served by another queueserver,
corrupted, from a newer queueserver, or deleted with its write-ahead log left behind.
"""

from __future__ import annotations

import os
import random
import sqlite3
from pathlib import Path

import pytest
from support.faults import (
    Tally,
    new_server,
    refuse_to_serve,
    restart_and_check,
    start_again_and_check,
)
from support.server import run_queueserver

pytestmark = pytest.mark.server_process


@pytest.mark.parametrize("how", ["stopped", "killed"])
def test_a_read_only_database_refuses_to_start_and_serves_again_once_writable(servers, mounts, sqs_client, how):
    point = mounts.tmpfs("ro", "16m")
    db = point / "queue.db"
    server, client, url = new_server(servers, db, sqs_client)
    tally = Tally()
    tally.send_acknowledged(client, url, 20)
    if how == "stopped":
        assert server.stop() == 0
    else:
        server.kill()  # leaves -wal and -shm behind
    mounts.remount(point, "ro")

    result = refuse_to_serve(db)
    line = result.stderr.strip()
    assert "read-only" in line, line
    assert "writable" in line, f"the message does not say what to do: {line}"

    mounts.remount(point, "rw")
    start_again_and_check(servers, db, sqs_client, tally)


def test_a_second_server_on_the_same_file_refuses_to_start(servers, tmp_path, sqs_client):
    db = tmp_path / "queue.db"
    server, client, url = new_server(servers, db, sqs_client)
    tally = Tally()
    tally.send_acknowledged(client, url, 10)

    result = refuse_to_serve(db)
    assert "another queueserver is already serving" in result.stderr, result.stderr
    assert "stop it first" in result.stderr, result.stderr

    for _ in range(10):  # the first server did not notice
        assert tally.send(client, url) is None
    restart_and_check(servers, server, db, sqs_client, tally)


# --- a corrupted or unknown file at start-up ---------------------------------------------


def _page_size(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("PRAGMA page_size").fetchone()[0])
    finally:
        conn.close()


def _corrupt(db: Path, how: str) -> None:
    rng = random.Random(5)
    if how == "random bytes":
        db.write_bytes(rng.randbytes(64 * 1024))
        return
    page = _page_size(db)
    with open(db, "r+b") as f:
        if how == "header page overwritten":
            f.write(rng.randbytes(page))
        elif how == "schema page garbled":  # the "SQLite format 3" header stays, the schema b-tree goes
            f.seek(100)
            f.write(rng.randbytes(page - 100))
        else:
            raise AssertionError(how)


@pytest.mark.parametrize("how", ["random bytes", "header page overwritten", "schema page garbled"])
def test_a_corrupted_database_file_refuses_to_start_and_says_what_to_do(servers, tmp_path, sqs_client, how):
    db = tmp_path / "queue.db"
    server, client, url = new_server(servers, db, sqs_client)
    for i in range(20):
        client.send_message(QueueUrl=url, MessageBody=f"m{i}")
    assert server.stop() == 0  # a clean stop: one self-contained file
    assert not Path(f"{db}-wal").exists()
    _corrupt(db, how)
    before = db.read_bytes()

    line = refuse_to_serve(db).stderr.strip()
    assert "corrupt" in line, line
    assert "queueserver backup" in line, f"the message does not say what to do: {line}"
    assert db.read_bytes() == before, "a refused start must leave the evidence untouched"

    check = run_queueserver("check", "--db", str(db))
    assert check.returncode != 0, check.stdout
    assert "integrity: ok" not in check.stdout


def test_a_database_from_a_newer_queueserver_refuses_to_start(servers, tmp_path, sqs_client):
    db = tmp_path / "queue.db"
    server, client, url = new_server(servers, db, sqs_client)
    client.send_message(QueueUrl=url, MessageBody="from the future")
    assert server.stop() == 0
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 999")
    conn.close()

    line = refuse_to_serve(db).stderr.strip()
    assert "999" in line and "newer" in line, line
    assert "upgrade queueserver" in line, line


# --- a deleted database file -------------------------------------------------------


def test_a_start_that_finds_a_write_ahead_log_but_no_database_file_refuses_instead_of_starting_empty(
        servers, tmp_path, sqs_client):
    """The file was deleted and the server died before writing it back: its last commits
    are in the -wal, the rest is gone. Starting an empty store over them would discard
    the evidence and hide the loss; the server must refuse and say so."""
    db = tmp_path / "queue.db"
    server, client, url = new_server(servers, db, sqs_client)
    for i in range(20):
        client.send_message(QueueUrl=url, MessageBody=f"m{i}")
    server.kill()
    wal = Path(f"{db}-wal")
    assert wal.exists()
    os.remove(db)
    wal_bytes = wal.read_bytes()

    line = refuse_to_serve(db).stderr.strip()
    assert "-wal" in line or "deleted" in line or "missing" in line, line
    assert wal.exists() and wal.read_bytes() == wal_bytes, "the write-ahead log must be left as it was"
    assert not db.exists(), "no empty database may be created in its place"
