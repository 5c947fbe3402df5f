"""Which message attributes a receive returns (exact names, All, `.*`, prefixes), the MD5 over the
returned ones, the X-Ray header as AWSTraceHeader, and the empty-value error's wording."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError
from support.sqs import md5_of_attributes, receive

ATTRIBUTES = {
    "Help.Me": {"DataType": "String", "StringValue": "please"},
    "Help.You": {"DataType": "Number", "StringValue": "7"},
    "Helper": {"DataType": "String", "StringValue": "not under Help."},
    "Other": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
}
TRACE = "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1"


@pytest.mark.parametrize("names, expected", [
    (["Help.Me"], {"Help.Me"}),
    (["All"], set(ATTRIBUTES)),
    ([".*"], set(ATTRIBUTES)),
    (["Help.*"], {"Help.Me", "Help.You"}),
    (["Help.*", "Other"], {"Help.Me", "Help.You", "Other"}),
    (["Missing"], set()),
])
def test_message_attribute_names_select_by_name_all_and_prefix_with_the_md5_of_those_returned(
        sqs, queue_url, names, expected):
    sqs.send_message(QueueUrl=queue_url, MessageBody="b", MessageAttributes=ATTRIBUTES)
    [message] = receive(sqs, queue_url, MessageAttributeNames=names)
    returned = message.get("MessageAttributes", {})
    assert set(returned) == expected
    if expected:
        assert message["MD5OfMessageAttributes"] == md5_of_attributes({n: ATTRIBUTES[n] for n in expected})
    else:
        assert "MD5OfMessageAttributes" not in message


def _with_trace_header(client: Any) -> Any:
    def add_header(request: Any, **_: Any) -> None:
        request.headers["X-Amzn-Trace-Id"] = TRACE
    client.meta.events.register("before-sign.sqs.SendMessage", add_header)
    return client


def test_an_x_amzn_trace_id_header_on_send_message_becomes_the_aws_trace_header(sqs, server, make_client, queue_url):
    _with_trace_header(make_client(server.endpoint)).send_message(QueueUrl=queue_url, MessageBody="traced")
    [message] = receive(sqs, queue_url, MessageSystemAttributeNames=["AWSTraceHeader"])
    assert message["Attributes"] == {"AWSTraceHeader": TRACE}


def test_an_explicit_aws_trace_header_wins_over_the_x_amzn_trace_id_header(sqs, server, make_client, queue_url):
    explicit = "Root=1-00000000-000000000000000000000001"
    _with_trace_header(make_client(server.endpoint)).send_message(
        QueueUrl=queue_url, MessageBody="traced",
        MessageSystemAttributes={"AWSTraceHeader": {"DataType": "String", "StringValue": explicit}})
    [message] = receive(sqs, queue_url, MessageSystemAttributeNames=["All"])
    assert message["Attributes"]["AWSTraceHeader"] == explicit


def test_a_message_without_the_header_has_no_aws_trace_header(sqs, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="untraced")
    [message] = receive(sqs, queue_url, MessageSystemAttributeNames=["All"])
    assert "AWSTraceHeader" not in message["Attributes"]


def test_an_empty_string_value_is_refused_with_aws_wording(sqs_unvalidated, queue_url):
    with pytest.raises(ClientError) as info:
        sqs_unvalidated.send_message(QueueUrl=queue_url, MessageBody="b",
                                     MessageAttributes={"empty": {"DataType": "String", "StringValue": ""}})
    assert info.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert info.value.response["Error"]["Message"] == (
        "Message (user) attribute 'empty' must contain a non-empty value of type 'String'.")
    assert receive(sqs_unvalidated, queue_url) == []
