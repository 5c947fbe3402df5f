"""Hand-made Query requests: query-string-signed GETs, plain form POSTs, the XML on the wire."""

from __future__ import annotations

import json

import pytest
from support.wire import NS, query_get, query_post

# Every character class XML 1.0 allows, at its edges, and the ones markup needs escaped.
EVERY_ALLOWED = ("\t\n\r \x7f\u0080\u00ff\u0100\u07ff\u0800\ud7ff\ue000\ufffd"
                 "\U00010000\U0001F600\U0010ffff&<>\"' ]]> &amp; &#xD;")


def create(endpoint: str, name: str, **kwargs) -> str:
    resp = query_post(endpoint, {"Action": "CreateQueue", "QueueName": name}, **kwargs)
    assert resp.status == 200, resp.body
    url = resp.text("CreateQueueResult/QueueUrl")
    assert url
    return url


def path_of(url: str) -> str:
    return "/" + url.split("/", 3)[3]


def test_a_query_string_signed_get_runs_an_action_in_the_credential_scope_region(server, queue_name):
    resp = query_get(server.endpoint, {"Action": "CreateQueue", "QueueName": queue_name,
                                       "Attribute.1.Name": "VisibilityTimeout", "Attribute.1.Value": "41"},
                     region="ap-southeast-2")
    assert resp.status == 200, resp.body
    url = resp.text("CreateQueueResult/QueueUrl")
    # a GET to the queue URL itself names the queue; no QueueUrl parameter
    resp = query_get(server.endpoint, {"Action": "GetQueueAttributes", "AttributeName.1": "All"},
                     path=path_of(url), region="ap-southeast-2")
    assert resp.status == 200, resp.body
    attributes = dict(zip(resp.texts("GetQueueAttributesResult/Attribute/Name"),
                          resp.texts("GetQueueAttributesResult/Attribute/Value")))
    assert attributes["VisibilityTimeout"] == "41"
    assert attributes["QueueArn"] == f"arn:aws:sqs:ap-southeast-2:000000000000:{queue_name}"
    # the queue lives in that region only
    missing = query_get(server.endpoint, {"Action": "GetQueueUrl", "QueueName": queue_name}, region="us-east-1")
    assert missing.status == 400
    assert missing.text("Error/Code") == "AWS.SimpleQueueService.NonExistentQueue"


def test_a_query_string_signed_get_sends_and_receives(server, queue_name):
    url = create(server.endpoint, queue_name)
    body = "get \r\n body \U0001F600 & <b>"
    sent = query_get(server.endpoint, {"Action": "SendMessage", "MessageBody": body}, path=path_of(url))
    assert sent.status == 200, sent.body
    assert sent.text("SendMessageResult/MessageId")
    received = query_get(server.endpoint, {"Action": "ReceiveMessage", "QueueUrl": url})
    assert received.status == 200
    assert received.text("ReceiveMessageResult/Message/Body") == body
    assert received.text("ReceiveMessageResult/Message/MessageId") == sent.text("SendMessageResult/MessageId")


def test_a_header_signed_get_takes_the_region_from_the_authorization_header(server, queue_name):
    resp = query_get(server.endpoint, {"Action": "CreateQueue", "QueueName": queue_name}, sign="header",
                     region="sa-east-1")
    assert resp.status == 200, resp.body
    arn = query_get(server.endpoint, {"Action": "GetQueueAttributes", "AttributeName.1": "QueueArn"},
                    path=path_of(resp.text("CreateQueueResult/QueueUrl")), sign="header", region="sa-east-1")
    assert arn.text("GetQueueAttributesResult/Attribute/Value") == f"arn:aws:sqs:sa-east-1:000000000000:{queue_name}"


