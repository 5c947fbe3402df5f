"""Queue policies as a real server evaluates them: each condition operator family, Service principals, and a
policy the evaluator cannot read, over both protocols.

Each operator case grants another account (Bob's) SendMessage under a condition that holds for his
request, and under one that does not: the first send is accepted, the second refused with AccessDenied.
A policy with a `Service` principal or a set operator is evaluated whole, so the Deny beside them holds
for the owner too; one using what the evaluator does not implement is refused when set, with AWS's
InvalidAttributeValue, and changes nothing. A stored policy the server cannot read (written by an older
version) is in test_auth_unreadable_policy.py.
"""

from __future__ import annotations

import base64
import itertools
import json
from typing import Any

import pytest
from botocore.exceptions import ClientError
from support.auth import OTHER_ACCOUNT, signed_client
from support.server import Server

BOB_ARN = f"arn:aws:iam::{OTHER_ACCOUNT}:user/bob"
_numbers = itertools.count()

# operator family -> (a condition Bob's request meets, one it does not)
CONDITIONS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "StringEquals": ({"StringEquals": {"aws:PrincipalAccount": OTHER_ACCOUNT}},
                     {"StringEquals": {"aws:PrincipalAccount": "333333333333"}}),
    "StringNotLike": ({"StringNotLike": {"aws:PrincipalArn": "*:user/z*"}},
                      {"StringNotLike": {"aws:PrincipalArn": "*:user/b*"}}),
    "StringEqualsIgnoreCase": ({"StringEqualsIgnoreCase": {"aws:Username": "BOB"}},
                               {"StringEqualsIgnoreCase": {"aws:Username": "EVE"}}),
    "Numeric": ({"NumericGreaterThan": {"aws:EpochTime": "0"}}, {"NumericLessThan": {"aws:EpochTime": "0"}}),
    "Date": ({"DateGreaterThan": {"aws:CurrentTime": "2000-01-01T00:00:00Z"}},
             {"DateLessThan": {"aws:CurrentTime": "2000-01-01T00:00:00Z"}}),
    "Bool": ({"Bool": {"aws:SecureTransport": "false"}}, {"Bool": {"aws:SecureTransport": "true"}}),
    "BinaryEquals": ({"BinaryEquals": {"aws:Username": base64.b64encode(b"bob").decode()}},
                     {"BinaryEquals": {"aws:Username": base64.b64encode(b"eve").decode()}}),
    "IpAddress": ({"IpAddress": {"aws:SourceIp": "127.0.0.0/8"}}, {"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}),
    "NotIpAddress": ({"NotIpAddress": {"aws:SourceIp": "10.0.0.0/8"}},
                     {"NotIpAddress": {"aws:SourceIp": "127.0.0.0/8"}}),
    "Arn": ({"ArnLike": {"aws:PrincipalArn": f"arn:aws:iam::{OTHER_ACCOUNT}:user/*"}},
            {"ArnEquals": {"aws:PrincipalArn": "arn:aws:iam::333333333333:user/bob"}}),
    "Null": ({"Null": {"aws:SourceArn": "true"}}, {"Null": {"aws:SourceArn": "false"}}),
    "IfExists": ({"StringEqualsIfExists": {"aws:SourceAccount": "333333333333"}},
                 {"StringEquals": {"aws:SourceAccount": "333333333333"}}),
    "ForAnyValue": ({"ForAnyValue:StringLike": {"aws:PrincipalAccount": ["1*", "2*"]}},
                    {"ForAnyValue:StringLike": {"aws:PrincipalAccount": ["3*"]}}),
    "ForAllValues": ({"ForAllValues:StringEquals": {"aws:PrincipalAccount": [OTHER_ACCOUNT]}},
                     {"ForAllValues:StringEquals": {"aws:PrincipalAccount": ["333333333333"]}}),
    "RequestedRegion": ({"StringEquals": {"aws:RequestedRegion": "us-east-1"}},
                        {"StringEquals": {"aws:RequestedRegion": "eu-west-1"}}),
}


def _queue(alice: Any, *statements: dict[str, Any]) -> str:
    url = str(alice.create_queue(QueueName=f"op-{next(_numbers)}")["QueueUrl"])
    if statements:
        alice.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(
            {"Version": "2012-10-17", "Statement": list(statements)})})
    return url


def _bob_may_send(condition: dict[str, Any]) -> dict[str, Any]:
    return {"Effect": "Allow", "Principal": {"AWS": OTHER_ACCOUNT}, "Action": "sqs:SendMessage",
            "Resource": "*", "Condition": condition}


def _error(call: Any) -> tuple[str, int, str]:
    with pytest.raises(ClientError) as caught:
        call()
    error = caught.value.response
    return error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"], error["Error"]["Message"]


