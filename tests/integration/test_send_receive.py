"""SendMessage, ReceiveMessage and DeleteMessage: bodies, sizes, receipt handles."""

from __future__ import annotations

import json

import pytest
from support.sqs import Counts, counts, md5_of_body, raises_code, raises_modeled, receive, receive_all, send_bodies
from support.wire import raw_json_call

# --- the basic round trip ------------------------------------------------------------


def test_a_sent_message_is_received_with_its_id_body_and_md5(sqs, queue_url):
    body = "hello queueserver"
    sent = sqs.send_message(QueueUrl=queue_url, MessageBody=body)
    assert sent["MD5OfMessageBody"] == md5_of_body(body)
    assert sent["MessageId"]
    assert "MD5OfMessageAttributes" not in sent
    (msg,) = receive(sqs, queue_url)
    assert msg["MessageId"] == sent["MessageId"]
    assert msg["Body"] == body
    assert msg["MD5OfBody"] == md5_of_body(body)
    assert msg["ReceiptHandle"]
    assert "MessageAttributes" not in msg
    assert msg.get("Attributes", {}) == {}


def test_every_send_gets_a_new_message_id(sqs, queue_url):
    ids = send_bodies(sqs, queue_url, ["same"] * 5)
    assert len(set(ids)) == 5


def test_a_message_goes_only_to_the_queue_it_was_sent_to(sqs, make_queue):
    a, b = make_queue(), make_queue()
    sqs.send_message(QueueUrl=a, MessageBody="for-a")
    assert receive(sqs, b) == []
    assert [m["Body"] for m in receive(sqs, a)] == ["for-a"]


def test_receiving_from_an_empty_queue_returns_no_messages(sqs, queue_url):
    resp = sqs.receive_message(QueueUrl=queue_url)
    assert resp.get("Messages", []) == []


def test_receive_returns_one_message_by_default(sqs, queue_url):
    send_bodies(sqs, queue_url, ["a", "b", "c"])
    assert len(sqs.receive_message(QueueUrl=queue_url)["Messages"]) == 1
    assert counts(sqs, queue_url) == Counts(2, 1, 0)


@pytest.mark.parametrize("max_messages", [1, 2, 5, 10])
def test_receive_returns_at_most_max_number_of_messages(sqs, queue_url, max_messages):
    send_bodies(sqs, queue_url, [f"m{i}" for i in range(12)])
    got = receive(sqs, queue_url, MaxNumberOfMessages=max_messages)
    # 12 visible, small: the server returns as many as asked for, oldest first (SQS may return fewer)
    assert [m["Body"] for m in got] == [f"m{i}" for i in range(max_messages)]
    assert counts(sqs, queue_url) == Counts(12 - max_messages, max_messages, 0)


def test_draining_a_queue_delivers_every_message_exactly_once(sqs, queue_url):
    bodies = [f"message-{i}" for i in range(25)]
    ids = send_bodies(sqs, queue_url, bodies)
    got = receive_all(sqs, queue_url)
    assert sorted(m["Body"] for m in got) == sorted(bodies)
    assert sorted(m["MessageId"] for m in got) == sorted(ids)
    assert counts(sqs, queue_url) == Counts(0, 25, 0)


@pytest.mark.parametrize("param,value", [
    ("MaxNumberOfMessages", 0),
    ("MaxNumberOfMessages", 11),
    ("MaxNumberOfMessages", -1),
    ("VisibilityTimeout", -1),
    ("VisibilityTimeout", 43201),
    ("WaitTimeSeconds", -1),
    ("WaitTimeSeconds", 21),
])
def test_receive_with_an_out_of_range_parameter_fails_and_takes_nothing(
        sqs, queue_url, param, value):
    send_bodies(sqs, queue_url, ["untouched"])
    with raises_code("InvalidParameterValue"):
        sqs.receive_message(QueueUrl=queue_url, **{param: value})
    assert counts(sqs, queue_url) == Counts(1, 0, 0)


# --- bodies ----------------------------------------------------------------------------

GOOD_BODIES = {
    "emoji": "launch \U0001F680 done \u2705",
    "cr-lf-tab": "line1\r\nline2\rline3\n\tindented",
    "lone-cr": "\r",
    "cjk": "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
    "bmp-edges": "\x20\ud7ff\ue000\ufffd",
    "last-plane": "\U00010000\U0010ffff",
    "xml-specials": "<a href=\"x\">&amp; 'quoted'</a> ]]>",
    "json-text": json.dumps({"k": [1, 2, {"n": None}], "s": "\\\""}),
    "whitespace-only": " \t\n",
    "one-char": "x",
}


