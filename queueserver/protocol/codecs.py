"""One codec per wire protocol: how a request names its action and parameters, and how answers look.

The dispatcher runs the same steps for every protocol (find the action, check it, decode, run,
render) and asks the codec only what differs: AWS JSON 1.0, Query answered in XML, and Query
answered as JSON (a Query client that sent `Accept: application/json`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from queueserver import errors
from queueserver.protocol import json_wire, query_json, query_wire
from queueserver.protocol.error_codes import wire_error


@dataclass(slots=True)
class HttpResponse:
    status: int
    headers: dict[str, str]
    body: bytes


class JsonCodec:
    """AWS JSON 1.0: the action in `X-Amz-Target`, the parameters a JSON body."""

    missing_action = "Missing X-Amz-Target header naming the action."
    limits_queue_url_actions = False  # a queue URL takes any JSON action, as AWS's does

    @staticmethod
    def action(headers: dict[str, str], query_string: str, body: bytes) -> tuple[str, Any]:
        return headers.get("x-amz-target", "").partition(".")[2], body

    @staticmethod
    def params(read: Any, action: str) -> tuple[dict[str, Any], str | None]:
        """The parameters, and the X-Amz-Credential of a presigned request (JSON has none)."""
        return json_wire.decode(read), None

    @staticmethod
    def render(request_id: str, action: str, result: dict[str, Any]) -> HttpResponse:
        return HttpResponse(200, {"content-type": json_wire.CONTENT_TYPE, "x-amzn-requestid": request_id},
                            json_wire.encode(result))

    @staticmethod
    def render_error(request_id: str, error: errors.SQSError) -> HttpResponse:
        wire = wire_error(error)
        extra, body = json_wire.encode_error(error, wire)
        return HttpResponse(wire.status, {"content-type": json_wire.CONTENT_TYPE, "x-amzn-requestid": request_id,
                                          **extra}, body)


class QueryCodec:
    """Query: `Action=...` and its parameters in a form body or the query string; answered in XML."""

    missing_action = "The request must contain the parameter Action."
    limits_queue_url_actions = True  # a queue URL answers only the actions that act on one queue
    content_type = query_wire.CONTENT_TYPE
    encode = staticmethod(query_wire.encode)
    encode_error = staticmethod(query_wire.encode_error)

    @staticmethod
    def action(headers: dict[str, str], query_string: str, body: bytes) -> tuple[str, Any]:
        fields = query_wire.request_fields(query_string, body, headers.get("content-type", ""))
        return fields.get("Action", ""), fields

    @staticmethod
    def params(read: Any, action: str) -> tuple[dict[str, Any], str | None]:
        return query_wire.decode(read, action), read.get("X-Amz-Credential")

    def render(self, request_id: str, action: str, result: dict[str, Any]) -> HttpResponse:
        return HttpResponse(200, {"content-type": self.content_type, "x-amzn-requestid": request_id},
                            self.encode(action, result, request_id))

    def render_error(self, request_id: str, error: errors.SQSError) -> HttpResponse:
        wire = wire_error(error)
        extra, body = self.encode_error(error, wire, request_id)
        return HttpResponse(wire.status, {"content-type": self.content_type, "x-amzn-requestid": request_id,
                                          **extra}, body)


class QueryAsJsonCodec(QueryCodec):
    """Query read the same way, the response document rendered as JSON."""

    content_type = query_json.CONTENT_TYPE
    encode = staticmethod(query_json.encode)
    encode_error = staticmethod(query_json.encode_error)

    def render_error(self, request_id: str, error: errors.SQSError) -> HttpResponse:
        if isinstance(error, errors.UnknownOperation):  # SQS answers a bare GET on a queue URL in XML, whatever
            return QUERY.render_error(request_id, error)  # the Accept header says
        return super().render_error(request_id, error)


JSON = JsonCodec()
QUERY = QueryCodec()
QUERY_AS_JSON = QueryAsJsonCodec()
Codec = JsonCodec | QueryCodec


def codec_for(headers: dict[str, str]) -> Codec:
    """JSON by its target or content type; otherwise Query, as JSON when the client accepts only that."""
    if (headers.get("x-amz-target", "").startswith("AmazonSQS.")
            or headers.get("content-type", "").startswith("application/x-amz-json")):
        return JSON
    return QUERY_AS_JSON if "application/json" in headers.get("accept", "") else QUERY
