"""The HTTP adapter: HTTP in, Dispatcher, HTTP out; plus /metrics, /health, /ready and the test clock.

The SQS endpoint is a plain ASGI callable that builds the request from the ASGI scope:
it is every request's path, and starlette's Request/Response/routing would cost more than
the protocol work there (scripts/BENCHMARKS.md, "Measurements behind code choices").
Starlette serves the rest (the test clock), where convenience matters more.
"""

from __future__ import annotations

import json
import time
from bisect import bisect_left
from typing import Any, Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from queueserver import errors
from queueserver.auth import Authenticator
from queueserver.browser_guard import BrowserGuard
from queueserver.clock import ManualClock
from queueserver.config import ServerConfig
from queueserver.console import CONSOLE_PREFIX, create_console
from queueserver.logs import AccessLog
from queueserver.metrics import Metrics
from queueserver.protocol import Dispatcher, HttpRequest, HttpResponse
from queueserver.protocol.error_codes import wire_error
from queueserver.storage import QueueEngine
from queueserver.tallies import LATENCY_BOUNDS, RequestTally

CLOCK_PATH = "/_queueserver/clock"
OPERATIONS_PATHS = frozenset({"/metrics", "/health", "/ready"})  # GET only; no queue URL has one path segment
_SPECIAL_PATHS = OPERATIONS_PATHS | {CLOCK_PATH}


ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[dict[str, Any]]], Callable[[dict[str, Any]], Awaitable[None]]],
                   Awaitable[None]]


def _http_request(scope: dict[str, Any], body: bytes, default_host: str) -> HttpRequest:
    return HttpRequest(
        method=scope["method"],
        path=scope["path"],
        headers={name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]},
        body=body,
        scheme=scope.get("scheme", "http"),
        default_host=default_host,
        query_string=scope.get("query_string", b"").decode("latin-1"),
        client_ip=(scope.get("client") or ("", 0))[0],
    )


def _refuse_declared_oversize(headers: dict[str, str], limit: int) -> None:
    """RequestTooLarge for a Content-Length over LIMIT, before any of the body is read."""
    declared = headers.get("content-length", "")
    if declared and (not declared.isdigit() or len(declared) > 18 or int(declared) > limit):
        raise errors.RequestTooLarge(f"The request body must not be longer than {limit} bytes.")


async def _read_body(headers: dict[str, str], receive: Any, limit: int,
                     first: dict[str, Any] | None = None) -> bytes | None:
    """The request body, refused (RequestTooLarge) by its Content-Length before any of it is
    read, or as soon as a chunked body grows past LIMIT; None if the client disconnected.
    `first`: its first message, already received (the caller's fast path)."""
    if first is None:
        _refuse_declared_oversize(headers, limit)
    chunks = []
    size = 0
    while True:
        message = first or await receive()
        first = None
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise errors.RequestTooLarge(f"The request body must not be longer than {limit} bytes.")
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def _start_message(response: HttpResponse) -> dict[str, Any]:
    headers = [(b"content-length", str(len(response.body)).encode())]
    headers += [(name.encode("latin-1"), value.encode("latin-1")) for name, value in response.headers.items()]
    return {"type": "http.response.start", "status": response.status, "headers": headers}


async def _send(send: Any, response: HttpResponse) -> None:
    await send(_start_message(response))
    await send({"type": "http.response.body", "body": response.body})


def _json_response(status: int, document: dict[str, Any]) -> HttpResponse:
    return HttpResponse(status, {"content-type": "application/json", "cache-control": "no-store"},
                        json.dumps(document).encode())


