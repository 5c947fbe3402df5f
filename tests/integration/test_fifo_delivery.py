"""FIFO delivery: strict order within a message group, a group held while its
first message is in flight (observed on AWS: later ones still in flight stay hidden when it is
visible again), failed messages before later ones, long polls on a held group,
ReceiveRequestAttemptId, stale receipt handles (the FIFO errors of DeleteMessage and
ChangeMessageVisibility), and FIFO dead-letter queues.

Every test runs against the shared server on its manual clock: visibility timeouts and the
5-minute attempt window pass with `clock.advance`, never with sleeps.
"""

from __future__ import annotations


import pytest
from botocore.exceptions import ClientError
from support.fifo import (
    PUNCTUATION,
    LongPoll,
    body,
    delete_all,
    got,
    make_fifo,
    rcv,
    release,
    send,
    send_batch,
    send_in_turn,
)
from support.sqs import Counts, assert_code, counts, raises_code, raises_modeled
from support.sqs import arn_of, redrive_policy

EXPIRED = "The receipt handle has expired."
NOT_CHANGEABLE = ("InvalidParameterValue", "ReceiptHandleIsInvalid",
                  "AWS.SimpleQueueService.MessageNotInflight")


# --- ordering within a message group -----------------------------------------------------------


def test_messages_of_one_group_are_received_one_by_one_in_send_order(sqs, make_queue):
    url = make_fifo(make_queue)
    send_in_turn(sqs, url, ["g"], 8)
    order = []
    for _ in range(8):
        [message] = rcv(sqs, url, 1)
        order.append(message["Body"])
        delete_all(sqs, url, [message])
    assert order == [body("g", i) for i in range(8)]
    assert rcv(sqs, url) == []


def test_one_receive_returns_several_messages_of_one_group_in_order(sqs, make_queue):
    url = make_fifo(make_queue)
    send_batch(sqs, url, [("g", i) for i in range(10)])
    assert got(rcv(sqs, url, 4)) == ["g:0", "g:1", "g:2", "g:3"]


def test_one_receive_returns_each_groups_messages_together_in_order(sqs, make_queue):
    url = make_fifo(make_queue)
    send_in_turn(sqs, url, ["a", "b", "c"], 3)  # a:0 b:0 c:0 a:1 b:1 …
    assert got(rcv(sqs, url)) == ["a:0", "a:1", "a:2", "b:0", "b:1", "b:2", "c:0", "c:1", "c:2"]


def test_a_receive_returns_as_many_messages_of_one_group_as_it_can_before_taking_another(sqs, make_queue):
    # AWS, "FIFO queue delivery logic": "Amazon SQS first attempts to return as many messages with the
    # same message group ID as possible. This allows other consumers to process messages with a
    # different message group ID." AWS's developer guide says so.
    url = make_fifo(make_queue)
    send_in_turn(sqs, url, ["a", "b", "c"], 5)  # a:0 b:0 c:0 a:1 b:1 c:1 …
    assert got(rcv(sqs, url, 5)) == ["a:0", "a:1", "a:2", "a:3", "a:4"]
    assert got(rcv(sqs, url, 7)) == ["b:0", "b:1", "b:2", "b:3", "b:4", "c:0", "c:1"]


def test_while_a_message_of_a_group_is_in_flight_no_other_message_of_that_group_is_delivered(sqs, make_queue):
    url = make_fifo(make_queue)
    send_in_turn(sqs, url, ["a", "b"], 3)
    [a0] = rcv(sqs, url, 1)
    assert a0["Body"] == "a:0"
    assert got(rcv(sqs, url)) == ["b:0", "b:1", "b:2"], "the other group is not held up"
    assert rcv(sqs, url) == []
    assert counts(sqs, url) == Counts(2, 4, 0)
    delete_all(sqs, url, [a0])
    assert got(rcv(sqs, url)) == ["a:1", "a:2"]


def test_a_released_first_message_is_received_alone_while_a_later_one_of_its_group_is_in_flight(sqs, make_queue):
    url = make_fifo(make_queue)
    send_in_turn(sqs, url, ["g"], 3)
    first, second = rcv(sqs, url, 2)
    release(sqs, url, first)  # g:0 is visible again, g:1 is still in flight (observed on AWS)
    assert got(rcv(sqs, url)) == ["g:0"], "the group is available again, but g:1 and g:2 stay behind g:1"
    assert rcv(sqs, url) == []
    delete_all(sqs, url, [second])
    assert rcv(sqs, url) == [], "g:0 is in flight again"


