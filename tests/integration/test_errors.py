"""Error edges: unknown queues, missing parameters, malformed requests, the error wire format."""

from __future__ import annotations

import json
import uuid

import pytest
from botocore.exceptions import ClientError
from support.sqs import raises_code, raises_modeled
from support.wire import raw_json_call, raw_request

# --- an unknown queue, for every action that takes a QueueUrl -------------------------------

ACTIONS_ON_A_QUEUE = {
    "SendMessage": lambda c, u: c.send_message(QueueUrl=u, MessageBody="x"),
    "SendMessageBatch": lambda c, u: c.send_message_batch(
        QueueUrl=u, Entries=[{"Id": "a", "MessageBody": "x"}]),
    "ReceiveMessage": lambda c, u: c.receive_message(QueueUrl=u),
    "DeleteMessage": lambda c, u: c.delete_message(QueueUrl=u, ReceiptHandle="handle"),
    "DeleteMessageBatch": lambda c, u: c.delete_message_batch(
        QueueUrl=u, Entries=[{"Id": "a", "ReceiptHandle": "handle"}]),
    "ChangeMessageVisibility": lambda c, u: c.change_message_visibility(
        QueueUrl=u, ReceiptHandle="handle", VisibilityTimeout=1),
    "ChangeMessageVisibilityBatch": lambda c, u: c.change_message_visibility_batch(
        QueueUrl=u, Entries=[{"Id": "a", "ReceiptHandle": "handle", "VisibilityTimeout": 1}]),
    "GetQueueAttributes": lambda c, u: c.get_queue_attributes(QueueUrl=u, AttributeNames=["All"]),
    "SetQueueAttributes": lambda c, u: c.set_queue_attributes(
        QueueUrl=u, Attributes={"VisibilityTimeout": "5"}),
    "PurgeQueue": lambda c, u: c.purge_queue(QueueUrl=u),
    "DeleteQueue": lambda c, u: c.delete_queue(QueueUrl=u),
    "TagQueue": lambda c, u: c.tag_queue(QueueUrl=u, Tags={"k": "v"}),
    "UntagQueue": lambda c, u: c.untag_queue(QueueUrl=u, TagKeys=["k"]),
    "ListQueueTags": lambda c, u: c.list_queue_tags(QueueUrl=u),
    "AddPermission": lambda c, u: c.add_permission(
        QueueUrl=u, Label="l", AWSAccountIds=["111122223333"], Actions=["SendMessage"]),
    "RemovePermission": lambda c, u: c.remove_permission(QueueUrl=u, Label="l"),
}


@pytest.mark.parametrize("action", sorted(ACTIONS_ON_A_QUEUE))
def test_every_action_on_an_unknown_queue_fails_with_queue_does_not_exist(sqs, server, action):
    url = f"{server.endpoint}/000000000000/never-created-{uuid.uuid4().hex[:10]}"
    with raises_modeled(sqs, "QueueDoesNotExist"):
        ACTIONS_ON_A_QUEUE[action](sqs, url)


def test_a_queue_url_with_a_different_account_is_an_unknown_queue(sqs, server, queue_name):
    sqs.create_queue(QueueName=queue_name)
    with raises_modeled(sqs, "QueueDoesNotExist"):
        sqs.send_message(QueueUrl=f"{server.endpoint}/123456789012/{queue_name}", MessageBody="x")


@pytest.mark.parametrize("bad_url", ["not a url", "http://127.0.0.1:1/", ""],
                         ids=["words", "no-path", "empty"])
def test_a_malformed_queue_url_is_a_client_error(sqs, bad_url):
    with pytest.raises(ClientError) as info:
        sqs.send_message(QueueUrl=bad_url, MessageBody="x")
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


# --- the error wire format ----------------------------------------------------------------


def test_an_error_has_the_sqs_json_shape_and_the_query_error_header(server):
    url = f"{server.endpoint}/000000000000/nope-{uuid.uuid4().hex[:8]}"
    resp = raw_json_call(server.endpoint, "GetQueueAttributes",
                         {"QueueUrl": url, "AttributeNames": ["All"]})
    assert resp.status == 400
    assert resp.headers["content-type"].startswith("application/x-amz-json-1.0")
    body = resp.json()
    assert body["__type"] == "com.amazonaws.sqs#QueueDoesNotExist"
    assert isinstance(body.get("message"), str) and body["message"]
    assert resp.headers["x-amzn-query-error"] == "AWS.SimpleQueueService.NonExistentQueue;Sender"
    assert resp.headers.get("x-amzn-requestid")


