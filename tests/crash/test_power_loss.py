"""Power loss, not just process death.

SIGKILL leaves the page cache behind, so a write acknowledged before it reached the disk
passes every kill test. Here the server runs on powercut_fs.py, a FUSE filesystem that keeps
every write in memory until the file (or, for names, the folder) is synced, and a cut drops
whatever was not. The same layer injects failing syncs and renames into the running server.

* repeated cuts under concurrent load (half of them leaving a random part of the unsynced
  writes on disk): every acknowledged send is there, every acknowledged delete stays deleted
  (tests/support/crash_ledger.py checks, as for the SIGKILL test);
* the test of the test: a disk that ignores syncs must lose acknowledged sends;
* an fsync that fails (EIO): every request is refused until a restart, and what was
  acknowledged before it survives a cut;
* a deleted database file whose write-back fails: 503s, the server keeps serving and
  writes the file back once the fault clears, durably;
* a start on a full disk says so (not the failed ROLLBACK that followed).
"""

from __future__ import annotations

import os

import pytest
from support.faults import (
    Tally,
    assert_acknowledged_work_survived,
    assert_service_unavailable,
    new_server,
    refuse_to_serve,
    start_again_and_check,
    wait_for_log,
)
from support.powercut import power_run
from support.server import integrity

pytestmark = pytest.mark.server_process

CUTS = 10  # plus the final one, under load too: about 45 s


def test_acknowledged_work_survives_repeated_power_cuts_under_concurrent_load(tmp_path, as_root):
    figures = power_run(tmp_path, cuts=CUTS, seconds_between=(1.5, 3.5))
    report = figures.report()
    print(report)

    assert figures.kills == CUTS + 1
    assert figures.acked_sends > 1000, f"the load was too light to mean anything\n{report}"
    assert figures.acked_deletes > 500, report
    assert figures.drained > 0, f"some messages must still be in the queue at the end\n{report}"
    assert_acknowledged_work_survived(figures)


def test_the_power_cut_layer_loses_acknowledged_sends_when_the_disk_ignores_syncs(tmp_path, as_root):
    figures = power_run(tmp_path, cuts=1, seconds_between=(2.0, 3.0), lying=True)
    report = figures.report()
    print(report)
    assert figures.acked_sends > 100, report
    assert figures.lost, f"a disk that drops every sync lost nothing: the layer proves nothing\n{report}"


@pytest.mark.parametrize("errno_name", ["EIO", "ENOSPC"])
def test_a_failed_fsync_refuses_every_request_until_a_restart_and_what_was_acknowledged_survives_a_cut(
        servers, powercut, sqs_client, errno_name):
    db = powercut.point / "queue.db"
    server, client, url = new_server(servers, db, sqs_client)
    tally = Tally()
    tally.send_acknowledged(client, url, 20, size=500)

    powercut.command(f"fail fsync queue.db-wal {errno_name}")
    failure = tally.send(client, url)
    assert_service_unavailable(failure)
    assert "Restart the server" in failure.response["Error"]["Message"], failure.response["Error"]
    tally.refused.pop()  # stored but maybe not durable, as its 503 says: neither acknowledged nor refused
    wait_for_log(server, "could not be synced to disk")

    powercut.command("clear")
    for _ in range(3):  # the disk works again, but what follows a failed fsync cannot be trusted
        assert_service_unavailable(tally.send(client, url))
    with pytest.raises(Exception) as receive:
        client.receive_message(QueueUrl=url)
    assert_service_unavailable(receive.value)
    assert server.stderr_text().count("could not be synced to disk") == 1

    powercut.cut(server)
    powercut.mount()
    start_again_and_check(servers, db, sqs_client, tally)
    assert integrity(db) == "ok"


@pytest.mark.parametrize("fault", ["rename queue.db", "open queue.db-wal"],
                         ids=["the rename into place fails", "opening the restored file fails"])
def test_a_failed_write_back_of_a_deleted_database_answers_503_and_serves_again_once_the_fault_clears(
        servers, powercut, sqs_client, fault):
    db = powercut.point / "queue.db"
    server, client, url = new_server(servers, db, sqs_client)
    tally = Tally()
    tally.send_acknowledged(client, url, 20, size=500)

    powercut.command(f"fail {fault} EIO")
    os.remove(db)
    wait_for_log(server, "was deleted while the server ran")
    for _ in range(3):
        assert_service_unavailable(tally.send(client, url))
    assert server.running
    assert server.stderr_text().count("storage unavailable") == 1, "one line per outage"

    powercut.command("clear")
    wait_for_log(server, "is restored")
    tally.send_acknowledged(client, url, 10, size=500, why="requests fail after the write-back succeeded")
    assert db.exists()

    powercut.cut(server)  # the written-back file, and what came after, must be on disk
    powercut.mount()
    start_again_and_check(servers, db, sqs_client, tally)
    assert integrity(db) == "ok"


def test_a_start_on_a_full_disk_names_the_full_disk_not_the_rollback_that_followed(servers, powercut, sqs_client):
    db = powercut.point / "queue.db"
    server, _, _ = new_server(servers, db, sqs_client)
    assert server.stop() == 0

    powercut.command("fail write queue.db-wal ENOSPC")
    line = refuse_to_serve(db).stderr.strip()
    assert "the disk is full" in line, line
    assert "no transaction" not in line, line
