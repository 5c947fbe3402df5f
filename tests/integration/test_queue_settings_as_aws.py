"""Queue attributes, tags and permissions as AWS answers them: FIFO settings on a standard queue,
the KMS data-key period going with the key, ListQueueTags without tags, AddPermission's document."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError
from support.sqs import raises_modeled
from support.wire import raw_json_call


@pytest.mark.parametrize("name, value", [("DeduplicationScope", "messageGroup"),
                                         ("FifoThroughputLimit", "perMessageGroupId")])
def test_a_fifo_throughput_setting_on_a_standard_queue_is_refused_as_a_fifo_rule(sqs, queue_name, name, value):
    with raises_modeled(sqs, "InvalidAttributeName") as info:
        sqs.create_queue(QueueName=queue_name, Attributes={name: value})
    assert info.value.response["Error"]["Message"] == f"You can specify the {name} only when FifoQueue is set to true."
    assert not sqs.list_queues(QueueNamePrefix=queue_name).get("QueueUrls")


def test_content_based_deduplication_on_a_standard_queue_is_an_unknown_attribute(sqs, queue_name):
    with raises_modeled(sqs, "InvalidAttributeName") as info:
        sqs.create_queue(QueueName=queue_name, Attributes={"ContentBasedDeduplication": "true"})
    assert info.value.response["Error"]["Message"] == "Unknown Attribute ContentBasedDeduplication."


def _all(sqs, url):
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]


def test_the_kms_data_key_period_goes_away_with_an_emptied_kms_key(sqs, make_queue):
    url = make_queue({"KmsMasterKeyId": "alias/aws/sqs", "KmsDataKeyReusePeriodSeconds": "600"})
    assert _all(sqs, url)["KmsDataKeyReusePeriodSeconds"] == "600"
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"KmsMasterKeyId": ""})
    attributes = _all(sqs, url)
    assert "KmsMasterKeyId" not in attributes
    assert "KmsDataKeyReusePeriodSeconds" not in attributes


def test_a_kms_key_comes_with_the_default_data_key_period(sqs, make_queue):
    url = make_queue({"KmsMasterKeyId": "alias/aws/sqs"})
    assert _all(sqs, url)["KmsDataKeyReusePeriodSeconds"] == "300"


def test_list_queue_tags_of_a_queue_without_tags_has_no_tags_member(sqs, server, queue_url):
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=queue_url)
    raw = raw_json_call(server.endpoint, "ListQueueTags", {"QueueUrl": queue_url})
    assert raw.status == 200 and "Tags" not in raw.json()


def test_add_permission_writes_aws_policy_document(sqs, queue_url):
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sqs.add_permission(QueueUrl=queue_url, Label="send-only", AWSAccountIds=["111122223333"],
                       Actions=["SendMessage"])
    sqs.add_permission(QueueUrl=queue_url, Label="two", AWSAccountIds=["111122223333", "444455556666"],
                       Actions=["ReceiveMessage", "DeleteMessage"])
    policy = json.loads(_all(sqs, queue_url)["Policy"])
    assert policy == {
        "Version": "2008-10-17",
        "Id": f"{arn}/SQSDefaultPolicy",
        "Statement": [
            {"Sid": "send-only", "Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::111122223333:root"},
             "Action": "SQS:SendMessage", "Resource": arn},
            {"Sid": "two", "Effect": "Allow",
             "Principal": {"AWS": ["arn:aws:iam::111122223333:root", "arn:aws:iam::444455556666:root"]},
             "Action": ["SQS:ReceiveMessage", "SQS:DeleteMessage"], "Resource": arn},
        ],
    }


def test_remove_permission_of_an_unknown_label_names_the_label(sqs, queue_url):
    sqs.add_permission(QueueUrl=queue_url, Label="known", AWSAccountIds=["111122223333"], Actions=["SendMessage"])
    before = _all(sqs, queue_url)["Policy"]
    with pytest.raises(ClientError) as info:
        sqs.remove_permission(QueueUrl=queue_url, Label="unknown-label")
    assert info.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert info.value.response["Error"]["Message"] == (
        "Value unknown-label for parameter Label is invalid. Reason: can't find label.")
    assert _all(sqs, queue_url)["Policy"] == before