def test_a_successful_response_carries_a_request_id(server, queue_url):
    resp = raw_json_call(server.endpoint, "GetQueueAttributes",
                         {"QueueUrl": queue_url, "AttributeNames": ["QueueArn"]})
    assert resp.status == 200
    assert resp.headers["content-type"].startswith("application/x-amz-json-1.0")
    assert resp.headers.get("x-amzn-requestid")
    assert "QueueArn" in resp.json()["Attributes"]


def test_boto3_sees_the_request_id_of_an_error(sqs, server):
    with raises_modeled(sqs, "QueueDoesNotExist") as info:
        sqs.get_queue_url(QueueName=f"nope-{uuid.uuid4().hex[:8]}")
    assert info.value.response["ResponseMetadata"].get("RequestId")


# --- missing required parameters ------------------------------------------------------------

MISSING = {
    "CreateQueue-no-name": lambda c, u: c.create_queue(),
    "GetQueueUrl-no-name": lambda c, u: c.get_queue_url(),
    "SendMessage-no-body": lambda c, u: c.send_message(QueueUrl=u),
    "SendMessage-no-queue": lambda c, u: c.send_message(MessageBody="x"),
    "ReceiveMessage-no-queue": lambda c, u: c.receive_message(),
    "DeleteMessage-no-handle": lambda c, u: c.delete_message(QueueUrl=u),
    "ChangeMessageVisibility-no-timeout": lambda c, u: c.change_message_visibility(
        QueueUrl=u, ReceiptHandle="h"),
    "SetQueueAttributes-no-attributes": lambda c, u: c.set_queue_attributes(QueueUrl=u),
    "TagQueue-no-tags": lambda c, u: c.tag_queue(QueueUrl=u),
    "UntagQueue-no-keys": lambda c, u: c.untag_queue(QueueUrl=u),
    "AddPermission-no-actions": lambda c, u: c.add_permission(
        QueueUrl=u, Label="l", AWSAccountIds=["111122223333"]),
    "RemovePermission-no-label": lambda c, u: c.remove_permission(QueueUrl=u),
    "PurgeQueue-no-queue": lambda c, u: c.purge_queue(),
    "DeleteQueue-no-queue": lambda c, u: c.delete_queue(),
}


@pytest.mark.parametrize("case", sorted(MISSING))
def test_a_missing_required_parameter_fails_with_missing_parameter(
        sqs_unvalidated, queue_url, case):
    with raises_code("MissingParameter"):
        MISSING[case](sqs_unvalidated, queue_url)
    # and the queue is untouched
    attrs = sqs_unvalidated.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])
    assert attrs["Attributes"]["ApproximateNumberOfMessages"] == "0"


@pytest.mark.parametrize("action", ["SendMessageBatch", "DeleteMessageBatch",
                                    "ChangeMessageVisibilityBatch"])
def test_a_batch_without_entries_is_refused(sqs_unvalidated, queue_url, action):
    method = getattr(sqs_unvalidated, {
        "SendMessageBatch": "send_message_batch",
        "DeleteMessageBatch": "delete_message_batch",
        "ChangeMessageVisibilityBatch": "change_message_visibility_batch"}[action])
    with raises_code("MissingParameter", "AWS.SimpleQueueService.EmptyBatchRequest"):
        method(QueueUrl=queue_url)


# --- malformed requests: a 400, never a 500, and the server keeps serving --------------------

MALFORMED_BODIES = {
    "garbage": b"this is { not json",
    "truncated": b'{"QueueName": "abc"',
    "array": b"[]",
    "string": b'"CreateQueue"',
    "null": b"null",
    "number": b"42",
    "not-utf8": b'{"QueueName": "\xff\xfe"}',
}


def _assert_json_client_error(resp):
    assert resp.status == 400, (resp.status, resp.body[:300])
    body = resp.json()
    assert isinstance(body, dict) and body.get("__type"), body


