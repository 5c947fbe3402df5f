"""Batches and publishes under SIGKILL: a SendMessageBatch's valid entries, a PublishBatch's entries and a
publish's deliveries to every subscribed queue are committed in one transaction, so after a kill each is
found whole or not at all, and everything acknowledged is there.

Batch senders and batch publishers run while the server is SIGKILLed mid-load and restarted on the same
file, twice; then the queues are drained and every batch is counted.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import BotoCoreError, ClientError
from support.clients import never_retrying_client
from support.server import integrity, wait_for
from support.sqs import receive_and_delete_all

pytestmark = pytest.mark.server_process

KILLS = 2
ACKED_BEFORE_KILL = 60  # batches per run: the kill lands while batches are under way
BATCH = 10


def _sns(endpoint: str) -> Any:
    return never_retrying_client(endpoint, service="sns")


def _load_until_dead(endpoint: str, queue_url: str, topic: str, acked: set[str], tag: str) -> threading.Thread:
    """Two batch senders and one batch publisher, each until its call fails (the server died)."""
    def send(index: int) -> None:
        client = never_retrying_client(endpoint)
        for n in range(100_000):
            batch = f"{tag}-s{index}-{n}"
            entries = [{"Id": str(i), "MessageBody": f"{batch}/{i}"} for i in range(BATCH)]
            try:
                client.send_message_batch(QueueUrl=queue_url, Entries=entries)
            except (BotoCoreError, ClientError):
                return
            acked.add(batch)

    def publish() -> None:
        client = _sns(endpoint)
        for n in range(100_000):
            batch = f"{tag}-p-{n}"
            entries = [{"Id": str(i), "Message": f"{batch}/{i}"} for i in range(BATCH)]
            try:
                client.publish_batch(TopicArn=topic, PublishBatchRequestEntries=entries)
            except (BotoCoreError, ClientError):
                return
            acked.add(batch)

    threads = [threading.Thread(target=send, args=(i,), daemon=True) for i in range(2)]
    threads.append(threading.Thread(target=publish, daemon=True))
    for thread in threads:
        thread.start()
    watcher = threading.Thread(target=lambda: [t.join() for t in threads], daemon=True)
    watcher.start()
    return watcher


def test_no_batch_and_no_publish_is_ever_found_half_stored_after_sigkills(tmp_path: Path, servers: Any) -> None:
    db = tmp_path / "queueserver.db"
    server = servers.start(db)
    sqs = never_retrying_client(server.endpoint)
    sqs.create_queue(QueueName="batches")
    topic = _sns(server.endpoint).create_topic(Name="events")["TopicArn"]
    subscribers = []
    for name in ("billing", "audit"):
        url = sqs.create_queue(QueueName=name)["QueueUrl"]
        _sns(server.endpoint).subscribe(TopicArn=topic, Protocol="sqs", Endpoint=f"arn:aws:sqs:us-east-1:"
                                        f"000000000000:{name}", Attributes={"RawMessageDelivery": "true"})
        subscribers.append(url.rpartition("/")[2])
    acked: set[str] = set()
    for kill in range(KILLS):
        watcher = _load_until_dead(server.endpoint, server.endpoint + "/000000000000/batches",
                                   topic, acked, f"run{kill}")
        wait_for(lambda: len(acked) >= ACKED_BEFORE_KILL * (kill + 1), "batches acknowledged before the kill", 60)
        server.kill()
        watcher.join(timeout=30)
        assert integrity(db) == "ok"
        server = servers.start(db)
    sqs = never_retrying_client(server.endpoint)
    sent = Counter(m["Body"].partition("/")[0] for m in receive_and_delete_all(sqs, server.endpoint +
                                                                                 "/000000000000/batches"))
    delivered = [Counter(m["Body"].partition("/")[0] for m in receive_and_delete_all(
        sqs, f"{server.endpoint}/000000000000/{name}")) for name in subscribers]
    assert set(sent.values()) <= {BATCH}, "a SendMessageBatch found half stored"
    for counts in delivered:
        assert set(counts.values()) <= {BATCH}, "a PublishBatch found half delivered to a queue"
    assert delivered[0] == delivered[1], "a publish delivered to one subscribed queue and not the other"
    sent_acked = {b for b in acked if "-s" in b}
    published_acked = {b for b in acked if "-p-" in b}
    assert sent_acked <= set(sent) and published_acked <= set(delivered[0])
    assert len(sent_acked) > 0 and len(published_acked) > 0
