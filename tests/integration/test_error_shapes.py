"""The JSON error shapes AWS answers: modeled SQS errors keep their shape name, the errors SQS
inherited from the Query API come as AWS's common `...Exception` types, and the old code always
rides in `x-amzn-query-error`, which botocore turns into `Error.Code`. A bare GET on a queue URL is
answered in XML whatever the Accept header asks for, as AWS does."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError
from support.wire import raw_json_call, send

# (legacy code in Error.Code and the header, the JSON __type, the status) of the un-modeled errors.
INVALID_PARAMETER_VALUE = ("InvalidParameterValue", "com.amazon.coral.service#InvalidParameterValueException", 400)
MISSING_PARAMETER = ("MissingParameter", "com.amazon.coral.service#MissingRequiredParameterException", 400)


def _is_json(client: Any) -> bool:
    return client.meta.service_model.protocol == "json"


def _assert_error(client: Any, info: pytest.ExceptionInfo[Any], code: str, json_type: str, status: int) -> None:
    response = info.value.response
    assert response["Error"]["Code"] == code, response
    assert response["ResponseMetadata"]["HTTPStatusCode"] == status
    assert response["Error"]["Type"] == "Sender"
    if _is_json(client):  # Query carries the old code only; JSON carries the __type as well
        assert response["Error"]["QueryErrorCode"] == json_type.rpartition("#")[2], response


def test_an_invalid_parameter_value_is_code_invalid_parameter_value_and_query_error_code_the_exception(sqs):
    with pytest.raises(ClientError) as info:
        sqs.create_queue(QueueName="spaces are not allowed")
    _assert_error(sqs, info, *INVALID_PARAMETER_VALUE)


def test_a_missing_parameter_is_code_missing_parameter_and_query_error_code_missing_required_parameter(
        sqs_unvalidated, queue_url):
    with pytest.raises(ClientError) as info:
        sqs_unvalidated.send_message(QueueUrl=queue_url)
    _assert_error(sqs_unvalidated, info, *MISSING_PARAMETER)


def test_a_modeled_error_keeps_its_shape_name_and_its_legacy_code(sqs, server):
    with pytest.raises(sqs.exceptions.QueueDoesNotExist) as info:
        sqs.get_queue_url(QueueName=f"never-{uuid.uuid4().hex[:8]}")
    _assert_error(sqs, info, "AWS.SimpleQueueService.NonExistentQueue", "com.amazonaws.sqs#QueueDoesNotExist", 400)


# -- raw HTTP: the exact __type and header of each kind --------------------------------------------------

def _unknown_queue(server: Any) -> str:
    return f"{server.endpoint}/000000000000/never-{uuid.uuid4().hex[:8]}"


RAW_CASES = {
    "invalid-parameter-value": (lambda s, u: ("CreateQueue", {"QueueName": "no spaces allowed"}),
                                INVALID_PARAMETER_VALUE),
    "missing-parameter": (lambda s, u: ("SendMessage", {"QueueUrl": u}), MISSING_PARAMETER),
    "queue-does-not-exist": (lambda s, u: ("GetQueueAttributes", {"QueueUrl": _unknown_queue(s)}),
                             ("AWS.SimpleQueueService.NonExistentQueue", "com.amazonaws.sqs#QueueDoesNotExist", 400)),
    "receipt-handle-is-invalid": (lambda s, u: ("DeleteMessage", {"QueueUrl": u, "ReceiptHandle": "garbage"}),
                                  ("ReceiptHandleIsInvalid", "com.amazonaws.sqs#ReceiptHandleIsInvalid", 400)),
    "empty-batch": (lambda s, u: ("DeleteMessageBatch", {"QueueUrl": u, "Entries": []}),
                    ("AWS.SimpleQueueService.EmptyBatchRequest", "com.amazonaws.sqs#EmptyBatchRequest", 400)),
    "invalid-attribute-name": (lambda s, u: ("GetQueueAttributes", {"QueueUrl": u, "AttributeNames": ["Nope"]}),
                               ("InvalidAttributeName", "com.amazonaws.sqs#InvalidAttributeName", 400)),
    "unknown-operation": (lambda s, u: ("FlyToTheMoon", {}),
                          ("InvalidAction", "com.amazon.coral.service#UnknownOperationException", 400)),
}


@pytest.mark.parametrize("case", sorted(RAW_CASES))
def test_the_raw_json_error_has_the_exact_type_and_query_error_header(server, queue_url, case):
    request, (code, json_type, status) = RAW_CASES[case]
    action, payload = request(server, queue_url)
    response = raw_json_call(server.endpoint, action, payload)
    assert response.status == status, response.body
    assert response.json()["__type"] == json_type
    assert response.json()["message"]
    assert response.headers["x-amzn-query-error"] == f"{code};Sender"


@pytest.mark.parametrize("accept", [None, "application/json"])
def test_a_bare_get_on_a_queue_url_answers_xml_unknown_operation_whatever_the_accept_header(
        server, queue_name, accept):
    url = raw_json_call(server.endpoint, "CreateQueue", {"QueueName": queue_name}).json()["QueueUrl"]
    response = send(url, "GET", None, {"Accept": accept} if accept else {})
    assert response.status == 404
    assert response.headers["content-type"].startswith("text/xml")
    assert response.body == b"<UnknownOperationException/>"
