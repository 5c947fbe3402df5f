"""GetQueueAttributes and SetQueueAttributes."""

from __future__ import annotations

import json

import pytest
from support.sqs import BAD_ATTRIBUTE_VALUE, VALUES_AT_THE_EDGES, Counts, counts, raises_code, raises_modeled, receive

ACCOUNT = "000000000000"

DEFAULTS = {
    "VisibilityTimeout": "30",
    "MaximumMessageSize": "1048576",
    "MessageRetentionPeriod": "345600",
    "DelaySeconds": "0",
    "ReceiveMessageWaitTimeSeconds": "0",
    "ApproximateNumberOfMessages": "0",
    "ApproximateNumberOfMessagesNotVisible": "0",
    "ApproximateNumberOfMessagesDelayed": "0",
}
STANDARD_QUEUE_ATTRIBUTES = set(DEFAULTS) | {
    "QueueArn", "CreatedTimestamp", "LastModifiedTimestamp", "SqsManagedSseEnabled",
}


def _get(sqs, url, *names):
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=list(names)).get("Attributes", {})


def test_all_returns_every_standard_queue_attribute_with_its_default(sqs, queue_url):
    queue_name = queue_url.rsplit("/", 1)[1]
    attrs = _get(sqs, queue_url, "All")
    assert STANDARD_QUEUE_ATTRIBUTES <= set(attrs), STANDARD_QUEUE_ATTRIBUTES - set(attrs)
    for key, value in DEFAULTS.items():
        assert attrs[key] == value, key
    assert attrs["QueueArn"] == f"arn:aws:sqs:us-east-1:{ACCOUNT}:{queue_name}"
    assert all(isinstance(v, str) for v in attrs.values()), "attribute values are strings"
    assert "Policy" not in attrs and "RedrivePolicy" not in attrs


def test_a_new_queue_has_sqs_managed_encryption_on(sqs, queue_url):
    assert _get(sqs, queue_url, "SqsManagedSseEnabled") == {"SqsManagedSseEnabled": "true"}


@pytest.mark.parametrize("name", sorted(STANDARD_QUEUE_ATTRIBUTES))
def test_asking_for_one_attribute_returns_just_that_attribute(sqs, queue_url, name):
    attrs = _get(sqs, queue_url, name)
    assert set(attrs) == {name}
    if name in DEFAULTS:
        assert attrs[name] == DEFAULTS[name]


def test_asking_for_several_attributes_returns_just_those(sqs, queue_url):
    attrs = _get(sqs, queue_url, "VisibilityTimeout", "QueueArn", "DelaySeconds")
    assert set(attrs) == {"VisibilityTimeout", "QueueArn", "DelaySeconds"}


def test_asking_for_no_attribute_names_returns_no_attributes(sqs, queue_url):
    resp = sqs.get_queue_attributes(QueueUrl=queue_url)
    assert resp.get("Attributes", {}) == {}


def test_asking_for_an_empty_list_of_names_returns_no_attributes(sqs, queue_url):
    resp = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=[])
    assert resp.get("Attributes", {}) == {}


def test_asking_for_the_policy_of_a_queue_without_one_returns_nothing(sqs, queue_url):
    assert _get(sqs, queue_url, "Policy") == {}


@pytest.mark.parametrize("name", ["NoSuchAttribute", "visibilitytimeout", "SentTimestamp"])
def test_asking_for_an_unknown_attribute_fails_with_invalid_attribute_name(sqs, queue_url, name):
    with raises_modeled(sqs, "InvalidAttributeName"):
        sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=[name])


def test_created_and_last_modified_timestamps_are_epoch_seconds_from_the_server_clock(
        sqs, clock, queue_name):
    before_s = clock.now_ms() // 1000
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    after_s = clock.now_ms() // 1000
    attrs = _get(sqs, url, "CreatedTimestamp", "LastModifiedTimestamp")
    for key in ("CreatedTimestamp", "LastModifiedTimestamp"):
        assert attrs[key].isdigit(), f"{key}={attrs[key]!r} is not a whole number of seconds"
        assert int(attrs[key]) == before_s == after_s, (key, before_s, attrs[key], after_s)


def test_set_queue_attributes_moves_last_modified_but_not_created(sqs, clock, queue_url):
    before = _get(sqs, queue_url, "CreatedTimestamp", "LastModifiedTimestamp")
    clock.advance(5)
    set_at_s = clock.now_ms() // 1000  # the manual clock stands still until it is moved
    sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"VisibilityTimeout": "31"})
    after = _get(sqs, queue_url, "CreatedTimestamp", "LastModifiedTimestamp")
    assert after["CreatedTimestamp"] == before["CreatedTimestamp"]
    assert int(after["LastModifiedTimestamp"]) == set_at_s


