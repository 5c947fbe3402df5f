"""Input that used to be stored and could then never be returned, and parser failures that used
to be 500s with a traceback, over both wire protocols against the shared server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.sqs import unique_queue_name
from support.wire import call_json, call_query, error_code
from support.wire import raw_json_call, raw_request

SURROGATE = "\ud800"


def _send(protocol: str, endpoint: str, action: str, json_payload: dict[str, Any],
          query_fields: dict[str, str]) -> tuple[int, str]:
    if protocol == "json":
        response = call_json(endpoint, action, json_payload)
    else:
        response = call_query(endpoint, action, query_fields)
    return response.status, error_code(response)


@pytest.mark.parametrize("name", ["victim\n", "victim\r\n", "victim.fifo\n"])
def test_a_queue_name_with_a_trailing_newline_is_refused_and_nothing_is_created(server, sqs, protocol, name,
                                                                                 no_new_traceback):
    attributes = {"FifoQueue": "true"} if ".fifo" in name else {}
    query_attributes = {"Attribute.1.Name": "FifoQueue", "Attribute.1.Value": "true"} if attributes else {}
    status, code = _send(protocol, server.endpoint, "CreateQueue", {"QueueName": name, "Attributes": attributes},
                         {"QueueName": name, **query_attributes})
    assert (status, code) == (400, "InvalidParameterValue")
    assert not any(url.endswith(name.strip()) for url in sqs.list_queues().get("QueueUrls", []))


def test_a_batch_entry_id_with_a_trailing_newline_is_refused(server, queue_url, protocol, no_new_traceback):
    status, code = _send(protocol, server.endpoint, "SendMessageBatch",
                         {"QueueUrl": queue_url, "Entries": [{"Id": "a\n", "MessageBody": "x"}]},
                         {"QueueUrl": queue_url, "SendMessageBatchRequestEntry.1.Id": "a\n",
                          "SendMessageBatchRequestEntry.1.MessageBody": "x"})
    assert status == 400 and code.endswith("InvalidBatchEntryId")


@pytest.mark.parametrize("where", ["key", "value"])
@pytest.mark.parametrize("bad", [SURROGATE, "\x01", "\ufffe"])
def test_a_tag_that_xml_cannot_carry_is_refused_and_the_tags_stay_readable(server, sqs, queue_url, protocol,
                                                                           where, bad, no_new_traceback):
    key, value = ("k" + bad, "v") if where == "key" else ("k", "v" + bad)
    status, code = _send(protocol, server.endpoint, "TagQueue", {"QueueUrl": queue_url, "Tags": {key: value}},
                         {"QueueUrl": queue_url, "Tag.1.Key": key, "Tag.1.Value": value})
    assert (status, code) == (400, "InvalidParameterValue")
    assert sqs.list_queue_tags(QueueUrl=queue_url).get("Tags", {}) == {}


@pytest.mark.parametrize("attribute", ["KmsMasterKeyId", "Policy", "RedriveAllowPolicy"])
def test_an_attribute_value_that_xml_cannot_carry_is_refused(server, sqs, queue_url, protocol, attribute,
                                                             no_new_traceback):
    value = "alias/" + SURROGATE if attribute == "KmsMasterKeyId" else '{"Version": "' + SURROGATE + '"}'
    status, code = _send(protocol, server.endpoint, "SetQueueAttributes",
                         {"QueueUrl": queue_url, "Attributes": {attribute: value}},
                         {"QueueUrl": queue_url, "Attribute.1.Name": attribute, "Attribute.1.Value": value})
    assert (status, code) == (400, "InvalidAttributeValue")
    assert attribute not in sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]


@pytest.mark.parametrize("label", [SURROGATE, "label\n", "a b"])
def test_a_permission_label_outside_sqs_characters_is_refused(server, sqs, queue_url, protocol, label,
                                                              no_new_traceback):
    status, code = _send(protocol, server.endpoint, "AddPermission",
                         {"QueueUrl": queue_url, "Label": label, "AWSAccountIds": ["111122223333"],
                          "Actions": ["SendMessage"]},
                         {"QueueUrl": queue_url, "Label": label, "AWSAccountId.1": "111122223333",
                          "ActionName.1": "SendMessage"})
    assert (status, code) == (400, "InvalidParameterValue")
    assert "Policy" not in sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]


@pytest.mark.parametrize("data_type", ["String.\x01", "String\n", "Number." + SURROGATE])
def test_a_data_type_with_a_control_character_or_surrogate_is_refused(server, queue_url, protocol, data_type,
                                                                      no_new_traceback):
    status, code = _send(protocol, server.endpoint, "SendMessage",
                         {"QueueUrl": queue_url, "MessageBody": "x",
                          "MessageAttributes": {"a": {"DataType": data_type, "StringValue": "1"}}},
                         {"QueueUrl": queue_url, "MessageBody": "x", "MessageAttribute.1.Name": "a",
                          "MessageAttribute.1.Value.DataType": data_type,
                          "MessageAttribute.1.Value.StringValue": "1"})
    assert (status, code) == (400, "InvalidParameterValue")


def _policy_of_size(size: int) -> str:
    head = '{"Version":"2012-10-17","Statement":[],"Id":"'
    return head + "x" * (size - len(head) - 2) + '"}'


@pytest.mark.parametrize("size, accepted", [(8_192, True), (8_193, False), (50 * 1024, False)])
def test_a_policy_is_capped_at_sqs_8_kib(sqs, queue_url, size, accepted):
    policy = _policy_of_size(size)
    assert len(policy) == size
    if accepted:
        sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"Policy": policy})
        assert sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["Policy"])["Attributes"]["Policy"] == policy
    else:
        with pytest.raises(sqs.exceptions.ClientError) as raised:
            sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"Policy": policy})
        assert raised.value.response["Error"]["Code"] == "InvalidAttributeValue"


def test_a_free_text_attribute_is_capped_at_2048_characters(sqs, queue_url):
    sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"KmsMasterKeyId": "k" * 2048})
    with pytest.raises(sqs.exceptions.ClientError) as raised:
        sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"KmsMasterKeyId": "k" * 2049})
    assert raised.value.response["Error"]["Code"] == "InvalidAttributeValue"


# --- parser failures: 400s with SQS's codes, one log line, no traceback ----------------------------


def test_json_nested_100000_deep_is_a_serialization_error(server, no_new_traceback):
    body = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
    response = raw_json_call(server.endpoint, "ListQueues", body)
    assert response.status == 400 and error_code(response) == "MalformedInput"


def test_a_json_number_of_5000_digits_is_a_serialization_error(server, queue_url, no_new_traceback):
    body = b'{"QueueUrl": "%s", "MaxNumberOfMessages": %s}' % (queue_url.encode(), b"1" * 5000)
    response = raw_json_call(server.endpoint, "ReceiveMessage", body)
    assert response.status == 400 and error_code(response) == "MalformedInput"


def test_query_names_nested_3000_deep_are_malformed_input(server, no_new_traceback):
    response = call_query(server.endpoint, "SendMessageBatch", {"Entries.1." * 3000 + "Id": "x"})
    assert response.status == 400 and error_code(response) == "MalformedInput"


def test_a_5000_digit_list_index_is_malformed_input(server, queue_url, no_new_traceback):
    response = call_query(server.endpoint, "GetQueueAttributes",
                          {"QueueUrl": queue_url, "AttributeName." + "9" * 5000: "All"})
    assert response.status == 400 and error_code(response) == "MalformedInput"


@pytest.mark.parametrize("number", ["1e999999999999", "-1e-999999999999", "9" * 5000])
def test_a_number_attribute_that_overflows_is_invalid_parameter_value(server, queue_url, protocol, number,
                                                                      no_new_traceback):
    status, code = _send(protocol, server.endpoint, "SendMessage",
                         {"QueueUrl": queue_url, "MessageBody": "x",
                          "MessageAttributes": {"n": {"DataType": "Number", "StringValue": number}}},
                         {"QueueUrl": queue_url, "MessageBody": "x", "MessageAttribute.1.Name": "n",
                          "MessageAttribute.1.Value.DataType": "Number",
                          "MessageAttribute.1.Value.StringValue": number})
    assert (status, code) == (400, "InvalidParameterValue")


@pytest.mark.parametrize("body, content_type, code", [
    (b'{"QueueNamePrefix": "\xff"}', "application/x-amz-json-1.0", "MalformedInput"),
    (b"Action=ListQueues&QueueNamePrefix=%FF%FE", "application/x-www-form-urlencoded", "MalformedInput"),
    (b"Action=ListQueues&QueueNamePrefix=\xc3", "application/x-www-form-urlencoded", "MalformedInput"),
])
def test_bytes_that_are_not_utf8_are_a_400(server, body, content_type, code, no_new_traceback):
    target = "AmazonSQS.ListQueues" if "json" in content_type else None
    response = raw_request(server.endpoint, body, target=target, content_type=content_type)
    assert response.status == 400 and error_code(response) == code
    assert raw_json_call(server.endpoint, "ListQueues", {}).status == 200


def test_a_queue_url_path_with_a_newline_names_no_queue(server, sqs, no_new_traceback):
    name = unique_queue_name("path")
    sqs.create_queue(QueueName=name)
    response = raw_request(server.endpoint, json.dumps({}).encode(), target="AmazonSQS.GetQueueAttributes",
                           path=f"/000000000000/{name}%0A")
    assert response.status == 400 and error_code(response) == "AWS.SimpleQueueService.NonExistentQueue"