def test_a_group_stays_held_while_a_middle_message_has_its_visibility_extended(sqs, make_queue, clock):
    url = make_fifo(make_queue, VisibilityTimeout="30")
    send_in_turn(sqs, url, ["g"], 4)
    m0, m1, m2 = rcv(sqs, url, 3)
    delete_all(sqs, url, [m0, m2])
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=m1["ReceiptHandle"], VisibilityTimeout=120)
    clock.advance(31)
    assert rcv(sqs, url) == [], "g:3 waits for g:1"
    clock.advance(90)
    assert got(rcv(sqs, url)) == ["g:1", "g:3"]


def test_messages_whose_visibility_expired_come_back_before_later_ones_of_their_group(sqs, make_queue, clock):
    url = make_fifo(make_queue, VisibilityTimeout="30")
    send_in_turn(sqs, url, ["g"], 5)
    assert got(rcv(sqs, url, 2)) == ["g:0", "g:1"]
    clock.advance(31)
    again = rcv(sqs, url)
    assert got(again) == ["g:0", "g:1", "g:2", "g:3", "g:4"]
    assert [m["Attributes"]["ApproximateReceiveCount"] for m in again] == ["2", "2", "1", "1", "1"]


def test_messages_released_with_visibility_zero_come_back_before_later_ones(sqs, make_queue):
    url = make_fifo(make_queue)
    send_in_turn(sqs, url, ["g"], 5)
    received = rcv(sqs, url, 3)
    assert got(received) == ["g:0", "g:1", "g:2"]
    delete_all(sqs, url, received[:1])
    for message in received[1:]:
        release(sqs, url, message)
    again = rcv(sqs, url)
    assert got(again) == ["g:1", "g:2", "g:3", "g:4"]
    assert [m["Attributes"]["ApproximateReceiveCount"] for m in again] == ["2", "2", "1", "1"]


def test_a_deleted_group_head_releases_the_next_message(sqs, make_queue):
    url = make_fifo(make_queue)
    send_in_turn(sqs, url, ["g"], 2)
    [head] = rcv(sqs, url, 1)
    delete_all(sqs, url, [head])
    assert got(rcv(sqs, url)) == ["g:1"]


def test_a_blocked_group_lets_receives_reach_groups_sent_after_it(sqs, make_queue):
    url = make_fifo(make_queue)
    send_batch(sqs, url, [("big", i) for i in range(10)])
    send_batch(sqs, url, [("big", i) for i in range(10, 20)])
    send(sqs, url, "small", 0)
    assert got(rcv(sqs, url, 1)) == ["big:0"]
    assert got(rcv(sqs, url, 10)) == ["small:0"]


# --- long polls on a held group --------------------------------------------------------------

def test_a_long_poll_on_a_held_group_returns_the_next_message_once_the_holder_deletes(
        sqs, make_queue, make_client, server, clock):
    url = make_fifo(make_queue)
    send_in_turn(sqs, url, ["g"], 2)
    [head] = rcv(sqs, url, 1)
    pending = clock.timers()
    poll = LongPoll(make_client(server.endpoint), url, visibility=30)
    clock.wait_for_timers(pending + 1)  # it waits on the held group: only the delete's wake-up can feed it
    delete_all(sqs, url, [head])
    assert got(poll.join()) == ["g:1"]


def test_a_long_poll_on_a_held_group_returns_the_messages_when_the_visibility_ends(
        sqs, make_queue, make_client, server, clock):
    url = make_fifo(make_queue)
    send_in_turn(sqs, url, ["g"], 2)
    rcv(sqs, url, 1, VisibilityTimeout=30)
    pending = clock.timers()
    poll = LongPoll(make_client(server.endpoint), url, visibility=30)
    clock.wait_for_timers(pending + 1)
    clock.advance(31)
    assert got(poll.join()) == ["g:0", "g:1"]


# --- ReceiveRequestAttemptId -------------------------------------------------------------------


