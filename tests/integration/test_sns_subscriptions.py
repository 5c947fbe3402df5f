"""Subscriptions of topics (protocol sqs) through boto3's `sns` client: their attributes, idempotent
Subscribe, Unsubscribe, the paged lists, and filter policies checked when set and applied at publish."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError
from support.sqs import unique_queue_name


@pytest.fixture
def topic(sns: Any, request: pytest.FixtureRequest) -> str:
    return sns.create_topic(Name=unique_queue_name(request.node.originalname.removeprefix("test_"))[:60])["TopicArn"]


@pytest.fixture
def queue(sqs: Any, request: pytest.FixtureRequest) -> tuple[str, str]:
    """(URL, ARN) of a fresh standard queue."""
    url = sqs.create_queue(QueueName=unique_queue_name(request.node.originalname.removeprefix("test_")))["QueueUrl"]
    return url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def error_message(call: Any, **kwargs: Any) -> str:
    with pytest.raises(ClientError) as caught:
        call(**kwargs)
    assert caught.value.response["Error"]["Code"] == "InvalidParameter"
    return str(caught.value.response["Error"]["Message"])


def test_a_subscription_shows_aws_attributes_and_is_confirmed_at_once(sns: Any, topic: str,
                                                                     queue: tuple[str, str]) -> None:
    arn = sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue[1])["SubscriptionArn"]
    assert arn.startswith(topic + ":") and len(arn) == len(topic) + 37
    attributes = sns.get_subscription_attributes(SubscriptionArn=arn)["Attributes"]
    assert attributes == {"ConfirmationWasAuthenticated": "true", "Endpoint": queue[1], "Owner": "000000000000",
                          "PendingConfirmation": "false", "Protocol": "sqs", "RawMessageDelivery": "false",
                          "SubscriptionArn": arn, "SubscriptionPrincipal": "arn:aws:iam::000000000000:root",
                          "TopicArn": topic}
    assert sns.get_topic_attributes(TopicArn=topic)["Attributes"]["SubscriptionsConfirmed"] == "1"


def test_subscribe_is_idempotent_with_equal_or_default_attributes(sns: Any, topic: str, queue: tuple[str, str]) -> None:
    arn = sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue[1],
                        Attributes={"RawMessageDelivery": "True"})["SubscriptionArn"]
    for attributes in ({}, {"RawMessageDelivery": "true"}, {"FilterPolicyScope": "MessageAttributes"}):
        assert sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue[1],
                             Attributes=attributes)["SubscriptionArn"] == arn
    assert error_message(sns.subscribe, TopicArn=topic, Protocol="sqs", Endpoint=queue[1],
                         Attributes={"RawMessageDelivery": "false"}) == (
        "Invalid parameter: Attributes Reason: Subscription already exists with different attributes")


def test_set_subscription_attributes_and_the_scope_shown_only_with_a_policy(sns: Any, topic: str,
                                                                           queue: tuple[str, str]) -> None:
    arn = sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue[1])["SubscriptionArn"]
    sns.set_subscription_attributes(SubscriptionArn=arn, AttributeName="FilterPolicyScope",
                                    AttributeValue="MessageBody")
    assert "FilterPolicyScope" not in sns.get_subscription_attributes(SubscriptionArn=arn)["Attributes"]
    sns.set_subscription_attributes(SubscriptionArn=arn, AttributeName="FilterPolicy",
                                    AttributeValue='{"a": {"b": ["c"]}}')
    attributes = sns.get_subscription_attributes(SubscriptionArn=arn)["Attributes"]
    assert (attributes["FilterPolicyScope"], attributes["FilterPolicy"]) == ("MessageBody", '{"a": {"b": ["c"]}}')
    assert error_message(sns.set_subscription_attributes, SubscriptionArn=arn, AttributeName="Protocol",
                         AttributeValue="x") == "Invalid parameter: AttributeName"
    assert error_message(sns.set_subscription_attributes, SubscriptionArn=arn, AttributeName="RawMessageDelivery",
                         AttributeValue="yes") == (
        "Invalid parameter: RawMessageDelivery: Invalid value [yes]. Must be true or false.")
    assert error_message(sns.set_subscription_attributes, SubscriptionArn=arn, AttributeName="RedrivePolicy",
                         AttributeValue='{"deadLetterTargetArn": "nope"}') == (
        "Invalid parameter: RedrivePolicy: deadLetterTargetArn is an invalid arn")
    assert error_message(sns.set_subscription_attributes, SubscriptionArn=arn, AttributeName="FilterPolicyScope",
                         AttributeValue="Body") == ("Invalid parameter: FilterPolicyScope: Invalid value [Body]. "
                                                    "Please use either MessageBody or MessageAttributes")


@pytest.mark.parametrize("policy, reason", [
    ({"a": "b"}, '"a" must be an object or an array'),
    ({"a": []}, "Empty arrays are not allowed"),
    ({k: ["v"] for k in "abcdef"}, "Filter policy can not have more than 5 keys"),
    ({"a": [{"prefix": 1}]}, "prefix match pattern must be a string"),
    ({"a": [{"suffix": []}]}, "suffix match pattern must be a string"),
    ({"a": [{"exists": "yes"}]}, "exists match pattern must be either true or false."),
    ({"a": [{"nope": 1}]}, "Unrecognized match type nope"),
    ({"a": [{"prefix": "x", "suffix": "y"}]}, "Only one key allowed in match expression"),
    ({"a": [{"anything-but": {"suffix": "x"}}]}, "Unsupported anything-but pattern: suffix"),
    ({"a": [{"numeric": [">", "x"]}]}, "Value of > must be numeric"),
    ({"a": [{"numeric": ["<>", 1]}]}, "Unrecognized numeric range operator: <>"),
    ({"a": [{"numeric": [">", 5, "<", 1]}]}, "Bottom must be less than top"),
    ({"a": [{"cidr": "10.0.0.0"}]}, "Malformed CIDR, one '/' required"),
    ({"a": [{"cidr": "10.0.0.0/x"}]}, "Malformed CIDR, mask bits must be an integer"),
    ({"a": [{"cidr": "10.0.0.300/8"}]}, "Nonstandard IP address: 10.0.0.300"),
    ({"a": {"b": ["c"]}}, "Filter policy scope MessageAttributes does not support nested filter policy"),
    ({k: list(range(6)) for k in "abc"}, "Filter policy is too complex"),
])
def test_a_bad_filter_policy_is_refused_with_aws_text_at_subscribe_and_at_set(
        sns: Any, topic: str, queue: tuple[str, str], policy: dict[str, Any], reason: str) -> None:
    text = json.dumps(policy)
    assert error_message(sns.subscribe, TopicArn=topic, Protocol="sqs", Endpoint=queue[1], Attributes={
        "FilterPolicy": text}) == f"Invalid parameter: Attributes Reason: FilterPolicy: {reason}"
    arn = sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue[1])["SubscriptionArn"]
    assert error_message(sns.set_subscription_attributes, SubscriptionArn=arn, AttributeName="FilterPolicy",
                         AttributeValue=text) == f"Invalid parameter: FilterPolicy: {reason}"


ATTRIBUTE_CASES = [
    ({"kind": ["order", "refund"]}, {"kind": ("String", "order")}, True),
    ({"kind": ["order"]}, {"kind": ("String", "Order")}, False),
    ({"kind": [{"equals-ignore-case": "ORDER"}]}, {"kind": ("String", "order")}, True),
    ({"kind": [{"prefix": "ord"}]}, {"kind": ("String", "order")}, True),
    ({"kind": [{"suffix": ".png"}]}, {"kind": ("String", "a.jpg")}, False),
    ({"kind": [{"anything-but": ["order", "refund"]}]}, {"kind": ("String", "quote")}, True),
    ({"kind": [{"anything-but": "order"}]}, {"kind": ("String", "order")}, False),
    ({"kind": [{"anything-but": {"prefix": "ord"}}]}, {"kind": ("String", "order")}, False),
    ({"price": [{"numeric": [">", 0, "<=", 150]}]}, {"price": ("Number", "150")}, True),
    ({"price": [{"numeric": [">", 0, "<=", 150]}]}, {"price": ("Number", "150.5")}, False),
    ({"price": [{"numeric": ["=", 5]}]}, {"price": ("Number", "5.0")}, True),
    ({"price": [5]}, {"price": ("Number", "5")}, True),
    ({"price": [5]}, {"price": ("String", "5")}, False),
    ({"tags": ["red"]}, {"tags": ("String.Array", '["blue", "red"]')}, True),
    ({"kind": [{"exists": True}]}, {"kind": ("String", "x")}, True),
    ({"kind": [{"exists": False}]}, {"other": ("String", "x")}, True),
    ({"kind": [{"exists": False}]}, {}, False),
    ({"kind": ["x"]}, {"other": ("String", "x")}, False),
    ({"ip": [{"cidr": "10.0.0.0/24"}]}, {"ip": ("String", "10.0.0.7")}, True),
    ({"ip": [{"cidr": "10.0.0.0/24"}]}, {"ip": ("String", "10.0.1.7")}, False),
    ({"ip": [{"cidr": "2001:db8::/32"}]}, {"ip": ("String", "2001:db8::1")}, True),
    ({"a": ["1"], "b": ["2"]}, {"a": ("String", "1"), "b": ("String", "3")}, False),
    ({"$or": [{"a": ["1"]}, {"b": ["2"]}]}, {"b": ("String", "2")}, True),
    ({"$or": [{"a": ["1"]}, {"b": ["2"]}]}, {"c": ("String", "2")}, False),
]


def test_a_filter_policy_on_message_attributes_lets_through_what_aws_lets_through(
        sns: Any, sqs: Any, topic: str, request: pytest.FixtureRequest) -> None:
    expected = []
    for i, (policy, attributes, matches) in enumerate(ATTRIBUTE_CASES):
        url = sqs.create_queue(QueueName=unique_queue_name(f"filter{i}"))["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"FilterPolicy": json.dumps(policy),
                                                                                 "RawMessageDelivery": "true"})
        expected.append((url, matches))
    for i, (_, attributes, _) in enumerate(ATTRIBUTE_CASES):
        sns.publish(TopicArn=topic, Message=f"case{i}", MessageAttributes={
            name: {"DataType": data_type, "StringValue": value} for name, (data_type, value) in attributes.items()})
    for i, (url, matches) in enumerate(expected):
        bodies = [m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])]
        assert (f"case{i}" in bodies) is matches, (i, ATTRIBUTE_CASES[i], bodies)


def test_a_filter_policy_on_the_body_matches_nested_keys(sns: Any, sqs: Any, topic: str,
                                                         queue: tuple[str, str]) -> None:
    policy = {"order": {"status": ["paid"], "total": [{"numeric": [">=", 100]}]}, "$or": [
        {"region": ["eu"]}, {"vip": [True]}]}
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue[1], Attributes={
        "FilterPolicy": json.dumps(policy), "FilterPolicyScope": "MessageBody", "RawMessageDelivery": "true"})
    documents = [
        {"order": {"status": "paid", "total": 120}, "region": "eu"},
        {"order": {"status": "paid", "total": 120}, "region": "us", "vip": True},
        {"order": {"status": "paid", "total": 99}, "region": "eu"},
        {"order": {"status": "open", "total": 500}, "region": "eu"},
        {"order": {"status": "paid", "total": 120}, "region": "us"},
    ]
    for document in documents:
        sns.publish(TopicArn=topic, Message=json.dumps(document))
    sns.publish(TopicArn=topic, Message="not json")
    bodies = [json.loads(m["Body"]) for m in sqs.receive_message(QueueUrl=queue[0], MaxNumberOfMessages=10)["Messages"]]
    assert sorted(bodies, key=json.dumps) == sorted(documents[:2], key=json.dumps)


def test_unsubscribe_is_idempotent_and_a_bad_arn_answers_as_aws(sns: Any, topic: str, queue: tuple[str, str]) -> None:
    arn = sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue[1])["SubscriptionArn"]
    sns.unsubscribe(SubscriptionArn=arn)
    sns.unsubscribe(SubscriptionArn=arn)
    assert sns.list_subscriptions_by_topic(TopicArn=topic)["Subscriptions"] == []
    assert error_message(sns.unsubscribe, SubscriptionArn="arn:aws:sns:us-east-1") == (
        "Invalid parameter: SubscriptionArn Reason: An ARN must have at least 6 elements, not 4")
    assert error_message(sns.unsubscribe, SubscriptionArn=topic + ":not-an-id") == "Invalid parameter: SubscriptionId"


def test_the_subscription_lists_page_and_name_their_topic(sns: Any, sqs: Any, topic: str) -> None:
    made = set()
    for i in range(105):
        made.add(sns.subscribe(TopicArn=topic, Protocol="sqs",
                               Endpoint=f"arn:aws:sqs:us-east-1:000000000000:listed-{i}")["SubscriptionArn"])
    pages = list(sns.get_paginator("list_subscriptions_by_topic").paginate(TopicArn=topic))
    assert [len(p["Subscriptions"]) for p in pages] == [100, 5]
    listed = [s for p in pages for s in p["Subscriptions"]]
    assert {s["SubscriptionArn"] for s in listed} == made
    assert {(s["TopicArn"], s["Protocol"], s["Owner"]) for s in listed} == {(topic, "sqs", "000000000000")}
    everything = [s["SubscriptionArn"] for p in sns.get_paginator("list_subscriptions").paginate()
                  for s in p["Subscriptions"]]
    assert made <= set(everything)


def test_the_unsubscribe_url_of_an_envelope_unsubscribes(sns: Any, sqs: Any, topic: str,
                                                         queue: tuple[str, str]) -> None:
    import urllib.request
    arn = sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue[1])["SubscriptionArn"]
    sns.publish(TopicArn=topic, Message="m")
    [message] = sqs.receive_message(QueueUrl=queue[0])["Messages"]
    with urllib.request.urlopen(json.loads(message["Body"])["UnsubscribeURL"]) as response:
        assert response.status == 200
    assert arn not in [s["SubscriptionArn"] for s in sns.list_subscriptions_by_topic(TopicArn=topic)["Subscriptions"]]


def test_confirm_subscription_has_no_token_to_confirm(sns: Any, topic: str) -> None:
    assert error_message(sns.confirm_subscription, TopicArn=topic, Token="0" * 64) == "Invalid parameter: Token"
