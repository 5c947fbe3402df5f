"""Receipt handles after the visibility timeout ended, and handles of earlier receives (observed on AWS).

A handle whose visibility timeout expired, with no receive since, is still the latest one:
on a standard queue DeleteMessage deletes with it and ChangeMessageVisibility (0 included)
succeeds. A handle superseded by a later receive still changes the message's visibility on a
standard queue, but deletes nothing ("the request succeeds, but the message might not be
deleted"). On a FIFO queue a handle whose message is no longer in flight under it fails as
expired, with InvalidParameterValue, for DeleteMessage, ChangeMessageVisibility and their batch
entries. A handle that is not one the queue issued is ReceiptHandleIsInvalid everywhere.
"""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError
from support.fifo import got, make_fifo, rcv, send
from support.sqs import Counts, assert_code, counts, receive


def expired(handle: str) -> str:
    return f"Value {handle} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired."


def _received(sqs, url, body="m", visibility=5):
    sqs.send_message(QueueUrl=url, MessageBody=body)
    [message] = receive(sqs, url, VisibilityTimeout=visibility)
    return message


def test_the_latest_handle_deletes_its_message_after_the_visibility_timeout_ended(sqs, queue_url, clock):
    message = _received(sqs, queue_url)
    clock.advance(6)
    assert counts(sqs, queue_url) == Counts(1, 0, 0)
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    assert counts(sqs, queue_url) == Counts(0, 0, 0)
    assert receive(sqs, queue_url) == []


def test_the_latest_handle_changes_visibility_to_zero_after_the_visibility_timeout_ended(sqs, queue_url, clock):
    message = _received(sqs, queue_url)
    clock.advance(6)
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
    assert counts(sqs, queue_url) == Counts(1, 0, 0)
    [again] = receive(sqs, queue_url)
    assert again["MessageId"] == message["MessageId"]


def test_a_handle_superseded_by_a_later_receive_deletes_nothing(sqs, queue_url, clock):
    first = _received(sqs, queue_url)
    clock.advance(6)
    [second] = receive(sqs, queue_url, VisibilityTimeout=60)
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=first["ReceiptHandle"])  # succeeds, does nothing
    assert counts(sqs, queue_url) == Counts(0, 1, 0)
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=second["ReceiptHandle"])
    assert counts(sqs, queue_url) == Counts(0, 0, 0)


def test_a_visibility_change_with_an_earlier_receives_handle_acts_on_the_message(sqs, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="m")
    [first] = receive(sqs, queue_url, VisibilityTimeout=0)
    [second] = receive(sqs, queue_url, VisibilityTimeout=3)
    assert second["ReceiptHandle"] != first["ReceiptHandle"]
    assert counts(sqs, queue_url) == Counts(0, 1, 0)
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0)
    [again] = receive(sqs, queue_url, VisibilityTimeout=3)
    assert again["MessageId"] == first["MessageId"]


def test_an_earlier_receives_handle_hides_the_message_for_its_new_timeout(sqs, queue_url, clock):
    first = _received(sqs, queue_url, visibility=0)
    receive(sqs, queue_url, VisibilityTimeout=3)
    resp = sqs.change_message_visibility_batch(QueueUrl=queue_url, Entries=[
        {"Id": "earlier", "ReceiptHandle": first["ReceiptHandle"], "VisibilityTimeout": 60}])
    assert [e["Id"] for e in resp["Successful"]] == ["earlier"] and "Failed" not in resp
    clock.advance(4)  # past the later receive's 3 s: the 60 s set through the earlier handle run
    assert counts(sqs, queue_url) == Counts(0, 1, 0)
    clock.advance(57)
    assert counts(sqs, queue_url) == Counts(1, 0, 0)


@pytest.mark.parametrize("handle_of", ["another queue", "a changed character"])
def test_a_handle_the_queue_did_not_issue_is_invalid_for_a_visibility_change(sqs, queue_url, make_queue, handle_of):
    mine = _received(sqs, queue_url, visibility=60)["ReceiptHandle"]
    if handle_of == "another queue":
        handle = _received(sqs, make_queue(), visibility=60)["ReceiptHandle"]
    else:
        handle = mine[:10] + ("A" if mine[10] != "A" else "B") + mine[11:]
    with pytest.raises(ClientError) as info:
        sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=handle, VisibilityTimeout=0)
    assert_code(info.value, "ReceiptHandleIsInvalid")
    assert counts(sqs, queue_url) == Counts(0, 1, 0)