@pytest.mark.parametrize("body", MALFORMED_BODIES.values(), ids=MALFORMED_BODIES.keys())
def test_a_malformed_json_body_gets_a_400_json_error_and_the_server_keeps_serving(
        server, sqs, body):
    resp = raw_request(server.endpoint, body, target="AmazonSQS.CreateQueue")
    _assert_json_client_error(resp)
    sqs.list_queues()  # the server still answers


WRONG_TYPES = {
    "name-is-number": ("CreateQueue", {"QueueName": 123}),
    "attributes-is-list": ("CreateQueue", {"QueueName": "typed-q", "Attributes": ["a"]}),
    "attribute-value-is-number": ("CreateQueue", {"QueueName": "typed-q2",
                                                   "Attributes": {"VisibilityTimeout": 30}}),
    "tags-is-string": ("CreateQueue", {"QueueName": "typed-q3", "tags": "a=b"}),
    "body-is-object": ("SendMessage", {"QueueUrl": "{url}", "MessageBody": {"a": 1}}),
    "max-is-string": ("ReceiveMessage", {"QueueUrl": "{url}", "MaxNumberOfMessages": "ten"}),
    "wait-is-float": ("ReceiveMessage", {"QueueUrl": "{url}", "WaitTimeSeconds": 1.5}),
    "wait-is-huge": ("ReceiveMessage", {"QueueUrl": "{url}", "WaitTimeSeconds": 10 ** 30}),
    "entries-is-object": ("SendMessageBatch", {"QueueUrl": "{url}", "Entries": {"Id": "a"}}),
    "entry-is-string": ("DeleteMessageBatch", {"QueueUrl": "{url}", "Entries": ["h"]}),
    "names-is-string": ("GetQueueAttributes", {"QueueUrl": "{url}", "AttributeNames": "All"}),
    "queue-url-is-list": ("PurgeQueue", {"QueueUrl": ["{url}"]}),
    "attr-value-not-object": ("SendMessage", {"QueueUrl": "{url}", "MessageBody": "b",
                                              "MessageAttributes": {"a": "plain"}}),
    "binary-not-base64": ("SendMessage", {"QueueUrl": "{url}", "MessageBody": "b",
                                          "MessageAttributes": {"a": {"DataType": "Binary",
                                                                      "BinaryValue": "%%%"}}}),
}


@pytest.mark.parametrize("case", sorted(WRONG_TYPES))
def test_a_member_of_the_wrong_type_gets_a_400_and_changes_nothing(server, sqs, queue_url, case):
    action, payload = WRONG_TYPES[case]
    payload = json.loads(json.dumps(payload).replace("{url}", queue_url))
    resp = raw_json_call(server.endpoint, action, payload)
    _assert_json_client_error(resp)
    attrs = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
    assert attrs["ApproximateNumberOfMessages"] == "0"
    assert attrs["ApproximateNumberOfMessagesNotVisible"] == "0"


def test_an_unknown_action_gets_a_400_json_error(server, sqs):
    resp = raw_json_call(server.endpoint, "FlyToTheMoon", {})
    _assert_json_client_error(resp)
    sqs.list_queues()


def test_a_target_for_another_service_gets_a_400_json_error(server, sqs):
    resp = raw_request(server.endpoint, b"{}", target="DynamoDB_20120810.ListTables")
    assert resp.status == 400, resp
    sqs.list_queues()


def test_a_json_post_without_a_target_gets_a_400(server, sqs):
    resp = raw_request(server.endpoint, b"{}", target=None)
    assert resp.status == 400, resp
    sqs.list_queues()


def test_an_empty_body_is_not_a_server_error(server, sqs):
    resp = raw_request(server.endpoint, b"", target="AmazonSQS.ListQueues")
    assert resp.status in (200, 400), resp
    sqs.list_queues()


def test_an_unsigned_request_is_not_a_server_error(server, sqs):
    resp = raw_json_call(server.endpoint, "ListQueues", {}, sign=False)
    assert resp.status < 500, resp
    sqs.list_queues()


def test_many_bad_requests_in_a_row_leave_the_server_healthy(server, sqs, queue_url):
    for body in list(MALFORMED_BODIES.values()) * 3:
        assert raw_request(server.endpoint, body, target="AmazonSQS.SendMessage").status == 400
    sqs.send_message(QueueUrl=queue_url, MessageBody="still alive")
    assert sqs.receive_message(QueueUrl=queue_url)["Messages"][0]["Body"] == "still alive"
