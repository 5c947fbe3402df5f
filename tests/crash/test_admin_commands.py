"""The admin commands: `queueserver backup DEST` (online, safe under load) and
`queueserver check` (integrity, schema version, messages per queue)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.faults import QUEUE, Tally, drain, new_server, wait_for_log
from support.server import run_queueserver, wait_for

pytestmark = pytest.mark.server_process


def _check(db: Path) -> tuple[str, dict[str, int]]:
    result = run_queueserver("check", "--db", str(db))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "integrity: ok", result.stdout
    assert lines[1].startswith("schema version: "), result.stdout
    counts = {}
    for line in lines[3:]:
        name, rest = line.strip().split(": ", 1)
        counts[name.split()[-1]] = int(rest.split()[0])
    return result.stdout, counts


def test_a_backup_taken_under_load_checks_ok_and_serves_everything_acknowledged_before_it(
        servers, tmp_path, sqs_client):
    db = tmp_path / "live" / "queue.db"
    db.parent.mkdir()
    server, _, url = new_server(servers, db, sqs_client)
    tally = Tally()
    sent_at: dict[str, float] = {}  # body -> when its acknowledgement arrived
    delete_sent_at: dict[str, float] = {}  # body -> when its delete left
    deleted_at: dict[str, float] = {}  # body -> when its delete was acknowledged
    stop = threading.Event()
    failures: list[BaseException] = []

    def produce() -> None:
        c = sqs_client(server.endpoint)
        while not stop.is_set():
            entries = [{"Id": str(i), "MessageBody": tally.body(500)} for i in range(10)]
            resp = c.send_message_batch(QueueUrl=url, Entries=entries)
            now = time.time()
            assert not resp.get("Failed"), resp["Failed"]
            for ok in resp["Successful"]:
                body = entries[int(ok["Id"])]["MessageBody"]
                tally.acked[body] = ok["MessageId"]
                sent_at[body] = now

    def consume() -> None:
        c = sqs_client(server.endpoint)
        while not stop.is_set():
            for m in c.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600,
                                       WaitTimeSeconds=1).get("Messages", []):
                if int(m["Body"][4:10]) % 3 == 0:  # delete a third, leave the rest in flight
                    delete_sent_at[m["Body"]] = time.time()
                    c.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
                    deleted_at[m["Body"]] = time.time()

    def guard(fn: Any) -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001
            failures.append(exc)

    threads = [threading.Thread(target=guard, args=(fn,), daemon=True) for fn in (produce, produce, consume)]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: failures or (len(sent_at) > 100 and len(deleted_at) > 10), "load before the backup")
        live_report, _ = _check(db)  # check works beside a running server
        backup = tmp_path / "copy" / "backup.db"
        backup.parent.mkdir()
        started = time.time()
        result = run_queueserver("backup", str(backup), "--db", str(db))
        finished = time.time()
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.startswith(f"backed up {db} to {backup}"), result.stdout
        # load continues after the backup too
        wait_for(lambda: failures or any(t > finished for t in list(sent_at.values())), "a send after the backup")
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not failures, failures
    assert "faults" in live_report
    assert sorted(p.name for p in backup.parent.iterdir()) == ["backup.db"], "a lone file: no -wal, no .partial"
    acked_before = {b for b, t in sent_at.items() if t < started}
    assert len(acked_before) > 100, "too little load before the backup"
    assert any(t > finished for t in sent_at.values()), "the load did not run through the backup"

    _, counts = _check(backup)
    restored = servers.start(backup, "--test-clock")
    drained = drain(restored, sqs_client(restored.endpoint))
    assert counts[QUEUE] == len(drained), (counts, len(drained))

    missing = [b[:20] for b in acked_before if b not in drained and delete_sent_at.get(b, finished + 1) > finished]
    assert not missing, f"acknowledged before the backup started but not in it: {missing[:10]}"
    back = [b[:20] for b, t in deleted_at.items() if t < started and b in drained]
    assert not back, f"deleted before the backup started, yet in it: {back[:10]}"
    extra = [b[:20] for b in drained if b not in tally.acked]  # every send was answered: all are known
    assert not extra, f"messages in the backup that nobody sent: {extra[:10]}"
    assert restored.stop() == 0
    assert server.stop() == 0


def test_backup_and_check_explain_what_went_wrong(tmp_path):
    missing = tmp_path / "nothing-here.db"
    result = run_queueserver("check", "--db", str(missing))
    assert result.returncode == 2, result
    assert str(missing) in result.stderr and result.stderr.startswith("queueserver: "), result.stderr

    result = run_queueserver("backup", str(tmp_path / "b.db"), "--db", str(missing))
    assert result.returncode == 2, result
    assert str(missing) in result.stderr, result.stderr

    db = tmp_path / "queue.db"
    sqlite3.connect(db).close()
    result = run_queueserver("backup", str(tmp_path / "no" / "such" / "dir" / "b.db"), "--db", str(db))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "backup failed" in result.stderr, result.stderr


@contextlib.contextmanager
def _umask(mask: int) -> Iterator[None]:
    """Children started inside inherit MASK (a process's umask is not the server's to trust)."""
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def _mode(path: Path) -> str:
    return oct(stat.S_IMODE(path.stat().st_mode))


def test_the_database_its_log_its_shared_memory_and_a_backup_are_private_whatever_the_umask(
        servers, tmp_path, sqs_client):
    db = tmp_path / "queue.db"
    with _umask(0):
        server, client, url = new_server(servers, db, sqs_client)
        Tally().send_acknowledged(client, url, 5)
        backup = tmp_path / "backup.db"
        result = run_queueserver("backup", str(backup), "--db", str(db))
        assert result.returncode == 0, result.stdout + result.stderr
        files = [db, Path(f"{db}-wal"), Path(f"{db}-shm"), backup]
        assert {f.name: _mode(f) for f in files} == {f.name: "0o600" for f in files}
        (tmp_path / "witness").touch()  # what the umask alone gives a new file: readable and writable by all
        assert _mode(tmp_path / "witness") == "0o666"

        os.remove(db)  # written back from the open connection: private too
        wait_for_log(server, "is restored")
        assert _mode(db) == "0o600"
    assert server.stop() == 0
