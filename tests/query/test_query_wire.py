"""The Query codec on its own: flattened parameters to the JSON request shape, results to SQS's XML."""

from __future__ import annotations

import asyncio
import logging
import xml.etree.ElementTree as ET

import pytest

from queueserver import errors
from queueserver.protocol import Dispatcher, HttpRequest, query_wire
from queueserver.protocol.error_codes import wire_error

NS = "{http://queue.amazonaws.com/doc/2012-11-05/}"


def decode(action: str, pairs: dict[str, str]) -> dict:
    return query_wire.decode({"Action": action, "Version": "2012-11-05", **pairs}, action)


# -- decode ---------------------------------------------------------------------------


def test_queue_attributes_and_tags_of_create_queue_become_the_attributes_and_tags_maps():
    params = decode("CreateQueue", {
        "QueueName": "q",
        "Attribute.2.Name": "DelaySeconds", "Attribute.2.Value": "5",
        "Attribute.1.Name": "VisibilityTimeout", "Attribute.1.Value": "40",
        "Tag.1.Key": "team", "Tag.1.Value": "core",
    })
    assert params == {"QueueName": "q", "Attributes": {"VisibilityTimeout": "40", "DelaySeconds": "5"},
                      "tags": {"team": "core"}}


def test_the_tags_of_tag_queue_become_the_tags_map():
    params = decode("TagQueue", {"QueueUrl": "u", "Tag.1.Key": "a", "Tag.1.Value": "1",
                                 "Tag.2.Key": "b", "Tag.2.Value": ""})
    assert params == {"QueueUrl": "u", "Tags": {"a": "1", "b": ""}}


def test_a_plural_tags_prefix_is_accepted_too():
    assert decode("TagQueue", {"Tags.1.Key": "a", "Tags.1.Value": "1"})["Tags"] == {"a": "1"}
    assert decode("CreateQueue", {"Tags.1.Key": "a", "Tags.1.Value": "1"})["tags"] == {"a": "1"}


@pytest.mark.parametrize("action, item, member", [
    ("GetQueueAttributes", "AttributeName", "AttributeNames"),
    ("ReceiveMessage", "AttributeName", "AttributeNames"),
    ("ReceiveMessage", "MessageAttributeName", "MessageAttributeNames"),
    ("ReceiveMessage", "MessageSystemAttributeName", "MessageSystemAttributeNames"),
    ("ReceiveMessage", "MessageSystemAttributeNames", "MessageSystemAttributeNames"),
    ("UntagQueue", "TagKey", "TagKeys"),
    ("AddPermission", "AWSAccountId", "AWSAccountIds"),
    ("AddPermission", "ActionName", "Actions"),
])
def test_numbered_items_become_a_list_in_index_order(action, item, member):
    params = decode(action, {f"{item}.10": "c", f"{item}.2": "b", f"{item}.1": "a"})
    assert params[member] == ["a", "b", "c"]


def test_unnumbered_items_of_older_api_versions_are_accepted():
    params = decode("SetQueueAttributes", {"Attribute.Name": "VisibilityTimeout", "Attribute.Value": "90"})
    assert params["Attributes"] == {"VisibilityTimeout": "90"}
    params = decode("GetQueueAttributes", {"AttributeName": "All"})
    assert params["AttributeNames"] == ["All"]


def test_a_list_sent_empty_is_an_empty_list():
    assert decode("GetQueueAttributes", {"AttributeNames": ""})["AttributeNames"] == []
    assert decode("SendMessageBatch", {"Entries": ""})["Entries"] == []
    assert decode("SetQueueAttributes", {"Attributes": ""})["Attributes"] == {}


def test_message_attributes_become_the_json_map_with_binary_left_as_base64_text():
    params = decode("SendMessage", {
        "QueueUrl": "u", "MessageBody": "b", "DelaySeconds": "3",
        "MessageAttribute.1.Name": "s", "MessageAttribute.1.Value.DataType": "String",
        "MessageAttribute.1.Value.StringValue": "text",
        "MessageAttribute.2.Name": "bin", "MessageAttribute.2.Value.DataType": "Binary",
        "MessageAttribute.2.Value.BinaryValue": "AAE=",
        "MessageSystemAttribute.1.Name": "AWSTraceHeader",
        "MessageSystemAttribute.1.Value.DataType": "String",
        "MessageSystemAttribute.1.Value.StringValue": "Root=1-abc",
        "MessageGroupId": "g", "MessageDeduplicationId": "d",
    })
    assert params == {
        "QueueUrl": "u", "MessageBody": "b", "DelaySeconds": "3",
        "MessageAttributes": {"s": {"DataType": "String", "StringValue": "text"},
                              "bin": {"DataType": "Binary", "BinaryValue": "AAE="}},
        "MessageSystemAttributes": {"AWSTraceHeader": {"DataType": "String", "StringValue": "Root=1-abc"}},
        "MessageGroupId": "g", "MessageDeduplicationId": "d",
    }