def test_a_retried_receive_with_the_same_attempt_id_returns_the_same_messages_and_handles(sqs, make_queue):
    url = make_fifo(make_queue)
    send_in_turn(sqs, url, ["a", "b"], 2)
    first = rcv(sqs, url, 3, ReceiveRequestAttemptId="attempt-1")
    assert got(first) == ["a:0", "a:1", "b:0"]
    retry = rcv(sqs, url, 3, ReceiveRequestAttemptId="attempt-1")
    assert [(m["MessageId"], m["ReceiptHandle"], m["Body"]) for m in retry] == \
        [(m["MessageId"], m["ReceiptHandle"], m["Body"]) for m in first]
    assert rcv(sqs, url) == [], "the retry delivers nothing new (b:1 waits for b:0)"
    delete_all(sqs, url, retry)
    assert got(rcv(sqs, url)) == ["b:1"]


def test_a_retried_receive_hides_its_messages_again_for_the_visibility_timeout(sqs, make_queue, clock):
    url = make_fifo(make_queue, VisibilityTimeout="30")
    send(sqs, url, "g", 0)
    [first] = rcv(sqs, url, ReceiveRequestAttemptId="again")
    clock.advance(20)
    [retry] = rcv(sqs, url, ReceiveRequestAttemptId="again")
    assert retry["ReceiptHandle"] == first["ReceiptHandle"]
    clock.advance(20)  # 40 s after the receive, 20 s after the retry
    assert rcv(sqs, url) == []
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
    assert counts(sqs, url) == Counts(0, 0, 0)


def test_a_different_attempt_id_is_a_new_receive(sqs, make_queue):
    url = make_fifo(make_queue)
    send_in_turn(sqs, url, ["a", "b"], 1)
    assert got(rcv(sqs, url, 1, ReceiveRequestAttemptId="one")) == ["a:0"]
    assert got(rcv(sqs, url, 1, ReceiveRequestAttemptId="two")) == ["b:0"]
    assert rcv(sqs, url, 1, ReceiveRequestAttemptId="three") == []


def test_an_attempt_id_is_forgotten_after_five_minutes(sqs, make_queue, clock):
    url = make_fifo(make_queue)
    send(sqs, url, "g", 0)
    assert len(rcv(sqs, url, ReceiveRequestAttemptId="old", VisibilityTimeout=43200)) == 1
    clock.advance(299)
    assert len(rcv(sqs, url, ReceiveRequestAttemptId="old", VisibilityTimeout=43200)) == 1
    clock.advance(2)  # 301 s after the first receive (the retry does not extend the attempt)
    assert rcv(sqs, url, ReceiveRequestAttemptId="old") == [], "a fresh receive: g:0 is still in flight"


def test_a_retried_attempt_does_not_take_back_messages_another_receive_now_holds(sqs, make_queue, clock):
    url = make_fifo(make_queue)
    send(sqs, url, "g", 0)
    [first] = rcv(sqs, url, ReceiveRequestAttemptId="slow", VisibilityTimeout=10)
    clock.advance(11)
    [other] = rcv(sqs, url)
    assert other["ReceiptHandle"] != first["ReceiptHandle"]
    assert rcv(sqs, url, ReceiveRequestAttemptId="slow") == []
    sqs.delete_message(QueueUrl=url, ReceiptHandle=other["ReceiptHandle"])


@pytest.mark.parametrize("attempt_id", ["a" * 129, "has space", "caf\u00e9"])
def test_an_attempt_id_must_be_1_to_128_printable_ascii_characters(sqs, make_queue, attempt_id):
    url = make_fifo(make_queue)
    send(sqs, url, "g", 0)
    with raises_code("InvalidParameterValue"):
        rcv(sqs, url, ReceiveRequestAttemptId=attempt_id)
    assert len(rcv(sqs, url, ReceiveRequestAttemptId=(PUNCTUATION * 4)[:128])) == 1


# --- stale receipt handles --------------------------------------------------------------------


def assert_expired(info, handle):
    """AWS (observed): InvalidParameterValue naming the handle, not ReceiptHandleIsInvalid."""
    assert_code(info.value, "InvalidParameterValue")
    assert info.value.response["Error"]["Message"] == expired(handle)


def expired(handle):
    return f"Value {handle} for parameter ReceiptHandle is invalid. Reason: {EXPIRED}"