def test_the_approximate_counters_track_visible_in_flight_and_delayed_messages(sqs, queue_url):
    for body in ("a", "b", "c"):
        sqs.send_message(QueueUrl=queue_url, MessageBody=body)
    sqs.send_message(QueueUrl=queue_url, MessageBody="later", DelaySeconds=120)
    assert counts(sqs, queue_url) == Counts(3, 0, 1)
    (msg,) = receive(sqs, queue_url, VisibilityTimeout=300)
    assert counts(sqs, queue_url) == Counts(2, 1, 1)
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=msg["ReceiptHandle"])
    assert counts(sqs, queue_url) == Counts(2, 0, 1)


@pytest.mark.parametrize("name,value", [*VALUES_AT_THE_EDGES, ("SqsManagedSseEnabled", "false")])
def test_set_queue_attributes_changes_a_writable_attribute(sqs, queue_url, name, value):
    sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={name: value})
    assert _get(sqs, queue_url, name) == {name: value}


def test_set_queue_attributes_changes_several_attributes_at_once(sqs, queue_url):
    sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={
        "VisibilityTimeout": "77", "DelaySeconds": "5", "MessageRetentionPeriod": "7200"})
    assert _get(sqs, queue_url, "VisibilityTimeout", "DelaySeconds", "MessageRetentionPeriod") == {
        "VisibilityTimeout": "77", "DelaySeconds": "5", "MessageRetentionPeriod": "7200"}


@pytest.mark.parametrize("name,value", [
    ("VisibilityTimeout", "43201"),
    ("VisibilityTimeout", "-1"),
    ("VisibilityTimeout", "1.5"),
    ("VisibilityTimeout", ""),
    ("DelaySeconds", "901"),
    ("MaximumMessageSize", "1023"),
    ("MaximumMessageSize", "1048577"),
    ("MessageRetentionPeriod", "59"),
    ("MessageRetentionPeriod", "1209601"),
    ("ReceiveMessageWaitTimeSeconds", "21"),
    ("Policy", "{not json"),
])
def test_set_queue_attributes_rejects_a_bad_value_and_changes_nothing(sqs, queue_url, name, value):
    before = _get(sqs, queue_url, "All")
    with raises_code(*BAD_ATTRIBUTE_VALUE):
        sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={name: value})
    after = _get(sqs, queue_url, "All")
    assert after == before


def test_a_batch_of_attributes_with_one_bad_value_applies_none_of_them(sqs, queue_url):
    with raises_code(*BAD_ATTRIBUTE_VALUE):
        sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={
            "VisibilityTimeout": "60", "DelaySeconds": "901"})
    assert _get(sqs, queue_url, "VisibilityTimeout", "DelaySeconds") == {
        "VisibilityTimeout": "30", "DelaySeconds": "0"}


def test_set_queue_attributes_with_an_unknown_name_fails_with_invalid_attribute_name(
        sqs, queue_url):
    with raises_modeled(sqs, "InvalidAttributeName"):
        sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"NoSuchAttribute": "1"})


@pytest.mark.parametrize("name,value", [
    ("QueueArn", "arn:aws:sqs:us-east-1:000000000000:other"),
    ("ApproximateNumberOfMessages", "5"),
    ("CreatedTimestamp", "1"),
])
def test_set_queue_attributes_refuses_read_only_attributes(sqs, queue_url, name, value):
    before = _get(sqs, queue_url, name)
    with raises_code("InvalidAttributeName", *BAD_ATTRIBUTE_VALUE):
        sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={name: value})
    assert _get(sqs, queue_url, name) == before


def test_a_policy_set_as_json_reads_back_as_the_same_policy(sqs, queue_url):
    arn = f"arn:aws:sqs:us-east-1:{ACCOUNT}:{queue_url.rsplit('/', 1)[1]}"
    policy = {
        "Version": "2012-10-17",
        "Statement": [{"Sid": "s1", "Effect": "Allow", "Principal": {"AWS": "*"},
                       "Action": "SQS:SendMessage", "Resource": arn}],
    }
    sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"Policy": json.dumps(policy)})
    got = json.loads(_get(sqs, queue_url, "Policy")["Policy"])
    assert got == policy


def test_a_lower_visibility_timeout_applies_to_the_next_receive(sqs, queue_url, clock):
    sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"VisibilityTimeout": "5"})
    sqs.send_message(QueueUrl=queue_url, MessageBody="x")
    assert len(receive(sqs, queue_url)) == 1
    clock.advance(6)
    assert len(receive(sqs, queue_url)) == 1
