"""The HTTP adapter: HTTP in, Dispatcher, HTTP out; plus the test-clock endpoint.

The SQS endpoint is a plain ASGI callable that builds the request from the ASGI scope:
it is every request's path, and starlette's Request/Response/routing cost ~22 µs a
request there (measured: 20.4k vs 35–37k req/s for a trivial endpoint on this uvicorn).
Starlette serves the rest (the test clock), where convenience matters more.
"""

from __future__ import annotations

import json
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
from queueserver.protocol import Dispatcher, HttpRequest, HttpResponse
from queueserver.protocol.error_codes import wire_error
from queueserver.storage import QueueEngine

CLOCK_PATH = "/_queueserver/clock"


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


async def _read_body(headers: dict[str, str], receive: Any, limit: int) -> bytes | None:
    """The request body, refused (RequestTooLarge) by its Content-Length before any of it is
    read, or as soon as a chunked body grows past LIMIT; None if the client disconnected."""
    declared = headers.get("content-length", "")
    if declared and (not declared.isdigit() or len(declared) > 18 or int(declared) > limit):
        raise errors.RequestTooLarge(f"The request body must not be longer than {limit} bytes.")
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise errors.RequestTooLarge(f"The request body must not be longer than {limit} bytes.")
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


async def _send(send: Any, response: HttpResponse) -> None:
    headers = [(b"content-length", str(len(response.body)).encode())]
    headers += [(name.encode("latin-1"), value.encode("latin-1")) for name, value in response.headers.items()]
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": response.body})


def create_app(config: ServerConfig, engine: QueueEngine, authenticator: Authenticator | None = None) -> ASGIApp:
    dispatcher = Dispatcher(engine, config.region, config.account_id, authenticator)
    guard = BrowserGuard(config.allowed_origins, config.allowed_hosts)
    default_host = f"{config.host}:{config.port}"

    async def sqs(scope: dict[str, Any], receive: Any, send: Any) -> None:
        http_request = _http_request(scope, b"", default_host)
        reason = guard.refusal(http_request.headers)
        if reason is not None:
            await _send(send, dispatcher.refuse(http_request, errors.AccessDenied(reason)))
            return
        cors = guard.cors_headers(http_request.headers)
        if http_request.method == "OPTIONS" and cors and "access-control-request-method" in http_request.headers:
            await _send(send, HttpResponse(200, guard.preflight_headers(http_request.headers), b""))
            return
        try:
            body = await _read_body(http_request.headers, receive, config.max_body_bytes)
        except errors.RequestTooLarge as error:
            response = dispatcher.refuse(http_request, error)
            response.headers["connection"] = "close"  # the rest of the body is not worth reading
            await _send(send, response)
            return
        if body is None:  # the client went away
            return
        http_request.body = body
        response = await dispatcher.handle(http_request)
        if cors:
            response.headers.update(cors)
        await _send(send, response)

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
        elif scope["type"] == "http" and path != CLOCK_PATH:
            await sqs(scope, receive, send)
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
