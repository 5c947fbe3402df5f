"""Message attributes (and their MD5s) and message system attributes on receive."""

from __future__ import annotations

import pytest
from support.sqs import Counts, counts, md5_of_attributes, raises_code, receive

MIXED = {
    "text": {"DataType": "String", "StringValue": "h\u00e9llo \U0001F600"},
    "count": {"DataType": "Number", "StringValue": "-1.50"},
    "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xfe\xff binary"},
    "custom_string": {"DataType": "String.json", "StringValue": "{\"a\": 1}"},
    "custom_number": {"DataType": "Number.float", "StringValue": "3.14"},
    "custom_binary": {"DataType": "Binary.gif", "BinaryValue": b"GIF89a"},
}


def _send(sqs, url, attributes, body="with attributes"):
    return sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=attributes)


def test_send_returns_the_md5_of_the_message_attributes(sqs, queue_url):
    sent = _send(sqs, queue_url, MIXED)
    assert sent["MD5OfMessageAttributes"] == md5_of_attributes(MIXED)


@pytest.mark.parametrize("name", sorted(MIXED))
def test_each_attribute_type_gives_the_documented_md5(sqs, queue_url, name):
    attrs = {name: MIXED[name]}
    sent = _send(sqs, queue_url, attrs)
    assert sent["MD5OfMessageAttributes"] == md5_of_attributes(attrs)


