"""GET /health and GET /ready through storage outages.

/health says the process answers, whatever the storage does; /ready says the database takes
writes: 503 while another process holds its lock or the disk is full, 200 again once writes
succeed, without any client having to write first (an orchestrator takes an unready server out
of rotation, so nobody else would). The metrics show the same.
"""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest
from support.faults import Tally, assert_service_unavailable, new_server
from support.metrics import health, scrape, wait_for

pytestmark = pytest.mark.server_process


def test_ready_is_503_while_another_process_holds_the_database_and_200_again_once_it_lets_go(
        servers, tmp_path, sqs_client):
    db = tmp_path / "queue.db"
    server, client, url = new_server(servers, db, sqs_client)
    assert health(server.endpoint, "/health") == (200, {"status": "ok"})
    assert health(server.endpoint, "/ready") == (200, {"status": "ready"})

    intruder = sqlite3.connect(db, timeout=10, isolation_level=None)
    try:
        intruder.execute("BEGIN EXCLUSIVE")

        def unready() -> dict | None:
            status, document = health(server.endpoint, "/ready")
            return document if status == 503 else None

        # the last probe answers for up to a second; the next one waits the 5 s busy timeout and fails
        document = wait_for(unready, "/ready to find the database locked", timeout=20, interval=0.2)
        assert document["status"] == "unavailable"
        assert any("locked by another process" in problem for problem in document["problems"]), document
        during = scrape(server.endpoint)
        assert during.value("queueserver_ready") == 0
        assert during.value("queueserver_storage_outages_total") == 1
    finally:
        intruder.execute("ROLLBACK")
        intruder.close()

    wait_for(lambda: health(server.endpoint, "/ready")[0] == 200, "ready again after the lock was released",
             interval=0.2)
    after = scrape(server.endpoint)
    assert after.value("queueserver_ready") == 1
    assert after.value("queueserver_storage_outages_total") == 1
    assert Tally().send(client, url) is None
    assert server.stop() == 0


def test_ready_is_503_on_a_full_disk_and_200_once_space_is_freed(servers, mounts, sqs_client):
    point = mounts.tmpfs("full", "3m")
    server, client, url = new_server(servers, point / "queue.db", sqs_client)
    assert health(server.endpoint, "/ready")[0] == 200
    tally = Tally()

    def fill() -> None:
        c = sqs_client(server.endpoint)
        for _ in range(1000):
            if tally.send(c, url, size=8192) is not None:
                return

    threads = [threading.Thread(target=fill) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert tally.errors, "the disk never filled up"
    assert_service_unavailable(tally.errors[0])
    status, document = health(server.endpoint, "/ready")
    assert status == 503, document
    assert any("disk is full" in problem for problem in document["problems"]), document
    assert health(server.endpoint, "/health") == (200, {"status": "ok"})
    assert scrape(server.endpoint).value("queueserver_storage_outages_total") >= 1

    mounts.remount(point, "size=64m")
    wait_for(lambda: health(server.endpoint, "/ready")[0] == 200, "ready again once space was freed", interval=0.2)
    assert tally.send(client, url, size=8192) is None
    assert scrape(server.endpoint).value("queueserver_ready") == 1


def test_a_flood_of_ready_calls_probes_the_database_at_most_once_a_second(servers, tmp_path):
    server = servers.start(tmp_path / "queue.db")
    before = scrape(server.endpoint)
    started = time.monotonic()
    for _ in range(300):
        assert health(server.endpoint, "/ready") == (200, {"status": "ready"})
    elapsed = time.monotonic() - started
    after = scrape(server.endpoint)
    probes = after.value("queueserver_readiness_probes_total") - before.value("queueserver_readiness_probes_total")
    fsyncs = after.value("queueserver_fsync_duration_seconds_count") - before.value(
        "queueserver_fsync_duration_seconds_count")
    # a probe begins at most once a second: over ELAPSED seconds, at most ELAPSED + 1 of them
    assert 1 <= probes <= elapsed + 1, (probes, elapsed)
    assert fsyncs <= probes, (fsyncs, probes)  # nothing else writes on this idle server
    assert server.stop() == 0
