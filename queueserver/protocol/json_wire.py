"""AWS JSON 1.0: request bodies in, response bodies out."""

from __future__ import annotations

import json
from typing import Any

import orjson

from queueserver import errors
from queueserver.protocol.error_codes import WireError

CONTENT_TYPE = "application/x-amz-json-1.0"


def decode(body: bytes) -> dict[str, Any]:
    if not body.strip():
        return {}
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError):  # also an integer of more than 4,300 digits
        raise errors.SerializationError("The request body is not valid JSON.") from None
    except RecursionError:
        raise errors.SerializationError("The request body is nested too deeply.") from None
    if not isinstance(parsed, dict):
        raise errors.SerializationError("The request body must be a JSON object.")
    return parsed


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
# orjson would write these where the stdlib encoder refuses them; refused, they stay a bug (a 500).
_STDLIB_REFUSES = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def encode(result: dict[str, Any]) -> bytes:
    """orjson writes the same bytes as the stdlib encoder below, many times faster (docs/benchmarks.md);
    what it refuses (a lone surrogate, an int beyond 64 bits) the stdlib encoder writes as before."""
    try:
        return orjson.dumps(result, option=_STDLIB_REFUSES)
    except TypeError:
        return _ENCODER.encode(result).encode("utf-8", "surrogatepass")


def encode_error(error: errors.SQSError, wire: WireError) -> tuple[dict[str, str], bytes]:
    headers = {"x-amzn-query-error": f"{wire.query_code};{wire.fault}"}
    # a message may quote the client's value; a lone surrogate in it would make the answer invalid UTF-8
    message = error.message.encode("utf-8", "replace").decode("utf-8")
    body = {"__type": wire.json_type, "message": message}
    return headers, encode(body)
