"""The starlette adapter: HTTP in, Dispatcher, HTTP out; plus the test-clock endpoint."""

from __future__ import annotations

import json

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from queueserver.clock import ManualClock
from queueserver.config import ServerConfig
from queueserver.protocol import Dispatcher, HttpRequest
from queueserver.storage import QueueEngine

CLOCK_PATH = "/_queueserver/clock"


def create_app(config: ServerConfig, engine: QueueEngine) -> Starlette:
    dispatcher = Dispatcher(engine, config.region, config.account_id)
    default_host = f"{config.host}:{config.port}"

    async def sqs(request: Request) -> Response:
        http_request = HttpRequest(
            method=request.method,
            path=request.url.path,
            headers={k.lower(): v for k, v in request.headers.items()},
            body=await request.body(),
            scheme=request.url.scheme,
            default_host=default_host,
            query_string=request.url.query,
        )
        response = await dispatcher.handle(http_request)
        return Response(response.body, status_code=response.status, headers=response.headers)

    async def clock(request: Request) -> Response:
        """Move the manual clock (only with --test-clock): POST {"advance_seconds": S}."""
        manual = engine.clock
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
        return JSONResponse({"now_ms": manual.now_ms()})

    return Starlette(routes=[
        Route(CLOCK_PATH, clock, methods=["GET", "POST"]),
        Route("/{path:path}", sqs, methods=["GET", "POST"]),
    ])