@pytest.mark.parametrize("body", GOOD_BODIES.values(), ids=GOOD_BODIES.keys())
def test_a_body_of_allowed_characters_round_trips_exactly(sqs, queue_url, body):
    sent = sqs.send_message(QueueUrl=queue_url, MessageBody=body)
    assert sent["MD5OfMessageBody"] == md5_of_body(body)
    (msg,) = receive(sqs, queue_url)
    assert msg["Body"] == body
    assert msg["MD5OfBody"] == md5_of_body(body)


BAD_BODIES = {
    "nul": "before\x00after",
    "soh": "\x01",
    "backspace": "a\x08b",
    "vertical-tab": "a\x0bb",
    "form-feed": "a\x0cb",
    "unit-separator": "\x1f",
    "fffe": "a\ufffeb",
    "ffff": "\uffff",
}


@pytest.mark.parametrize("body", BAD_BODIES.values(), ids=BAD_BODIES.keys())
def test_a_body_with_a_forbidden_character_fails_with_invalid_message_contents(
        sqs, queue_url, body):
    with raises_modeled(sqs, "InvalidMessageContents"):
        sqs.send_message(QueueUrl=queue_url, MessageBody=body)
    assert counts(sqs, queue_url) == Counts(0, 0, 0)


def test_a_body_with_a_lone_surrogate_fails_with_invalid_message_contents(server, sqs, queue_url):
    # boto3 cannot encode a lone surrogate; JSON can carry one as an escape.
    payload = ('{"QueueUrl": %s, "MessageBody": "a\\ud800b"}' % json.dumps(queue_url)).encode()
    resp = raw_json_call(server.endpoint, "SendMessage", payload)
    assert resp.status == 400, resp
    assert resp.json()["__type"].endswith("InvalidMessageContents")
    assert resp.headers["x-amzn-query-error"] == "InvalidMessageContents;Sender"
    assert counts(sqs, queue_url) == Counts(0, 0, 0)


def test_an_empty_body_is_rejected(sqs, queue_url):
    with raises_code("InvalidParameterValue", "MissingParameter"):
        sqs.send_message(QueueUrl=queue_url, MessageBody="")
    assert counts(sqs, queue_url) == Counts(0, 0, 0)


# --- sizes -----------------------------------------------------------------------------

MIB = 1024 * 1024


def test_a_one_mebibyte_body_is_accepted_by_default(sqs, queue_url):
    body = "x" * MIB
    sqs.send_message(QueueUrl=queue_url, MessageBody=body)
    (msg,) = receive(sqs, queue_url)
    assert msg["Body"] == body


def test_a_body_one_byte_over_a_mebibyte_is_rejected(sqs, queue_url):
    with raises_code("InvalidParameterValue"):
        sqs.send_message(QueueUrl=queue_url, MessageBody="x" * (MIB + 1))
    assert counts(sqs, queue_url) == Counts(0, 0, 0)


def test_the_size_limit_counts_utf8_bytes_not_characters(sqs, make_queue):
    url = make_queue({"MaximumMessageSize": "1024"})
    sqs.send_message(QueueUrl=url, MessageBody="\u00e9" * 512)  # 1024 bytes
    with raises_code("InvalidParameterValue"):
        sqs.send_message(QueueUrl=url, MessageBody="\u00e9" * 513)  # 513 chars, 1026 bytes
    assert counts(sqs, url) == Counts(1, 0, 0)


def test_a_message_at_the_queue_maximum_size_is_accepted_and_one_byte_more_is_rejected(
        sqs, make_queue):
    url = make_queue({"MaximumMessageSize": "1024"})
    sqs.send_message(QueueUrl=url, MessageBody="a" * 1024)
    with raises_code("InvalidParameterValue"):
        sqs.send_message(QueueUrl=url, MessageBody="a" * 1025)
    assert counts(sqs, url) == Counts(1, 0, 0)


def test_message_attributes_count_toward_the_maximum_size(sqs, make_queue):
    url = make_queue({"MaximumMessageSize": "1024"})
    with raises_code("InvalidParameterValue"):
        sqs.send_message(QueueUrl=url, MessageBody="a" * 1000, MessageAttributes={
            "attr": {"DataType": "String", "StringValue": "v" * 30}})
    assert counts(sqs, url) == Counts(0, 0, 0)


def test_lowering_the_maximum_size_applies_to_the_next_send(sqs, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="b" * 2000)
    sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"MaximumMessageSize": "1024"})
    with raises_code("InvalidParameterValue"):
        sqs.send_message(QueueUrl=queue_url, MessageBody="b" * 2000)
    assert counts(sqs, queue_url) == Counts(1, 0, 0)


# --- receipt handles and DeleteMessage -------------------------------------------------


