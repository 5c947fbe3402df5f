"""Storage faults while serving: each gets a clear answer, the server recovers when the
fault clears, and nothing acknowledged is lost.

* a full disk and a database locked by another process: 503 ServiceUnavailable to
  clients, one log line, writes succeed again once the condition clears;
* a filesystem that turns read-only under the server: 503s, and after the operator's
  repair (fsck, mount, restart) everything acknowledged is there. Linux refuses
  `mount -o remount,ro` while a process has files open for writing (EBUSY), so the way
  a running server meets a read-only filesystem is the kernel forcing it (ext4
  errors=remount-ro), and that is what the test does;
* a database file deleted while serving, busy or idle: written back, nothing lost.

Each test ends the same way: SIGKILL, restart on the same file, move the test clock
past every visibility timeout, drain, and compare with what was acknowledged.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import threading
from pathlib import Path

import pytest
from botocore.exceptions import ClientError
from support.faults import (
    QUEUE,
    Tally,
    assert_raw_503,
    assert_service_unavailable,
    new_server,
    restart_and_check,
    start_again_and_check,
    wait_for_log,
)
from support.server import ACCOUNT, integrity, sh, wait_for
from support.subscriptions import extension_call
from support.wire import send

pytestmark = pytest.mark.server_process


# --- a full disk ---------------------------------------------------------------------


def test_a_full_disk_answers_503_logs_it_and_recovers_when_space_is_freed(servers, mounts, sqs_client):
    point = mounts.tmpfs("full", "3m")
    db = point / "queue.db"
    server, client, url = new_server(servers, db, sqs_client)
    tally = Tally()

    # Four senders at once, so that requests share commit groups when the disk fills up.
    def fill() -> None:
        c = sqs_client(server.endpoint)
        refusals = 0
        for _ in range(1000):
            failure = tally.send(c, url, size=8192)
            if failure is not None:
                assert_service_unavailable(failure)
                refusals += 1
                if refusals == 3:
                    return

    threads = [threading.Thread(target=fill) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(tally.errors) == 12, f"every sender should have met a full disk: {len(tally.errors)} refusals"
    for failure in tally.errors:
        assert_service_unavailable(failure)
        assert "disk is full" in failure.response["Error"]["Message"], failure.response["Error"]
    assert len(tally.acked) > 20, "the disk filled up suspiciously early"
    log = wait_for_log(server, "storage unavailable: the disk is full")
    assert_raw_503(server, tally, size=8192)
    for _ in range(3):  # it keeps answering while the disk is full: a 503 each, never a wait for space
        assert_service_unavailable(tally.send(client, url, size=8192))
    log = server.stderr_text()
    assert log.count("storage unavailable") == 1, f"one line per outage, not one per request:\n{log}"

    mounts.remount(point, "size=64m")
    assert tally.send(client, url, size=8192) is None, "a send fails after space was freed"
    wait_for_log(server, "storage recovered")
    tally.send_acknowledged(client, url, 20, size=8192)
    restart_and_check(servers, server, db, sqs_client, tally)


# --- a filesystem that turns read-only ------------------------------------------


def test_a_filesystem_that_turns_read_only_under_the_server_gets_503s_and_loses_nothing(
        servers, mounts, sqs_client):
    point, image, device = mounts.ext4("ext4")
    trigger = Path(f"/sys/fs/ext4/{device}/trigger_fs_error")
    if not trigger.exists():
        pytest.skip(f"this kernel has no {trigger} to make ext4 fail")
    db = point / "queue.db"
    server, client, url = new_server(servers, db, sqs_client)
    tally = Tally()
    tally.send_acknowledged(client, url, 30, size=1000)
    received = client.receive_message(QueueUrl=url, MaxNumberOfMessages=5, VisibilityTimeout=600)["Messages"]
    deleted = set()
    for m in received[:3]:
        client.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        deleted.add(m["Body"])

    trigger.write_text("queueserver durability test\n")  # ext4 errors=remount-ro: the kernel forces read-only
    options = sh("findmnt", "-n", "-o", "OPTIONS", str(point)).strip().split(",")
    assert "ro" in options or "emergency_ro" in options, f"ext4 did not turn read-only: {options}"

    for _ in range(3):  # answered while the filesystem is read-only: a 503 each, never a wait
        assert_service_unavailable(tally.send(client, url, size=1000))
    wait_for_log(server, "storage unavailable:")
    assert_raw_503(server, tally, size=1000)

    # The operator's repair: stop the server, check the filesystem, mount it again.
    server.kill()
    mounts.umount(point)
    fsck = subprocess.run(["e2fsck", "-fy", str(image)], capture_output=True, text=True, timeout=60, check=False)
    assert fsck.returncode in (0, 1), fsck.stdout + fsck.stderr  # 1: errors corrected
    sh("mount", "-o", "loop,errors=remount-ro", str(image), str(point))
    mounts.points.append(point)
    assert integrity(db) == "ok"
    start_again_and_check(servers, db, sqs_client, tally, deleted)


# --- a deleted database file ---------------------------------------------------------


def test_a_database_file_deleted_while_serving_is_written_back_and_nothing_is_lost(
        servers, tmp_path, sqs_client):
    db = tmp_path / "queue.db"
    server, client, url = new_server(servers, db, sqs_client)
    tally = Tally()
    tally.send_acknowledged(client, url, 50, size=200)
    received = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600)["Messages"]
    deleted = set()
    for m in received[:5]:
        client.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        deleted.add(m["Body"])
    assert (tmp_path / "queue.db-wal").exists()

    os.remove(db)  # the file only; the -wal and -shm stay

    tally.send_acknowledged(client, url, 50, size=200, why="sends fail after the file was deleted")
    log = wait_for_log(server, "was deleted while the server ran")
    assert str(db) in log
    wait_for_log(server, "is restored")  # the write-back runs on the database thread, after that line
    assert db.exists(), "the database file was not written back"
    # the receipts handed out before the deletion still work
    client.delete_message(QueueUrl=url, ReceiptHandle=received[5]["ReceiptHandle"])
    deleted.add(received[5]["Body"])
    restart_and_check(servers, server, db, sqs_client, tally, deleted)


def test_a_database_file_deleted_while_the_server_is_idle_is_written_back_before_a_crash(
        servers, tmp_path, sqs_client):
    db = tmp_path / "queue.db"
    server, client, url = new_server(servers, db, sqs_client)
    tally = Tally()
    tally.send_acknowledged(client, url, 20)

    os.remove(db)  # and no request comes in
    wait_for(db.exists, "the database file deleted while the server was idle to be written back: a SIGKILL "
             "before that would lose every acknowledged message")
    wait_for_log(server, "was deleted while the server ran")
    server.kill()
    start_again_and_check(servers, db, sqs_client, tally)


# --- a database locked by another process -----------------------------------------------


def test_a_database_locked_by_another_process_answers_503_then_recovers(servers, tmp_path, sqs_client):
    db = tmp_path / "queue.db"
    server, client, url = new_server(servers, db, sqs_client)
    tally = Tally()
    tally.send_acknowledged(client, url, 20)

    intruder = sqlite3.connect(db, timeout=10, isolation_level=None)
    try:
        intruder.execute("BEGIN EXCLUSIVE")
        failure = tally.send(client, url)  # the server waits its 5 s busy timeout, then gives up
        assert_service_unavailable(failure)  # answered while the lock is still held: no hang
        assert failure is not None
        assert "locked" in failure.response["Error"]["Message"], failure.response["Error"]
        wait_for_log(server, "storage unavailable: the database is locked by another process")
    finally:
        intruder.execute("ROLLBACK")
        intruder.close()

    assert tally.send(client, url) is None, "a send fails after the lock was released"
    wait_for_log(server, "storage recovered")
    tally.send_acknowledged(client, url, 10)
    restart_and_check(servers, server, db, sqs_client, tally)


# --- a database the readers cannot read ---------------------------------------------------


def test_reads_of_a_database_file_replaced_under_the_server_answer_503_and_recover_when_it_is_back(
        servers, tmp_path, make_client):
    db = tmp_path / "queue.db"
    server = servers.start(db, "--test-clock")
    sqs = make_client(server.endpoint)
    url = sqs.create_queue(QueueName=QUEUE)["QueueUrl"]
    never_counted = sqs.create_queue(QueueName="never-counted")["QueueUrl"]  # no counts cached to answer from
    sqs.send_message(QueueUrl=url, MessageBody="kept")
    page = f"{server.endpoint}/console/queues/us-east-1/{ACCOUNT}/{QUEUE}"
    assert send(page, "GET", None, {}).status == 200

    with sqlite3.connect(db) as checkpoint:  # every page in the file, none left for a reader in the -wal
        assert checkpoint.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
    checkpoint.close()
    aside = tmp_path / "aside.db"
    os.rename(db, aside)  # an operator's copy over the database, say: the readers open what is at the path
    db.write_bytes(b"this is not an SQLite database\n" * 512)
    refused = wait_for(lambda: _browse_refused(sqs, url), "the readers to open the file now at the path")
    assert refused["code"] == "ServiceUnavailable" and "corrupted" in refused["message"], refused
    with pytest.raises(ClientError) as counted:
        sqs.get_queue_attributes(QueueUrl=never_counted, AttributeNames=["ApproximateNumberOfMessages"])
    assert_service_unavailable(counted.value)
    assert "corrupted" in counted.value.response["Error"]["Message"], counted.value.response["Error"]
    console = send(page, "GET", None, {})
    assert console.status == 503 and b"corrupted" in console.body, (console.status, console.body[:300])
    wait_for_log(server, "reads from the message store fail: the database file is corrupted")

    os.replace(aside, db)
    wait_for(lambda: _browse_refused(sqs, url) is None, "reads to work again")
    assert sqs.get_queue_attributes(QueueUrl=never_counted, AttributeNames=["ApproximateNumberOfMessages"])[
        "Attributes"]["ApproximateNumberOfMessages"] == "0"
    assert send(page, "GET", None, {}).status == 200
    sqs.send_message(QueueUrl=url, MessageBody="after")
    assert sorted(m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]) == [
        "after", "kept"]
    log = wait_for_log(server, "reads from the message store work again")
    assert log.count("reads from the message store fail") == 1, log
    assert "Traceback" not in log
    assert server.stop() == 0
    assert integrity(db) == "ok"


def _browse_refused(sqs, url) -> dict | None:
    """The error of a browse (every call reads: no cache in front), or None if it was answered."""
    status, answer = extension_call(sqs, "QueueserverBrowseMessages", QueueUrl=url)
    if status == 200:
        return None
    assert status == 503, (status, answer)
    return answer
