"""Dead-letter queues: RedrivePolicy and RedriveAllowPolicy, the move on receive, and
ListDeadLetterSourceQueues."""

from __future__ import annotations

import json
import sqlite3
import threading
from typing import Any

import pytest
from botocore.exceptions import BotoCoreError, ClientError
from support.dead_letters import dead_letter_all, make_source_and_dlq, send_fifo, send_many
from support.server import wait_for
from support.sqs import Counts, counts, md5_of_attributes, md5_of_body, raises_modeled, receive, unique_queue_name
from support.sqs import arn_of, drain, queue_attribute, redrive_policy

ALL = {"MessageSystemAttributeNames": ["All"], "MessageAttributeNames": ["All"]}


def _fail(sqs: Any, url: str, clock: Any, times: int, visibility: int = 10) -> dict[str, Any]:
    """Receive the one message `times` times, letting its visibility run out each time."""
    msg: dict[str, Any] = {}
    for _ in range(times):
        (msg,) = receive(sqs, url, VisibilityTimeout=visibility, **ALL)
        clock.advance(visibility + 1)
    return msg


def _policy(sqs: Any, url: str) -> dict[str, Any] | None:
    text = queue_attribute(sqs, url, "RedrivePolicy")
    return None if text is None else json.loads(text)


# --- RedrivePolicy ---------------------------------------------------------------


def test_a_redrive_policy_given_at_creation_is_returned_by_get_queue_attributes(sqs, make_queue):
    dlq = make_queue()
    dlq_arn = arn_of(sqs, dlq)
    source = make_queue({"RedrivePolicy": redrive_policy(dlq_arn, 4)})
    policy = _policy(sqs, source)
    assert policy is not None
    assert policy["deadLetterTargetArn"] == dlq_arn
    assert int(policy["maxReceiveCount"]) == 4
    all_attrs = sqs.get_queue_attributes(QueueUrl=source, AttributeNames=["All"])["Attributes"]
    assert json.loads(all_attrs["RedrivePolicy"]) == policy


def test_a_max_receive_count_given_as_a_string_is_accepted(sqs, make_queue):
    dlq_arn = arn_of(sqs, make_queue())
    source = make_queue({"RedrivePolicy": redrive_policy(dlq_arn, "7")})
    policy = _policy(sqs, source)
    assert policy is not None and int(policy["maxReceiveCount"]) == 7


def test_set_queue_attributes_adds_and_changes_a_redrive_policy(sqs, make_queue):
    dlq_arn = arn_of(sqs, make_queue())
    other_dlq_arn = arn_of(sqs, make_queue())
    source = make_queue()
    assert _policy(sqs, source) is None
    sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": redrive_policy(dlq_arn, 2)})
    policy = _policy(sqs, source)
    assert policy is not None
    assert (policy["deadLetterTargetArn"], int(policy["maxReceiveCount"])) == (dlq_arn, 2)
    sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": redrive_policy(other_dlq_arn, 9)})
    policy = _policy(sqs, source)
    assert policy is not None
    assert (policy["deadLetterTargetArn"], int(policy["maxReceiveCount"])) == (other_dlq_arn, 9)


def test_an_empty_redrive_policy_removes_it_and_messages_are_no_longer_moved(sqs, make_queue, clock):
    source, dlq, _ = make_source_and_dlq(make_queue, sqs, 1)
    sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": ""})
    assert _policy(sqs, source) is None
    assert "RedrivePolicy" not in sqs.get_queue_attributes(
        QueueUrl=source, AttributeNames=["All"])["Attributes"]
    sqs.send_message(QueueUrl=source, MessageBody="keeps coming back")
    _fail(sqs, source, clock, 3)
    (msg,) = receive(sqs, source, **ALL)
    assert msg["Attributes"]["ApproximateReceiveCount"] == "4"
    assert counts(sqs, dlq) == Counts(0, 0, 0)


@pytest.mark.parametrize("count", [1, 1000])
def test_max_receive_count_accepts_1_to_1000(sqs, make_queue, count):
    dlq_arn = arn_of(sqs, make_queue())
    source = make_queue({"RedrivePolicy": redrive_policy(dlq_arn, count)})
    policy = _policy(sqs, source)
    assert policy is not None and int(policy["maxReceiveCount"]) == count


