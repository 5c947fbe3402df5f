"""Topics with credentials on: SNS requests are signed for `sns` and judged as AWS judges them. The
owner's keys act on its topics; another account only where the topic's Policy allows it (AddPermission);
an identity policy's Deny wins; a delivery needs the queue's Policy to allow the SNS service principal
with aws:SourceArn = the topic, or nothing reaches the queue."""

from __future__ import annotations

import http.client
import json
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from support.auth import OTHER_ACCOUNT, OWNER_ACCOUNT, secret_of, signed_client


def sns_of(server: Any, key_id: str, secret: str | None = None) -> Any:
    return boto3.client("sns", endpoint_url=server.endpoint, region_name="us-east-1", aws_access_key_id=key_id,
                        aws_secret_access_key=secret if secret is not None else secret_of(key_id),
                        config=Config(retries={"total_max_attempts": 1}))


def refused(call: Any, **kwargs: Any) -> tuple[str, int]:
    with pytest.raises(ClientError) as caught:
        call(**kwargs)
    return caught.value.response["Error"]["Code"], caught.value.response["ResponseMetadata"]["HTTPStatusCode"]


def queue_arn(name: str) -> str:
    return f"arn:aws:sqs:us-east-1:{OWNER_ACCOUNT}:{name}"


def tutorial_policy(queue: str, topic: str) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": "sns.amazonaws.com"}, "Action": "sqs:SendMessage",
        "Resource": queue_arn(queue), "Condition": {"ArnEquals": {"aws:SourceArn": topic}}}]})


def test_a_bad_signature_or_unknown_key_is_refused_as_for_sqs(auth_server: Any) -> None:
    assert refused(sns_of(auth_server, "AKIDALICE", "wrong").list_topics) == ("SignatureDoesNotMatch", 403)
    assert refused(sns_of(auth_server, "AKIDNOBODY", "x").list_topics) == ("InvalidClientTokenId", 403)


def test_the_owner_acts_on_its_topic_and_another_account_only_where_the_policy_allows(auth_server: Any) -> None:
    alice, bob = sns_of(auth_server, "AKIDALICE"), sns_of(auth_server, "AKIDBOB")
    topic = alice.create_topic(Name="auth-orders")["TopicArn"]
    assert topic == f"arn:aws:sns:us-east-1:{OWNER_ACCOUNT}:auth-orders"
    alice.publish(TopicArn=topic, Message="mine")
    assert refused(bob.publish, TopicArn=topic, Message="theirs") == ("AuthorizationError", 403)
    assert refused(bob.get_topic_attributes, TopicArn=topic) == ("AuthorizationError", 403)
    alice.add_permission(TopicArn=topic, Label="bob-publishes", AWSAccountId=[OTHER_ACCOUNT], ActionName=["Publish"])
    assert len(bob.publish(TopicArn=topic, Message="theirs")["MessageId"]) == 36
    assert refused(bob.delete_topic, TopicArn=topic) == ("AuthorizationError", 403)
    assert bob.create_topic(Name="auth-orders")["TopicArn"] == f"arn:aws:sns:us-east-1:{OTHER_ACCOUNT}:auth-orders"


def test_an_identity_policy_deny_wins_on_the_owner_account(auth_server: Any) -> None:
    alice = sns_of(auth_server, "AKIDALICE")
    topic = alice.create_topic(Name="auth-denied")["TopicArn"]
    alice.set_topic_attributes(TopicArn=topic, AttributeName="Policy", AttributeValue=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Deny", "Principal": {"AWS": f"arn:aws:iam::{OWNER_ACCOUNT}"
                                                                                        ":user/mallory"},
                                                "Action": "SNS:Publish", "Resource": topic}]}))
    assert refused(sns_of(auth_server, "AKIDMALLORY").publish, TopicArn=topic, Message="m") == (
        "AuthorizationError", 403)
    alice.publish(TopicArn=topic, Message="m")


