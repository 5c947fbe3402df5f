"""The database is locked by the file itself: a second server on the same file by a
hard link, a symlink or another spelling of its path is refused with one line, while
`queueserver backup` and `check` still work against the running server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.server import run_queueserver, try_serve

pytestmark = pytest.mark.server_process


def _second_path(db: Path, how: str, tmp_path: Path) -> Path:
    if how == "hard link":
        os.link(db, tmp_path / "linked.db")
        return tmp_path / "linked.db"
    if how == "symlink":
        os.symlink(db, tmp_path / "symlinked.db")
        return tmp_path / "symlinked.db"
    (tmp_path / "sub").mkdir()
    return tmp_path / "sub" / ".." / db.name  # the same file, spelled differently


@pytest.mark.parametrize("how", ["hard link", "symlink", "another spelling"])
def test_a_second_server_on_the_same_file_by_another_path_is_refused_in_one_line(server_factory, make_client,
                                                                                 tmp_path, how):
    db = tmp_path / "queue.db"
    first = server_factory(db)
    sqs = make_client(first.endpoint)
    url = sqs.create_queue(QueueName="kept")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="one")

    refusal = try_serve(_second_path(db, how, tmp_path))
    assert refusal.returncode == 2, refusal
    assert "READY" not in refusal.stdout
    lines = refusal.stderr.strip().splitlines()
    assert len(lines) == 1 and "another queueserver is already serving" in lines[0], refusal.stderr
    assert "Traceback" not in refusal.stderr

    sqs.send_message(QueueUrl=url, MessageBody="two")  # the first server did not notice
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])[
        "Attributes"]["ApproximateNumberOfMessages"] == "2"
    check = run_queueserver("check", "--db", str(db))
    assert check.returncode == 0 and "integrity: ok" in check.stdout, check.stdout + check.stderr
    backup = run_queueserver("backup", "--db", str(db), str(tmp_path / "copy.db"))
    assert backup.returncode == 0, backup.stderr
    assert not Path(f"{db}.lock").exists(), "the lock is the file itself, not a file beside it"


def test_a_server_started_through_a_symlink_serves_and_restarts_through_it(server_factory, make_client, tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "queue.db"
    link = tmp_path / "queue.db"
    os.symlink(target, link)
    server = server_factory(link)
    sqs = make_client(server.endpoint)
    url = sqs.create_queue(QueueName="through-a-link")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="kept")
    server.stop()
    assert "Traceback" not in server.stderr_text()

    again = server_factory(link)
    sqs = make_client(again.endpoint)
    assert sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "kept"
    assert not (tmp_path / "queue.db-wal").exists(), "the log belongs beside the real file"
