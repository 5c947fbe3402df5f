"""Every action through botocore speaking Query/XML (the SQS Query model), and the main errors."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from typing import Any
from urllib.parse import parse_qsl

import pytest
from botocore.exceptions import ClientError
from support.clients import make_query_client
from support.dead_letters import wait_for_task


def md5_of_attributes(attributes: dict[str, dict[str, Any]]) -> str:
    digest = hashlib.md5()
    for name in sorted(attributes):
        value = attributes[name]
        for part in (name.encode(), value["DataType"].encode()):
            digest.update(struct.pack(">I", len(part)) + part)
        if value["DataType"].startswith("Binary"):
            raw = value["BinaryValue"]
            digest.update(b"\x02" + struct.pack(">I", len(raw)) + raw)
        else:
            raw = value["StringValue"].encode()
            digest.update(b"\x01" + struct.pack(">I", len(raw)) + raw)
    return digest.hexdigest()


def _text(body: str | bytes) -> str:
    return body.decode() if isinstance(body, bytes) else body


@pytest.fixture
def sent_requests(qsqs: Any) -> list[Any]:
    """The requests the client sends (to check they really are Query requests)."""
    seen: list[Any] = []
    qsqs.meta.events.register("before-send.sqs", lambda request, **_: seen.append(request))
    return seen


def test_the_client_really_speaks_query(qsqs, sent_requests):
    assert qsqs.meta.service_model.protocol == "query"
    response = qsqs.list_queues(QueueNamePrefix="none-such-")
    [request] = sent_requests
    assert _text(request.body).startswith("Action=ListQueues&Version=2012-11-05")
    assert "X-Amz-Target" not in request.headers
    assert response["ResponseMetadata"]["HTTPHeaders"]["content-type"] == "text/xml"
    assert response["ResponseMetadata"]["RequestId"]


def test_queue_life_cycle_over_query(qsqs, make_qqueue, queue_name):
    url = make_qqueue(Attributes={"VisibilityTimeout": "45", "DelaySeconds": "0"}, tags={"team": "core"})
    assert url.endswith(f"/000000000000/{queue_name}")
    # the same create again is idempotent
    assert make_qqueue(Attributes={"VisibilityTimeout": "45", "DelaySeconds": "0"}) == url
    assert qsqs.get_queue_url(QueueName=queue_name)["QueueUrl"] == url
    assert url in qsqs.list_queues(QueueNamePrefix=queue_name)["QueueUrls"]

    attrs = qsqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attrs["VisibilityTimeout"] == "45"
    assert attrs["QueueArn"] == f"arn:aws:sqs:us-east-1:000000000000:{queue_name}"
    assert attrs["ApproximateNumberOfMessages"] == "0"
    only = qsqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DelaySeconds", "QueueArn"])["Attributes"]
    assert set(only) == {"DelaySeconds", "QueueArn"}
    assert "Attributes" not in qsqs.get_queue_attributes(QueueUrl=url)

    qsqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "7", "MaximumMessageSize": "2048"})
    attrs = qsqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout", "MaximumMessageSize"])
    assert attrs["Attributes"] == {"VisibilityTimeout": "7", "MaximumMessageSize": "2048"}

    qsqs.purge_queue(QueueUrl=url)
    qsqs.delete_queue(QueueUrl=url)
    with pytest.raises(qsqs.exceptions.QueueDoesNotExist):
        qsqs.get_queue_url(QueueName=queue_name)


def test_list_queues_pages_with_next_token(qsqs, make_qqueue, queue_name):
    urls = [make_qqueue(f"-{i}") for i in range(3)]
    first = qsqs.list_queues(QueueNamePrefix=queue_name, MaxResults=2)
    assert first["QueueUrls"] == urls[:2] and first["NextToken"]
    second = qsqs.list_queues(QueueNamePrefix=queue_name, MaxResults=2, NextToken=first["NextToken"])
    assert second["QueueUrls"] == urls[2:] and "NextToken" not in second
    paged = [u for page in qsqs.get_paginator("list_queues").paginate(
        QueueNamePrefix=queue_name, PaginationConfig={"PageSize": 1}) for u in page["QueueUrls"]]
    assert paged == urls


def test_tags_over_query(qsqs, make_qqueue):
    url = make_qqueue()
    assert "Tags" not in qsqs.list_queue_tags(QueueUrl=url)
    qsqs.tag_queue(QueueUrl=url, Tags={"a": "1", "b": "two words & <more>", "ü": ""})
    assert qsqs.list_queue_tags(QueueUrl=url)["Tags"] == {"a": "1", "b": "two words & <more>", "ü": ""}
    qsqs.untag_queue(QueueUrl=url, TagKeys=["a", "ü"])
    assert qsqs.list_queue_tags(QueueUrl=url)["Tags"] == {"b": "two words & <more>"}


def test_permissions_over_query(qsqs, make_qqueue):
    url = make_qqueue()
    qsqs.add_permission(QueueUrl=url, Label="send", AWSAccountIds=["111122223333", "444455556666"],
                        Actions=["SendMessage", "ReceiveMessage"])
    policy = json.loads(qsqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"])
    [statement] = policy["Statement"]
    assert statement["Sid"] == "send"
    assert statement["Action"] == ["SQS:SendMessage", "SQS:ReceiveMessage"]
    assert statement["Principal"]["AWS"] == ["arn:aws:iam::111122223333:root", "arn:aws:iam::444455556666:root"]
    qsqs.remove_permission(QueueUrl=url, Label="send")
    assert "Policy" not in qsqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]


def test_a_message_round_trips_with_every_attribute_type(qsqs, make_qqueue):
    url = make_qqueue()
    body = "line one\r\nline two\ttabbed \U0001F600 <xml> & \"quotes\" ]]>"
    attributes = {
        "s": {"DataType": "String", "StringValue": "text\r\nwith CR"},
        "n": {"DataType": "Number.float", "StringValue": "-1.5e3"},
        "b": {"DataType": "Binary", "BinaryValue": bytes(range(256))},
        "custom.x": {"DataType": "String.custom", "StringValue": "\u00e9"},
    }
    sent = qsqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=attributes,
                             MessageSystemAttributes={"AWSTraceHeader": {"DataType": "String",
                                                                         "StringValue": "Root=1-5759e988"}})
    assert sent["MD5OfMessageBody"] == hashlib.md5(body.encode()).hexdigest()
    assert sent["MD5OfMessageAttributes"] == md5_of_attributes(attributes)
    assert sent["MD5OfMessageSystemAttributes"]

    [message] = qsqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"],
                                     MessageSystemAttributeNames=["All"])["Messages"]
    assert message["MessageId"] == sent["MessageId"]
    assert message["Body"] == body
    assert message["MD5OfBody"] == sent["MD5OfMessageBody"]
    assert message["MessageAttributes"] == attributes
    assert message["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
    system = message["Attributes"]
    assert system["ApproximateReceiveCount"] == "1"
    assert system["AWSTraceHeader"] == "Root=1-5759e988"
    assert {"SenderId", "SentTimestamp", "ApproximateFirstReceiveTimestamp"} <= set(system)

    qsqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
    [again] = qsqs.receive_message(QueueUrl=url, AttributeNames=["ApproximateReceiveCount"],
                                   MessageAttributeNames=["custom.*"])["Messages"]
    assert again["Attributes"] == {"ApproximateReceiveCount": "2"}
    assert again["MessageAttributes"] == {"custom.x": attributes["custom.x"]}
    qsqs.delete_message(QueueUrl=url, ReceiptHandle=again["ReceiptHandle"])
    assert "Messages" not in qsqs.receive_message(QueueUrl=url)


def test_batches_over_query(qsqs, make_qqueue):
    url = make_qqueue()
    result = qsqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "one", "MessageBody": "1", "MessageAttributes": {"k": {"DataType": "String", "StringValue": "v"}}},
        {"Id": "two", "MessageBody": "2", "DelaySeconds": 0},
        {"Id": "bad", "MessageBody": "3", "DelaySeconds": 901},
    ])
    assert [e["Id"] for e in result["Successful"]] == ["one", "two"]
    assert result["Successful"][0]["MD5OfMessageAttributes"] == md5_of_attributes(
        {"k": {"DataType": "String", "StringValue": "v"}})
    [failed] = result["Failed"]
    assert failed["Id"] == "bad" and failed["SenderFault"] is True
    assert failed["Code"] == "InvalidParameterValue" and failed["Message"]

    messages = qsqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert sorted(m["Body"] for m in messages) == ["1", "2"]
    changed = qsqs.change_message_visibility_batch(QueueUrl=url, Entries=[
        {"Id": f"m{i}", "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 60}
        for i, m in enumerate(messages)] + [{"Id": "x", "ReceiptHandle": "garbage", "VisibilityTimeout": 1}])
    assert sorted(e["Id"] for e in changed["Successful"]) == ["m0", "m1"]
    assert [(e["Id"], e["Code"]) for e in changed["Failed"]] == [("x", "ReceiptHandleIsInvalid")]

    deleted = qsqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": f"m{i}", "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)])
    assert sorted(e["Id"] for e in deleted["Successful"]) == ["m0", "m1"]
    assert "Failed" not in deleted  # an empty flattened list has no element at all in XML
    counts = qsqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (counts["ApproximateNumberOfMessages"], counts["ApproximateNumberOfMessagesNotVisible"]) == ("0", "0")


def test_dead_letter_source_queues_over_query(qsqs, make_qqueue):
    dead = make_qqueue("-dlq")
    arn = qsqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    assert "queueUrls" not in qsqs.list_dead_letter_source_queues(QueueUrl=dead)
    policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": "3"})
    sources = [make_qqueue(f"-src{i}", Attributes={"RedrivePolicy": policy}) for i in range(2)]
    assert qsqs.list_dead_letter_source_queues(QueueUrl=dead)["queueUrls"] == sources


def test_dead_letters_and_a_message_move_task_over_query(qsqs, make_qqueue):
    dead = make_qqueue("-dlq")
    dead_arn = qsqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    source = make_qqueue("-src", Attributes={"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": dead_arn, "maxReceiveCount": 1})})
    source_arn = qsqs.get_queue_attributes(QueueUrl=source, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    qsqs.send_message(QueueUrl=source, MessageBody="doomed")
    assert qsqs.receive_message(QueueUrl=source, VisibilityTimeout=0)["Messages"][0]["Body"] == "doomed"
    assert "Messages" not in qsqs.receive_message(QueueUrl=source)  # moved on its second receive
    [dead_letter] = qsqs.receive_message(QueueUrl=dead, VisibilityTimeout=0,
                                         MessageSystemAttributeNames=["DeadLetterQueueSourceArn"])["Messages"]
    assert dead_letter["Body"] == "doomed"
    assert dead_letter["Attributes"] == {"DeadLetterQueueSourceArn": source_arn}

    handle = qsqs.start_message_move_task(SourceArn=dead_arn)["TaskHandle"]
    assert handle
    task = wait_for_task(qsqs, dead_arn)
    assert task["Status"] == "COMPLETED", task
    assert task["SourceArn"] == dead_arn
    assert task["ApproximateNumberOfMessagesMoved"] == 1  # a Long in the model: parsed as an int
    assert qsqs.receive_message(QueueUrl=source)["Messages"][0]["Body"] == "doomed"
    with pytest.raises(ClientError) as info:  # only a running task can be cancelled
        qsqs.cancel_message_move_task(TaskHandle=handle)
    assert info.value.response["Error"]["Type"] == "Sender"


def test_fifo_over_query(qsqs, make_qqueue):
    url = make_qqueue(".fifo", Attributes={"FifoQueue": "true"})
    first = qsqs.send_message(QueueUrl=url, MessageBody="1", MessageGroupId="g", MessageDeduplicationId="d1")
    assert first["SequenceNumber"]
    batch = qsqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "a", "MessageBody": "2", "MessageGroupId": "g", "MessageDeduplicationId": "d2"}])
    assert batch["Successful"][0]["SequenceNumber"] > first["SequenceNumber"]
    messages = qsqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    assert [m["Body"] for m in messages] == ["1", "2"]
    assert messages[0]["Attributes"]["MessageGroupId"] == "g"
    assert messages[0]["Attributes"]["MessageDeduplicationId"] == "d1"
    assert messages[0]["Attributes"]["SequenceNumber"] == first["SequenceNumber"]


def test_the_region_comes_from_the_credential_scope(server, make_qqueue, queue_name):
    west = make_query_client(server.endpoint, region="eu-west-1", json_compatible=False)
    url = west.create_queue(QueueName=queue_name)["QueueUrl"]
    arn = west.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    assert arn == f"arn:aws:sqs:eu-west-1:000000000000:{queue_name}"
    east = make_query_client(server.endpoint, json_compatible=False)
    with pytest.raises(east.exceptions.QueueDoesNotExist):
        east.get_queue_url(QueueName=queue_name)


# -- errors ---------------------------------------------------------------------------


def error_of(info: pytest.ExceptionInfo[Any]) -> tuple[str, str, int]:
    response = info.value.response
    return response["Error"]["Code"], response["Error"]["Type"], response["ResponseMetadata"]["HTTPStatusCode"]


def test_an_unknown_queue_is_non_existent_queue_with_the_wsdl_message(qsqs, server):
    with pytest.raises(qsqs.exceptions.QueueDoesNotExist) as info:
        qsqs.send_message(QueueUrl=f"{server.endpoint}/000000000000/never-made", MessageBody="x")
    assert error_of(info) == ("AWS.SimpleQueueService.NonExistentQueue", "Sender", 400)
    assert info.value.response["Error"]["Message"] == "The specified queue does not exist for this wsdl version."
    assert "QueryErrorCode" not in info.value.response["Error"]  # Query sends only the legacy code


def test_a_create_with_other_attributes_is_queue_already_exists(qsqs, make_qqueue):
    url = make_qqueue(Attributes={"VisibilityTimeout": "10"})
    with pytest.raises(qsqs.exceptions.QueueNameExists) as info:
        make_qqueue(Attributes={"VisibilityTimeout": "11"})
    assert error_of(info) == ("QueueAlreadyExists", "Sender", 400)
    assert url


def test_bad_queue_attributes_are_invalid_attribute_name_or_value(qsqs, make_qqueue):
    url = make_qqueue()
    with pytest.raises(qsqs.exceptions.InvalidAttributeName) as info:
        qsqs.get_queue_attributes(QueueUrl=url, AttributeNames=["NoSuchAttribute"])
    assert error_of(info) == ("InvalidAttributeName", "Sender", 400)
    with pytest.raises(ClientError) as info:
        qsqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "43201"})
    assert error_of(info)[0] in ("InvalidAttributeValue", "InvalidParameterValue")


@pytest.mark.parametrize("entries, exception, code", [
    ([], "EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest"),
    ([{"Id": str(i), "MessageBody": "x"} for i in range(11)], "TooManyEntriesInBatchRequest",
     "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"),
    ([{"Id": "a", "MessageBody": "x"}] * 2, "BatchEntryIdsNotDistinct",
     "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"),
    ([{"Id": "no spaces", "MessageBody": "x"}], "InvalidBatchEntryId",
     "AWS.SimpleQueueService.InvalidBatchEntryId"),
])
def test_a_bad_batch_fails_whole_with_its_legacy_code(qsqs_unvalidated, server, queue_name, entries, exception, code):
    client = qsqs_unvalidated
    url = client.create_queue(QueueName=queue_name)["QueueUrl"]
    with pytest.raises(getattr(client.exceptions, exception)) as info:
        client.send_message_batch(QueueUrl=url, Entries=entries)
    assert error_of(info) == (code, "Sender", 400)


def test_a_malformed_receipt_handle_is_receipt_handle_is_invalid(qsqs, make_qqueue):
    url = make_qqueue()
    with pytest.raises(qsqs.exceptions.ReceiptHandleIsInvalid) as info:
        qsqs.delete_message(QueueUrl=url, ReceiptHandle="not-a-handle")
    assert error_of(info) == ("ReceiptHandleIsInvalid", "Sender", 400)


def test_too_many_permission_actions_is_over_limit_with_status_403(qsqs, make_qqueue):
    url = make_qqueue()
    with pytest.raises(qsqs.exceptions.OverLimit) as info:
        qsqs.add_permission(QueueUrl=url, Label="l", AWSAccountIds=["111122223333"],
                            Actions=["SendMessage", "ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility",
                                     "GetQueueAttributes", "GetQueueUrl", "PurgeQueue", "ListDeadLetterSourceQueues"])
    assert error_of(info) == ("OverLimit", "Sender", 403)


def test_missing_and_invalid_parameters_and_contents(qsqs_unvalidated, server, queue_name):
    client = qsqs_unvalidated
    url = client.create_queue(QueueName=queue_name)["QueueUrl"]
    with pytest.raises(ClientError) as info:
        client.send_message(QueueUrl=url)
    assert error_of(info) == ("MissingParameter", "Sender", 400)
    with pytest.raises(ClientError) as info:
        client.receive_message(QueueUrl=url, MaxNumberOfMessages=11)
    assert error_of(info) == ("InvalidParameterValue", "Sender", 400)
    with pytest.raises(client.exceptions.InvalidMessageContents) as info:
        client.send_message(QueueUrl=url, MessageBody="nul \x00 is not XML")
    assert error_of(info) == ("InvalidMessageContents", "Sender", 400)


def test_binary_attribute_values_travel_as_base64(qsqs, make_qqueue, sent_requests):
    url = make_qqueue()
    qsqs.send_message(QueueUrl=url, MessageBody="b",
                      MessageAttributes={"bin": {"DataType": "Binary.gif", "BinaryValue": b"\xff\x00GIF"}})
    form = dict(parse_qsl(_text(sent_requests[-1].body)))
    assert form["MessageAttribute.1.Value.BinaryValue"] == base64.b64encode(b"\xff\x00GIF").decode()
    [message] = qsqs.receive_message(QueueUrl=url, MessageAttributeNames=["bin"])["Messages"]
    assert message["MessageAttributes"]["bin"] == {"DataType": "Binary.gif", "BinaryValue": b"\xff\x00GIF"}


def test_the_json_compatible_client_fills_what_xml_cannot_say(server, make_qqueue):
    client = make_query_client(server.endpoint)  # json_compatible=True
    url = make_qqueue()
    assert "Successful" not in client.delete_message_batch(QueueUrl=url, Entries=[{"Id": "a", "ReceiptHandle": "x"}])
    assert client.list_dead_letter_source_queues(QueueUrl=url)["queueUrls"] == []
    arn = client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    assert client.list_message_move_tasks(SourceArn=arn)["Results"] == []
    with pytest.raises(client.exceptions.QueueDoesNotExist) as info:
        client.get_queue_url(QueueName="never-made-either")
    assert info.value.response["Error"]["QueryErrorCode"] == "QueueDoesNotExist"
    assert info.value.response["Error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue"
