"""The console's server page: fsync latency from the syncer's histogram and storage outages as they happen."""

from __future__ import annotations

import sqlite3
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from playwright.sync_api import expect

from support.machine_loss import wait_until_replicating
from support.server import running


def _ready_status(endpoint: str) -> int:
    try:
        with urllib.request.urlopen(endpoint + "/ready", timeout=20) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_the_server_page_shows_fsync_latency_and_the_last_storage_outage(tmp_path: Path, page: Any) -> None:
    db = tmp_path / "queueserver.db"
    with running(db) as server:
        sqs = boto3.client("sqs", endpoint_url=server.endpoint, region_name="us-east-1", aws_access_key_id="x",
                           aws_secret_access_key="x", config=Config(retries={"max_attempts": 1}))
        url = sqs.create_queue(QueueName="synced")["QueueUrl"]
        for i in range(5):
            sqs.send_message(QueueUrl=url, MessageBody=f"durable {i}")
        page.goto(server.endpoint + "/console/server")
        expect(page.locator("#fsync")).to_contain_text("median ≤")
        expect(page.locator("#fsync")).to_contain_text("99th percentile")
        expect(page.locator("table.facts")).to_contain_text("fsync latency (since the start)")
        expect(page.locator("#outages")).to_have_text("0 since the start")

        intruder = sqlite3.connect(db, timeout=10, isolation_level=None)
        try:
            intruder.execute("BEGIN EXCLUSIVE")
            assert _ready_status(server.endpoint) == 503  # its probe write fails: an outage begins
        finally:
            intruder.execute("ROLLBACK")
            intruder.close()
        page.reload()
        expect(page.locator("#outages")).to_contain_text("1 since the start; the last began")
        expect(page.locator("#outages .bad")).to_contain_text("locked by another process")


def test_the_server_page_shows_replication_off_or_its_replica_and_lag(tmp_path: Path, page: Any) -> None:
    with running(tmp_path / "plain.db") as server:
        page.goto(server.endpoint + "/console/server")
        expect(page.locator("#replication")).to_have_text("off")
        expect(page.locator("#role")).to_have_text("primary (not replicating)")
    with running(tmp_path / "replicated.db", "--replicate", str(tmp_path / "replica")) as server:
        wait_until_replicating(server)  # Litestream has reported the replica's position
        page.goto(server.endpoint + "/console/server")
        expect(page.locator("#replication")).to_contain_text(f"to {(tmp_path / 'replica').as_uri()}")
        expect(page.locator("#replication .ok")).to_have_text("Litestream running")
        expect(page.locator("#replication")).to_contain_text(" transactions and ")
        expect(page.locator("#replication")).to_contain_text("s behind; 0 restarts")
        expect(page.locator("#role")).to_have_text("primary, replica generation 0")
