"""Topics over the SNS API (boto3's `sns` client) on the SQS endpoint: create, attributes, lists,
tags, permissions, subscriptions with protocol sqs, and AWS's error shapes and texts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError
from support.sqs import unique_queue_name


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    return unique_queue_name(request.node.originalname.removeprefix("test_"))[:200]


def error_of(call: Any, **kwargs: Any) -> tuple[str, str, int]:
    with pytest.raises(ClientError) as caught:
        call(**kwargs)
    error = caught.value.response
    return error["Error"]["Code"], error["Error"]["Message"], error["ResponseMetadata"]["HTTPStatusCode"]


def test_a_topic_is_created_once_and_found_by_its_arn(sns: Any, topic_name: str) -> None:
    arn = sns.create_topic(Name=topic_name)["TopicArn"]
    assert arn == f"arn:aws:sns:us-east-1:000000000000:{topic_name}"
    assert sns.create_topic(Name=topic_name)["TopicArn"] == arn
    attributes = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
    assert attributes["TopicArn"] == arn
    assert attributes["Owner"] == "000000000000"
    assert attributes["DisplayName"] == ""
    assert (attributes["SubscriptionsConfirmed"], attributes["SubscriptionsPending"]) == ("0", "0")
    assert "FifoTopic" not in attributes and "SignatureVersion" not in attributes
    policy = json.loads(attributes["Policy"])
    assert policy["Statement"][0]["Condition"] == {"StringEquals": {"AWS:SourceOwner": "000000000000"}}


def test_create_topic_is_idempotent_as_aws_and_refuses_different_attributes(sns: Any, topic_name: str) -> None:
    arn = sns.create_topic(Name=topic_name, Attributes={"DisplayName": "orders"})["TopicArn"]
    assert sns.create_topic(Name=topic_name)["TopicArn"] == arn
    assert sns.create_topic(Name=topic_name, Attributes={"FifoTopic": "false"})["TopicArn"] == arn
    assert error_of(sns.create_topic, Name=topic_name, Attributes={"SignatureVersion": "2"}) == (
        "InvalidParameter", "Invalid parameter: Attributes Reason: Topic already exists with different attributes",
        400)
    assert error_of(sns.create_topic, Name=topic_name, Attributes={"FifoTopic": "true"})[:2] == (
        "InvalidParameter", "Invalid parameter: Topic Name")


@pytest.mark.parametrize("name, attributes", [
    ("bad name", {}), ("x" * 257, {}), ("plain.fifo", {}), ("plain", {"FifoTopic": "true"}),
])
def test_a_bad_topic_name_is_invalid_parameter_topic_name(sns: Any, name: str, attributes: dict[str, str]) -> None:
    assert error_of(sns.create_topic, Name=name, Attributes=attributes) == (
        "InvalidParameter", "Invalid parameter: Topic Name", 400)


def test_a_fifo_topic_shows_its_fifo_attributes(sns: Any, topic_name: str) -> None:
    arn = sns.create_topic(Name=topic_name + ".fifo", Attributes={"FifoTopic": "true"})["TopicArn"]
    attributes = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
    assert (attributes["FifoTopic"], attributes["ContentBasedDeduplication"]) == ("true", "false")
    sns.set_topic_attributes(TopicArn=arn, AttributeName="ContentBasedDeduplication", AttributeValue="true")
    assert sns.get_topic_attributes(TopicArn=arn)["Attributes"]["ContentBasedDeduplication"] == "true"
    assert error_of(sns.set_topic_attributes, TopicArn=arn, AttributeName="FifoTopic", AttributeValue="false")[:2] == (
        "InvalidParameter", "Invalid parameter: AttributeName")


def test_set_topic_attributes_changes_what_get_shows(sns: Any, topic_name: str) -> None:
    arn = sns.create_topic(Name=topic_name)["TopicArn"]
    sns.set_topic_attributes(TopicArn=arn, AttributeName="DisplayName", AttributeValue="Orders")
    sns.set_topic_attributes(TopicArn=arn, AttributeName="SignatureVersion", AttributeValue="2")
    attributes = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
    assert (attributes["DisplayName"], attributes["SignatureVersion"]) == ("Orders", "2")


def test_an_unknown_or_malformed_topic_arn_answers_as_aws(sns: Any) -> None:
    missing = "arn:aws:sns:us-east-1:000000000000:no-such-topic"
    assert error_of(sns.get_topic_attributes, TopicArn=missing) == ("NotFound", "Topic does not exist", 404)
    assert error_of(sns.get_topic_attributes, TopicArn="arn:aws:sns:us-east-1") == (
        "InvalidParameter", "Invalid parameter: TopicArn Reason: An ARN must have at least 6 elements, not 4", 400)
    assert error_of(sns.publish, TopicArn="arn:aws:sns:eu-west-1:000000000000:elsewhere", Message="m")[:2] == (
        "InvalidParameter", "Invalid parameter: TopicArn")


def test_delete_topic_is_idempotent_and_takes_its_subscriptions(sns: Any, sqs: Any, topic_name: str) -> None:
    arn = sns.create_topic(Name=topic_name)["TopicArn"]
    queue = sqs.create_queue(QueueName=topic_name)["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    subscription = sns.subscribe(TopicArn=arn, Protocol="sqs", Endpoint=queue_arn)["SubscriptionArn"]
    sns.delete_topic(TopicArn=arn)
    sns.delete_topic(TopicArn=arn)
    assert arn not in [t["TopicArn"] for t in sns.list_topics()["Topics"]]
    assert error_of(sns.get_subscription_attributes, SubscriptionArn=subscription)[:2] == (
        "NotFound", "Subscription does not exist")


def test_list_topics_pages_by_one_hundred(sns: Any, topic_name: str) -> None:
    created = {sns.create_topic(Name=f"{topic_name[:180]}-{i:03d}")["TopicArn"] for i in range(120)}
    seen: list[str] = []
    for page in sns.get_paginator("list_topics").paginate():
        assert len(page["Topics"]) <= 100
        seen += [t["TopicArn"] for t in page["Topics"]]
    assert created <= set(seen)
    assert len(seen) == len(set(seen))


def test_tags_are_set_listed_and_removed(sns: Any, topic_name: str) -> None:
    arn = sns.create_topic(Name=topic_name, Tags=[{"Key": "team", "Value": "a"}])["TopicArn"]
    sns.tag_resource(ResourceArn=arn, Tags=[{"Key": "env", "Value": "test"}])
    assert sns.list_tags_for_resource(ResourceArn=arn)["Tags"] == [
        {"Key": "env", "Value": "test"}, {"Key": "team", "Value": "a"}]
    sns.untag_resource(ResourceArn=arn, TagKeys=["team"])
    assert sns.list_tags_for_resource(ResourceArn=arn)["Tags"] == [{"Key": "env", "Value": "test"}]
    assert error_of(sns.tag_resource, ResourceArn=arn, Tags=[{"Key": "k", "Value": "1"}, {"Key": "k", "Value": "2"}]
                    )[:2] == ("InvalidParameter", "Invalid parameter: Duplicated keys are not allowed.")
    assert error_of(sns.create_topic, Name=topic_name, Tags=[{"Key": "other", "Value": "x"}])[:2] == (
        "InvalidParameter", "Invalid parameter: Tags Reason: Topic already exists with different tags")
    assert error_of(sns.list_tags_for_resource, ResourceArn=arn + "-missing")[0] == "ResourceNotFound"


def test_add_permission_appends_aws_statement_and_remove_permission_takes_it(sns: Any, topic_name: str) -> None:
    arn = sns.create_topic(Name=topic_name)["TopicArn"]
    sns.add_permission(TopicArn=arn, Label="publishers", AWSAccountId=["111122223333"], ActionName=["Publish"])
    statements = json.loads(sns.get_topic_attributes(TopicArn=arn)["Attributes"]["Policy"])["Statement"]
    assert statements[-1] == {"Sid": "publishers", "Effect": "Allow",
                              "Principal": {"AWS": "arn:aws:iam::111122223333:root"}, "Action": "SNS:Publish",
                              "Resource": arn}
    assert error_of(sns.add_permission, TopicArn=arn, Label="publishers", AWSAccountId=["111122223333"],
                    ActionName=["Publish"])[:2] == ("InvalidParameter", "Invalid parameter: Statement already exists")
    assert error_of(sns.add_permission, TopicArn=arn, Label="other", AWSAccountId=["111122223333"],
                    ActionName=["SendMessage"])[:2] == (
        "InvalidParameter", "Invalid parameter: Policy statement action out of service scope!")
    sns.remove_permission(TopicArn=arn, Label="publishers")
    statements = json.loads(sns.get_topic_attributes(TopicArn=arn)["Attributes"]["Policy"])["Statement"]
    assert [s["Sid"] for s in statements] == ["__default_statement_ID"]
    assert error_of(sns.remove_permission, TopicArn=arn + "-missing", Label="x")[0] == "NotFound"


def test_an_sqs_action_is_still_answered_by_sqs_and_an_sns_one_unknown_to_sns_is_invalid(sns: Any, sqs: Any) -> None:
    assert sqs.list_queues()["ResponseMetadata"]["HTTPStatusCode"] == 200  # SQS is unchanged by the SNS door
    assert error_of(sns.create_platform_application, Name="app", Platform="GCM", Attributes={})[:1] == (
        "InvalidAction",)