def test_a_topic_policy_this_server_cannot_read_is_refused_when_set(auth_server: Any) -> None:
    alice = sns_of(auth_server, "AKIDALICE")
    topic = alice.create_topic(Name="auth-unreadable")["TopicArn"]
    assert refused(alice.set_topic_attributes, TopicArn=topic, AttributeName="Policy", AttributeValue=json.dumps({
        "Statement": [{"Effect": "Allow", "Principal": {"Federated": "x"}, "Action": "SNS:Publish",
                       "Resource": topic}]})) == ("InvalidParameter", 400)


def test_a_queue_receives_only_when_its_policy_allows_the_topic(auth_server: Any) -> None:
    alice, sqs = sns_of(auth_server, "AKIDALICE"), signed_client("json", auth_server.endpoint, "AKIDALICE")
    topic = alice.create_topic(Name="auth-fanout")["TopicArn"]
    other = alice.create_topic(Name="auth-fanout-other")["TopicArn"]
    urls = {}
    for name in ("auth-open", "auth-closed", "auth-other-topic"):
        urls[name] = sqs.create_queue(QueueName=name)["QueueUrl"]
        alice.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn(name),
                        Attributes={"RawMessageDelivery": "true"})
    sqs.set_queue_attributes(QueueUrl=urls["auth-open"], Attributes={"Policy": tutorial_policy("auth-open", topic)})
    sqs.set_queue_attributes(QueueUrl=urls["auth-other-topic"],
                             Attributes={"Policy": tutorial_policy("auth-other-topic", other)})
    alice.publish(TopicArn=topic, Message="fan")
    received = {name: [m["Body"] for m in sqs.receive_message(QueueUrl=url).get("Messages", [])]
                for name, url in urls.items()}
    assert received == {"auth-open": ["fan"], "auth-closed": [], "auth-other-topic": []}


def test_a_dead_letter_queue_takes_a_failed_delivery_only_when_its_policy_allows_the_topic(auth_server: Any) -> None:
    alice, sqs = sns_of(auth_server, "AKIDALICE"), signed_client("json", auth_server.endpoint, "AKIDALICE")
    topic = alice.create_topic(Name="auth-redrive")["TopicArn"]
    for allowed in (False, True):
        dlq = sqs.create_queue(QueueName=f"auth-redrive-dlq-{allowed}")["QueueUrl"]
        if allowed:
            sqs.set_queue_attributes(QueueUrl=dlq, Attributes={"Policy": tutorial_policy(
                f"auth-redrive-dlq-{allowed}", topic)})
        sqs.create_queue(QueueName=f"auth-redrive-closed-{allowed}")
        alice.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn(f"auth-redrive-closed-{allowed}"),
                        Attributes={"RawMessageDelivery": "true", "RedrivePolicy": json.dumps(
                            {"deadLetterTargetArn": queue_arn(f"auth-redrive-dlq-{allowed}")})})
    alice.publish(TopicArn=topic, Message="undeliverable")
    for allowed in (False, True):
        url = sqs.get_queue_url(QueueName=f"auth-redrive-dlq-{allowed}")["QueueUrl"]
        bodies = [m["Body"] for m in sqs.receive_message(QueueUrl=url).get("Messages", [])]
        assert bodies == (["undeliverable"] if allowed else [])


def test_the_signing_certificate_is_public_and_an_unsigned_sns_request_is_not(auth_server: Any) -> None:
    host, port = auth_server.endpoint.removeprefix("http://").rsplit(":", 1)
    answers = []
    for path in ("/?Version=2010-03-31&Action=ListTopics", "/SimpleNotificationService-0.pem"):
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        conn.request("GET", path)
        response = conn.getresponse()
        answers.append((response.status, response.read()))
        conn.close()
    assert answers[0][0] == 403 and b"<Code>MissingAuthenticationToken</Code>" in answers[0][1]
    assert answers[1][0] == 404  # answered without a signature: no certificate of that name, not a refusal