def test_a_receipt_handle_from_before_a_later_receive_cannot_delete(sqs, make_queue, clock):
    url = make_fifo(make_queue, VisibilityTimeout="30")
    send(sqs, url, "g", 0)
    [old] = rcv(sqs, url)
    clock.advance(31)
    [current] = rcv(sqs, url)
    with pytest.raises(ClientError) as info:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=old["ReceiptHandle"])
    assert_expired(info, old["ReceiptHandle"])
    assert counts(sqs, url) == Counts(0, 1, 0), "the current receive still holds it"
    sqs.delete_message(QueueUrl=url, ReceiptHandle=current["ReceiptHandle"])
    assert counts(sqs, url) == Counts(0, 0, 0)


def test_a_delete_after_the_visibility_timeout_fails_and_the_message_stays(sqs, make_queue, clock):
    url = make_fifo(make_queue, VisibilityTimeout="30")
    send(sqs, url, "g", 0)
    [message] = rcv(sqs, url)
    clock.advance(31)
    with pytest.raises(ClientError) as info:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert_expired(info, message["ReceiptHandle"])
    assert got(rcv(sqs, url)) == ["g:0"]


def test_deleting_a_deleted_message_again_fails_as_expired(sqs, make_queue):
    url = make_fifo(make_queue)
    send(sqs, url, "g", 0)
    [message] = rcv(sqs, url)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    with pytest.raises(ClientError) as info:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert_expired(info, message["ReceiptHandle"])


def test_a_handle_released_with_visibility_zero_cannot_delete(sqs, make_queue):
    url = make_fifo(make_queue)
    send(sqs, url, "g", 0)
    [message] = rcv(sqs, url)
    release(sqs, url, message)
    with pytest.raises(ClientError) as info:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert_expired(info, message["ReceiptHandle"])
    assert got(rcv(sqs, url)) == ["g:0"]


def test_a_stale_handle_in_a_fifo_delete_batch_fails_only_that_entry(sqs, make_queue, clock):
    url = make_fifo(make_queue, VisibilityTimeout="30")
    send_in_turn(sqs, url, ["a", "b"], 1)
    stale, fresh = rcv(sqs, url)
    release(sqs, url, stale)
    resp = sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": "stale", "ReceiptHandle": stale["ReceiptHandle"]},
        {"Id": "fresh", "ReceiptHandle": fresh["ReceiptHandle"]},
    ])
    assert [e["Id"] for e in resp["Successful"]] == ["fresh"]
    [failed] = resp["Failed"]
    assert (failed["Id"], failed["Code"], failed["SenderFault"], failed["Message"]) == \
        ("stale", "InvalidParameterValue", True, expired(stale["ReceiptHandle"]))
    assert got(rcv(sqs, url)) == ["a:0"]


def test_a_malformed_receipt_handle_is_invalid_on_a_fifo_queue(sqs, make_queue):
    url = make_fifo(make_queue)
    with raises_modeled(sqs, "ReceiptHandleIsInvalid"):
        sqs.delete_message(QueueUrl=url, ReceiptHandle="not-a-handle")


def test_a_handle_of_another_fifo_queue_is_invalid(sqs, make_queue):
    url, other = make_fifo(make_queue), make_fifo(make_queue)
    send(sqs, other, "g", 0)
    [message] = rcv(sqs, other)
    with raises_modeled(sqs, "ReceiptHandleIsInvalid"):
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert counts(sqs, other) == Counts(0, 1, 0)


def test_a_stale_handle_cannot_change_the_visibility_of_the_current_receive(sqs, make_queue, clock):
    url = make_fifo(make_queue, VisibilityTimeout="30")
    send(sqs, url, "g", 0)
    [old] = rcv(sqs, url)
    clock.advance(31)
    [current] = rcv(sqs, url)
    with pytest.raises(ClientError) as info:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=old["ReceiptHandle"], VisibilityTimeout=0)
    assert info.value.response["Error"]["Code"] in NOT_CHANGEABLE
    assert rcv(sqs, url) == [], "the current receive still holds the message"
    sqs.delete_message(QueueUrl=url, ReceiptHandle=current["ReceiptHandle"])


# --- dead-letter queues ------------------------------------------------------------------------


def fifo_with_dead_letter_queue(sqs, make_queue, max_receive_count, **dead_letter_attributes):
    dead_letter = make_fifo(make_queue, "dlq", **dead_letter_attributes)
    source = make_fifo(make_queue, "source", VisibilityTimeout="30",
                       RedrivePolicy=redrive_policy(arn_of(sqs, dead_letter), max_receive_count))
    return source, dead_letter