def create_app(config: ServerConfig, engine: QueueEngine, authenticator: Authenticator | None = None) -> ASGIApp:
    dispatcher = Dispatcher(engine, config.region, config.account_id, authenticator)
    guard = BrowserGuard(config.allowed_origins, config.allowed_hosts)
    guards_hosts = bool(config.allowed_hosts)
    default_host = f"{config.host}:{config.port}"
    requests = RequestTally()
    latencies = requests.by_action
    metrics = Metrics(engine, requests, config.metrics_max_queues)
    access_log = AccessLog() if config.access_log else None
    max_body_bytes = config.max_body_bytes

    async def sqs(scope: dict[str, Any], receive: Any, send: Any) -> None:
        started = time.perf_counter()
        http_request = _http_request(scope, b"", default_host)
        headers = http_request.headers
        reason = cors = None
        if guards_hosts or "origin" in headers or "sec-fetch-site" in headers:  # else the guard has nothing to say
            reason = guard.refusal(headers)
            cors = guard.cors_headers(headers) if reason is None else None
        if reason is not None:
            response = dispatcher.refuse(http_request, errors.AccessDenied(reason))
        elif http_request.method == "OPTIONS" and cors and "access-control-request-method" in http_request.headers:
            response = HttpResponse(200, guard.preflight_headers(http_request.headers), b"")
        else:
            try:
                _refuse_declared_oversize(headers, max_body_bytes)
                message = await receive()
                body = message.get("body", b"")
                # A body in one message (nearly all) is taken here: _read_body's coroutine costs more.
                if message.get("more_body") or message["type"] != "http.request" or len(body) > max_body_bytes:
                    body = await _read_body(headers, receive, max_body_bytes, message)
            except errors.RequestTooLarge as error:
                response = dispatcher.refuse(http_request, error)
                response.headers["connection"] = "close"  # the rest of the body is not worth reading
            else:
                if body is None:  # the client went away
                    return
                http_request.body = body
                response = await dispatcher.handle(http_request)
                if cors:
                    response.headers.update(cors)
        # _send's two steps and _start_message inline: a coroutine and two frames less a request
        response_body = response.body
        start = [(b"content-length", str(len(response_body)).encode())]
        for name, value in response.headers.items():
            start.append((name.encode("latin-1"), value.encode("latin-1")))
        await send({"type": "http.response.start", "status": response.status, "headers": start})
        await send({"type": "http.response.body", "body": response_body})
        elapsed = time.perf_counter() - started
        latency = latencies.get((http_request.action, response.status))
        if latency is None:
            latency = requests.histogram(http_request.action, response.status)
        latency.counts[bisect_left(LATENCY_BOUNDS, elapsed)] += 1  # inline: a method call costs more than this
        latency.sum += elapsed
        if access_log is not None:
            access_log.request(http_request.action, http_request.params, response.status, elapsed)

    async def operations(path: str, headers: dict[str, str]) -> HttpResponse:
        """/health: the process answers. /ready: the database takes writes. /metrics: Prometheus."""
        if path == "/health":
            return _json_response(200, {"status": "ok"})
        if path == "/ready":
            problems = await engine.observe.unready()
            if problems:
                return _json_response(503, {"status": "unavailable", "problems": problems})
            return _json_response(200, {"status": "ready"})
        reason = guard.refusal(headers)  # queue names are not for any web page that asks
        if reason is not None:
            return HttpResponse(403, {"content-type": "text/plain; charset=utf-8"}, reason.encode())
        body, content_type = await metrics.exposition(headers.get("accept", ""))
        return HttpResponse(200, {"content-type": content_type}, body)

    async def clock(request: Request) -> Response:
        """Move the manual clock (only with --test-clock): POST {"advance_seconds": S}."""
        manual = engine.clock
        try:  # with credentials on, only a signed request may move the clock
            dispatcher.authenticate(_http_request(request.scope, await request.body(), default_host))
        except errors.SQSError as error:
            wire = wire_error(error)
            return JSONResponse({"code": wire.query_code, "message": error.message}, wire.status)
        if not isinstance(manual, ManualClock):
            return JSONResponse({"message": "the test clock is off; start the server with --test-clock"}, 404)
        if request.method == "POST":
            try:
                seconds = float(json.loads(await request.body() or b"{}").get("advance_seconds", 0))
            except (ValueError, TypeError, AttributeError):
                return JSONResponse({"message": 'expected {"advance_seconds": <number>}'}, 400)
            if seconds < 0:
                return JSONResponse({"message": "the clock does not go backwards"}, 400)
            manual.advance(round(seconds * 1000))
        return JSONResponse({"now_ms": manual.now_ms(), "timers": manual.pending()})

    extras = Starlette(routes=[Route(CLOCK_PATH, clock, methods=["GET", "POST"])])
    console = create_console(config, engine, guard, authenticator) if config.console_enabled else None

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if console is not None and scope["type"] == "http" and (path == CONSOLE_PREFIX
                                                                or path.startswith(CONSOLE_PREFIX + "/")):
            await console(scope, receive, send)
        elif scope["type"] == "http" and path not in _SPECIAL_PATHS:
            await sqs(scope, receive, send)
        elif scope["type"] == "http" and scope["path"] in OPERATIONS_PATHS:
            if scope["method"] != "GET":  # anything else there is an SQS request (and gets its error)
                await sqs(scope, receive, send)
                return
            headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}
            await _send(send, await operations(scope["path"], headers))
        elif scope["type"] == "http":  # the test clock: no web page may move it, and its body is small
            headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}
            try:
                body = None if guard.refusal(headers) else await _read_body(headers, receive, 1024)
            except errors.RequestTooLarge:
                body = None
            if body is None:
                await _send(send, HttpResponse(403, {"connection": "close"}, b"refused"))
                return

            async def replay() -> dict[str, Any]:
                return {"type": "http.request", "body": body, "more_body": False}

            await extras(scope, replay, send)
        else:
            await extras(scope, receive, send)

    return app
