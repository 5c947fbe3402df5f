"""Durability: state on the SQLite file survives SIGKILL and SIGTERM restarts.

Each restart gets a new port, so queue URLs are looked up again. The manual clock of a
`--test-clock` server starts at wall time on every start, so in-flight checks use
visibility timeouts far longer than the few seconds a restart takes.
"""

from __future__ import annotations

import sqlite3
import threading

import pytest
from support.server import ClockControl, wait_for
from support.sqs import Counts, counts, receive, receive_all

pytestmark = pytest.mark.server_process


def _integrity_ok(db_path) -> None:
    conn = sqlite3.connect(db_path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()


def test_messages_visibility_attributes_and_tags_survive_a_sigkill(
        serve_with_client, tmp_path):
    db = tmp_path / "restart.db"
    first, sqs = serve_with_client(db)
    attributes = {"VisibilityTimeout": "45", "MessageRetentionPeriod": "86400",
                  "MaximumMessageSize": "4096", "DelaySeconds": "0"}
    tags = {"durable": "yes", "owner": "tests"}
    url = sqs.create_queue(QueueName="durable", Attributes=attributes, tags=tags)["QueueUrl"]
    bodies = [f"message-{i:02d}" for i in range(20)]
    ids = {}
    for body in bodies:
        ids[body] = sqs.send_message(QueueUrl=url, MessageBody=body)["MessageId"]
    received: list[dict] = []
    while len(received) < 5:
        batch = receive(sqs, url, MaxNumberOfMessages=5 - len(received), VisibilityTimeout=600)
        assert batch, "the queue ran dry before 5 receives"
        received.extend(batch)
    for msg in received[:2]:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"])
    deleted = {m["Body"] for m in received[:2]}
    in_flight = {m["Body"] for m in received[2:]}
    never_received = set(bodies) - deleted - in_flight
    assert counts(sqs, url) == Counts(15, 3, 0)

    first.kill()

    second, sqs = serve_with_client(db)
    clock = ClockControl(second.endpoint)
    url = sqs.get_queue_url(QueueName="durable")["QueueUrl"]
    assert counts(sqs, url) == Counts(15, 3, 0), "18 messages, the 3 in flight still invisible"
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    for key, value in attributes.items():
        assert attrs[key] == value, key
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == tags

    visible = receive_all(sqs, url, VisibilityTimeout=3600)
    assert {m["Body"] for m in visible} == never_received
    assert len(visible) == 15
    assert all(ids[m["Body"]] == m["MessageId"] for m in visible), "message ids survive"

    clock.advance(601)
    back = receive_all(sqs, url, MessageSystemAttributeNames=["All"])
    assert {m["Body"] for m in back} == in_flight
    assert all(m["Attributes"]["ApproximateReceiveCount"] == "2" for m in back), back
    assert all(ids[m["Body"]] == m["MessageId"] for m in back)
    assert counts(sqs, url) == Counts(0, 18, 0)
    second.stop()
    _integrity_ok(db)


def test_a_receipt_handle_issued_before_a_restart_still_deletes_its_message(
        serve_with_client, tmp_path):
    db = tmp_path / "handles.db"
    first, sqs = serve_with_client(db)
    url = sqs.create_queue(QueueName="handles")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="one")
    sqs.send_message(QueueUrl=url, MessageBody="two")
    held = receive_all(sqs, url, VisibilityTimeout=600)
    assert len(held) == 2
    first.stop()

    second, sqs = serve_with_client(db)
    url = sqs.get_queue_url(QueueName="handles")["QueueUrl"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=held[0]["ReceiptHandle"])
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=held[1]["ReceiptHandle"],
                                  VisibilityTimeout=0)
    assert [m["Body"] for m in receive_all(sqs, url)] == [held[1]["Body"]]
    assert counts(sqs, url) == Counts(0, 1, 0)
    second.stop()
    _integrity_ok(db)


def test_a_deleted_queue_stays_deleted_and_a_purge_stays_purged_after_a_sigkill(
        serve_with_client, tmp_path):
    db = tmp_path / "deletes.db"
    first, sqs = serve_with_client(db)
    gone = sqs.create_queue(QueueName="gone")["QueueUrl"]
    purged = sqs.create_queue(QueueName="purged")["QueueUrl"]
    for url in (gone, purged):
        sqs.send_message(QueueUrl=url, MessageBody="x")
    sqs.delete_queue(QueueUrl=gone)
    sqs.purge_queue(QueueUrl=purged)
    first.kill()

    second, sqs = serve_with_client(db)
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName="gone")
    url = sqs.get_queue_url(QueueName="purged")["QueueUrl"]
    assert counts(sqs, url) == Counts(0, 0, 0)
    second.stop()


def test_every_acknowledged_send_survives_a_sigkill_under_load_and_no_deleted_message_returns(
        serve_with_client, tmp_path, make_client):
    db = tmp_path / "load.db"
    first, setup = serve_with_client(db)
    url = setup.create_queue(QueueName="load")["QueueUrl"]

    stop = threading.Event()
    lock = threading.Lock()
    acked_sends: set[str] = set()
    acked_deletes: set[str] = set()
    attempted_deletes: set[str] = set()

    def sender(n: int) -> None:
        client = clients[n]
        i = 0
        while not stop.is_set():
            body = f"s{n}-{i}"
            try:
                client.send_message(QueueUrl=url, MessageBody=body)
            except Exception:  # noqa: BLE001 - the server was killed
                return
            with lock:
                acked_sends.add(body)
            i += 1

    def consumer() -> None:
        client = clients[-1]
        while not stop.is_set():
            try:
                msgs = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                              VisibilityTimeout=1, WaitTimeSeconds=0).get(
                                                  "Messages", [])
                for m in msgs[::2]:  # delete every other message
                    with lock:
                        attempted_deletes.add(m["Body"])  # may land even if the answer never comes
                    client.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
                    with lock:
                        acked_deletes.add(m["Body"])
            except Exception:  # noqa: BLE001 - the server was killed
                return

    clients = [make_client(first.endpoint) for _ in range(4)]
    threads = [threading.Thread(target=sender, args=(n,), daemon=True) for n in range(3)]
    threads.append(threading.Thread(target=consumer, daemon=True))
    for t in threads:
        t.start()
    def built_up() -> bool:
        with lock:
            return len(acked_sends) >= 150 and len(acked_deletes) >= 20

    wait_for(built_up, "the load to build up before the plug is pulled", timeout=60)
    first.kill()
    stop.set()
    for t in threads:
        t.join(30)
        assert not t.is_alive()
    assert len(acked_sends) > 20, "the load barely ran"

    second, sqs = serve_with_client(db)
    clock = ClockControl(second.endpoint)
    url = sqs.get_queue_url(QueueName="load")["QueueUrl"]
    clock.advance(3600)  # everything in flight is visible again
    present = {m["Body"] for m in receive_all(sqs, url, VisibilityTimeout=3600)}
    missing = acked_sends - attempted_deletes - present
    assert not missing, f"{len(missing)} acknowledged sends lost, e.g. {sorted(missing)[:5]}"
    resurrected = present & acked_deletes
    assert not resurrected, f"deleted messages came back: {sorted(resurrected)[:5]}"
    second.stop()
    _integrity_ok(db)
