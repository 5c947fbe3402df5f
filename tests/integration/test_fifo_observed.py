"""FIFO behaviour as observed on AWS: the queue of message groups, visibility
changes of single messages, per-message delays, deduplication scope (the one the queue was
created with stays in force) and purge, and SendMessageBatch entries without a group or a
deduplication id.

A group is available while its first message is visible; available groups are served in
the order in which they became available (a group re-enters behind the groups already
waiting), and one receive takes all it can of one group before the next. Every test runs
on the shared server's manual clock.
"""

from __future__ import annotations

import uuid

from support.fifo import body, delete_all, got, make_fifo, rcv, release, send, send_in_turn
from support.sqs import Counts, counts, raises_code
from support.wire import raw_json_call

NO_DEDUPLICATION_ID = ("The queue should either have ContentBasedDeduplication enabled or "
                       "MessageDeduplicationId provided explicitly")


def in_flight(sqs, url):
    return counts(sqs, url).in_flight


# --- (a) a group is available as soon as its first message is visible ------------------------


def test_a_group_is_available_again_as_soon_as_its_first_message_is_visible(sqs, make_queue):
    url = make_fifo(make_queue)
    send_in_turn(sqs, url, ["g"], 3)
    first, _, _ = rcv(sqs, url, 3)
    release(sqs, url, first)
    assert got(rcv(sqs, url)) == ["g:0"], "g:1 and g:2 are still in flight and stay hidden"
    assert in_flight(sqs, url) == 3


def test_the_first_message_whose_visibility_ended_comes_back_without_the_later_ones_still_in_flight(
        sqs, make_queue, clock):
    url = make_fifo(make_queue, VisibilityTimeout="30")
    send_in_turn(sqs, url, ["g"], 3)
    m0, m1, m2 = rcv(sqs, url, 3)
    for message in (m1, m2):
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=300)
    clock.advance(31)
    assert got(rcv(sqs, url)) == ["g:0"]


def test_changing_the_visibility_of_a_later_message_changes_that_message_only(sqs, make_queue):
    url = make_fifo(make_queue)
    send_in_turn(sqs, url, ["g"], 3)
    m0, m1, _ = rcv(sqs, url, 3)
    release(sqs, url, m1)
    assert rcv(sqs, url) == [], "g:0 is still in flight: nothing of the group may go"
    delete_all(sqs, url, [m0])
    assert got(rcv(sqs, url)) == ["g:1"], "g:2 is still in flight"


# --- (b) a queue of groups -----------------------------------------------------------------


def test_a_group_whose_visibility_ended_re_enters_behind_the_groups_already_waiting(sqs, make_queue, clock):
    url = make_fifo(make_queue)
    for group, index in (("a", 0), ("a", 1), ("b", 0), ("c", 0)):
        send(sqs, url, group, index)
    assert got(rcv(sqs, url, 1, VisibilityTimeout=5)) == ["a:0"]
    clock.advance(6)
    assert got(rcv(sqs, url, 1)) == ["b:0"]
    assert got(rcv(sqs, url, 1)) == ["c:0"]
    assert got(rcv(sqs, url)) == ["a:0", "a:1"]


def test_a_released_group_re_enters_behind_the_groups_already_waiting(sqs, make_queue):
    url = make_fifo(make_queue)
    send_in_turn(sqs, url, ["a", "b"], 2)
    [a0] = rcv(sqs, url, 1)
    release(sqs, url, a0)
    assert got(rcv(sqs, url, 1)) == ["b:0"]
    assert got(rcv(sqs, url)) == ["a:0", "a:1"]


def test_a_group_whose_first_message_was_deleted_re_enters_behind_the_groups_already_waiting(sqs, make_queue):
    url = make_fifo(make_queue)
    for group, index in (("a", 0), ("a", 1), ("b", 0), ("b", 1)):
        send(sqs, url, group, index)
    [a0] = rcv(sqs, url, 1)
    delete_all(sqs, url, [a0])
    assert got(rcv(sqs, url)) == ["b:0", "b:1", "a:1"], "a:1 was sent first, but b has waited longer"