def test_string_number_binary_and_custom_typed_attributes_round_trip(sqs, queue_url):
    sent = _send(sqs, queue_url, MIXED)
    (msg,) = receive(sqs, queue_url, MessageAttributeNames=["All"])
    got = msg["MessageAttributes"]
    assert set(got) == set(MIXED)
    for name, value in MIXED.items():
        assert got[name]["DataType"] == value["DataType"], name
        if "BinaryValue" in value:
            assert got[name]["BinaryValue"] == value["BinaryValue"], name
            assert "StringValue" not in got[name]
        else:
            assert got[name]["StringValue"] == value["StringValue"], name
            assert "BinaryValue" not in got[name]
    assert msg["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
    assert msg["MD5OfMessageAttributes"] == md5_of_attributes(got)


SELECTABLE = {
    "foo.a": {"DataType": "String", "StringValue": "1"},
    "foo.b": {"DataType": "Number", "StringValue": "2"},
    "bar.x": {"DataType": "String", "StringValue": "3"},
    "baz": {"DataType": "Binary", "BinaryValue": b"4"},
}


@pytest.mark.parametrize("selector,expected", [
    (["All"], set(SELECTABLE)),
    ([".*"], set(SELECTABLE)),
    (["foo.*"], {"foo.a", "foo.b"}),
    (["baz"], {"baz"}),
    (["foo.a", "bar.x"], {"foo.a", "bar.x"}),
    (["bar.*", "baz"], {"bar.x", "baz"}),
], ids=["All", "dot-star", "prefix", "exact", "two-exact", "prefix-and-exact"])
def test_message_attribute_names_select_which_attributes_come_back(
        sqs, queue_url, selector, expected):
    _send(sqs, queue_url, SELECTABLE)
    (msg,) = receive(sqs, queue_url, MessageAttributeNames=selector)
    got = msg.get("MessageAttributes", {})
    assert set(got) == expected
    # The MD5 on receive covers the attributes returned (that is what SDKs verify).
    assert msg["MD5OfMessageAttributes"] == md5_of_attributes(got)


def test_without_message_attribute_names_no_attributes_come_back(sqs, queue_url):
    _send(sqs, queue_url, SELECTABLE)
    (msg,) = receive(sqs, queue_url)
    assert "MessageAttributes" not in msg


def test_selecting_an_attribute_the_message_lacks_returns_none(sqs, queue_url):
    _send(sqs, queue_url, SELECTABLE)
    (msg,) = receive(sqs, queue_url, MessageAttributeNames=["nope", "nope2.*"])
    assert msg.get("MessageAttributes", {}) == {}


def test_ten_message_attributes_are_accepted(sqs, queue_url):
    attrs = {f"a{i}": {"DataType": "String", "StringValue": str(i)} for i in range(10)}
    sent = _send(sqs, queue_url, attrs)
    assert sent["MD5OfMessageAttributes"] == md5_of_attributes(attrs)
    (msg,) = receive(sqs, queue_url, MessageAttributeNames=["All"])
    assert len(msg["MessageAttributes"]) == 10


def test_eleven_message_attributes_are_rejected(sqs, queue_url):
    attrs = {f"a{i}": {"DataType": "String", "StringValue": str(i)} for i in range(11)}
    with raises_code("InvalidParameterValue"):
        _send(sqs, queue_url, attrs)
    assert counts(sqs, queue_url) == Counts(0, 0, 0)


def test_an_attribute_name_of_256_allowed_characters_is_accepted(sqs, queue_url):
    name = ("Az09_-." * 40)[:255] + "z"
    assert len(name) == 256 and ".." not in name
    attrs = {name: {"DataType": "String", "StringValue": "v"}}
    sent = _send(sqs, queue_url, attrs)
    assert sent["MD5OfMessageAttributes"] == md5_of_attributes(attrs)


@pytest.mark.parametrize("name", ["attr.1øßä", "Größe", "имя.поле", "名前_1", "ÅngströM-9"])
def test_an_attribute_name_with_letters_of_any_script_is_accepted(sqs, queue_url, name):
    attrs = {name: {"DataType": "String", "StringValue": "v"}}
    sent = _send(sqs, queue_url, attrs)
    assert sent["MD5OfMessageAttributes"] == md5_of_attributes(attrs)
    (msg,) = receive(sqs, queue_url, MessageAttributeNames=[name])
    assert msg["MessageAttributes"] == attrs
    assert msg["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]


@pytest.mark.parametrize("name", [
    "AWS.reserved",
    "aws.reserved",
    "Amazon.reserved",
    "AMAZON.reserved",
    "aWs.øß",
    ".leading",
    ".øß",
    "trailing.",
    "double..dot",
    "ø..ß",
    "has space",
    "star*",
    "smile😀",
    "x" * 257,
], ids=["AWS.", "aws.", "Amazon.", "AMAZON.", "aWs.-non-ascii", "leading-dot", "leading-dot-non-ascii",
        "trailing-dot", "double-dot", "double-dot-non-ascii", "space", "star", "emoji", "257-chars"])
def test_a_bad_message_attribute_name_is_rejected(sqs, queue_url, name):
    with raises_code("InvalidParameterValue"):
        _send(sqs, queue_url, {name: {"DataType": "String", "StringValue": "v"}})
    assert counts(sqs, queue_url) == Counts(0, 0, 0)


@pytest.mark.parametrize("value", [
    {"DataType": "Foo", "StringValue": "v"},
    {"DataType": "", "StringValue": "v"},
    {"DataType": "String", "StringValue": ""},
    {"DataType": "String"},
    {"DataType": "Number", "StringValue": "abc"},
    {"DataType": "Number", "StringValue": "12x"},
    {"DataType": "Binary", "StringValue": "not binary"},
    {"DataType": "Binary", "BinaryValue": b""},
], ids=["unknown-type", "empty-type", "empty-string", "no-value", "number-abc", "number-12x",
        "binary-as-string", "empty-binary"])
def test_a_bad_message_attribute_value_is_rejected(sqs_unvalidated, queue_url, value):
    sqs = sqs_unvalidated
    with raises_code("InvalidParameterValue"):
        _send(sqs, queue_url, {"attr": value})
    assert counts(sqs, queue_url) == Counts(0, 0, 0)


def test_a_string_attribute_with_a_forbidden_character_is_rejected(sqs, queue_url):
    with raises_code("InvalidParameterValue", "InvalidMessageContents"):
        _send(sqs, queue_url, {"attr": {"DataType": "String", "StringValue": "a\x00b"}})
    assert counts(sqs, queue_url) == Counts(0, 0, 0)


# --- system attributes ---------------------------------------------------------------------

BASIC_SYSTEM = {"SenderId", "SentTimestamp", "ApproximateReceiveCount",
                "ApproximateFirstReceiveTimestamp"}


def test_all_system_attributes_come_back_with_sensible_values(sqs, queue_url, clock):
    t0 = clock.now_ms()
    sqs.send_message(QueueUrl=queue_url, MessageBody="sys")
    t1 = clock.now_ms()
    clock.advance(3)
    t2 = clock.now_ms()
    (msg,) = receive(sqs, queue_url, MessageSystemAttributeNames=["All"])
    t3 = clock.now_ms()
    attrs = msg["Attributes"]
    assert BASIC_SYSTEM <= set(attrs)
    assert attrs["SenderId"]
    assert t0 <= int(attrs["SentTimestamp"]) <= t1
    assert attrs["ApproximateReceiveCount"] == "1"
    assert t2 <= int(attrs["ApproximateFirstReceiveTimestamp"]) <= t3
    assert "AWSTraceHeader" not in attrs


def test_the_receive_count_grows_and_the_first_receive_time_stays(sqs, queue_url, clock):
    sqs.send_message(QueueUrl=queue_url, MessageBody="counted")
    (first,) = receive(sqs, queue_url, MessageSystemAttributeNames=["All"], VisibilityTimeout=5)
    clock.advance(6)
    (second,) = receive(sqs, queue_url, MessageSystemAttributeNames=["All"], VisibilityTimeout=5)
    clock.advance(6)
    (third,) = receive(sqs, queue_url, MessageSystemAttributeNames=["All"])
    assert [m["Attributes"]["ApproximateReceiveCount"] for m in (first, second, third)] == [
        "1", "2", "3"]
    firsts = {m["Attributes"]["ApproximateFirstReceiveTimestamp"] for m in (first, second, third)}
    assert len(firsts) == 1
    assert len({m["Attributes"]["SentTimestamp"] for m in (first, second, third)}) == 1


@pytest.mark.parametrize("names", [
    ["SentTimestamp"],
    ["ApproximateReceiveCount", "SenderId"],
    ["ApproximateFirstReceiveTimestamp"],
])
def test_only_the_requested_system_attributes_come_back(sqs, queue_url, names):
    sqs.send_message(QueueUrl=queue_url, MessageBody="pick")
    (msg,) = receive(sqs, queue_url, MessageSystemAttributeNames=names)
    assert set(msg["Attributes"]) == set(names)


def test_the_older_attribute_names_parameter_selects_system_attributes_too(sqs, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="legacy")
    (msg,) = receive(sqs, queue_url, AttributeNames=["All"])
    assert BASIC_SYSTEM <= set(msg["Attributes"])
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"],
                                  VisibilityTimeout=0)
    (again,) = receive(sqs, queue_url, AttributeNames=["ApproximateReceiveCount"])
    assert again["Attributes"] == {"ApproximateReceiveCount": "2"}


def test_without_system_attribute_names_no_system_attributes_come_back(sqs, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="plain")
    (msg,) = receive(sqs, queue_url)
    assert msg.get("Attributes", {}) == {}


TRACE = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"


def test_an_aws_trace_header_is_stored_returned_and_has_its_own_md5(sqs, queue_url):
    system = {"AWSTraceHeader": {"DataType": "String", "StringValue": TRACE}}
    sent = sqs.send_message(QueueUrl=queue_url, MessageBody="traced",
                            MessageSystemAttributes=system)
    assert sent["MD5OfMessageSystemAttributes"] == md5_of_attributes(system)
    (msg,) = receive(sqs, queue_url, MessageSystemAttributeNames=["All"])
    assert msg["Attributes"]["AWSTraceHeader"] == TRACE
    sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"],
                                  VisibilityTimeout=0)
    (again,) = receive(sqs, queue_url, MessageSystemAttributeNames=["AWSTraceHeader"])
    assert again["Attributes"] == {"AWSTraceHeader": TRACE}


def test_the_aws_trace_header_does_not_count_toward_the_size_limit(sqs, make_queue):
    url = make_queue({"MaximumMessageSize": "1024"})
    sqs.send_message(QueueUrl=url, MessageBody="a" * 1024, MessageSystemAttributes={
        "AWSTraceHeader": {"DataType": "String", "StringValue": TRACE}})
    assert counts(sqs, url) == Counts(1, 0, 0)


def test_message_and_system_attributes_come_back_together(sqs, queue_url):
    sqs.send_message(QueueUrl=queue_url, MessageBody="both", MessageAttributes=SELECTABLE,
                     MessageSystemAttributes={
                         "AWSTraceHeader": {"DataType": "String", "StringValue": TRACE}})
    (msg,) = receive(sqs, queue_url, MessageAttributeNames=["All"],
                     MessageSystemAttributeNames=["All"])
    assert set(msg["MessageAttributes"]) == set(SELECTABLE)
    assert msg["Attributes"]["AWSTraceHeader"] == TRACE
    assert msg["MD5OfMessageAttributes"] == md5_of_attributes(SELECTABLE)
