"""Which message attributes a receive returns (exact names, All, `.*`, `*`, prefixes: `Hel.*` is every
name that starts with `Hel`, as AWS answers), the MD5 over the returned ones, the same selection on
a subscription's receive and a browse, the X-Ray header as AWSTraceHeader, and the empty-value
error's wording."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError
from support.sqs import md5_of_attributes, receive
from support.subscriptions import subscribe
from support.wire import query_post, raw_json_call

ATTRIBUTES = {
    "Hello": {"DataType": "String", "StringValue": "hi"},
    "Help.Me": {"DataType": "String", "StringValue": "please"},
    "Helper": {"DataType": "Number", "StringValue": "7"},
    "Custom1": {"DataType": "String", "StringValue": "one"},
    "Custom2": {"DataType": "String.custom", "StringValue": "two"},
    "Other": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
}
SELECTIONS = [
    (["Hello"], {"Hello"}),
    (["All"], set(ATTRIBUTES)),
    ([".*"], set(ATTRIBUTES)),
    (["*"], set(ATTRIBUTES)),
    (["Hel.*"], {"Hello", "Help.Me", "Helper"}),
    (["Help.*"], {"Help.Me", "Helper"}),
    (["Custom.*"], {"Custom1", "Custom2"}),
    (["Hel.*", "Other"], {"Hello", "Help.Me", "Helper", "Other"}),
    (["Hel"], set()),
    (["Missing"], set()),
]
TRACE = "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1"


def _assert_selected(message: dict[str, Any], expected: set[str]) -> None:
    returned = message.get("MessageAttributes", {})
    assert set(returned) == expected
    if expected:
        assert message["MD5OfMessageAttributes"] == md5_of_attributes({n: ATTRIBUTES[n] for n in expected})
    else:
        assert "MD5OfMessageAttributes" not in message


@pytest.mark.parametrize("names, expected", SELECTIONS)
def test_message_attribute_names_select_by_name_all_and_prefix_with_the_md5_of_those_returned(
        sqs, queue_url, names, expected):
    sqs.send_message(QueueUrl=queue_url, MessageBody="b", MessageAttributes=ATTRIBUTES)
    [message] = receive(sqs, queue_url, MessageAttributeNames=names)
    _assert_selected(message, expected)


@pytest.mark.parametrize("names, expected", SELECTIONS)
def test_a_subscription_receive_selects_the_same_attributes(sqs, queue_url, names, expected):
    subscription_url = subscribe(sqs, queue_url, "selected")
    sqs.send_message(QueueUrl=queue_url, MessageBody="b", MessageAttributes=ATTRIBUTES)
    [message] = receive(sqs, subscription_url, MessageAttributeNames=names)
    _assert_selected(message, expected)


def _browsed(sqs: Any, queue_url: str, names: list[str]) -> dict[str, Any]:
    """The one message of a browse, in the JSON shape, over the client's protocol."""
    endpoint = sqs.meta.endpoint_url
    if sqs.meta.service_model.protocol == "json":
        resp = raw_json_call(endpoint, "QueueserverBrowseMessages", {"QueueUrl": queue_url,
                                                                     "MessageAttributeNames": names})
        [message] = resp.json()["Messages"]
        return message
    fields = {"Action": "QueueserverBrowseMessages", "QueueUrl": queue_url,
              **{f"MessageAttributeName.{i}": name for i, name in enumerate(names, start=1)}}
    resp = query_post(endpoint, fields)
    assert resp.status == 200, resp.body
    message = {"MessageAttributes": {name: ATTRIBUTES[name] for name in resp.texts(
        "QueueserverBrowseMessagesResult/Message/MessageAttribute/Name")}}
    md5 = resp.text("QueueserverBrowseMessagesResult/Message/MD5OfMessageAttributes")
    if md5 is not None:
        message["MD5OfMessageAttributes"] = md5
    return message


@pytest.mark.parametrize("names, expected", SELECTIONS)
def test_a_browse_selects_the_same_attributes(sqs, queue_url, names, expected):
    sqs.send_message(QueueUrl=queue_url, MessageBody="b", MessageAttributes=ATTRIBUTES)
    _assert_selected(_browsed(sqs, queue_url, names), expected)


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