@pytest.mark.parametrize("count", [0, -1, 1001, "abc", "", None, 2.5, True])
def test_a_max_receive_count_outside_1_to_1000_is_an_invalid_attribute_value(sqs, make_queue, count):
    dlq_arn = arn_of(sqs, make_queue())
    policy = redrive_policy(dlq_arn, count)
    with raises_modeled(sqs, "InvalidAttributeValue"):
        sqs.create_queue(QueueName=unique_queue_name("bad-count"), Attributes={"RedrivePolicy": policy})
    source = make_queue()
    with raises_modeled(sqs, "InvalidAttributeValue"):
        sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": policy})
    assert _policy(sqs, source) is None


@pytest.mark.parametrize("value", [
    "not json",
    "[]",
    "42",
    '{"maxReceiveCount": 3}',
    '{"deadLetterTargetArn": "", "maxReceiveCount": 3}',
    '{"deadLetterTargetArn": "not-an-arn", "maxReceiveCount": 3}',
])
def test_a_malformed_redrive_policy_is_an_invalid_attribute_value(sqs, value):
    with raises_modeled(sqs, "InvalidAttributeValue"):
        sqs.create_queue(QueueName=unique_queue_name("bad-policy"), Attributes={"RedrivePolicy": value})


def test_a_redrive_policy_without_max_receive_count_is_an_invalid_attribute_value(sqs, make_queue):
    dlq_arn = arn_of(sqs, make_queue())
    with raises_modeled(sqs, "InvalidAttributeValue"):
        sqs.create_queue(QueueName=unique_queue_name("no-count"),
                         Attributes={"RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn})})


def test_a_dead_letter_target_that_does_not_exist_is_an_invalid_attribute_value(sqs, make_queue):
    arn = f"arn:aws:sqs:us-east-1:000000000000:{unique_queue_name('never-created')}"
    with raises_modeled(sqs, "InvalidAttributeValue"):
        sqs.create_queue(QueueName=unique_queue_name("src"), Attributes={"RedrivePolicy": redrive_policy(arn, 3)})
    source = make_queue()
    with raises_modeled(sqs, "InvalidAttributeValue"):
        sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": redrive_policy(arn, 3)})


def test_a_queue_cannot_name_itself_as_its_dead_letter_queue_and_its_messages_stay_receivable(
        sqs, make_queue, clock):
    url = make_queue()
    with raises_modeled(sqs, "InvalidAttributeValue") as refused:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": redrive_policy(arn_of(sqs, url), 1)})
    assert "A queue cannot be its own dead-letter queue." in refused.value.response["Error"]["Message"]
    assert _policy(sqs, url) is None
    sqs.send_message(QueueUrl=url, MessageBody="once")
    for attempt in range(1, 4):  # past any maxReceiveCount it could have had: visible, and received
        assert counts(sqs, url).visible == 1
        (msg,) = receive(sqs, url, VisibilityTimeout=10, **ALL)
        assert msg["Attributes"]["ApproximateReceiveCount"] == str(attempt)
        clock.advance(11)


def test_a_dead_letter_target_in_another_account_is_an_invalid_attribute_value(sqs, make_queue):
    dlq_arn = arn_of(sqs, make_queue())
    foreign = dlq_arn.replace(":000000000000:", ":111122223333:")
    assert foreign != dlq_arn
    with raises_modeled(sqs, "InvalidAttributeValue"):
        sqs.create_queue(QueueName=unique_queue_name("src"),
                         Attributes={"RedrivePolicy": redrive_policy(foreign, 3)})


def test_a_dead_letter_target_in_another_region_is_an_invalid_attribute_value(sqs, server, make_client):
    west = make_client(server.endpoint, region="us-west-2")
    west_dlq = west.create_queue(QueueName=unique_queue_name("west-dlq"))["QueueUrl"]
    west_arn = arn_of(west, west_dlq)
    assert ":us-west-2:" in west_arn
    try:
        with raises_modeled(sqs, "InvalidAttributeValue"):
            sqs.create_queue(QueueName=unique_queue_name("east-src"),
                             Attributes={"RedrivePolicy": redrive_policy(west_arn, 3)})
        # and the same name in this region is a different queue: the policy needs it to exist here
        east_with_west_name_arn = west_arn.replace(":us-west-2:", ":us-east-1:")
        with raises_modeled(sqs, "InvalidAttributeValue"):
            sqs.create_queue(QueueName=unique_queue_name("east-src"),
                             Attributes={"RedrivePolicy": redrive_policy(east_with_west_name_arn, 3)})
        # in its own region the queue is a valid target
        west_src = west.create_queue(QueueName=unique_queue_name("west-src"),
                                     Attributes={"RedrivePolicy": redrive_policy(west_arn, 3)})["QueueUrl"]
        assert json.loads(queue_attribute(west, west_src, "RedrivePolicy") or "{}")["deadLetterTargetArn"] == west_arn
    finally:
        west.delete_queue(QueueUrl=west_dlq)


def test_a_standard_queue_cannot_dead_letter_into_a_fifo_queue(sqs, make_queue):
    fifo_dlq_arn = arn_of(sqs, make_queue({"FifoQueue": "true"}, name=unique_queue_name("dlq") + ".fifo"))
    with raises_modeled(sqs, "InvalidAttributeValue"):
        sqs.create_queue(QueueName=unique_queue_name("std-src"),
                         Attributes={"RedrivePolicy": redrive_policy(fifo_dlq_arn, 3)})
    source = make_queue()
    with raises_modeled(sqs, "InvalidAttributeValue"):
        sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": redrive_policy(fifo_dlq_arn, 3)})


def test_a_fifo_queue_cannot_dead_letter_into_a_standard_queue(sqs, make_queue):
    dlq_arn = arn_of(sqs, make_queue())
    with raises_modeled(sqs, "InvalidAttributeValue"):
        sqs.create_queue(QueueName=unique_queue_name("fifo-src") + ".fifo",
                         Attributes={"FifoQueue": "true", "RedrivePolicy": redrive_policy(dlq_arn, 3)})


def test_a_fifo_queue_can_dead_letter_into_a_fifo_queue(sqs, make_queue):
    source, _, dlq_arn = make_source_and_dlq(make_queue, sqs, 3, fifo=True)
    policy = _policy(sqs, source)
    assert policy is not None and policy["deadLetterTargetArn"] == dlq_arn


def test_a_rejected_redrive_policy_leaves_the_previous_one_in_place(sqs, make_queue):
    source, _, dlq_arn = make_source_and_dlq(make_queue, sqs, 2)
    with raises_modeled(sqs, "InvalidAttributeValue"):
        sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": redrive_policy(dlq_arn, 0)})
    policy = _policy(sqs, source)
    assert policy is not None
    assert (policy["deadLetterTargetArn"], int(policy["maxReceiveCount"])) == (dlq_arn, 2)


# --- RedriveAllowPolicy ------------------------------------------------------------


def _allow(permission: str, arns: list[str] | None = None) -> str:
    policy: dict[str, Any] = {"redrivePermission": permission}
    if arns is not None:
        policy["sourceQueueArns"] = arns
    return json.dumps(policy)


def _future_arn(sqs: Any, make_queue: Any, name: str) -> str:
    probe = arn_of(sqs, make_queue())
    return probe.rsplit(":", 1)[0] + ":" + name


def test_a_redrive_allow_policy_is_returned_by_get_queue_attributes(sqs, make_queue):
    dlq = make_queue({"RedriveAllowPolicy": _allow("denyAll")})
    assert json.loads(queue_attribute(sqs, dlq, "RedriveAllowPolicy") or "{}") == {"redrivePermission": "denyAll"}


def test_deny_all_refuses_every_source_queue(sqs, make_queue):
    dlq = make_queue({"RedriveAllowPolicy": _allow("denyAll")})
    dlq_arn = arn_of(sqs, dlq)
    with raises_modeled(sqs, "InvalidAttributeValue"):
        sqs.create_queue(QueueName=unique_queue_name("src"), Attributes={"RedrivePolicy": redrive_policy(dlq_arn, 2)})
    source = make_queue()
    with raises_modeled(sqs, "InvalidAttributeValue"):
        sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": redrive_policy(dlq_arn, 2)})


def test_allow_all_accepts_any_source_queue(sqs, make_queue):
    dlq = make_queue({"RedriveAllowPolicy": _allow("allowAll")})
    source = make_queue({"RedrivePolicy": redrive_policy(arn_of(sqs, dlq), 2)})
    assert _policy(sqs, source) is not None


def test_by_queue_accepts_only_the_listed_source_queues(sqs, make_queue):
    allowed_name = unique_queue_name("allowed")
    allowed_arn = _future_arn(sqs, make_queue, allowed_name)
    dlq = make_queue({"RedriveAllowPolicy": _allow("byQueue", [allowed_arn])})
    dlq_arn = arn_of(sqs, dlq)
    allowed = make_queue({"RedrivePolicy": redrive_policy(dlq_arn, 2)}, name=allowed_name)
    assert _policy(sqs, allowed) is not None
    with raises_modeled(sqs, "InvalidAttributeValue"):
        sqs.create_queue(QueueName=unique_queue_name("refused"),
                         Attributes={"RedrivePolicy": redrive_policy(dlq_arn, 2)})
    refused = make_queue()
    with raises_modeled(sqs, "InvalidAttributeValue"):
        sqs.set_queue_attributes(QueueUrl=refused, Attributes={"RedrivePolicy": redrive_policy(dlq_arn, 2)})


def test_by_queue_accepts_up_to_10_source_queue_arns(sqs, make_queue):
    base = arn_of(sqs, make_queue()).rsplit(":", 1)[0]
    arns = [f"{base}:{unique_queue_name('s')}" for _ in range(10)]
    dlq = make_queue({"RedriveAllowPolicy": _allow("byQueue", arns)})
    assert json.loads(queue_attribute(sqs, dlq, "RedriveAllowPolicy") or "{}")["sourceQueueArns"] == arns
    with raises_modeled(sqs, "InvalidAttributeValue"):
        sqs.set_queue_attributes(
            QueueUrl=dlq, Attributes={"RedriveAllowPolicy": _allow("byQueue", arns + [f"{base}:eleventh"])})


@pytest.mark.parametrize("value", [
    "not json",
    "[]",
    '{"redrivePermission": "allowSome"}',
    '{}',
    '{"redrivePermission": "byQueue"}',
    '{"redrivePermission": "byQueue", "sourceQueueArns": []}',
    '{"redrivePermission": "byQueue", "sourceQueueArns": ["not-an-arn"]}',
    '{"redrivePermission": "allowAll", "sourceQueueArns": ["arn:aws:sqs:us-east-1:000000000000:a"]}',
    '{"redrivePermission": "denyAll", "sourceQueueArns": ["arn:aws:sqs:us-east-1:000000000000:a"]}',
])
def test_a_malformed_redrive_allow_policy_is_an_invalid_attribute_value(sqs, make_queue, value):
    with raises_modeled(sqs, "InvalidAttributeValue"):
        sqs.create_queue(QueueName=unique_queue_name("bad-allow"), Attributes={"RedriveAllowPolicy": value})
    dlq = make_queue()
    with raises_modeled(sqs, "InvalidAttributeValue"):
        sqs.set_queue_attributes(QueueUrl=dlq, Attributes={"RedriveAllowPolicy": value})
    assert queue_attribute(sqs, dlq, "RedriveAllowPolicy") is None


def test_an_empty_redrive_allow_policy_removes_it_and_allows_every_source_again(sqs, make_queue):
    dlq = make_queue({"RedriveAllowPolicy": _allow("denyAll")})
    sqs.set_queue_attributes(QueueUrl=dlq, Attributes={"RedriveAllowPolicy": ""})
    assert queue_attribute(sqs, dlq, "RedriveAllowPolicy") is None
    source = make_queue({"RedrivePolicy": redrive_policy(arn_of(sqs, dlq), 2)})
    assert _policy(sqs, source) is not None


# --- the move ------------------------------------------------------------------------


def test_a_message_is_moved_by_the_receive_after_max_receive_count_receives(sqs, make_queue, clock):
    source, dlq, _ = make_source_and_dlq(make_queue, sqs, 2)
    sqs.send_message(QueueUrl=source, MessageBody="poison")
    for expected_count in ("1", "2"):
        (msg,) = receive(sqs, source, VisibilityTimeout=10, **ALL)
        assert msg["Attributes"]["ApproximateReceiveCount"] == expected_count
        clock.advance(11)
    # visible again, still in the source: the move happens on a receive, not on expiry
    assert counts(sqs, source) == Counts(1, 0, 0)
    assert counts(sqs, dlq) == Counts(0, 0, 0)
    assert receive(sqs, source, VisibilityTimeout=10) == [], "the third receive moves it instead"
    assert counts(sqs, source) == Counts(0, 0, 0)
    assert counts(sqs, dlq) == Counts(1, 0, 0)


def test_a_message_is_delivered_max_receive_count_times_before_the_move(sqs, make_queue, clock):
    source, dlq, _ = make_source_and_dlq(make_queue, sqs, 5)
    sqs.send_message(QueueUrl=source, MessageBody="five tries")
    _fail(sqs, source, clock, 5)
    assert receive(sqs, source) == []
    (moved,) = receive(sqs, dlq, **ALL)
    assert moved["Body"] == "five tries"


def test_the_moved_message_keeps_its_id_body_attributes_sent_timestamp_and_receive_count(
        sqs, make_queue, clock):
    source, dlq, _ = make_source_and_dlq(make_queue, sqs, 2)
    attributes: dict[str, dict[str, Any]] = {
        "colour": {"DataType": "String", "StringValue": "blue"},
        "size": {"DataType": "Number", "StringValue": "42"},
        "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xfe"},
    }
    body = "payload with ünïcödé and emoji 🚀"
    sent = sqs.send_message(QueueUrl=source, MessageBody=body, MessageAttributes=attributes)
    first = _fail(sqs, source, clock, 2)
    assert receive(sqs, source) == []
    (moved,) = receive(sqs, dlq, **ALL)
    assert moved["MessageId"] == sent["MessageId"]
    assert moved["Body"] == body
    assert moved["MD5OfBody"] == md5_of_body(body)
    assert moved["MessageAttributes"] == attributes
    assert moved["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"] == md5_of_attributes(attributes)
    assert moved["Attributes"]["SentTimestamp"] == first["Attributes"]["SentTimestamp"]
    # carried over "across all queues": two receives in the source, this one in the DLQ
    assert moved["Attributes"]["ApproximateReceiveCount"] == "3"
    assert moved["ReceiptHandle"] != first["ReceiptHandle"]


def test_dead_letter_queue_source_arn_is_returned_when_asked_for(sqs, make_queue, clock):
    source, dlq, _ = make_source_and_dlq(make_queue, sqs, 1)
    source_arn = arn_of(sqs, source)
    sqs.send_message(QueueUrl=source, MessageBody="x")
    (in_source,) = receive(sqs, source, VisibilityTimeout=10, **ALL)
    assert "DeadLetterQueueSourceArn" not in in_source["Attributes"], "only messages in a DLQ carry it"
    clock.advance(11)
    assert receive(sqs, source) == []

    (by_all,) = receive(sqs, dlq, VisibilityTimeout=0, **ALL)
    assert by_all["Attributes"]["DeadLetterQueueSourceArn"] == source_arn
    (by_name,) = receive(sqs, dlq, VisibilityTimeout=0, MessageSystemAttributeNames=["DeadLetterQueueSourceArn"])
    assert by_name["Attributes"] == {"DeadLetterQueueSourceArn": source_arn}
    (legacy,) = receive(sqs, dlq, VisibilityTimeout=0, AttributeNames=["DeadLetterQueueSourceArn"])
    assert legacy["Attributes"] == {"DeadLetterQueueSourceArn": source_arn}
    (not_asked,) = receive(sqs, dlq, VisibilityTimeout=0)
    assert "Attributes" not in not_asked


def test_the_receive_that_moves_messages_still_delivers_the_others(sqs, make_queue, clock):
    source, dlq, _ = make_source_and_dlq(make_queue, sqs, 1)
    poison = send_many(sqs, source, 3, prefix="poison")
    got = receive(sqs, source, MaxNumberOfMessages=10, VisibilityTimeout=10)
    assert sorted(m["MessageId"] for m in got) == sorted(poison)
    clock.advance(11)
    fresh = sqs.send_message(QueueUrl=source, MessageBody="fresh")["MessageId"]
    got = receive(sqs, source, MaxNumberOfMessages=10, VisibilityTimeout=10)
    assert [m["MessageId"] for m in got] == [fresh]
    assert counts(sqs, dlq) == Counts(3, 0, 0)
    assert sorted(m["MessageId"] for m in drain(sqs, dlq)) == sorted(poison)


def test_a_message_over_max_receive_count_is_never_delivered_even_by_small_receives(sqs, make_queue, clock):
    source, dlq, _ = make_source_and_dlq(make_queue, sqs, 1)
    ids = send_many(sqs, source, 25)
    assert len(drain(sqs, source, VisibilityTimeout=10)) == 25
    clock.advance(11)
    for _ in range(60):
        assert receive(sqs, source, MaxNumberOfMessages=1) == []
        if counts(sqs, source) == Counts(0, 0, 0):
            break
    assert counts(sqs, dlq) == Counts(25, 0, 0)
    assert sorted(m["MessageId"] for m in drain(sqs, dlq)) == sorted(ids)


def test_a_message_in_flight_past_max_receive_count_is_not_moved_until_it_is_visible(sqs, make_queue, clock):
    source, dlq, _ = make_source_and_dlq(make_queue, sqs, 1)
    sqs.send_message(QueueUrl=source, MessageBody="slow consumer")
    (msg,) = receive(sqs, source, VisibilityTimeout=30)
    clock.advance(20)
    assert receive(sqs, source) == []
    assert counts(sqs, source) == Counts(0, 1, 0)
    assert counts(sqs, dlq) == Counts(0, 0, 0)
    sqs.delete_message(QueueUrl=source, ReceiptHandle=msg["ReceiptHandle"])
    clock.advance(20)
    assert receive(sqs, source) == []
    assert counts(sqs, source) == Counts(0, 0, 0)
    assert counts(sqs, dlq) == Counts(0, 0, 0), "a message deleted in time is never dead-lettered"


def test_a_receipt_handle_from_the_source_queue_cannot_delete_the_moved_message(sqs, make_queue, clock):
    source, dlq, _ = make_source_and_dlq(make_queue, sqs, 1)
    sqs.send_message(QueueUrl=source, MessageBody="x")
    (msg,) = receive(sqs, source, VisibilityTimeout=10)
    clock.advance(11)
    assert receive(sqs, source) == []
    assert counts(sqs, dlq) == Counts(1, 0, 0)
    sqs.delete_message(QueueUrl=source, ReceiptHandle=msg["ReceiptHandle"])  # a stale handle: accepted
    assert counts(sqs, dlq) == Counts(1, 0, 0)
    with raises_modeled(sqs, "ReceiptHandleIsInvalid"):
        sqs.delete_message(QueueUrl=dlq, ReceiptHandle=msg["ReceiptHandle"])
    assert counts(sqs, dlq) == Counts(1, 0, 0)
    (moved,) = receive(sqs, dlq)
    sqs.delete_message(QueueUrl=dlq, ReceiptHandle=moved["ReceiptHandle"])
    assert counts(sqs, dlq) == Counts(0, 0, 0)


def test_a_message_dead_lettered_from_a_standard_queue_keeps_its_retention_from_the_first_send(
        sqs, make_queue, clock):
    source, dlq, _ = make_source_and_dlq(make_queue, sqs, 1, dlq_attributes={"MessageRetentionPeriod": "300"})
    sqs.send_message(QueueUrl=source, MessageBody="old")
    receive(sqs, source, VisibilityTimeout=10)
    clock.advance(200)
    assert receive(sqs, source) == []
    assert counts(sqs, dlq) == Counts(1, 0, 0)
    clock.advance(95)  # 295 s after the send, 95 s after the move
    assert counts(sqs, dlq) == Counts(1, 0, 0)
    clock.advance(10)  # 305 s after the send: past the DLQ's 300 s counted from the send
    assert counts(sqs, dlq) == Counts(0, 0, 0)
    assert receive(sqs, dlq) == []


def test_a_message_dead_lettered_from_a_fifo_queue_counts_its_retention_from_the_move(
        sqs, make_queue, clock):
    source, dlq, _ = make_source_and_dlq(make_queue, sqs, 1, fifo=True,
                                         dlq_attributes={"MessageRetentionPeriod": "300"})
    send_fifo(sqs, source, "old")
    receive(sqs, source, VisibilityTimeout=10)
    clock.advance(200)
    assert receive(sqs, source) == []
    assert counts(sqs, dlq) == Counts(1, 0, 0)
    clock.advance(105)  # 305 s after the send, 105 s after the move
    assert counts(sqs, dlq) == Counts(1, 0, 0)
    clock.advance(190)  # 295 s after the move
    assert counts(sqs, dlq) == Counts(1, 0, 0)
    clock.advance(10)  # 305 s after the move
    assert counts(sqs, dlq) == Counts(0, 0, 0)
    assert receive(sqs, dlq) == []


def test_a_fifo_message_is_moved_with_its_group_and_the_group_carries_on(sqs, make_queue, clock):
    source, dlq, _ = make_source_and_dlq(make_queue, sqs, 1, fifo=True)
    source_arn = arn_of(sqs, source)
    first = send_fifo(sqs, source, "first", group="g")
    second = send_fifo(sqs, source, "second", group="g")
    (got,) = receive(sqs, source, VisibilityTimeout=10)
    assert got["MessageId"] == first
    clock.advance(11)
    got_now = receive(sqs, source, MaxNumberOfMessages=10, VisibilityTimeout=10, **ALL)
    assert [m["MessageId"] for m in got_now] == [second], "the poison message left its group"
    (moved,) = receive(sqs, dlq, **ALL)
    assert moved["MessageId"] == first
    assert moved["Body"] == "first"
    assert moved["Attributes"]["MessageGroupId"] == "g"
    assert moved["Attributes"]["DeadLetterQueueSourceArn"] == source_arn
    assert moved["Attributes"]["ApproximateReceiveCount"] == "2"


def test_a_fair_queue_moves_messages_past_their_max_receive_count_and_delivers_the_others_in_the_same_receive(
        sqs, make_queue, clock):
    source, dlq, _ = make_source_and_dlq(make_queue, sqs, 1)
    poison = {("a0", "a"), ("plain", None)}
    for body, group in sorted(poison, key=str):
        sqs.send_message(QueueUrl=source, MessageBody=body, **({"MessageGroupId": group} if group else {}))
    received: set[str] = set()
    for _ in range(3):  # a fair receive takes one message of each group a turn
        received |= {m["Body"] for m in receive(sqs, source, MaxNumberOfMessages=10, VisibilityTimeout=10)}
    assert received == {"a0", "plain"}
    clock.advance(11)
    sqs.send_message(QueueUrl=source, MessageBody="b0", MessageGroupId="b")
    # Received once, the most their policy allows: moved, and the fresh message delivered by the same receive.
    assert [m["Body"] for m in receive(sqs, source, MaxNumberOfMessages=10, VisibilityTimeout=10)] == ["b0"]
    assert counts(sqs, source) == Counts(0, 1, 0)
    moved = drain(sqs, dlq, **ALL)
    assert {(m["Body"], m["Attributes"].get("MessageGroupId")) for m in moved} == poison


def test_a_chain_of_dead_letter_queues_moves_a_message_twice(sqs, make_queue, clock):
    last = make_queue(name=unique_queue_name("dlq2"))
    last_arn = arn_of(sqs, last)
    middle = make_queue({"RedrivePolicy": redrive_policy(last_arn, 3)}, name=unique_queue_name("dlq1"))
    middle_arn = arn_of(sqs, middle)
    source = make_queue({"RedrivePolicy": redrive_policy(middle_arn, 1)}, name=unique_queue_name("src"))
    sent = sqs.send_message(QueueUrl=source, MessageBody="twice")["MessageId"]
    _fail(sqs, source, clock, 1)
    assert receive(sqs, source) == []
    assert counts(sqs, middle) == Counts(1, 0, 0)
    # the receive count is carried over: 1 from the source, so 2 more in the middle queue
    for expected in ("2", "3"):
        (msg,) = receive(sqs, middle, VisibilityTimeout=10, **ALL)
        assert msg["Attributes"]["ApproximateReceiveCount"] == expected
        assert msg["Attributes"]["DeadLetterQueueSourceArn"] == arn_of(sqs, source)
        clock.advance(11)
    assert receive(sqs, middle) == []
    assert counts(sqs, middle) == Counts(0, 0, 0)
    (final,) = receive(sqs, last, **ALL)
    assert final["MessageId"] == sent
    assert final["Body"] == "twice"
    assert final["Attributes"]["ApproximateReceiveCount"] == "4"
    assert final["Attributes"]["DeadLetterQueueSourceArn"] == middle_arn


def test_when_the_dead_letter_queue_is_deleted_messages_stay_in_the_source(sqs, make_queue, clock):
    source, dlq, _ = make_source_and_dlq(make_queue, sqs, 1)
    sent = sqs.send_message(QueueUrl=source, MessageBody="nowhere to go")["MessageId"]
    _fail(sqs, source, clock, 1)
    sqs.delete_queue(QueueUrl=dlq)
    (msg,) = receive(sqs, source, **ALL)
    assert msg["MessageId"] == sent
    assert msg["Attributes"]["ApproximateReceiveCount"] == "2"


def test_many_messages_are_dead_lettered_each_exactly_once(sqs, make_queue):
    source, dlq, _ = make_source_and_dlq(make_queue, sqs, 1)
    ids = send_many(sqs, source, 120)
    dead_letter_all(sqs, source, dlq, 120)
    got = [m["MessageId"] for m in drain(sqs, dlq)]
    assert len(got) == 120
    assert sorted(got) == sorted(ids)


@pytest.mark.server_process
def test_a_kill_during_dead_letter_moves_leaves_each_message_in_exactly_one_queue(
        tmp_path, serve_with_client, make_client):
    db = tmp_path / "dlq-kill.db"
    first, client = serve_with_client(db)
    dlq = client.create_queue(QueueName="kill-dlq")["QueueUrl"]
    source = client.create_queue(QueueName="kill-src", Attributes={
        "RedrivePolicy": redrive_policy(arn_of(client, dlq), 1)})["QueueUrl"]
    ids = send_many(client, source, 400)

    stop = threading.Event()
    errors: list[BaseException] = []

    def churn() -> None:
        worker = make_client(first.endpoint)
        while not stop.is_set():
            try:
                receive(worker, source, MaxNumberOfMessages=10, VisibilityTimeout=0)
            except (BotoCoreError, ClientError) as exc:  # the kill ends every request in flight
                errors.append(exc)
                return

    threads = [threading.Thread(target=churn, daemon=True) for _ in range(4)]
    for t in threads:
        t.start()
    wait_for(lambda: errors or counts(client, dlq).visible >= 100, "a hundred dead-letter moves", timeout=60)
    moved_before_kill = counts(client, dlq).visible
    first.kill()
    stop.set()
    for t in threads:
        t.join(timeout=10)
    assert 0 < moved_before_kill < 400, "the kill should land in the middle of the moves"

    second, client = serve_with_client(db)
    before = counts(client, source)
    after_dlq = counts(client, dlq)
    assert before.visible + before.in_flight + after_dlq.visible + after_dlq.in_flight == 400
    delivered = [m["MessageId"] for m in drain(client, source)]  # moves what is past the count
    dead = [m["MessageId"] for m in drain(client, dlq)]
    assert not set(delivered) & set(dead)
    assert sorted(delivered + dead) == sorted(ids)
    assert len(dead) >= moved_before_kill
    second.stop()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# --- ListDeadLetterSourceQueues --------------------------------------------------------


def test_list_dead_letter_source_queues_lists_the_queues_that_target_it(sqs, make_queue):
    dlq = make_queue()
    dlq_arn = arn_of(sqs, dlq)
    sources = sorted(make_queue({"RedrivePolicy": redrive_policy(dlq_arn, 3)}) for _ in range(3))
    other_dlq_arn = arn_of(sqs, make_queue())
    make_queue({"RedrivePolicy": redrive_policy(other_dlq_arn, 3)})
    make_queue()
    resp = sqs.list_dead_letter_source_queues(QueueUrl=dlq)
    assert sorted(resp["queueUrls"]) == sources
    assert "NextToken" not in resp


def test_list_dead_letter_source_queues_of_a_queue_nobody_uses_is_empty(sqs, make_queue):
    resp = sqs.list_dead_letter_source_queues(QueueUrl=make_queue())
    assert resp["queueUrls"] == []


def test_list_dead_letter_source_queues_pages_with_max_results_and_next_token(sqs, make_queue):
    dlq = make_queue()
    dlq_arn = arn_of(sqs, dlq)
    sources = sorted(make_queue({"RedrivePolicy": redrive_policy(dlq_arn, 3)}) for _ in range(5))
    pages = []
    token = None
    for _ in range(10):
        kwargs: dict[str, Any] = {"QueueUrl": dlq, "MaxResults": 2}
        if token:
            kwargs["NextToken"] = token
        resp = sqs.list_dead_letter_source_queues(**kwargs)
        pages.append(resp["queueUrls"])
        token = resp.get("NextToken")
        if not token:
            break
    assert [len(p) for p in pages] == [2, 2, 1]
    assert sorted(url for page in pages for url in page) == sources


def test_the_list_dead_letter_source_queues_paginator_walks_every_page(sqs, make_queue):
    dlq = make_queue()
    dlq_arn = arn_of(sqs, dlq)
    sources = sorted(make_queue({"RedrivePolicy": redrive_policy(dlq_arn, 3)}) for _ in range(7))
    paginator = sqs.get_paginator("list_dead_letter_source_queues")
    pages = list(paginator.paginate(QueueUrl=dlq, PaginationConfig={"PageSize": 3}))
    assert [len(p["queueUrls"]) for p in pages] == [3, 3, 1]
    assert sorted(url for p in pages for url in p["queueUrls"]) == sources


def test_a_queue_whose_redrive_policy_is_removed_or_that_is_deleted_is_no_longer_a_source(sqs, make_queue):
    dlq = make_queue()
    dlq_arn = arn_of(sqs, dlq)
    kept, removed, deleted = (make_queue({"RedrivePolicy": redrive_policy(dlq_arn, 3)}) for _ in range(3))
    sqs.set_queue_attributes(QueueUrl=removed, Attributes={"RedrivePolicy": ""})
    sqs.delete_queue(QueueUrl=deleted)
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == [kept]


def test_list_dead_letter_source_queues_of_an_unknown_queue_is_queue_does_not_exist(sqs, queue_url):
    with raises_modeled(sqs, "QueueDoesNotExist"):
        sqs.list_dead_letter_source_queues(QueueUrl=queue_url + "-missing")