def test_one_receive_fills_from_one_group_before_the_next_in_the_order_they_became_available(
        sqs, make_queue, clock):
    url = make_fifo(make_queue)
    send_in_turn(sqs, url, ["a", "b", "c"], 3)
    assert got(rcv(sqs, url, 1, VisibilityTimeout=5)) == ["a:0"]
    clock.advance(6)
    assert got(rcv(sqs, url)) == ["b:0", "b:1", "b:2", "c:0", "c:1", "c:2", "a:0", "a:1", "a:2"]


# --- (c) a receive with VisibilityTimeout=0 ------------------------------------------------


def test_a_receive_with_visibility_zero_leaves_the_group_available_at_once(sqs, make_queue):
    url = make_fifo(make_queue)
    send_in_turn(sqs, url, ["a"], 2)
    assert got(rcv(sqs, url, 1, VisibilityTimeout=0)) == ["a:0"]
    again = rcv(sqs, url)
    assert got(again) == ["a:0", "a:1"]
    assert [m["Attributes"]["ApproximateReceiveCount"] for m in again] == ["2", "1"]


def test_a_group_received_with_visibility_zero_goes_behind_the_waiting_groups(sqs, make_queue):
    url = make_fifo(make_queue)
    send_in_turn(sqs, url, ["a", "b"], 1)
    assert got(rcv(sqs, url, 1, VisibilityTimeout=0)) == ["a:0"]
    assert got(rcv(sqs, url, 1)) == ["b:0"]
    assert got(rcv(sqs, url, 1)) == ["a:0"]


# --- (d) per-message DelaySeconds ----------------------------------------------------------


def test_a_per_message_delay_of_zero_means_the_queues_delay_on_a_fifo_queue(sqs, make_queue, clock):
    url = make_fifo(make_queue, DelaySeconds="10")
    send(sqs, url, "g", 0, DelaySeconds=0)
    assert counts(sqs, url) == Counts(0, 0, 1)
    assert rcv(sqs, url) == []
    clock.advance(11)
    assert got(rcv(sqs, url)) == ["g:0"]


def test_a_non_zero_per_message_delay_is_refused_and_nothing_is_sent(sqs, make_queue):
    url = make_fifo(make_queue, DelaySeconds="10")
    with raises_code("InvalidParameterValue"):
        send(sqs, url, "g", 0, DelaySeconds=5)
    assert counts(sqs, url) == Counts(0, 0, 0)


# --- (e) deduplication scope changed after creation: reported, not applied; (f) purge -------------------------------


def test_switching_to_high_throughput_after_creation_is_reported_but_keeps_deduplicating_per_queue(
        sqs, make_queue, clock):
    url = make_fifo(make_queue)
    first = send(sqs, url, "a", 0, MessageDeduplicationId="used")
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DeduplicationScope": "messageGroup",
                                                       "FifoThroughputLimit": "perMessageGroupId"})
    reported = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (reported["DeduplicationScope"], reported["FifoThroughputLimit"]) == ("messageGroup", "perMessageGroupId")
    assert send(sqs, url, "b", 0, MessageDeduplicationId="used")["MessageId"] == first["MessageId"], \
        "an id used in another group before the switch is still a duplicate"
    fresh = send(sqs, url, "c", 0, MessageDeduplicationId="new-after-the-switch")
    assert send(sqs, url, "d", 0, MessageDeduplicationId="new-after-the-switch")["MessageId"] == fresh["MessageId"], \
        "an id first used after the switch is a duplicate in a new group too"
    assert sorted(got(rcv(sqs, url))) == ["a:0", "c:0"]
    clock.advance(301)  # past the 5-minute deduplication interval, the id may be used again
    assert send(sqs, url, "b", 1, MessageDeduplicationId="used")["MessageId"] != first["MessageId"]