def test_a_hand_written_unsigned_form_post_round_trip(server, queue_name):
    """What a curl or Perl script sends: an unsigned form POST, to / and to the queue URL."""
    url = create(server.endpoint, queue_name, sign=False)
    assert url == f"{server.endpoint}/000000000000/{queue_name}"
    resp = query_post(server.endpoint, [
        ("Action", "SendMessage"), ("MessageBody", "plus+sign and space"),
        ("MessageAttribute.1.Name", "colour"), ("MessageAttribute.1.Value.DataType", "String"),
        ("MessageAttribute.1.Value.StringValue", "blue"),
    ], path=path_of(url), sign=False)
    assert resp.status == 200, resp.body
    assert resp.text("SendMessageResult/MD5OfMessageAttributes")
    resp = query_post(server.endpoint, {"Action": "ReceiveMessage", "MessageAttributeName.1": "All",
                                        "AttributeName.1": "ApproximateReceiveCount"},
                      path=path_of(url), sign=False)
    assert resp.text("ReceiveMessageResult/Message/Body") == "plus+sign and space"
    assert resp.text("ReceiveMessageResult/Message/MessageAttribute/Name") == "colour"
    assert resp.text("ReceiveMessageResult/Message/MessageAttribute/Value/StringValue") == "blue"
    assert resp.text("ReceiveMessageResult/Message/MessageAttribute/Value/DataType") == "String"
    assert resp.text("ReceiveMessageResult/Message/Attribute/Name") == "ApproximateReceiveCount"
    assert resp.text("ReceiveMessageResult/Message/Attribute/Value") == "1"
    handle = resp.text("ReceiveMessageResult/Message/ReceiptHandle")
    deleted = query_post(server.endpoint, {"Action": "DeleteMessage", "QueueUrl": url, "ReceiptHandle": handle},
                         sign=False)
    assert deleted.status == 200
    root = deleted.root
    assert root.tag == f"{{{NS}}}DeleteMessageResponse"
    assert [child.tag for child in root] == [f"{{{NS}}}ResponseMetadata"]
    assert deleted.text("ResponseMetadata/RequestId") == deleted.headers["x-amzn-requestid"]


def test_parameters_may_be_split_between_the_query_string_and_the_form_body(server, queue_name):
    url = create(server.endpoint, queue_name)
    resp = query_post(server.endpoint, {"MessageBody": "split"},
                      path=f"{path_of(url)}?Action=SendMessage&Version=2012-11-05", version=False)
    assert resp.status == 200, resp.body


def test_a_form_post_without_a_content_type_is_read_as_a_form(server, queue_name):
    resp = query_post(server.endpoint, f"Action=CreateQueue&QueueName={queue_name}".encode(), content_type=None)
    assert resp.status == 200, resp.body


@pytest.mark.parametrize("sign", ["query", None])
def test_cr_emoji_and_every_allowed_character_round_trip_through_the_xml(server, queue_name, sign):
    url = create(server.endpoint, queue_name)
    sent = query_post(server.endpoint, {"Action": "SendMessage", "MessageBody": EVERY_ALLOWED,
                                        "MessageAttribute.1.Name": "a",
                                        "MessageAttribute.1.Value.DataType": "String",
                                        "MessageAttribute.1.Value.StringValue": EVERY_ALLOWED},
                      path=path_of(url))
    assert sent.status == 200, sent.body
    resp = query_get(server.endpoint, {"Action": "ReceiveMessage", "MessageAttributeName.1": "All"},
                     path=path_of(url), sign=sign)
    assert resp.status == 200, resp.body
    assert b"&#xD;" in resp.body and b"\r" not in resp.body
    assert resp.text("ReceiveMessageResult/Message/Body") == EVERY_ALLOWED
    assert resp.text("ReceiveMessageResult/Message/MessageAttribute/Value/StringValue") == EVERY_ALLOWED


def test_an_error_is_an_xml_error_response_with_the_legacy_code_and_status(server):
    resp = query_post(server.endpoint, {"Action": "GetQueueUrl", "QueueName": "never-created-here"})
    assert resp.status == 400
    assert resp.headers["content-type"].startswith("text/xml")
    root = resp.root
    assert root.tag == f"{{{NS}}}ErrorResponse"
    assert [child.tag.split("}")[1] for child in root] == ["Error", "RequestId"]
    assert [child.tag.split("}")[1] for child in root.find(f"{{{NS}}}Error")] == ["Type", "Code", "Message", "Detail"]
    assert resp.text("Error/Type") == "Sender"
    assert resp.text("Error/Code") == "AWS.SimpleQueueService.NonExistentQueue"
    assert resp.text("Error/Message") == "The specified queue does not exist for this wsdl version."
    assert resp.text("RequestId") == resp.headers["x-amzn-requestid"]


def test_over_limit_is_a_403(server, queue_name):
    url = create(server.endpoint, queue_name)
    actions = ["SendMessage", "ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility",
               "GetQueueAttributes", "GetQueueUrl", "PurgeQueue", "ListDeadLetterSourceQueues"]
    resp = query_post(server.endpoint, [("Action", "AddPermission"), ("QueueUrl", url), ("Label", "l"),
                                        ("AWSAccountId.1", "111122223333")]
                      + [(f"ActionName.{i}", a) for i, a in enumerate(actions, 1)])
    assert resp.status == 403
    assert (resp.text("Error/Type"), resp.text("Error/Code")) == ("Sender", "OverLimit")


