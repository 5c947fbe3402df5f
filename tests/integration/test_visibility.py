"""Visibility timeouts and ChangeMessageVisibility, and the order in which messages come back."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError
from support.sqs import Counts, assert_code, counts, raises_code, raises_modeled, receive

NOT_CHANGEABLE = ("InvalidParameterValue", "ReceiptHandleIsInvalid",
                  "AWS.SimpleQueueService.MessageNotInflight")


def _one(sqs, url, body="v", **receive_kwargs):
    sqs.send_message(QueueUrl=url, MessageBody=body)
    (msg,) = receive(sqs, url, **receive_kwargs)
    return msg


def test_a_received_message_is_invisible_for_the_default_30_seconds(sqs, queue_url, clock):
    msg = _one(sqs, queue_url)
    assert receive(sqs, queue_url) == []
    clock.advance(29)
    assert receive(sqs, queue_url) == []
    assert counts(sqs, queue_url) == Counts(0, 1, 0)
    clock.advance(1.5)
    assert counts(sqs, queue_url) == Counts(1, 0, 0)
    (again,) = receive(sqs, queue_url)
    assert again["MessageId"] == msg["MessageId"]
    assert again["ReceiptHandle"] != msg["ReceiptHandle"]


def test_the_queue_visibility_timeout_attribute_sets_the_default(sqs, make_queue, clock):
    url = make_queue({"VisibilityTimeout": "100"})
    _one(sqs, url)
    clock.advance(99)
    assert receive(sqs, url) == []
    clock.advance(2)
    assert len(receive(sqs, url)) == 1


def test_a_visibility_timeout_on_receive_overrides_the_queue_default(sqs, queue_url, clock):
    _one(sqs, queue_url, VisibilityTimeout=5)
    clock.advance(4)
    assert receive(sqs, queue_url) == []
    clock.advance(2)
    assert len(receive(sqs, queue_url, VisibilityTimeout=120)) == 1
    clock.advance(60)
    assert receive(sqs, queue_url) == [], "the 120 s of the second receive still run"


def test_a_receive_with_visibility_timeout_zero_leaves_the_message_visible(sqs, queue_url):
    first = _one(sqs, queue_url, VisibilityTimeout=0)
    (second,) = receive(sqs, queue_url)
    assert second["MessageId"] == first["MessageId"]


def test_a_visibility_timeout_on_receive_is_not_remembered_for_the_next_receive(
        sqs, queue_url, clock):
    _one(sqs, queue_url, VisibilityTimeout=300)
    clock.advance(301)
    assert len(receive(sqs, queue_url)) == 1  # default 30 s this time
    clock.advance(31)
    assert len(receive(sqs, queue_url)) == 1


def test_change_message_visibility_counts_the_new_timeout_from_the_call(sqs, queue_url, clock):
    msg = _one(sqs, queue_url, VisibilityTimeout=30)
    clock.advance(20)
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"],
                                  VisibilityTimeout=20)
    clock.advance(15)  # 35 s after the receive: the original 30 s would have ended
    assert receive(sqs, queue_url) == []
    clock.advance(6)  # 41 s after the receive, 21 s after the change
    assert len(receive(sqs, queue_url)) == 1


def test_change_message_visibility_can_shorten_the_timeout(sqs, queue_url, clock):
    msg = _one(sqs, queue_url, VisibilityTimeout=600)
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"],
                                  VisibilityTimeout=10)
    clock.advance(11)
    assert len(receive(sqs, queue_url)) == 1


def test_change_message_visibility_zero_makes_the_message_visible_at_once(sqs, queue_url):
    msg = _one(sqs, queue_url, VisibilityTimeout=600)
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"],
                                  VisibilityTimeout=0)
    assert counts(sqs, queue_url) == Counts(1, 0, 0)
    (again,) = receive(sqs, queue_url, MessageSystemAttributeNames=["ApproximateReceiveCount"])
    assert again["MessageId"] == msg["MessageId"]
    assert again["Attributes"]["ApproximateReceiveCount"] == "2"


def test_a_changed_visibility_is_not_remembered_for_the_next_receive(sqs, queue_url, clock):
    msg = _one(sqs, queue_url)
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"],
                                  VisibilityTimeout=1000)
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"],
                                  VisibilityTimeout=0)
    assert len(receive(sqs, queue_url)) == 1
    clock.advance(31)  # the queue default (30 s), not 1000 s
    assert len(receive(sqs, queue_url)) == 1


def test_change_message_visibility_with_the_latest_handle_after_its_visibility_ended_hides_it_again(
        sqs, queue_url, clock):
    msg = _one(sqs, queue_url, VisibilityTimeout=5)
    clock.advance(6)
    assert counts(sqs, queue_url) == Counts(1, 0, 0)
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"],
                                  VisibilityTimeout=60)  # AWS: still the latest handle
    assert counts(sqs, queue_url) == Counts(0, 1, 0)
    assert receive(sqs, queue_url) == []
    clock.advance(61)
    assert [m["MessageId"] for m in receive(sqs, queue_url)] == [msg["MessageId"]]


def test_change_message_visibility_after_making_it_visible_hides_it_again(sqs, queue_url):
    msg = _one(sqs, queue_url)
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"],
                                  VisibilityTimeout=0)
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"],
                                  VisibilityTimeout=30)
    assert counts(sqs, queue_url) == Counts(0, 1, 0)


def test_a_total_visibility_beyond_12_hours_from_the_receive_is_refused(sqs, queue_url, clock):
    msg = _one(sqs, queue_url, VisibilityTimeout=60)
    clock.advance(10)
    with raises_code("InvalidParameterValue"):
        sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"],
                                      VisibilityTimeout=43200)
    # The refused call changed nothing: the message still comes back after its 60 s.
    clock.advance(51)
    assert len(receive(sqs, queue_url)) == 1


def test_extending_visibility_up_to_12_hours_from_the_receive_is_allowed(sqs, queue_url, clock):
    msg = _one(sqs, queue_url, VisibilityTimeout=60)
    clock.advance(10)
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"],
                                  VisibilityTimeout=43180)
    clock.advance(60)
    assert receive(sqs, queue_url) == []
    assert counts(sqs, queue_url) == Counts(0, 1, 0)


def test_change_message_visibility_to_12_hours_right_after_the_receive_is_allowed(
        sqs, queue_url, clock):
    msg = _one(sqs, queue_url, VisibilityTimeout=60)
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"],
                                  VisibilityTimeout=43200)
    clock.advance(3600)
    assert receive(sqs, queue_url) == []


def test_a_visibility_of_12_hours_on_receive_is_allowed(sqs, queue_url, clock):
    _one(sqs, queue_url, VisibilityTimeout=43200)
    clock.advance(3600)
    assert receive(sqs, queue_url) == []


@pytest.mark.parametrize("value", [-1, 43201])
def test_change_message_visibility_out_of_range_is_refused_and_changes_nothing(
        sqs, queue_url, clock, value):
    msg = _one(sqs, queue_url, VisibilityTimeout=20)
    with raises_code("InvalidParameterValue"):
        sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"],
                                      VisibilityTimeout=value)
    clock.advance(21)
    assert len(receive(sqs, queue_url)) == 1


def test_change_message_visibility_with_a_garbled_handle_fails_with_receipt_handle_is_invalid(
        sqs, queue_url):
    with raises_modeled(sqs, "ReceiptHandleIsInvalid"):
        sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle="not-a-handle",
                                      VisibilityTimeout=10)


def test_a_deleted_message_cannot_be_made_visible_again(sqs, queue_url):
    msg = _one(sqs, queue_url)
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"])
    try:
        sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"],
                                      VisibilityTimeout=0)
    except ClientError as e:
        # AWS answers InvalidParameterValue ("Message does not exist or is not available
        # for visibility timeout change"); the modeled errors are acceptable too.
        assert_code(e, *NOT_CHANGEABLE)
    assert counts(sqs, queue_url) == Counts(0, 0, 0)
    assert receive(sqs, queue_url) == []


# --- the order of redelivery: among visible messages the older send comes first (as AWS answers) ----


def test_a_message_whose_visibility_ended_comes_back_before_one_sent_while_it_was_hidden(sqs, queue_url, clock):
    sqs.send_message(QueueUrl=queue_url, MessageBody="test1")
    [first] = receive(sqs, queue_url, VisibilityTimeout=3)
    clock.advance(1.5)
    sqs.send_message(QueueUrl=queue_url, MessageBody="test2")
    clock.advance(3)
    [again] = receive(sqs, queue_url)
    assert (again["Body"], again["MessageId"]) == ("test1", first["MessageId"])
    [later] = receive(sqs, queue_url)
    assert later["Body"] == "test2"


def test_a_message_made_visible_again_comes_back_before_the_backlog_sent_with_it(sqs, queue_url, clock):
    sqs.send_message_batch(QueueUrl=queue_url, Entries=[{"Id": b, "MessageBody": b} for b in ("a", "b", "c")])
    [a] = receive(sqs, queue_url, VisibilityTimeout=60)
    assert a["Body"] == "a"
    clock.advance(1)  # b and c have been visible for a second when a becomes visible again
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=a["ReceiptHandle"], VisibilityTimeout=0)
    assert [m["Body"] for m in receive(sqs, queue_url, VisibilityTimeout=60)] == ["a"]
    assert [m["Body"] for m in receive(sqs, queue_url, VisibilityTimeout=60)] == ["b"]