def test_batches_with_expired_latest_handles_succeed_on_a_standard_queue(sqs, queue_url, clock):
    deleted, changed = _received(sqs, queue_url, "deleted"), _received(sqs, queue_url, "changed")
    clock.advance(6)
    changes = sqs.change_message_visibility_batch(QueueUrl=queue_url, Entries=[
        {"Id": "c", "ReceiptHandle": changed["ReceiptHandle"], "VisibilityTimeout": 60}])
    deletes = sqs.delete_message_batch(QueueUrl=queue_url, Entries=[
        {"Id": "d", "ReceiptHandle": deleted["ReceiptHandle"]}])
    assert ([e["Id"] for e in changes["Successful"]], changes.get("Failed", [])) == (["c"], [])
    assert ([e["Id"] for e in deletes["Successful"]], deletes.get("Failed", [])) == (["d"], [])
    assert counts(sqs, queue_url) == Counts(0, 1, 0), "deleted is gone, changed is hidden again"


# --- FIFO -----------------------------------------------------------------------------------


@pytest.fixture
def fifo_expired(sqs, make_queue, clock):
    """A FIFO queue whose one message was received and whose visibility timeout then ended."""
    url = make_fifo(make_queue, VisibilityTimeout="5")
    send(sqs, url, "g", 0)
    [message] = rcv(sqs, url)
    clock.advance(6)
    return url, message


def test_a_fifo_delete_with_an_expired_handle_is_invalid_and_keeps_the_message(sqs, fifo_expired):
    url, message = fifo_expired
    with pytest.raises(ClientError) as info:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert_code(info.value, "InvalidParameterValue")
    assert info.value.response["Error"]["Message"] == expired(message["ReceiptHandle"])
    assert got(rcv(sqs, url)) == ["g:0"]


def test_a_fifo_visibility_change_with_an_expired_handle_is_invalid_and_changes_nothing(sqs, fifo_expired):
    url, message = fifo_expired
    for timeout in (0, 60):
        with pytest.raises(ClientError) as info:
            sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"],
                                          VisibilityTimeout=timeout)
        assert_code(info.value, "InvalidParameterValue")
        assert info.value.response["Error"]["Message"] == expired(message["ReceiptHandle"])
    assert counts(sqs, url) == Counts(1, 0, 0)


def test_a_fifo_visibility_change_with_an_earlier_receives_handle_is_invalid(sqs, make_queue):
    url = make_fifo(make_queue)
    send(sqs, url, "g", 0)
    [first] = rcv(sqs, url, VisibilityTimeout=0)
    [second] = rcv(sqs, url, VisibilityTimeout=60)
    assert got([first, second]) == ["g:0", "g:0"]
    with pytest.raises(ClientError) as info:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0)
    assert_code(info.value, "InvalidParameterValue")
    assert info.value.response["Error"]["Message"] == expired(first["ReceiptHandle"])
    assert counts(sqs, url) == Counts(0, 1, 0)


def test_fifo_batch_entries_with_an_expired_handle_fail_alone_with_the_same_error(sqs, make_queue, clock):
    url = make_fifo(make_queue, VisibilityTimeout="5")
    send(sqs, url, "a", 0)
    send(sqs, url, "b", 0)
    [stale] = rcv(sqs, url, 1)
    clock.advance(6)
    [fresh] = rcv(sqs, url, 1)  # b waited longer than a, whose visibility just ended
    assert got([stale, fresh]) == ["a:0", "b:0"]
    handle = stale["ReceiptHandle"]
    for call, extra in ((sqs.change_message_visibility_batch, {"VisibilityTimeout": 60}),
                        (sqs.delete_message_batch, {})):
        resp = call(QueueUrl=url, Entries=[{"Id": "stale", "ReceiptHandle": handle, **extra},
                                           {"Id": "fresh", "ReceiptHandle": fresh["ReceiptHandle"], **extra}])
        assert [e["Id"] for e in resp["Successful"]] == ["fresh"]
        [failed] = resp["Failed"]
        assert (failed["Id"], failed["Code"], failed["SenderFault"], failed["Message"]) == \
            ("stale", "InvalidParameterValue", True, expired(handle))