@pytest.mark.parametrize("params, code", [
    ({"QueueName": "no-action"}, "MissingAction"),
    ({"Action": "FlyToTheMoon"}, "InvalidAction"),
    ({"Action": "CreateQueue"}, "MissingParameter"),
    ({"Action": "CreateQueue", "QueueName": "spaces are not allowed"}, "InvalidParameterValue"),
    ({"Action": "ListQueues", "MaxResults": "eleven"}, "InvalidParameterValue"),
])
def test_request_level_errors_are_xml_400s(server, params, code):
    resp = query_post(server.endpoint, params)
    assert resp.status == 400, resp.body
    assert resp.text("Error/Code") == code
    assert resp.text("Error/Message")


def test_a_request_with_neither_a_target_nor_an_action_is_missing_action(server):
    resp = query_get(server.endpoint, {}, sign=None)
    assert resp.status == 400
    assert resp.text("Error/Code") == "MissingAction"


def test_a_percent_encoded_lone_surrogate_is_invalid_message_contents(server, queue_name):
    url = create(server.endpoint, queue_name)
    resp = query_post(server.endpoint, b"Action=SendMessage&MessageBody=a%ED%A0%80b", path=path_of(url))
    assert resp.status == 400, resp.body
    assert resp.text("Error/Code") == "InvalidMessageContents"


@pytest.mark.parametrize("body", [b"Action=SendMessage&MessageBody=%FF%FE", b"Action=SendMessage&MessageBody=\xff"])
def test_bytes_that_are_not_utf8_are_a_400_and_the_server_keeps_serving(server, queue_name, body):
    url = create(server.endpoint, queue_name)
    resp = query_post(server.endpoint, body, path=path_of(url))
    assert resp.status == 400, resp.body
    assert resp.text("Error/Type") == "Sender"
    assert create(server.endpoint, queue_name) == url


def test_a_json_target_wins_over_a_form_content_type(server):
    resp = query_post(server.endpoint, b"{}", content_type="application/x-www-form-urlencoded")
    assert resp.status == 400 and resp.text("Error/Code") == "MissingAction"  # no Action, not JSON: Query
    from urllib.request import Request, urlopen
    req = Request(server.endpoint + "/", data=b"{}", method="POST",
                  headers={"X-Amz-Target": "AmazonSQS.ListQueues",
                           "Content-Type": "application/x-www-form-urlencoded"})
    with urlopen(req, timeout=10) as answer:
        assert answer.headers["content-type"] == "application/x-amz-json-1.0"
        assert isinstance(json.loads(answer.read()), dict)


def test_batch_results_and_errors_have_the_sqs_element_names(server, queue_name):
    url = create(server.endpoint, queue_name)
    resp = query_post(server.endpoint, {
        "Action": "SendMessageBatch", "QueueUrl": url,
        "SendMessageBatchRequestEntry.1.Id": "ok", "SendMessageBatchRequestEntry.1.MessageBody": "fine",
        "SendMessageBatchRequestEntry.2.Id": "late", "SendMessageBatchRequestEntry.2.MessageBody": "x",
        "SendMessageBatchRequestEntry.2.DelaySeconds": "1000",
    })
    assert resp.status == 200, resp.body
    assert resp.text("SendMessageBatchResult/SendMessageBatchResultEntry/Id") == "ok"
    assert resp.text("SendMessageBatchResult/SendMessageBatchResultEntry/MessageId")
    assert resp.text("SendMessageBatchResult/SendMessageBatchResultEntry/MD5OfMessageBody")
    assert resp.text("SendMessageBatchResult/BatchResultErrorEntry/Id") == "late"
    assert resp.text("SendMessageBatchResult/BatchResultErrorEntry/SenderFault") == "true"
    assert resp.text("SendMessageBatchResult/BatchResultErrorEntry/Code") == "InvalidParameterValue"
    resp = query_post(server.endpoint, {
        "Action": "ChangeMessageVisibilityBatch", "QueueUrl": url,
        "ChangeMessageVisibilityBatchRequestEntry.1.Id": "x",
        "ChangeMessageVisibilityBatchRequestEntry.1.ReceiptHandle": "bogus",
        "ChangeMessageVisibilityBatchRequestEntry.1.VisibilityTimeout": "5",
    })
    assert resp.text("ChangeMessageVisibilityBatchResult/BatchResultErrorEntry/Code") == "ReceiptHandleIsInvalid"
    resp = query_post(server.endpoint, {"Action": "DeleteMessageBatch", "QueueUrl": url, "Entries": ""})
    assert resp.status == 400
    assert resp.text("Error/Code") == "AWS.SimpleQueueService.EmptyBatchRequest"