def test_a_queue_created_with_group_scope_deduplicates_per_group_after_switching_to_queue_scope(sqs, make_queue):
    url = make_fifo(make_queue, DeduplicationScope="messageGroup", FifoThroughputLimit="perMessageGroupId")
    first = send(sqs, url, "a", 0, MessageDeduplicationId="same")
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoThroughputLimit": "perQueue",
                                                       "DeduplicationScope": "queue"})
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DeduplicationScope"])["Attributes"] == \
        {"DeduplicationScope": "queue"}
    assert send(sqs, url, "b", 0, MessageDeduplicationId="same")["MessageId"] != first["MessageId"]
    in_c = send(sqs, url, "c", 0, MessageDeduplicationId="new-after-the-switch")
    assert send(sqs, url, "d", 0, MessageDeduplicationId="new-after-the-switch")["MessageId"] != in_c["MessageId"]
    assert send(sqs, url, "d", 1, MessageDeduplicationId="new-after-the-switch")["MessageId"] != in_c["MessageId"]
    assert sorted(got(rcv(sqs, url))) == ["a:0", "b:0", "c:0", "d:0"]


def test_a_purge_clears_the_deduplication_history(sqs, make_queue):
    url = make_fifo(make_queue)
    before = send(sqs, url, "g", 0, MessageDeduplicationId="kept-id")
    sqs.purge_queue(QueueUrl=url)
    after = send(sqs, url, "g", 1, MessageDeduplicationId="kept-id")
    assert after["MessageId"] != before["MessageId"]
    assert got(rcv(sqs, url)) == ["g:1"]


# --- SendMessageBatch: group and deduplication id are checked for the whole request ----------


def _entry(n, **parts):
    return {"Id": f"e{n}", "MessageBody": body("g", n), **parts}


def test_a_batch_entry_without_a_deduplication_id_fails_the_whole_batch_without_content_based_deduplication(
        sqs, make_queue):
    url = make_fifo(make_queue)
    with raises_code("InvalidParameterValue") as info:
        sqs.send_message_batch(QueueUrl=url, Entries=[
            _entry(0, MessageGroupId="g", MessageDeduplicationId=uuid.uuid4().hex),
            _entry(1, MessageGroupId="g"),
        ])
    assert info.value.response["Error"]["Message"] == NO_DEDUPLICATION_ID
    assert counts(sqs, url) == Counts(0, 0, 0)


def test_a_batch_without_deduplication_ids_is_sent_with_content_based_deduplication(sqs, make_queue):
    url = make_fifo(make_queue, ContentBasedDeduplication="true")
    resp = sqs.send_message_batch(QueueUrl=url, Entries=[_entry(0, MessageGroupId="g"), _entry(1, MessageGroupId="g")])
    assert [e["Id"] for e in resp["Successful"]] == ["e0", "e1"]
    assert got(rcv(sqs, url)) == ["g:0", "g:1"]


def test_a_batch_entry_without_a_group_fails_the_whole_batch_even_with_content_based_deduplication(
        sqs, make_queue):
    url = make_fifo(make_queue, ContentBasedDeduplication="true")
    with raises_code("InvalidParameterValue") as info:
        sqs.send_message_batch(QueueUrl=url, Entries=[_entry(0, MessageGroupId="g"), _entry(1)])
    error = info.value.response["Error"]
    assert error["Message"] == "The request must contain the parameter MessageGroupId."
    assert (error["QueryErrorCode"], error["Type"]) == ("InvalidParameterValueException", "Sender")
    assert counts(sqs, url) == Counts(0, 0, 0)


def test_a_fifo_batch_without_a_group_answers_json_with_the_common_invalid_parameter_shape(server, queue_name):
    url = raw_json_call(server.endpoint, "CreateQueue", {"QueueName": queue_name[:70] + ".fifo", "Attributes": {
        "FifoQueue": "true", "ContentBasedDeduplication": "true"}}).json()["QueueUrl"]
    resp = raw_json_call(server.endpoint, "SendMessageBatch", {"QueueUrl": url, "Entries": [
        {"Id": "e0", "MessageBody": "no group"}]})
    assert resp.status == 400
    assert resp.headers["x-amzn-query-error"] == "InvalidParameterValue;Sender"
    assert resp.json() == {"__type": "com.amazon.coral.service#InvalidParameterValueException",
                           "message": "The request must contain the parameter MessageGroupId."}