@pytest.mark.parametrize("family", sorted(CONDITIONS))
def test_each_condition_operator_family_grants_when_it_holds_and_only_then(alice: Any, bob: Any, family: str) -> None:
    holds, fails = CONDITIONS[family]
    granted = _queue(alice, _bob_may_send(holds))
    bob.send_message(QueueUrl=granted, MessageBody="allowed")
    refused = _queue(alice, _bob_may_send(fails))
    assert _error(lambda: bob.send_message(QueueUrl=refused, MessageBody="refused"))[:2] == ("AccessDenied", 403)
    assert alice.receive_message(QueueUrl=refused, WaitTimeSeconds=0).get("Messages") is None


@pytest.fixture
def bob(auth_server: Server, protocol: str) -> Any:
    return signed_client(protocol, auth_server.endpoint, "AKIDBOB")


def test_a_service_principal_matches_no_key_and_the_deny_beside_it_refuses_everyone(alice: Any, bob: Any) -> None:
    url = _queue(alice, {"Sid": "topic", "Effect": "Allow", "Principal": {"Service": "sns.amazonaws.com"},
                         "Action": "sqs:SendMessage", "Resource": "*"},
                 {"Sid": "no-reading", "Effect": "Deny", "Principal": "*", "Action": "sqs:ReceiveMessage",
                  "Resource": "*"})
    alice.send_message(QueueUrl=url, MessageBody="the owner still sends")
    assert _error(lambda: alice.receive_message(QueueUrl=url))[:2] == ("AccessDenied", 403)
    assert _error(lambda: bob.send_message(QueueUrl=url, MessageBody="x"))[:2] == ("AccessDenied", 403)
    assert _error(lambda: bob.receive_message(QueueUrl=url))[:2] == ("AccessDenied", 403)


def test_a_deny_beside_a_set_operator_holds_for_the_owner_and_another_account(alice: Any, bob: Any) -> None:
    url = _queue(alice, {"Effect": "Deny", "Principal": "*", "Action": "sqs:ReceiveMessage", "Resource": "*"},
                 {"Effect": "Allow", "Principal": {"AWS": OTHER_ACCOUNT}, "Action": "sqs:*", "Resource": "*",
                  "Condition": {"ForAnyValue:StringLike": {"aws:PrincipalArn": ["*:user/b*"]}}})
    bob.send_message(QueueUrl=url, MessageBody="granted by the set operator")
    assert _error(lambda: alice.receive_message(QueueUrl=url))[:2] == ("AccessDenied", 403)
    assert _error(lambda: bob.receive_message(QueueUrl=url))[:2] == ("AccessDenied", 403)


UNREADABLE = {
    "federated principal": {"Effect": "Allow", "Principal": {"Federated": "cognito-identity.amazonaws.com"},
                            "Action": "sqs:SendMessage", "Resource": "*"},
    "unknown operator": {"Effect": "Allow", "Principal": "*", "Action": "sqs:SendMessage", "Resource": "*",
                         "Condition": {"StringFuzzy": {"aws:Username": "bob"}}},
    "unknown set operator": {"Effect": "Allow", "Principal": "*", "Action": "sqs:SendMessage", "Resource": "*",
                             "Condition": {"ForSomeValues:StringLike": {"aws:Username": "b*"}}},
    "policy variable": {"Effect": "Allow", "Principal": "*", "Action": "sqs:SendMessage",
                        "Resource": "arn:aws:sqs:*:*:${aws:username}"},
}


@pytest.mark.parametrize("kind", sorted(UNREADABLE))
def test_a_policy_the_evaluator_cannot_read_is_refused_when_set_and_changes_nothing(
        alice: Any, bob: Any, kind: str) -> None:
    deny = {"Effect": "Deny", "Principal": "*", "Action": "sqs:ReceiveMessage", "Resource": "*"}
    url = _queue(alice, deny)
    document = json.dumps({"Version": "2012-10-17", "Statement": [UNREADABLE[kind]]})
    code, status, message = _error(lambda: alice.set_queue_attributes(QueueUrl=url, Attributes={"Policy": document}))
    assert (code, status, message) == ("InvalidAttributeValue", 400, "Invalid value for the parameter Policy.")
    stored = alice.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"]
    assert json.loads(stored)["Statement"] == [deny]
    assert _error(lambda: alice.receive_message(QueueUrl=url))[:2] == ("AccessDenied", 403)
    name = f"op-refused-{next(_numbers)}"
    code, status, _ = _error(lambda: alice.create_queue(QueueName=name, Attributes={"Policy": document}))
    assert (code, status) == ("InvalidAttributeValue", 400)
    assert _error(lambda: alice.get_queue_url(QueueName=name))[0] in ("AWS.SimpleQueueService.NonExistentQueue",
                                                                        "QueueDoesNotExist")
