"""Subscriptions under a bound: a queue takes at most `--max-subscriptions` (100 by default), and a
send reaches thousands of them when the bound is raised, at a cost that does not grow with them
(the send logs each message once; each subscription takes its deliveries when it reads).

Each test runs its own server on a file in tmp_path, so that the tables can be read beside it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from support.clients import json_client
from support.server import ClockControl, wait_for
from support.sqs import counts, receive
from support.subscriptions import extension_call, subscribe, table_rows
from support.wire import raw_json_call

DEFAULT_MAX_SUBSCRIPTIONS = 100
MANY = 5000


def test_a_queue_refuses_its_101st_subscription_with_overlimit_and_nothing_else_changes(
        tmp_path: Path, server_factory: Any, make_client: Any) -> None:
    db = tmp_path / "queueserver.db"
    sqs = make_client(server_factory(db).endpoint)
    queue = sqs.create_queue(QueueName="orders")["QueueUrl"]
    first = [subscribe(sqs, queue, f"s{i:03d}") for i in range(DEFAULT_MAX_SUBSCRIPTIONS)]

    status, answer = extension_call(sqs, "QueueserverCreateSubscription", QueueUrl=queue, SubscriptionName="late")
    assert (status, answer["code"]) == (403, "OverLimit")
    assert table_rows(db, "queues") == 1 + DEFAULT_MAX_SUBSCRIPTIONS
    assert subscribe(sqs, queue, "s000") == first[0]  # one it has is still answered, as CreateQueue does
    other = sqs.create_queue(QueueName="other")["QueueUrl"]
    assert subscribe(sqs, other, "late")  # the bound is per queue

    status, _ = extension_call(sqs, "QueueserverDeleteSubscription", SubscriptionUrl=first[-1])
    assert status == 200
    late = subscribe(sqs, queue, "late")
    sqs.send_message(QueueUrl=queue, MessageBody="to all of them")
    assert counts(sqs, late).visible == counts(sqs, first[0]).visible == 1


def test_5000_subscriptions_each_get_every_message_of_a_batch_send(tmp_path: Path, server_factory: Any) -> None:
    db = tmp_path / "queueserver.db"
    server = server_factory(db, "--max-subscriptions", str(MANY))
    queue = raw_json_call(server.endpoint, "CreateQueue", {"QueueName": "orders"}).json()["QueueUrl"]

    def create(i: int) -> str:
        response = raw_json_call(server.endpoint, "QueueserverCreateSubscription",
                                 {"QueueUrl": queue, "SubscriptionName": f"s{i:04d}"})
        assert response.status == 200, response.body
        return str(response.json()["SubscriptionUrl"])

    with ThreadPoolExecutor(8) as pool:
        urls = list(pool.map(create, range(MANY)))
    status, answer = extension_call(json_client(server.endpoint), "QueueserverCreateSubscription", QueueUrl=queue,
                                    SubscriptionName="one-more")
    assert (status, answer["code"]) == (403, "OverLimit")

    sqs = json_client(server.endpoint)
    bodies = [f"m{i}" for i in range(10)]
    sent = sqs.send_message_batch(QueueUrl=queue, Entries=[{"Id": str(i), "MessageBody": body}
                                                           for i, body in enumerate(bodies)])
    assert len(sent["Successful"]) == 10 and not sent.get("Failed")
    assert table_rows(db, "message_bodies") == 10 and table_rows(db, "fanout_log") == 10
    assert counts(sqs, urls[-1]).visible == 10  # counted before it takes them

    def take_all(url: str) -> list[str]:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=300)["Messages"]
        return sorted(m["Body"] for m in got)

    with ThreadPoolExecutor(8) as pool:
        received = list(pool.map(take_all, urls))
    assert received == [sorted(bodies)] * MANY
    assert table_rows(db, "messages") == 10 * (1 + MANY)
    assert table_rows(db, "fanout_log") == 0  # every subscription has taken every line


def test_what_a_subscription_never_takes_expires_with_its_retention_and_leaves_nothing_behind(
        tmp_path: Path, server_factory: Any, make_client: Any) -> None:
    db = tmp_path / "queueserver.db"
    server = server_factory(db, "--test-clock")
    sqs, clock = make_client(server.endpoint), ClockControl(server.endpoint)
    queue = sqs.create_queue(QueueName="orders")["QueueUrl"]
    idle, busy = subscribe(sqs, queue, "idle"), subscribe(sqs, queue, "busy")
    sqs.set_queue_attributes(QueueUrl=idle, Attributes={"MessageRetentionPeriod": "60"})
    sqs.send_message_batch(QueueUrl=queue, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(5)])
    for url in (busy, queue):
        for m in receive(sqs, url, MaxNumberOfMessages=10):
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    assert table_rows(db, "message_bodies") == 5  # held by the lines idle has not taken
    assert counts(sqs, idle).visible == 5
    clock.advance(61)
    assert counts(sqs, idle).visible == 0
    wait_for(lambda: table_rows(db, "message_bodies") == table_rows(db, "fanout_log") == 0,
             "the retention sweep (every 5 s) to drop idle's expired lines and their bodies")
    sqs.send_message(QueueUrl=queue, MessageBody="later")
    assert [m["Body"] for m in receive(sqs, idle, MaxNumberOfMessages=10)] == ["later"]