def test_a_fifo_dead_letter_queue_keeps_each_groups_order(sqs, make_queue, clock):
    source, dead_letter = fifo_with_dead_letter_queue(sqs, make_queue, 2)
    sent = send_in_turn(sqs, source, ["a", "b"], 3)
    for _ in range(2):
        assert len(rcv(sqs, source)) == 6
        clock.advance(31)
    assert rcv(sqs, source) == [], "the third receive moves them all instead of delivering"
    moved = rcv(sqs, dead_letter)
    assert got(moved) == ["a:0", "a:1", "a:2", "b:0", "b:1", "b:2"]
    sequence = {s["MessageId"]: s["SequenceNumber"] for s in sent}
    for message in moved:
        attributes = message["Attributes"]
        assert attributes["MessageGroupId"] == message["Body"][0]
        assert attributes["ApproximateReceiveCount"] == "3", "the count carries over and this receive adds one"
        assert attributes["DeadLetterQueueSourceArn"] == arn_of(sqs, source)
        assert attributes["MessageDeduplicationId"]
        assert message["MessageId"] in sequence
    dead_letter_sequence = [int(m["Attributes"]["SequenceNumber"]) for m in moved[:3]]
    assert dead_letter_sequence == sorted(dead_letter_sequence)


def test_a_fifo_dead_letter_queue_holds_a_group_while_one_of_its_messages_is_in_flight(sqs, make_queue, clock):
    source, dead_letter = fifo_with_dead_letter_queue(sqs, make_queue, 1)
    send_in_turn(sqs, source, ["a", "b"], 2)
    rcv(sqs, source)
    clock.advance(31)
    assert rcv(sqs, source) == []
    [a0] = rcv(sqs, dead_letter, 1)
    assert a0["Body"] == "a:0"
    assert got(rcv(sqs, dead_letter)) == ["b:0", "b:1"]
    delete_all(sqs, dead_letter, [a0])
    assert got(rcv(sqs, dead_letter)) == ["a:1"]


def test_only_the_messages_past_max_receive_count_move_and_the_rest_keep_their_order(sqs, make_queue, clock):
    source, dead_letter = fifo_with_dead_letter_queue(sqs, make_queue, 1)
    send_in_turn(sqs, source, ["g"], 4)
    assert got(rcv(sqs, source, 2)) == ["g:0", "g:1"]
    clock.advance(31)
    assert got(rcv(sqs, source)) == ["g:2", "g:3"]
    assert got(rcv(sqs, dead_letter)) == ["g:0", "g:1"]


def test_a_message_moved_to_a_fifo_dead_letter_queue_counts_its_retention_from_the_move(sqs, make_queue, clock):
    source, dead_letter = fifo_with_dead_letter_queue(sqs, make_queue, 1, MessageRetentionPeriod="120")
    send(sqs, source, "g", 0)
    rcv(sqs, source, VisibilityTimeout=100)
    clock.advance(101)
    assert rcv(sqs, source) == []  # the move, 101 s after the send
    clock.advance(60)  # 161 s after the send, 60 s after the move
    assert counts(sqs, dead_letter) == Counts(1, 0, 0)
    [message] = rcv(sqs, dead_letter, VisibilityTimeout=0)
    assert message["Body"] == "g:0"
    clock.advance(61)  # 121 s after the move
    assert counts(sqs, dead_letter) == Counts(0, 0, 0)
    assert rcv(sqs, dead_letter) == []


def test_the_receive_that_moves_a_group_head_delivers_the_rest_of_its_group(sqs, make_queue, clock):
    source, dead_letter = fifo_with_dead_letter_queue(sqs, make_queue, 1)
    send_in_turn(sqs, source, ["g"], 3)
    assert got(rcv(sqs, source, 1)) == ["g:0"]
    assert rcv(sqs, source) == []
    clock.advance(31)
    assert got(rcv(sqs, source)) == ["g:1", "g:2"]
    assert got(rcv(sqs, dead_letter)) == ["g:0"]


def test_all_fifo_system_attributes_are_selectable_by_name(sqs, make_queue):
    url = make_fifo(make_queue)
    send(sqs, url, "g", 0, MessageDeduplicationId="d")
    [message] = sqs.receive_message(QueueUrl=url, MessageSystemAttributeNames=["SequenceNumber"]).get("Messages")
    assert set(message["Attributes"]) == {"SequenceNumber"}
