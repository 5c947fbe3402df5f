"""Subscriptions: several independent receivers of one queue, each with its own URL,
consumed with the ordinary SQS actions, the body of each message stored once.

Over both wire protocols (the `make_client` fixture); each test runs its own server on a file in
tmp_path so that the rows can be counted through a read-only connection.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from support.server import ClockControl
from support.sqs import counts, receive
from support.subscriptions import extension_call, subscribe, table_rows

MESSAGES = 1000


@pytest.fixture
def own(tmp_path: Path, server_factory: Any, make_client: Any) -> Any:
    """(client, clock, database path) of a fresh --test-clock server."""
    db = tmp_path / "queueserver.db"
    server = server_factory(db, "--test-clock")
    return make_client(server.endpoint), ClockControl(server.endpoint), db


def send_numbered(sqs: Any, queue_url: str, count: int, **fifo: Any) -> list[str]:
    bodies = [f"m{i:04d}" for i in range(count)]
    for start in range(0, count, 10):
        entries = [{"Id": str(i), "MessageBody": body,
                    **({"MessageGroupId": f"g{int(body[1:]) % 5}", "MessageDeduplicationId": body} if fifo else {})}
                   for i, body in enumerate(bodies[start:start + 10])]
        assert not sqs.send_message_batch(QueueUrl=queue_url, Entries=entries).get("Failed")
    return bodies


def take(sqs: Any, url: str, batch: int, delete: bool = True, visibility: int = 30) -> list[dict[str, Any]]:
    got = receive(sqs, url, MaxNumberOfMessages=batch, VisibilityTimeout=visibility,
                  MessageSystemAttributeNames=["All"])
    if got and delete:
        response = sqs.delete_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
        assert not response.get("Failed"), response
    return got


def drain(sqs: Any, url: str, batch: int) -> list[str]:
    bodies: list[str] = []
    while got := take(sqs, url, batch):
        bodies += [m["Body"] for m in got]
    return bodies


def test_three_subscriptions_each_get_all_1000_messages_at_their_own_speed_with_the_bodies_stored_once(
        own: Any) -> None:
    sqs, clock, db = own
    queue = sqs.create_queue(QueueName="orders", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
    dead = sqs.create_queue(QueueName="orders-dead")["QueueUrl"]
    fast, slow, failing = (subscribe(sqs, queue, name) for name in ("fast", "slow", "failing"))
    dead_arn = sqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sqs.set_queue_attributes(QueueUrl=failing, Attributes={
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dead_arn, "maxReceiveCount": "2"})})
    sent = send_numbered(sqs, queue, MESSAGES)

    assert table_rows(db, "message_bodies") == MESSAGES  # once, however many receivers
    assert table_rows(db, "messages") == table_rows(db, "fanout_log") == MESSAGES  # nothing per subscription yet
    for url in (queue, fast, slow, failing):
        assert counts(sqs, url).visible == MESSAGES

    assert drain(sqs, fast, 10) == sent  # in send order, as a queue with one receiver gives them
    assert counts(sqs, fast).visible == 0 and counts(sqs, slow).visible == MESSAGES

    # slow: takes 3 at a time and lets every other batch's visibility run out; those come back
    seen: Counter[str] = Counter()
    kept: list[str] = []
    while got := take(sqs, slow, 3, delete=False):
        seen.update(m["Body"] for m in got)
        if len(seen) % 2:
            kept += [m["Body"] for m in got]
        else:
            sqs.delete_message_batch(QueueUrl=slow, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
    assert sorted(seen) == sent
    assert counts(sqs, slow).in_flight == len(kept) > 0
    clock.advance(31)
    again_all = [m for _ in range(200) for m in take(sqs, slow, 10, delete=False)]
    assert sorted(m["Body"] for m in again_all) == sorted(kept)
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in again_all} == {"2"}
    for start in range(0, len(again_all), 10):
        sqs.delete_message_batch(QueueUrl=slow, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(again_all[start:start + 10])])

    # failing: never deletes; on the third receive its messages go to its dead-letter queue
    for _ in range(2):
        held = [m for _ in range(MESSAGES // 10) for m in take(sqs, failing, 10, delete=False)]
        assert sorted(m["Body"] for m in held) == sent
        clock.advance(31)
    for _ in range(MESSAGES // 10):  # each receive moves the ones it finds over their maxReceiveCount
        assert take(sqs, failing, 10, delete=False) == []
    assert counts(sqs, failing) == counts(sqs, slow) == counts(sqs, fast)  # all empty
    assert sorted(drain(sqs, dead, 10)) == sent

    assert table_rows(db, "message_bodies") == MESSAGES  # the queue's own receivers still hold them
    assert drain(sqs, queue, 10) == sent
    assert table_rows(db, "messages") == 0
    assert table_rows(db, "message_bodies") == 0


def test_fifo_subscriptions_each_get_every_group_in_order_and_hold_groups_on_their_own(own: Any) -> None:
    sqs, clock, db = own
    queue = sqs.create_queue(QueueName="orders.fifo", Attributes={"FifoQueue": "true", "VisibilityTimeout": "30"})[
        "QueueUrl"]
    subscriptions = [subscribe(sqs, queue, f"s{i}.fifo") for i in range(3)]
    assert all(url.endswith(".fifo") for url in subscriptions)  # libraries that tell FIFO by the suffix still do
    sent = send_numbered(sqs, queue, MESSAGES, fifo=True)
    assert sqs.send_message(QueueUrl=queue, MessageBody="again", MessageGroupId="g0",
                            MessageDeduplicationId=sent[0])["MessageId"]  # a duplicate: stored nowhere
    assert table_rows(db, "message_bodies") == MESSAGES

    # s0 holds a batch past its visibility: its group waits, then comes back first, in order
    held = take(sqs, subscriptions[0], 10, delete=False)
    group = held[0]["Attributes"]["MessageGroupId"]
    others = take(sqs, subscriptions[0], 10, delete=False)
    assert group not in {m["Attributes"]["MessageGroupId"] for m in others}
    clock.advance(31)
    orders = {}
    for url, batch in zip(subscriptions, (10, 7, 1)):
        by_group: dict[str, list[str]] = {}
        while got := take(sqs, url, batch):
            for m in got:
                by_group.setdefault(m["Attributes"]["MessageGroupId"], []).append(m["Body"])
        orders[url] = by_group
        assert sorted(b for bodies in by_group.values() for b in bodies) == sent
        for name, bodies in by_group.items():
            assert bodies == [b for b in sent if f"g{int(b[1:]) % 5}" == name]
        assert counts(sqs, url) == counts(sqs, subscriptions[0])
    assert table_rows(db, "message_bodies") == MESSAGES  # the queue itself was never received from
    sqs.purge_queue(QueueUrl=queue)
    assert table_rows(db, "messages") == 0 and table_rows(db, "message_bodies") == 0


def test_a_subscription_gets_only_later_sends_unless_it_starts_from_all(own: Any) -> None:
    sqs, clock, db = own
    queue = sqs.create_queue(QueueName="q")["QueueUrl"]
    sqs.send_message(QueueUrl=queue, MessageBody="early")
    sqs.send_message(QueueUrl=queue, MessageBody="delayed", DelaySeconds=60)
    [received] = take(sqs, queue, 1, delete=False)  # in flight on the queue; visible on a new subscription
    new = subscribe(sqs, queue, "new")
    everything = subscribe(sqs, queue, "all", start_from="all")
    sqs.send_message(QueueUrl=queue, MessageBody="late")
    assert drain(sqs, new, 10) == ["late"]
    assert drain(sqs, everything, 10) == ["early", "late"]
    clock.advance(61)
    assert drain(sqs, everything, 10) == ["delayed"]
    assert table_rows(db, "message_bodies") == 3


def test_creating_a_subscription_twice_answers_the_same_url_and_names_follow_queue_name_rules(own: Any) -> None:
    sqs, _, _ = own
    queue = sqs.create_queue(QueueName="q")["QueueUrl"]
    fifo = sqs.create_queue(QueueName="f.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    first = subscribe(sqs, queue, "audit")
    assert subscribe(sqs, queue, "audit") == first
    assert first == queue + "~audit"
    for url, name in ((queue, "bad name"), (queue, "x" * 81), (queue, "a~b"), (fifo, "no-suffix"), (queue, "")):
        status, answer = extension_call(sqs, "QueueserverCreateSubscription", QueueUrl=url, SubscriptionName=name)
        assert status == 400
        assert answer["code"] in ("InvalidParameterValue", "MissingParameter", "MissingRequiredParameter"), answer
    status, answer = extension_call(sqs, "QueueserverCreateSubscription", QueueUrl=queue, SubscriptionName="s",
                                    StartFrom="yesterday")
    assert status == 400 and answer["code"] == "InvalidParameterValue"
    status, answer = extension_call(sqs, "QueueserverCreateSubscription", QueueUrl=first, SubscriptionName="s")
    assert status == 400 and answer["code"] == "InvalidParameterValue"
    status, answer = extension_call(sqs, "QueueserverListSubscriptions", QueueUrl=queue)
    assert status == 200 and answer == {"Subscriptions": [{"SubscriptionName": "audit", "SubscriptionUrl": first}]}
    assert sqs.list_queues()["QueueUrls"] == [fifo, queue]  # subscriptions are not queues


def test_sending_to_a_subscription_is_refused_and_changes_nothing(own: Any) -> None:
    sqs, _, db = own
    queue = sqs.create_queue(QueueName="q")["QueueUrl"]
    audit = subscribe(sqs, queue, "audit")
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.send_message(QueueUrl=audit, MessageBody="x")
    assert caught.value.response["Error"]["Code"] == "AWS.SimpleQueueService.UnsupportedOperation"
    with pytest.raises(sqs.exceptions.ClientError):
        sqs.send_message_batch(QueueUrl=audit, Entries=[{"Id": "1", "MessageBody": "x"}])
    assert table_rows(db, "messages") == 0


def test_purging_the_queue_purges_its_subscriptions_and_purging_a_subscription_only_it(own: Any) -> None:
    sqs, _, db = own
    queue = sqs.create_queue(QueueName="q")["QueueUrl"]
    a, b = subscribe(sqs, queue, "a"), subscribe(sqs, queue, "b")
    send_numbered(sqs, queue, 20)
    sqs.purge_queue(QueueUrl=a)
    assert [counts(sqs, url).visible for url in (queue, a, b)] == [20, 0, 20]
    assert table_rows(db, "message_bodies") == 20
    sqs.purge_queue(QueueUrl=queue)
    assert [counts(sqs, url).visible for url in (queue, a, b)] == [0, 0, 0]
    assert table_rows(db, "messages") == 0 and table_rows(db, "message_bodies") == 0


def test_deleting_the_queue_deletes_its_subscriptions_and_deleting_one_leaves_the_rest(own: Any) -> None:
    sqs, _, db = own
    queue = sqs.create_queue(QueueName="q")["QueueUrl"]
    a, b = subscribe(sqs, queue, "a"), subscribe(sqs, queue, "b")
    send_numbered(sqs, queue, 20)
    status, _ = extension_call(sqs, "QueueserverDeleteSubscription", SubscriptionUrl=a)
    assert status == 200
    status, answer = extension_call(sqs, "QueueserverDeleteSubscription", SubscriptionUrl=queue)
    assert status == 400 and answer["code"] == "InvalidParameterValue"  # a queue is not one
    assert table_rows(db, "message_bodies") == 20 and counts(sqs, b).visible == 20
    assert drain(sqs, b, 10) == [f"m{i:04d}" for i in range(20)]
    send_numbered(sqs, queue, 5)  # b has not taken these when its queue goes
    sqs.delete_queue(QueueUrl=queue)
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.receive_message(QueueUrl=b)
    assert "NonExistentQueue" in caught.value.response["Error"]["Code"] or \
        caught.value.response["Error"]["Code"].endswith("QueueDoesNotExist")
    assert table_rows(db, "messages") == 0 and table_rows(db, "message_bodies") == 0
    assert table_rows(db, "queues") == table_rows(db, "subscriptions") == table_rows(db, "fanout_log") == 0


def test_a_subscription_and_its_deliveries_survive_a_restart(tmp_path: Path, server_factory: Any,
                                                              make_client: Any) -> None:
    db = tmp_path / "queueserver.db"
    server = server_factory(db)
    sqs = make_client(server.endpoint)
    queue = sqs.create_queue(QueueName="q")["QueueUrl"]
    audit = subscribe(sqs, queue, "audit")
    send_numbered(sqs, queue, 5)
    server.stop()
    server = server_factory(db)  # on another port: the URLs keep their paths
    sqs = make_client(server.endpoint)
    queue, audit = (server.endpoint + urlsplit(url).path for url in (queue, audit))
    sqs.send_message(QueueUrl=queue, MessageBody="m0005")
    assert drain(sqs, audit, 10) == [f"m{i:04d}" for i in range(6)]
    status, answer = extension_call(sqs, "QueueserverListSubscriptions", QueueUrl=queue)
    assert status == 200 and answer == {"Subscriptions": [{"SubscriptionName": "audit", "SubscriptionUrl": audit}]}


def test_a_dead_lettered_delivery_names_its_subscription_and_a_move_task_returns_it_there(own: Any) -> None:
    sqs, clock, db = own
    queue = sqs.create_queue(QueueName="q")["QueueUrl"]
    dead = sqs.create_queue(QueueName="q-dead")["QueueUrl"]
    failing, other = subscribe(sqs, queue, "failing"), subscribe(sqs, queue, "other")
    arn = {url: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
           for url in (dead, failing)}
    for url in (failing, queue):  # the queue's own receivers dead-letter too
        sqs.set_queue_attributes(QueueUrl=url, Attributes={
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn[dead], "maxReceiveCount": "1"})})
    sqs.send_message(QueueUrl=queue, MessageBody="poison")
    for url in (failing, queue):
        assert take(sqs, url, 1, delete=False, visibility=1)
    clock.advance(2)
    for url in (failing, queue):
        assert take(sqs, url, 1, delete=False) == []  # moved to the dead-letter queue
    moved = take(sqs, dead, 10, delete=False, visibility=0)
    assert sorted(m["Attributes"]["DeadLetterQueueSourceArn"] for m in moved) == sorted([arn[failing], arn[failing].split("~")[0]])
    [delivered] = take(sqs, other, 1)
    assert "DeadLetterQueueSourceArn" not in delivered["Attributes"]  # the other receivers' copy is untouched
    task = sqs.start_message_move_task(SourceArn=arn[dead])["TaskHandle"]
    assert task
    for _ in range(500):
        if counts(sqs, dead).visible == 0 and counts(sqs, failing).visible == 1:
            break
        clock.advance(1)
    [back] = take(sqs, failing, 1)
    assert back["Body"] == "poison" and "DeadLetterQueueSourceArn" not in back["Attributes"]
    drain(sqs, queue, 10)
    assert table_rows(db, "messages") == 0 and table_rows(db, "message_bodies") == 0


def test_after_one_subscription_is_purged_the_others_deletes_leave_no_body_and_lose_none(own: Any) -> None:
    sqs, _, db = own
    queue = sqs.create_queue(QueueName="q")["QueueUrl"]
    a, b = subscribe(sqs, queue, "a"), subscribe(sqs, queue, "b")
    sent = send_numbered(sqs, queue, 30)
    assert len(take(sqs, b, 10)) == 10  # b deleted some before the purge
    sqs.purge_queue(QueueUrl=a)
    assert table_rows(db, "message_bodies") == 30
    assert drain(sqs, queue, 10) == sent  # every body still whole for the remaining receivers
    assert table_rows(db, "message_bodies") == 20  # the ten b had deleted are gone with the queue's rows
    assert drain(sqs, b, 7) == sent[10:]
    assert table_rows(db, "messages") == 0 and table_rows(db, "message_bodies") == 0


def test_a_receive_without_attributes_hands_each_delivery_its_own_message_id_md5_and_body(own: Any) -> None:
    """The shape most receives ask for (no attributes), read with the claim: from the queue's own rows
    and from a subscription's, whose bodies are shared."""
    sqs, _, _ = own
    queue = sqs.create_queue(QueueName="plain")["QueueUrl"]
    copy = subscribe(sqs, queue, "copy")
    sent = {}
    for i in range(23):
        body = f"body {i} " + "é" * i
        answer = sqs.send_message(QueueUrl=queue, MessageBody=body)
        sent[answer["MessageId"]] = (answer["MD5OfMessageBody"], body)
    for url in (copy, queue):
        got: list[dict[str, Any]] = []
        while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=7).get("Messages", []):
            got += batch
            assert not sqs.delete_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)]).get("Failed")
        assert {m["MessageId"]: (m["MD5OfBody"], m["Body"]) for m in got} == sent
        assert all(set(m) == {"MessageId", "ReceiptHandle", "MD5OfBody", "Body"} for m in got)
        assert counts(sqs, url).visible == counts(sqs, url).in_flight == 0
