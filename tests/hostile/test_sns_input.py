"""Hostile SNS requests: malformed members, documents nested past the parser's limit, bodies that are
not JSON. Each gets SNS's 4xx error and changes nothing; none reaches a traceback."""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urlencode

import pytest

# Credentials are off on the shared server: the scope names SNS, the signature is not checked.
AUTHORIZATION = "AWS4-HMAC-SHA256 Credential=x/20260101/us-east-1/sns/aws4_request, SignedHeaders=host, Signature=0"
TOPIC = "arn:aws:sns:us-east-1:000000000000:hostile-sns"
QUEUE = "arn:aws:sqs:us-east-1:000000000000:hostile-sns"
DEEP = '{"a":' * 3000 + '["x"]' + "}" * 3000


def sns_call(server: Any, params: dict[str, str]) -> tuple[int, str]:
    host, port = server.endpoint.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("POST", "/", urlencode({**params, "Version": "2010-03-31"}),
                 {"Authorization": AUTHORIZATION, "Content-Type": "application/x-www-form-urlencoded"})
    response = conn.getresponse()
    text = response.read().decode()
    conn.close()
    return response.status, text


def subscribe_with(name: str, value: str) -> dict[str, str]:
    return {"Action": "Subscribe", "TopicArn": TOPIC, "Protocol": "sqs", "Endpoint": QUEUE,
            "Attributes.entry.1.key": "FilterPolicyScope", "Attributes.entry.1.value": "MessageBody",
            "Attributes.entry.2.key": name, "Attributes.entry.2.value": value}


@pytest.mark.parametrize("params, code", [
    (subscribe_with("FilterPolicy", DEEP), "InvalidParameter"),
    (subscribe_with("FilterPolicy", '{"a":' * 70 + '["x"]' + "}" * 70), "InvalidParameter"),
    (subscribe_with("RedrivePolicy", DEEP), "InvalidParameter"),
    ({"Action": "Publish", "TopicArn": TOPIC, "Message": DEEP, "MessageStructure": "json"}, "InvalidParameter"),
    ({"Action": "Publish", "TopicArn": TOPIC, "Message": "m", "MessageAttributes.entry.1.Value.DataType": "String",
      "MessageAttributes.entry.1.Value.StringValue": "no name"}, "InvalidParameter"),
    ({"Action": "Publish", "TopicArn": TOPIC, "Message": "m", "MessageAttributes.entry.99999999999.Name": "a"},
     "InvalidParameter"),
    ({"Action": "CreateTopic", "Name": "x", "Attributes.entry.1.key": "Policy", "Attributes.entry.1.value": DEEP},
     "InvalidParameter"),
    ({"Action": "CreateTopic", "Name": "x", "Tags.member.1.Key": "k", "Tags.member.1.Key.x": "v"},
     "InvalidParameter"),
    ({"Action": "PublishBatch", "TopicArn": TOPIC, "PublishBatchRequestEntries.member.1": "x"}, "InvalidParameter"),
    ({"Action": "CreatePlatformApplication", "Name": "x"}, "InvalidAction"),
])
def test_a_hostile_sns_request_is_refused_with_its_error(server: Any, no_new_traceback: None,
                                                         params: dict[str, str], code: str) -> None:
    assert sns_call(server, {"Action": "CreateTopic", "Name": "hostile-sns"})[0] == 200
    status, text = sns_call(server, params)
    assert 400 <= status < 500 and f"<Code>{code}</Code>" in text, text


def test_a_body_scope_policy_meets_deep_or_broken_bodies_without_harm(server: Any, no_new_traceback: None) -> None:
    sns_call(server, {"Action": "CreateTopic", "Name": "hostile-sns"})
    status, _ = sns_call(server, subscribe_with("FilterPolicy", json.dumps({"a": {"b": ["x"]}})))
    assert status == 200
    for message in (DEEP, "not json", "[1, 2]", '{"a": 5}'):
        assert sns_call(server, {"Action": "Publish", "TopicArn": TOPIC, "Message": message})[0] == 200
