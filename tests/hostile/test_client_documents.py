"""Documents and tokens a client sends inside a request (queue policies, task handles, paging tokens,
presigned expiries, the test clock's body) that used to be 500s with a traceback: each is a 400 with
SQS's code, over both wire protocols, and changes nothing."""

from __future__ import annotations

import base64
import json
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from support.auth import write_credentials
from support.sqs import arn_of, queue_attribute, raises_code, unique_queue_name
from support.subscriptions import extension_call
from support.wire import send

DEEP = "[" * 3000 + "]" * 3000
POLICY = {"Version": "2012-10-17", "Statement": [{"Sid": "mine", "Effect": "Allow", "Principal": {"AWS": "*"},
                                                  "Action": "SQS:SendMessage", "Resource": "*"}]}


@pytest.mark.parametrize("attribute", ["Policy", "RedrivePolicy", "RedriveAllowPolicy"])
@pytest.mark.parametrize("document", [DEEP, '{"a":' * 3000 + "1" + "}" * 3000, '{"a":' * 33 + "1" + "}" * 33],
                         ids=["3000-deep-list", "3000-deep-object", "33-deep"])
def test_a_policy_document_nested_too_deep_is_an_invalid_attribute_value_in_both_actions(
        sqs: Any, queue_url: str, attribute: str, document: str, no_new_traceback: None) -> None:
    with raises_code("InvalidAttributeValue"):
        sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={attribute: document})
    assert queue_attribute(sqs, queue_url, attribute) is None
    name = unique_queue_name("deep")
    with raises_code("InvalidAttributeValue"):
        sqs.create_queue(QueueName=name, Attributes={attribute: document})
    assert not [url for url in sqs.list_queues(QueueNamePrefix=name).get("QueueUrls", [])]


@pytest.mark.parametrize("policy", ['{"Statement":"x"}', '{"Statement":[1]}', '{"Statement":{"Sid":[]}, "x":NaN}'])
def test_a_policy_whose_statements_are_not_objects_is_refused(sqs: Any, queue_url: str, policy: str,
                                                              no_new_traceback: None) -> None:
    with raises_code("InvalidAttributeValue"):
        sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"Policy": policy})
    assert queue_attribute(sqs, queue_url, "Policy") is None


@pytest.mark.parametrize("count", ["²", "١", "1_0", str(2**64)])
def test_a_max_receive_count_that_is_not_ascii_digits_is_an_invalid_attribute_value(
        sqs: Any, queue_url: str, make_queue: Any, count: str, no_new_traceback: None) -> None:
    dead_letter = make_queue()
    with raises_code("InvalidAttributeValue"):
        sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"RedrivePolicy": json.dumps(
            {"deadLetterTargetArn": arn_of(sqs, dead_letter), "maxReceiveCount": count})})
    assert queue_attribute(sqs, queue_url, "RedrivePolicy") is None


@pytest.mark.parametrize("decoded", [DEEP.encode(), b'{"taskId":' * 3000, b'{"taskId":NaN,"sourceArn":"x"}',
                                     b"\xff\xfe"], ids=["deep-list", "deep-object", "nan", "not-utf8"])
def test_a_task_handle_that_decodes_to_no_usable_json_is_an_invalid_parameter_value(
        sqs: Any, decoded: bytes, no_new_traceback: None) -> None:
    with raises_code("InvalidParameterValue"):
        sqs.cancel_message_move_task(TaskHandle=base64.b64encode(decoded).decode())


@pytest.mark.parametrize("token", [str(2**63), "9" * 40, "²", "١٢", "-1"])
def test_a_browse_token_that_is_no_row_position_is_an_invalid_parameter_value(
        sqs: Any, queue_url: str, token: str, no_new_traceback: None) -> None:
    sqs.send_message(QueueUrl=queue_url, MessageBody="kept")
    status, answer = extension_call(sqs, "QueueserverBrowseMessages", QueueUrl=queue_url, NextToken=token)
    assert (status, answer["code"]) == (400, "InvalidParameterValue")
    status, answer = extension_call(sqs, "QueueserverBrowseMessages", QueueUrl=queue_url,
                                    NextToken=str(2**63 - 1))
    assert status == 200 and not answer.get("Messages")  # the largest position: past every message


def test_permissions_on_a_policy_stored_without_a_statement_list_are_refused_until_it_is_replaced(
        tmp_path: Path, server_factory: Any, make_client: Any) -> None:
    db = tmp_path / "queueserver.db"
    server = server_factory(db)
    url = make_client(server.endpoint).create_queue(QueueName="legacy")["QueueUrl"]
    server.stop()
    with sqlite3.connect(db) as conn:  # as a server that did not check the statements could have stored it
        conn.execute("UPDATE queues SET attributes = json_set(attributes, '$.Policy', ?)", ('{"Statement":"x"}',))
    conn.close()
    server = server_factory(db)
    sqs = make_client(server.endpoint)
    url = server.endpoint + "/" + url.split("/", 3)[3]
    with raises_code("InvalidAttributeValue"):
        sqs.add_permission(QueueUrl=url, Label="one", AWSAccountIds=["111122223333"], Actions=["SendMessage"])
    with raises_code("InvalidAttributeValue"):
        sqs.remove_permission(QueueUrl=url, Label="one")
    assert queue_attribute(sqs, url, "Policy") == '{"Statement":"x"}'
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(POLICY)})
    sqs.add_permission(QueueUrl=url, Label="one", AWSAccountIds=["111122223333"], Actions=["SendMessage"])
    assert [s["Sid"] for s in json.loads(queue_attribute(sqs, url, "Policy") or "{}")["Statement"]] == ["mine", "one"]
    assert "Traceback" not in server.stderr_text()


@pytest.mark.parametrize("body", [b'{"advance_seconds": NaN}', b'{"advance_seconds": Infinity}',
                                  b'{"advance_seconds": 1e308}', b'{"advance_seconds": "nan"}',
                                  b'{"advance_seconds": ' + b'[' * 450 + b']' * 450 + b'}', b'[]'])  # < 1 KiB
def test_a_clock_advance_that_is_no_finite_number_is_a_400_and_the_clock_stays(
        server: Any, clock: Any, body: bytes, no_new_traceback: None) -> None:
    before = clock.now_ms()
    response = send(server.endpoint + "/_queueserver/clock", "POST", body, {"Content-Type": "application/json"})
    assert response.status == 400, response.body
    assert clock.now_ms() == before


@pytest.mark.parametrize("expires", ["²", "١", str(2**64), "0"])
def test_a_presigned_expiry_that_is_not_ascii_digits_is_an_incomplete_signature(
        tmp_path: Path, server_factory: Any, expires: str) -> None:
    server = server_factory(tmp_path / "q.db", "--credentials", str(write_credentials(tmp_path / "keys.toml")))
    query = urlencode({"Action": "ListQueues", "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
                       "X-Amz-Credential": "AKIDALICE/20240101/us-east-1/sqs/aws4_request",
                       "X-Amz-Date": "20240101T000000Z", "X-Amz-SignedHeaders": "host", "X-Amz-Signature": "00",
                       "X-Amz-Expires": expires})
    response = send(f"{server.endpoint}/?{query}", "GET", None, {})
    assert response.status == 400 and b"<Code>IncompleteSignature</Code>" in response.body, response.body
    assert "Traceback" not in server.stderr_text()
