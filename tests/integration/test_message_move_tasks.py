"""Redrive: StartMessageMoveTask, ListMessageMoveTasks, CancelMessageMoveTask.

Move tasks pace themselves in real time (not the test clock), so the waits here poll
ListMessageMoveTasks with a bounded real-time loop.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError

from queueserver.storage.redrive import CHUNK
from support.sqs import arn_of, drain, redrive_policy
from support.dead_letters import (
    dead_letter_all,
    latest_task,
    make_source_and_dlq,
    send_fifo,
    send_many,
    tasks,
    wait_for_moved,
    wait_for_task,
)
from support.clients import COMMON_ERROR_SHAPES
from support.server import wait_for
from support.sqs import Counts, counts, md5_of_attributes, raises_code, receive, unique_queue_name

ALL = {"MessageSystemAttributeNames": ["All"], "MessageAttributeNames": ["All"]}


def _dead_lettered(sqs: Any, make_queue: Any, n: int, **kwargs: Any) -> tuple[str, str, str, list[str]]:
    """A source (maxReceiveCount 1) whose n messages all sit in its DLQ: (source, dlq, dlq arn, ids)."""
    source, dlq, dlq_arn = make_source_and_dlq(make_queue, sqs, 1, **kwargs)
    ids = send_many(sqs, source, n)
    dead_letter_all(sqs, source, dlq, n)
    return source, dlq, dlq_arn, ids


def _assert_error(info: pytest.ExceptionInfo[Any], code: str, message: str | None = None) -> None:
    """AWS answers ResourceNotFoundException with 404 (observed), the rest with 400."""
    err = info.value.response["Error"]
    assert err["Code"] == code, err
    assert err.get("QueryErrorCode", code) == COMMON_ERROR_SHAPES.get(code, code), err
    status = 404 if code == "ResourceNotFoundException" else 400
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == status
    assert err.get("Message")
    if message is not None:
        assert err["Message"] == message, err


# --- moving back --------------------------------------------------------------------


def test_without_a_destination_each_message_goes_back_to_its_own_source_queue(sqs, make_queue):
    dlq = make_queue(name=unique_queue_name("shared-dlq"))
    dlq_arn = arn_of(sqs, dlq)
    sources = [make_queue({"RedrivePolicy": redrive_policy(dlq_arn, 1)}) for _ in range(2)]
    sent = {url: send_many(sqs, url, 15, prefix=url.rsplit("/", 1)[1]) for url in sources}
    for url in sources:
        for _ in range(20):
            receive(sqs, url, MaxNumberOfMessages=10, VisibilityTimeout=0)
            if counts(sqs, url) == Counts(0, 0, 0):
                break
    assert counts(sqs, dlq) == Counts(30, 0, 0)

    handle = sqs.start_message_move_task(SourceArn=dlq_arn)["TaskHandle"]
    assert handle
    task = wait_for_task(sqs, dlq_arn)
    assert task["Status"] == "COMPLETED", task
    assert task["ApproximateNumberOfMessagesMoved"] == 30
    assert task["ApproximateNumberOfMessagesToMove"] == 30
    assert "DestinationArn" not in task
    assert counts(sqs, dlq) == Counts(0, 0, 0)
    for url in sources:
        back = drain(sqs, url)
        assert sorted(m["MessageId"] for m in back) == sorted(sent[url])


def test_a_redriven_message_keeps_its_id_body_and_attributes_and_starts_its_receive_count_again(
        sqs, make_queue, clock):
    source, dlq, dlq_arn = make_source_and_dlq(make_queue, sqs, 2)
    attributes: dict[str, dict[str, Any]] = {"kind": {"DataType": "String", "StringValue": "order"},
                  "bin": {"DataType": "Binary", "BinaryValue": b"\x01\x02"}}
    sent = sqs.send_message(QueueUrl=source, MessageBody="redrive me", MessageAttributes=attributes)
    for _ in range(2):
        (first,) = receive(sqs, source, VisibilityTimeout=10, **ALL)
        clock.advance(11)
    assert receive(sqs, source) == []
    assert counts(sqs, dlq) == Counts(1, 0, 0)

    sqs.start_message_move_task(SourceArn=dlq_arn)
    assert wait_for_task(sqs, dlq_arn)["Status"] == "COMPLETED"
    (back,) = receive(sqs, source, VisibilityTimeout=10, **ALL)
    assert back["MessageId"] == sent["MessageId"]
    assert back["Body"] == "redrive me"
    assert back["MessageAttributes"] == attributes
    assert back["MD5OfMessageAttributes"] == md5_of_attributes(attributes)
    assert back["Attributes"]["SentTimestamp"] == first["Attributes"]["SentTimestamp"]
    assert back["Attributes"]["ApproximateReceiveCount"] == "1", "the receive count starts again"
    assert "DeadLetterQueueSourceArn" not in back["Attributes"]


def test_a_redriven_message_gets_max_receive_count_new_tries_before_it_is_dead_lettered_again(
        sqs, make_queue, clock):
    source, dlq, dlq_arn = make_source_and_dlq(make_queue, sqs, 2)
    sent = sqs.send_message(QueueUrl=source, MessageBody="again")["MessageId"]
    for _ in range(2):
        receive(sqs, source, VisibilityTimeout=10)
        clock.advance(11)
    assert receive(sqs, source) == []
    sqs.start_message_move_task(SourceArn=dlq_arn)
    assert wait_for_task(sqs, dlq_arn)["Status"] == "COMPLETED"
    for _ in range(2):
        (msg,) = receive(sqs, source, VisibilityTimeout=10)
        assert msg["MessageId"] == sent
        clock.advance(11)
    assert receive(sqs, source) == []
    (dead_again,) = receive(sqs, dlq, **ALL)
    assert dead_again["MessageId"] == sent
    assert dead_again["Attributes"]["DeadLetterQueueSourceArn"] == arn_of(sqs, source)


def test_with_a_destination_every_message_goes_to_that_queue(sqs, make_queue):
    source, dlq, dlq_arn, ids = _dead_lettered(sqs, make_queue, 25)
    destination = make_queue(name=unique_queue_name("elsewhere"))
    destination_arn = arn_of(sqs, destination)
    sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=destination_arn)
    task = wait_for_task(sqs, dlq_arn)
    assert task["Status"] == "COMPLETED", task
    assert task["DestinationArn"] == destination_arn
    assert task["ApproximateNumberOfMessagesMoved"] == 25
    assert counts(sqs, dlq) == Counts(0, 0, 0)
    assert counts(sqs, source) == Counts(0, 0, 0)
    assert sorted(m["MessageId"] for m in drain(sqs, destination)) == sorted(ids)


def test_a_fifo_dead_letter_queue_is_redriven_to_its_fifo_source_in_group_order(sqs, make_queue, clock):
    source, dlq, dlq_arn = make_source_and_dlq(make_queue, sqs, 1, fifo=True)
    ids = [send_fifo(sqs, source, f"m{i}", group="g") for i in range(3)]
    got = receive(sqs, source, MaxNumberOfMessages=10, VisibilityTimeout=10)
    assert [m["MessageId"] for m in got] == ids
    clock.advance(11)
    assert receive(sqs, source, MaxNumberOfMessages=10) == []
    assert counts(sqs, dlq) == Counts(3, 0, 0)
    sqs.start_message_move_task(SourceArn=dlq_arn)
    task = wait_for_task(sqs, dlq_arn)
    assert task["Status"] == "COMPLETED", task
    assert task["ApproximateNumberOfMessagesMoved"] == 3
    assert counts(sqs, dlq) == Counts(0, 0, 0)
    back = receive(sqs, source, MaxNumberOfMessages=10, **ALL)
    assert [m["MessageId"] for m in back] == ids, "back in the source, in group order"
    assert all(m["Attributes"]["MessageGroupId"] == "g" for m in back)
    assert all(m["Attributes"]["ApproximateReceiveCount"] == "1" for m in back)


def test_a_fifo_dead_letter_queue_cannot_be_redriven_to_a_standard_queue(sqs, make_queue):
    _, _, dlq_arn = make_source_and_dlq(make_queue, sqs, 1, fifo=True)
    standard_arn = arn_of(sqs, make_queue())
    with raises_code("InvalidParameterValue") as info:
        sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=standard_arn)
    _assert_error(info, "InvalidParameterValue")


def test_a_task_moves_only_the_messages_in_the_queue_when_it_started(sqs, make_queue):
    source, dlq, dlq_arn, ids = _dead_lettered(sqs, make_queue, 20)
    sqs.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=20)
    late = send_many(sqs, dlq, 5, prefix="late")  # straight into the DLQ after the start
    task = wait_for_task(sqs, dlq_arn)
    assert task["Status"] == "COMPLETED", task
    assert task["ApproximateNumberOfMessagesMoved"] == 20
    assert sorted(m["MessageId"] for m in drain(sqs, dlq)) == sorted(late)
    assert sorted(m["MessageId"] for m in drain(sqs, source)) == sorted(ids)


def test_a_task_skips_messages_in_flight_in_the_dead_letter_queue(sqs, make_queue):
    source, dlq, dlq_arn, ids = _dead_lettered(sqs, make_queue, 5)
    (held,) = receive(sqs, dlq, VisibilityTimeout=60)
    sqs.start_message_move_task(SourceArn=dlq_arn)
    task = wait_for_task(sqs, dlq_arn)
    assert task["Status"] == "COMPLETED", task
    assert task["ApproximateNumberOfMessagesMoved"] == 4
    assert counts(sqs, dlq) == Counts(0, 1, 0)
    assert counts(sqs, source) == Counts(4, 0, 0)
    sqs.delete_message(QueueUrl=dlq, ReceiptHandle=held["ReceiptHandle"])  # its consumer still owns it
    assert counts(sqs, dlq) == Counts(0, 0, 0)
    assert sorted(m["MessageId"] for m in drain(sqs, source)) == sorted(set(ids) - {held["MessageId"]})


def test_a_message_past_the_dead_letter_queue_retention_is_not_redriven(sqs, make_queue, clock):
    source, dlq, dlq_arn = make_source_and_dlq(make_queue, sqs, 1, dlq_attributes={"MessageRetentionPeriod": "60"})
    sqs.send_message(QueueUrl=source, MessageBody="expired in the DLQ")
    receive(sqs, source, VisibilityTimeout=10)
    clock.advance(11)
    assert receive(sqs, source) == []
    assert counts(sqs, dlq) == Counts(1, 0, 0)
    clock.advance(60)  # 71 s after the send: past the DLQ's 60 s (counted from the send)
    assert counts(sqs, dlq) == Counts(0, 0, 0)
    sqs.start_message_move_task(SourceArn=dlq_arn)
    task = wait_for_task(sqs, dlq_arn)
    assert task["Status"] == "COMPLETED", task
    assert counts(sqs, source) == Counts(0, 0, 0), "an expired message must not come back"
    assert receive(sqs, source) == []
    assert task["ApproximateNumberOfMessagesMoved"] == 0


def test_a_receipt_handle_from_before_the_dead_letter_move_deletes_nothing_after_a_redrive(
        sqs, make_queue, clock):
    source, _, dlq_arn = make_source_and_dlq(make_queue, sqs, 1)
    sqs.send_message(QueueUrl=source, MessageBody="zombie consumer")
    (old,) = receive(sqs, source, VisibilityTimeout=10)
    clock.advance(11)  # the consumer failed: its visibility ran out
    assert receive(sqs, source) == []  # dead-lettered
    sqs.start_message_move_task(SourceArn=dlq_arn)
    assert wait_for_task(sqs, dlq_arn)["Status"] == "COMPLETED"
    assert counts(sqs, source) == Counts(1, 0, 0)
    # the consumer that failed long ago wakes up and deletes with its old handle
    sqs.delete_message(QueueUrl=source, ReceiptHandle=old["ReceiptHandle"])
    assert counts(sqs, source) == Counts(1, 0, 0), "the redriven message must still be there"


# --- ListMessageMoveTasks and CancelMessageMoveTask ----------------------------------------


def test_a_running_task_is_listed_with_its_handle_and_counters(sqs, make_queue, clock):
    source, dlq, dlq_arn, _ = _dead_lettered(sqs, make_queue, 30)
    destination_arn = arn_of(sqs, source)
    before_ms = clock.now_ms()
    handle = sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=destination_arn,
                                         MaxNumberOfMessagesPerSecond=2)["TaskHandle"]
    task = latest_task(sqs, dlq_arn)
    assert task["Status"] == "RUNNING"
    assert task["TaskHandle"] == handle
    assert task["SourceArn"] == dlq_arn
    assert task["DestinationArn"] == destination_arn
    assert task["MaxNumberOfMessagesPerSecond"] == 2
    assert task["ApproximateNumberOfMessagesToMove"] == 30
    # The pace (2 a second) is kept by the real clock, so how many moved by now is not known; what is known
    # is that the counter only grows, from the listing to the cancel to the end, and ends short of 30.
    listed_moved = task["ApproximateNumberOfMessagesMoved"]
    assert task["StartedTimestamp"] == before_ms  # the manual clock did not move
    assert "FailureReason" not in task

    moved = sqs.cancel_message_move_task(TaskHandle=handle)["ApproximateNumberOfMessagesMoved"]
    assert listed_moved <= moved
    task = latest_task(sqs, dlq_arn)
    assert task["Status"] in ("CANCELLING", "CANCELLED")
    assert "TaskHandle" not in task, "the handle is only listed while RUNNING"
    task = wait_for_task(sqs, dlq_arn)
    assert task["Status"] == "CANCELLED", task
    # Cancelling does not revert the messages already moved, and moves no more: CANCELLED is written
    # by the task's last step, in the transaction that counts what it moved, and ends its runner.
    final_moved = task["ApproximateNumberOfMessagesMoved"]
    assert moved <= final_moved < 30
    assert counts(sqs, source).visible == final_moved
    assert counts(sqs, dlq).visible == 30 - final_moved
    assert latest_task(sqs, dlq_arn) == task


def test_a_completed_task_is_listed_without_a_handle(sqs, make_queue):
    _, _, dlq_arn, _ = _dead_lettered(sqs, make_queue, 3)
    sqs.start_message_move_task(SourceArn=dlq_arn)
    task = wait_for_task(sqs, dlq_arn)
    assert task["Status"] == "COMPLETED"
    assert "TaskHandle" not in task
    assert task["ApproximateNumberOfMessagesMoved"] == 3
    assert task["ApproximateNumberOfMessagesToMove"] == 3
    assert "MaxNumberOfMessagesPerSecond" not in task


def test_list_message_move_tasks_returns_the_most_recent_first_and_one_by_default(sqs, make_queue):
    source, dlq, dlq_arn = make_source_and_dlq(make_queue, sqs, 1)
    destinations = []
    for i in range(3):
        send_many(sqs, source, 2, prefix=f"round{i}")
        dead_letter_all(sqs, source, dlq, 2)
        destination = make_queue()
        destinations.append(arn_of(sqs, destination))
        sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=destinations[-1])
        assert wait_for_task(sqs, dlq_arn)["Status"] == "COMPLETED"
    (only,) = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
    assert only["DestinationArn"] == destinations[-1]
    listed = tasks(sqs, dlq_arn, max_results=10)
    assert [t["DestinationArn"] for t in listed] == destinations[::-1]
    assert [t["DestinationArn"] for t in tasks(sqs, dlq_arn, max_results=2)] == destinations[:0:-1]
    assert all(t["Status"] == "COMPLETED" and t["ApproximateNumberOfMessagesMoved"] == 2 for t in listed)


def test_list_message_move_tasks_of_a_queue_without_tasks_is_empty(sqs, make_queue):
    _, _, dlq_arn = make_source_and_dlq(make_queue, sqs, 1)
    assert sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"] == []


@pytest.mark.parametrize("max_results", [0, 11])
def test_list_message_move_tasks_max_results_is_1_to_10(sqs_unvalidated, sqs, make_queue, max_results):
    _, _, dlq_arn = make_source_and_dlq(make_queue, sqs, 1)
    with pytest.raises(ClientError) as info:
        sqs_unvalidated.list_message_move_tasks(SourceArn=dlq_arn, MaxResults=max_results)
    _assert_error(info, "InvalidParameterValue")


def test_list_message_move_tasks_of_an_unknown_queue_is_resource_not_found(sqs):
    arn = f"arn:aws:sqs:us-east-1:000000000000:{unique_queue_name('missing')}"
    with pytest.raises(ClientError) as info:
        sqs.list_message_move_tasks(SourceArn=arn)
    _assert_error(info, "ResourceNotFoundException")


def _handle(task_id: str, source_arn: str) -> str:
    """A task handle of the form AWS hands out: base64 of JSON naming the task and its source."""
    return base64.b64encode(json.dumps({"taskId": task_id, "sourceArn": source_arn}).encode()).decode()


@pytest.mark.parametrize("handle", ["bm8gc3VjaCB0YXNr", "not base64 at all!", base64.b64encode(b"[1, 2]").decode()])
def test_cancelling_with_a_malformed_task_handle_is_invalid(sqs, handle):
    with pytest.raises(ClientError) as info:
        sqs.cancel_message_move_task(TaskHandle=handle)
    _assert_error(info, "InvalidParameterValue", "Value for parameter TaskHandle is invalid.")


def test_cancelling_a_well_formed_handle_of_no_task_is_resource_not_found(sqs, make_queue):
    _, _, dlq_arn = make_source_and_dlq(make_queue, sqs, 1)
    with pytest.raises(ClientError) as info:
        sqs.cancel_message_move_task(TaskHandle=_handle(str(uuid.uuid4()), dlq_arn))
    _assert_error(info, "ResourceNotFoundException", "Task does not exist.")


def test_cancelling_a_handle_whose_source_names_no_queue_is_resource_not_found(sqs):
    arn = f"arn:aws:sqs:us-east-1:000000000000:{unique_queue_name('missing')}"
    with pytest.raises(ClientError) as info:
        sqs.cancel_message_move_task(TaskHandle=_handle(str(uuid.uuid4()), arn))
    _assert_error(info, "ResourceNotFoundException",
                  "The resource that you specified for the SourceArn parameter doesn't exist.")


def test_cancelling_a_task_that_is_no_longer_running_is_resource_not_found(sqs, make_queue):
    _, _, dlq_arn, _ = _dead_lettered(sqs, make_queue, 2)
    handle = sqs.start_message_move_task(SourceArn=dlq_arn)["TaskHandle"]
    assert wait_for_task(sqs, dlq_arn)["Status"] == "COMPLETED"
    with pytest.raises(ClientError) as info:
        sqs.cancel_message_move_task(TaskHandle=handle)
    _assert_error(info, "ResourceNotFoundException")


def test_cancelling_twice_is_resource_not_found_the_second_time(sqs, make_queue):
    _, _, dlq_arn, _ = _dead_lettered(sqs, make_queue, 20)
    handle = sqs.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    sqs.cancel_message_move_task(TaskHandle=handle)
    with pytest.raises(ClientError) as info:
        sqs.cancel_message_move_task(TaskHandle=handle)
    _assert_error(info, "ResourceNotFoundException")
    assert wait_for_task(sqs, dlq_arn)["Status"] == "CANCELLED"


# --- StartMessageMoveTask errors --------------------------------------------------------


def test_only_one_task_may_run_per_source_queue(sqs, make_queue):
    _, _, dlq_arn, _ = _dead_lettered(sqs, make_queue, 20)
    handle = sqs.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    with pytest.raises(ClientError) as info:
        sqs.start_message_move_task(SourceArn=dlq_arn)
    _assert_error(info, "InvalidParameterValue")
    sqs.cancel_message_move_task(TaskHandle=handle)
    # once the cancel has returned, a new task may start (observed on AWS) and finishes the job
    sqs.start_message_move_task(SourceArn=dlq_arn)
    task = wait_for_task(sqs, dlq_arn)
    assert task["Status"] == "COMPLETED"
    assert len(tasks(sqs, dlq_arn)) == 2


def test_starting_a_task_on_an_unknown_queue_is_resource_not_found(sqs):
    arn = f"arn:aws:sqs:us-east-1:000000000000:{unique_queue_name('missing')}"
    with pytest.raises(ClientError) as info:
        sqs.start_message_move_task(SourceArn=arn)
    _assert_error(info, "ResourceNotFoundException")


def test_starting_a_task_on_a_queue_that_is_no_dead_letter_queue_is_invalid(sqs, make_queue):
    plain = make_queue()
    send_many(sqs, plain, 3)
    with pytest.raises(ClientError) as info:
        sqs.start_message_move_task(SourceArn=arn_of(sqs, plain))
    _assert_error(info, "InvalidParameterValue")
    assert counts(sqs, plain) == Counts(3, 0, 0)


def test_starting_a_task_to_an_unknown_destination_is_resource_not_found(sqs, make_queue):
    _, dlq, dlq_arn, _ = _dead_lettered(sqs, make_queue, 2)
    missing = dlq_arn.rsplit(":", 1)[0] + ":" + unique_queue_name("missing")
    with pytest.raises(ClientError) as info:
        sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=missing)
    _assert_error(info, "ResourceNotFoundException")
    assert counts(sqs, dlq) == Counts(2, 0, 0)
    assert sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"] == []


def test_starting_a_task_to_its_own_source_queue_is_invalid(sqs, make_queue):
    _, _, dlq_arn, _ = _dead_lettered(sqs, make_queue, 1)
    with pytest.raises(ClientError) as info:
        sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=dlq_arn)
    _assert_error(info, "InvalidParameterValue")


def _west_dead_letter_queue(server: Any, make_client: Any) -> tuple[Any, str, str]:
    """A DLQ in us-west-2 holding 2 dead letters: (us-west-2 client, its url, its arn)."""
    west = make_client(server.endpoint, region="us-west-2")
    dlq = west.create_queue(QueueName=unique_queue_name("west-dlq"))["QueueUrl"]
    dlq_arn = arn_of(west, dlq)
    source = west.create_queue(QueueName=unique_queue_name("west-src"),
                               Attributes={"RedrivePolicy": redrive_policy(dlq_arn, 1)})["QueueUrl"]
    send_many(west, source, 2)
    dead_letter_all(west, source, dlq, 2)
    return west, dlq, dlq_arn


def test_a_task_cannot_start_on_a_dead_letter_queue_in_another_region(sqs, server, make_client):
    west, dlq, dlq_arn = _west_dead_letter_queue(server, make_client)
    with pytest.raises(ClientError) as info:
        sqs.start_message_move_task(SourceArn=dlq_arn)
    assert info.value.response["Error"]["Code"] in ("ResourceNotFoundException", "InvalidParameterValue")
    assert counts(west, dlq) == Counts(2, 0, 0)


def test_a_task_cannot_move_messages_to_a_queue_in_another_region(sqs, make_queue, server, make_client):
    west, dlq, dlq_arn = _west_dead_letter_queue(server, make_client)
    east_destination = make_queue()
    with pytest.raises(ClientError) as info:
        west.start_message_move_task(SourceArn=dlq_arn, DestinationArn=arn_of(sqs, east_destination))
    assert info.value.response["Error"]["Code"] in ("ResourceNotFoundException", "InvalidParameterValue")
    assert counts(west, dlq) == Counts(2, 0, 0)
    assert counts(sqs, east_destination) == Counts(0, 0, 0)


@pytest.mark.parametrize("rate", [0, 501, -5])
def test_max_number_of_messages_per_second_is_1_to_500(sqs_unvalidated, sqs, make_queue, rate):
    _, _, dlq_arn, _ = _dead_lettered(sqs, make_queue, 1)
    with pytest.raises(ClientError) as info:
        sqs_unvalidated.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=rate)
    _assert_error(info, "InvalidParameterValue")
    assert sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"] == []


# --- failure -----------------------------------------------------------------------------


def test_a_task_whose_source_queue_is_gone_fails_and_leaves_the_messages_in_the_dead_letter_queue(
        sqs, make_queue):
    dlq = make_queue(name=unique_queue_name("dlq"))
    dlq_arn = arn_of(sqs, dlq)
    kept = make_queue({"RedrivePolicy": redrive_policy(dlq_arn, 1)})  # keeps the DLQ a DLQ
    gone = make_queue({"RedrivePolicy": redrive_policy(dlq_arn, 1)})
    ids = send_many(sqs, gone, 4)
    dead_letter_all(sqs, gone, dlq, 4)
    sqs.delete_queue(QueueUrl=gone)
    sqs.start_message_move_task(SourceArn=dlq_arn)
    task = wait_for_task(sqs, dlq_arn)
    assert task["Status"] == "FAILED", task
    assert task["FailureReason"]
    assert "TaskHandle" not in task
    assert task["ApproximateNumberOfMessagesMoved"] == 0
    assert counts(sqs, dlq) == Counts(4, 0, 0)
    assert counts(sqs, kept) == Counts(0, 0, 0)
    assert sorted(m["MessageId"] for m in drain(sqs, dlq)) == sorted(ids)


def test_a_new_dead_letter_queue_inherits_nothing_of_deleted_queues_with_running_tasks(sqs, make_queue):
    """The newest queues deleted, with a task still running: a queue created next is a queue of its own."""
    source, dlq, dlq_arn, _ = _dead_lettered(sqs, make_queue, 20)
    old_handle = sqs.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    assert latest_task(sqs, dlq_arn)["Status"] == "RUNNING"
    sqs.delete_queue(QueueUrl=source)
    sqs.delete_queue(QueueUrl=dlq)
    new_source, new_dlq, new_dlq_arn, new_ids = _dead_lettered(sqs, make_queue, 3)
    assert tasks(sqs, new_dlq_arn) == []
    sqs.start_message_move_task(SourceArn=new_dlq_arn)
    task = wait_for_task(sqs, new_dlq_arn)
    assert (task["Status"], task["ApproximateNumberOfMessagesMoved"]) == ("COMPLETED", 3), task
    assert sorted(m["MessageId"] for m in drain(sqs, new_source)) == sorted(new_ids)
    with pytest.raises(ClientError) as info:  # the deleted queue's task ended with it
        sqs.cancel_message_move_task(TaskHandle=old_handle)
    _assert_error(info, "ResourceNotFoundException")


def test_deleting_the_source_of_a_running_task_ends_it_and_a_queue_of_the_same_name_starts_afresh(
        sqs, make_queue):
    source, dlq, dlq_arn, _ = _dead_lettered(sqs, make_queue, 20)
    old_handle = sqs.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    sqs.delete_queue(QueueUrl=dlq)
    dlq_name = dlq.rsplit("/", 1)[1]
    assert make_queue(name=dlq_name) == dlq  # still named by the source's RedrivePolicy: a dead-letter queue
    assert tasks(sqs, dlq_arn) == [], "the deleted queue's task is not the new queue's"
    sqs.purge_queue(QueueUrl=source)  # what the old task moved back before the delete
    ids = send_many(sqs, source, 2)
    dead_letter_all(sqs, source, dlq, 2)
    sqs.start_message_move_task(SourceArn=dlq_arn)
    task = wait_for_task(sqs, dlq_arn)
    assert (task["Status"], task["ApproximateNumberOfMessagesMoved"]) == ("COMPLETED", 2), task
    assert len(tasks(sqs, dlq_arn)) == 1
    assert sorted(m["MessageId"] for m in drain(sqs, source)) == sorted(ids)
    with pytest.raises(ClientError) as info:
        sqs.cancel_message_move_task(TaskHandle=old_handle)
    _assert_error(info, "ResourceNotFoundException")


# --- pacing ------------------------------------------------------------------------------


def test_max_number_of_messages_per_second_paces_the_task_a_tenth_of_a_second_at_a_time(sqs, make_queue):
    """At 50 a second a task moves 5 messages a step, a tenth of a second apart, on the real clock: its 200
    messages take 4 s, where an unpaced task moves them at once. The server's own clock is the witness of
    real time: a long poll that began after the start ends when its 2 s of WaitTimeSeconds have passed,
    and the task is still running then (had it moved faster than 100 a second, it would be done)."""
    _, dlq, dlq_arn, _ = _dead_lettered(sqs, make_queue, 200)
    idle = make_queue()
    sqs.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=50)
    assert receive(sqs, idle, WaitTimeSeconds=2) == []
    task = latest_task(sqs, dlq_arn)
    assert task["Status"] == "RUNNING" and 0 < task["ApproximateNumberOfMessagesMoved"] < 200, task
    seen = {task["ApproximateNumberOfMessagesMoved"]}

    def finished() -> dict[str, Any] | None:
        task = latest_task(sqs, dlq_arn)
        seen.add(task["ApproximateNumberOfMessagesMoved"])
        return task if task["Status"] != "RUNNING" else None

    task = wait_for(finished, "the paced task to finish")
    assert task["Status"] == "COMPLETED", task
    assert task["ApproximateNumberOfMessagesMoved"] == 200
    assert all(moved % 5 == 0 for moved in seen), f"steps of other than 5: {sorted(seen)}"
    assert counts(sqs, dlq) == Counts(0, 0, 0)


def test_without_a_rate_a_task_moves_hundreds_of_messages_a_full_step_at_a_time(sqs, make_queue):
    """Nothing paces it: every step moves CHUNK messages (a rate below 1,000 a second makes smaller ones)."""
    source, _, dlq_arn, ids = _dead_lettered(sqs, make_queue, 300)
    sqs.start_message_move_task(SourceArn=dlq_arn)
    seen: set[int] = set()

    def finished() -> dict[str, Any] | None:
        task = latest_task(sqs, dlq_arn)
        seen.add(task["ApproximateNumberOfMessagesMoved"])
        return task if task["Status"] != "RUNNING" else None

    task = wait_for(finished, "the move task to finish")
    assert task["Status"] == "COMPLETED", task
    assert task["ApproximateNumberOfMessagesMoved"] == 300
    assert seen <= {0, CHUNK, 2 * CHUNK, 300}, f"steps smaller than {CHUNK}: {sorted(seen)}"
    assert sorted(m["MessageId"] for m in drain(sqs, source)) == sorted(ids)


# --- durability --------------------------------------------------------------------------


def _own_server_with_full_dlq(server_factory: Any, make_client: Any, db: Any, n: int) -> tuple[Any, Any, str, str,
                                                                                              str, list[str]]:
    proc = server_factory(db, "--test-clock")
    client = make_client(proc.endpoint)
    dlq = client.create_queue(QueueName="redrive-dlq")["QueueUrl"]
    dlq_arn = arn_of(client, dlq)
    source = client.create_queue(QueueName="redrive-src",
                                 Attributes={"RedrivePolicy": redrive_policy(dlq_arn, 1)})["QueueUrl"]
    ids = send_many(client, source, n)
    dead_letter_all(client, source, dlq, n)
    return proc, client, source, dlq, dlq_arn, ids


@pytest.mark.server_process
def test_a_move_task_killed_mid_way_resumes_after_restart_and_moves_every_message_once(
        tmp_path, server_factory, make_client, serve_with_client):
    db = tmp_path / "redrive-kill.db"
    first, client, source, dlq, dlq_arn, ids = _own_server_with_full_dlq(server_factory, make_client, db, 300)
    handle = client.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=100)["TaskHandle"]
    moved_before = wait_for_moved(client, dlq_arn, at_least=10)
    first.kill()
    assert 0 < moved_before < 300, f"the kill should land mid-task (moved {moved_before})"

    second, client = serve_with_client(db)
    task = wait_for_task(client, dlq_arn, timeout=20)
    assert task["Status"] == "COMPLETED", task
    assert task["ApproximateNumberOfMessagesMoved"] == 300
    assert task["ApproximateNumberOfMessagesToMove"] == 300
    assert counts(client, dlq) == Counts(0, 0, 0)
    assert counts(client, source) == Counts(300, 0, 0)
    arrived = [m["MessageId"] for m in drain(client, source)]
    assert len(arrived) == 300
    assert sorted(arrived) == sorted(ids), "every message arrives exactly once"
    assert drain(client, dlq) == []
    with pytest.raises(ClientError) as info:
        client.cancel_message_move_task(TaskHandle=handle)
    _assert_error(info, "ResourceNotFoundException")
    second.stop()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


@pytest.mark.server_process
def test_a_running_task_survives_a_clean_restart_and_keeps_its_handle(
        tmp_path, server_factory, make_client, serve_with_client):
    db = tmp_path / "redrive-restart.db"
    first, client, source, dlq, dlq_arn, ids = _own_server_with_full_dlq(server_factory, make_client, db, 40)
    handle = client.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=10)["TaskHandle"]
    wait_for_moved(client, dlq_arn, at_least=2)
    first.stop()
    second, client = serve_with_client(db)
    task = latest_task(client, dlq_arn)
    assert task["Status"] == "RUNNING", task
    assert task["TaskHandle"] == handle
    assert 0 < task["ApproximateNumberOfMessagesMoved"] < 40
    client.cancel_message_move_task(TaskHandle=handle)
    task = wait_for_task(client, dlq_arn)
    assert task["Status"] == "CANCELLED"
    moved = task["ApproximateNumberOfMessagesMoved"]
    in_source = [m["MessageId"] for m in drain(client, source)]
    in_dlq = [m["MessageId"] for m in drain(client, dlq)]
    assert len(in_source) == moved
    assert not set(in_source) & set(in_dlq)
    assert sorted(in_source + in_dlq) == sorted(ids)
    second.stop()


@pytest.mark.server_process
def test_a_task_cancelled_just_before_a_kill_is_cancelled_after_restart(
        tmp_path, server_factory, make_client, serve_with_client):
    db = tmp_path / "redrive-cancel-kill.db"
    first, client, source, dlq, dlq_arn, ids = _own_server_with_full_dlq(server_factory, make_client, db, 40)
    handle = client.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    client.cancel_message_move_task(TaskHandle=handle)
    first.kill()
    second, client = serve_with_client(db)
    task = wait_for_task(client, dlq_arn)
    assert task["Status"] == "CANCELLED", task  # made so at the start: no runner was launched for it
    in_source = [m["MessageId"] for m in drain(client, source)]
    in_dlq = [m["MessageId"] for m in drain(client, dlq)]
    assert len(in_source) == task["ApproximateNumberOfMessagesMoved"]
    assert latest_task(client, dlq_arn) == task
    assert sorted(in_source + in_dlq) == sorted(ids)
    second.stop()


def test_a_redriven_message_starts_its_retention_again_in_the_queue_it_returns_to(sqs, make_queue, clock):
    source, dlq, dlq_arn = make_source_and_dlq(
        make_queue, sqs, 1, source_attributes={"MessageRetentionPeriod": "60"},
        dlq_attributes={"MessageRetentionPeriod": "3600"})
    sent = sqs.send_message(QueueUrl=source, MessageBody="older than the source's retention")["MessageId"]
    receive(sqs, source, VisibilityTimeout=10)
    clock.advance(11)
    assert receive(sqs, source) == []  # dead-lettered by this receive
    clock.advance(120)  # now twice the source's retention past the send
    sqs.start_message_move_task(SourceArn=dlq_arn)
    assert wait_for_task(sqs, dlq_arn)["Status"] == "COMPLETED"
    assert counts(sqs, source) == Counts(1, 0, 0), "a redriven message must not expire on arrival"
    clock.advance(59)
    (back,) = receive(sqs, source)
    assert back["MessageId"] == sent


def test_deleting_the_destination_while_a_task_runs_fails_the_task_with_a_reason(sqs, make_queue):
    _, dlq, dlq_arn, ids = _dead_lettered(sqs, make_queue, 20)
    destination = make_queue(name=unique_queue_name("destination"))
    sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=arn_of(sqs, destination),
                                MaxNumberOfMessagesPerSecond=10)
    moved_before = wait_for_moved(sqs, dlq_arn, at_least=1)
    sqs.delete_queue(QueueUrl=destination)
    task = wait_for_task(sqs, dlq_arn)  # bounded: a task that hangs fails the test
    assert task["Status"] == "FAILED", task
    assert "does not exist" in task["FailureReason"], task
    assert "TaskHandle" not in task
    moved = task["ApproximateNumberOfMessagesMoved"]
    assert moved_before <= moved < 20
    assert counts(sqs, dlq) == Counts(20 - moved, 0, 0), "what was not moved stays in the dead-letter queue"
    # the failed task is not active: a new one may start for the source
    sqs.start_message_move_task(SourceArn=dlq_arn)
    assert wait_for_task(sqs, dlq_arn)["Status"] == "COMPLETED"