def test_every_receive_issues_a_new_receipt_handle(sqs, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="again and again")
    handles = []
    for _ in range(3):
        (msg,) = receive(sqs, queue_url)
        handles.append(msg["ReceiptHandle"])
        sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"],
                                      VisibilityTimeout=0)
    assert len(set(handles)) == 3


def test_delete_message_removes_the_message_for_good(sqs, queue_url, clock):
    sqs.send_message(QueueUrl=queue_url, MessageBody="bye")
    (msg,) = receive(sqs, queue_url, VisibilityTimeout=5)
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"])
    assert counts(sqs, queue_url) == Counts(0, 0, 0)
    clock.advance(6)
    assert receive_all(sqs, queue_url) == []


def test_deleting_a_message_twice_with_its_handle_succeeds(sqs, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="twice")
    (msg,) = receive(sqs, queue_url)
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"])
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"])
    assert counts(sqs, queue_url) == Counts(0, 0, 0)


def test_delete_message_deletes_only_that_message(sqs, queue_url, clock):
    send_bodies(sqs, queue_url, ["keep-1", "drop", "keep-2"])
    got = receive_all(sqs, queue_url, VisibilityTimeout=5)
    drop = next(m for m in got if m["Body"] == "drop")
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=drop["ReceiptHandle"])
    assert counts(sqs, queue_url) == Counts(0, 2, 0)
    clock.advance(6)
    assert sorted(m["Body"] for m in receive_all(sqs, queue_url)) == ["keep-1", "keep-2"]


def test_a_stale_receipt_handle_deletes_nothing(sqs, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="received twice")
    (first,) = receive(sqs, queue_url)
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=first["ReceiptHandle"],
                                  VisibilityTimeout=0)
    (second,) = receive(sqs, queue_url, VisibilityTimeout=600)
    assert second["ReceiptHandle"] != first["ReceiptHandle"]
    # Standard queue: an old handle is accepted but the message survives.
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=first["ReceiptHandle"])
    assert counts(sqs, queue_url) == Counts(0, 1, 0)
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=second["ReceiptHandle"])
    assert counts(sqs, queue_url) == Counts(0, 0, 0)


def test_a_stale_receipt_handle_after_visibility_expiry_deletes_nothing(sqs, queue_url, clock):
    sqs.send_message(QueueUrl=queue_url, MessageBody="expired then received again")
    (first,) = receive(sqs, queue_url, VisibilityTimeout=10)
    clock.advance(11)
    (second,) = receive(sqs, queue_url, VisibilityTimeout=600)
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=first["ReceiptHandle"])
    assert counts(sqs, queue_url) == Counts(0, 1, 0)
    assert second["MessageId"] == first["MessageId"]


@pytest.mark.parametrize("handle", [
    "garbage",
    "x" * 300,
    "AQEB" + "A" * 200,
    "\u00e9t\u00e9",
], ids=["word", "long", "base64-like", "non-ascii"])
def test_a_garbled_receipt_handle_fails_with_receipt_handle_is_invalid(sqs, queue_url, handle):
    sqs.send_message(QueueUrl=queue_url, MessageBody="safe")
    receive(sqs, queue_url)
    with raises_modeled(sqs, "ReceiptHandleIsInvalid"):
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=handle)
    assert counts(sqs, queue_url) == Counts(0, 1, 0)


def _forge(handle: str) -> str:
    i = len(handle) // 2
    replacement = "B" if handle[i] != "B" else "C"
    return handle[:i] + replacement + handle[i + 1:]


def test_a_forged_receipt_handle_fails_with_receipt_handle_is_invalid_and_deletes_nothing(
        sqs, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="guarded")
    (msg,) = receive(sqs, queue_url)
    with raises_modeled(sqs, "ReceiptHandleIsInvalid"):
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=_forge(msg["ReceiptHandle"]))
    assert counts(sqs, queue_url) == Counts(0, 1, 0)
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"])
    assert counts(sqs, queue_url) == Counts(0, 0, 0)


def test_a_receipt_handle_from_another_queue_does_not_delete_anything_here(sqs, make_queue):
    a, b = make_queue(), make_queue()
    sqs.send_message(QueueUrl=a, MessageBody="in a")
    sqs.send_message(QueueUrl=b, MessageBody="in b")
    (from_a,) = receive(sqs, a)
    assert len(receive(sqs, b)) == 1
    try:
        sqs.delete_message(QueueUrl=b, ReceiptHandle=from_a["ReceiptHandle"])
    except sqs.exceptions.ReceiptHandleIsInvalid:
        pass
    assert counts(sqs, a) == Counts(0, 1, 0)
    assert counts(sqs, b) == Counts(0, 1, 0)


def test_an_empty_receipt_handle_is_rejected(sqs, queue_url):
    with raises_code("ReceiptHandleIsInvalid", "MissingParameter", "InvalidParameterValue"):
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle="")
