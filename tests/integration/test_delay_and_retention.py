"""Delivery delay (queue and per message) and message retention."""

from __future__ import annotations

import pytest
from support.sqs import Counts, counts, raises_code, receive, receive_all

# --- delay -------------------------------------------------------------------------------


def test_a_queue_delay_holds_every_new_message_back(sqs, make_queue, clock):
    url = make_queue({"DelaySeconds": "10"})
    sqs.send_message(QueueUrl=url, MessageBody="held")
    assert receive(sqs, url) == []
    assert counts(sqs, url) == Counts(0, 0, 1)
    clock.advance(9)
    assert receive(sqs, url) == []
    clock.advance(1.5)
    assert counts(sqs, url) == Counts(1, 0, 0)
    assert [m["Body"] for m in receive(sqs, url)] == ["held"]


def test_a_per_message_delay_holds_just_that_message(sqs, queue_url, clock):
    sqs.send_message(QueueUrl=queue_url, MessageBody="later", DelaySeconds=20)
    sqs.send_message(QueueUrl=queue_url, MessageBody="now")
    assert counts(sqs, queue_url) == Counts(1, 0, 1)
    assert [m["Body"] for m in receive_all(sqs, queue_url)] == ["now"]
    clock.advance(21)
    assert [m["Body"] for m in receive_all(sqs, queue_url)] == ["later"]


def test_a_per_message_delay_overrides_the_queue_delay(sqs, make_queue, clock):
    url = make_queue({"DelaySeconds": "60"})
    sqs.send_message(QueueUrl=url, MessageBody="short", DelaySeconds=5)
    sqs.send_message(QueueUrl=url, MessageBody="default")
    clock.advance(6)
    assert [m["Body"] for m in receive_all(sqs, url, VisibilityTimeout=3600)] == ["short"]
    clock.advance(55)
    assert [m["Body"] for m in receive_all(sqs, url)] == ["default"]


def test_a_per_message_delay_of_zero_overrides_a_queue_delay(sqs, make_queue):
    url = make_queue({"DelaySeconds": "60"})
    sqs.send_message(QueueUrl=url, MessageBody="immediate", DelaySeconds=0)
    assert [m["Body"] for m in receive(sqs, url)] == ["immediate"]


def test_the_maximum_delay_of_900_seconds_is_honoured(sqs, queue_url, clock):
    sqs.send_message(QueueUrl=queue_url, MessageBody="fifteen minutes", DelaySeconds=900)
    clock.advance(899)
    assert receive(sqs, queue_url) == []
    clock.advance(2)
    assert len(receive(sqs, queue_url)) == 1


@pytest.mark.parametrize("delay", [-1, 901])
def test_a_per_message_delay_out_of_range_is_rejected(sqs, queue_url, delay):
    with raises_code("InvalidParameterValue"):
        sqs.send_message(QueueUrl=queue_url, MessageBody="x", DelaySeconds=delay)
    assert counts(sqs, queue_url) == Counts(0, 0, 0)


def test_changing_the_queue_delay_does_not_move_messages_already_sent(sqs, make_queue, clock):
    url = make_queue({"DelaySeconds": "30"})
    sqs.send_message(QueueUrl=url, MessageBody="old delay")
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "0"})
    sqs.send_message(QueueUrl=url, MessageBody="no delay")
    assert [m["Body"] for m in receive_all(sqs, url, VisibilityTimeout=3600)] == ["no delay"]
    clock.advance(31)
    assert [m["Body"] for m in receive_all(sqs, url)] == ["old delay"]


def test_a_delayed_message_reports_its_sent_timestamp_from_the_send(sqs, queue_url, clock):
    sent_at = clock.now_ms()
    sqs.send_message(QueueUrl=queue_url, MessageBody="d", DelaySeconds=10)
    clock.advance(11)
    (msg,) = receive(sqs, queue_url, MessageSystemAttributeNames=["SentTimestamp"])
    assert abs(int(msg["Attributes"]["SentTimestamp"]) - sent_at) < 1000


# --- retention -------------------------------------------------------------------------------


def test_a_message_past_the_retention_period_is_never_delivered(sqs, make_queue, clock):
    url = make_queue({"MessageRetentionPeriod": "60"})
    sqs.send_message(QueueUrl=url, MessageBody="perishable")
    clock.advance(61)
    assert receive_all(sqs, url) == []
    assert counts(sqs, url) == Counts(0, 0, 0)


def test_a_message_within_the_retention_period_is_still_delivered(sqs, make_queue, clock):
    url = make_queue({"MessageRetentionPeriod": "60"})
    sqs.send_message(QueueUrl=url, MessageBody="fresh")
    clock.advance(59)
    assert [m["Body"] for m in receive(sqs, url)] == ["fresh"]


def test_an_in_flight_message_past_retention_does_not_come_back(sqs, make_queue, clock):
    url = make_queue({"MessageRetentionPeriod": "60"})
    sqs.send_message(QueueUrl=url, MessageBody="received then expired")
    assert len(receive(sqs, url, VisibilityTimeout=120)) == 1
    clock.advance(121)
    assert receive_all(sqs, url) == []
    assert counts(sqs, url) == Counts(0, 0, 0)


def test_retention_counts_from_the_send_not_from_the_end_of_the_delay(sqs, make_queue, clock):
    url = make_queue({"MessageRetentionPeriod": "60"})
    sqs.send_message(QueueUrl=url, MessageBody="delayed past its life", DelaySeconds=120)
    clock.advance(121)
    assert receive_all(sqs, url) == []
    assert counts(sqs, url) == Counts(0, 0, 0)


def test_retention_counts_from_the_send_not_from_the_last_receive(sqs, make_queue, clock):
    url = make_queue({"MessageRetentionPeriod": "60"})
    sqs.send_message(QueueUrl=url, MessageBody="m")
    clock.advance(40)
    assert len(receive(sqs, url, VisibilityTimeout=10)) == 1
    clock.advance(11)  # 51 s after the send: back, and still alive
    assert len(receive(sqs, url, VisibilityTimeout=10)) == 1
    clock.advance(11)  # 62 s after the send: gone
    assert receive_all(sqs, url) == []


def test_lowering_the_retention_period_expires_older_messages(sqs, queue_url, clock):
    sqs.send_message(QueueUrl=queue_url, MessageBody="old")
    clock.advance(120)
    sqs.send_message(QueueUrl=queue_url, MessageBody="young")
    sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"MessageRetentionPeriod": "60"})
    assert [m["Body"] for m in receive_all(sqs, queue_url)] == ["young"]


def test_expired_messages_in_one_queue_leave_another_queue_alone(sqs, make_queue, clock):
    short = make_queue({"MessageRetentionPeriod": "60"})
    long = make_queue()
    sqs.send_message(QueueUrl=short, MessageBody="short")
    sqs.send_message(QueueUrl=long, MessageBody="long")
    clock.advance(61)
    assert receive_all(sqs, short) == []
    assert [m["Body"] for m in receive_all(sqs, long)] == ["long"]
