"""Subscriptions under SIGKILL: a send is in the queue and in every subscription, or in none.

Senders run while the server is SIGKILLed mid-load and restarted on the same file, twice. Then every
acknowledged send is in the queue and in each subscription exactly once, each receiver holds the same
messages (a send whose answer was lost is in all of them or in none), deletes in one receiver leave the
others alone, and once every receiver has deleted everything no row and no body is left.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from botocore.exceptions import BotoCoreError, ClientError
from support.clients import never_retrying_client
from support.server import integrity
from support.sqs import receive_and_delete_all
from support.wire import raw_json_call

pytestmark = pytest.mark.server_process

KILLS = 2
ACKED_BEFORE_KILL = 150  # per run: the kill lands while sends are under way
SENDERS = 3


def _send_until_dead(endpoint: str, queue_path: str, acked: set[str], tag: str) -> threading.Thread:
    def send(index: int) -> None:
        client = never_retrying_client(endpoint)
        n = 0
        while True:
            body = f"{tag}-{index}-{n}"
            n += 1
            try:
                client.send_message(QueueUrl=endpoint + queue_path, MessageBody=body)
            except (BotoCoreError, ClientError):
                return  # the server is gone: this send's fate is unknown
            acked.add(body)

    threads = [threading.Thread(target=send, args=(i,), daemon=True) for i in range(SENDERS)]
    for thread in threads:
        thread.start()
    watcher = threading.Thread(target=lambda: [t.join() for t in threads], daemon=True)
    watcher.start()
    return watcher


def _drain(client: Any, url: str) -> list[str]:
    return [m["Body"] for m in receive_and_delete_all(client, url)]


def _rows(db: Path, table: str) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def test_every_acknowledged_send_reaches_every_subscription_across_sigkills(tmp_path: Path, servers: Any) -> None:
    db = tmp_path / "queueserver.db"
    server = servers.start(db)
    client = never_retrying_client(server.endpoint)
    queue_path = urlsplit(client.create_queue(QueueName="orders")["QueueUrl"]).path
    paths = [queue_path]
    for name in ("billing", "audit"):
        paths.append(urlsplit(_subscribe(server.endpoint, server.endpoint + queue_path, name)).path)
    acked: set[str] = set()
    for kill in range(KILLS):
        watcher = _send_until_dead(server.endpoint, queue_path, acked, f"run{kill}")
        pause = threading.Event()  # never set: a wait that is only a pause between looks
        for _ in range(3000):
            if len(acked) >= ACKED_BEFORE_KILL * (kill + 1):
                break
            pause.wait(0.01)
        server.kill()
        watcher.join(timeout=30)
        assert integrity(db) == "ok"
        server = servers.start(db)
    assert len(acked) >= ACKED_BEFORE_KILL * KILLS

    client = never_retrying_client(server.endpoint)
    drained = {path: _drain(client, server.endpoint + path) for path in paths}
    first = sorted(drained[queue_path])
    for path, bodies in drained.items():
        assert len(bodies) == len(set(bodies)), f"{path} got a message twice"
        assert sorted(bodies) == first, f"{path} does not hold what the queue holds"
    assert acked <= set(first), f"lost acknowledged sends: {sorted(acked - set(first))[:5]}"
    server.stop()
    assert _rows(db, "messages") == 0 and _rows(db, "message_bodies") == 0



def _subscribe(endpoint: str, queue_url: str, name: str) -> str:
    response = raw_json_call(endpoint, "QueueserverCreateSubscription", {"QueueUrl": queue_url, "SubscriptionName": name})
    assert response.status == 200, response.body
    return str(response.json()["SubscriptionUrl"])
