"""A Query request's answer as JSON, for a client that sent `Accept: application/json`.

AWS renders the Query response document's structure as JSON rather than switching to the JSON
protocol's shapes: `{"<Action>Response": {"<Action>Result": {...}, "ResponseMetadata": {...}}}`.
Lists are named as AWS names them there, in lower camel case (`messages`, `queueUrls`,
`successful`, `failed`); maps and scalars keep the JSON protocol's form.
"""

from __future__ import annotations

from typing import Any

from queueserver import errors
from queueserver.protocol import json_wire, query_wire
from queueserver.protocol.error_codes import WireError

CONTENT_TYPE = "application/json"

# The lists a result always carries, even empty (a receive that found nothing still has `messages`).
_ALWAYS_LISTED = {"ReceiveMessage": "Messages"}


def encode(action: str, result: dict[str, Any], request_id: str) -> bytes:
    document: dict[str, Any] = {}
    if action not in query_wire.NO_RESULT:
        listed = _ALWAYS_LISTED.get(action)
        if listed is not None and listed not in result:
            result = {**result, listed: []}
        document[f"{action}Result"] = {_name(k, v): v for k, v in result.items() if v is not None}
    document["ResponseMetadata"] = {"RequestId": request_id}
    return json_wire.encode({f"{action}Response": document})


def _name(member: str, value: Any) -> str:
    return member[:1].lower() + member[1:] if isinstance(value, list) else member


def encode_error(error: errors.SQSError, wire: WireError, request_id: str) -> tuple[dict[str, str], bytes]:
    body = {"ErrorResponse": {
        "Error": {"Type": wire.fault, "Code": wire.query_code, "Message": query_wire.query_message(error)},
        "RequestId": request_id,
    }}
    return {"x-amzn-query-error": f"{wire.query_code};{wire.fault}"}, json_wire.encode(body)
