"""Point-in-time restore: `queueserver restore --at TIME` brings the queue back as it was before a
mistaken PurgeQueue, from the same replica that now holds the purge; `--list` shows the points.

The server replicates to a folder on the real clock. The test waits for events only: the replica
caught up (transactions_behind 0 on /metrics, which writes nothing), and the wall clock's second
turning over (restore points are stamped to the second, so one before the purge must be a second old).
"""

from __future__ import annotations

import math
import time
from datetime import datetime, timezone
from pathlib import Path

from support.clients import json_client
from support.machine_loss import wait_until_replicating
from support.metrics import scrape
from support.server import run_queueserver, start_server, wait_for

MESSAGES = 60


def caught_up(endpoint: str) -> float:
    """Until the replica holds every transaction Litestream has read; returns the moment it did."""
    wait_for(lambda: scrape(endpoint).value("queueserver_replication_transactions_behind") == 0,
             "the replica to catch up", timeout=30, interval=0.05)
    return time.time()


def drained_bodies(db: Path, log_dir: Path) -> list[str]:
    server = start_server(db, log_dir=log_dir)
    try:
        sqs = json_client(server.endpoint)
        url = sqs.get_queue_url(QueueName="orders")["QueueUrl"]
        bodies: list[str] = []
        while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
            bodies += [m["Body"] for m in batch]
        return bodies
    finally:
        server.stop()


def test_restore_at_a_moment_before_a_purge_finds_every_message(tmp_path: Path) -> None:
    replica = tmp_path / "replica"
    primary = start_server(tmp_path / "primary.db", "--replicate", str(replica), log_dir=tmp_path)
    try:
        wait_until_replicating(primary)
        sqs = json_client(primary.endpoint)
        url = sqs.create_queue(QueueName="orders")["QueueUrl"]
        for start in range(0, MESSAGES, 10):
            sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"order-{start + i}"}
                                                          for i in range(10)])
        uploaded = caught_up(primary.endpoint)
        wait_for(lambda: time.time() >= math.floor(uploaded) + 1, "the second of the upload to be over")
        before_purge = datetime.now(timezone.utc)
        sqs.purge_queue(QueueUrl=url)
        caught_up(primary.endpoint)
    finally:
        primary.stop()

    listed = run_queueserver("restore", "--from", str(replica), "--list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert len(lines) >= 2 and all(" transaction " in line for line in lines), listed.stdout

    at = tmp_path / "before-purge.db"
    done = run_queueserver("restore", "--from", str(replica), "--db", str(at), "--at", before_purge.isoformat())
    assert done.returncode == 0, done.stderr
    assert "as it was at" in done.stdout and "integrity: ok" in done.stdout, done.stdout
    assert sorted(drained_bodies(at, tmp_path)) == sorted(f"order-{i}" for i in range(MESSAGES))

    latest = tmp_path / "latest.db"
    assert run_queueserver("restore", "--from", str(replica), "--db", str(latest)).returncode == 0
    assert drained_bodies(latest, tmp_path) == []


def test_restore_at_a_moment_before_the_oldest_point_restores_nothing_and_says_so(tmp_path: Path) -> None:
    replica = tmp_path / "replica"
    primary = start_server(tmp_path / "primary.db", "--replicate", str(replica), log_dir=tmp_path)
    try:
        wait_until_replicating(primary)
    finally:
        primary.stop()
    db = tmp_path / "restored.db"
    done = run_queueserver("restore", "--from", str(replica), "--db", str(db), "--at", "2001-01-01T00:00:00Z")
    assert done.returncode == 2 and "no restore point before 2001-01-01T00:00:00+00:00" in done.stderr, done.stderr
    assert not db.exists()
    bad = run_queueserver("restore", "--from", str(replica), "--db", str(db), "--at", "yesterday")
    assert bad.returncode == 2 and "--at 'yesterday': expected a time like" in bad.stderr, bad.stderr
