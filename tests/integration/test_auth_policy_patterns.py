"""Policy patterns evaluated over the wire: a policy full of wildcards is answered at once.

A backtracking regex of the pattern `*a` fifty times then `*b`, against a name of eighty `a`s,
would not finish within the test run (each `*a` roughly doubles its time), with the server's
event loop stuck in it; there is no timing assert: the request coming back is the test.
"""

from __future__ import annotations

import json
from typing import Any

from support.auth import OTHER_ACCOUNT, OWNER_ACCOUNT, signed_client
from support.server import Server
from support.sqs import arn_of, visible

QUEUE_NAME = "a" * 80  # SQS's longest queue name


def set_policy(client: Any, url: str, *statements: dict[str, Any]) -> None:
    client.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(
        {"Version": "2012-10-17", "Statement": list(statements)})})


def test_fifty_wildcards_in_every_element_that_takes_patterns_are_evaluated_at_once(auth_server: Server, protocol):
    alice = signed_client(protocol, auth_server.endpoint, "AKIDALICE")
    bob = signed_client(protocol, auth_server.endpoint, "AKIDBOB")
    url = alice.create_queue(QueueName=QUEUE_NAME)["QueueUrl"]
    alice.purge_queue(QueueUrl=url)
    arn = arn_of(alice, url)
    prefix = f"arn:aws:sqs:us-east-1:{OWNER_ACCOUNT}:"
    assert len(prefix + "*a" * 50 + "*b") < 160
    never = "*a" * 50 + "*b"  # the name has no `b`: none of these Denies applies, after a full evaluation
    deny = {"Effect": "Deny", "Principal": "*", "Action": "sqs:SendMessage", "Resource": arn}
    set_policy(
        alice, url,
        {**deny, "Resource": prefix + never},
        {**deny, "Action": "sqs:" + "*s" * 50 + "*"},
        {**deny, "Principal": {"AWS": f"arn:aws:iam::{OTHER_ACCOUNT}:user/" + "*b" * 50 + "*"}},
        {**deny, "Condition": {"StringLike": {"aws:PrincipalArn": "*" + never}}},
        {**deny, "Condition": {"ArnLike": {"aws:PrincipalArn": "arn:aws:iam::*:" + never}}},
        {**deny, "Condition": {"StringNotLike": {"aws:PrincipalArn": "*?" * 20 + "*"}}},  # every ARN here
        {"Effect": "Allow", "Principal": {"AWS": OTHER_ACCOUNT}, "Action": "sqs:SendMessage",
         "Resource": prefix + "*a" * 50 + "*"},
    )
    alice.send_message(QueueUrl=url, MessageBody="the owner's")
    bob.send_message(QueueUrl=url, MessageBody="allowed by fifty wildcards that match")
    assert visible(alice, url) == 2
