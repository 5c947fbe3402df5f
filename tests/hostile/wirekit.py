"""Hand-made requests in either wire protocol, so a test can send what boto3 refuses to
(lone surrogates, control characters, malformed bodies) and read the error code back."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlencode

from sqs_testkit import RawResponse, raw_json_call, raw_request


def call_json(endpoint: str, action: str, payload: dict[str, Any]) -> RawResponse:
    body = json.dumps(payload).encode()  # ensure_ascii: a lone surrogate travels as \ud800
    return raw_json_call(endpoint, action, body)


def call_query(endpoint: str, action: str, fields: dict[str, str], path: str = "/") -> RawResponse:
    encoded = {name: value.encode("utf-8", "surrogatepass") for name, value in fields.items()}
    body = urlencode({"Action": action, "Version": "2012-11-05", **encoded}).encode()
    return raw_request(endpoint, body, content_type="application/x-www-form-urlencoded", path=path)


def error_code(response: RawResponse) -> str:
    """The code botocore reports as Error.Code: over JSON the x-amzn-query-error header's (else the
    `__type` shape), over Query the <Code>."""
    if response.headers.get("content-type", "").startswith("application/x-amz-json"):
        legacy = response.headers.get("x-amzn-query-error", "")
        return legacy.partition(";")[0] or str(response.json()["__type"]).rpartition("#")[2]
    match = re.search(rb"<Code>([^<]*)</Code>", response.body)
    assert match, response.body[:300]
    return match.group(1).decode()
