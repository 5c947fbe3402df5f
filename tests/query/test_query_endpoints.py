"""The Query endpoints as AWS answers them: GET on a queue URL, actions a queue URL refuses, a bare
GET, `Accept: application/json`, and the empty receive."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

import pytest
from support.wire import query_get, query_post


def _path(url: str) -> str:
    return "/" + url.split("/", 3)[3]


def _create(endpoint: str, name: str) -> str:
    resp = query_post(endpoint, {"Action": "CreateQueue", "QueueName": name})
    assert resp.status == 200, resp.body
    url = resp.text("CreateQueueResult/QueueUrl")
    assert url
    return url


def test_a_get_on_the_queue_url_sends_with_the_parameters_in_the_query_string(server, queue_name):
    url = _create(server.endpoint, queue_name)
    sent = query_get(server.endpoint, {"Action": "SendMessage", "MessageBody": "by GET"}, path=_path(url), sign=None)
    assert sent.status == 200, sent.body
    received = query_get(server.endpoint, {"Action": "ReceiveMessage"}, path=_path(url), sign=None)
    assert received.text("ReceiveMessageResult/Message/Body") == "by GET"
    assert received.text("ReceiveMessageResult/Message/MessageId") == sent.text("SendMessageResult/MessageId")


@pytest.mark.parametrize("action, extra", [("CreateQueue", {"QueueName": "{queue_name}-other"}), ("ListQueues", {})])
@pytest.mark.parametrize("method", ["POST", "GET"])
def test_an_action_that_is_not_queue_scoped_on_a_queue_url_is_invalid_action(server, queue_name, action, extra, method):
    url = _create(server.endpoint, queue_name)
    params = {"Action": action, **{k: v.format(queue_name=queue_name) for k, v in extra.items()}}
    resp = (query_post if method == "POST" else query_get)(server.endpoint, params, path=_path(url))
    assert resp.status == 400, resp.body
    assert resp.text("Error/Code") == "InvalidAction"
    assert resp.text("Error/Message") == f"The action {action} is not valid for this endpoint."
    listed = query_post(server.endpoint, {"Action": "ListQueues", "QueueNamePrefix": queue_name})
    assert listed.texts("ListQueuesResult/QueueUrl") == [url]  # nothing was created


def test_a_get_on_a_queue_url_without_an_action_is_a_404_unknown_operation(server, queue_name):
    url = _create(server.endpoint, queue_name)
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(url, timeout=10)
    with info.value as error:
        assert error.code == 404
        assert error.read() == b"<UnknownOperationException/>"


def test_an_empty_receive_is_an_empty_receive_message_result_element(server, queue_name):
    url = _create(server.endpoint, queue_name)
    resp = query_post(server.endpoint, {"Action": "ReceiveMessage"}, path=_path(url))
    assert resp.status == 200
    assert b"<ReceiveMessageResult/>" in resp.body
    assert resp.root.find("{http://queue.amazonaws.com/doc/2012-11-05/}ReceiveMessageResult") is not None


def _json_query(endpoint: str, params: dict[str, str], path: str = "/") -> tuple[int, str, dict]:
    body = urllib.parse.urlencode({**params, "Version": "2012-11-05"}).encode()
    request = urllib.request.Request(endpoint + path, data=body, method="POST", headers={
        "Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, resp.headers["Content-Type"], json.loads(resp.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.headers["Content-Type"], json.loads(error.read())


def test_accept_json_renders_the_query_document_as_json(server, queue_name):
    url = _create(server.endpoint, queue_name)
    status, content_type, listed = _json_query(server.endpoint, {"Action": "ListQueues", "QueueNamePrefix": queue_name})
    assert (status, content_type) == (200, "application/json")
    assert listed["ListQueuesResponse"]["ListQueuesResult"]["queueUrls"] == [url]
    assert listed["ListQueuesResponse"]["ResponseMetadata"]["RequestId"]

    _json_query(server.endpoint, {"Action": "SendMessage", "MessageBody": "as json"}, _path(url))
    status, _, received = _json_query(server.endpoint, {"Action": "ReceiveMessage", "AttributeName.1": "All"},
                                      _path(url))
    [message] = received["ReceiveMessageResponse"]["ReceiveMessageResult"]["messages"]
    assert message["Body"] == "as json"
    assert message["ReceiptHandle"] and message["MessageId"]
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"

    _, _, empty = _json_query(server.endpoint, {"Action": "ReceiveMessage"}, _path(url))
    assert empty["ReceiveMessageResponse"]["ReceiveMessageResult"]["messages"] == []


def test_accept_json_renders_an_error_as_the_error_document(server):
    status, _, error = _json_query(server.endpoint, {"Action": "GetQueueUrl", "QueueName": "never-created-here"})
    assert status == 400
    assert error["ErrorResponse"]["Error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue"
    assert error["ErrorResponse"]["Error"]["Type"] == "Sender"


def test_without_accept_json_the_answer_is_xml(server, queue_name):
    resp = query_post(server.endpoint, {"Action": "CreateQueue", "QueueName": queue_name})
    assert resp.headers["content-type"].startswith("text/xml")
    assert resp.text("CreateQueueResult/QueueUrl")
