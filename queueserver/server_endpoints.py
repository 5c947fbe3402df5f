"""The server's own endpoints: /health, /ready, /metrics and the test clock, each through its door.

Each passes the rule auth/door.py declares for it (`GET /metrics`, `GET /ready details`, the clock's GET
and POST) with the same principal a signed SQS request has: /metrics wants a key allowed
queueserver:GetMetrics; /ready answers ready or not to anyone, and its problems and replica only to
such a key (or with credentials off, or on the metrics listener, whose address is its protection);
the clock is read by any signed key and moved by an admin key only.
"""

from __future__ import annotations

import json
from typing import Any, Callable, MutableMapping

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from queueserver import errors
from queueserver.auth import Authenticator
from queueserver.browser_guard import BrowserGuard
from queueserver.client_text import json_document
from queueserver.clock import MAX_ADVANCE_SECONDS
from queueserver.metrics import Metrics
from queueserver.protocol import Dispatcher, HttpRequest, HttpResponse
from queueserver.protocol.error_codes import wire_error
from queueserver.replication import ReplicationReport
from queueserver.storage import QueueEngine

CLOCK_PATH = "/_queueserver/clock"


def headers_of(scope: MutableMapping[str, Any]) -> dict[str, str]:
    return {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}


def to_http_request(scope: MutableMapping[str, Any], headers: dict[str, str], body: bytes, default_host: str) -> HttpRequest:
    return HttpRequest(
        method=scope["method"],
        path=scope["path"],
        headers=headers,
        body=body,
        scheme=scope.get("scheme", "http"),
        default_host=default_host,
        query_string=scope.get("query_string", b"").decode("latin-1"),
        client_ip=(scope.get("client") or ("", 0))[0],
    )


def json_response(status: int, document: dict[str, Any]) -> HttpResponse:
    return HttpResponse(status, {"content-type": "application/json", "cache-control": "no-store"},
                        json.dumps(document).encode())


def plain(status: int, text: str) -> HttpResponse:
    return HttpResponse(status, {"content-type": "text/plain; charset=utf-8"}, text.encode())


def error_document(error: errors.SQSError) -> HttpResponse:
    """An SQS error on the server's own endpoints (metrics, clock): its code and message as JSON."""
    return json_response(wire_error(error).status, {"code": wire_error(error).query_code, "message": error.message})


class ServerEndpoints:
    def __init__(self, engine: QueueEngine, dispatcher: Dispatcher, authenticator: Authenticator | None,
                 guard: BrowserGuard, metrics: Metrics, replication: Callable[[], ReplicationReport] | None,
                 default_host: str) -> None:
        self._engine = engine
        self._dispatcher = dispatcher
        self._authenticator = authenticator
        self._guard = guard
        self._metrics = metrics
        self._replication = replication
        self._default_host = default_host

    def _admitted(self, scope: dict[str, Any], headers: dict[str, str], way: str, verify: bool) -> bool:
        """Whether the request passes the door's rule of a server endpoint (always with credentials off, and
        on the metrics listener, whose address is its protection)."""
        if not verify or self._authenticator is None:
            return True
        try:
            principal = self._dispatcher.authenticate(to_http_request(scope, headers, b"", self._default_host))
            assert principal is not None
            principal.admit_server(way)
        except errors.SQSError:
            return False
        return True

    async def operations(self, scope: dict[str, Any], headers: dict[str, str], verify: bool) -> HttpResponse:
        """/health: the process answers. /ready: the database takes writes. /metrics: Prometheus.

        `verify`: with credentials on, /metrics wants a key allowed queueserver:GetMetrics (not on the metrics
        listener, whose address is its protection).
        """
        path = scope["path"]
        if path == "/health":
            return json_response(200, {"status": "ok"})
        if path == "/ready":
            problems = await self._engine.observe.unready()
            if not self._admitted(scope, headers, "GET /ready details", verify):  # ready or not, nothing more
                return json_response(503 if problems else 200, {"status": "unavailable" if problems else "ready"})
            # Replication is reported, never a reason to refuse: a replica behind loses no request.
            shown = {} if self._replication is None else {"replication": self._replication().as_dict()}
            if problems:
                return json_response(503, {"status": "unavailable", "problems": problems, **shown})
            return json_response(200, {"status": "ready", **shown})
        reason = self._guard.refusal(headers)  # queue names are not for any web page that asks
        if reason is not None:
            return plain(403, reason)
        if verify and self._authenticator is not None:
            try:
                principal = self._dispatcher.authenticate(to_http_request(scope, headers, b"", self._default_host))
                assert principal is not None
                principal.admit_server("GET /metrics")
            except errors.SQSError as error:
                return error_document(error)
        body, content_type = await self._metrics.exposition(headers.get("accept", ""))
        return HttpResponse(200, {"content-type": content_type}, body)

    async def clock(self, request: Request) -> Response:
        """Move the manual clock (only with --test-clock): POST {"advance_seconds": S}; GET reads it."""
        manual = self._engine.test_clock
        body = await request.body()
        try:  # with credentials on, only a signed request may read the clock, and only an admin key move it
            principal = self._dispatcher.authenticate(to_http_request(request.scope, headers_of(request.scope), body,
                                                              self._default_host))
            if principal is not None:
                principal.admit_server(f"{request.method} {CLOCK_PATH}")
        except errors.SQSError as error:
            refused = error_document(error)
            return Response(refused.body, refused.status, refused.headers)
        if manual is None:
            return JSONResponse({"message": "the test clock is off; start the server with --test-clock"}, 404)
        if request.method == "POST":
            document = json_document(body or b"{}")
            seconds = document.get("advance_seconds", 0) if isinstance(document, dict) else None
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
                return JSONResponse({"message": 'expected {"advance_seconds": <a number of seconds>}'}, 400)
            if not 0 <= seconds <= MAX_ADVANCE_SECONDS:  # NaN fails both comparisons; no float() of a huge int
                return JSONResponse({"message": "advance_seconds must be a finite number of seconds from 0 to "
                                                f"{MAX_ADVANCE_SECONDS} (ten years): the clock does not go backwards"},
                                    400)
            await manual.advance(round(seconds * 1000))
        return JSONResponse({"now_ms": manual.now_ms(), "timers": manual.pending()})