def test_list_values_of_a_message_attribute_are_lists():
    params = decode("SendMessage", {"MessageAttribute.1.Name": "l",
                                    "MessageAttribute.1.Value.DataType": "String",
                                    "MessageAttribute.1.Value.StringListValue.1": "x"})
    assert params["MessageAttributes"]["l"]["StringListValues"] == ["x"]


def test_send_batch_entries_become_entries_with_their_own_attributes():
    params = decode("SendMessageBatch", {
        "QueueUrl": "u",
        "SendMessageBatchRequestEntry.2.Id": "second", "SendMessageBatchRequestEntry.2.MessageBody": "two",
        "SendMessageBatchRequestEntry.1.Id": "first", "SendMessageBatchRequestEntry.1.MessageBody": "one",
        "SendMessageBatchRequestEntry.1.DelaySeconds": "1",
        "SendMessageBatchRequestEntry.1.MessageAttribute.1.Name": "n",
        "SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.DataType": "Number",
        "SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringValue": "7",
    })
    assert params == {"QueueUrl": "u", "Entries": [
        {"Id": "first", "MessageBody": "one", "DelaySeconds": "1",
         "MessageAttributes": {"n": {"DataType": "Number", "StringValue": "7"}}},
        {"Id": "second", "MessageBody": "two"},
    ]}


@pytest.mark.parametrize("entry", ["DeleteMessageBatchRequestEntry", "ChangeMessageVisibilityBatchRequestEntry"])
def test_delete_and_visibility_batch_entries_become_entries(entry):
    params = decode("X", {f"{entry}.1.Id": "a", f"{entry}.1.ReceiptHandle": "h",
                          f"{entry}.1.VisibilityTimeout": "9"})
    assert params["Entries"] == [{"Id": "a", "ReceiptHandle": "h", "VisibilityTimeout": "9"}]


def test_signing_and_envelope_parameters_are_not_members():
    params = decode("ListQueues", {
        "X-Amz-Algorithm": "AWS4-HMAC-SHA256", "X-Amz-Credential": "k/20240101/eu-west-1/sqs/aws4_request",
        "X-Amz-Date": "20240101T000000Z", "X-Amz-Expires": "300", "X-Amz-SignedHeaders": "host",
        "X-Amz-Signature": "abc", "X-Amz-Security-Token": "t", "AWSAccessKeyId": "k",
        "QueueNamePrefix": "p",
    })
    assert params == {"QueueNamePrefix": "p"}


def test_request_fields_merge_the_query_string_and_a_form_body():
    fields = query_wire.request_fields("Action=SendMessage&QueueUrl=a", b"MessageBody=hi%0D%0A%F0%9F%98%80+x",
                                       "application/x-www-form-urlencoded; charset=utf-8")
    assert fields == {"Action": "SendMessage", "QueueUrl": "a", "MessageBody": "hi\r\n\U0001F600 x"}


def test_a_body_of_another_media_type_is_not_read_as_a_form():
    assert query_wire.request_fields("Action=ListQueues", b"Action=DeleteQueue", "text/xml") == {
        "Action": "ListQueues"}


def test_a_percent_encoded_lone_surrogate_reaches_the_handler_to_be_rejected_there():
    fields = query_wire.request_fields("", b"MessageBody=%ED%A0%80", "")
    assert fields["MessageBody"] == "\ud800"


def test_bytes_that_are_not_utf8_are_a_serialization_error():
    with pytest.raises(errors.SerializationError):
        query_wire.request_fields("", b"MessageBody=%FF", "")
    with pytest.raises(errors.SerializationError):
        query_wire.request_fields("", b"MessageBody=\xff", "")


# -- encode ---------------------------------------------------------------------------


def parse(action: str, result: dict) -> ET.Element:
    root = ET.fromstring(query_wire.encode(action, result, "rid-1"))
    assert root.tag == f"{NS}{action}Response"
    assert root.find(f"{NS}ResponseMetadata/{NS}RequestId").text == "rid-1"
    return root


def test_an_action_without_output_has_no_result_element():
    root = parse("DeleteQueue", {})
    assert [child.tag for child in root] == [f"{NS}ResponseMetadata"]


def test_a_receive_result_has_messages_with_attribute_and_message_attribute_elements():
    root = parse("ReceiveMessage", {"Messages": [{
        "MessageId": "m", "ReceiptHandle": "r", "MD5OfBody": "x", "Body": "a\r\nb<&>",
        "Attributes": {"SentTimestamp": "1"},
        "MD5OfMessageAttributes": "y",
        "MessageAttributes": {"bin": {"DataType": "Binary", "BinaryValue": "AAE="}},
    }] * 2})
    messages = root.findall(f"{NS}ReceiveMessageResult/{NS}Message")
    assert len(messages) == 2
    message = messages[0]
    assert message.find(f"{NS}Body").text == "a\r\nb<&>"
    attribute = message.find(f"{NS}Attribute")
    assert (attribute.find(f"{NS}Name").text, attribute.find(f"{NS}Value").text) == ("SentTimestamp", "1")
    value = message.find(f"{NS}MessageAttribute/{NS}Value")
    assert [child.tag for child in value] == [f"{NS}BinaryValue", f"{NS}DataType"]
    assert value.find(f"{NS}BinaryValue").text == "AAE="


