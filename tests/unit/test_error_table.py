"""The error table against botocore's SQS models: the current JSON one (which shapes exist) and
the last Query one in tests/query/data (each shape's legacy code and HTTP status)."""

from __future__ import annotations

import json
from pathlib import Path

import botocore.session

from queueserver import errors
from queueserver.protocol.error_codes import COMMON_NAMESPACE, ERROR_CODES, SQS_NAMESPACE, WireError

QUERY_MODEL = Path(__file__).resolve().parent.parent / "query" / "data" / "sqs" / "2012-11-05" / "service-2.json"
# Statuses AWS was recorded answering otherwise than the old Query model says (404, not 400).
KNOWN_STATUS_DIFFERENCES = {"ResourceNotFoundException"}


SQS_ROWS = {cls: row for cls, row in ERROR_CODES.items() if not issubclass(cls, errors.SNSError)}
# The model's ValidationException code; AWS answers a missing member as ValidationError (SNS.md, section 4.3).
RECORDED_SNS_CODES = {"ValidationException": "ValidationError"}
SNS_ROWS = {cls: row for cls, row in ERROR_CODES.items() if issubclass(cls, errors.SNSError)}


def _json_model_exceptions() -> set[str]:
    model = botocore.session.get_session().get_service_model("sqs")
    assert model.protocol == "json"
    return {shape.name for shape in model.error_shapes}


def test_a_row_is_modeled_exactly_when_botocore_json_model_has_its_shape() -> None:
    exceptions = _json_model_exceptions()
    wrong = {cls.__name__: row.json_type for cls, row in SQS_ROWS.items()
             if row.modeled != (row.shape in exceptions)
             and not (row.modeled and not row.sender_fault)}  # server faults are not modeled by SQS
    assert wrong == {}


def test_modeled_rows_are_in_the_sqs_namespace_and_the_others_in_the_common_one() -> None:
    for row in SQS_ROWS.values():
        namespace = row.json_type.partition("#")[0]
        assert namespace == (SQS_NAMESPACE if row.modeled else COMMON_NAMESPACE), row


def test_each_modeled_row_carries_the_legacy_code_of_the_query_model() -> None:
    shapes = json.loads(QUERY_MODEL.read_text())["shapes"]
    for row in SQS_ROWS.values():
        old = shapes.get(row.shape, {}).get("error")
        if not row.modeled or old is None:
            continue  # the Query model gives no code: the shape name is the code
        assert row.query_code == old["code"], row
        if row.shape not in KNOWN_STATUS_DIFFERENCES:
            assert row.status == old["httpStatusCode"], row


def test_the_un_modeled_query_errors_answer_as_their_exception_names() -> None:
    by_code = {row.query_code: row.json_type for row in SQS_ROWS.values() if not row.modeled}
    assert by_code["InvalidParameterValue"] == "com.amazon.coral.service#InvalidParameterValueException"
    assert by_code["MissingParameter"] == "com.amazon.coral.service#MissingRequiredParameterException"


def test_each_sns_row_is_a_shape_of_botocore_sns_model_with_its_code_and_status() -> None:
    shapes = botocore.session.get_session().get_service_model("sns").shape_for
    wrong: dict[str, WireError] = {}
    for cls, row in SNS_ROWS.items():
        if row.shape in RECORDED_SNS_CODES:  # AWS was recorded answering another code than the model's
            assert row.query_code == RECORDED_SNS_CODES[row.shape]
            continue
        error = shapes(row.shape).metadata.get("error", {})
        if (error.get("code"), error.get("httpStatusCode")) != (row.query_code, row.status):
            wrong[cls.__name__] = row
    assert wrong == {}