def test_batch_results_name_their_entries_after_the_action():
    root = parse("DeleteMessageBatch", {"Successful": [{"Id": "a"}], "Failed": [
        {"Id": "b", "SenderFault": True, "Code": "ReceiptHandleIsInvalid", "Message": "bad"}]})
    result = root.find(f"{NS}DeleteMessageBatchResult")
    assert result.find(f"{NS}DeleteMessageBatchResultEntry/{NS}Id").text == "a"
    failed = result.find(f"{NS}BatchResultErrorEntry")
    assert failed.find(f"{NS}SenderFault").text == "true"
    assert failed.find(f"{NS}Code").text == "ReceiptHandleIsInvalid"


def test_queue_url_lists_and_tags_are_flattened():
    root = parse("ListDeadLetterSourceQueues", {"queueUrls": ["u1", "u2"], "NextToken": "t"})
    assert [n.text for n in root.findall(f"{NS}ListDeadLetterSourceQueuesResult/{NS}QueueUrl")] == ["u1", "u2"]
    root = parse("ListQueueTags", {"Tags": {"k": "v"}})
    assert root.find(f"{NS}ListQueueTagsResult/{NS}Tag/{NS}Key").text == "k"
    assert root.find(f"{NS}ListQueueTagsResult/{NS}Tag/{NS}Value").text == "v"


def test_cr_is_escaped_as_a_character_reference_and_every_xml_character_round_trips():
    text = "\t\n\r\x20~\x7f\u0080\ud7ff\ue000\ufffd\U00010000\U0010ffff&<>\"']]>"
    body = query_wire.encode("SendMessage", {"MessageId": text}, "r")
    assert b"&#xD;" in body and b"\r" not in body
    assert ET.fromstring(body).find(f"{NS}SendMessageResult/{NS}MessageId").text == text


def test_a_character_xml_cannot_carry_is_replaced_so_the_document_stays_well_formed():
    body = query_wire.encode("SendMessage", {"MessageId": "a\x00b\ud800c\uffff"}, "r")
    assert ET.fromstring(body).find(f"{NS}SendMessageResult/{NS}MessageId").text == "a\ufffdb\ufffdc\ufffd"


def test_an_error_is_an_error_response_with_type_code_message_and_request_id():
    error = errors.QueueDoesNotExist()
    headers, body = query_wire.encode_error(error, wire_error(error), "rid-2")
    root = ET.fromstring(body)
    assert root.tag == f"{NS}ErrorResponse"
    assert root.find(f"{NS}Error/{NS}Type").text == "Sender"
    assert root.find(f"{NS}Error/{NS}Code").text == "AWS.SimpleQueueService.NonExistentQueue"
    assert root.find(f"{NS}Error/{NS}Message").text == "The specified queue does not exist for this wsdl version."
    assert root.find(f"{NS}RequestId").text == "rid-2"
    assert headers["x-amzn-query-error"] == "AWS.SimpleQueueService.NonExistentQueue;Sender"


def test_a_server_fault_has_type_receiver():
    error = errors.InternalError()
    _, body = query_wire.encode_error(error, wire_error(error), "r")
    assert ET.fromstring(body).find(f"{NS}Error/{NS}Type").text == "Receiver"


# -- dispatch -------------------------------------------------------------------------


class _BrokenEngine:
    def list_queues(self, *args: object) -> None:
        raise RuntimeError("the disk caught fire")

    async def durable(self) -> None:
        pass


def _dispatch(body: bytes, query_string: str = "", headers: dict | None = None):
    dispatcher = Dispatcher(_BrokenEngine(), "us-east-1", "000000000000")  # type: ignore[arg-type]
    request = HttpRequest("POST", "/", headers or {"content-type": "application/x-www-form-urlencoded"},
                          body, "http", "127.0.0.1:1", query_string=query_string)
    return asyncio.run(dispatcher.handle(request))


def test_an_unexpected_failure_is_logged_with_the_request_id_and_answered_500_in_xml(caplog):
    with caplog.at_level(logging.ERROR, logger="queueserver.protocol.dispatch"):
        response = _dispatch(b"Action=ListQueues&Version=2012-11-05")
    assert response.status == 500
    root = ET.fromstring(response.body)
    assert root.find(f"{NS}Error/{NS}Type").text == "Receiver"
    assert root.find(f"{NS}Error/{NS}Code").text == "InternalError"
    assert "disk caught fire" not in response.body.decode()
    request_id = response.headers["x-amzn-requestid"]
    assert root.find(f"{NS}RequestId").text == request_id
    assert any(request_id in r.getMessage() and r.exc_info for r in caplog.records)


def test_the_action_may_come_in_the_query_string_of_a_post():
    response = _dispatch(b"", query_string="Action=ListQueues")
    assert response.status == 500  # it reached the (broken) engine: the request was read as Query


def test_a_json_request_is_never_read_as_query():
    response = _dispatch(b"Action=ListQueues", headers={"x-amz-target": "AmazonSQS.ListQueues",
                                                        "content-type": "application/x-www-form-urlencoded"})
    assert response.headers["content-type"] == "application/x-amz-json-1.0"
